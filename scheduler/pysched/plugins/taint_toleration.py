"""TaintToleration (Filter, PreScore, Score): taints repel pods that do not tolerate them.

Filter: a node with a ``NoSchedule`` or ``NoExecute`` taint that none of the pod's tolerations
tolerates is rejected with ``node(s) had untolerated taint(s)`` (UnschedulableAndUnresolvable;
the wording of kube-scheduler 1.35, which no longer prints the taint). Toleration matching: an
empty effect matches every effect, an empty key with ``Exists`` matches every taint, ``Equal``
(or no operator) compares values, ``Exists`` ignores them, ``Gt``/``Lt`` compare integers only
when ``comparisonOperators`` is enabled (kube-scheduler's alpha gate, off by default);
``tolerationSeconds`` does not matter for scheduling.

Score: counts the node's ``PreferNoSchedule`` taints the pod does not tolerate (tolerations with
an empty or PreferNoSchedule effect count), normalised in reverse so fewer taints score higher.

Reads: node ``spec.taints`` (via the batch's taint classes: each distinct taint list is
checked once per pod), pod ``spec.tolerations``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pysched.framework import (
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PodInfo,
    PreScorePlugin,
    ScorePlugin,
    Status,
)
from pysched.framework.api import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    find_untolerated_taint,
    tolerates_taint,
)
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.normalize import default_normalize
from pysched.plugins.helper.taints import per_taint_class, untolerated_mask

REASON = "node(s) had untolerated taint(s)"
PRE_SCORE_KEY = "TaintToleration/preScore"


@dataclass
class TaintTolerationArgs:
    """``comparisonOperators``: let ``Gt``/``Lt`` tolerations compare integer taint values."""
    KIND = "TaintTolerationArgs"

    comparison_operators: bool = False


def _scoring_tolerations(pod: PodInfo) -> tuple[Toleration, ...]:
    """The tolerations that count for scoring: empty or PreferNoSchedule effect."""
    return tuple(t for t in pod.tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


class TaintToleration(FilterPlugin[TaintTolerationArgs], PreScorePlugin[TaintTolerationArgs],
                      ScorePlugin[TaintTolerationArgs], EnqueueExtensions):
    name = "TaintToleration"

    def __init__(self, args: TaintTolerationArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.cmp = self.args.comparison_operators

    # -- filter --------------------------------------------------------------------------------

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        ok = ~untolerated_mask(nodes, pod.tolerations, self.cmp)
        return FilterResult.from_mask(ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        state.write(PRE_SCORE_KEY, _scoring_tolerations(pod))
        return None

    def _count(self, taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> int:
        return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE
                   and not tolerates_taint(tolerations, t, self.cmp))

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        if len(nodes.taint_lists) == 1:
            return np.zeros(len(nodes), dtype=np.int64)
        cached = state.get(PRE_SCORE_KEY)
        tolerations: tuple[Toleration, ...] = cached if cached is not None else _scoring_tolerations(pod)
        per_class = per_taint_class(nodes, "score", self.cmp, tolerations,
                                    lambda taints: self._count(taints, tolerations), np.int64)
        scores: np.ndarray = per_class[nodes.taint_class_ids()]
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch,
                        scores: np.ndarray) -> Status | None:
        default_normalize(scores, reverse=True)
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), self.schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint"), self.schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration"), _pod_itself))

    # -- queueing hints (upstream's isSchedulableAfterNodeChange / ...PodTolerationChange) ---------

    def _untolerated(self, node: NodeSpec, pod: PodInfo) -> bool:
        return find_untolerated_taint(node.taints, pod.tolerations, (NO_SCHEDULE, NO_EXECUTE), self.cmp) is not None

    def schedulable_after_node_change(self, pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
        """Requeue when the node (new, or updated) no longer has a taint the pod does not tolerate
        where it had one before (an added node: before counts as untolerated)."""
        if new is None:
            return False
        was = True if old is None else self._untolerated(old, pod)
        return was and not self._untolerated(new, pod)


def _pod_itself(pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
    """A toleration change requeues only the pod whose tolerations changed."""
    return new is not None and new.uid == pod.uid
