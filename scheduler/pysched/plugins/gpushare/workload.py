"""FGD's target workload and its fragmentation measure.

The target workload is a set of pod classes - (CPU, GPU share per GPU, GPU count, GPU models) - each
with its share of the pods. ``TargetWorkload`` learns it from the pods the scheduler sees (each pod
counted once, when it is first seen: online, never from pods still to come): the classes most frequent
first, up to ``coverage`` of the pods (FGD's "typical pods", 95 %), refreshed as the counts grow by a
tenth. Or it is stated in the configuration.

``Fragmentation.measure`` is FGD's F(n): for each class, the GPU share of node n that a pod of the
class could not use - all of the node's free share when the class cannot run there at all (no
GPU asked, a model it does not accept, too few GPUs with enough free share, or too little CPU),
otherwise the free share of the GPUs too small for it - weighted by the class's share. NumPy over a
batch of node states at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pysched.plugins.gpushare.ask import GPUAsk

ClassKey = tuple[int, int, int, tuple[str, ...]]     # (milli CPU, GPU milli, GPU count, models)


@dataclass(frozen=True)
class Parts:
    """``Fragmentation.parts``: per node state and distinct GPU share asked, the GPUs with at least
    that share free (``fits``) and the free share of the others (``small``); all free share (``lsum``)."""
    fits: npt.NDArray[np.int64]
    small: npt.NDArray[np.int64]
    lsum: npt.NDArray[np.int64]


@dataclass(frozen=True)
class Classes:
    cpu: npt.NDArray[np.int64]
    milli: npt.NDArray[np.int64]
    count: npt.NDArray[np.int64]
    weight: npt.NDArray[np.float64]       # sums to 1
    models: tuple[tuple[str, ...], ...]

    def __len__(self) -> int:
        return len(self.cpu)


def most_frequent(counts: Mapping[ClassKey, float], coverage: float) -> list[tuple[ClassKey, float]]:
    """The most frequent classes (ties: larger CPU, GPU share, count, models first) until they
    cover ``coverage`` of the pods counted, with their counts."""
    total = sum(counts.values())
    items = sorted(counts.items(), key=lambda kv: (-kv[1], -kv[0][0], -kv[0][1], -kv[0][2],
                                                   tuple(tuple(-ord(ch) for ch in m) for m in kv[0][3])))
    kept: list[tuple[ClassKey, float]] = []
    acc = 0.0
    for key, c in items:
        kept.append((key, c))
        acc += c
        if acc >= coverage * total - 1e-9:
            break
    return kept


def typical(counts: dict[ClassKey, float], coverage: float) -> Classes | None:
    """``most_frequent``'s classes as arrays, weighted by their counts."""
    if sum(counts.values()) <= 0:
        return None
    kept = most_frequent(counts, coverage)
    s = sum(c for _, c in kept)
    return Classes(np.array([k[0] for k, _ in kept], dtype=np.int64), np.array([k[1] for k, _ in kept], dtype=np.int64),
                   np.array([k[2] for k, _ in kept], dtype=np.int64), np.array([c / s for _, c in kept]),
                   tuple(k[3] for k, _ in kept))


class TargetWorkload:
    """Class counts of the pods seen, and the typical classes drawn from them (``classes``,
    ``version`` bumps when they change)."""

    def __init__(self, coverage: float, window: int, stated: Iterable[tuple[ClassKey, float]] = ()) -> None:
        self.coverage = coverage
        self.window = window
        self.counts: dict[ClassKey, float] = {}
        self.seen: set[str] = set()
        self.learning = True
        self.classes: Classes | None = None
        self.version = 0
        self._at_refresh = 0.0
        self._total = 0.0
        stated = list(stated)
        if stated:
            self.learning = False
            self.classes = typical(dict(stated), 1.0)
            self.version = 1

    def observe(self, uid: str, milli_cpu: int, ask: GPUAsk) -> None:
        if not self.learning or uid in self.seen:
            return
        self.seen.add(uid)
        key = (milli_cpu, ask.milli, ask.count, tuple(sorted(ask.models)))
        self.counts[key] = self.counts.get(key, 0.0) + 1.0
        self._total += 1.0
        if self._total > self.window:
            # Older pods fade out: every count halves (and the pods remembered are forgotten).
            self.counts = {k: v / 2 for k, v in self.counts.items() if v >= 1.0}
            self._total = sum(self.counts.values())
            self._at_refresh = 0.0
            self.seen.clear()
        # Grown by a tenth (compared exactly: ``1.1 * n`` is above 1.1 n in floating point for many n).
        if self._total * 10 >= self._at_refresh * 11 or self._total - self._at_refresh >= 1000:
            self.classes = typical(self.counts, self.coverage)
            self._at_refresh = self._total
            self.version += 1


class Fragmentation:
    """F(n) against one set of classes, for nodes whose models are codes into ``models``."""

    def __init__(self, classes: Classes, models: list[str]) -> None:
        self.classes = classes
        self.models = list(models)
        self.uniq, self.col = np.unique(classes.milli, return_inverse=True)
        self.no_gpu = classes.milli == 0
        # ok[code + 1, class]: a node of that model (row 0: no model label) is one the class accepts.
        ok = np.ones((len(models) + 1, len(classes)), dtype=bool)
        for j, wanted in enumerate(classes.models):
            if wanted:
                ok[0, j] = False
                for code, m in enumerate(models):
                    ok[code + 1, j] = m in wanted
        self.ok = ok
        self.ok_gpu = ok & ~self.no_gpu[None, :]       # ... and the class asks for a GPU

    def parts(self, left: npt.NDArray[np.int64]) -> Parts:
        """What F needs of the GPUs' free shares ``left`` (S, W) (0 past a node's GPUs), per node
        and per distinct GPU share the classes ask (``uniq``, U of them): how many GPUs have at
        least that share free (``fits``, (S, U)), the free share of the GPUs with less (``small``,
        (S, U)), and all the free share (``lsum``, (S,)). Integers: changing one GPU's share changes
        them by exact amounts (``policies.fgd`` scores a pod's candidate GPUs that way)."""
        ge = left[:, :, None] >= self.uniq[None, None, :]          # (S, W, U)
        fits: npt.NDArray[np.int64] = ge.sum(axis=1)
        small: npt.NDArray[np.int64] = np.where(ge, 0, left[:, :, None]).sum(axis=1)
        lsum: npt.NDArray[np.int64] = left.sum(axis=1)
        return Parts(fits, small, lsum)

    def combine(self, cpu_left: npt.NDArray[np.int64], parts: Parts,
                model: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """F per node state from its ``parts``, ``cpu_left`` (S,) and ``model`` (S,) codes (-1: none)."""
        c = self.classes
        runs = (parts.fits[:, self.col] >= c.count[None, :]) & (cpu_left[:, None] >= c.cpu[None, :])
        runs &= self.ok_gpu[model + 1]
        f = np.where(runs, parts.small[:, self.col], parts.lsum[:, None])
        out: npt.NDArray[np.float64] = f @ c.weight
        return out

    def measure(self, cpu_left: npt.NDArray[np.int64], left: npt.NDArray[np.int64],
                model: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """F per node state: ``cpu_left`` (S,), ``left`` (S, W) free share per GPU (0 past the
        node's GPUs), ``model`` (S,) codes (-1: none)."""
        return self.combine(cpu_left, self.parts(left), model)
