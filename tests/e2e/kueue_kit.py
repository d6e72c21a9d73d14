"""Kueue's manager (``sigs.k8s.io/kueue``) beside the living cluster, for the e2e tests: Kueue admits
Jobs into quota, pysched places their pods.

The manager itself (CRDs, webhooks, the private mount namespace for its metrics certificate) is
``pysched_dev.kueuekit.Kueue``, which ``make dev-cluster`` uses too. ``KueueCluster`` is a
``LivingCluster`` that installs Kueue's CRDs once the API server is up and *before*
kube-controller-manager starts, so that the garbage collector watches Workloads from its first
discovery (a Job's Workload is then collected as soon as the Job is gone, and its quota freed,
instead of after the next discovery resync), and starts the manager after KWOK. The audit policy
(``AUDIT_POLICY``) records every pod binding and Kueue's writes to pods with their bodies.

``kueue_living_cluster`` is the fixture body; on a test failure it copies every component's log
(and the audit log) into the test's ``tmp_path`` and prints Kueue's errors and last lines.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched_dev.kueuekit import (  # noqa: F401 - re-exported for the tests
    API,
    CONVERTED,
    GROUP,
    KUEUE_SCRIPT,
    KUEUE_USER,
    QUEUE_LABEL,
    Kueue,
    KueueError,
    kueue_binary,
)
from pysched_dev.livecluster import LivingCluster
from pysched_dev.testkit import list_pods

from .conftest import wait_for
from .living_kit import path_of, template

TOPOLOGY_GATE = f"{GROUP}/topology"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
HOSTNAME = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
#: KWOK's pod-complete stage (pysched_dev/kwok-stages.yaml) honours this per-pod delay.
KWOK_COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
#: Every pod binding (Metadata), and Kueue's own writes to pods with their bodies (the TAS ungate).
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: ["{KUEUE_USER}"]
  verbs: ["patch", "update"]
  resources: [{{group: "", resources: ["pods"]}}]
- level: Metadata
  verbs: ["create"]
  resources: [{{group: "", resources: ["pods/binding"]}}]
- level: None
"""

PATHS = {
    "ResourceFlavor": f"{API}/resourceflavors",
    "ClusterQueue": f"{API}/clusterqueues",
    "LocalQueue": f"{API}/namespaces/{{ns}}/localqueues",
    "Topology": f"{API}/topologies",
    "Workload": f"{API}/namespaces/{{ns}}/workloads",
}


class Paused:
    """A process group stopped (SIGSTOP) from ``pause()`` until ``resume()`` or the end of the block:
    it sees nothing and writes nothing meanwhile (a test holds a moment open with it)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.stopped = proc, False

    def pause(self) -> None:
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        if self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
            self.stopped = False

    def __enter__(self) -> Paused:
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume()


@dataclass
class KueueCluster(LivingCluster):
    """A ``LivingCluster`` with Kueue: its CRDs installed before kube-controller-manager starts, the
    manager started after KWOK, its webhooks applied before ``start`` returns."""

    kueue_options: dict[str, Any] = field(default_factory=dict)
    kueue: Kueue | None = None

    def start(self, timeout: float = 120.0) -> KueueCluster:
        self._kueue_binary = kueue_binary()   # built (or found) before anything starts
        super().start(timeout)
        try:
            assert self.kueue is not None
            self.kueue.start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.kueue is not None:
            self.kueue.stop()
        super().stop()

    def _start_controller_manager(self, timeout: float) -> None:
        # the hook between the API server and kube-controller-manager: the CRDs go in first
        if self.kueue is None:
            self.kueue = Kueue(self.cp, binary=self._kueue_binary, **self.kueue_options)
            self.kueue.install_crds(timeout)
        super()._start_controller_manager(timeout)

    def save_logs(self, dest: Path) -> Path:
        """Every component's log and the audit log, copied out of the control plane's directory."""
        dest.mkdir(parents=True, exist_ok=True)
        for f in [*self.workdir.glob("*.log"), self.workdir / "kueue" / "config.yaml"]:
            if f.exists():
                shutil.copyfile(f, dest / f.name)
        return dest


def kueue_living_cluster(request, tmp_path: Path, **kwargs: Any) -> Iterator[KueueCluster]:
    """The body of a ``living_cluster`` fixture with Kueue (``@pytest.mark.living(...)`` passes
    ``KueueCluster`` arguments). On a failed test the logs go to ``tmp_path/cluster-logs`` and
    Kueue's last lines are printed (pytest shows them with the failure)."""
    marker = request.node.get_closest_marker("living")
    kwargs.update(marker.kwargs if marker else {})
    kwargs.setdefault("audit_policy", AUDIT_POLICY)
    lc = KueueCluster(**kwargs)
    lc.start()
    failed_before = request.session.testsfailed
    try:
        yield lc
    finally:
        if request.session.testsfailed > failed_before:
            saved = lc.save_logs(tmp_path / "cluster-logs")
            print(f"component logs (kueue, kube-controller-manager, kwok, kube-apiserver, audit) in {saved}")
            if lc.kueue is not None:
                errors = [line for line in lc.kueue.log().splitlines() if '"level":"error"' in line]
                print("--- kueue.log: errors ---", *errors[-20:], "--- kueue.log: last lines ---",
                      lc.kueue.log_tail(60), sep="\n")
        lc.stop()


