"""RealCluster: a control plane, one real node (containerd + runc + kubelet) and KWOK's fake nodes.

``start()`` brings the pieces up in order, timing each (``timings``), and tears down whatever
started when one fails (the error names the piece and quotes its log). ``stop()`` takes it all
down in real-node.md §4.12's order: the controllers first (nothing recreates or places a pod any
more), the real node's pods deleted through the API (the kubelet unmounts their volumes and runs
CNI DEL), then every daemon by its PID, containerd's leftover tasks, containerd and its shims,
the mounts left under the work directory, the bridge, the cgroups, and the work directory.

Everything the cluster creates on the host is its own and named after it: the work directory
(``/tmp/pysched-real-<id>``), the bridge ``psched-<id>``, the cgroup root ``pysched-real-<id>``,
addresses in a /22 nothing else on the host uses. It changes no sysctl, adds no iptables rule and
starts no system service; see docs/real-node.md for the list.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched_dev.audit import apiserver_flags
from pysched_dev.realcluster import cgroups, containerd, controlplane, kubelet, kwok, mounts, network, prereq
from pysched_dev.realcluster.api import Api, node_ready, untainted
from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.pki import Pki, kubeconfig
from pysched_dev.realcluster.procs import Daemon, kill_pids, pids_referencing

#: Host directories a work directory must not be under: the kubelet's namespace overlays them.
_FORBIDDEN_PARENTS = ("/var/lib", "/var/log", "/run", "/var/run", "/proc", "/sys")
KEEP_ENV = "PYSCHED_REAL_KEEP"
#: In the work directory: the owning process and the host-side names, for clean_up().
STATE_FILE = "cluster.json"
WORKDIR_PREFIX = "pysched-real-"


@dataclass
class RealCluster:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler (1.37.2 by default), a real
    node ``node_name`` (containerd 1.6, runc, kubelet 1.35.4) and ``kwok_nodes`` fake nodes
    (``kwok-0``...) tainted with ``kwok_taint``. A context manager; ``stop()`` is idempotent."""

    kwok_nodes: int = 3
    node_name: str = "real-node"
    #: Where the work directory is made (default: the temporary directory, /tmp).
    workdir_parent: Path | None = None
    #: Keep the work directory (logs, configuration) after stop(); also PYSCHED_REAL_KEEP=1.
    keep_dir: bool = False
    apiserver_args: list[str] = field(default_factory=list)
    controller_manager_args: list[str] = field(default_factory=list)
    scheduler_args: list[str] = field(default_factory=list)
    #: An audit policy (YAML text, e.g. ``pysched_dev.audit.BINDINGS_POLICY``): the API server then
    #: writes a JSON audit log, read with ``audit_events()``.
    audit_policy: str | None = None
    #: Seconds each piece may take to become ready.
    timeout: float = 120.0

    # -- set by start() -----------------------------------------------------------------------
    #: Seconds per piece of start() ("binaries", "pki", ..., "total") and of stop() ("teardown"...).
    timings: dict[str, float] = field(default_factory=dict)
    stop_timings: dict[str, float] = field(default_factory=dict)
    workdir: Path = field(default=Path(), init=False)
    id: str = field(default="", init=False)
    bridge: str = field(default="", init=False)
    cgroup_root: str = field(default="", init=False)
    subnets: network.Subnets | None = field(default=None, init=False)
    kwok_node_names: list[str] = field(default_factory=list, init=False)
    admin_token: str = field(default="", init=False)

    kwok_taint: dict[str, str] = field(default_factory=lambda: dict(kwok.KWOK_TAINT), init=False)
    kwok_toleration: dict[str, str] = field(default_factory=lambda: dict(kwok.KWOK_TOLERATION), init=False)

    def __post_init__(self) -> None:
        self._daemons: dict[str, Daemon] = {}
        self._containerd: containerd.Containerd | None = None
        self._api: Api | None = None
        self._bin: prereq.Binaries | None = None
        self._made: list[str] = []    # host-side things made, for teardown ("workdir", "bridge", ...)
        self._kubeconfigs: dict[str, Path] = {}

    # -- accessors ----------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user ``admin`` in ``system:masters``, a bearer token)."""
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        """``https://<S>.1:443``: the ``kubernetes`` Service's ClusterIP, the same from the host and pods."""
        assert self.subnets is not None
        return f"https://{self.subnets.api_address}:443"

    @property
    def api_address(self) -> str:
        assert self.subnets is not None
        return self.subnets.api_address

    @property
    def node_ip(self) -> str:
        """The real node's InternalIP (``<P>.1``, on the cluster's bridge; the kubelet serves there)."""
        assert self.subnets is not None
        return self.subnets.gateway

    @property
    def pod_cidr(self) -> str:
        assert self.subnets is not None
        return str(self.subnets.pods)

    @property
    def service_cidr(self) -> str:
        assert self.subnets is not None
        return str(self.subnets.services)

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def api(self) -> Api:
        if self._api is None:
            raise RealClusterError("kube-apiserver", "not started")
        return self._api

    @property
    def pause_image(self) -> str:
        """The sandbox image (built by hack/kubelet.sh, imported at start): a container image any
        test pod can run (``imagePullPolicy: Never``; its entrypoint sleeps until signalled)."""
        assert self._bin is not None
        return self._bin.pause_image

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    def pids(self) -> dict[str, int]:
        """The PID of every daemon the cluster started and that still runs."""
        return {name: d.pid for name, d in self._daemons.items() if d.alive() and d.pid is not None}

    def log(self, piece: str) -> str:
        """What a daemon wrote so far (``kubelet``, ``containerd``, ``kube-apiserver``, ``kwok``...)."""
        path = self.logs_dir / f"{piece}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """kubectl 1.37.2 with the admin kubeconfig; raises CalledProcessError (with its output) when
        ``check`` and it fails."""
        assert self._bin is not None
        return subprocess.run([str(self._bin.control_plane / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              capture_output=True, text=True, input=input, timeout=timeout, check=check)

    def import_image(self, archive: str | os.PathLike[str]) -> list[str]:
        """Import an image archive (docker-archive or oci-archive) into the node's containerd, where
        the kubelet finds it (use ``imagePullPolicy: IfNotPresent`` or ``Never``); the image names."""
        if self._containerd is None:
            raise RealClusterError("containerd", "not started")
        return self._containerd.import_image(Path(archive))

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- start --------------------------------------------------------------------------------

    def start(self) -> RealCluster:
        began = time.monotonic()
        try:
            with self._timed("packages"):
                prereq.install_packages()
            with self._timed("binaries"):
                self._bin = prereq.binaries()
            self._make_workdir()
            with self._timed("pki"):
                # the address plan first: the API server's certificate names its address
                self.subnets = network.pick_subnets()
                self._write_pki()
            with self._timed("network"):
                self._start_network()
            with self._timed("containerd"):
                self._start_containerd()
            with self._timed("pause image"):
                assert self._containerd is not None and self._bin is not None
                self._containerd.import_image(self._bin.pause_archive)
            with self._timed("etcd"):
                self._start_etcd()
            with self._timed("kube-apiserver"):
                self._start_apiserver()
            with self._timed("kube-controller-manager"):
                self._start_controller_manager()
            with self._timed("kube-scheduler"):
                self._start_scheduler()
            with self._timed("kubelet"):
                self._start_kubelet()
            with self._timed("kwok"):
                self._start_kwok()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        self.timings["total"] = round(time.monotonic() - began, 2)
        return self

    @contextlib.contextmanager
    def _timed(self, piece: str, into: dict[str, float] | None = None) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            (self.timings if into is None else into)[piece] = round(time.monotonic() - t0, 2)

    def _make_workdir(self) -> None:
        parent = Path(self.workdir_parent or tempfile.gettempdir()).resolve()
        if any(parent == Path(f) or Path(f) in parent.parents for f in _FORBIDDEN_PARENTS):
            raise RealClusterError("workdir", f"{parent}: the kubelet's mount namespace overlays "
                                              f"{', '.join(_FORBIDDEN_PARENTS[:3])}; choose another parent")
        self.id = secrets.token_hex(3)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.id}-", dir=parent))
        self._made.append("workdir")
        self.logs_dir.mkdir()
        self.bridge = f"psched-{self.id}"
        self.cgroup_root = f"pysched-real-{self.id}"
        # what clean_up() needs when this process dies without stop()
        (self.workdir / STATE_FILE).write_text(json.dumps({"owner": os.getpid(), "bridge": self.bridge,
                                                           "cgroup_root": self.cgroup_root}))

    def _write_pki(self) -> None:
        assert self.subnets is not None
        s = self.subnets
        pki = Pki(self.workdir / "pki")
        paths: dict[str, Path] = {"ca.crt": pki.ca_crt, "ca.key": pki.ca_key}

        def issue(name: str, **kw: Any) -> tuple[Path, Path]:
            crt, key = pki.issue(name, **kw)
            paths[f"{name}.crt"], paths[f"{name}.key"] = crt, key
            return crt, key

        issue("apiserver", client=False, server_names=[
            s.api_address, s.gateway, "127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        issue("apiserver-kubelet-client", cn="kube-apiserver-kubelet-client", groups=["system:masters"])
        paths["sa.key"], paths["sa.pub"] = pki.service_account_keys()
        self._pki = paths
        self.admin_token = secrets.token_hex(16)
        (self.workdir / "tokens.csv").write_text(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        (self.workdir / "tokens.csv").chmod(0o600)
        server = f"https://{s.api_address}:443"
        kubeconfig(self.kubeconfig, server=server, ca=pki.ca_crt, user="admin", token=self.admin_token)
        for name, cn, groups in (
                ("kube-controller-manager", "system:kube-controller-manager", ()),
                ("kube-scheduler", "system:kube-scheduler", ()),
                ("kwok", "kwok-controller", ("system:masters",)),
                ("kubelet", f"system:node:{self.node_name}", ("system:nodes",))):
            cert = issue(f"{name}-client", cn=cn, groups=list(groups))
            self._kubeconfigs[name] = kubeconfig(self.workdir / f"{name}.kubeconfig", server=server,
                                                 ca=pki.ca_crt, user=cn, cert=cert)
        self._kubelet_tls = issue("kubelet-serving", cn=self.node_name, client=False,
                                  server_names=[s.gateway, self.node_name])

    def _start_network(self) -> None:
        assert self.subnets is not None
        for attempt in range(3):
            network.create_bridge(self.bridge, self.subnets)
            self._made.append("bridge")
            # another cluster may have picked the same block at the same moment: the later one moves
            others = [n for n in _networks_except(self.bridge) if n.overlaps(self.subnets.block)]
            if not others:
                break
            network.delete_bridge(self.bridge)
            self._made.remove("bridge")
            if attempt == 2:
                raise RealClusterError("network", f"{self.subnets.block} is in use on this host: {others}")
            self.subnets = network.pick_subnets()
            self._write_pki()   # the certificates name the addresses
        network.cni_conflist(self.workdir / "cni" / "net.d" / "10-pysched.conflist",
                             network=f"pysched-real-{self.id}", bridge=self.bridge, subnets=self.subnets,
                             ipam_dir=self.workdir / "cni" / "ipam")
        # the kubelet's root directory, rshared before containerd's and the kubelet's namespaces copy it
        mounts.make_rshared(self.workdir / "kubelet")

    def _start_containerd(self) -> None:
        assert self._bin is not None
        self._containerd = containerd.Containerd(
            self.workdir / "containerd", cni_conf_dir=self.workdir / "cni" / "net.d",
            sandbox_image=self._bin.pause_image, log=self.logs_dir / "containerd.log")
        try:
            self._containerd.start(self.timeout)
        finally:
            if self._containerd.daemon is not None:
                self._daemons["containerd"] = self._containerd.daemon

    def _daemon(self, name: str, argv: list[str]) -> Daemon:
        d = Daemon(name, argv, self.logs_dir / f"{name}.log").start()
        self._daemons[name] = d
        return d

    def _start_etcd(self) -> None:
        assert self._bin is not None
        argv, self._etcd_url = controlplane.etcd_argv(self._bin.control_plane, self.workdir / "etcd")
        self._daemon("etcd", argv).wait_ready(controlplane.http_ok(f"{self._etcd_url}/health"), self.timeout,
                                              "healthy")

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log written so far (one JSON event per line; empty without ``audit_policy``)."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def _start_apiserver(self) -> None:
        assert self._bin is not None and self.subnets is not None
        audit: list[str] = []
        if self.audit_policy:
            (self.workdir / "audit-policy.yaml").write_text(self.audit_policy)
            audit = apiserver_flags(self.workdir / "audit-policy.yaml", self.audit_log)
        argv = controlplane.apiserver_argv(
            self._bin.control_plane, etcd=self._etcd_url, address=self.subnets.api_address,
            service_cidr=self.service_cidr, pki=self._pki, tokens=self.workdir / "tokens.csv",
            cert_dir=self.workdir / "apiserver-certs", extra=[*audit, *self.apiserver_args])
        self._api = Api(self.server, self.ca_file, self.admin_token)
        self._daemon("kube-apiserver", argv).wait_ready(self._api.ready, self.timeout, "ready (/readyz)")

    def _start_controller_manager(self) -> None:
        assert self._bin is not None
        argv, port = controlplane.controller_manager_argv(
            self._bin.control_plane, kubeconfig=self._kubeconfigs["kube-controller-manager"], pki=self._pki,
            cert_dir=self.workdir / "kcm-certs", extra=self.controller_manager_args)
        d = self._daemon("kube-controller-manager", argv)
        d.wait_ready(controlplane.http_ok(f"https://127.0.0.1:{port}/healthz", controlplane.insecure()),
                     self.timeout, "healthy")
        # pods are admitted only once the ServiceAccount controller made default/default
        d.wait_ready(lambda: self.api.exists("/api/v1/namespaces/default/serviceaccounts/default"),
                     self.timeout, "done making the default ServiceAccount")

    def _start_scheduler(self) -> None:
        assert self._bin is not None
        argv, port = controlplane.scheduler_argv(
            self._bin.control_plane, kubeconfig=self._kubeconfigs["kube-scheduler"],
            config_file=self.workdir / "kube-scheduler.yaml", extra=self.scheduler_args)
        self._daemon("kube-scheduler", argv).wait_ready(
            controlplane.http_ok(f"https://127.0.0.1:{port}/healthz", controlplane.insecure()), self.timeout,
            "healthy")

    def _start_kubelet(self) -> None:
        assert self._bin is not None and self._containerd is not None
        cgroups.create_root(self.cgroup_root)
        self._made.append("cgroups")
        config = kubelet.config(
            self.workdir / "kubelet-config.yaml", node_ip=self.node_ip, endpoint=self._containerd.endpoint,
            cgroup_root=f"/{self.cgroup_root}", ca=self.ca_file, tls=self._kubelet_tls,
            pod_logs=self.workdir / "pod-logs", volume_plugins=self.workdir / "volume-plugins")
        argv = kubelet.argv(self._bin.kubelet, ns_dir=self.workdir / "kubelet-ns", config_file=config,
                            kubeconfig=self._kubeconfigs["kubelet"], root_dir=self.workdir / "kubelet",
                            node_name=self.node_name, node_ip=self.node_ip)
        d = self._daemon("kubelet", argv)
        d.wait_ready(self._node_schedulable(self.node_name), self.timeout,
                     f"Ready with node {self.node_name} schedulable")

    def _node_schedulable(self, name: str) -> Callable[[], bool]:
        def check() -> bool:
            try:
                node = self.api.get(f"/api/v1/nodes/{name}")
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return False
                raise
            return node_ready(node) and untainted(node)
        return check

    def _start_kwok(self) -> None:
        assert self._bin is not None and self.subnets is not None
        argv, port = kwok.argv(self._bin.kwok, kubeconfig=self._kubeconfigs["kwok"],
                               node_ip=self.subnets.kwok_node_ip, cidr=str(self.subnets.kwok))
        d = self._daemon("kwok", argv)
        d.wait_ready(controlplane.http_ok(f"http://127.0.0.1:{port}/healthz"), self.timeout, "healthy")
        self.kwok_node_names = [f"kwok-{i}" for i in range(self.kwok_nodes)]
        for node in kwok.nodes(self.kwok_node_names):
            self.api.request("POST", "/api/v1/nodes", node)   # the API ignores the status here
            self.api.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}/status",
                             {"status": node["status"]}, content_type="application/merge-patch+json")
        for name in self.kwok_node_names:
            d.wait_ready(self._node_schedulable(name), self.timeout, f"reporting node {name} Ready")

    # -- stop ---------------------------------------------------------------------------------

    def stop(self, pod_grace_timeout: float = 60.0) -> None:
        """Tear everything down (see the module docstring); every step is tried, the first error
        raised at the end. Idempotent."""
        began = time.monotonic()
        errors: list[BaseException] = []

        def step(name: str, fn: Callable[[], None]) -> None:
            with self._timed(name, self.stop_timings):
                try:
                    fn()
                except Exception as exc:   # later steps still run
                    errors.append(exc)

        step("controllers", lambda: self._stop_daemons("kube-scheduler", "kube-controller-manager"))
        step("pods", lambda: self._delete_node_pods(pod_grace_timeout))
        step("daemons", lambda: self._stop_daemons("kubelet", "kwok", "kube-apiserver", "etcd"))
        step("containerd", self._stop_containerd)
        if "workdir" in self._made:
            step("mounts", lambda: mounts.unmount_all(self.workdir))
        if "bridge" in self._made:
            step("bridge", lambda: network.delete_bridge(self.bridge))
        if "cgroups" in self._made:
            step("cgroups", lambda: cgroups.remove_root(self.cgroup_root))
        if "workdir" in self._made and not errors:
            step("workdir", self._remove_workdir)
        if not errors:   # else a second stop() tries again
            self._made = ["workdir"] if "workdir" in self._made and self._keep() else []
        self._api = None
        self.stop_timings["total"] = round(time.monotonic() - began, 2)
        if errors:
            first = errors[0]
            raise first if isinstance(first, RealClusterError) else RealClusterError("teardown", repr(first))

    def _keep(self) -> bool:
        return self.keep_dir or os.environ.get(KEEP_ENV, "") not in ("", "0")

    def _stop_daemons(self, *names: str) -> None:
        for name in names:
            d = self._daemons.pop(name, None)
            if d is not None:
                d.stop()

    def _delete_node_pods(self, timeout: float) -> None:
        """Delete the real node's pods through the API and wait until the kubelet has removed them
        (their volumes unmounted, CNI DEL run, their cgroups gone). Skipped when the API server or
        the kubelet is not running: containerd's tasks are then killed directly."""
        alive = {n for n, d in self._daemons.items() if d.alive()}
        if self._api is None or not {"kube-apiserver", "kubelet"} <= alive:
            return
        pods = self.api.pods_on(self.node_name)
        for p in pods:
            self.api.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"], grace=1)
        deadline = time.monotonic() + timeout
        while pods and time.monotonic() < deadline:
            time.sleep(0.3)
            pods = self.api.pods_on(self.node_name)
        if pods:
            names = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods]
            raise RealClusterError("kubelet", f"pods still on {self.node_name} {timeout:.0f} s after their "
                                              f"deletion: {names}", self.logs_dir / "kubelet.log")

    def _stop_containerd(self) -> None:
        c = self._containerd
        if c is not None:
            c.kill_tasks()
        if "cgroups" in self._made:
            cgroups.kill_all(self.cgroup_root)
        if c is not None:
            c.stop()
            kill_pids(c.shim_pids())
        self._daemons.pop("containerd", None)
        self._containerd = None
        if "workdir" in self._made:
            # anything else still naming the work directory (a shim whose containerd died first...)
            kill_pids(pids_referencing(str(self.workdir) + "/"))

    def _remove_workdir(self) -> None:
        if self._keep():
            # stopped, kept for its logs: not an orphan for clean_up() to tear down (and delete)
            (self.workdir / STATE_FILE).unlink(missing_ok=True)
            return
        left = mounts.mounts_under(self.workdir)
        if left:   # never delete through a mount
            raise RealClusterError("workdir", f"not removed: still mounted under it: {left[:5]}")
        shutil.rmtree(self.workdir)


