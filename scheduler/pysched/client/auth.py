"""Cluster credentials: one place that decides how every client of the process logs in.

Order, as kube-scheduler: an explicit kubeconfig (``--kubeconfig`` or
``clientConnection.kubeconfig``); else the in-cluster ServiceAccount (token re-read from its file,
so bound-token rotation works); else ``$KUBECONFIG`` / ``~/.kube/config``. Kubeconfig files are
read with the official ``kubernetes`` package's loader whenever they use more than a server, a CA,
a client certificate and key, or a token (exec plugins, auth providers, proxies, impersonation);
the plain ones, which are most of them, are read here: importing ``kubernetes`` (all its generated
API models) costs 0.3 s at every start, a fifth of the time to the first bind in the benchmark.
The same ``Credentials`` feed our HTTP client and kopf's login handler, so the two never
authenticate differently.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class CredentialsError(RuntimeError):
    pass


@dataclass
class Credentials:
    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    source: str = ""
    _refresh: Callable[[], str | None] | None = field(default=None, repr=False)
    _token_read: float = 0.0

    def bearer(self) -> str | None:
        """Current token; re-read from file (in-cluster) or refreshed (exec plugins) each minute."""
        now = time.monotonic()
        if self.token_file and (self.token is None or now - self._token_read > 60):
            try:
                self.token = Path(self.token_file).read_text().strip()
                self._token_read = now
            except OSError as exc:
                raise CredentialsError(f"reading token {self.token_file}: {exc}") from None
        elif self._refresh is not None and (self.token is None or now - self._token_read > 60):
            self.token = self._refresh()
            self._token_read = now
        return self.token

    def invalidate(self) -> None:
        """Force a token re-read (after a 401)."""
        self._token_read = 0.0
        if self.token_file or self._refresh is not None:
            self.token = None

    def ssl_context(self) -> ssl.SSLContext | Literal[False]:
        if not self.server.startswith("https"):
            return False
        ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else ssl.create_default_context()
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SA_DIR / "token").exists()


def load_in_cluster() -> Credentials:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise CredentialsError("not running in a cluster (KUBERNETES_SERVICE_HOST is unset)")
    if ":" in host:
        host = f"[{host}]"
    ca = SA_DIR / "ca.crt"
    return Credentials(server=f"https://{host}:{port}", ca_file=str(ca) if ca.exists() else None,
                       token_file=str(SA_DIR / "token"), source="in-cluster")


# What a kubeconfig cluster / user entry may hold for ``_plain_kubeconfig`` to read it itself.
_PLAIN_CLUSTER = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify",
                  "tls-server-name", "extensions"}
_PLAIN_USER = {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
               "tokenFile", "extensions"}
_data_dir: str | None = None


def _data_file(name: str, b64: str, where: str) -> str:
    """Embedded certificate or key data, written to a private file of its own (ssl loads files)."""
    global _data_dir
    try:
        data = base64.b64decode(b64, validate=True)
    except (ValueError, TypeError) as exc:
        raise CredentialsError(f"{where}: not valid base64 ({exc})") from None
    if _data_dir is None:
        _data_dir = tempfile.mkdtemp(prefix="pysched-kubeconfig-")   # mode 0700
        atexit.register(shutil.rmtree, _data_dir, True)
    fd, path = tempfile.mkstemp(prefix=name, dir=_data_dir)           # mode 0600, never reused
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _named(entries, name: str, what: str, path: Path) -> dict:
    for e in entries or ():
        if isinstance(e, dict) and e.get("name") == name:
            return e.get(what) or {}
    raise CredentialsError(f"kubeconfig {path}: no {what} named {name!r}")


def _plain_kubeconfig(p: Path, context: str | None) -> Credentials | None:
    """Credentials from a kubeconfig that only names a server, a CA, a client certificate and key
    or a token; None when it uses anything else (the ``kubernetes`` loader reads those)."""
    from pysched.util.yamlfile import read_yaml

    try:
        doc = read_yaml(p)
    except Exception:  # noqa: BLE001 - let the full loader report what is wrong with the file
        return None
    if not isinstance(doc, dict):
        return None
    name = context or doc.get("current-context")
    if not name:
        return None
    ctx = _named(doc.get("contexts"), name, "context", p)
    if set(ctx) - {"cluster", "user", "namespace", "extensions"}:
        return None
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "cluster", p)
    user = _named(doc.get("users"), ctx.get("user", ""), "user", p) if ctx.get("user") else {}
    if set(cluster) - _PLAIN_CLUSTER or set(user) - _PLAIN_USER or not cluster.get("server"):
        return None
    base = p.parent

    def file(field: str, entry: dict, data_name: str, where: str) -> str | None:
        if entry.get(f"{field}-data"):
            return _data_file(data_name, entry[f"{field}-data"], f"kubeconfig {p}: {where}.{field}-data")
        if entry.get(field):
            path = base / os.path.expanduser(entry[field])
            if not path.is_file():
                raise CredentialsError(f"kubeconfig {p}: {where}.{field}: file {path} does not exist")
            return str(path)
        return None

    token_file = str(base / user["tokenFile"]) if user.get("tokenFile") and not user.get("token") else None
    return Credentials(server=str(cluster["server"]).rstrip("/"),
                       ca_file=file("certificate-authority", cluster, "ca-", "cluster"),
                       cert_file=file("client-certificate", user, "client-crt-", "user"),
                       key_file=file("client-key", user, "client-key-", "user"),
                       token=user.get("token") or None, token_file=token_file,
                       insecure=bool(cluster.get("insecure-skip-tls-verify")),
                       tls_server_name=cluster.get("tls-server-name"), source=str(p))


def load_kubeconfig(path: str | os.PathLike, context: str | None = None) -> Credentials:
    p = Path(path)
    if not p.exists():
        raise CredentialsError(f"kubeconfig {path} does not exist")
    plain = _plain_kubeconfig(p, context)
    if plain is not None:
        return plain

    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    cfg = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(config_file=str(p), context=context, client_configuration=cfg,
                                    persist_config=False)
    except Exception as exc:  # noqa: BLE001 - the loader raises many types; name the file
        raise CredentialsError(f"kubeconfig {path}: {exc}") from None
    token = _bearer_from(cfg)
    creds = Credentials(server=cfg.host.rstrip("/"), ca_file=cfg.ssl_ca_cert, cert_file=cfg.cert_file,
                        key_file=cfg.key_file, token=token, insecure=not cfg.verify_ssl,
                        tls_server_name=getattr(cfg, "tls_server_name", None), source=str(p))
    if cfg.refresh_api_key_hook is not None:
        def refresh(cfg=cfg):
            cfg.refresh_api_key_hook(cfg)
            return _bearer_from(cfg)
        creds._refresh = refresh
        creds._token_read = time.monotonic()
    return creds


def _bearer_from(cfg) -> str | None:
    keys = cfg.api_key or {}
    auth = keys.get("authorization") or keys.get("BearerToken")
    if not auth:
        return None
    return auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth


def load(kubeconfig: str | None = None) -> Credentials:
    if kubeconfig:
        return load_kubeconfig(kubeconfig)
    if in_cluster_available():
        return load_in_cluster()
    env = os.environ.get("KUBECONFIG")
    if env:
        return load_kubeconfig(env.split(os.pathsep)[0])
    home = Path.home() / ".kube" / "config"
    if home.exists():
        return load_kubeconfig(home)
    raise CredentialsError("no credentials: pass --kubeconfig, or run in a cluster with a ServiceAccount")
