"""DynamicResources (PreEnqueue, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Unreserve, PreBind).

Pods ask for devices through ``spec.resourceClaims``: ResourceClaims (or ones the resourceclaim
controller makes from a ResourceClaimTemplate) whose requests name a DeviceClass and CEL selectors.
DRA drivers publish their devices in ResourceSlices. This plugin does what kube-scheduler 1.35,
1.36 and 1.37 do, as ``handle.kube_version`` and ``handle.feature_gates`` say:

* PreEnqueue holds a pod (no attempt, no condition, no event) while one of its claims is not there
  yet: a ``resourceClaimName`` that does not exist, a template whose generated claim is not yet
  named in ``status.resourceClaimStatuses`` or does not exist, a claim being deleted, or a generated
  claim not controlled by the pod. The pod is released when the claim appears (ResourceClaim add
  or update) or its generated name is published (the pod's own update).
* PreFilter checks each claim: one allocated already must be usable on the node (its
  ``status.allocation.nodeSelector``); one being allocated for another pod right now makes this pod
  wait (``is in the process of being allocated``); every DeviceClass a request names must exist.
  For the unallocated claims it prepares the allocator (``allocator``) with the
  devices already taken: those in the allocation of every claim in the cluster (admin-access
  results excepted) and those Reserve has promised and the watch has not shown yet.
* Filter, per node: the allocator must find devices for all unallocated claims together
  (``cannot allocate all claims``), within ``filterTimeout`` - one budget for the whole Filter
  call, where upstream gives each node its own: the search runs on the event loop, which must not
  stall for nodes x 10 s. Past it, 1.35 finds the node Unschedulable (``timed out trying to
  allocate devices``); from 1.36 the attempt ends with an Error (``node <name>: timed out trying
  to allocate devices``: the pod retries after a backoff, not after a cluster event). An allocated
  claim must be available there (``resourceclaim not available on the node``). A CEL run-time
  error or another allocator error aborts the attempt (an Error).
* PostFilter (no node passed): a claim allocated already, but for nodes this pod could not use,
  and reserved for no pod or only this one, is deallocated (its ``status`` cleared, in the
  background) - ``deallocation of ResourceClaim completed``; otherwise 1.35 and 1.36 say
  ``still not schedulable`` (a pod without claims, or whose claims PreFilter refused: ``no new
  claims to deallocate``) and 1.37 says nothing (a bare Unschedulable).
  Either way DefaultPreemption runs next, as upstream's statuses are plain Unschedulable. When an
  earlier PreFilter plugin rejected the pod, ours never ran: upstream's PostFilter then finds no
  cycle state and fails with ``not found``, which ends the PostFilter loop - no preemption is
  tried and the message ends ``. not found``. pysched does the same.
* Score (``firstAvailable`` only): per node, 8 - i for each prioritized request whose i-th
  subrequest the allocator chose there, summed and normalised to 0-100 - the node where the pod
  gets its preferred alternatives wins; from 1.36 a claim allocated already adds what its own
  allocation chose, on every node. Pods without such requests to allocate skip it (PreScore).
* Queueing: ResourceClaim Add and Update (and Delete from 1.37: an allocated claim deleted frees
  its devices), the pod's own update publishing its generated claims (1.35's
  Pod/UpdatePodGeneratedResourceClaim, 1.37's TargetPod), DeviceClass and ResourceSlice Add and
  Update, Node Add, UpdateNodeLabel and UpdateNodeAllocatable.
* The allocation written: 1.37 writes a claim config once (not once per request it names), and
  one that names every request of the claim without ``requests``; its CEL run-time errors name
  the device (``Allocator.kube_version``).
* Device preference (pysched's own, ``framework.devicepreference``): when another plugin left a
  ``DevicePreference`` in the pod's cycle (GPUShare does for GPU pods), the allocator tries the
  devices it prefers first on each node, and Reserve tells it each claim's allocation. Without
  one, nothing changes.
* Reserve keeps the chosen allocation in memory ("in flight"), so no other pod is given those
  devices, until the store shows the claim at the version PreBind wrote (or newer); Unreserve
  forgets an allocation not yet written and takes the pod back out of ``status.reservedFor`` if it
  was written there (in the background; the pod's next PreBind waits for that to land).
* PreBind, before the bind and claim by claim: adds the ``resource.kubernetes.io/delete-protection``
  finalizer (an update of the claim), then writes ``status.allocation`` and appends the pod to
  ``status.reservedFor`` (an update of ``/status``), re-reading the claim and retrying on a
  conflict up to five times. A claim shared by several pods is allocated once; the others only
  add themselves to ``reservedFor``.
* Binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus, ``binding``):
  devices with ``bindingConditions`` may be allocated (pools holding such devices are tried last,
  whatever the gates, as upstream's 1.37 allocator does); their results carry the conditions,
  ``bindsToNode`` pins the allocation to the node; PreBind stamps ``allocationTimestamp`` on every
  claim it reserves and then waits, off the event loop's critical path, until every binding
  condition is True (an Error naming the failed condition or the timeout otherwise; Unreserve
  then drops the reservation). Filter finds such a claim, failed or timed out, unavailable on
  every node, so PostFilter deallocates it.

* Extended resources backed by DRA (DRAExtendedResource, on from 1.36; ``extended``): a pod that
  requests an extended resource a DeviceClass backs (``spec.extendedResourceName``, or
  ``deviceclass.resource.kubernetes.io/<class>``) gets one special claim, in memory until PreBind,
  last among its claims. Filter, per node: a special claim a prior cycle created is refused
  (``cannot schedule extended resource claim``; PostFilter deletes it: ``deletion of ResourceClaim
  completed``); a request the node's allocatable lacks and no class backs is refused (``cannot fit
  resource``); the backed resources the node has 0 of are allocated through DRA with the user's
  claims - one variant of the special claim per set of such resources -, the others are
  NodeResourcesFit's. PreBind creates the claim (``generateName: <pod>-extended-resources-``, the
  annotation ``resource.kubernetes.io/extended-resource-claim: "true"``, the pod its controller
  owner, requests ``container-<i>-request-<j>``), writes its finalizer, allocation and reservation
  as for any claim, and the pod's ``status.extendedResourceClaimStatus``; Unreserve deletes a claim
  it created (finalizer dropped first). Needs create and delete on resourceclaims.

Every refusal is UnschedulableAndUnresolvable with upstream's text, as kube-scheduler's is.

Behaviours behind kube feature gates (``Handle.feature_gates``; all off at 1.35's defaults, on at
1.37's), each as kube-scheduler 1.37.2 does with the gate on:

* DRADeviceTaints - a device tainted NoSchedule or NoExecute (in its slice) is allocated only to
  a request that tolerates the taint (``allocator``); the result carries the request's tolerations.
* DRADeviceTaintRules - DeviceTaintRules (``resource.k8s.io/v1``) add their taint to the devices
  their ``deviceSelector`` names (driver, pool, device), as the resourceslice tracker patches the
  slices kube-scheduler allocates from. They are watched (an optional kind: an API server without
  them has none) only with the gate on. A rule's add, update or delete that changes some device's
  taints moves the pods DynamicResources rejected, as the tracker's ResourceSlice update does.

* DRAPartitionableDevices - shared counters and per-device node selection (``allocator``).

* DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus) - binding conditions (above,
  ``binding``).

* DRAConsumableCapacity - consumable capacity (``allocator``, ``capacity``): devices with
  ``allowMultipleAllocations`` shared by claims while their capacity lasts, ``capacity.requests``
  rounded by the capacities' request policies, results with ``shareID`` and ``consumedCapacity``,
  ``distinctAttribute``. The claims' shares (persisted: ``AllocatedDevices``; in flight) count
  against the capacity; with the gate off a share takes its whole device, as upstream's
  ``ListAllAllocatedDevices``. DRAFractionalCapacityRange (off by default) as upstream.

* DRAExtendedResource - extended resources a DeviceClass backs (above, ``helper.dra_extended``).

(Upstream's PreFilter also has ``resourceclaim in use``, for a claim that cannot be reserved for
one more pod; its ``CanBeReserved`` is always true in 1.35 to 1.37, so it is never said.)

Reads: ResourceClaims, DeviceClasses, ResourceSlices (and DeviceTaintRules) from the ObjectStore.

Its ``DynamicResourcesArgs`` are decoded and validated as kube-scheduler 1.35 does with its
default feature gates: ``filterTimeout`` (default ``10s``) must be zero or positive (zero: no
limit); ``bindingTimeout`` (default ``600s``) is forbidden unless DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus are on, and then at least one second (checked when the plugin is built,
against the gates it runs with).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pysched.framework import (
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    FrameworkError,
    Handle,
    NodeBatch,
    PodInfo,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
)
from pysched.framework.api import ApiError, ConfigError, NodeSelector, ObjectError, parse_duration, parse_node_selector
from pysched.framework.devicepreference import DEVICE_PREFERENCE_KEY, DevicePreference
from pysched.framework.features import DRA_EXTENDED_RESOURCE
from pysched.framework.handle import APIClient
from pysched.framework.nodeinfo import NodeInfo
from pysched.plugins.dynamic_resources import binding, cel, extended
from pysched.plugins.dynamic_resources.allocated import CLAIMS, AllocatedDevices, Unavailable
from pysched.plugins.dynamic_resources.allocator import (
    CONSUMABLE_CAPACITY,
    DEVICE_TAINT_RULES,
    AllocationError,
    AllocationTimeout,
    Allocator,
    InvalidPools,
    SliceIndex,
    Solution,
    request_alternatives,
)
from pysched.plugins.helper.normalize import default_normalize

log = logging.getLogger("pysched.plugins.dynamic_resources")

KEY = "DynamicResources/state"
# Written as PreFilter starts, whatever follows (upstream writes an empty state there): PostFilter
# tells "PreFilter never ran" (an earlier PreFilter plugin rejected the pod) from "no claims".
RAN = "DynamicResources/prefilter-ran"
FILTER_TIMEOUT_DEFAULT = "10s"   # DynamicResourcesFilterTimeoutDefault
FINALIZER = "resource.kubernetes.io/delete-protection"
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
CANNOT_ALLOCATE = "cannot allocate all claims"
CANNOT_SCHEDULE_EXTENDED = "cannot schedule extended resource claim"   # the pod's claim from a prior cycle
CANNOT_FIT = "cannot fit resource"    # a request neither the node's allocatable nor a DeviceClass backs
NOT_AVAILABLE = "resourceclaim not available on the node"
TIMED_OUT = "timed out trying to allocate devices"
CONFLICT_RETRIES = 5   # client-go's retry.DefaultRetry steps
FIRST_AVAILABLE_MAX = 8   # FirstAvailableDeviceRequestMaxSize: the first subrequest scores 8
TAINT_RULES = "devicetaintrules"


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

    def apply_feature_gates(self, path: str, gates: frozenset[str]) -> None:
        """``SetDefaults_DynamicResourcesArgs`` and ``ValidateDynamicResourcesArgs`` for the gates:
        with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on (1.36+), ``bindingTimeout``
        defaults to 10m and must be at least one second; with either off it is forbidden."""
        where = f"{path}.bindingTimeout"
        if not binding.enabled(gates):
            if self.binding_timeout is not None:
                raise ConfigError(f"{where}: Forbidden: DRADeviceBindingConditions or "
                                  "DRAResourceClaimDeviceStatus feature gate is disabled")
            return
        if self.binding_timeout is None:
            self.binding_timeout = binding.BINDING_TIMEOUT_DEFAULT
        if parse_duration(self.binding_timeout, where) < 1:
            raise ConfigError(f'{where}: Invalid value: "{self.binding_timeout}": must be at least 1 second')


class ClaimNotReady(Exception):
    """Why a pod's claims are not all there (upstream's error text)."""


@dataclass
class _Extended:
    """The pod's extended resources backed by DRA (``extended``): its special claim comes last in
    ``_State.claims``; per node, the variant of that claim the node needs."""
    requests: dict[str, int]                  # the pod's non-zero requests of DRA extended resource names
    fresh: bool                               # the in-memory claim (not one a prior cycle created)
    # delegated resources (sorted) -> (the claim with its requests, the container mappings)
    variants: dict[tuple[str, ...], tuple[dict[str, Any], list[dict[str, str]]]] = field(default_factory=dict)
    allocators: dict[tuple[str, ...], Allocator] = field(default_factory=dict)
    node_variant: dict[str, tuple[str, ...]] = field(default_factory=dict)   # node -> its delegated resources
    initial_uid: str = ""                     # the in-memory claim's uid (its in-flight key until PreBind)
    pod_spec: dict[str, Any] = field(default_factory=dict)   # the containers the requests come from


@dataclass
class _State:
    """What PreFilter learnt, for Filter, Reserve, Unreserve and PreBind of one cycle."""
    claims: list[dict[str, Any]]                                 # the pod's claims, in its order
    to_allocate: list[int]                                       # indexes of the unallocated ones
    available_on: list[tuple[int, NodeSelector]]                 # allocated claims bound to some nodes
    allocator: Allocator | None                                  # the unallocated user claims'
    by_node: dict[str, Solution] = field(default_factory=dict)   # node -> the claims' devices there
    unavailable: set[int] = field(default_factory=set)   # allocated claims some node could not use
    chosen: dict[int, dict[str, Any]] = field(default_factory=dict)          # claim index -> allocation
    extended: _Extended | None = None      # the special claim is claims[-1] when set
    user_to_allocate: list[int] = field(default_factory=list)   # to_allocate without the special claim

    @property
    def special(self) -> int:
        """The special claim's index (``len(claims) - 1``), or -1 without one."""
        return len(self.claims) - 1 if self.extended is not None else -1

    def node_claims(self, node: str) -> list[int]:
        """The claims whose allocations ``by_node[node]`` holds, in its order."""
        if self.extended is None or not self.extended.node_variant.get(node):
            return self.user_to_allocate
        return [*self.user_to_allocate, self.special]


