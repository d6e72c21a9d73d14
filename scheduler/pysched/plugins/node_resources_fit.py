"""NodeResourcesFit (PreFilter, Filter, PreScore, Score): the pod's requests must fit what is left.

Filter, as upstream ``fitsRequest``: the node must have room for one more pod (``Too many
pods``), and for every resource the pod requests (> 0) the request must not exceed allocatable
minus what the node's pods - bound by anyone, or assumed - already request (``Insufficient
<resource>``). All insufficient resources are reported; a request larger than the node's whole
allocatable makes the status UnschedulableAndUnresolvable. Extended resources listed in
``ignoredResources`` or whose domain is in ``ignoredResourceGroups`` are not checked (the
extenders' ``managedResources`` with ``ignoredByScheduler`` land there too). Requests follow
``pysched.apis.core.resources``: init containers, sidecars, pod overhead and pod-level resources
count, limits-only resources get an equal request, a zero request is no demand.

Score, with ``scoringStrategy.type``:

* ``LeastAllocated`` (default): per resource ``(allocatable - requested) * 100 / allocatable``;
* ``MostAllocated``: ``requested * 100 / allocatable`` (requested capped at allocatable);
* ``RequestedToCapacityRatio``: a piecewise-linear ``shape`` of utilisation (0-100) -> score
  (0-10, scaled to 100);

weighted by ``resources`` (default cpu 1, memory 1). Requested amounts include the pod itself;
cpu and memory use "non-zero" requests (100m / 200Mi for containers that state none). For the
pod being scheduled the score counts its containers' requests even when it has pod-level
``spec.resources`` (``PodInfo.fit_score_requests``): kube-scheduler's scoring strategies (1.35-1.37) are
built without the PodLevelResources gate, while its filter (and BalancedAllocation) use the
pod-level values.
Resources the node does not have, and extended resources the pod does not request, are left out.

Extended resources backed by DRA (kube's DRAExtendedResource gate, on from 1.36): a resource a
DeviceClass backs (``spec.extendedResourceName``, or ``deviceclass.resource.kubernetes.io/<class>``)
is not checked on a node whose allocatable has 0 of it - DynamicResources allocates it there
(upstream's ``shouldDelegateResourceToDRA``); the queueing hints count such a node as fitting and
requeue on a DeviceClass that starts backing a resource the pod requests. (Scoring such a resource
from the node's devices, upstream's ``calculateDRAExtendedResourceAllocatableRequest``, is not done:
it is left out as a resource the node does not have.)

Reads: the batch's allocatable, requested and non-zero requested amounts and pod counts
(``NodeBatch`` accessors); the pod's parsed requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pysched.framework import (
    MAX_NODE_SCORE,
    READS_REQUESTS,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    Placement,
    PlacementScorePlugin,
    PodGroupCycleInfo,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import CPU, MEMORY, ConfigError, is_extended_resource, is_scalar, qualified_name_problem
from pysched.framework.features import DRA_EXTENDED_RESOURCE
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.dra_extended import DEVICE_CLASS_PREFIX, ExtendedResourceClasses, classes_for
from pysched.plugins.helper.resources import ResourceSpec, default_resource_specs, validate_resource_specs

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
TOO_MANY_PODS = "Too many pods"
PRE_FILTER_KEY = "NodeResourcesFit/preFilter"
PRE_SCORE_KEY = "NodeResourcesFit/preScore"
Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class UtilizationShapePoint:
    """A point of the RequestedToCapacityRatio shape: utilisation (0-100) -> score (0-10)."""
    utilization: int = field(default=0, metadata=arg(bits=32, ge=0, le=MAX_UTILIZATION))
    score: int = field(default=0, metadata=arg(bits=32, ge=0, le=MAX_CUSTOM_PRIORITY_SCORE))


@dataclass
class RequestedToCapacityRatioParam:
    shape: list[UtilizationShapePoint] = field(default_factory=list)

    def validate(self, path: str) -> None:
        for i in range(1, len(self.shape)):
            u = self.shape[i].utilization
            if self.shape[i - 1].utilization >= u:
                raise ConfigError(f"{path}.shape[{i}].utilization: {u}: values must be sorted in increasing order")


@dataclass
class ScoringStrategy:
    """``scoringStrategy``: the type, the weighted resources (default cpu and memory, weight 1) and,
    for RequestedToCapacityRatio, the shape."""
    type: str = field(default=LEAST_ALLOCATED, metadata=arg(choices=STRATEGIES))
    resources: list[ResourceSpec] = field(default_factory=default_resource_specs)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resource_specs()

    def validate(self, path: str) -> None:
        validate_resource_specs(self.resources, f"{path}.resources")
        # kube-scheduler 1.36's rules (1.35 accepted a RequestedToCapacityRatio type without its
        # parameters, and parameters for another type; pysched refuses both at every release).
        if self.type == REQUESTED_TO_CAPACITY_RATIO:
            if self.requested_to_capacity_ratio is None:
                raise ConfigError(f"{path}.requestedToCapacityRatio: Required value: "
                                  "must be specified when type is RequestedToCapacityRatio")
            if not self.requested_to_capacity_ratio.shape:
                raise ConfigError(f"{path}.requestedToCapacityRatio.shape: Required value: "
                                  "at least one point must be specified")
        elif self.requested_to_capacity_ratio is not None:
            raise ConfigError(f"{path}.requestedToCapacityRatio: Forbidden: "
                              "must be nil when type is not RequestedToCapacityRatio")


@dataclass
class NodeResourcesFitArgs:
    KIND = "NodeResourcesFitArgs"

    ignored_resources: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    ignored_resource_groups: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)

    def validate(self, path: str) -> None:
        for i, r in enumerate(self.ignored_resources):
            problem = qualified_name_problem(r)
            if problem:
                raise ConfigError(f"{path}.ignoredResources[{i}]: {r!r} is not a valid resource name: {problem}")
        for i, g in enumerate(self.ignored_resource_groups):
            if "/" in g:
                raise ConfigError(f"{path}.ignoredResourceGroups[{i}]: {g!r}: resource group name can't contain '/'")
            problem = qualified_name_problem(g)
            if problem:
                raise ConfigError(f"{path}.ignoredResourceGroups[{i}]: {g!r} is not a valid group name: {problem}")


def broken_linear(shape: list[UtilizationShapePoint], p: Int64Array) -> Int64Array:
    """``helper.BuildBrokenLinearFunction`` over an int64 array of utilisations (score x10 applied)."""
    pts = [(pt.utilization, pt.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for pt in shape]
    out = np.full(p.shape, pts[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(pts):
        sel = (~done) & (p <= u)
        if i == 0:
            out[sel] = s
        else:
            pu, ps = pts[i - 1]
            # Go integer division truncates toward zero; operands here keep the sign of (s - ps).
            num = (s - ps) * (p[sel] - pu)
            den = u - pu
            out[sel] = ps + np.trunc(num / den).astype(np.int64) if den else s
        done |= sel
    return out


class NodeResourcesFit(PreFilterPlugin[NodeResourcesFitArgs], FilterPlugin[NodeResourcesFitArgs],
                       PreScorePlugin[NodeResourcesFitArgs], ScorePlugin[NodeResourcesFitArgs],
                       PlacementScorePlugin[NodeResourcesFitArgs], EnqueueExtensions):
    name = "NodeResourcesFit"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.strategy = a.scoring_strategy
        extra = handle.ignored_extended_resources if handle is not None else frozenset()
        self.ignored = set(a.ignored_resources) | set(extra)
        self.ignored_groups = set(a.ignored_resource_groups)
        # DRAExtendedResource: the DeviceClass mapping (shared with DynamicResources), else None
        self.classes: ExtendedResourceClasses | None = None
        if handle is not None and handle.objects is not None and DRA_EXTENDED_RESOURCE in handle.feature_gates:
            self.classes = classes_for(handle.objects)

    # -- requests ------------------------------------------------------------------------------

    def checked_requests(self, pod: PodInfo) -> list[tuple[str, int]]:
        """(resource, amount) the filter checks: non-zero requests minus ignored extended ones."""
        out = []
        for name, q in pod.requests.items():
            if q == 0 or name == "pods":
                continue
            if is_extended_resource(name):
                if name in self.ignored or (self.ignored_groups and name.split("/")[0] in self.ignored_groups):
                    continue
            out.append((name, q))
        return out

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        state.write(PRE_FILTER_KEY, self.checked_requests(pod))
        return None, None

    def _requests(self, state: CycleState, pod: PodInfo) -> list[tuple[str, int]]:
        r: list[tuple[str, int]] | None = state.get(PRE_FILTER_KEY)
        return self.checked_requests(pod) if r is None else r

    # -- filter --------------------------------------------------------------------------------

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_REQUESTS   # the pods on a node only through requested() and pod_count()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        ok = nodes.pod_count() + 1 <= nodes.allocatable("pods")
        failures: list[tuple[Code, str, BoolArray]] = []
        if not ok.all():
            failures.append((Code.UNSCHEDULABLE, TOO_MANY_PODS, ~ok))
        for name, q in self._requests(state, pod):
            # A resource no node has reads as 0 allocatable: the request exceeds it everywhere.
            alloc = nodes.allocatable(name)
            bad = q > alloc - nodes.requested(name)
            if self.classes is not None and bad.any() and self.classes.backed(name):
                bad = bad & (alloc > 0)   # allocatable 0: DynamicResources allocates it there
            if not bad.any():
                continue
            reason = f"Insufficient {name}"
            unres = bad & (q > alloc)
            if unres.any():
                failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, unres))
                res = bad & ~unres
                if res.any():
                    failures.append((Code.UNSCHEDULABLE, reason, res))
            else:
                failures.append((Code.UNSCHEDULABLE, reason, bad))
            ok = ok & ~bad
        return FilterResult(ok, failures)

    # -- score ---------------------------------------------------------------------------------

    def _pod_score_request(self, pod: PodInfo, name: str) -> int:
        own = pod.fit_score_requests   # set only for pods with pod-level requests
        if own is not None:
            reqs, cpu, mem = own
            return cpu if name == CPU else mem if name == MEMORY else int(reqs.get(name, 0))
        if name == CPU:
            return int(pod.non0_cpu)
        if name == MEMORY:
            return int(pod.non0_mem)
        return int(pod.requests.get(name, 0))

    def _score_requests(self, pod: PodInfo) -> list[tuple[str, int, int]]:
        """(resource, weight, the pod's request as scoring counts it) per configured resource."""
        return [(r.name, r.weight, self._pod_score_request(pod, r.name)) for r in self.strategy.resources]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        state.write(PRE_SCORE_KEY, self._score_requests(pod))
        return None

    def _scorer(self, requested: Int64Array, alloc: Int64Array) -> Int64Array:
        s = self.strategy.type
        safe = np.where(alloc == 0, 1, alloc)
        if s == LEAST_ALLOCATED:
            return np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
        if s == MOST_ALLOCATED:
            return np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
        util = np.where(requested > alloc, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
        shape = self.strategy.requested_to_capacity_ratio
        return broken_linear(shape.shape if shape is not None else [], util)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Int64Array:
        reqs: list[tuple[str, int, int]] | None = state.get(PRE_SCORE_KEY)
        if reqs is None:
            reqs = self._score_requests(pod)
        n = len(nodes)
        total = np.zeros(n, dtype=np.int64)
        wsum = np.zeros(n, dtype=np.int64)
        rtc = self.strategy.type == REQUESTED_TO_CAPACITY_RATIO
        for name, weight, podreq in reqs:
            if (podreq == 0 and is_scalar(name)) or name == "pods":
                continue
            if not nodes.has_resource(name):
                continue
            alloc = nodes.allocatable(name)
            has = alloc > 0
            if name == CPU:
                requested = nodes.non_zero_requested(CPU) + podreq
            elif name == MEMORY:
                requested = nodes.non_zero_requested(MEMORY) + podreq
            else:
                requested = nodes.requested(name) + podreq
            rs = self._scorer(requested, alloc)
            if rtc:
                has = has & (rs > 0)
            total += np.where(has, rs * weight, 0)
            wsum += np.where(has, weight, 0)
        if rtc:
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(wsum > 0, np.floor(total / np.maximum(wsum, 1) + 0.5), 0)
            return out.astype(np.int64)
        return np.where(wsum > 0, total // np.maximum(wsum, 1), 0)

    def score_placement(self, group: PodGroupCycleInfo, placement: Placement, nodes: NodeBatch,
                        assignments: Sequence[tuple[PodInfo, str]]) -> int:
        """A pod group's placement (TopologyAwareWorkloadScheduling): MostAllocated over the
        placement's nodes taken together, the group's pods added - the domain the group leaves
        fullest, whatever the profile's own strategy (as kube-scheduler 1.37). Requests count as
        the node score counts them (cpu and memory with their non-zero defaults)."""
        total = wsum = 0
        for r in self.strategy.resources:
            name = r.name
            podreq = sum(self._pod_score_request(pod, name) for pod, _ in assignments)
            if (podreq == 0 and is_scalar(name)) or name == "pods" or not nodes.has_resource(name):
                continue
            alloc = int(nodes.allocatable(name).sum())
            if alloc <= 0:
                continue
            used = nodes.non_zero_requested(name) if name in (CPU, MEMORY) else nodes.requested(name)
            requested = int(used.sum()) + podreq
            total += min(requested, alloc) * MAX_NODE_SCORE // alloc * r.weight
            wsum += r.weight
        return total // wsum if wsum else 0

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        # (Node/UpdateNodeTaint is added for every plugin that registers Node/Add, with no hint,
        # as upstream's scheduler does: eventhandlers.EventRegistry.)
        events: tuple[ClusterEventWithHint, ...] = (
            ClusterEventWithHint(ClusterEvent("Node", "Add"), self._schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable"), self._schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent("Pod", "Delete"), _schedulable_after_pod_event),
            ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodScaleDown"), _schedulable_after_pod_event))
        if self.classes is not None:
            # a pod may wait for a class that backs an extended resource it requests
            events += (ClusterEventWithHint(ClusterEvent("DeviceClass", "Add"), _schedulable_after_device_class),
                       ClusterEventWithHint(ClusterEvent("DeviceClass", "Update"), _schedulable_after_device_class))
        return events

    def _delegated(self, name: str, node: NodeSpec) -> bool:
        """``shouldDelegateResourceToDRA``: a DeviceClass backs ``name`` and the node has none of it."""
        return self.classes is not None and node.allocatable.get(name, 0) <= 0 and self.classes.backed(name)

    def _node_may_fit(self, pod: PodInfo, node: NodeSpec) -> bool:
        """Whether the pod could fit the node when the node is empty (upstream's isFit)."""
        alloc = node.allocatable
        if alloc.get("pods", 0) < 1:
            return False
        for name, q in pod.requests.items():
            if q and name != "pods" and q > alloc.get(name, 0) and not self._delegated(name, node):
                return False
        return True

    def _schedulable_after_node_change(self, pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
        """Upstream's isSchedulableAfterNodeChange: the pod fits the (new) node when empty, and the node
        was added, or grew its allowed pod count or the allocatable of a resource the pod requests
        (or one of its requests is DRA's to allocate there)."""
        if new is None or not self._node_may_fit(pod, new):
            return False
        if old is None:
            return True
        if new.allocatable.get("pods", 0) > old.allocatable.get("pods", 0):
            return True
        return any(q and name != "pods" and (new.allocatable.get(name, 0) > old.allocatable.get(name, 0)
                                             or (is_scalar(name) and self._delegated(name, new)))
                   for name, q in pod.requests.items())


def _schedulable_after_device_class(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Upstream's isSchedulableAfterDeviceClassEvent: an added class whose implicit name the pod
    requests, or a class (added, or whose ``extendedResourceName`` changed) naming a resource the
    pod requests."""
    if new is None:
        return False
    explicit = (new.get("spec") or {}).get("extendedResourceName") or ""
    if old is not None:
        if ((old.get("spec") or {}).get("extendedResourceName") or "") == explicit:
            return False
    elif DEVICE_CLASS_PREFIX + ((new.get("metadata") or {}).get("name") or "") in pod.requests:
        return True
    return bool(explicit) and explicit in pod.requests


def _schedulable_after_pod_event(pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
    """Upstream's isSchedulableAfterPodEvent: a deleted pod that was bound or nominated; a pod scaled
    down that is the waiting pod itself, or a bound pod whose request fell for a resource the
    waiting pod requests."""
    if new is None:
        return old is not None and bool(old.node_name or old.nominated_node)
    if new.uid == pod.uid:
        return True
    if not new.node_name or old is None:
        return False
    return any(q and old.requests.get(name, 0) > new.requests.get(name, 0) for name, q in pod.requests.items())
