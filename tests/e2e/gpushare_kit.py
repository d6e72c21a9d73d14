"""A small openb-like GPU cluster and trace, generated from a seed (never rows of the real trace),
and its offline replay: what ``pysched trace`` would decide for it, pod by pod.

The cluster: nodes of the trace's GPU models (``alibabacloud.com/gpu-card-model``) with 1, 2, 4 or
8 GPUs (allocatable ``alibabacloud.com/gpu-count``), named in the order they are added (the node
table's order, which the seeded tie-break draws among). The trace: pods of a few recurring classes
- CPU-only, sharing one GPU (``gpu-milli`` 100..900), whole 1/2/4/8 GPUs, a third of the GPU ones
asking for particular models - arriving until their GPU demand is ``tune`` times the cluster's GPUs,
so the last ones fail. The objects are ``pysched.tools.trace.replay``'s: the live test creates the
same nodes and pods the replay feeds the offline engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pysched.apis import config as configmod
from pysched.plugins.gpushare import GPUShare
from pysched.testing.objects import make_node
from pysched.tools.offline import OfflineScheduler
from pysched.tools.trace.openb import TraceNode, TracePod
from pysched.tools.trace.replay import SCHEDULER, node_name, node_object, pod_object, profile_config
from pysched_dev.livecluster import KWOK_LABEL, KWOK_MANAGED

MODELS = ("G2", "T4", "V100M16", "P100", "V100M32", "G3")
MODEL_WEIGHTS = (0.40, 0.30, 0.10, 0.10, 0.05, 0.05)
GPUS = (1, 2, 4, 8)
GPU_WEIGHTS = (0.10, 0.40, 0.10, 0.40)
CPU_BY_GPUS = {1: 64000, 2: 96000, 4: 96000, 8: 128000}
INDEX = "alibabacloud.com/gpu-index"


def cluster(rng: np.random.Generator, n: int) -> list[TraceNode]:
    out = []
    for i in range(n):
        model = str(rng.choice(MODELS, p=MODEL_WEIGHTS))
        gpus = int(rng.choice(GPUS, p=GPU_WEIGHTS))
        cpu = CPU_BY_GPUS[gpus]
        out.append(TraceNode(f"{model.lower()}-{i:02d}", cpu, cpu // 1000 * 4096, gpus, model))
    return out


KINDS = ("share", "whole1", "share", "cpu", "multi", "share", "whole1", "share", "multi", "whole1")


def _classes(rng: np.random.Generator, n: int) -> list[tuple[int, int, int, tuple[str, ...]]]:
    """``n`` pod classes (milli CPU, GPU milli per GPU, GPU count, models), every kind among them,
    in a random order (the first ones are the most frequent)."""
    out = []
    multi = 0
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        cpu = int(rng.choice((2000, 4000, 6000, 8000, 12000)))
        if kind == "cpu":
            out.append((int(rng.choice((2000, 4000, 8000, 16000))), 0, 0, ()))
            continue
        if kind == "share":
            milli, count = int(rng.integers(1, 10)) * 100, 1
        else:
            milli, count = 1000, 1 if kind == "whole1" else (2, 4, 8)[multi % 3]
            multi += kind == "multi"
        models: tuple[str, ...] = ()
        if rng.random() < 1 / 3:
            models = tuple(sorted({str(m) for m in rng.choice(MODELS[:4], size=int(rng.integers(1, 3)))}))
        out.append((cpu, milli, count, models))
    return [out[int(i)] for i in rng.permutation(n)]


def trace(rng: np.random.Generator, nodes: list[TraceNode], tune: float = 1.3, n_classes: int = 16,
          max_pods: int = 400) -> list[TracePod]:
    """Pods in arrival order, drawn from ``n_classes`` classes (Zipf-like weights) until the GPU
    demand reaches ``tune`` times the cluster's GPUs (or ``max_pods``)."""
    classes = _classes(rng, n_classes)
    weights = 1.0 / np.arange(1, n_classes + 1)
    weights /= weights.sum()
    target = tune * sum(nd.gpus for nd in nodes) * 1000
    pods: list[TracePod] = []
    demand = 0
    while demand < target and len(pods) < max_pods:
        cpu, milli, count, models = classes[int(rng.choice(n_classes, p=weights))]
        pod = TracePod(f"p{len(pods):03d}", cpu, cpu // 1000 * 2048, milli, count, models)
        pods.append(pod)
        demand += pod.gpu_total
    return pods


def kwok_node_object(node: TraceNode, rank: int) -> dict[str, Any]:
    """``replay.node_object`` for KWOK to run: its label, a hostname, no conditions (KWOK's)."""
    obj = node_object(node, rank)
    base = make_node(obj["metadata"]["name"], labels={**obj["metadata"]["labels"], KWOK_LABEL: KWOK_MANAGED})
    obj["metadata"]["labels"] = base["metadata"]["labels"]
    obj["spec"] = {}
    return obj


def nodes_in_order(nodes: list[TraceNode]) -> list[dict[str, Any]]:
    """The Node objects, rank = position: names sort in the order given (the live scheduler's
    informer lists them by name, the offline engine adds them in this order)."""
    objs = [kwok_node_object(nd, r) for r, nd in enumerate(nodes)]
    assert [o["metadata"]["name"] for o in objs] == sorted(node_name(nd, r) for r, nd in enumerate(nodes))
    return objs


def live_config(policy: str, pods: list[TracePod]) -> dict[str, Any]:
    """``replay.profile_config`` for a live scheduler (no leader election, no client throttling)."""
    cfg = profile_config(policy, pods)
    cfg.update(leaderElection={"leaderElect": False}, clientConnection={"qps": 500, "burst": 1000})
    return cfg


def live_pod(pod: TracePod) -> dict[str, Any]:
    obj = pod_object(pod, pod.name, "")
    del obj["metadata"]["uid"]
    obj["spec"]["terminationGracePeriodSeconds"] = 0
    return obj


@dataclass(frozen=True)
class Placement:
    node: str | None                   # None: unschedulable
    gpus: tuple[int, ...] | None       # the GPUs GPUShare chose (None: no GPU asked, or not placed)
    message: str = ""                  # why not, when unschedulable
    tied: int = 0                      # nodes tied at the top score (offline only)


def offline_replay(cfg: dict[str, Any], node_objs: list[dict[str, Any]], pods: list[TracePod],
                   seed: int) -> dict[str, Placement]:
    """The pods through the offline engine (one attempt each, in order, nothing leaving) with the
    live scheduler's configuration and tie-break seed."""
    sched = OfflineScheduler(configmod.parse(cfg), seed=seed)
    plugin = sched.frameworks[SCHEDULER].plugins["GPUShare"]
    assert isinstance(plugin, GPUShare)
    for obj in node_objs:
        sched.add_node(obj)
    out = {}
    for e, p in enumerate(pods):
        uid = f"u{e}"
        res = sched.schedule(pod_object(p, p.name, uid))
        tied = int((res.sampling or {}).get("tiedAtTop", 0))
        out[p.name] = Placement(res.node, plugin.devices_of(uid) if res.node else None,
                                "" if res.node else res.message, tied)
    return out
