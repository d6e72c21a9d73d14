"""NodeResourcesBalancedAllocation (PreScore, Score): prefer nodes whose resource use stays balanced.

For the configured resources (default cpu and memory) the fraction ``requested / allocatable``
after placing the pod is computed per resource (capped at 1); the score is
``(1 - std(fractions)) * 100`` (for two resources std is ``|f1 - f2| / 2``). Requested amounts
here are the plain requests (no 100m/200Mi defaults), as upstream. Best-effort pods (requesting
none of the resources) skip this plugin, so they do not pile onto one node (k/k#129138).
Reads: NodeTable ``alloc``/``req`` columns, the pod's requests.
"""

from __future__ import annotations

import numpy as np

from pysched.framework.args import get_list, strict
from pysched.framework.interface import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from pysched.framework.status import Code, Status
from pysched.apis.core.resources import is_scalar

from pysched.plugins.helper.resources import parse_resource_specs

KEY = "NodeResourcesBalancedAllocation/preScore"


class BalancedAllocationArgs:
    def __init__(self, resources=(("cpu", 1), ("memory", 1))):
        self.resources = list(resources)

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "BalancedAllocationArgs":
        raw = strict(raw, path, ("resources",), kind="NodeResourcesBalancedAllocationArgs")
        res = parse_resource_specs(get_list(raw, "resources", path), f"{path}.resources",
                                   default=[("cpu", 1), ("memory", 1)], weight_range=(1, 1))
        return cls(res)

    def to_dict(self) -> dict:
        return {"resources": [{"name": n, "weight": w} for n, w in self.resources]}


def balanced_score(fractions: list[np.ndarray], valid: list[np.ndarray], n: int) -> np.ndarray:
    """(1 - std) * 100 over the resources each node has (fractions already capped at 1)."""
    if not fractions:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    if len(fractions) == 2:
        # The common cpu+memory case: std of two values is half their distance; with one (or no)
        # resource present on a node the std is 0.
        both = valid[0] & valid[1]
        std = np.where(both, np.abs(fractions[0] - fractions[1]) * 0.5, 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    f = np.stack(fractions)             # [R, n]
    v = np.stack(valid).astype(bool)
    cnt = v.sum(axis=0)
    fz = np.where(v, f, 0.0)
    std = np.zeros(n, dtype=np.float64)
    two = cnt == 2
    if two.any():
        # the two present fractions: sum of present = a + b; pick difference via sorting present values
        first = np.where(v, fz, np.inf).min(axis=0)
        second = np.where(v, fz, -np.inf).max(axis=0)
        std = np.where(two, np.abs(first - second) / 2, std)
    more = cnt > 2
    if more.any():
        mean = fz.sum(axis=0) / np.maximum(cnt, 1)
        var = (np.where(v, (fz - mean) ** 2, 0.0)).sum(axis=0) / np.maximum(cnt, 1)
        std = np.where(more, np.sqrt(var), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    name = "NodeResourcesBalancedAllocation"
    Args = BalancedAllocationArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or BalancedAllocationArgs(), handle)

    def _requests(self, pod):
        return [(name, pod.requests.get(name, 0)) for name, _ in self.args.resources]

    def pre_score(self, state, pod, nodes):
        reqs = self._requests(pod)
        if all(q == 0 for _, q in reqs):
            return Status(Code.SKIP)
        state.write(KEY, reqs)
        return None

    def _columns(self, table, slots, reqs):
        fractions, valid = [], []
        for name, q in reqs:
            if (q == 0 and is_scalar(name)) or name == "pods":
                continue
            col = table.res_index.get(name)
            if col is None:
                continue
            alloc = table.alloc[slots, col]
            has = alloc > 0
            # Nodes without the resource divide by 1 and are masked out by ``has``.
            frac = (table.req[slots, col] + q) / np.where(has, alloc, 1)
            fractions.append(np.minimum(frac, 1.0))
            valid.append(has)
        return fractions, valid

    def score_nodes(self, state, pod, nodes):
        reqs = state.get(KEY) or self._requests(pod)
        f, v = self._columns(nodes.table, nodes.slots, reqs)
        return balanced_score(f, v, len(nodes))

    def score(self, state, pod, node):
        reqs = state.get(KEY) or self._requests(pod)
        fractions = []
        for name, q in reqs:
            if (q == 0 and is_scalar(name)) or name == "pods":
                continue
            alloc = node.allocatable.get(name, 0)
            if alloc == 0:
                continue
            fractions.append(min((node.requested.get(name, 0) + q) / alloc, 1.0))
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = (sum((x - mean) ** 2 for x in fractions) / len(fractions)) ** 0.5
        else:
            std = 0.0
        return int((1 - std) * MAX_NODE_SCORE)