def _label(claim: dict[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _name(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _uid(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""


def _reserved_for(claim: dict[str, Any], pod: PodInfo) -> bool:
    return any(r.get("uid") == pod.uid for r in (claim.get("status") or {}).get("reservedFor") or ())


def _claim_path(claim: dict[str, Any]) -> str:
    meta = claim["metadata"]
    return f"/apis/resource.k8s.io/v1/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}"


class DynamicResources(PreEnqueuePlugin[DynamicResourcesArgs], PreFilterPlugin[DynamicResourcesArgs],
                       FilterPlugin[DynamicResourcesArgs], PostFilterPlugin[DynamicResourcesArgs],
                       PreScorePlugin[DynamicResourcesArgs], ScorePlugin[DynamicResourcesArgs],
                       ReservePlugin[DynamicResourcesArgs], PreBindPlugin[DynamicResourcesArgs], EnqueueExtensions):
    name = "DynamicResources"
    # PreFilter reads claims, classes and slices, not other pods: preemption's dry runs reuse its state,
    # as upstream (which has no PreFilterExtensions for it) does
    pre_filter_reads_other_pods = False

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        timeout = self.args.filter_timeout
        self.filter_timeout = parse_duration(timeout, "filterTimeout") if timeout else 0.0
        # Binding conditions (``binding``): gated; the wait's bound, and the clock that stamps and
        # judges allocationTimestamp (replaced in tests).
        # The release's own behaviour (no gate upstream): 1.36's Filter timeout is an Error naming
        # the node and a claim already allocated counts in Score; 1.37's PostFilter says nothing
        # when it frees nothing, and a deleted allocated claim requeues.
        self.kube_version = handle.kube_version
        self.binding_conditions = binding.enabled(handle.feature_gates)
        self.binding_timeout = parse_duration(self.args.binding_timeout or binding.BINDING_TIMEOUT_DEFAULT,
                                              "bindingTimeout")
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        # claim key (ns/name) -> the events of PreBinds waiting for that claim's binding conditions
        self.binding_waiters: dict[str, set[asyncio.Event]] = {}
        # Claim uid -> the claim as Reserve means it to be (allocation set): devices promised to a
        # pod that the store does not show allocated yet. Until PreBind has written it, Unreserve
        # drops it; once written (``written`` holds the resourceVersion the API server gave it), it
        # stays until the store holds that version or a newer one - a bind failing after PreBind
        # must not free devices the API server already records as allocated.
        self.in_flight: dict[str, dict[str, Any]] = {}
        self.written: dict[str, int] = {}
        # (claim uid, pod uid) -> Unreserve's removal of the pod from reservedFor, still on its way.
        self.unreserving: dict[tuple[str, str], asyncio.Event] = {}
        self.features = handle.feature_gates
        # The CEL engine is chosen now, at start, not at the first selector: a missing pysched-cel is
        # logged at ERROR level while the operator is watching, and PYSCHED_CEL_ENGINE=pysched-cel
        # without it refuses the profile (``cel.engine``).
        cel.engine(CONSUMABLE_CAPACITY in self.features)
        self.taint_rules = DEVICE_TAINT_RULES in self.features
        if self.taint_rules:
            self.object_kinds = (TAINT_RULES,)   # watched only with the gate on
        # (resourceslices kind_version, devicetaintrules kind_version, index)
        self._slices: tuple[int, int, SliceIndex] | None = None
        # The store's allocated devices, updated per claim change rather than read off every claim
        # per pod.
        self.allocated = AllocatedDevices(handle.objects.list(CLAIMS), consumable=CONSUMABLE_CAPACITY in self.features)
        handle.objects.subscribe(self.allocated.on_change)
        # Extended resources backed by DRA: the DeviceClass mapping shared with NodeResourcesFit.
        self.extended_resources = DRA_EXTENDED_RESOURCE in handle.feature_gates
        self.classes = extended.classes_for(handle.objects) if self.extended_resources else None
        if self.binding_conditions:
            handle.objects.subscribe(self._wake_binding_waiters)

    # -- PreEnqueue --------------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.resource_claims:
            return None
        try:
            self.pod_claims(pod)
        except ClaimNotReady as exc:
            return Status(UAU, str(exc))
        return None

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
                raise ClaimNotReady(f'could not find ResourceClaim "{pod.namespace}/{name}"')
            meta = claim.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                raise ClaimNotReady(f'resourceclaim "{name}" is being deleted')
            if generated and not any(r.get("controller") and r.get("uid") == pod.uid
                                     for r in meta.get("ownerReferences") or ()):
                raise ClaimNotReady(f"ResourceClaim {pod.namespace}/{name} was not created for pod "
                                    f"{pod.namespace}/{pod.name} (pod is not owner)")
            claims.append(claim)
        return claims

    # -- PreFilter ---------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        state.write(RAN, True)
        ext = self._pre_filter_extended(pod)
        if not pod.resource_claims and ext is None:
            return None, Status(Code.SKIP)
        try:
            claims = self.pod_claims(pod)
        except ClaimNotReady as exc:
            return None, Status(UAU, str(exc))
        if ext is not None:
            ext_state, special = ext
            claims.append(special)
        if not claims:
            return None, Status(Code.SKIP)
        self.settle_in_flight()
        classes = {(c.get("metadata") or {}).get("name", ""): c for c in self.handle.objects.list("deviceclasses")}
        to_allocate: list[int] = []
        available_on: list[tuple[int, NodeSelector]] = []
        for i, claim in enumerate(claims):
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                raw = allocation.get("nodeSelector")
                if raw:
                    try:
                        sel = parse_node_selector(raw, "status.allocation.nodeSelector")
                    except ObjectError as exc:
                        return None, Status(Code.ERROR, str(exc))
                    assert sel is not None
                    available_on.append((i, sel))
                continue
            if _uid(claim) in self.in_flight:
                return None, Status(UAU, f"resource claim {_label(claim)} is in the process of being allocated")
            if ext is not None and i == len(claims) - 1:
                # the special claim: its requests are the node's (Filter); one from a prior cycle
                # is judged there too
                to_allocate.append(i)
                continue
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                subs = request_alternatives(r)
                if not subs:
                    return None, Status(UAU, f"resource claim {_label(claim)}, request {r.get('name', '')}: "
                                             f"unknown request type")
                for name, spec in subs:
                    cls = spec.get("deviceClassName") or ""
                    if not cls:
                        return None, Status(Code.ERROR, f"request {name}: unsupported request type")
                    if cls not in classes:
                        return None, Status(UAU, f"request {name}: device class {cls} does not exist")
            to_allocate.append(i)
        user_to_allocate = [i for i in to_allocate if ext is None or i != len(claims) - 1]
        allocator = None
        if user_to_allocate:
            allocator = self._allocator([claims[i] for i in user_to_allocate], classes)
        st = _State(claims, to_allocate, available_on, allocator, user_to_allocate=user_to_allocate)
        if ext is not None:
            st.extended = ext_state
            st.extended.initial_uid = _uid(claims[-1])
        state.write(KEY, st)
        return None, None

    def _allocator(self, claims: list[dict[str, Any]], classes: dict[str, dict[str, Any]] | None = None) -> Allocator:
        if classes is None:
            classes = {(c.get("metadata") or {}).get("name", ""): c for c in self.handle.objects.list("deviceclasses")}
        allocator = Allocator(claims, classes, self.allocated_devices(), self.slice_index(),
                              timeout=self.filter_timeout, features=self.features)
        allocator.kube_version = self.kube_version
        return allocator

    def _pre_filter_extended(self, pod: PodInfo) -> tuple[_Extended, dict[str, Any]] | None:
        """``preFilterExtendedResources``: the pod's special claim - one a prior cycle created, or a
        new one in memory - when it requests an extended resource a DeviceClass backs."""
        if self.classes is None or not extended.backed_requests(pod.requests, self.classes):
            return None
        requests = {n: q for n, q in pod.requests.items() if q and extended.is_dra_extended_resource_name(n)}
        spec = (pod.raw or {}).get("spec") or {}
        found = extended.find_special_claim(pod.name, pod.uid, self.handle.objects.list(CLAIMS))
        if found is not None:
            return _Extended(requests, fresh=False, pod_spec=spec), found
        return (_Extended(requests, fresh=True, pod_spec=spec),
                extended.special_claim(pod.namespace, pod.name, pod.uid))

    def settle_in_flight(self) -> None:
        """Forget promises the store has caught up with: a written claim once the store holds the
        version PreBind wrote (or newer: it may have been deallocated since); an unwritten one
        once the store shows the claim allocated by someone else, or gone."""
        store = self.handle.objects
        for uid, claim in list(self.in_flight.items()):
            current = store.get("resourceclaims", _label(claim))
            if current is None or _uid(current) != uid:
                self._forget(uid)
                continue
            written = self.written.get(uid)
            if written is not None:
                if _version(current) >= written:
                    self._forget(uid)
            elif (current.get("status") or {}).get("allocation"):
                self._forget(uid)

    def _forget(self, uid: str) -> None:
        self.in_flight.pop(uid, None)
        self.written.pop(uid, None)

    def allocated_devices(self) -> Unavailable:
        """Devices no normal request may take: every claim's allocation (admin access excepted,
        kept by ``AllocatedDevices`` from the store's changes) and the allocations in flight."""
        return Unavailable.of(self.allocated, self.in_flight.values())

    def slice_index(self) -> SliceIndex:
        """The index of the cluster's ResourceSlices (with the DeviceTaintRules' taints), rebuilt
        when any of them changed."""
        objects = self.handle.objects
        mark = objects.kind_version("resourceslices")
        rules_mark = objects.kind_version(TAINT_RULES) if self.taint_rules else 0
        if self._slices is None or self._slices[:2] != (mark, rules_mark):
            rules = objects.list(TAINT_RULES) if self.taint_rules else []
            self._slices = (mark, rules_mark, SliceIndex(objects.list("resourceslices"), features=self.features,
                                                         taint_rules=rules,
                                                         binding_conditions=self.binding_conditions))
        return self._slices[2]

    # -- Filter ------------------------------------------------------------------------------------

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # devices and the claims holding them, not pods

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        st: _State | None = state.get(KEY)
        if st is None:
            return FilterResult.all_pass(len(nodes))
        n = len(nodes)
        passed = np.ones(n, dtype=bool)
        reasons: dict[str, np.ndarray] = {}
        # Allocated claims whose binding failed or timed out are unavailable on every node (their
        # nodeSelector aside), so that PostFilter may deallocate them.
        unbindable = self._unbindable(st)
        started: set[int] = set()
        preference = self._preference(state)
        for i, info in enumerate(nodes.infos):
            name, labels = info.spec.name, info.spec.labels
            reason = None
            allocator = st.allocator
            if st.extended is not None:
                reason, variant = self._filter_extended(st, info)
                if reason is not None:
                    passed[i] = False
                    reasons.setdefault(reason, np.zeros(n, dtype=bool))[i] = True
                    continue
                st.extended.node_variant[name] = variant
                if not variant and not st.user_to_allocate and len(st.claims) == 1:
                    continue   # all of it from the node's device plugins: nothing left to do here
                if variant:
                    allocator = self._variant_allocator(st, variant)
            if allocator is not None and id(allocator) not in started:
                started.add(id(allocator))
                allocator.preference = preference
                allocator.prefetch_nodes([(x.spec.name, x.spec.labels) for x in nodes.infos])
                allocator.start_deadline()   # one budget for this call: the event loop waits on it
            if allocator is not None:
                try:
                    found = allocator.solve(name, labels)
                except AllocationTimeout:
                    if self.kube_version >= (1, 36):
                        # potentially transient: an Error, so the pod retries after a backoff
                        raise FrameworkError(Status(Code.ERROR, f"node {name}: {TIMED_OUT}", plugin=self.name)) \
                            from None
                    found, reason = None, TIMED_OUT
                except InvalidPools as exc:
                    found, reason = None, str(exc)
                except AllocationError as exc:
                    # upstream's Error: the attempt is aborted (no traceback: it is the user's selector)
                    raise FrameworkError(Status(Code.ERROR, str(exc), plugin=self.name)) from None
                if found is None and reason is None:
                    reason = CANNOT_ALLOCATE
                if found is not None:
                    st.by_node[name] = found
            if reason is None:
                elsewhere = [c for c, sel in st.available_on if not sel.matches(labels, name)]
                elsewhere += [c for c in unbindable if c not in elsewhere]
                if elsewhere:
                    reason = NOT_AVAILABLE
                    st.unavailable.update(elsewhere)
                    st.by_node.pop(name, None)
            if reason is not None:
                passed[i] = False
                reasons.setdefault(reason, np.zeros(n, dtype=bool))[i] = True
        return FilterResult(passed, [(UAU, r, m) for r, m in reasons.items()])

    def _filter_extended(self, st: _State, info: NodeInfo) -> tuple[str | None, tuple[str, ...]]:
        """``filterExtendedResources`` for one node: a refusal, or the resources it must get from DRA
        (those a DeviceClass backs and the node's allocatable has 0 of)."""
        ext = st.extended
        assert ext is not None and self.classes is not None
        special = st.claims[-1]
        if ((special.get("spec") or {}).get("devices") or {}).get("requests") is not None:
            # created by a prior cycle: PostFilter deletes it, and the pod tries anew
            return CANNOT_SCHEDULE_EXTENDED, ()
        allocatable = info.spec.allocatable
        delegated = []
        for name in ext.requests:
            if self.classes.backed(name) and allocatable.get(name, 0) == 0:
                delegated.append(name)
            elif name not in allocatable:
                return CANNOT_FIT, ()
        if (special.get("status") or {}).get("allocation"):
            return None, ()
        return None, tuple(sorted(delegated))

    def _variant_allocator(self, st: _State, variant: tuple[str, ...]) -> Allocator:
        """The allocator for the user claims and the special claim asking for ``variant``."""
        ext = st.extended
        assert ext is not None and self.classes is not None
        allocator = ext.allocators.get(variant)
        if allocator is None:
            claim = copy.deepcopy(st.claims[-1])
            requests, mappings = extended.requests_and_mappings(ext.pod_spec, variant, self.classes)
            claim.setdefault("spec", {})["devices"] = {"requests": requests}
            ext.variants[variant] = (claim, mappings)
            allocator = self._allocator([*(st.claims[i] for i in st.user_to_allocate), claim])
            ext.allocators[variant] = allocator
        return allocator

    def _unbindable(self, st: _State) -> list[int]:
        if not self.binding_conditions:
            return []
        now = self.now()
        return [i for i, c in enumerate(st.claims)
                if (c.get("status") or {}).get("allocation") and binding.unavailable(c, self.binding_timeout, now)]

    # -- PostFilter --------------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        if state.get(RAN) is None:
            # PreFilter stopped before ours: upstream finds no cycle state, and its error ends the
            # PostFilter loop (no preemption is tried) with the message "not found".
            return None, Status(Code.ERROR, "not found")
        st: _State | None = state.get(KEY)
        if st is None:
            # no claims, or PreFilter failed
            return None, self._unschedulable("no new claims to deallocate")
        for i in sorted(st.unavailable):
            if i == st.special:
                continue
            claim = st.claims[i]
            reserved = (claim.get("status") or {}).get("reservedFor") or ()
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                self._spawn(self._deallocate(claim, pod))
                return None, Status(Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed")
        if st.extended is not None and _name(st.claims[-1]) != extended.SPECIAL_NAME:
            # the pod's extended resource claim from a prior cycle: deleted, the pod tries anew
            self._spawn(self._delete_claim(st.claims[-1], pod))
            return None, Status(Code.UNSCHEDULABLE, "deletion of ResourceClaim completed")
        return None, self._unschedulable("still not schedulable")

    def _unschedulable(self, verdict: str) -> Status:
        """PostFilter's "nothing done": 1.35 and 1.36 say why, 1.37 says nothing."""
        return Status(Code.UNSCHEDULABLE) if self.kube_version >= (1, 37) else Status(Code.UNSCHEDULABLE, verdict)

    async def _delete_claim(self, claim: dict[str, Any], pod: PodInfo) -> None:
        """``deleteClaim``: drop the delete-protection finalizer (an update, re-read on a conflict),
        then delete the claim (gone already is fine)."""
        client = self.handle.client
        if client is None:
            return
        label = _label(claim)
        obj = copy.deepcopy(claim)
        try:
            for attempt in range(CONFLICT_RETRIES):
                if attempt:
                    obj = await client.request("GET", _claim_path(claim))
                meta = obj.setdefault("metadata", {})
                meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != FINALIZER]
                if not meta["finalizers"]:
                    del meta["finalizers"]
                try:
                    await client.request("PUT", _claim_path(claim), body=obj)
                    break
                except ApiError as exc:
                    if exc.status != 409 or exc.local:
                        raise
            else:
                raise ApiError(409, f"update resourceclaim {label}: the object has been modified")
            try:
                await client.request("DELETE", _claim_path(claim))
            except ApiError as exc:
                if exc.status != 404:
                    raise
        except (ApiError, OSError) as exc:
            log.warning("deleting the pod's extended resource claim failed",
                        extra={"kv": {"pod": pod.key, "claim": label, "error": str(exc)}})
        else:
            log.info("deleted the pod's extended resource claim", extra={"kv": {"pod": pod.key, "claim": label}})

    async def _deallocate(self, claim: dict[str, Any], pod: PodInfo) -> None:
        client = self.handle.client
        if client is None:
            return
        obj = copy.deepcopy(claim)
        status = obj.setdefault("status", {})
        for key in ("reservedFor", "allocation", "devices"):
            status.pop(key, None)
        try:
            await client.request("PUT", _claim_path(claim) + "/status", body=obj)
        except (ApiError, OSError) as exc:
            log.warning("deallocating a claim the pod cannot use failed",
                        extra={"kv": {"pod": pod.key, "claim": _label(claim), "error": str(exc)}})
        else:
            log.info("deallocated a claim the pod cannot use", extra={"kv": {"pod": pod.key, "claim": _label(claim)}})

    # -- Score -------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        st: _State | None = state.get(KEY)
        if st is None or not any(r.get("firstAvailable") for i in st.to_allocate
                                 for r in _requests(st.claims[i])):
            return Status(Code.SKIP)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        st: _State = state.read(KEY)
        out = np.zeros(len(nodes), dtype=np.int64)
        # From 1.36 a claim allocated already adds the preference of its own allocation, on every
        # node where the others were allocated (upstream's computeScore over all the pod's claims).
        held = 0
        if self.kube_version >= (1, 36):
            held = sum(_preference(c, (c.get("status") or {}).get("allocation") or {})
                       for c in st.claims if (c.get("status") or {}).get("allocation"))
        for i, name in enumerate(nodes.names):
            found = st.by_node.get(name)
            if found is not None:
                out[i] = held + sum(_preference(st.claims[c], a)
                                    for c, a in zip(st.node_claims(name), found.allocations()))
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch,
                        scores: np.ndarray) -> Status | None:
        default_normalize(scores, reverse=False)
        return None

    # -- Reserve / Unreserve -----------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        st: _State | None = state.get(KEY)
        if st is None or not st.to_allocate:
            return None
        solution = st.by_node.get(node_name)
        info = self.handle.node_info(node_name)
        if st.extended is not None and node_name not in st.extended.node_variant and info is not None:
            # No Filter call judged this node in this cycle (a nominated node)
            reason, variant = self._filter_extended(st, info)
            if reason is None:
                st.extended.node_variant[node_name] = variant
        indexes = st.node_claims(node_name)
        if not indexes:
            # only the special claim, and the node's device plugins give all of it (upstream:
            # nothing to allocate)
            return None
        allocator = st.allocator
        if indexes is not st.user_to_allocate and st.extended is not None:
            allocator = self._variant_allocator(st, st.extended.node_variant[node_name])
        preference = self._preference(state)
        if solution is None and allocator is not None:
            # No Filter call judged this node in this cycle (a nominated node): allocate now.
            allocator.preference = preference
            allocator.start_deadline()
            try:
                solution = allocator.solve(node_name, info.spec.labels) if info is not None else None
            except (AllocationError, AllocationTimeout, InvalidPools) as exc:
                return Status(Code.ERROR, str(exc))
        if solution is None:
            return Status(Code.ERROR, "claim allocation not found for node")
        found = solution.allocations()
        for k, i in enumerate(indexes):
            if i == st.special:
                assert st.extended is not None
                # the node's variant of the special claim (its requests), under the in-memory uid
                claim = copy.deepcopy(st.extended.variants[st.extended.node_variant[node_name]][0])
            else:
                claim = copy.deepcopy(st.claims[i])
            meta = claim.setdefault("metadata", {})
            if FINALIZER not in (meta.get("finalizers") or ()):
                meta["finalizers"] = [*(meta.get("finalizers") or ()), FINALIZER]
            claim.setdefault("status", {})["allocation"] = found[k]
            st.chosen[i] = found[k]
            self.in_flight[_uid(claim)] = claim
            if preference is not None:
                preference.allocated(node_name, _uid(claim), found[k])
        return None

    @staticmethod
    def _preference(state: CycleState) -> DevicePreference | None:
        """The device preference a plugin left for this pod (``framework.devicepreference``)."""
        pref = state.get(DEVICE_PREFERENCE_KEY)
        return pref if isinstance(pref, DevicePreference) else None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st: _State | None = state.get(KEY)
        if st is None:
            return
        for i in st.to_allocate:
            uid = _uid(st.claims[i])
            if uid not in self.written:
                self.in_flight.pop(uid, None)
        if st.extended is not None:
            self.in_flight.pop(st.extended.initial_uid, None)
            special = st.claims[-1]
            if st.extended.fresh and _name(special) != extended.SPECIAL_NAME:
                # PreBind created it: delete it, or it would be left behind (the next attempt
                # creates another)
                self._spawn(self._delete_claim(special, pod))
        for claim in st.claims[:len(st.claims) - (st.extended is not None)]:
            if (claim.get("status") or {}).get("allocation") and _reserved_for(claim, pod):
                key = (_uid(claim), pod.uid)
                if key not in self.unreserving:
                    self.unreserving[key] = asyncio.Event()
                    if not self._spawn(self._unreserve_claim(claim, pod, key)):
                        del self.unreserving[key]

    async def _unreserve_claim(self, claim: dict[str, Any], pod: PodInfo, key: tuple[str, str]) -> None:
        try:
            client = self.handle.client
            if client is None:
                return
            patch = {"metadata": {"uid": _uid(claim)},
                     "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
            try:
                await client.request("PATCH", _claim_path(claim) + "/status", body=patch,
                                     content_type="application/strategic-merge-patch+json")
            except (ApiError, OSError) as exc:
                log.warning("removing the pod from the claim's reservedFor failed",
                            extra={"kv": {"pod": pod.key, "claim": _label(claim), "error": str(exc)}})
        finally:
            done = self.unreserving.pop(key, None)
            if done is not None:
                done.set()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> bool:
        """Run ``coro`` in the background; False (and it is dropped) when nothing may be written."""
        spawn = self.handle.spawn
        if spawn is not None and spawn(coro):
            return True
        coro.close()   # offline, or a scheduler that does not write (shadow mode)
        return False

    # -- PreBind -----------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        st: _State | None = state.get(KEY)
        if st is None:
            return Status(Code.SKIP)
        client = self.handle.client
        if client is None:
            return Status(Code.ERROR, "binding claims: no API client (an offline run cannot write claims)")
        for i, claim in enumerate(st.claims):
            pending = self.unreserving.get((_uid(claim), pod.uid))
            if pending is not None:
                # An earlier attempt's Unreserve is taking this pod out of reservedFor: let it land,
                # then write the reservation again on what the API server has.
                await pending.wait()
                try:
                    claim = await client.request("GET", _claim_path(claim))
                except ApiError as exc:
                    if exc.local:
                        raise
                    return Status(Code.ERROR, f"get claim {_label(claim)}: {exc}")
            if _reserved_for(claim, pod):
                continue
            special = i == st.special
            if special and i not in st.chosen:
                continue   # the node's device plugins give all of it: no claim
            try:
                if special and _name(claim) == extended.SPECIAL_NAME:
                    claim = st.claims[i] = await self._create_extended_claim(client, st, node_name)
                st.claims[i] = await self._bind_claim(client, claim, st.chosen.get(i), pod)
                if special:
                    await self._patch_extended_status(client, st, pod, node_name)
            except _BindError as exc:
                return Status(Code.ERROR, str(exc))
        if self.binding_conditions and binding.has_binding_conditions(st.claims):
            return await self._wait_for_binding_conditions(st, pod, node_name)
        return None

    async def _wait_for_binding_conditions(self, st: _State, pod: PodInfo, node_name: str) -> Status | None:
        """Until every claim of the pod is ready for binding (``binding.pod_ready``), read from
        the store at each change of one of them (the version PreBind wrote while the store lags),
        at least every ``binding.POLL`` seconds, for at most ``binding_timeout``."""
        recorder = self.handle.recorder
        if recorder is not None:
            recorder.record(pod, controller=self.handle.profile_name, type_="Normal", reason=binding.PENDING_REASON,
                            action="Scheduling", note=f"waiting for binding conditions for device on node {node_name}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.binding_timeout
        wake = asyncio.Event()
        keys = [_label(c) for c in st.claims]
        for key in keys:
            self.binding_waiters.setdefault(key, set()).add(wake)
        outcome, error = "success", ""
        # Upstream checks at its poll ticks (now, then every 5 s): a claim's own timeout
        # (allocationTimestamp + bindingTimeout) is judged only there, so that the same claim fails
        # with the same message; readiness and failure are also checked at every change.
        next_tick, tick = loop.time(), True
        try:
            while True:
                wake.clear()
                try:
                    claims = [self._current_claim(c) for c in st.claims]
                    st.claims[:] = claims
                    if binding.pod_ready(claims, self.binding_timeout if tick else None, self.now()):
                        break
                except (binding.BindingFailed, ClaimNotReady) as exc:
                    error = str(exc)
                    outcome = "failed" if error.startswith(binding.FAILED) else "timeout"
                    break
                if tick:
                    next_tick += binding.POLL
                remaining = deadline - loop.time()
                if remaining <= 0:
                    outcome, error = "timeout", binding.DEADLINE
                    break
                try:
                    async with asyncio.timeout(min(remaining, max(0.0, next_tick - loop.time()))):
                        await wake.wait()
                except TimeoutError:
                    pass
                now = loop.time()
                if now >= deadline:
                    outcome, error = "timeout", binding.DEADLINE
                    break
                tick = now >= next_tick
        finally:
            for key in keys:
                waiters = self.binding_waiters.get(key)
                if waiters is not None:
                    waiters.discard(wake)
                    if not waiters:
                        del self.binding_waiters[key]
        # kube-scheduler's dra_bindingconditions_* metrics: the wait per allocated device, and each
        # device with binding conditions, labelled with how the wait ended.
        label = {"success": "success", "failed": "failure", "timeout": "timeout"}.get(outcome, "error")
        waited = self.binding_timeout - max(0.0, deadline - loop.time())
        metrics = self.handle.metrics
        for claim in st.claims:
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
            for r in results:
                metrics.binding_conditions(r.get("driver", ""), label, waited)
            for r in results:
                if r.get("bindingConditions"):
                    metrics.binding_conditions(r.get("driver", ""), label, None)
        devices = binding.status_line(st.claims, outcome)
        if not error:
            log.info("binding conditions met", extra={"kv": {"pod": pod.key, "node": node_name, "devices": devices}})
            return None
        log.info("binding conditions not met", extra={"kv": {"pod": pod.key, "node": node_name, "error": error,
                                                             "devices": devices}})
        return Status(Code.ERROR, error)

    async def _create_extended_claim(self, client: APIClient, st: _State, node_name: str) -> dict[str, Any]:
        """``createExtendedResourceClaimInAPI``: the node's variant of the special claim, created with
        a generated name; its promised devices stay in flight under the uid the API server gave it."""
        ext = st.extended
        assert ext is not None
        variant = ext.node_variant.get(node_name)
        if variant is None or variant not in ext.variants:
            raise _BindError(f"extended resource claim not found for node {node_name}")
        body = copy.deepcopy(ext.variants[variant][0])
        body.pop("status", None)
        meta = body.setdefault("metadata", {})
        meta.pop("name", None)
        meta.pop("uid", None)
        namespace = meta.get("namespace", "")
        try:
            created: dict[str, Any] = await client.request(
                "POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", body=body)
        except ApiError as exc:
            if exc.local:
                raise
            self.handle.metrics.resource_claim_created("failure")
            raise _BindError(f"create claim for extended resources {namespace}/: {exc}") from None
        except OSError as exc:
            self.handle.metrics.resource_claim_created("failure")
            raise _BindError(f"create claim for extended resources {namespace}/: {exc}") from None
        self.handle.metrics.resource_claim_created("success")
        promised = self.in_flight.pop(ext.initial_uid, None)
        if promised is not None:
            now = copy.deepcopy(created)
            now.setdefault("status", {})["allocation"] = promised["status"]["allocation"]
            self.in_flight[_uid(created)] = now
        log.info("created the pod's extended resource claim",
                 extra={"kv": {"node": node_name, "claim": _label(created)}})
        return created

    async def _patch_extended_status(self, client: APIClient, st: _State, pod: PodInfo, node_name: str) -> None:
        """``patchPodExtendedResourceClaimStatus``: the pod's ``status.extendedResourceClaimStatus``."""
        ext = st.extended
        assert ext is not None
        mappings = ext.variants.get(ext.node_variant.get(node_name, ()), ({}, []))[1]
        if not mappings:
            raise _BindError(f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                             "ExtendedResourceClaimStatus")
        body = {"status": {"extendedResourceClaimStatus": {"requestMappings": mappings,
                                                           "resourceClaimName": _name(st.claims[-1])}}}
        try:
            await client.request("PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status", body=body,
                                 content_type="application/strategic-merge-patch+json")
        except ApiError as exc:
            if exc.local:
                raise
            raise _BindError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc}") from None
        except OSError as exc:
            raise _BindError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc}") from None

    def _current_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        """The claim as the store has it, or as PreBind wrote it when that is newer."""
        current = self.handle.objects.get("resourceclaims", _label(claim))
        if current is None:
            raise ClaimNotReady(f'could not find ResourceClaim "{_label(claim)}"')
        return claim if _version(claim) > _version(current) else current

    def _wake_binding_waiters(self, kind: str, typ: str | None, old: dict[str, Any] | None,
                              obj: dict[str, Any]) -> None:
        """An ``ObjectLister.subscribe`` listener: a claim a PreBind waits on changed."""
        if kind != CLAIMS or not self.binding_waiters:
            return
        for wake in self.binding_waiters.get(_label(obj), ()):
            wake.set()

    async def _bind_claim(self, client: APIClient, claim: dict[str, Any], allocation: dict[str, Any] | None,
                          pod: PodInfo) -> dict[str, Any]:
        label = _label(claim)
        what = "add allocation and reservation to" if allocation is not None else "add reservation to"
        obj = copy.deepcopy(claim)
        for attempt in range(CONFLICT_RETRIES):
            if attempt:
                try:
                    obj = await client.request("GET", _claim_path(claim))
                except ApiError as exc:
                    if exc.local:
                        raise   # the write fence: the engine requeues the pod quietly
                    raise _BindError(f"get updated claim {label} after conflict: {exc}") from None
                except OSError as exc:
                    raise _BindError(f"get updated claim {label} after conflict: {exc}") from None
            meta = obj.setdefault("metadata", {})
            if meta.get("deletionTimestamp"):
                raise _BindError(f"claim {label} got deleted in the meantime")
            status = obj.setdefault("status", {})
            if allocation is not None:
                if status.get("allocation"):
                    raise _BindError(f"claim {label} got allocated elsewhere in the meantime")
                if FINALIZER not in (meta.get("finalizers") or ()):
                    meta["finalizers"] = [*(meta.get("finalizers") or ()), FINALIZER]
                    written = await _put(client, _claim_path(claim), obj, f"add finalizer to claim {label}")
                    if written is None:
                        continue   # conflict: read it again
                    obj = written
                    status = obj.setdefault("status", {})
                status["allocation"] = allocation
            status["reservedFor"] = [*(status.get("reservedFor") or ()),
                                     {"resource": "pods", "name": pod.name, "uid": pod.uid}]
            if self.binding_conditions:
                if not status.get("allocation"):
                    raise _BindError(f"claim {label} got deallocated elsewhere in the meantime")
                status["allocation"] = {**status["allocation"]}
                status["allocation"].setdefault("allocationTimestamp", binding.format_time(self.now()))
            updated = await _put(client, _claim_path(claim) + "/status", obj, f"{what} claim {label}")
            if updated is None:
                continue
            if allocation is not None and _uid(claim) in self.in_flight:
                # Written: in flight until the store holds this version (settle_in_flight).
                self.in_flight[_uid(claim)] = updated
                self.written[_uid(claim)] = _version(updated)
            return updated
        raise _BindError(f"{what} claim {label}: the object has been modified {CONFLICT_RETRIES} times "
                         f"while we tried to update it")

    # -- queueing ----------------------------------------------------------------------------------

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        claim_actions = ("Add", "Update", "Delete") if self.kube_version >= (1, 37) else ("Add", "Update")
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable")),
                *(ClusterEventWithHint(ClusterEvent("ResourceClaim", a), self._after_claim_change)
                  for a in claim_actions),
                # The pod's own generated claims published (1.35's Pod/UpdatePodGeneratedResourceClaim,
                # 1.37's TargetPod: the same update of the waiting pod itself)
                ClusterEventWithHint(ClusterEvent("TargetPod", "UpdatePodGeneratedResourceClaim"),
                                     self._after_target_pod_update),
                ClusterEventWithHint(ClusterEvent("DeviceClass", "Add")),
                ClusterEventWithHint(ClusterEvent("DeviceClass", "Update")),
                ClusterEventWithHint(ClusterEvent("ResourceSlice", "Add")),
                ClusterEventWithHint(ClusterEvent("ResourceSlice", "Update")),
                *((ClusterEventWithHint(ClusterEvent("DeviceTaintRule", "*"), self._after_taint_rule_change),)
                  if self.taint_rules else ()))

    def _after_taint_rule_change(self, pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        """A DeviceTaintRule was added, changed or deleted: upstream's resourceslice tracker then
        sends a ResourceSlice update (which DynamicResources registers without a hint) for each
        slice where some device's taints changed, so the pod moves iff one did."""
        slices = self.handle.objects.list("resourceslices")
        before, after = _rule_selection(old, slices), _rule_selection(new, slices)
        if before != after:
            return True
        return bool(before) and _taint_key(old) != _taint_key(new)

    def _after_target_pod_update(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """The waiting pod's own update published its claims, and all of them are there now
        (``isSchedulableAfterTargetPodUpdate``)."""
        if new is None:
            return False
        try:
            self.pod_claims(new)
        except ClaimNotReady:
            return False
        return True

    def _after_claim_change(self, pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        """A claim the pod uses was created or changed, and all its claims are there now; or some
        claim was deallocated; or (1.37) a claim deleted while allocated
        (``isSchedulableAfterClaimChange``)."""
        if new is None:
            # 1.37's Delete: the devices of an allocated claim are free again
            return old is not None and bool((old.get("status") or {}).get("allocation"))
        try:
            claims = self.pod_claims(pod)
        except ClaimNotReady:
            return False
        if old is not None and (old.get("status") or {}).get("allocation") and \
                not ((new or {}).get("status") or {}).get("allocation"):
            return True
        uid = ((new or {}).get("metadata") or {}).get("uid")
        if not any((c.get("metadata") or {}).get("uid") == uid for c in claims):
            return False
        if old is None:
            return True
        return (old.get("status") or {}) != ((new or {}).get("status") or {})


class _BindError(Exception):
    pass


async def _put(client: APIClient, path: str, obj: dict[str, Any], what: str) -> dict[str, Any] | None:
    """Update ``obj`` at ``path``: the object written, or None on a conflict (409)."""
    try:
        written: dict[str, Any] = await client.request("PUT", path, body=obj)
    except ApiError as exc:
        if exc.local:
            raise   # the write fence: the engine requeues the pod quietly
        if exc.status == 409:
            return None
        raise _BindError(f"{what}: {exc}") from None
    except OSError as exc:
        raise _BindError(f"{what}: {exc}") from None
    return written


def _version(obj: dict[str, Any]) -> int:
    """A resourceVersion as a number (etcd's revision), to tell newer from older; -1 if unknown."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except ValueError:
        return -1


def _requests(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((claim.get("spec") or {}).get("devices") or {}).get("requests") or ())


def _preference(claim: dict[str, Any], allocation: dict[str, Any]) -> int:
    """8 - i for each ``firstAvailable`` request of ``claim`` whose i-th subrequest ``allocation`` used."""
    chosen = {r.get("request", "") for r in (allocation.get("devices") or {}).get("results") or ()}
    total = 0
    for r in _requests(claim):
        for i, sub in enumerate(r.get("firstAvailable") or ()):
            if f"{r.get('name', '')}/{sub.get('name', '')}" in chosen:
                total += FIRST_AVAILABLE_MAX - i
                break
    return total


def _rule_selection(rule: dict[str, Any] | None, slices: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """The devices (slice name, pool, device) of ``slices`` that DeviceTaintRule ``rule`` taints."""
    sel = ((rule or {}).get("spec") or {}).get("deviceSelector")
    if sel is None:
        return set()
    out = set()
    for s in slices:
        spec = s.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        if sel.get("driver") is not None and sel["driver"] != spec.get("driver"):
            continue
        if sel.get("pool") is not None and sel["pool"] != pool:
            continue
        for d in spec.get("devices") or ():
            if sel.get("device") is None or sel["device"] == d.get("name"):
                out.add(((s.get("metadata") or {}).get("name", ""), pool, d.get("name", "")))
    return out


def _taint_key(rule: dict[str, Any] | None) -> tuple[Any, ...]:
    """What the tracker compares of a taint (``taintsEqual``): key, effect, value, timeAdded."""
    taint = ((rule or {}).get("spec") or {}).get("taint") or {}
    return (taint.get("key") or "", taint.get("effect") or "", taint.get("value") or "", taint.get("timeAdded"))


def _claim_statuses(pod: PodInfo) -> list[dict[str, Any]]:
    raw = pod.raw or {}
    return list((raw.get("status") or {}).get("resourceClaimStatuses") or ())
