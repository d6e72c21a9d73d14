"""Coscheduling: gang scheduling of PodGroups, wire-compatible with scheduler-plugins.

A pod labelled ``scheduling.x-k8s.io/pod-group: <name>`` belongs to PodGroup ``<name>``
(``scheduling.x-k8s.io/v1alpha1``) in its namespace. A group is placed all or nothing.

By default a group goes through the pod-group cycle (``schedule_one_podgroup``, the engine
kube-scheduler 1.37 runs for its own PodGroups): when a member is popped, the members the queue
holds come with it and are placed from one snapshot, each assumed so the next sees it, stopping as
soon as ``minMember`` is out of reach (``minMember (M) cannot be satisfied: S scheduled, R
remaining``); either ``minMember`` of them fit and all of those are reserved and go to Permit
together (which finds the quorum at once), or nothing is held and the group backs off as a unit.
The rules below still decide (PreFilter, Reserve, Permit, PreBind, the backoff); PostFilter's
release does not run (no member waits). ``schedulerPluginsCompatible: true`` schedules members one
by one, as scheduler-plugins does:

* QueueSort: priority, then the group's time (the PodGroup's creationTimestamp, or its last
  failure, so a group that keeps failing goes behind newer ones), then the group key, then the
  largest member first (extended resources, CPU, memory: a 3-CPU driver before its 1-CPU workers,
  which spread first could leave it no node), then the pod name - a group's members leave the
  queue one after the other (upstream breaks the tie on the pod name alone, which interleaves
  groups created in the same second and orders members by name). Non-members sort by priority
  and queue time, as PrioritySort. Enable it in place of PrioritySort (``queueSort: enabled:
  [Coscheduling], disabled: ["*"]``), as scheduler-plugins' sample configuration does.
* PreFilter: a member is rejected early (UnschedulableAndUnresolvable, as upstream, so it never
  preempts) when the group is backing off, fewer than ``minMember`` of its pods exist or are free
  of scheduling gates, or the cluster's free capacity (aggregate over the nodes, the group's own placed
  pods given back) cannot hold ``minResources``. A member whose PodGroup does not exist passes and
  is rejected at Permit (``PodGroup not found``), as upstream. Non-members: Skip.
* Reserve records the group's generation; Permit makes a member Wait until ``minMember`` members
  hold live reservations (assumed or bound in this generation), then allows every waiting member
  at once. Each member waits ``scheduleTimeoutSeconds`` (else ``permitWaitingTimeSeconds``); the
  first waiter's timeout ends the attempt, and the first waiter wakes the siblings.
* Once Permit allows a member, its bind is retried on the same node until it is bound
  (``CycleState.bind_until_bound``): a failed bind (a 5xx, a 409 while etcd is unavailable, the
  client's rate limiter) never releases a group some of whose members are already bound.
* Unreserve (a timeout, a rejection, a failed PreBind, a deleted node) fails the group:
  its generation moves on and every waiting member is rejected (their reservations go). PreBind
  fails a member allowed in an older generation, so siblings allowed but not yet bound do not bind
  without their group.
* PostFilter: a member no node fits rejects the group unless quorum is already reached or the gap
  is within ``podGroupRejectPercentage`` of ``minMember`` (upstream's rule): its waiting members
  go and it moves behind newer groups.
* A failed group that has all its pods backs off as a unit (``group_backoff``): for
  ``podGroupBackoffSeconds``, or with 0 for 1 s doubling to 10 s, then its members are tried again.
  ``schedulerPluginsCompatible: true`` gives upstream's rules instead: a backoff only after
  PostFilter's rejection and only when ``podGroupBackoffSeconds`` is set, no retry when it ends,
  queue ties broken on the pod's name alone.
* PreemptionGate: a member may preempt only when every other member its quorum needs is already
  assumed, waiting or bound (DefaultPreemption and CapacityScheduling ask before their dry runs).
  The framework runs a gate's PostFilter after the other PostFilter plugins, whatever their
  configured order: a preemption that can complete the group comes first, and the waiting members
  are released only when none could (scheduler-plugins runs them in the listed order, so
  ``[Coscheduling, CapacityScheduling]`` there releases the waiting members, then reclaims).

Reads: PodGroups from the object store; the group's pods from the engine's pod events
(``PodWatcher``); reservations from its own Reserve/Unreserve. Metrics: groups waiting, admitted,
timed out (``Handle.metrics``).
"""

