"""DynamicResources (PreFilter): pods with DRA ``spec.resourceClaims`` are refused, explicitly.

Allocating DRA claims (ResourceClaims, DeviceClasses, ResourceSlices, reservation, binding
conditions) is not implemented here. Rather than bind such a pod to a node with unallocated
claims - the kubelet would then fail to prepare its devices - the pod is kept unschedulable with
a message that says why and what to do. Reads: ``spec.resourceClaims``.

Its ``DynamicResourcesArgs`` are decoded and validated as kube-scheduler 1.35 does with its
default feature gates, so that kube-scheduler's own configuration file is accepted:
``filterTimeout`` (default ``10s``, DRASchedulerFilterTimeout is beta and on) must be zero or
positive; ``bindingTimeout`` is forbidden (DRADeviceBindingConditions is alpha and off). Neither
changes what this plugin does: it allocates nothing, so it never waits.
"""

from __future__ import annotations

from dataclasses import dataclass

from pysched.framework import Code, CycleState, Handle, NodeBatch, PodInfo, PreFilterPlugin, PreFilterResult, Status
from pysched.framework.api import ConfigError, parse_duration

MESSAGE = ("pod uses dynamic resource allocation (spec.resourceClaims), which this scheduler does not "
           "allocate; schedule it with kube-scheduler (DynamicResources plugin)")
FILTER_TIMEOUT_DEFAULT = "10s"   # DynamicResourcesFilterTimeoutDefault


@dataclass
class DynamicResourcesArgs:
    """``filterTimeout`` and ``bindingTimeout`` (``metav1.Duration`` strings)."""
    KIND = "DynamicResourcesArgs"

    filter_timeout: str | None = FILTER_TIMEOUT_DEFAULT
    binding_timeout: str | None = None

    def validate(self, path: str) -> None:
        if self.filter_timeout is not None:
            where = f"{path}.filterTimeout"
            if parse_duration(self.filter_timeout, where) < 0:
                raise ConfigError(f'{where}: Invalid value: "{self.filter_timeout}": must be zero or positive')
        if self.binding_timeout is not None:
            raise ConfigError(f"{path}.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
                              "DRAResourceClaimDeviceStatus feature gate is disabled")


class DynamicResources(PreFilterPlugin):
    name = "DynamicResources"
    Args = DynamicResourcesArgs

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        super().__init__(args or DynamicResourcesArgs(), handle)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if pod.resource_claims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MESSAGE)
        return None, Status(Code.SKIP)
