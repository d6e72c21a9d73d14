"""A fault-injecting HTTPS proxy in front of a test kube-apiserver (loopback only).

Some API failures cannot be produced on demand with the real components: kube-apiserver answers
``409 Operation cannot be fulfilled on pods/binding "p": rpc error: code = Unavailable ...`` only
while etcd fails under a write, which a kill -9 hits a handful of times in a thousand binds, at
random. ``FaultProxy`` forwards every request to the real API server (watches stream through
unchanged) and lets a test decide per request to

* ``REFUSE`` - answer with a canned error without forwarding (the write never happened), or
* ``LIE`` - forward it, then answer with the canned error whatever the API server said (the write
  happened; the client is told it did not: what a timeout after a successful write looks like), or
* ``DELAY`` - hold it for the seconds given in place of the canned answer, then forward it (a
  write that reaches the API server late: a slow connection, a request queued behind others).

It serves TLS with a certificate from the control plane's CA, so a client trusts it exactly as it
trusts the API server; only the kubeconfig's server address changes.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import aiohttp
from aiohttp import web

from pysched_dev.devcluster import ControlPlane, free_port, write_kubeconfig

PASS, REFUSE, LIE, DELAY = "pass", "refuse", "lie", "delay"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
              "proxy-authenticate", "proxy-authorization", "te", "trailer", "host"}


def etcd_unavailable(name: str) -> tuple[int, dict]:
    """kube-apiserver's answer to a binding it could not write because etcd went away."""
    return 409, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": f'Operation cannot be fulfilled on pods/binding "{name}": rpc error: '
                            "code = Unavailable desc = error reading from server: EOF",
                 "reason": "Conflict", "details": {"name": name, "kind": "pods/binding"}, "code": 409}


class FaultProxy:
    """``decide(method, path) -> (action, (status, body) | seconds | None)``; runs in a thread of its own."""

    def __init__(self, cp: ControlPlane,
                 decide: Callable[[str, str], tuple[str, tuple[int, dict] | float | None]]):
        self.cp = cp
        self.decide = decide
        self.port = free_port()
        self.requests: list[tuple[str, str, str]] = []   # (method, path, action) as decided
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, name: str = "via-proxy") -> Path:
        return write_kubeconfig(self.cp.workdir / f"{name}.kubeconfig", server=self.url, ca_file=self.cp.ca_file,
                                token=self.cp.admin_token)

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(15)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        crt, key = self.cp.issue_cert("fault-proxy")
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ctx.load_cert_chain(str(crt), str(key))
        upstream_ctx = ssl.create_default_context(cafile=str(self.cp.ca_file))
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=upstream_ctx, limit=0),
                                              auto_decompress=False, skip_auto_headers=("Accept-Encoding",))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=server_ctx).start()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        action, canned = self.decide(request.method, request.path)
        self.requests.append((request.method, request.path, action))
        if action == REFUSE:
            return _canned(canned)
        body = await request.read()
        if action == DELAY:
            await asyncio.sleep(float(canned or 0))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        url = f"{self.cp.url}{request.rel_url}"
        async with self._session.request(request.method, url, data=body or None, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as up:
            if action == LIE:
                await up.read()
                return _canned(canned)
            resp = web.StreamResponse(status=up.status)
            for k, v in up.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    resp.headers[k] = v
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp


def _canned(canned) -> web.Response:
    status, body = canned or (500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "message": "injected", "code": 500})
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")
