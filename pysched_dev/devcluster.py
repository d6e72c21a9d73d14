"""A throw-away local control plane: a real etcd and kube-apiserver on loopback.

Used by the test fixtures, ``make demo`` and the benchmark. Nothing here is mocked: the binaries
are the upstream ones, obtained by ``hack/control-plane.sh`` (``KUBEBUILDER_ASSETS`` when set,
otherwise built once from the Go module proxy into a cache outside the repository).

Every server gets random free loopback ports and a private temporary directory; ``stop()`` kills
the processes and removes the directory. The API server runs with RBAC authorization, a static
admin token (group ``system:masters``) and a service-account signing key, so tests can also act
as a ServiceAccount with a real bound token.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import ipaddress
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTROL_PLANE_SCRIPT = REPO_ROOT / "hack" / "control-plane.sh"
SCHEDULER_PLUGINS_SCRIPT = REPO_ROOT / "hack" / "scheduler-plugins.sh"


class ControlPlaneError(RuntimeError):
    """The control plane could not be obtained or started."""


class PortTaken(ControlPlaneError):
    """A server could not bind the port ``free_port()`` picked: another process took it first."""


#: How many times a server is started on fresh ports when the one picked was taken meanwhile.
PORT_ATTEMPTS = 5


def scheduler_plugins_binary() -> Path:
    """scheduler-plugins' kube-scheduler (``PYSCHED_SCHEDULER_PLUGINS``, else built once by
    ``hack/scheduler-plugins.sh``): the oracle for Coscheduling."""
    return hack_output("PYSCHED_SCHEDULER_PLUGINS", SCHEDULER_PLUGINS_SCRIPT)


def scheduler_plugins_controller_binary() -> Path:
    """scheduler-plugins' status controller, ``cmd/controller`` (``PYSCHED_SCHEDULER_PLUGINS_CONTROLLER``,
    else built once by ``hack/scheduler-plugins.sh controller``): the oracle for PodGroup and
    ElasticQuota status."""
    return hack_output("PYSCHED_SCHEDULER_PLUGINS_CONTROLLER", SCHEDULER_PLUGINS_SCRIPT, "controller")


def binaries_dir() -> Path:
    """Directory holding etcd, kube-apiserver and kube-scheduler (built on first use)."""
    return hack_output("PYSCHED_BIN_DIR", CONTROL_PLANE_SCRIPT)


@functools.lru_cache(maxsize=4)
def binaries_version(bin_dir: Path | None = None) -> tuple[int, int]:
    """The Kubernetes release (major, minor) of the control-plane binaries (``kube-apiserver --version``)."""
    out = subprocess.run([str((bin_dir or binaries_dir()) / "kube-apiserver"), "--version"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    m = re.search(r"v(\d+)\.(\d+)", out)
    if not m:
        raise ControlPlaneError(f"kube-apiserver --version: no version in {out!r}")
    return int(m.group(1)), int(m.group(2))


def hack_output(env: str, script: Path, *args: str) -> Path:
    """The path ``$env`` names, else the last line ``script [args]`` prints (a ``hack/*.sh`` that builds
    or finds a binary), remembered in ``$env`` for the rest of the process and its children."""
    explicit = os.environ.get(env)
    if explicit:
        return Path(explicit)
    if not script.exists():
        raise ControlPlaneError(f"{script} not found; set {env}")
    proc = subprocess.run([str(script), *args], stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ControlPlaneError(f"{script} failed with exit code {proc.returncode}")
    path = Path(proc.stdout.strip().splitlines()[-1])
    os.environ[env] = str(path)
    return path


def free_port() -> int:
    """A loopback port nothing listens on now, chosen below the kernel's ephemeral range.

    A port from ``bind(0)`` comes out of the ephemeral range, which every outgoing connection on the
    machine also draws from: between our check and the server's bind, a client elsewhere (the test
    run makes thousands of connections) can be given the same port. Below that range only another
    explicit bind can take it, so the window is left to ``on_fresh_ports`` alone.
    """
    low = _ephemeral_ports()[0]
    if low - 1 > _LOWEST_PORT:
        first, last = _port_slice(_LOWEST_PORT, low - 1)
        for _ in range(200):
            port = random.randint(first, last)
            if _bindable(port):
                return port
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Ports below this are left to well-known and registered services.
_LOWEST_PORT = 20000
#: ``"i/n"``: this process (and what it starts) takes ports only from the i-th of n equal slices of
#: the range, so n parallel test workers never pick the same port (tests/e2e/conftest.py sets it).
PORT_SLICE_ENV = "PYSCHED_PORT_SLICE"


def _port_slice(first: int, last: int) -> tuple[int, int]:
    spec = os.environ.get(PORT_SLICE_ENV, "")
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        return first, last
    if not 0 <= i < n:
        return first, last
    width = (last - first + 1) // n
    return first + i * width, first + (i + 1) * width - 1


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bindable(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _write_pki(directory: Path) -> dict[str, Path]:
    """CA, API-server serving certificate (127.0.0.1/localhost) and service-account key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pysched-test-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=7))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv_cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
                .issuer_name(ca_name).public_key(srv_key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=7))
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.DNSName("kubernetes"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    paths = {
        "ca.crt": ca_cert.public_bytes(serialization.Encoding.PEM),
        "ca.key": pem_key(ca_key),
        "apiserver.crt": srv_cert.public_bytes(serialization.Encoding.PEM),
        "apiserver.key": pem_key(srv_key),
        "sa.key": pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo),
    }
    out = {}
    for name, data in paths.items():
        p = directory / name
        p.write_bytes(data)
        p.chmod(0o600)
        out[name] = p
    return out


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str | None = None, user: str = "admin",
                     cert: tuple[Path, Path] | None = None) -> Path:
    """A kubeconfig authenticating with a bearer ``token`` or a client certificate ``cert=(crt, key)``."""
    creds = (f"    token: {token}\n" if token else
             f"    client-certificate: {cert[0]}\n    client-key: {cert[1]}\n" if cert else "")
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: local\n  cluster:\n    server: {server}\n"
        f"    certificate-authority: {ca_file}\n"
        f"users:\n- name: {user}\n  user:\n{creds}"
        f"contexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\n"
        "current-context: local\n")
    path.chmod(0o600)
    return path


@dataclass
class ControlPlane:
    """etcd + kube-apiserver on random loopback ports. Use as a context manager or call start/stop."""

    extra_apiserver_args: list[str] = field(default_factory=list)
    # Extra static-token users (all in system:masters), e.g. one per replica so the audit log
    # tells whose request it was; their kubeconfigs come from ``kubeconfig_for_user``.
    extra_users: list[str] = field(default_factory=list)
    # An audit policy (YAML text); the API server then writes a JSON audit log (``audit_events``).
    audit_policy: str | None = None
    # Admission plugins turned off. The default is scheduler_perf's bare control plane (no
    # controller-manager creates ServiceAccounts, and bare Node objects must not get the not-ready
    # taint); the living cluster (``livecluster``) turns every default plugin back on.
    disabled_admission_plugins: tuple[str, ...] = ("ServiceAccount", "TaintNodesByCondition")
    keep_dir: bool = False
    workdir: Path | None = None
    etcd_proc: subprocess.Popen | None = None
    apiserver_proc: subprocess.Popen | None = None
    apiserver_port: int = 0
    admin_token: str = "pysched-admin-token"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> ControlPlane:
        self.bin = binaries_dir()
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.workdir = Path(tempfile.mkdtemp(prefix="pysched-cp-", dir=base))
        self.pki = _write_pki(self.workdir)
        (self.workdir / "tokens.csv").write_text(
            f'{self.admin_token},admin,admin-uid,"system:masters"\n'
            + "".join(f'{self.user_token(u)},{u},{u}-uid,"system:masters"\n' for u in self.extra_users))
        self.kubeconfig = write_kubeconfig(self.workdir / "admin.kubeconfig", server="https://127.0.0.1:0",
                                           ca_file=self.pki["ca.crt"], token=self.admin_token)
        try:
            on_fresh_ports(self._start_etcd, timeout)
            on_fresh_ports(self._start_apiserver, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in (self.apiserver_proc, self.etcd_proc):
            terminate_process(proc)
        self.apiserver_proc = self.etcd_proc = None
        if self.workdir and not self.keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- accessors ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def ca_file(self) -> Path:
        return self.pki["ca.crt"]

    @staticmethod
    def user_token(user: str) -> str:
        return f"pysched-{user}-token"

    def kubeconfig_for_user(self, user: str) -> Path:
        """A kubeconfig for one of ``extra_users``."""
        return self.kubeconfig_for_token(self.user_token(user), user)

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self) -> list[dict]:
        """The audit log written so far (one JSON event per line)."""
        import json

        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def kubeconfig_for_token(self, token: str, name: str) -> Path:
        return write_kubeconfig(self.workdir / f"{name}.kubeconfig", server=self.url,
                                ca_file=self.ca_file, token=token, user=name)

    def issue_cert(self, name: str, *, client: bool = False, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A certificate signed by this control plane's test CA (serving for 127.0.0.1, or client).

        The subject is CN=name plus one O per group: how Kubernetes names a certificate's user and groups.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca_cert = x509.load_pem_x509_certificate(self.pki["ca.crt"].read_bytes())
        ca_key = serialization.load_pem_private_key(self.pki["ca.key"].read_bytes(), None)
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                                     + [x509.NameAttribute(NameOID.COMMON_NAME, name)]))
             .issuer_name(ca_cert.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2)))
        if client:
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        else:
            b = (b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                              x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                 critical=False)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        cert = b.sign(ca_key, hashes.SHA256())
        cp, kp = self.workdir / f"{name}.crt", self.workdir / f"{name}.key"
        cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        kp.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
        kp.chmod(0o600)
        return cp, kp

    # -- faults ------------------------------------------------------------------------------

    def stop_apiserver(self) -> None:
        terminate_process(self.apiserver_proc)
        self.apiserver_proc = None

    def restart_apiserver(self, timeout: float = 120.0, downtime: float = 0.0) -> None:
        """Stop kube-apiserver and start it again on the same port (etcd keeps the data)."""
        self.stop_apiserver()
        if downtime:
            time.sleep(downtime)
        self._start_apiserver(timeout, port=self.apiserver_port)

    def kill_etcd(self) -> None:
        """SIGKILL etcd (a crash: no graceful leader hand-off, no flush); its data stays on disk."""
        if self.etcd_proc is not None and self.etcd_proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.etcd_proc.pid, signal.SIGKILL)
            self.etcd_proc.wait()
        self.etcd_proc = None

    def restart_etcd(self, timeout: float = 120.0) -> None:
        """Start etcd again on its old ports with its old data (after ``kill_etcd``)."""
        self._start_etcd(timeout, ports=self._etcd_ports, keep_data=True)

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision, expiring every older resourceVersion (410 Gone)."""
        import base64
        import json

        def post(path: str, body: dict) -> dict:
            req = urllib.request.Request(f"{self.etcd_url}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())

        rev = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    # -- internals ---------------------------------------------------------------------------

    def _log(self, name: str):
        return open(self.workdir / f"{name}.log", "ab")

    def _log_size(self, name: str) -> int:
        path = self.workdir / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    def _start_etcd(self, timeout: float, ports: tuple[int, int] | None = None, keep_data: bool = False) -> None:
        if not keep_data:
            shutil.rmtree(self.workdir / "etcd", ignore_errors=True)  # a failed attempt's data
        client, peer = ports or (free_port(), free_port())
        self._etcd_ports = (client, peer)
        self.etcd_url = f"http://127.0.0.1:{client}"
        args = [
            str(self.bin / "etcd"), "--name=default", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--log-level=warn", "--quota-backend-bytes=8589934592", "--unsafe-no-fsync",
            "--listen-metrics-urls=", "--auto-compaction-retention=5m",
        ]
        log_start = self._log_size("etcd")
        self.etcd_proc = subprocess.Popen(args, stdout=self._log("etcd"), stderr=subprocess.STDOUT,
                                          start_new_session=True)
        wait_http(f"{self.etcd_url}/health", timeout, self.etcd_proc, "etcd", self.workdir / "etcd.log",
                   log_start=log_start)

    def _start_apiserver(self, timeout: float, port: int | None = None) -> None:
        """Start kube-apiserver on ``port``, or on a fresh one (``on_fresh_ports`` retries those)."""
        p = self.pki
        self.apiserver_port = port or free_port()
        args = [
            str(self.bin / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={p['apiserver.crt']}", f"--tls-private-key-file={p['apiserver.key']}",
            f"--client-ca-file={p['ca.crt']}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://127.0.0.1:{self.apiserver_port}",
            f"--service-account-key-file={p['sa.pub']}",
            f"--service-account-signing-key-file={p['sa.key']}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # It advertises 127.0.0.1, which kube-apiserver 1.37 refuses to publish as the kubernetes
            # Service's endpoint (a loopback address); nothing here reaches it through that Service.
            "--endpoint-reconciler-type=none",
            *([f"--disable-admission-plugins={','.join(self.disabled_admission_plugins)}"]
              if self.disabled_admission_plugins else []),
            "--profiling=false", "--v=0",
            f"--cert-dir={self.workdir / 'certs'}",
            *self._audit_args(),
            *self.extra_apiserver_args,
        ]
        log_start = self._log_size("kube-apiserver")
        self.apiserver_proc = subprocess.Popen(args, stdout=self._log("kube-apiserver"),
                                               stderr=subprocess.STDOUT, start_new_session=True)
        ctx = ssl.create_default_context(cafile=str(p["ca.crt"]))
        wait_http(f"{self.url}/readyz", timeout, self.apiserver_proc, "kube-apiserver",
                   self.workdir / "kube-apiserver.log", ssl_context=ctx, token=self.admin_token,
                   log_start=log_start)
        write_kubeconfig(self.kubeconfig, server=self.url, ca_file=p["ca.crt"], token=self.admin_token)


    def _audit_args(self) -> list[str]:
        if not self.audit_policy:
            return []
        from pysched_dev.audit import apiserver_flags

        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(self.audit_policy)
        return apiserver_flags(policy, self.audit_log)


def terminate_process(proc: subprocess.Popen | None, grace: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """``sig`` (SIGTERM; SIGINT for Ctrl-C) to the process group, then SIGKILL after ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def on_fresh_ports(start, timeout: float) -> None:
    """Run ``start`` (which picks its ports with ``free_port()``) again while its port was taken.

    ``free_port()`` can only say a port was free a moment ago: with many servers starting on the
    machine (a parallel test run, the benchmark), another process can bind it before ours does.
    """
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            start(timeout)
            return
        except PortTaken:
            if attempt == PORT_ATTEMPTS:
                raise


def wait_http(url: str, timeout: float, proc: subprocess.Popen, name: str, log: Path, *,
               ssl_context: ssl.SSLContext | None = None, token: str | None = None,
               log_start: int = 0) -> None:
    """Wait for ``url`` to answer 200; ``log_start`` is where this process's lines begin in ``log``."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log, "rb") as f:
                f.seek(log_start)
                output = f.read().decode(errors="replace")
            error = PortTaken if "address already in use" in output else ControlPlaneError
            raise error(f"{name} exited with code {proc.returncode}:\n{output[-3000:]}")
        req = urllib.request.Request(url)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=2, context=ssl_context) as resp:
                if resp.status == 200 and proc.poll() is None:  # ours answered, not the port's taker
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise ControlPlaneError(f"{name} not ready at {url} after {timeout}s: {last}")


@dataclass
class KubeSchedulerProcess:
    """The real kube-scheduler (built with the control plane), run against a ControlPlane;
    ``binary``: another build of it (scheduler-plugins', ``scheduler_plugins_binary()``)."""

    cp: ControlPlane
    config: dict
    name: str = "kube-scheduler"
    secure_port: int = 0
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    binary: Path | None = None

    def start(self) -> KubeSchedulerProcess:
        import yaml

        cfg = dict(self.config)
        cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        cfg.setdefault("kind", "KubeSchedulerConfiguration")
        cc = dict(cfg.get("clientConnection") or {})
        cc["kubeconfig"] = str(self.cp.kubeconfig)
        cfg["clientConnection"] = cc
        cfg.setdefault("leaderElection", {"leaderElect": False})
        path = self.cp.workdir / f"{self.name}-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        binary = self.binary or self.cp.bin / "kube-scheduler"
        args = [str(binary), f"--config={path}", f"--secure-port={self.secure_port}",
                "--bind-address=127.0.0.1", "--v=1", *self.extra_args]
        self.proc = subprocess.Popen(args, stdout=self.cp._log(self.name), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    @property
    def log_path(self) -> Path:
        return self.cp.workdir / f"{self.name}.log"

    def stop(self) -> None:
        terminate_process(self.proc)
        self.proc = None


@dataclass
class SchedulerPluginsControllerProcess:
    """scheduler-plugins' status controller (``cmd/controller``: a controller-runtime manager with the
    PodGroup and ElasticQuota controllers) against a ControlPlane, with the admin kubeconfig, no
    leader election, and no listener at all: metrics and health probes off (``0``), and it registers
    no webhooks, so no webhook server starts. (Its ``--qps``/``--burst`` are ignored upstream: the
    manager gets a fresh config, controller-runtime's default 20/30.) ``ready()``: both controllers'
    workers started, i.e. their caches synced."""

    cp: ControlPlane
    name: str = "scheduler-plugins-controller"
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    binary: Path | None = None

    def start(self) -> SchedulerPluginsControllerProcess:
        binary = self.binary or scheduler_plugins_controller_binary()
        self._log_start = self.cp._log_size(self.name)
        args = [str(binary), f"--kubeconfig={self.cp.kubeconfig}", "--enableLeaderElection=false",
                "--metricsAddr=0", "--probeAddr=0", *self.extra_args]
        self.proc = subprocess.Popen(args, stdout=self.cp._log(self.name), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    @property
    def log_path(self) -> Path:
        return self.cp.workdir / f"{self.name}.log"

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def ready(self) -> bool:
        """Both controllers have started their workers (their caches synced); raises if it exited."""
        if self.proc is None or self.proc.poll() is not None:
            raise ControlPlaneError(f"{self.name} exited with code {self.proc and self.proc.returncode}:\n"
                                    f"{self.log()[-3000:]}")
        started = [line for line in self.log().splitlines() if "Starting workers" in line]
        return all(any(f'"{c}"' in line for line in started) for c in ("podgroup", "elasticquota"))

    def stop(self) -> None:
        terminate_process(self.proc)
        self.proc = None
