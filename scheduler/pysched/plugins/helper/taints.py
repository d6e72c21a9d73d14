"""Taint checks over a NodeBatch, once per distinct taint list (shared by TaintToleration and
PodTopologySpread's node inclusion policy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pysched.framework import NodeBatch
from pysched.framework.api import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, find_untolerated_taint

FILTER_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


def per_taint_class(nodes: NodeBatch, kind: str, comparison_operators: bool, tolerations: tuple[Toleration, ...],
                    fn: Callable[[tuple[Taint, ...]], Any], dtype: Any) -> np.ndarray:
    """``fn(taints)`` for every distinct taint list of the snapshot, memoised per tolerations;
    the result is indexed by taint class id (``NodeBatch.taint_class_ids``)."""
    taint_sets = nodes.taint_lists
    memo = nodes.memo.setdefault((f"TaintToleration/{kind}", comparison_operators), {})
    cached = memo.get(tolerations)
    n = len(taint_sets)
    if cached is None or len(cached) < n:
        cached = cached or []
        for taints in taint_sets[len(cached):]:
            cached.append(fn(taints))
        if len(memo) > 1024:
            memo.clear()
        memo[tolerations] = cached
    return np.fromiter(cached, dtype=dtype, count=n)


def untolerated_mask(nodes: NodeBatch, tolerations: tuple[Toleration, ...],
                     comparison_operators: bool = False) -> np.ndarray:
    """True where the node has a NoSchedule/NoExecute taint the tolerations do not tolerate."""
    if len(nodes.taint_lists) == 1:
        return np.zeros(len(nodes), dtype=bool)
    ok = per_taint_class(nodes, "filter", comparison_operators, tolerations,
                         lambda taints: find_untolerated_taint(taints, tolerations, FILTER_EFFECTS,
                                                               comparison_operators) is None, bool)
    untolerated: np.ndarray = ~ok[nodes.taint_class_ids()]
    return untolerated
