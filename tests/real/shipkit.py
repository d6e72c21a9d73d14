"""What the real-node tests share: the shipped image in the node's containerd, Helm and kubectl
against the real cluster, bursts of workload pods on the KWOK nodes, the Lease holder, container
memory from the kubelet's own summary, and every binding the API server recorded (its audit log)."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from pysched import __version__
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import hack_output
from pysched_dev.testkit import create_pods, ensure_namespace, list_pods, poll_until

REPO = Path(__file__).resolve().parents[2]
#: What the chart and manifests deploy, as `make release` builds it.
SHIPPED_IMAGE = f"ghcr.io/pysched/pysched:{__version__}"
#: The same image under the tag a `helm upgrade` moves to.
NEXT_IMAGE = f"ghcr.io/pysched/pysched:{__version__}-next"


def build_image() -> Path:
    """``hack/image.sh`` (``make image``) with the shipped name: its output directory (cached by inputs)."""
    out = subprocess.run([str(REPO / "hack" / "image.sh")], cwd=REPO, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, IMAGE=SHIPPED_IMAGE, PY=sys.executable), check=True, timeout=3600)
    return Path(out.stdout.strip().splitlines()[-1])


def helm_binary() -> Path:
    return hack_output("PYSCHED_HELM", REPO / "hack" / "helm.sh")


def run(*args: str | Path, timeout: float = 300, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    """A command whose output the failure message shows."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode:
        cmd = " ".join(map(str, args))
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def kubectl(cluster: Any, *args: str | Path, check: bool = True,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """kubectl as the cluster's admin; a failure quotes its output."""
    p = cluster.kubectl(*map(str, args), check=False, timeout=timeout)
    if check and p.returncode:
        raise AssertionError(f"kubectl {' '.join(map(str, args))} exited {p.returncode}:\n{p.stdout[-3000:]}\n"
                             f"{p.stderr[-3000:]}")
    return p


def ctr(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """containerd's ``ctr`` on the real node's containerd, in the kubelet's namespace (k8s.io)."""
    return run("ctr", "--address", cluster.containerd_socket, "--namespace", "k8s.io", *args)


def exec_python(cluster: Any, ns: str, pod: str, code: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in the pod's (first) container."""
    return kubectl(cluster, "-n", ns, "exec", pod, "--", "python", "-c", code, check=check)


async def wait_for(predicate: Callable[[], Awaitable[Any]], timeout: float, *, interval: float = 0.5,
                   what: str = "condition") -> Any:
    return await poll_until(predicate, timeout, interval=interval, fail=lambda last: AssertionError(
        f"timed out after {timeout}s waiting for {what}; last={last!r}"))


# -- the scheduler's replicas -------------------------------------------------------------------

async def ready_replicas(admin: KubeClient, ns: str, name: str, count: int, *, image: str | None = None) -> list[dict]:
    """The Deployment's pods once ``count`` are Ready (and no other pod of it exists), else []."""
    dep = await admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
    selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
    pods = [p for p in await list_pods(admin, ns, labelSelector=selector) if not p["metadata"].get("deletionTimestamp")]
    ready = [p for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                    for c in p.get("status", {}).get("conditions") or ())]
    if len(pods) != count or len(ready) != count:
        return []
    if image and any(c["image"] != image for p in pods for c in p["spec"]["containers"]):
        return []
    st = dep.get("status") or {}
    if st.get("updatedReplicas") != count or st.get("availableReplicas") != count:
        return []
    return pods


async def lease_holder(admin: KubeClient, ns: str, name: str) -> str:
    """The pod that holds the Lease (its identity is ``<pod name>_<uuid>``), or ''."""
    try:
        lease = await admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}")
    except Exception:  # noqa: BLE001 - not created yet
        return ""
    return (lease["spec"].get("holderIdentity") or "").split("_")[0]


async def container_working_sets(admin: KubeClient, node: str) -> dict[tuple[str, str, str], int]:
    """(namespace, pod, container) -> working set bytes, from the kubelet's /stats/summary (cgroup-measured)."""
    summary = await admin.get(f"/api/v1/nodes/{node}/proxy/stats/summary")
    out = {}
    for pod in summary.get("pods") or ():
        ref = pod["podRef"]
        for c in pod.get("containers") or ():
            ws = (c.get("memory") or {}).get("workingSetBytes")
            if ws is not None:
                out[(ref["namespace"], ref["name"], c["name"])] = ws
    return out


class _Watch:
    """An ``async with`` block during which ``_run()`` samples something in the background."""

    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Any:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _run(self) -> None:
        raise NotImplementedError


class MemoryWatch(_Watch):
    """Samples the working set of every container of ``namespace`` on ``node`` until stopped; keeps the peaks."""

    def __init__(self, admin: KubeClient, node: str, namespace: str, interval: float = 1.0) -> None:
        self.admin, self.node, self.namespace, self.interval = admin, node, namespace, interval
        self.peak: dict[tuple[str, str], int] = {}
        self.samples = 0

    async def _run(self) -> None:
        while True:
            try:
                for (ns, pod, container), ws in (await container_working_sets(self.admin, self.node)).items():
                    if ns == self.namespace:
                        self.peak[(pod, container)] = max(ws, self.peak.get((pod, container), 0))
                self.samples += 1
            except Exception:  # noqa: BLE001 - a sample lost to a restarting kubelet proxy is fine
                pass
            await asyncio.sleep(self.interval)


class LeaseWatch(_Watch):
    """Every change of the Lease's holder while it runs, with how many pods of ``ns`` were bound then."""

    def __init__(self, admin: KubeClient, lease_ns: str, lease: str, ns: str) -> None:
        self.admin, self.lease_ns, self.lease, self.ns = admin, lease_ns, lease, ns
        self.changes: list[tuple[str, int]] = []

    async def _run(self) -> None:
        while True:
            holder = await lease_holder(self.admin, self.lease_ns, self.lease)
            if holder and (not self.changes or self.changes[-1][0] != holder):
                self.changes.append((holder, await bound(self.admin, self.ns)))
            await asyncio.sleep(0.2)


#: The memory limit the kernel enforces on a container, read inside it (cgroup v1; v2's file otherwise).
CGROUP_LIMIT = ("import pathlib; print(next(p for p in map(pathlib.Path, ('/sys/fs/cgroup/memory/"
                "memory.limit_in_bytes', '/sys/fs/cgroup/memory.max')) if p.exists()).read_text())")


def oom_killed(pod: dict) -> list[str]:
    """The containers of ``pod`` the kubelet reports OOMKilled (now or as their last state)."""
    out = []
    for c in pod.get("status", {}).get("containerStatuses") or ():
        for state in (c.get("state") or {}, c.get("lastState") or {}):
            if (state.get("terminated") or {}).get("reason") == "OOMKilled":
                out.append(c["name"])
    return out


# -- workload ---------------------------------------------------------------------------------

def workload_pod(name: str, *, kwok: dict | None = None, node: str | None = None, image: str = "registry.invalid/noop",
                 command: list[str] | None = None, cpu: str = "100m", memory: str = "64Mi",
                 scheduler: str = "pysched") -> dict:
    """A pod that opts into pysched: to the KWOK nodes (``kwok``: their taint, tolerated, and their label,
    which has the taint's key and value, selected) or to ``node`` (by hostname)."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}}]}
    if command:
        spec["containers"][0]["command"] = command
    if kwok:
        spec["tolerations"] = [{"key": kwok["key"], "operator": "Equal", "value": kwok["value"],
                                "effect": kwok["effect"]}]
        spec["nodeSelector"] = {kwok["key"]: kwok["value"]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


#: The label of the nodes add_kwok_nodes adds: a burst that selects it fills exactly their capacity.
BURST_NODE_LABEL = "pysched-test/burst"


async def add_kwok_nodes(admin: KubeClient, names: Iterable[str], taint: dict, *, cpu: str = "32",
                         pods: str = "250", reserved_for: str = "") -> None:
    """More fake nodes for a burst: KWOK manages every node with its label, so they are Ready at once.
    ``reserved_for``: labelled and tainted ``BURST_NODE_LABEL=<it>``, so only a burst made with
    ``reserved_for=<it>`` lands there (and can fill them exactly)."""
    from pysched_dev.livecluster import kwok_node
    from pysched_dev.testkit import create_nodes
    taints = [dict(taint)]
    if reserved_for:
        taints.append({"key": BURST_NODE_LABEL, "value": reserved_for, "effect": "NoSchedule"})
    await create_nodes(admin, [kwok_node(n, cpu=cpu, memory="128Gi", pods=pods, taints=taints,
                                         labels={BURST_NODE_LABEL: reserved_for or "any"}) for n in names])


async def delete_if_exists(admin: KubeClient, path: str) -> None:
    """DELETE ``path``; an object already gone is fine."""
    from pysched.client.rest import ApiError
    try:
        await admin.request("DELETE", path)
    except ApiError as e:
        if e.status != 404:
            raise


async def delete_namespace(admin: KubeClient, name: str) -> None:
    """Delete a namespace (its pods with it) if it exists."""
    await delete_if_exists(admin, f"/api/v1/namespaces/{name}")


async def on_kwok(admin: KubeClient, node: str, taint: dict) -> bool:
    """Whether ``node`` is one of KWOK's (its label has the taint's key and value)."""
    n = await admin.get(f"/api/v1/nodes/{node}")
    return bool(n["metadata"].get("labels", {}).get(taint["key"]) == taint["value"])


async def burst(admin: KubeClient, ns: str, count: int, kwok: dict, prefix: str = "b", *, cpu: str = "100m",
                reserved_for: str = "") -> None:
    """``count`` pods at once; ``reserved_for``: on the nodes add_kwok_nodes reserved for it, alone."""
    await ensure_namespace(admin, ns)
    pods = [workload_pod(f"{prefix}-{i:04d}", kwok=kwok, cpu=cpu) for i in range(count)]
    for p in pods:
        p["metadata"]["namespace"] = ns
        if reserved_for:
            p["spec"]["nodeSelector"][BURST_NODE_LABEL] = reserved_for
            p["spec"]["tolerations"].append({"key": BURST_NODE_LABEL, "operator": "Equal", "value": reserved_for,
                                             "effect": "NoSchedule"})
    await create_pods(admin, pods, concurrency=64)


async def bound(admin: KubeClient, ns: str) -> int:
    return sum(1 for p in await list_pods(admin, ns) if p["spec"].get("nodeName"))


def at_least(n: int, f: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int | None]]:
    async def check() -> int | None:
        v = await f()
        return v if v >= n else None
    return check


def binding_attempts(events: Iterable[dict], ns: str) -> dict[tuple[str, str, str], list[int]]:
    """Per pod of ``ns`` (namespace, name, uid), the HTTP codes of every binding the API server
    finished answering (``ResponseComplete``), in order."""
    out: dict[tuple[str, str, str], list[int]] = collections.defaultdict(list)
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("subresource") == "binding" and ref.get("namespace") == ns and e.get("stage") == "ResponseComplete":
            out[(ns, ref["name"], ref.get("uid") or "")].append((e.get("responseStatus") or {}).get("code", 0))
    return out


async def assert_each_bound_once(admin: KubeClient, audit_events: Callable[[], list[dict]], ns: str,
                                 count: int) -> None:
    """Every pod of ``ns`` bound (none lost), by one binding that took effect (none bound twice).

    The API server stores one binding per pod and refuses any later one with 409, which the test
    reports (the next leader trying a pod the last one had just bound, its cache behind) but which
    binds nothing. A binding can also take effect behind an error answer: a leader stopped
    mid-request makes the API server answer 504 (context canceled) after the write was stored.
    Whether a scheduler counted a pod twice shows as overcommit (``assert_no_overcommit``). The API
    server writes a binding's audit event after the pod's update is stored (and before it answers),
    so the log is read again for a few seconds until it holds an attempt for every bound pod."""
    pods = await list_pods(admin, ns)
    assert len(pods) == count
    unbound = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
    assert not unbound, f"{len(unbound)} pods lost: {unbound[:10]}"
    uids = {(ns, p["metadata"]["name"], p["metadata"]["uid"]) for p in pods}

    async def complete() -> dict[tuple[str, str, str], list[int]] | None:
        attempts = binding_attempts(audit_events(), ns)
        return attempts if uids <= attempts.keys() else None
    try:
        attempts = await wait_for(complete, 15, interval=0.5, what="a binding of every pod in the audit log")
    except AssertionError:
        missing = sorted(uids - binding_attempts(audit_events(), ns).keys())
        raise AssertionError(f"{len(missing)} pods bound without any audited binding: {missing[:5]}") from None
    assert attempts.keys() == uids, f"bindings of pods that are not these: {sorted(attempts.keys() - uids)[:5]}"
    twice = {k: codes for k, codes in attempts.items() if sum(200 <= c < 300 for c in codes) > 1}
    assert not twice, f"{len(twice)} pods with two successful bindings: {list(twice.items())[:10]}"
    # Every attempt after the one that took effect was refused 409 (already bound): a pod with no 2xx
    # binding was bound by its first attempt, answered with an error.
    unclear = {k: codes for k, codes in attempts.items()
               if not any(200 <= c < 300 for c in codes) and any(c != 409 for c in codes[1:])}
    assert not unclear, f"bound, but which attempt took effect is unclear: {list(unclear.items())[:10]}"
    refused = {k: codes for k, codes in attempts.items() if 409 in codes}
    first_failed = {k: codes for k, codes in attempts.items() if not 200 <= codes[0] < 300}
    print(f"bindings refused as the pod was already bound (a later leader's attempt): {len(refused)} "
          f"{list(refused.items())[:5]}; first attempt answered with an error (taking effect when no 2xx "
          f"follows): {len(first_failed)} {list(first_failed.items())[:5]}")


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:.1f}s"
