"""NodeResourcesBalancedAllocation (PreScore, Score): prefer nodes whose resource use stays balanced.

For the configured resources (default cpu and memory) the fraction ``requested / allocatable`` is
computed per resource (capped at 1), and ``S = int((1 - std(fractions)) * 100)`` (for two
resources std is ``|f1 - f2| / 2``; resources the node lacks, and extended resources the pod does
not request, are left out). The score follows the release (``Handle.kube_version``):

* kube-scheduler 1.35: ``S`` after placing the pod;
* from 1.36: how much placing the pod improves the balance,
  ``50 + (50 + S(with the pod) - S(without it)) / 2`` (Go's integer division; both ``S`` are in
  [50, 100], so the score is in [50, 100], 75 when the balance does not change).

Requested amounts here are the plain requests (no 100m/200Mi defaults), as upstream. Best-effort
pods (requesting none of the resources) skip this plugin, so they do not pile onto one node
(k/k#129138). Reads: the batch's allocatable and requested amounts (``NodeBatch`` accessors),
the pod's requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pysched.framework import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    Handle,
    NodeBatch,
    PodInfo,
    PreScorePlugin,
    ScorePlugin,
    Status,
)
from pysched.framework.api import is_scalar
from pysched.plugins.helper.resources import ResourceSpec, default_resource_specs, validate_resource_specs

KEY = "NodeResourcesBalancedAllocation/preScore"
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Int64Array = npt.NDArray[np.int64]


@dataclass
class BalancedAllocationArgs:
    """``resources``: the resources to balance (default cpu and memory); every weight must be 1."""
    KIND = "NodeResourcesBalancedAllocationArgs"

    resources: list[ResourceSpec] = field(default_factory=default_resource_specs)

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resource_specs()

    def validate(self, path: str) -> None:
        validate_resource_specs(self.resources, f"{path}.resources", weight_range=(1, 1))


def balanced_score(fractions: list[FloatArray], valid: list[BoolArray], n: int) -> Int64Array:
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


def improvement_score(with_pod: Int64Array, without_pod: Int64Array) -> Int64Array:
    """kube-scheduler 1.36's ``balancedResourceScorer``: ``MaxNodeScore/2 + (MaxNodeScore/2 +
    with_pod - without_pod) / 2``, dividing as Go does (towards zero)."""
    half = MAX_NODE_SCORE // 2
    num = half + with_pod - without_pod
    return half + np.sign(num) * (np.abs(num) // 2)


class NodeResourcesBalancedAllocation(PreScorePlugin[BalancedAllocationArgs], ScorePlugin[BalancedAllocationArgs]):
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: BalancedAllocationArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.resources = [r.name for r in a.resources]

    def _requests(self, pod: PodInfo) -> list[tuple[str, int]]:
        return [(name, int(pod.requests.get(name, 0))) for name in self.resources]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        reqs = self._requests(pod)
        if all(q == 0 for _, q in reqs):
            return Status(Code.SKIP)
        state.write(KEY, reqs)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Int64Array:
        reqs: list[tuple[str, int]] = state.get(KEY) or self._requests(pod)
        improvement = self.handle.kube_version >= (1, 36)
        with_pod: list[FloatArray] = []
        without_pod: list[FloatArray] = []
        valid: list[BoolArray] = []
        for name, q in reqs:
            if (q == 0 and is_scalar(name)) or name == "pods":
                continue
            if not nodes.has_resource(name):
                continue
            alloc = nodes.allocatable(name)
            has = alloc > 0
            # Nodes without the resource divide by 1 and are masked out by ``has``.
            denom = np.where(has, alloc, 1)
            used = nodes.requested(name)
            with_pod.append(np.minimum((used + q) / denom, 1.0))
            if improvement:
                without_pod.append(np.minimum(used / denom, 1.0))
            valid.append(has)
        n = len(nodes)
        after = balanced_score(with_pod, valid, n)
        if not improvement:
            return after
        return improvement_score(after, balanced_score(without_pod, valid, n))
