"""DynamicResources (PreEnqueue, PreFilter): pods with DRA ``spec.resourceClaims``.

PreEnqueue, as kube-scheduler 1.35: a pod is held before scheduling (no attempt, no condition, no
event) while one of its ResourceClaims is not there yet - a ``resourceClaimName`` that does not
exist, a ``resourceClaimTemplateName`` whose generated claim is not yet named in
``status.resourceClaimStatuses`` or does not exist, a claim being deleted, or a generated claim
not controlled by the pod. The pod is released when the claim is created (ResourceClaim add or
update) or its generated name is published (the pod's own update).

PreFilter: allocating DRA claims (ResourceClaims, DeviceClasses, ResourceSlices, reservation,
binding conditions) is not implemented here. Rather than bind such a pod to a node with
unallocated claims - the kubelet would then fail to prepare its devices - a pod whose claims all
exist is kept unschedulable with a message that says why and what to do.
Reads: ``spec.resourceClaims``, ``status.resourceClaimStatuses``, ResourceClaims from the ObjectStore.

Its ``DynamicResourcesArgs`` are decoded and validated as kube-scheduler 1.35 does with its
default feature gates, so that kube-scheduler's own configuration file is accepted:
``filterTimeout`` (default ``10s``, DRASchedulerFilterTimeout is beta and on) must be zero or
positive; ``bindingTimeout`` is forbidden (DRADeviceBindingConditions is alpha and off). Neither
changes what this plugin does: it allocates nothing, so it never waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    NodeBatch,
    PodInfo,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)
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


class ClaimNotReady(Exception):
    """Why a pod's claims are not all there (upstream's error text)."""


class DynamicResources(PreEnqueuePlugin, PreFilterPlugin, EnqueueExtensions):
    name = "DynamicResources"
    Args = DynamicResourcesArgs

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        super().__init__(args or DynamicResourcesArgs(), handle)

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.resource_claims:
            return None
        try:
            self.pod_claims(pod)
        except ClaimNotReady as exc:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(exc))
        return None

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if pod.resource_claims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MESSAGE)
        return None, Status(Code.SKIP)

    def pod_claims(self, pod: PodInfo) -> list[dict[str, Any]]:
        """The ResourceClaims of ``pod`` (``foreachPodResourceClaim``); raises ClaimNotReady."""
        statuses = {s.get("name"): s.get("resourceClaimName") for s in _claim_statuses(pod)}
        claims = []
        for ref in pod.resource_claims:
            if ref.get("resourceClaimName"):
                name, generated = ref["resourceClaimName"], False
            elif ref.get("resourceClaimTemplateName"):
                if ref.get("name") not in statuses:
                    raise ClaimNotReady(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
                name, generated = statuses[ref.get("name")], True
                if not name:
                    continue   # intentionally not created
            else:
                raise ClaimNotReady(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.get("name", "")}": '
                                    f"none of the supported fields are set")
            claim = self.handle.objects.get("resourceclaims", f"{pod.namespace}/{name}")
            if claim is None:
                raise ClaimNotReady(f'resourceclaim.resource.k8s.io "{name}" not found')
            meta = claim.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                raise ClaimNotReady(f'resourceclaim "{name}" is being deleted')
            if generated and not any(r.get("controller") and r.get("uid") == pod.uid
                                     for r in meta.get("ownerReferences") or ()):
                raise ClaimNotReady(f"ResourceClaim {pod.namespace}/{name} was not created for pod "
                                    f"{pod.namespace}/{pod.name} (pod is not owner)")
            claims.append(claim)
        return claims

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable")),
                ClusterEventWithHint(ClusterEvent("ResourceClaim", "Add"), self._after_claim_change),
                ClusterEventWithHint(ClusterEvent("ResourceClaim", "Update"), self._after_claim_change),
                ClusterEventWithHint(ClusterEvent("DeviceClass", "Add")),
                ClusterEventWithHint(ClusterEvent("DeviceClass", "Update")),
                ClusterEventWithHint(ClusterEvent("ResourceSlice", "Add")),
                ClusterEventWithHint(ClusterEvent("ResourceSlice", "Update")))

    def _after_claim_change(self, pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        """A claim the pod uses was created or changed, and all its claims are there now; or some
        claim was deallocated (``isSchedulableAfterClaimChange``)."""
        if not pod.resource_claims:
            return False
        try:
            claims = self.pod_claims(pod)
        except ClaimNotReady:
            return False
        if old is not None and (old.get("status") or {}).get("allocation") and \
                not ((new or {}).get("status") or {}).get("allocation"):
            return True
        uid = ((new or {}).get("metadata") or {}).get("uid")
        return any((c.get("metadata") or {}).get("uid") == uid for c in claims)


def _claim_statuses(pod: PodInfo) -> list[dict[str, Any]]:
    raw = pod.raw or {}
    return list((raw.get("status") or {}).get("resourceClaimStatuses") or ())
