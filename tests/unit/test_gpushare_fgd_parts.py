"""FGD's score from the parts of F (``Fragmentation.parts``/``combine``): each candidate's F after
the pod, derived from the node's parts now by the exact change of the GPU(s) it takes, is the F
measured from scratch on the node as the pod would leave it - so the scores and the GPU chosen are
those of measuring every candidate state."""

from __future__ import annotations

import numpy as np
import pytest

from pysched.plugins.gpushare import policies
from pysched.plugins.gpushare.ask import FULL, GPUAsk
from pysched.plugins.gpushare.workload import Fragmentation, typical

MODELS = ["G2", "T4", "V100"]


def fragmentation(rng: np.random.Generator) -> Fragmentation:
    counts = {}
    for _ in range(40):
        milli = int(rng.choice([0, 100, 250, 300, 500, 800, 1000]))
        count = 0 if milli == 0 else (int(rng.choice([1, 2, 4, 8])) if milli == FULL else 1)
        models = () if rng.random() < 0.7 else tuple(sorted(rng.choice(MODELS, size=int(rng.integers(1, 3)),
                                                                         replace=False)))
        counts[(int(rng.choice([1000, 4000, 16000])), milli, count, models)] = float(rng.integers(1, 30))
    classes = typical(counts, 0.95)
    assert classes is not None
    return Fragmentation(classes, MODELS)


def node_state(rng: np.random.Generator, n: int = 300, width: int = 8) -> policies.NodeState:
    count = rng.choice([0, 1, 2, 4, 8], size=n).astype(np.int64)
    left = rng.choice([0, 100, 200, 250, 500, 700, 800, FULL, FULL, FULL], size=(n, width)).astype(np.int64)
    left[np.arange(width)[None, :] >= count[:, None]] = 0
    return policies.NodeState(left, count, rng.integers(-1, len(MODELS), size=n).astype(np.int64),
                              rng.integers(0, 64000, size=n).astype(np.int64))


def measured(s: policies.NodeState, ask: GPUAsk, cpu: int, frag: Fragmentation) -> tuple[np.ndarray, np.ndarray]:
    """The scores (and GPUs) from F measured on every candidate state itself."""
    valid = np.arange(s.left.shape[1])[None, :] < s.count[:, None]
    n = len(s.count)
    if not ask.sharing:
        after = s.left.copy()
        if ask.count:
            free = (after == FULL) & valid
            after[free & (np.cumsum(free, axis=1) <= ask.count)] = 0
        return policies.fgd_score(s.frag - frag.measure(s.cpu_left - cpu, after, s.model)), np.full(n, -1)
    best, device = np.full(n, -1), np.full(n, -1)
    for i in range(n):
        for d in range(int(s.count[i])):
            if s.left[i, d] < ask.milli:
                continue
            after = s.left[i:i + 1].copy()
            after[0, d] -= ask.milli
            score = int(policies.fgd_score(s.frag[i:i + 1] - frag.measure(s.cpu_left[i:i + 1] - cpu, after,
                                                                         s.model[i:i + 1]))[0])
            if score > best[i]:
                best[i], device[i] = score, d
    return np.maximum(best, 0), device


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ask", [GPUAsk(300, 1), GPUAsk(800, 1, ("T4",)), GPUAsk(FULL, 1), GPUAsk(FULL, 2),
                                 GPUAsk(FULL, 8), GPUAsk()], ids=str)
def test_scores_from_parts_are_the_scores_of_measuring_each_candidate(seed, ask):
    rng = np.random.default_rng(seed)
    frag, s = fragmentation(rng), node_state(rng)
    s.frag = frag.measure(s.cpu_left, s.left, s.model)
    want_scores, want_devices = measured(s, ask, 2000, frag)
    got_scores, got_devices = policies.fgd(s, ask, 2000, frag)
    assert np.array_equal(got_scores, want_scores)
    assert np.array_equal(got_devices, want_devices)
    s.parts = frag.parts(s.left)                                 # the plugin's cached parts: the same
    assert np.array_equal(policies.fgd(s, ask, 2000, frag)[0], want_scores)
    assert len(set(want_scores.tolist())) > 3                    # the states are varied enough to tell


def test_parts_then_combine_is_measure():
    rng = np.random.default_rng(7)
    frag, s = fragmentation(rng), node_state(rng)
    parts = frag.parts(s.left)
    assert np.array_equal(parts.lsum, s.left.sum(axis=1))
    assert np.array_equal(frag.combine(s.cpu_left, parts, s.model), frag.measure(s.cpu_left, s.left, s.model))