from __future__ import annotations

import asyncio
import calendar
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    Handle,
    NodeBatch,
    PermitPlugin,
    PodInfo,
    PodWatcher,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreemptionGate,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPod,
    QueueSortPlugin,
    ReservePlugin,
    Status,
    arg,
)
from pysched.framework.api import format_resource, resource_value
from pysched.framework.podgroups import WorkloadPodGroup, placement_feasibility

NAME = "Coscheduling"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PODGROUPS = "podgroups"
DEFAULT_WAIT_SECONDS = 60
GEN_KEY = NAME + "/generation"
PLACEMENT_TRIAL_KEY = "pysched/pod-group-placement-trial"   # schedule_one_podgroup.SIMULATION_KEY
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@dataclass
class CoschedulingArgs:
    KIND: ClassVar[str] = "CoschedulingArgs"
    permit_waiting_time_seconds: int = field(default=DEFAULT_WAIT_SECONDS, metadata=arg(ge=0))
    pod_group_backoff_seconds: int = field(default=0, metadata=arg(ge=0))
    pod_group_reject_percentage: int = field(default=10, metadata=arg(ge=0, le=100))
    # pysched's own choices off, scheduler-plugins' on: no group backoff unless podGroupBackoffSeconds
    # is set, members not tried again when a backoff ends, queue ties broken on the pod's name.
    scheduler_plugins_compatible: bool = False



@dataclass
class PodGroupSpec:
    """The fields of a PodGroup the plugin uses."""
    key: str
    min_member: int
    min_resources: dict[str, int]
    timeout: float | None           # scheduleTimeoutSeconds (None: the plugin's default)
    created: float                  # creationTimestamp, epoch seconds


@dataclass
class Group:
    """One PodGroup's members and the state of its current attempt."""
    key: str
    members: dict[str, PodInfo] = field(default_factory=dict)   # uid -> pod (pending or bound)
    bound: set[str] = field(default_factory=set)                # members on a node (informer)
    reserved: dict[str, int] = field(default_factory=dict)      # uid -> generation at Reserve
    reserved_on: dict[str, str] = field(default_factory=dict)   # uid -> node of that reservation
    waiting: set[str] = field(default_factory=set)              # members held at Permit
    generation: int = 0
    deadline: float = 0.0            # monotonic; 0: nobody waits
    failed_at: float = 0.0           # epoch of the last failure (queue order), 0: none
    backoff_until: float = 0.0       # monotonic
    capacity_ok_until: float = 0.0   # monotonic: minResources passed recently
    admitted_generation: int = -1
    failures: int = 0                # consecutive backed-off attempts (reset when admitted)

    def placed(self) -> int:
        """Members holding a live reservation: bound, or reserved in this generation."""
        gen = self.generation
        return len(self.bound) + sum(1 for uid, g in self.reserved.items() if g == gen and uid not in self.bound)

    def reserved_on_missing_node(self, nodes: Any) -> str:
        """A node that holds a reservation of this generation but is gone from the snapshot ("" if none)."""
        gen = self.generation
        for uid, g in self.reserved.items():
            if g == gen and uid not in self.bound:
                node = self.reserved_on.get(uid, "")
                if node and node not in nodes:
                    return node
        return ""


