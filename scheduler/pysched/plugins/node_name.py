"""NodeName (Filter): a pod that names a node in ``spec.nodeName`` fits only that node.

The scheduler only picks up pods whose ``spec.nodeName`` is empty, so this filter matters for
explanations and for the extender server, where kube-scheduler may pass such pods.
Reason: ``node(s) didn't match the requested node name`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

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
    NodeBatch,
    PodInfo,
)

REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin, EnqueueExtensions):
    name = "NodeName"

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        if not pod.node_name:
            return FilterResult.all_pass(len(nodes))
        ok = np.zeros(len(nodes), dtype=bool)
        i = nodes.index_of(pod.node_name)
        if i >= 0:
            ok[i] = True
        return FilterResult.from_mask(ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),)
