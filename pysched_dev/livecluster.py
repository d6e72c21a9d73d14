"""A living cluster: the ControlPlane plus the real kube-controller-manager and KWOK's kubelets.

``ControlPlane`` alone is etcd + kube-apiserver: nothing creates a pod and no pod ever runs.
``LivingCluster`` adds what a real cluster has around the scheduler, still on loopback and with
upstream binaries only:

* **kube-controller-manager** 1.35 (built with the control plane by ``hack/control-plane.sh``),
  every default controller on (Deployment/ReplicaSet, Job, StatefulSet, DaemonSet, disruption,
  garbage collector, node lifecycle, ServiceAccount and its token, ...), each with its own
  ServiceAccount credentials (``--use-service-account-credentials``) as kubeadm runs it, and
  timings short enough that a node failure plays out in seconds: a node is unreachable
  ``node_monitor_grace_seconds`` after its last Lease renewal, and the API server gives pods a
  default ``tolerationSeconds`` of ``toleration_seconds`` for the not-ready/unreachable taints.
* **KWOK** (``sigs.k8s.io/kwok``, built by ``hack/kwok.sh``) playing the kubelet of every Node
  labelled ``kwok.x-k8s.io/node: fake``: Node Ready with Lease heartbeats, bound pods through
  ContainerCreating to Running and Ready, Jobs' pods Succeeded, deleted pods gone within their grace
  period (``kwok-stages.yaml``).
* The API server with every default admission plugin (ServiceAccount, TaintNodesByCondition,
  DefaultTolerationSeconds, ...), so a new Node starts with the not-ready taint until KWOK reports it
  Ready, and pods carry the default tolerations a real cluster gives them.

A node *fails* when KWOK stops managing it (``fail_node``): its Lease is no longer renewed, the node
lifecycle controller marks it unreachable, taints it and evicts its pods; ``restore_node`` brings
it back. Everything stops at ``stop()`` and leaves no process behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched.client.rest import ApiError, KubeClient
from pysched.testing.objects import make_node
from pysched_dev.devcluster import (
    REPO_ROOT,
    ControlPlane,
    ControlPlaneError,
    free_port,
    hack_output,
    on_fresh_ports,
    terminate_process,
    wait_http,
    write_kubeconfig,
)
from pysched_dev.testkit import node_ready, poll_until

KWOK_SCRIPT = REPO_ROOT / "hack" / "kwok.sh"
KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")

#: KWOK manages every Node carrying this label with this value (the key KWOK's docs use). A label,
#: not an annotation: KWOK's node watch is filtered by the API server, so a node whose label changes
#: leaves it at once (its Lease is no longer renewed); with an annotation selector it would not.
KWOK_LABEL = "kwok.x-k8s.io/node"
KWOK_MANAGED = "fake"
#: The value ``fail_node`` sets: KWOK lets go of the node, as if its kubelet had died.
KWOK_STOPPED = "stopped"

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def kwok_binary() -> Path:
    """The ``kwok`` binary (``PYSCHED_KWOK``, else built once by ``hack/kwok.sh``)."""
    return hack_output("PYSCHED_KWOK", KWOK_SCRIPT)


def kwok_node(name: str, **kwargs: Any) -> dict[str, Any]:
    """A Node for KWOK to manage (``make_node``'s arguments): capacity set, conditions left to KWOK."""
    node = make_node(name, **kwargs)
    node["metadata"]["labels"][KWOK_LABEL] = KWOK_MANAGED
    node["status"].pop("conditions", None)
    node["status"].pop("phase", None)
    return node


@dataclass
class LivingCluster:
    """etcd, kube-apiserver, kube-controller-manager and KWOK on loopback (context manager)."""

    #: Seconds without a Lease renewal before the node lifecycle controller calls a node unreachable.
    node_monitor_grace_seconds: int = 6
    #: The API server's default tolerationSeconds for the not-ready and unreachable NoExecute taints.
    toleration_seconds: int = 2
    #: KWOK's node Lease duration; it renews every quarter of it.
    lease_duration_seconds: int = 4
    controllers: str = "*"
    extra_apiserver_args: list[str] = field(default_factory=list)
    extra_users: list[str] = field(default_factory=list)
    audit_policy: str | None = None
    keep_dir: bool = False
    cp: ControlPlane | None = None
    kcm_proc: Any = None
    kwok_proc: Any = None
    kcm_port: int = 0
    kwok_port: int = 0
    #: Called first by ``stop()``, last added first: what was started beside the cluster and must
    #: go with it (``make dev-cluster``'s Kueue and Prometheus).
    on_stop: list[Callable[[], None]] = field(default_factory=list)

    def start(self, timeout: float = 120.0) -> LivingCluster:
        kwok = kwok_binary()   # built (or found) before anything starts
        self.cp = ControlPlane(
            extra_apiserver_args=[f"--default-not-ready-toleration-seconds={self.toleration_seconds}",
                                  f"--default-unreachable-toleration-seconds={self.toleration_seconds}",
                                  *self.extra_apiserver_args],
            extra_users=list(self.extra_users), audit_policy=self.audit_policy, keep_dir=self.keep_dir,
            disabled_admission_plugins=())
        try:
            self.cp.start(timeout)
            if not (self.cp.bin / "kube-controller-manager").exists():
                raise ControlPlaneError(f"kube-controller-manager not in {self.cp.bin}; run hack/control-plane.sh")
            on_fresh_ports(self._start_controller_manager, timeout)
            on_fresh_ports(lambda t: self._start_kwok(kwok, t), timeout)
            self._wait_default_service_account(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        while self.on_stop:
            self.on_stop.pop()()
        for proc in (self.kwok_proc, self.kcm_proc):
            terminate_process(proc)
        self.kwok_proc = self.kcm_proc = None
        if self.cp is not None:
            self.cp.stop()

    def __enter__(self) -> LivingCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- accessors ---------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        assert self.cp is not None
        return self.cp.kubeconfig

    @property
    def workdir(self) -> Path:
        assert self.cp is not None and self.cp.workdir is not None
        return self.cp.workdir

    def log(self, name: str) -> str:
        """A component's output so far (``kube-controller-manager``, ``kwok``, ``kube-apiserver``)."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- nodes -------------------------------------------------------------------------------

    @staticmethod
    async def fail_node(client: KubeClient, name: str) -> None:
        """The node's kubelet dies: KWOK stops renewing its Lease and reporting its pods."""
        await _label(client, name, KWOK_STOPPED)

    @staticmethod
    async def restore_node(client: KubeClient, name: str) -> None:
        """The node's kubelet comes back: KWOK reports it Ready again and finishes its pods."""
        await _label(client, name, KWOK_MANAGED)

    # -- internals ---------------------------------------------------------------------------

    def _start_controller_manager(self, timeout: float) -> None:
        cp = self.cp
        assert cp is not None and cp.workdir is not None
        crt, key = cp.issue_cert("system:kube-controller-manager", client=True)
        kubeconfig = write_kubeconfig(cp.workdir / "kube-controller-manager.kubeconfig", server=cp.url,
                                      ca_file=cp.ca_file, cert=(crt, key), user="kube-controller-manager")
        self.kcm_port = free_port()
        args = [
            str(cp.bin / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={self.kcm_port}",
            f"--cert-dir={cp.workdir / 'kcm-certs'}",
            f"--controllers={self.controllers}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={cp.pki['sa.key']}",
            f"--root-ca-file={cp.pki['ca.crt']}",
            f"--cluster-signing-cert-file={cp.pki['ca.crt']}",
            f"--cluster-signing-key-file={cp.pki['ca.key']}",
            "--leader-elect=false",
            "--node-monitor-period=1s",
            f"--node-monitor-grace-period={self.node_monitor_grace_seconds}s",
            "--node-startup-grace-period=20s",
            "--kube-api-qps=200", "--kube-api-burst=400",
            "--profiling=false", "--v=1",
        ]
        self.kcm_proc = _popen(args, cp, "kube-controller-manager")
        wait_http(f"https://127.0.0.1:{self.kcm_port}/healthz", timeout, self.kcm_proc,
                  "kube-controller-manager", cp.workdir / "kube-controller-manager.log",
                  ssl_context=_insecure_context())

    def _start_kwok(self, kwok: Path, timeout: float) -> None:
        cp = self.cp
        assert cp is not None and cp.workdir is not None
        # KWOK writes every managed node's and pod's status: cluster-wide, as kubelets together do.
        crt, key = cp.issue_cert("kwok-controller", client=True, groups=("system:masters",))
        kubeconfig = write_kubeconfig(cp.workdir / "kwok.kubeconfig", server=cp.url, ca_file=cp.ca_file,
                                      cert=(crt, key), user="kwok-controller")
        self.kwok_port = free_port()
        args = [
            str(kwok), f"--kubeconfig={kubeconfig}", f"--config={KWOK_STAGES}",
            f"--manage-nodes-with-label-selector={KWOK_LABEL}={KWOK_MANAGED}",
            f"--node-lease-duration-seconds={self.lease_duration_seconds}",
            f"--server-address=127.0.0.1:{self.kwok_port}",
            "--node-ip=10.0.0.1", "--cidr=10.64.0.0/12",
        ]
        self.kwok_proc = _popen(args, cp, "kwok")
        wait_http(f"http://127.0.0.1:{self.kwok_port}/healthz", timeout, self.kwok_proc, "kwok",
                  cp.workdir / "kwok.log")

    def _wait_default_service_account(self, timeout: float) -> None:
        """Pods are admitted only once the ServiceAccount controller made ``default/default``
        (the GET answers 404 until then)."""
        import ssl

        cp = self.cp
        assert cp is not None and cp.workdir is not None
        wait_http(f"{cp.url}/api/v1/namespaces/default/serviceaccounts/default", timeout, self.kcm_proc,
                  "kube-controller-manager (ServiceAccount default/default)",
                  cp.workdir / "kube-controller-manager.log",
                  ssl_context=ssl.create_default_context(cafile=str(cp.ca_file)), token=cp.admin_token)

async def _label(client: KubeClient, name: str, value: str) -> None:
    await client.request("PATCH", f"/api/v1/nodes/{name}",
                         body={"metadata": {"labels": {KWOK_LABEL: value}}},
                         content_type="application/merge-patch+json", rate_limit=False)


def _popen(args: list[str], cp: ControlPlane, name: str):
    import subprocess

    return subprocess.Popen(args, stdout=cp._log(name), stderr=subprocess.STDOUT, start_new_session=True)


def _insecure_context():
    """The controller-manager's self-signed serving certificate: reached on loopback for /healthz only."""
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def wait_nodes_ready(client: KubeClient, names: list[str], timeout: float = 60.0) -> None:
    """Until every named Node is Ready and the not-ready taint is gone (KWOK + node lifecycle)."""
    pending = set(names)

    async def all_ready() -> bool:
        for name in list(pending):
            try:
                node = await client.request("GET", f"/api/v1/nodes/{name}", rate_limit=False)
            except ApiError:
                continue
            if node_ready(node) and not any(t.get("key") in (NOT_READY_TAINT, UNREACHABLE_TAINT)
                                            for t in node["spec"].get("taints") or ()):
                pending.discard(name)
        return not pending

    await poll_until(all_ready, timeout, interval=0.2, fail=lambda _: ControlPlaneError(
        f"nodes not Ready after {timeout}s: {sorted(pending)}"))


ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def sample_nodes() -> list[dict[str, Any]]:
    """The demo's and ``make dev-cluster``'s nodes: three zones, on-demand and spot, one GPU node."""
    def node(name: str, zone: str, itype: str, ctype: str, cpu: str, memory: str, **kw: Any) -> dict[str, Any]:
        return kwok_node(name, cpu=cpu, memory=memory,
                         labels={ZONE: zone, INSTANCE_TYPE: itype, CAPACITY_TYPE: ctype, **kw.pop("labels", {})},
                         **kw)
    return [
        node("kwok-a1", "zone-a", "m5.xlarge", "on-demand", "4", "16Gi"),
        node("kwok-a2", "zone-a", "m5.xlarge", "spot", "4", "16Gi"),
        node("kwok-b1", "zone-b", "m5.2xlarge", "on-demand", "8", "32Gi"),
        node("kwok-b2", "zone-b", "m5.2xlarge", "spot", "8", "32Gi"),
        node("kwok-c1", "zone-c", "p3.2xlarge", "on-demand", "8", "61Gi", taints=[GPU_TAINT],
             extended={"nvidia.com/gpu": "1"}),
        node("kwok-c2", "zone-c", "m5.xlarge", "spot", "4", "16Gi"),
    ]