def _epoch(ts: str | None) -> float:
    if not ts:
        return 0.0
    try:
        return float(calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return 0.0


_BASE_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage", "pods"))


def _largest_first(pod: PodInfo) -> tuple[int, int, int]:
    """A member's place within its group: larger members first (extended resources such as GPUs,
    then CPU, then memory), as first-fit-decreasing packs - small members spread first can leave
    a large one room nowhere, and a group retried in the same order would fail the same way."""
    req = pod.requests
    extended = sum(v for r, v in req.items() if r not in _BASE_RESOURCES and not r.startswith("hugepages-"))
    return (-extended, -req.get("cpu", 0), -req.get("memory", 0))


def group_key(pod: PodInfo) -> str:
    """``namespace/podgroup`` of a member, "" for any other pod."""
    name = pod.labels.get(POD_GROUP_LABEL)
    return f"{pod.namespace}/{name}" if name else ""


class Coscheduling(QueueSortPlugin[CoschedulingArgs], PreEnqueuePlugin[CoschedulingArgs],
                   PreFilterPlugin[CoschedulingArgs], PostFilterPlugin[CoschedulingArgs],
                   ReservePlugin[CoschedulingArgs], PermitPlugin[CoschedulingArgs],
                   PreBindPlugin[CoschedulingArgs], EnqueueExtensions, PodWatcher, PreemptionGate):
    name = NAME
    object_kinds = (PODGROUPS,)
    args: CoschedulingArgs

    writes_condition = False
    podgroup_api_version = "scheduling.x-k8s.io/v1alpha1"   # the group's Events regard this PodGroup

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        # pysched's default: a group's members are placed together in one pod-group cycle
        # (``schedule_one_podgroup``); scheduler-plugins' member-by-member wait at Permit otherwise.
        self.group_cycle = not self.args.scheduler_plugins_compatible
        self.groups: dict[str, Group] = {}
        self.group_of: dict[str, str] = {}       # uid -> group key
        self.clock = time.monotonic
        self._mono_to_epoch = time.time() - time.monotonic()
        self._waiting_groups: set[str] = set()

    # -- PodGroups and members -------------------------------------------------------------------

    def podgroup(self, key: str) -> PodGroupSpec | None:
        obj = self.handle.objects.get(PODGROUPS, key) if self.handle.objects is not None else None
        if obj is None:
            return None
        spec = obj.get("spec") or {}
        res: dict[str, int] = {}
        for name, q in (spec.get("minResources") or {}).items():
            try:
                res[name] = resource_value(name, q)
            except (ValueError, TypeError):
                continue
        timeout = spec.get("scheduleTimeoutSeconds")
        meta = obj.get("metadata") or {}
        try:
            min_member = int(spec.get("minMember") or 0)
        except (TypeError, ValueError):
            min_member = 0
        return PodGroupSpec(key, min_member, res,
                            float(timeout) if isinstance(timeout, int) and timeout > 0 else None,
                            _epoch(meta.get("creationTimestamp")))

    def _group(self, key: str) -> Group:
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(key)
        return g

    def pod_seen(self, pod: PodInfo) -> None:
        key = group_key(pod)
        old_key = self.group_of.get(pod.uid)
        if old_key is not None and old_key != key:
            self.pod_gone(pod.uid)
        if not key:
            return
        g = self._group(key)
        before = g.members.get(pod.uid)
        g.members[pod.uid] = pod
        self.group_of[pod.uid] = key
        if pod.node_name:
            g.bound.add(pod.uid)
            g.reserved.pop(pod.uid, None)
            g.reserved_on.pop(pod.uid, None)
            g.waiting.discard(pod.uid)
        if before is None or (before.gates and not pod.gates):
            # A sibling arrived (or lost its gates): wake the group when it now has enough pods -
            # the ones PreEnqueue holds back too.
            pg = self.podgroup(key)
            if pg is not None and self._live_members(g) == pg.min_member:
                self._activate(g)
                regate = self.handle.regate
                if regate is not None and self.group_cycle:
                    regate([uid for uid in g.members if uid not in g.bound])

    def pod_gone(self, uid: str) -> None:
        key = self.group_of.pop(uid, None)
        if key is None:
            return
        g = self.groups.get(key)
        if g is None:
            return
        g.members.pop(uid, None)
        g.bound.discard(uid)
        self._drop_if_empty(g)

    def _drop_if_empty(self, g: Group) -> None:
        """Forget a group nothing refers to any more: no member, no reservation, nobody waiting
        (its last member deleted, or the last reservation of a deleted member released)."""
        if not g.members and not g.reserved and not g.waiting and self.groups.get(g.key) is g:
            del self.groups[g.key]
            self._waiting_groups.discard(g.key)

    @staticmethod
    def _live_members(g: Group) -> int:
        return sum(1 for p in g.members.values() if not p.gates)

    def _activate(self, g: Group, but: str = "") -> None:
        if self.handle.activate is not None:
            self.handle.activate([uid for uid in g.members if uid != but and uid not in g.bound])

    def _update_waiting(self, g: Group) -> None:
        if g.waiting:
            self._waiting_groups.add(g.key)
        else:
            self._waiting_groups.discard(g.key)
        self.handle.metrics.podgroups_waiting(len(self._waiting_groups))

    def _fail_group(self, g: Group, reason: str, *, timed_out: bool = False, from_post_filter: bool = False,
                    retry: bool = False) -> None:
        """End the group's attempt: reject every waiting member (their Unreserve releases them),
        invalidate members allowed but not bound yet, and back the group off (``group_backoff``)
        unless it backs off already - a rejection while it does never extends it. ``retry``: the
        attempt failed for a reason that is gone once it is released (a member's node deleted): its
        members are tried again at once, not left for a cluster event."""
        g.generation += 1
        waiting, g.waiting = g.waiting, set()
        for uid in waiting:
            wp = self.handle.waiting_pods.get(uid)
            if wp is not None:
                wp.reject(self.name, reason)
        g.deadline = 0.0
        g.capacity_ok_until = 0.0
        g.failed_at = time.time()
        if timed_out:
            self.handle.metrics.podgroup_timed_out()
        now = self.clock()
        seconds = self.group_backoff(g, from_post_filter) if g.backoff_until <= now else 0.0
        if seconds > 0:
            g.failures += 1
            g.backoff_until = now + seconds
            if not self.args.scheduler_plugins_compatible:
                try:
                    asyncio.get_running_loop().call_later(seconds, self._activate, g)
                except RuntimeError:
                    pass
        if retry:
            self._activate(g)   # members still in their binding cycles go to activeQ when they fail
        self._update_waiting(g)

    def group_backoff(self, g: Group, from_post_filter: bool) -> float:
        """How long a failed group is refused (PreFilter: ``podGroup ns/name failed recently``).

        Only a group that has all its pods backs off (one still missing some waits for them, and
        a sibling's arrival wakes it). scheduler-plugins backs a group off only from PostFilter,
        for ``podGroupBackoffSeconds``, and not at all when that is 0; pysched also backs off after
        a timeout or a failed bind, and with 0 uses the pod backoff's shape - 1 s doubling per
        consecutive failure up to 10 s - because a group retried with no pause re-grabs and
        releases its partial capacity in a tight loop (scheduler-plugins#429; in pysched's engine,
        two 4-GPU jobs on 6 GPUs made about 40,000 failed attempts in 12 s without it and 15 with
        it, ``bench/GANG_RETRIES.md``). ``schedulerPluginsCompatible: true`` gives upstream's rule."""
        pg = self.podgroup(g.key)
        if pg is None or len(g.members) < pg.min_member:
            return 0.0
        seconds = float(self.args.pod_group_backoff_seconds)
        if self.args.scheduler_plugins_compatible:
            return seconds if from_post_filter else 0.0
        if seconds > 0:
            return seconds
        return float(min(2 ** min(g.failures, 8), 10))

    # -- the pod-group cycle (framework.podgroups.PodGroupSource) ---------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """In the pod-group cycle: a member waits out of the queue until ``minMember`` of its group's
        pods exist (free of scheduling gates) - a group attempt on fewer could only fail, and each
        would try a group preemption. Members scheduled one by one (``schedulerPluginsCompatible``)
        are judged at PreFilter, as scheduler-plugins does."""
        if not self.group_cycle:
            return None
        key = group_key(pod)
        pg = self.podgroup(key) if key else None
        if pg is None:
            return None   # no group, or its PodGroup is missing: the cycle says "PodGroup not found"
        g = self._group(key)
        if pod.uid not in g.members or (g.members[pod.uid].gates and not pod.gates):
            self.pod_seen(pod)
        live = self._live_members(g)
        if live < pg.min_member:
            return Status(UAU, f"waiting for minMember pods of PodGroup {key}: {live} of {pg.min_member} exist")
        return None

    def cycle_group_key(self, pod: PodInfo) -> str:
        return group_key(pod)

    def cycle_members(self, key: str) -> Iterable[PodInfo]:
        g = self.groups.get(key)
        return g.members.values() if g is not None else ()

    def cycle_member_order(self, qpi: QueuedPod) -> tuple[Any, ...]:
        """Members are tried in the queue's order: the largest first."""
        return self.sort_key(qpi)

    def cycle_is_scheduled(self, pod: PodInfo) -> bool:
        return bool(pod.node_name) or pod.uid in self.handle.snapshot.pods

    def cycle_podgroup(self, key: str) -> WorkloadPodGroup | None:
        pg = self.podgroup(key)
        if pg is None:
            return None
        namespace, _, name = key.partition("/")
        obj = self.handle.objects.get(PODGROUPS, key) if self.handle.objects is not None else None
        return WorkloadPodGroup(namespace=namespace, name=name, generation=0, gang=True,
                                min_count=pg.min_member, topology_keys=(), priority=None,
                                preemption_policy=None, conditions=(),
                                uid=((obj or {}).get("metadata") or {}).get("uid") or "")

    def placement_feasible(self, pg: WorkloadPodGroup, scheduled: int, remaining: int) -> Status | None:
        return placement_feasibility(pg.min_count, scheduled, remaining, "minMember")

    def cycle_missing(self, key: str) -> Status:
        """A member whose PodGroup does not exist: what Permit says when scheduled one by one."""
        return Status(Code.UNSCHEDULABLE, "PodGroup not found", plugin=self.name)

    def cycle_failed(self, key: str, message: str) -> None:
        """The group did not fit in its cycle: it backs off as a unit (``group_backoff``)."""
        g = self.groups.get(key)
        if g is not None:
            self._fail_group(g, message)

    # -- QueueSort -------------------------------------------------------------------------------

    def sort_key(self, qpi: QueuedPod) -> tuple[Any, ...]:
        pod: PodInfo = qpi.pod
        name = pod.labels.get(POD_GROUP_LABEL)
        if not name:
            return (-pod.priority, qpi.timestamp + self._mono_to_epoch, "", (), "")
        key = f"{pod.namespace}/{name}"
        g = self.groups.get(key)
        when = g.failed_at if g is not None and g.failed_at else 0.0
        if not when:
            pg = self.podgroup(key)
            when = pg.created if pg is not None and pg.created else pod.created
        if self.args.scheduler_plugins_compatible:
            return (-pod.priority, when, "", (), f"{pod.namespace}/{pod.name}")   # upstream: ties on the pod alone
        return (-pod.priority, when, key, _largest_first(pod), pod.name)

    # -- PreFilter -------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        name = pod.labels.get(POD_GROUP_LABEL)
        if not name:
            return None, Status(Code.SKIP)
        key = f"{pod.namespace}/{name}"
        pg = self.podgroup(key)
        if pg is None:
            # As upstream: let it through; Permit rejects it ("PodGroup not found") on the node
            # the cycle chose, so the message names the missing group only once it matters.
            return None, None
        g = self._group(key)
        if pod.uid not in g.members:
            self.pod_seen(pod)
        now = self.clock()
        if g.backoff_until > now:
            return None, Status(UAU, f"podGroup {key} failed recently")
        total = len(g.members)
        if total < pg.min_member:
            return None, Status(UAU, f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                                     f"current pods number: {total}, minMember of group: {pg.min_member}")
        if self._live_members(g) < pg.min_member:
            return None, Status(UAU, f"pre-filter pod {pod.name} cannot proceed due to gated pods in the same "
                                     "PodGroup")
        if pg.min_resources and g.capacity_ok_until <= now:
            gap = self._resource_gap(g, pg, nodes)
            if gap:
                # Upstream's words; it prints each Quantity as Go's struct dump, pysched as a quantity.
                text = " ".join(f"{r}:{format_resource(r, v)}" for r, v in sorted(gap.items()))
                return None, Status(UAU, f"resource gap: map[{text}]")
            g.capacity_ok_until = now + self.args.permit_waiting_time_seconds
        return None, None

    def _resource_gap(self, g: Group, pg: PodGroupSpec, nodes: NodeBatch) -> dict[str, int]:
        """``CheckClusterResource``: what ``minResources`` (and ``pods: minMember``) needs beyond the
        free capacity summed over the nodes, the group's own placed pods given back."""
        need = dict(pg.min_resources)
        need["pods"] = need.get("pods", 0) + pg.min_member
        cache_pods = self.handle.snapshot.pods
        own = [cache_pods[uid] for uid in (*g.bound, *g.reserved) if uid in cache_pods]
        gap = {}
        for res, amount in need.items():
            if res == "pods":
                free = np.maximum(nodes.allocatable("pods") - nodes.pod_count(), 0).sum()
                free += len(own)
            else:
                free = np.maximum(nodes.allocatable(res) - nodes.requested(res), 0).sum()
                free += sum(p.requests.get(res, 0) for p in own)
            if amount > free:
                gap[res] = int(amount - free)
        return gap

    # -- PostFilter ------------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        key = group_key(pod)
        if not key:
            return None, Status(Code.UNSCHEDULABLE)
        pg = self.podgroup(key)
        if pg is None:
            return None, Status(Code.UNSCHEDULABLE, "can not find pod group")
        g = self.groups.get(key)
        if g is None:
            # Every member is gone (deleted while this one was being scheduled): nothing to release.
            return None, Status(Code.UNSCHEDULABLE)
        placed = g.placed()
        if placed >= pg.min_member:
            return None, Status(Code.UNSCHEDULABLE)
        gap_pct = (pg.min_member - placed) * 100
        if pg.min_member > 0 and gap_pct <= self.args.pod_group_reject_percentage * pg.min_member:
            return None, Status(Code.UNSCHEDULABLE)
        # As upstream, whatever failed (a filter, or PreFilter for missing siblings or a backoff):
        # the waiting members go, the group moves behind newer ones, and it backs off when it has
        # all its pods (a group still missing some would only wait for them).
        self._fail_group(g, "optimistic rejection in PostFilter", from_post_filter=True)
        return None, Status(Code.UNSCHEDULABLE, f"PodGroup {key} gets rejected due to Pod {pod.name} "
                                                "is unschedulable even after PostFilter")

    # -- Reserve / Permit / PreBind --------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        key = group_key(pod)
        if not key or state.get(PLACEMENT_TRIAL_KEY):
            return None
        g = self._group(key)
        if pod.uid not in g.members:
            self.pod_seen(pod)
        g.reserved[pod.uid] = g.generation
        g.reserved_on[pod.uid] = node_name
        state.write(GEN_KEY, g.generation)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        key = group_key(pod)
        if not key or state.get(PLACEMENT_TRIAL_KEY):
            return   # a placement tried in the pod-group cycle and taken back: the attempt goes on
        g = self.groups.get(key)
        if g is None:
            return
        was_waiting = pod.uid in g.waiting
        g.waiting.discard(pod.uid)
        g.reserved.pop(pod.uid, None)
        g.reserved_on.pop(pod.uid, None)
        if state.get(GEN_KEY) != g.generation:
            self._update_waiting(g)   # an attempt that already failed: nothing more to release
        else:
            timed_out = was_waiting and g.deadline > 0 and self.clock() >= g.deadline - 0.05
            self._fail_group(g, "rejection in Unreserve", timed_out=timed_out)
        self._drop_if_empty(g)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        key = group_key(pod)
        if not key:
            return None, 0.0
        pg = self.podgroup(key)
        if pg is None:
            return Status(Code.UNSCHEDULABLE, "PodGroup not found"), 0.0
        g = self._group(key)
        gone = g.reserved_on_missing_node(self.handle.snapshot.nodes)
        if gone:
            # A sibling is assumed on a node that no longer exists: it can never bind, so the
            # group cannot reach quorum with it. Release everyone now rather than at the deadline.
            self._fail_group(g, f"a member's node {gone} was deleted", retry=True)
            return Status(Code.UNSCHEDULABLE, f"PodGroup {key} was released: a member was assumed on node {gone}, "
                                              "which was deleted"), 0.0
        # Once allowed, a member is bound even if its bind fails for a while: a gang half bound
        # and half released is what all-or-nothing must never leave behind.
        state.bind_until_bound()
        placed = g.placed()
        if placed >= pg.min_member:
            for uid in g.waiting:
                wp = self.handle.waiting_pods.get(uid)
                if wp is not None:
                    wp.allow(self.name)
            if g.admitted_generation != g.generation and (g.waiting or placed == pg.min_member):
                g.admitted_generation = g.generation
                self.handle.metrics.podgroup_admitted()
            g.waiting.clear()
            g.deadline = 0.0
            g.failed_at = 0.0
            g.failures = 0
            self._update_waiting(g)
            return None, 0.0
        now = self.clock()
        first = not g.waiting
        g.waiting.add(pod.uid)
        # Each member waits the whole configured time, as upstream (the framework caps it at 15
        # minutes); the first waiter's timeout ends the group's attempt - its Unreserve rejects
        # the others - so later members never extend it.
        wait = pg.timeout if pg.timeout is not None else float(self.args.permit_waiting_time_seconds)
        wait = min(wait or DEFAULT_WAIT_SECONDS, 900.0)
        if first or g.deadline <= 0:
            g.deadline = now + wait
            self._activate(g, but=pod.uid)
        self._update_waiting(g)
        msg = (f"waiting for {pg.min_member - placed} more member(s) of PodGroup {key} "
               f"(minMember {pg.min_member}, {placed} assumed or bound)")
        return Status(Code.WAIT, msg), wait

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        key = group_key(pod)
        if not key:
            return Status(Code.SKIP)
        g = self.groups.get(key)
        gen = state.get(GEN_KEY)
        if g is not None and gen is not None and gen != g.generation:
            return Status(Code.UNSCHEDULABLE, f"PodGroup {key} was rejected before this member was bound "
                                              "(another member failed); retrying the group")
        if g is not None and (gone := g.reserved_on_missing_node(self.handle.snapshot.nodes)):
            self._fail_group(g, f"a member's node {gone} was deleted", retry=True)
            return Status(Code.UNSCHEDULABLE, f"PodGroup {key} was released before this member was bound: a "
                                              f"member was assumed on node {gone}, which was deleted")
        return None

    # -- PreemptionGate --------------------------------------------------------------------------

    def preemption_blocked(self, pod: PodInfo) -> str:
        key = group_key(pod)
        if not key:
            return ""
        pg = self.podgroup(key)
        if pg is None:
            return ""   # its Permit will reject it; preemption follows DefaultPreemption's own rules
        g = self.groups.get(key) or Group(key)   # a question: it creates no group
        others = g.placed() - (1 if g.reserved.get(pod.uid) == g.generation or pod.uid in g.bound else 0)
        if others + 1 >= pg.min_member:
            return ""
        return (f"not eligible: PodGroup {key} has {others} of minMember {pg.min_member} members assumed or bound; "
                "a gang member preempts only to complete its group")

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        def own_group(pod: PodInfo, old: Any, new: Any) -> bool:
            obj = new if new is not None else old
            meta = (obj or {}).get("metadata") or {}
            return (meta.get("namespace") == pod.namespace
                    and meta.get("name") == pod.labels.get(POD_GROUP_LABEL))

        def not_own_release(pod: PodInfo, old: Any, new: Any) -> bool:
            # A sibling's reservation released with its group frees nothing the group can use:
            # without this a gang that cannot complete re-grabs its own capacity forever.
            return not (isinstance(old, PodInfo) and old.namespace == pod.namespace
                        and old.labels.get(POD_GROUP_LABEL) == pod.labels.get(POD_GROUP_LABEL))

        # Capacity freed by anyone else may help: not skipped (scheduler-plugins#983: precise
        # hints livelocked priorities).
        return (ClusterEventWithHint(ClusterEvent("PodGroup", "Add"), own_group),
                ClusterEventWithHint(ClusterEvent("PodGroup", "Update"), own_group),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete"), not_own_release),
                ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "Update")))
