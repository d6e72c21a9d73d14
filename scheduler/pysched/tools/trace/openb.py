"""The openb trace format and one run's arrival sequence, as the FGD simulator's protocol builds it.

Nodes: ``openb_node_list_gpu_node.csv`` (``sn,cpu_milli,memory_mib,gpu,model``). Pods:
``openb_pod_list_<trace>.csv`` (``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...``; no
``gpu_spec`` column means any model). A run (trace, seed): the pods sorted by name, shuffled with
the seed, then copies drawn at random appended until the GPU demand reaches ``tune`` (1.3) times the
cluster's GPUs - or, when the trace already asks for more, pods removed at random until it does not;
then each node gets a random rank (ties between nodes go to the lowest rank), named
``<rank>-<sn>`` so the name order is the rank order. NumPy's generator seeded with the seed draws
all of it (the simulator uses Go's math/rand: the same procedure, not the same draws - compare
means over seeds, not single seeds).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pysched.plugins.gpushare.workload import ClassKey, most_frequent

NODE_FILE = "openb_node_list_gpu_node.csv"
# The 17 variants the simulator published results for (the directory holds a few more).
TRACES = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80",
          "gpushare100", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
          "multigpu40", "multigpu50")
FULL = 1000


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, row and column."""


@dataclass(frozen=True)
class TraceNode:
    sn: str
    milli_cpu: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    milli_cpu: int
    memory_mib: int
    gpu_milli: int        # per GPU; 0 without GPUs
    gpu_count: int
    models: tuple[str, ...]

    @property
    def gpu_total(self) -> int:
        return self.gpu_milli * self.gpu_count


def _int(row: dict[str, str], col: str, where: str) -> int:
    try:
        return int(row[col])
    except (KeyError, TypeError, ValueError):
        raise TraceError(f"{where}: column {col!r}: {row.get(col)!r} is not an integer") from None


def read_nodes(path: Path) -> list[TraceNode]:
    """The nodes, sorted by serial number."""
    out = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            where = f"{path}:{i}"
            out.append(TraceNode(row.get("sn") or f"node-{i}", _int(row, "cpu_milli", where),
                                 _int(row, "memory_mib", where), _int(row, "gpu", where), row.get("model") or ""))
    if not out:
        raise TraceError(f"{path}: no nodes")
    return sorted(out, key=lambda n: n.sn)


def read_pods(path: Path) -> list[TracePod]:
    """The pods, sorted by name (the order a run shuffles)."""
    out = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            where = f"{path}:{i}"
            k = _int(row, "num_gpu", where)
            milli = min(max(_int(row, "gpu_milli", where), 0), FULL) if k else 0
            if k < 0:
                raise TraceError(f"{where}: column 'num_gpu': {k} is negative")
            models = tuple(m for m in (row.get("gpu_spec") or "").split("|") if m) if k else ()
            name = row.get("name")
            if not name:
                raise TraceError(f"{where}: column 'name': missing")
            out.append(TracePod(name, max(_int(row, "cpu_milli", where), 0), _int(row, "memory_mib", where),
                                milli if k and milli else 0, k if milli else 0, models))
    if not out:
        raise TraceError(f"{path}: no pods")
    return sorted(out, key=lambda p: p.name)


def target_workload(pods: list[TracePod], coverage: float = 0.95) -> list[tuple[ClassKey, int]]:
    """The simulator's target workload for FGD (its "typical pods"): the classes of the trace's own
    pods, most frequent first, until they cover ``coverage`` of them - for the published FGD only;
    pysched's default learns it from the pods it sees instead."""
    cnt = Counter((p.milli_cpu, p.gpu_milli, p.gpu_count, tuple(sorted(p.models))) for p in pods)
    return [(key, int(c)) for key, c in most_frequent(cnt, coverage)]


@dataclass(frozen=True)
class Run:
    """One run's arrival (``order``: indices into the pods, copies repeated) and node ranks."""
    order: list[int]
    rank: list[int]          # rank of each node (in ``read_nodes`` order)


def build_run(pods: list[TracePod], nodes: list[TraceNode], seed: int, tune: float = 1.3) -> Run:
    rng = np.random.default_rng(seed)
    n = len(pods)
    order = [int(i) for i in rng.permutation(n)]
    demand = sum(p.gpu_total for p in pods)
    target = tune * sum(nd.gpus for nd in nodes) * FULL
    if demand < target:
        if not any(p.gpu_milli for p in pods):
            raise TraceError("no pod asks for GPUs: the arrival cannot be tuned to the cluster's GPUs")
        while True:
            i = int(rng.integers(n))
            if demand + pods[i].gpu_milli > target:    # the simulator's test: one GPU's share
                break
            order.append(i)
            demand += pods[i].gpu_total
    else:
        while demand > target:
            j = int(rng.integers(len(order)))
            demand -= pods[order.pop(j)].gpu_total
    rank = [int(r) for r in rng.permutation(len(nodes))]
    return Run(order, rank)
