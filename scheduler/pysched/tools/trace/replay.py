"""One replay run: the trace's nodes and one run's arrival, placed through the offline engine with
a GPU policy, one attempt per pod, nothing leaving; the GPU demand arrived and the GPU share
allocated recorded after every attempt.

Policies (``POLICIES``): GPUShare with each published policy - ``FGD`` with the trace's own target
workload stated (the published FGD), ``BestFit``, ``GpuPacking``, ``GpuClustering``, ``DotProd``,
``Random`` - and with its defaults (``pysched``: the target workload learned from the pods as
they arrive); and kube-scheduler's default profile, its NodeResourcesFit scoring LeastAllocated
(``kube-LeastAllocated``) or MostAllocated (``kube-MostAllocated``), with GPUShare only filtering
and choosing the GPU inside the node. Every profile scores all nodes (``percentageOfNodesToScore``
100). Ties: the published policies break them as the simulator, by the run's node rank (GPUShare's
``tieBreak: NodeName``; the nodes are named by their rank); ``pysched`` as it ships (``NodeHash``);
kube-scheduler's profiles at random, as kube-scheduler does. The scheduler is the offline engine
as it is (``SamplingScheduler``, seeded with the run's seed), the same one the live loop runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pysched.apis import config as configmod
from pysched.plugins.gpushare import GPUShare
from pysched.tools.offline import OfflineScheduler
from pysched.tools.trace.openb import Run, TraceNode, TracePod, target_workload

SCHEDULER = "pysched-trace"
PUBLISHED = ("FGD", "BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random")
KUBE = ("kube-LeastAllocated", "kube-MostAllocated")
POLICIES = (*PUBLISHED, "pysched", *KUBE)
MILLI = "alibabacloud.com/gpu-milli"
COUNT = "alibabacloud.com/gpu-count"
MODEL = "alibabacloud.com/gpu-card-model"


def node_name(node: TraceNode, rank: int) -> str:
    return f"{rank:04d}-{node.sn}"


def node_object(node: TraceNode, rank: int) -> dict[str, Any]:
    alloc = {"cpu": f"{node.milli_cpu}m", "memory": f"{node.memory_mib}Mi", "pods": "1001"}
    if node.gpus:
        alloc[COUNT] = str(node.gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name(node, rank), "labels": {MODEL: node.model} if node.model else {}},
            "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def pod_object(pod: TracePod, name: str, uid: str, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if pod.gpu_count:
        meta["annotations"] = {MILLI: str(pod.gpu_milli), COUNT: str(pod.gpu_count)}
        if pod.models:
            meta["annotations"][MODEL] = "|".join(pod.models)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "main", "image": "trace", "resources": {
                "requests": {"cpu": f"{pod.milli_cpu}m", "memory": f"{pod.memory_mib}Mi"}}}]}}


def profile_config(policy: str, pods: list[TracePod] | None = None,
                   overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The KubeSchedulerConfiguration a run uses (``pods``: the trace, for the published FGD's
    stated target workload; ``overrides``: GPUShare arguments set on top, e.g. ``tieBreak``)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
    args: dict[str, Any] = {}
    if policy in PUBLISHED:
        # As published: ties to the lowest rank (the nodes are named by it), no preference for CPU pods.
        args.update(policy=policy, tieBreak="NodeName", cpuPodsToBusyGPUNodes=False)
    if policy == "FGD":
        assert pods is not None
        args.update(targetWorkload="Stated", classes=[
            {"milliCPU": k[0], "gpuMilli": k[1], "gpuCount": k[2], "models": list(k[3]), "weight": c}
            for k, c in target_workload(pods)])
    args.update(overrides or {})
    if policy in KUBE:
        args.update(policy="None", tieBreak="Scheduler")
        strategy = policy.split("-", 1)[1]
        plugins = {"multiPoint": {"enabled": [{"name": "GPUShare"}]}, "score": {"disabled": [{"name": "GPUShare"}]}}
        plugin_config = [{"name": "GPUShare", "args": args},
                         {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}]
    else:
        plugins = {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [
            {"name": "PrioritySort"}, {"name": "NodeResourcesFit"}, {"name": "GPUShare"}, {"name": "DefaultBinder"}]},
            "score": {"disabled": [{"name": "NodeResourcesFit"}]}}
        plugin_config = [{"name": "GPUShare", "args": args}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 100,
            "profiles": [{"schedulerName": SCHEDULER, "plugins": plugins, "pluginConfig": plugin_config}]}


@dataclass
class RunResult:
    """After each attempt e: GPU demand arrived and GPU share allocated (thousandths, cumulative);
    ``placements``: (pod, node, GPUs) of the pods placed, in arrival order."""
    capacity: int
    arrived: np.ndarray
    allocated: np.ndarray
    failed: int
    seconds: float
    placements: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)


def replay(pods: list[TracePod], nodes: list[TraceNode], run: Run, policy: str, seed: int, *,
           stop_percent: float | None = None, keep_placements: bool = False, overrides: dict[str, Any] | None = None,
           progress: Callable[[int, int, float, float], None] | None = None) -> RunResult:
    cfg = configmod.parse(profile_config(policy, pods, overrides))
    sched = OfflineScheduler(cfg, seed=seed)
    plugin = sched.frameworks[SCHEDULER].plugins["GPUShare"]
    assert isinstance(plugin, GPUShare)
    plugin.rng.seed(seed)
    for nd, r in zip(nodes, run.rank, strict=True):
        sched.add_node(node_object(nd, r))
    capacity = sum(nd.gpus for nd in nodes) * 1000
    n = len(run.order)
    arrived = np.zeros(n, dtype=np.int64)
    allocated = np.zeros(n, dtype=np.int64)
    placements: list[tuple[str, str, tuple[int, ...]]] = []
    copies: dict[int, int] = {}
    seen: set[int] = set()
    arr = alloc = failed = 0
    t0 = time.perf_counter()
    for e, i in enumerate(run.order):
        p = pods[i]
        if i in seen:
            copies[i] = copies.get(i, -1) + 1
            name = f"{p.name}-tuned-{copies[i]}"
        else:
            seen.add(i)
            name = p.name
        out = sched.schedule(pod_object(p, name, f"u{e}"))
        arr += p.gpu_total
        if out.node:
            alloc += p.gpu_total
            if keep_placements:
                placements.append((name, out.node, plugin.devices_of(f"u{e}") or ()))
        else:
            failed += 1
        arrived[e], allocated[e] = arr, alloc
        if progress is not None and (e % 500 == 0 or e == n - 1):
            progress(e + 1, n, 100 * arr / capacity, 100 * alloc / capacity)
        if stop_percent is not None and arr * 100 > (stop_percent + 0.5) * capacity:
            arrived, allocated = arrived[:e + 1], allocated[:e + 1]
            break
    return RunResult(capacity, arrived, allocated, failed, time.perf_counter() - t0, placements)


def curve(result: RunResult) -> dict[int, float]:
    """Allocation ratio (% of the GPUs) by GPU demand arrived (% of the GPUs, integer bins,
    half to even): the mean over the attempts in each bin, as the simulator's analysis
    (``merge_alloc_discrete.py``) computes it - each attempt's ratio rounded to 2 places as Python
    rounds a float, the bin's mean as NumPy rounds (``round()`` of a NumPy float)."""
    gpus = result.capacity / 1000
    bins = np.round(result.arrived / gpus / 10).astype(np.int64)
    ratio = np.array([round(x, 2) for x in (result.allocated / gpus / 10).tolist()])
    out: dict[int, float] = {}
    for b in np.unique(bins).tolist():
        out[int(b)] = float(np.round(ratio[bins == b].mean(), 2))
    return out
