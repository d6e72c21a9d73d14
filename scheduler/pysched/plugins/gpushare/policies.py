"""The GPU policies: each scores candidate nodes for a pod (integers 0..100, NumPy over the nodes)
and chooses the GPU(s) the pod gets on the chosen node.

The scores are those the FGD paper's simulator publishes (the openb trace's protocol):
- ``FGD``: int(100 * sigmoid(dF / 1000)), dF the drop of the node's fragmentation F when the pod is
  placed; a pod sharing a GPU is scored on its best GPU of the node, and gets that GPU.
- ``BestFit``: int(100 * (1 - r)), r the mean of the CPU and GPU share left after the pod,
  normalised by the largest node's.
- ``DotProd``: int(100 * (1 - u.v / 2)), u the node's free (CPU, GPU), v the pod's, normalised.
- ``GpuPacking``: GPUs already in use first, then whole free GPUs of used nodes, then empty nodes.
- ``GpuClustering``: nodes running only pods of the same kind (shared, or k whole GPUs) first.
- ``Random``: one feasible node at random.
A pod with no GPU ask scores 0 everywhere under GpuPacking and GpuClustering, as published.
Whole-GPU pods get the lowest-index free GPUs; a pod sharing a GPU gets, except under FGD and
Random, the GPU with the least free share that fits (ties: lowest index).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pysched.plugins.gpushare.args import BEST_FIT, DOT_PROD, FGD, GPU_CLUSTERING, GPU_PACKING, RANDOM
from pysched.plugins.gpushare.ask import FULL, GPUAsk
from pysched.plugins.gpushare.workload import Fragmentation, Parts

I64 = npt.NDArray[np.int64]


@dataclass
class NodeState:
    """Candidate nodes as the policies see them: per node its GPUs' free share (``left``, padded
    with 0), GPU count, model code, CPU left (allocatable - requested), and - FGD - its F now and
    the ``Fragmentation.parts`` of ``left`` (computed from it when absent); ``tags``
    (GpuClustering): the kinds of GPU pods it runs."""
    left: I64
    count: I64
    model: I64
    cpu_left: I64
    frag: npt.NDArray[np.float64] | None = None
    tags: I64 | None = None
    parts: Parts | None = None


@dataclass(frozen=True)
class Scale:
    """The largest node's CPU (millicores) and GPU share (GPUs x 1000): the normalisers."""
    cpu: int
    gpu: int


def _valid(s: NodeState) -> npt.NDArray[np.bool_]:
    return np.arange(s.left.shape[1])[None, :] < s.count[:, None]


def fgd_score(delta: npt.NDArray[np.float64]) -> I64:
    """int(100 * sigmoid(delta / 1000)): 50 for no change, towards 100 as F drops."""
    out: I64 = np.floor(100.0 / (1.0 + np.exp(-delta / 1000.0))).astype(np.int64)
    return out


def fgd(s: NodeState, ask: GPUAsk, cpu: int, frag: Fragmentation) -> tuple[I64, I64]:
    """Per node: the FGD score and, for a pod sharing a GPU, the GPU it would get (else -1).

    F after the pod is F of the node's parts after it, and a GPU whose free share goes from ``o``
    to ``v`` changes the parts by exact integer amounts (it leaves ``fits`` for the shares in
    (v, o], and ``small`` loses ``o`` where o < share and gains ``v`` where v < share), so each
    candidate costs O(U) from the parts of the node now instead of O(W x U) from its GPUs; and a
    pod sharing a GPU is scored once per distinct free share on a node, not once per GPU."""
    assert s.frag is not None
    n = len(s.count)
    device = np.full(n, -1, dtype=np.int64)
    now = s.parts if s.parts is not None else frag.parts(s.left)
    u = frag.uniq[None, :]
    if not ask.sharing:
        # Whole GPUs: the node's ``count`` lowest-index free GPUs (as many as it has) go from FULL to 0.
        taken = (np.minimum(ask.count, ((s.left == FULL) & _valid(s)).sum(axis=1)) if ask.count
                 else np.zeros(n, dtype=np.int64))[:, None]
        d_fits = (0 >= u).astype(np.int64) - (FULL >= u)
        d_small = -np.where(FULL < u, FULL, 0)
        after = Parts(now.fits + taken * d_fits, now.small + taken * d_small, now.lsum - FULL * taken[:, 0])
        return fgd_score(s.frag - frag.combine(s.cpu_left - cpu, after, s.model)), device
    node, dev = np.nonzero((s.left >= ask.milli) & _valid(s))
    # GPUs of one node with the same free share leave the node in the same state: each such set is
    # scored once, as its lowest-index GPU (the first of it; sorted back into (node, GPU) order).
    keep = np.sort(np.unique(node * (FULL + 1) + s.left[node, dev], return_index=True)[1])
    node, dev = node[keep], dev[keep]
    o = s.left[node, dev][:, None]
    v = o - ask.milli
    after = Parts(now.fits[node] - (o >= u) + (v >= u),
                  now.small[node] - np.where(o < u, o, 0) + np.where(v < u, v, 0),
                  now.lsum[node] - ask.milli)
    scores = fgd_score(s.frag[node] - frag.combine(s.cpu_left[node] - cpu, after, s.model[node]))
    best = np.full(n, -1, dtype=np.int64)
    np.maximum.at(best, node, scores)
    # The first (lowest-index) GPU reaching the node's best score: candidates come in (node, GPU) order.
    top = np.flatnonzero(scores == best[node])
    nodes_top, first = np.unique(node[top], return_index=True)
    device[nodes_top] = dev[top[first]]
    return np.maximum(best, 0), device


