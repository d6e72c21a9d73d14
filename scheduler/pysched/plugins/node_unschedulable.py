"""NodeUnschedulable (Filter): keeps pods off cordoned nodes (``spec.unschedulable: true``).

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint may still go there,
as upstream. Reads: the node's ``spec.unschedulable``, the pod's tolerations.
Reason: ``node(s) were unschedulable`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

from pysched.framework import (
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

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
REASON = "node(s) were unschedulable"


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    name = "NodeUnschedulable"

    def _tolerated(self, pod: PodInfo) -> bool:
        return tolerates_taint(pod.tolerations, UNSCHEDULABLE_TAINT)

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        unsched = nodes.unschedulable()
        if not unsched.any() or self._tolerated(pod):
            return FilterResult.all_pass(len(nodes))
        return FilterResult.from_mask(~unsched, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration")))
