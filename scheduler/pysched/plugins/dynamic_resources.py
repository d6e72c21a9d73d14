"""DynamicResources (PreFilter): pods with DRA ``spec.resourceClaims`` are refused, explicitly.

Allocating DRA claims (ResourceClaims, DeviceClasses, ResourceSlices, reservation, binding
conditions) is not implemented here. Rather than bind such a pod to a node with unallocated
claims - the kubelet would then fail to prepare its devices - the pod is kept unschedulable with
a message that says why and what to do. Reads: ``spec.resourceClaims``.
"""

from __future__ import annotations

from pysched.framework import Code, CycleState, NodeBatch, PodInfo, PreFilterPlugin, PreFilterResult, Status

MESSAGE = ("pod uses dynamic resource allocation (spec.resourceClaims), which this scheduler does not "
           "allocate; schedule it with kube-scheduler (DynamicResources plugin)")


class DynamicResources(PreFilterPlugin):
    name = "DynamicResources"

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if pod.resource_claims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MESSAGE)
        return None, Status(Code.SKIP)
