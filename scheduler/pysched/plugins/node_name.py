"""NodeName (Filter): a pod that names a node in ``spec.nodeName`` fits only that node.

The scheduler only picks up pods whose ``spec.nodeName`` is empty, so this filter matters for
explanations and for the extender server, where kube-scheduler may pass such pods.
Reason: ``node(s) didn't match the requested node name`` (UnschedulableAndUnresolvable).
"""

from __future__ import annotations

from pysched.framework.interface import (ClusterEvent, ClusterEventWithHint, EnqueueExtensions, FilterPlugin,
                                           FilterResult)
from pysched.framework.status import Code, Status

REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin, EnqueueExtensions):
    name = "NodeName"

    def filter(self, state, pod, node):
        if pod.node_name and pod.node_name != node.name:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)
        return None

    def filter_nodes(self, state, pod, nodes):
        if not pod.node_name:
            return FilterResult.all_pass(len(nodes))
        ok = nodes.slots == nodes.table.slot_by_name.get(pod.node_name, -1)
        return FilterResult.from_mask(ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),)