def best_fit(s: NodeState, ask: GPUAsk, cpu: int, scale: Scale) -> I64:
    lsum = s.left.sum(axis=1)
    r = 0.5 * (s.cpu_left - cpu) / scale.cpu + 0.5 * (lsum - ask.total) / scale.gpu
    out: I64 = np.trunc(100.0 * (1.0 - r)).astype(np.int64)
    return np.clip(out, 0, 100)


def dot_prod(s: NodeState, ask: GPUAsk, cpu: int, scale: Scale) -> I64:
    lsum = s.left.sum(axis=1)
    dot = (s.cpu_left / scale.cpu) * (cpu / scale.cpu) + (lsum / scale.gpu) * (ask.total / scale.gpu)
    out: I64 = np.trunc(100.0 * (1.0 - dot / 2.0)).astype(np.int64)
    return np.clip(out, 0, 100)


def _tightest(s: NodeState, milli: int) -> tuple[I64, I64]:
    """Per node: the GPU with the least free share >= ``milli`` (lowest index on ties) and its share
    (-1, -1 when none)."""
    masked = np.where((s.left >= milli) & _valid(s), s.left, FULL + 1)
    dev = masked.argmin(axis=1)
    share = masked[np.arange(len(dev)), dev]
    none = share > FULL
    return np.where(none, -1, dev), np.where(none, -1, share)


def gpu_packing(s: NodeState, ask: GPUAsk) -> I64:
    n = len(s.count)
    if not ask.wants_gpu:
        return np.zeros(n, dtype=np.int64)
    free = ((s.left == FULL) & _valid(s)).sum(axis=1)
    if ask.sharing:
        _, share = _tightest(s, ask.milli)
        used = np.where(share == FULL, 49, np.maximum(100 - (share * 100 // FULL) // 10, 50))
    else:
        used = np.full(n, max(50 - ask.count, 33), dtype=np.int64)
    out: I64 = np.where(free == s.count, 33 - s.count, used).astype(np.int64)
    return out


def gpu_clustering(s: NodeState, ask: GPUAsk, scale: Scale, tag: int) -> I64:
    n = len(s.count)
    if not ask.wants_gpu:
        return np.zeros(n, dtype=np.int64)
    assert s.tags is not None
    base = 25 * (scale.gpu - s.left.sum(axis=1)) // scale.gpu
    kinds = (s.tags > 0).sum(axis=1)
    mine = s.tags[:, tag] > 0
    bonus = np.where(mine, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
    out: I64 = (base + bonus).astype(np.int64)
    return out


def random_node(n: int, rng: random.Random) -> I64:
    out = np.zeros(n, dtype=np.int64)
    if n:
        out[rng.randrange(n)] = 100
    return out


def score(policy: str, s: NodeState, ask: GPUAsk, cpu: int, *, scale: Scale, frag: Fragmentation | None,
          tag: int, rng: random.Random) -> I64:
    if policy == FGD:
        assert frag is not None
        return fgd(s, ask, cpu, frag)[0]
    if policy == BEST_FIT:
        return best_fit(s, ask, cpu, scale)
    if policy == DOT_PROD:
        return dot_prod(s, ask, cpu, scale)
    if policy == GPU_PACKING:
        return gpu_packing(s, ask)
    if policy == GPU_CLUSTERING:
        return gpu_clustering(s, ask, scale, tag)
    if policy == RANDOM:
        return random_node(len(s.count), rng)
    return np.zeros(len(s.count), dtype=np.int64)


def choose_devices(policy: str, s: NodeState, ask: GPUAsk, cpu: int, *, frag: Fragmentation | None,
                   rng: random.Random) -> tuple[int, ...] | None:
    """The GPUs the pod gets on the one node of ``s`` (None: they do not fit)."""
    left, count = s.left[0], int(s.count[0])
    if not ask.wants_gpu:
        return ()
    fit = [d for d in range(count) if left[d] >= ask.milli]
    if len(fit) < ask.count:
        return None
    if not ask.sharing:
        return tuple(fit[:ask.count])
    if policy == RANDOM:
        return (fit[rng.randrange(len(fit))],)
    if policy == FGD and frag is not None:
        return (int(fgd(s, ask, cpu, frag)[1][0]),)
    dev, _ = _tightest(s, ask.milli)
    return (int(dev[0]),)
