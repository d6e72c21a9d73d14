"""The secure port (10259, as kube-scheduler): /healthz, /livez, /readyz, /metrics, /configz.

HTTPS with a certificate from ``--tls-cert-file``/``--tls-private-key-file`` or, as
kube-scheduler does, a self-signed one written to ``--cert-dir`` on first start
(``pysched.crt``/``pysched.key``; the directory must be writable, e.g. an emptyDir).

* ``/livez``, ``/healthz``: the event loop answers, and a leader's lease was renewed within
  ``leaseDuration`` + 20 s (client-go's leader-election health adaptor).
* ``/readyz``: the Node and Pod informers have listed (the cache reflects the cluster) and the
  process is not shutting down; 503 with the failing check otherwise.
* ``/metrics``: the Prometheus registry; ``/configz``: the effective configuration.
* ``/debug/explain?pod=ns/name``: the last cycle's per-plugin trace for a pod (see ``explain``);
  ``?podgroup=ns/name``: a pod group's last attempt, placement by placement;
  202 with where the pod waits while a pod that just asked is being re-evaluated. Its answers
  (200, 202, 404) say who answered (``about``): ``Pysched-Profiles`` (the schedulerNames served),
  and with leader election ``Pysched-Identity``, ``Pysched-Leading``, ``Pysched-Leader`` (the
  Lease's holder) and ``Pysched-Lease``, so ``pysched explain`` can tell a replica that does not
  schedule from a pod with no trace.

Every request goes through delegated authentication and authorization (``delegated_auth``), as
kube-scheduler's: only ``--authorization-always-allow-paths`` (the health paths) are open to
anonymous callers. With a client CA known, the TLS handshake requests (not requires) a client
certificate. ``--insecure-disable-auth`` (lab only, warned at start-up) serves everyone.

Hostile clients cannot exhaust its memory or flood its log (``connguard``): at most 64
connections served (16 per client address; past that a connection waits unread for a slot, and
an idle or slow one - never one with a complete request - is closed to make room), 64 header
fields of 8 KiB each, 10 s to send a request head; malformed requests are logged once per client
per minute, no traceback.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import os
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from pysched.server import DEFAULT_CERT_DIR, SELF_SIGNED_NAME, listener
from pysched.server.connguard import ConnectionGuard
from pysched.server.delegated_auth import DelegatedAuth
from pysched.util.logs import kv

# How the explain callback is asked for a pod group (schedule_one_podgroup.GROUP_PREFIX).
GROUP_PREFIX = "podgroup:"
log = logging.getLogger("pysched.server.secure")
# Memory under hostile clients (``connguard``): at most this many connections, each holding at
# most 64 header fields of 8 KiB, each closed if it has not sent a request head within 10 s.
MAX_CONNECTIONS = 64
HEADER_TIMEOUT = 10.0


def self_signed(cert_dir: str, name: str = SELF_SIGNED_NAME) -> tuple[str, str]:
    """Create (once) a self-signed serving certificate in ``cert_dir``; return (cert, key) paths."""
    d = Path(cert_dir)
    cert, key = d / f"{name}.crt", d / f"{name}.key"
    if cert.exists() and key.exists():
        return str(cert), str(key)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    now = datetime.datetime.now(datetime.UTC)
    k = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(now.timestamp())}")])
    sans = [x509.DNSName("localhost"), x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    c = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(k.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=365))
         .add_extension(x509.SubjectAlternativeName(sans), critical=False)
         .sign(k, hashes.SHA256()))
    key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    os.chmod(key, 0o600)
    cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
    log.info("generated self-signed serving certificate", extra=kv(cert=str(cert)))
    return str(cert), str(key)


class SecureServer:
    def __init__(self, *, address: str, port: int, cert_file: str | None, key_file: str | None,
                 cert_dir: str | None, ready: Callable[[], tuple[bool, str]],
                 healthy: Callable[[], tuple[bool, str]], configz: Callable[[], dict],
                 explain: Callable[[str], dict | None] | None = None, auth: DelegatedAuth | None = None,
                 sockets: list[socket.socket] | None = None, about: Callable[[], dict[str, str]] | None = None):
        """``sockets``: listening sockets already bound (``server.listener``); without them
        ``address``:``port`` is bound when the server starts. ``about``: the headers that say
        which replica answered /debug/explain."""
        self.address = address
        self.sockets = sockets
        self.port = port
        self.cert_file, self.key_file, self.cert_dir = cert_file, key_file, cert_dir
        self.ready = ready
        self.healthy = healthy
        self.configz = configz
        self.explain = explain
        self.about = about
        self.auth = auth
        self._runner: web.AppRunner | None = None
        self.bound_port = 0
        self.guard = ConnectionGuard("secure", max_connections=MAX_CONNECTIONS, queue_timeout=HEADER_TIMEOUT,
                                     logger=log)

    def _ssl(self) -> ssl.SSLContext:
        cert, key = self.cert_file, self.key_file
        if not (cert and key):
            cert, key = self_signed(self.cert_dir or DEFAULT_CERT_DIR)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        if self.auth is not None and self.auth.client_ca_pem:
            ctx.load_verify_locations(cadata=self.auth.client_ca_pem)
            ctx.verify_mode = ssl.CERT_OPTIONAL   # request a client certificate, do not require one
        return ctx

    async def start(self) -> None:
        app = web.Application(middlewares=[self.guard.middleware]
                              + ([self.auth.middleware()] if self.auth is not None else []))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/configz", self._configz)
        app.router.add_get("/debug/explain", self._explain)
        # The keep-alive timer doubles as the header timeout: a connection that has not sent a
        # complete request head this long after opening (or after its last answer) is closed.
        self._runner = web.AppRunner(app, access_log=None, keepalive_timeout=HEADER_TIMEOUT,
                                     **self.guard.runner_kwargs())
        await self._runner.setup()
        self.guard.install(self._runner)
        ctx = self._ssl()
        socks = self.sockets or listener.bind(self.address, self.port)
        for sock in socks:
            await web.SockSite(self._runner, sock, ssl_context=ctx).start()
        self.bound_port = socks[0].getsockname()[1]
        log.info("serving securely", extra=kv(address=self.address, port=self.bound_port))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request):
        ok, why = self.healthy()
        return web.Response(status=200 if ok else 503, text="ok" if ok else f"[-]{why} failed\nhealthz check failed")

    async def _readyz(self, request):
        ok, why = self.ready()
        return web.Response(status=200 if ok else 503, text="ok" if ok else f"[-]{why} failed\nreadyz check failed")

    async def _metrics(self, request):
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _configz(self, request):
        return web.Response(text=json.dumps(self.configz(), indent=2), content_type="application/json")

    async def _explain(self, request):
        headers = self.about() if self.about is not None else {}
        group = request.query.get("podgroup", "")
        if group:
            if "/" not in group:
                return web.Response(status=400, text="query parameter podgroup=<namespace>/<name> needs a namespace")
            got = self.explain(GROUP_PREFIX + group) if self.explain is not None else None
            if got is None:
                return web.Response(status=404, text=f"no scheduling attempt recorded for pod group {group}",
                                    headers=headers)
            return web.Response(text=json.dumps(got, indent=2), content_type="application/json", headers=headers)
        key = request.query.get("pod", "")
        if "/" not in key:
            return web.Response(status=400, text="query parameter pod=<namespace>/<name> is required")
        got = self.explain(key) if self.explain is not None else None
        if got is None:
            return web.Response(status=404, text=f"no scheduling cycle recorded for pod {key}: annotate the pod "
                                                  f"pysched.io/explain=true or run with --explain-all",
                                headers=headers)
        # 202: the pod asked for an explanation and its re-evaluation has not ended yet.
        return web.Response(status=202 if got.get("reevaluating") else 200, text=json.dumps(got, indent=2),
                            content_type="application/json", headers=headers)