def _networks_except(bridge: str) -> list[ipaddress.IPv4Network]:
    """The host's IPv4 networks from every link but ``bridge``."""
    nets = []
    for link in json.loads(subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, check=True).stdout):
        if link.get("ifname") == bridge:
            continue
        for a in link.get("addr_info", ()):
            nets.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return nets


def orphaned(parent: Path | None = None) -> list[Path]:
    """Work directories of clusters whose owning process is gone without stopping them (a cluster
    stopped with its directory kept has no state file left)."""
    out = []
    for d in Path(parent or tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            owner = json.loads((d / STATE_FILE).read_text())["owner"]
        except (OSError, ValueError, KeyError):
            continue
        if not Path(f"/proc/{owner}").exists():
            out.append(d)
    return out


def clean_up(workdir: Path) -> None:
    """Tear down a cluster whose owner died without ``stop()`` (a SIGKILL...), from its work
    directory alone: every process naming the work directory or in its cgroups killed, its mounts,
    bridge, cgroups and the directory removed. Its pods are not deleted through the API first: their
    volume mounts are simply unmounted."""
    state = json.loads((workdir / STATE_FILE).read_text())
    kill_pids(pids_referencing(str(workdir) + "/"), signal.SIGTERM)
    kill_pids(pids_referencing(str(workdir) + "/"))
    cgroups.kill_all(state["cgroup_root"])
    kill_pids(pids_referencing(str(workdir) + "/"))   # shims outlive their containers by a moment
    mounts.unmount_all(workdir)
    network.delete_bridge(state["bridge"])
    cgroups.remove_root(state["cgroup_root"])
    if mounts.mounts_under(workdir):
        raise RealClusterError("workdir", f"{workdir} not removed: still mounted under it")
    shutil.rmtree(workdir)
