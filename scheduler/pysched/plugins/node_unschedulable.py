"""NodeUnschedulable (Filter): keeps pods off cordoned nodes (``spec.unschedulable: true``).

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint may still go there,
as upstream. Reads: the node's ``spec.unschedulable``, the pod's tolerations.
Reason: ``node(s) were unschedulable`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

from pysched.framework import (
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    PodInfo,
)
from pysched.framework.api import NO_SCHEDULE, Taint, tolerates_taint
from pysched.framework.nodeinfo import NodeSpec

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
REASON = "node(s) were unschedulable"


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    name = "NodeUnschedulable"

    def _tolerated(self, pod: PodInfo) -> bool:
        return tolerates_taint(pod.tolerations, UNSCHEDULABLE_TAINT)

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        unsched = nodes.unschedulable()
        if not unsched.any() or self._tolerated(pod):
            return FilterResult.all_pass(len(nodes))
        return FilterResult.from_mask(~unsched, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), _schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint"), _schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration"), self._after_pod_toleration_change))

    def _after_pod_toleration_change(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """Only the pod itself, and only once it tolerates the unschedulable taint."""
        return new is not None and new.uid == pod.uid and self._tolerated(new)


def _schedulable_after_node_change(pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
    """A node added schedulable, or one that stopped being unschedulable (upstream's
    isSchedulableAfterNodeChange)."""
    if new is None:
        return False
    return not new.unschedulable if old is None else (old.unschedulable and not new.unschedulable)