# -- objects -----------------------------------------------------------------------------------------

def resource_flavor(name: str, node_labels: dict[str, str], topology: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(node_labels)}
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, flavor: str, quota: dict[str, str]) -> dict[str, Any]:
    """A ClusterQueue admitting from every namespace, with one flavor's nominal ``quota`` per resource."""
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": list(quota),
                                         "flavors": [{"name": flavor, "resources": [
                                             {"name": r, "nominalQuota": q} for r, q in quota.items()]}]}]}}


def local_queue(name: str, cluster_queue_name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue_name}}


def topology(name: str, levels: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}}


def queued_job(name: str, queue: str, parallelism: int, *, cpu: str = "1", gpu: str = "1",
               namespace: str = "default", run_for: str | None = None) -> dict[str, Any]:
    """A Job for LocalQueue ``queue`` whose pods ask pysched for ``cpu`` and ``gpu`` each (created
    unsuspended, as users write them: Kueue's webhook suspends it). ``run_for``: how long KWOK keeps
    each pod Running before it Succeeds (``"1h"``: until the test deletes it); KWOK's default is 3 s."""
    tpl = template({}, cpu=cpu, memory="128Mi", scheduler="pysched", restartPolicy="Never")
    res = tpl["spec"]["containers"][0]["resources"]
    res["requests"][GPU] = gpu
    res["limits"] = {GPU: gpu}
    if run_for:
        tpl["metadata"]["annotations"] = {KWOK_COMPLETE_DELAY: run_for}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                     "template": tpl}}


def _path(obj: dict[str, Any], name: str | None = None) -> str:
    kind = obj["kind"]
    if kind not in PATHS:
        return path_of(obj, name)
    base = PATHS[kind].format(ns=obj["metadata"].get("namespace", "default"))
    return f"{base}/{name}" if name else base


async def create(client, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a Kueue object (or anything ``living_kit`` knows)."""
    return await client.request("POST", _path(obj), body=obj, rate_limit=False)


async def get(client, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.request("GET", _path(obj, obj["metadata"]["name"]), rate_limit=False)


async def create_queues(client, *objs: dict[str, Any], timeout: float = 30.0) -> None:
    """Create ResourceFlavors, Topologies, ClusterQueues and LocalQueues, and wait until every
    ClusterQueue and LocalQueue reports Active (its flavors and topology found)."""
    for obj in objs:
        await create(client, obj)
    for obj in objs:
        if obj["kind"] in ("ClusterQueue", "LocalQueue"):
            async def active(obj=obj):
                return condition(await get(client, obj), "Active") == "True"
            await wait_for(active, timeout, what=f"{obj['kind']} {obj['metadata']['name']} Active")


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def condition(obj: dict[str, Any], kind: str) -> str | None:
    c = conditions(obj).get(kind)
    return c["status"] if c else None


async def workload_of(client, job: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload Kueue made for ``job`` (owned by it), if any yet."""
    ns = job["metadata"].get("namespace", "default")
    items, _ = await client.list_all(f"{API}/namespaces/{ns}/workloads")
    uid = job["metadata"]["uid"]
    for w in items:
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or ()):
            return w
    return None


async def wait_admitted(client, job: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Until ``job``'s Workload is Admitted and the Job unsuspended; the Workload."""
    name = job["metadata"]["name"]

    async def admitted():
        w = await workload_of(client, job)
        if w is None or condition(w, "Admitted") != "True":
            return None
        j = await get(client, job)
        return w if j["spec"].get("suspend") is False else None
    return await wait_for(admitted, timeout, what=f"Job {name} admitted by Kueue and unsuspended")


async def wait_pending(client, job: dict[str, Any], because: str, timeout: float = 60.0) -> dict[str, Any]:
    """Until Kueue has tried ``job``'s Workload and left it without quota, with a QuotaReserved=False
    message containing ``because``; the Workload."""
    async def pending():
        w = await workload_of(client, job)
        c = conditions(w or {}).get("QuotaReserved")
        return w if c and c["status"] == "False" and because in c.get("message", "") else None
    return await wait_for(pending, timeout, what=f"Job {job['metadata']['name']}'s Workload pending: {because!r}")


async def job_pods(client, job: dict[str, Any], *, live: bool = True) -> list[dict[str, Any]]:
    """The Job's pods; ``live``: without those being deleted."""
    found = await list_pods(client, job["metadata"].get("namespace", "default"),
                            labelSelector=f"{JOB_NAME_LABEL}={job['metadata']['name']}")
    return [p for p in found if not (live and p["metadata"].get("deletionTimestamp"))]


async def wait_placed(client, job: dict[str, Any], count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Until ``count`` live pods of ``job`` are bound (``spec.nodeName``); those pods."""
    async def placed():
        found = await job_pods(client, job)
        return found if len(found) == count and all(p["spec"].get("nodeName") for p in found) else None
    return await wait_for(placed, timeout, what=f"{count} pods of Job {job['metadata']['name']} bound")


async def scheduled_events(client, namespace: str = "default") -> dict[str, dict[str, Any]]:
    """Each pod's ``Scheduled`` Event (events.k8s.io/v1), by pod name."""
    events, _ = await client.list_all(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return {e["regarding"]["name"]: e for e in events
            if e.get("reason") == "Scheduled" and e["regarding"].get("kind") == "Pod"}
