"""The pod-group cycle: a whole ``scheduling.k8s.io`` PodGroup placed from one snapshot, all or
nothing, as kube-scheduler 1.37 does with GenericWorkload (``schedule_one_podgroup.go``).

When the scheduler pops a member of a workload PodGroup (GangScheduling enabled), it takes every
other member the queue holds (activeQ, backoffQ, the unschedulable pool; not the ones PreEnqueue
holds back) and schedules them together:

1. Validation: every member has the same schedulerName, the same priority (the PodGroup's
   ``priority`` when set) and preemption policy, the members already scheduled included; else
   each member fails with the reason and the PodGroup's condition says ``SchedulerError``.
2. Placements: with TopologyAwareWorkloadScheduling the PlacementGenerate plugins split the nodes
   (TopologyPlacementGenerator: one placement per domain of the group's topology key); without
   it the group has one placement, every node.
3. Per placement, the members are tried one after the other (priority, attempts, queue time,
   name) on the placement's nodes only, each assumed and reserved so the next one sees it;
   GangScheduling's PlacementFeasible stops as soon as ``minCount`` is out of reach. Every
   assumption is then taken back: the snapshot is as before the cycle.
4. The placements the group fits in are scored (PlacementScore plugins, weighted; ties at random)
   and the best is kept. Its members are then assumed, reserved and permitted for real and go to
   their binding cycles; GangScheduling's Permit finds ``minCount`` scheduled at once, so no
   member of a gang placed in one cycle waits, holding resources, for the others.
5. A group that does not fit: each member fails with upstream's message (its own filter verdict
   for the member that fit nowhere, ``pod group is unschedulable, ...`` for the others), the
   PodGroup's ``PodGroupInitiallyScheduled`` condition says why (``Unschedulable``), and the group
   goes back to the queue as one: its members failed together, so they back off together.

Statuses mirror kube-scheduler's (``GroupStatus``: a code, reasons, and the "pod group is
unschedulable" error some of them carry), so every message reads as upstream's.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pysched.backend.queue.scheduling_queue import FORCE_ACTIVATE, IN_FLIGHT, QueuedPodInfo
from pysched.client.conditionwriter import OrderedConditionWriter
from pysched.framework import Code, CycleState, FrameworkError, PodGroupCycleInfo, PodInfo, Status
from pysched.framework.interface import NodeBatch, Placement
from pysched.framework.podgroup_preemption import Assignment
from pysched.framework.podgroups import (
    API_VERSION,
    CONDITION_SCHEDULED,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    WORKLOAD_PODGROUPS,
    ObjectRef,
    PodGroupSource,
    WorkloadPodGroup,
)
from pysched.framework.status import Diagnosis, FitError, NoNodesAvailable
from pysched.util.logs import kv

if TYPE_CHECKING:
    from pysched.runtime.framework import Framework

log = logging.getLogger("pysched.scheduler")

POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
# In the CycleState of a member tried on a placement (every assumption is taken back after): a
# plugin's Reserve/Unreserve there must not end the group's attempt (Coscheduling).
SIMULATION_KEY = "pysched/pod-group-placement-trial"
# DynamicResources' PodGroupPostFilter verdict (it releases the members' claims, then lets the next
# plugin try); stands aside (no reason) for a topology-constrained group with TAS on.
DRA_GROUP_POST_FILTER = "deallocation and deletion of ResourceClaims completed"
PODGROUPS_PATH = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}/status"
GROUP_PREFIX = "podgroup:"   # Scheduler.explanation("podgroup:ns/name"): a group's last attempt
GROUP_TRACES_KEPT = 500


@dataclass
class GroupStatus:
    """kube-scheduler's Status as the pod-group cycle uses it: ``message`` joins the error (when set:
    ``pod group is unschedulable``) and the reasons."""

    code: Code
    reasons: list[str] = field(default_factory=list)
    err: str = ""

    def message(self) -> str:
        return ", ".join(([self.err] if self.err else []) + self.reasons)

    def error_text(self) -> str:
        """``AsError().Error()``: the error when set, else the message."""
        return self.err or self.message()

    def clone(self) -> GroupStatus:
        return GroupStatus(self.code, list(self.reasons), self.err)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @classmethod
    def of(cls, st: Status | None) -> GroupStatus:
        if st is None:
            return cls(Code.SUCCESS)
        return cls(st.code, [st.message()] if st.message() else [])


def unschedulable(*reasons: str) -> GroupStatus:
    return GroupStatus(Code.UNSCHEDULABLE, list(reasons), POD_GROUP_UNSCHEDULABLE)


@dataclass
class MemberResult:
    """One member's outcome in a placement: its node (None: it fit nowhere, or was not tried), the
    status of its own attempt and the cycle state its plugins wrote."""

    qpi: QueuedPodInfo
    host: str | None = None
    status: Status | None = None
    diagnosis: Any = None
    state: CycleState | None = None
    tried: bool = False


@dataclass
class GroupResult:
    status: GroupStatus
    members: list[MemberResult]
    placement: Placement | None = None
    any_scheduled: bool = False
    # What the members never tried are told: the status before PodGroupPostFilter added its reason.
    untried: GroupStatus | None = None
    # Every placement tried, for the group's Event, /debug/explain and simulate --explain:
    # {"placement", "tier", "nodes", "fits", "message", "placed": {pod: node}, "scores": {plugin: n}}.
    tried: list[dict[str, Any]] = field(default_factory=list)
    waiting_on_preemption: bool = False          # PodGroupPostFilter succeeded: victims are going
    nominating: dict[str, str] = field(default_factory=dict)   # member uid -> nominated node ("": none)


def placement_trace(placement: Placement, result: GroupResult) -> dict[str, Any]:
    """What one placement's trial showed (``GroupResult.tried``)."""
    return {"placement": placement.name or "all nodes", "tier": placement.tier, "nodes": len(placement.slots),
            "fits": result.status.is_success(), "message": result.status.message(),
            "placed": {m.qpi.pod.name: m.host for m in result.members if m.host},
            "unplaced": {m.qpi.pod.name: m.status.message() for m in result.members
                         if m.tried and not m.host and m.status is not None},
            "scores": {}, "_placement": placement}


def group_note(result: GroupResult, message: str) -> str:
    """The note of a pod group's Event: what the attempt found, placement by placement."""
    tried = result.tried
    if result.status.is_success():
        placed = sum(1 for m in result.members if m.host)
        where = f" in {result.placement.name}" if result.placement is not None and result.placement.name else ""
        fitting = sum(1 for t in tried if t["fits"])
        of = f" (best of {fitting} placements that fit)" if fitting > 1 else ""
        return f"placed {placed} pod(s){where}{of}"
    parts = [message] if message else []
    blocking = next(((m.qpi.pod.name, m.status.message()) for m in result.members
                     if m.tried and not m.host and m.status is not None and m.status.message()), None)
    if blocking is not None:
        parts.append(f"{blocking[0]} fits nowhere: {blocking[1]}")
    if len(tried) > 1:
        parts.append("placements tried: " + "; ".join(
            f"{t['placement']}: {'fits' if t['fits'] else t['message'] or 'does not fit'}" for t in tried[:8])
            + ("; ..." if len(tried) > 8 else ""))
    return ". ".join(parts)


def member_order(qpi: QueuedPodInfo) -> tuple:
    """Upstream's PodGroupMemberPodsOrderingFunc: priority, attempts (more first), queue time, name."""
    return (-qpi.pod.priority, -qpi.attempts, qpi.timestamp, qpi.pod.name)


class PodGroupCycle:
    """The pod-group cycle, mixed into ``schedule_one.Scheduler`` (it uses the scheduler's cache,
    queue, node selection, failure handling and binding cycle)."""

    def init_pod_group_cycle(self) -> None:
        """The cycle's own state (the scheduler's ``__init__`` calls it)."""
        self._placement_slots: np.ndarray | None = None   # the placement being tried (find_feasible)
        self._cycle_taken: list[QueuedPodInfo] = []       # the members the cycle in progress took
        self._extenders_logged = False
        self.group_traces: dict[str, dict[str, Any]] = {}  # group key -> its last attempt (explain)
        client = self.client   # type: ignore[attr-defined]
        # PodGroupScheduled writes, one in flight per group and the last decision last
        self._group_conditions = (OrderedConditionWriter(client, self._spawn_api_task)   # type: ignore[attr-defined]
                                  if client is not None else None)

    def group_source(self, qpi: QueuedPodInfo) -> PodGroupSource | None:
        """The plugin whose pod-group cycle ``qpi``'s pod goes through, or None (scheduled on its own)."""
        fwk = self.frameworks.get(qpi.pod.scheduler_name)   # type: ignore[attr-defined]
        if fwk is None or not fwk.group_sources:
            return None
        for source in fwk.group_sources:
            if source.cycle_group_key(qpi.pod):
                if self._extenders_judge(qpi.pod):
                    return None
                return source
        return None

    def _extenders_judge(self, pod: PodInfo) -> bool:
        """A filter or prioritize extender is interested in ``pod``: the pod-group cycle does not call
        extenders, so the group's members are scheduled one by one (GangScheduling's and
        Coscheduling's Permit hold them until the quorum), each through the extenders."""
        extenders = self.extenders   # type: ignore[attr-defined]
        if not extenders or not any((e.filter_verb or e.prioritize_verb) and e.is_interested(pod) for e in extenders):
            return False
        if not self._extenders_logged:
            self._extenders_logged = True
            log.warning("extenders are configured: pod groups whose members an extender judges are scheduled "
                        "member by member, held at Permit until their quorum, not in one pod-group cycle",
                        extra=kv(pod=pod.key))
        return True

    # -- the cycle ----------------------------------------------------------------------------

    def schedule_pod_group(self, first: QueuedPodInfo, gang: PodGroupSource) -> None:
        """One pod-group cycle; never raises. On a crash every member it took from the queue and did
        not hand to a binding cycle or fail fails with an error (back to the queue, backing off)."""
        self._cycle_taken = [first]
        start = time.perf_counter()
        try:
            self._schedule_pod_group(first, gang)
        except Exception:  # noqa: BLE001 - a plugin's bug must not strand the group's members
            log.exception("pod-group cycle crashed", extra=kv(pod=first.pod.key, pod_group=first.pod.scheduling_group))
            fwk = self.frameworks.get(first.pod.scheduler_name)   # type: ignore[attr-defined]
            for q in self._cycle_taken:
                if q.where == IN_FLIGHT and q.pod.uid not in self.binding_pods:   # type: ignore[attr-defined]
                    self._fail(fwk, q, Status(Code.ERROR, "internal error"), start)   # type: ignore[attr-defined]
        finally:
            self._cycle_taken = []

    def take_member(self, uid: str) -> QueuedPodInfo | None:
        """``queue.take`` for the cycle in progress (remembered: a crash gives them back)."""
        q = self.queue.take(uid)   # type: ignore[attr-defined]
        if q is not None:
            self._cycle_taken.append(q)
        return q

    def _schedule_pod_group(self, first: QueuedPodInfo, gang: PodGroupSource) -> None:
        tree = getattr(gang, "cycle_tree", None)
        root = tree(first.pod) if tree is not None else None
        if root is not None:   # a PodGroup with a parent: its whole tree, from the root
            from pysched.schedule_composite_podgroup import schedule_tree
            schedule_tree(self, first, gang, root)   # type: ignore[arg-type]
            return
        fwk: Framework = self.frameworks[first.pod.scheduler_name]   # type: ignore[attr-defined]
        key = gang.cycle_group_key(first.pod)
        start = time.perf_counter()
        taken = [first]
        for pod in list(gang.cycle_members(key)):
            if pod.uid != first.pod.uid and not gang.cycle_is_scheduled(pod):
                q = self.take_member(pod.uid)
                if q is not None:
                    taken.append(q)
        members = [q for q in taken if self._still_to_schedule(fwk, q, start)]
        if not members:
            return
        members.sort(key=getattr(gang, "cycle_member_order", member_order))
        pg, result = self.attempt_group(fwk, gang, key, members)
        if pg is None:
            self._podgroup_gone(fwk, gang, key, members, start)
            return
        self._submit(fwk, pg, result, start, gang)

    def _podgroup_gone(self, fwk: Framework, gang: PodGroupSource, key: str, members: list[QueuedPodInfo],
                       start: float) -> None:
        """The members' PodGroup does not exist (deleted while they waited): GangScheduling's wait
        at PreEnqueue again, silently, as upstream's incomplete-group pods (its Add requeues them);
        Coscheduling's ``PodGroup not found``, Unschedulable until the PodGroup is added."""
        missing = getattr(gang, "cycle_missing", None)
        st = missing(key) if missing is not None else None
        if st is None:
            for q in members:
                self.queue.regate_in_flight(q)   # type: ignore[attr-defined]
            return
        diagnosis = Diagnosis()
        diagnosis.unschedulable_plugins = {gang.name}
        for q in members:
            self._fail(fwk, q, st, start, diagnosis=diagnosis)   # type: ignore[attr-defined]

    def attempt_group(self, fwk: Framework, gang: PodGroupSource, key: str,
                      members: list[QueuedPodInfo]) -> tuple[WorkloadPodGroup | None, GroupResult]:
        """One attempt of group ``key`` for ``members`` (in the order they are tried): validation,
        the placements, PodGroupPostFilter - nothing assumed, reported or queued (the live cycle's
        ``_submit`` does that; ``tools.offline`` assumes the winners itself). The PodGroup is None
        when it does not exist (the result then says so, as an Error)."""
        pg = gang.cycle_podgroup(key)
        if pg is None:
            name = key.partition("/")[2]
            return None, GroupResult(GroupStatus(Code.ERROR, [f'podgroup.scheduling.k8s.io "{name}" not found']),
                                     [MemberResult(q) for q in members])
        scheduled = [p for p in gang.cycle_members(key) if gang.cycle_is_scheduled(p)]
        problem = validate_group(pg, [q.pod for q in members], scheduled)
        if problem:
            return pg, GroupResult(GroupStatus(Code.ERROR, [problem]), [MemberResult(q) for q in members])
        info = PodGroupCycleInfo(pg, scheduled, [q.pod for q in members])
        log.debug("attempting to schedule pod group", extra=kv(pod_group=key, members=len(members)))
        try:
            result = self._group_algorithm(fwk, gang, pg, info, members)
        except FrameworkError as exc:
            result = GroupResult(GroupStatus(Code.ERROR, [exc.status.message()]), [MemberResult(q) for q in members])
        if result.status.is_success() and not result.any_scheduled:
            result.status = unschedulable()
        result.untried = result.status.clone()
        if result.status.code == Code.UNSCHEDULABLE:
            self._group_post_filter(fwk, gang, pg, info, members, result)
        return pg, result

    def _still_to_schedule(self, fwk: Framework, qpi: QueuedPodInfo, start: float) -> bool:
        """``_begin``'s checks for a member: deleting, already placed, unparsable."""
        pod = qpi.pod
        if pod.deleting:
            self._record(fwk, pod, "Warning", "FailedScheduling", "Scheduling",   # type: ignore[attr-defined]
                         f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            self.queue.done(pod.uid)   # type: ignore[attr-defined]
            return False
        if pod.uid in self.cache.pods:   # type: ignore[attr-defined]
            self.queue.done(pod.uid)   # type: ignore[attr-defined]
            return False
        if pod.parse_error:
            self._fail(fwk, qpi, Status(Code.ERROR, f"invalid pod: {pod.parse_error}"), start)   # type: ignore[attr-defined]
            return False
        return True

    def _group_algorithm(self, fwk: Framework, gang: PodGroupSource, pg: WorkloadPodGroup, info: PodGroupCycleInfo,
                         members: list[QueuedPodInfo], parent: Placement | None = None) -> GroupResult:
        """The placements of ``parent`` (every node when None; a CompositePodGroup's placement for
        one of its PodGroups) the group is tried on, and the best one that holds it."""
        table = self.cache.table   # type: ignore[attr-defined]
        everything = parent if parent is not None else Placement("", table.order())
        if "TopologyAwareWorkloadScheduling" not in fwk.handle.feature_gates:
            return self._try_placement(fwk, gang, pg, info, members, parent)
        placements = [everything]
        if fwk.placement_generate:   # the first PlacementGenerate plugin only, as upstream
            placements = fwk.placement_generate[0].generate_placements(info, everything,
                                                                       NodeBatch(table, everything.slots))
            if not placements:
                return GroupResult(GroupStatus(Code.UNSCHEDULABLE, ["no feasible placements found"]),
                                   [MemberResult(q) for q in members])
        first: GroupResult | None = None
        fits: list[GroupResult] = []
        tried: list[dict[str, Any]] = []
        for tier in sorted({p.tier for p in placements}):
            for placement in placements:
                if placement.tier != tier:
                    continue
                result = self._try_placement(fwk, gang, pg, info, members, placement)
                tried.append(placement_trace(placement, result))
                if result.status.code == Code.ERROR:
                    result.tried = tried
                    return result
                first = first or result
                if result.status.is_success():
                    fits.append(result)
            if fits:
                break
        if not fits:
            if first is None:
                return GroupResult(unschedulable(f"0/{len(placements)} placements are available"),
                                   [MemberResult(q) for q in members], tried=tried)
            first.status = unschedulable(f"0/{len(placements)} placements are available, first placement "
                                         f"status: {first.status.error_text()}")
            first.tried = tried
            return first
        best = fits[0] if len(fits) == 1 else self._best_placement(fwk, info, fits, tried)
        best.tried = tried
        return best

    def _best_placement(self, fwk: Framework, info: PodGroupCycleInfo, fits: list[GroupResult],
                        tried: list[dict[str, Any]]) -> GroupResult:
        table = self.cache.table   # type: ignore[attr-defined]
        totals = [0] * len(fits)
        traces = {id(r.placement): t for r in fits for t in tried if t["_placement"] is r.placement}
        for pl in fwk.placement_score:
            scores = []
            for r in fits:
                assert r.placement is not None
                assignments = [(m.qpi.pod, m.host) for m in r.members if m.host]
                scores.append(int(pl.score_placement(info, r.placement, NodeBatch(table, r.placement.slots),
                                                     assignments)))
            normalize = getattr(pl, "normalize_placement_scores", None)
            if normalize is not None:
                st = normalize(info, scores)
                if st is not None and not st.is_success():
                    raise FrameworkError(st)
            weight = fwk.placement_weights.get(pl.name, 1)
            for i, s in enumerate(scores):
                totals[i] += s * weight
                trace = traces.get(id(fits[i].placement))
                if trace is not None:
                    trace["scores"][pl.name] = s * weight
        top = max(totals)
        best = [i for i, t in enumerate(totals) if t == top]
        return fits[best[self.rng.randrange(len(best))] if len(best) > 1 else best[0]]   # type: ignore[attr-defined]

    def _try_placement(self, fwk: Framework, gang: PodGroupSource, pg: WorkloadPodGroup, info: PodGroupCycleInfo,
                       members: list[QueuedPodInfo], placement: Placement | None) -> GroupResult:
        """Members one after the other on ``placement``'s nodes, each assumed so the next sees it;
        every assumption is taken back before returning."""
        scheduled = len(info.scheduled)
        remaining = len(members)
        results = [MemberResult(q) for q in members]
        out = GroupResult(unschedulable(), results, placement)
        st = gang.placement_feasible(pg, scheduled, remaining)
        if st is not None and st.code == Code.UNSCHEDULABLE:
            out.status = GroupStatus(Code.UNSCHEDULABLE, [st.message()], POD_GROUP_UNSCHEDULABLE)
            return out
        out.status = GroupStatus.of(st)
        assumed: list[tuple[CycleState, PodInfo, str]] = []
        self._placement_slots = placement.slots if placement is not None else None
        try:
            for r in results:
                r.tried = True
                r.state = state = CycleState()
                state.write(SIMULATION_KEY, True)
                pod = r.qpi.pod
                try:
                    host = self.schedule_pod(fwk, state, pod).host   # type: ignore[attr-defined]
                except FitError as exc:
                    r.status, r.diagnosis = Status(Code.UNSCHEDULABLE, exc.message()), exc.diagnosis
                    code = Code.PENDING if exc.diagnosis.pending_plugins and not exc.diagnosis.unschedulable_plugins \
                        else Code.UNSCHEDULABLE
                    r.status = Status(code, exc.message())
                except (NoNodesAvailable, FrameworkError) as exc:
                    msg = exc.status.message() if isinstance(exc, FrameworkError) else str(exc)
                    r.status = Status(Code.ERROR, msg)
                    out.status = GroupStatus(Code.ERROR, [f"failed to schedule other pod from a pod group: {msg}"])
                    break
                else:
                    a = self.cache.assume(pod, host)   # type: ignore[attr-defined]
                    rst = fwk.run_reserve(state, a, host)
                    if rst is not None and not rst.is_success():
                        fwk.run_unreserve(state, a, host)
                        self.cache.forget(a)   # type: ignore[attr-defined]
                        r.status = rst if rst.is_rejected() else Status(Code.ERROR, rst.message())
                        if not rst.is_rejected():
                            out.status = GroupStatus(Code.ERROR, [f"failed to schedule other pod from a pod group: "
                                                                  f"{rst.message()}"])
                            break
                    else:
                        assumed.append((state, a, host))
                        r.host = host
                        scheduled += 1
                        out.any_scheduled = True
                remaining -= 1
                st = gang.placement_feasible(pg, scheduled, remaining)
                out.status = GroupStatus.of(st)
                if st is not None and st.code == Code.UNSCHEDULABLE:
                    break
        finally:
            self._placement_slots = None
            for state, a, host in reversed(assumed):
                fwk.run_unreserve(state, a, host)
                self.cache.forget(a)   # type: ignore[attr-defined]
        if out.status.code == Code.WAIT:
            out.status = GroupStatus(Code.UNSCHEDULABLE, out.status.reasons, POD_GROUP_UNSCHEDULABLE)
        if not out.status.is_success():
            out.any_scheduled = False
        return out

    def _group_post_filter(self, fwk: Framework, gang: Any, pg: WorkloadPodGroup, info: PodGroupCycleInfo,
                           members: list[QueuedPodInfo], result: GroupResult) -> None:
        """PodGroupPostFilter (``RunPodGroupPostFilterPlugins`` + ``applyPodGroupPostFilterResult``):
        the profile's postFilter plugins that can act for a pod group, in order - DefaultPreemption's
        preemption (``framework.podgroup_preemption``), CapacityScheduling's reclaim
        (``capacity_scheduling.group_reclaim``), DynamicResources' verdict. The first Success wins
        (the group waits on the preemption and the members get their nominations); the Unschedulable
        ones' reasons are collected in order; UnschedulableAndUnresolvable stops with its own
        reason; an Error replaces the group's status. The reasons are appended to the group's
        message. The members never tried keep the group's status as it was before."""
        dra_stands_aside = "TopologyAwareWorkloadScheduling" in fwk.handle.feature_gates and bool(pg.topology_keys)
        plugins: list[tuple[str, Any]] = []
        for pl in fwk.post_filter:
            if pl.name == "DynamicResources":
                # Its PodGroupPostFilter releases the members' claims, then lets the next plugin try;
                # it stands aside (no reason) for a topology-constrained group with TAS on.
                plugins.append((pl.name, None))
                continue
            run = getattr(pl, "pod_group_post_filter", None)
            if run is not None:
                plugins.append((pl.name, run))
        if not any(run is not None for _, run in plugins):
            return
        before = result.status.clone()
        for m in result.members:
            if not m.tried:
                m.status = Status(before.code, before.message())
        obj = fwk.handle.objects.get(WORKLOAD_PODGROUPS, pg.key) if fwk.handle.objects is not None else None
        uid = ((obj or {}).get("metadata") or {}).get("uid") or pg.key

        def feasibility() -> tuple[Status, list[Assignment]]:
            try:
                again = self._group_algorithm(fwk, gang, pg, info, members)
            except FrameworkError as exc:
                return Status(Code.ERROR, exc.status.message()), []
            if again.status.is_success() and not again.any_scheduled:
                again.status = unschedulable()
            return (Status(again.status.code, again.status.message()),
                    [Assignment(m.qpi.pod, m.host, m.state) for m in again.members if m.host and m.state is not None])

        pods = [q.pod for q in members]
        reasons: list[str] = []
        post = None
        st = Status(Code.UNSCHEDULABLE)
        for name, run in plugins:
            if run is None:
                if not dra_stands_aside:
                    reasons.append(DRA_GROUP_POST_FILTER)
                continue
            post, st = run(pg, uid, pods, feasibility)
            if st.code in (Code.SUCCESS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
                break
            if st.code == Code.UNSCHEDULABLE:
                if st.message():
                    reasons.append(st.message())
                continue
            st = Status(Code.ERROR, f'error in "{name}" PodGroupPostFilter plugins: {st.message()}')
            break
        else:
            st = Status(Code.UNSCHEDULABLE, ", ".join(reasons))
        if st.code == Code.SUCCESS:
            result.waiting_on_preemption = True
            result.nominating = dict(post.nominating) if post is not None else {}
        if st.code == Code.ERROR:
            result.status = GroupStatus(Code.ERROR, [st.message()])
        elif st.message():
            result.status.reasons.append(st.message())

    # -- outcome ------------------------------------------------------------------------------

    def _submit(self, fwk: Framework, pg: WorkloadPodGroup, result: GroupResult, start: float,
                gang: PodGroupSource, root_fits: bool | None = None) -> None:
        """The attempt's outcome, member by member. ``root_fits``: the cycle's root (this group, or
        the root of its CompositePodGroup tree) fits - then the members left over go straight back
        to activeQ, as upstream moves a pod group that succeeded there (a member beyond minCount, a
        child of a tree whose minGroupCount was met)."""
        gst = result.status
        retry_now = gst.is_success() if root_fits is None else root_fits
        if gst.code == Code.ERROR:
            self._group_failed(fwk, [m.qpi for m in result.members], gst, start, pg, gang)
            return
        from pysched.schedule_one import ScheduleResult
        nominating = result.nominating
        # The members fail together: each waits (the unschedulable pool) for what could help the one
        # that fit nowhere - its plugins' events - not in the error backoff, retried every few seconds.
        rejected = Diagnosis()
        for m in result.members:
            if m.diagnosis is not None:
                rejected.unschedulable_plugins |= m.diagnosis.unschedulable_plugins
                rejected.pending_plugins |= m.diagnosis.pending_plugins
        if not rejected.unschedulable_plugins and not rejected.pending_plugins:
            rejected.unschedulable_plugins = {gang.name}
        for m in result.members:
            # A member the preemption nominated gets that node; any other keeps its nomination
            # (upstream's nil NominatingInfo), but a placed member of a group that does not wait.
            keep = nominating.get(m.qpi.pod.uid) if m.qpi.pod.uid in nominating else None
            if retry_now and not (m.host is not None and gst.is_success()):
                m.qpi.activate_on_return = FORCE_ACTIVATE
            if not m.tried:
                if m.status is None:
                    told = result.untried or gst
                    m.status = Status(told.code, told.message())
                self._fail(fwk, m.qpi, m.status, start, nominating=keep, diagnosis=rejected)   # type: ignore[attr-defined]
            elif m.host is not None and gst.is_success():
                assert m.state is not None
                m.state.delete(SIMULATION_KEY)
                self._finish(fwk, m.state, m.qpi, ScheduleResult(m.host, 1, 1), start, None)   # type: ignore[attr-defined]
            elif m.host is not None and result.waiting_on_preemption:
                self._fail(fwk, m.qpi, Status(gst.code, gst.message()), start, nominating=keep,   # type: ignore[attr-defined]
                           diagnosis=rejected)
            elif m.host is not None:
                self._fail(fwk, m.qpi, Status(Code.UNSCHEDULABLE, f"{POD_GROUP_UNSCHEDULABLE}, {gst.message()}"),   # type: ignore[attr-defined]
                           start, diagnosis=rejected)
            else:
                assert m.status is not None
                self._fail(fwk, m.qpi, m.status, start, diagnosis=m.diagnosis or rejected,   # type: ignore[attr-defined]
                           nominating=keep)
        for m in result.members:
            if m.host is not None and gst.is_success():
                # Permit activated its in-flight siblings (upstream's Activate of the unscheduled): a
                # placed member's later bind failure must still back off.
                m.qpi.activate_on_return = ""
        if not gst.is_success() and not result.waiting_on_preemption:
            gang.cycle_failed(pg.key, gst.message())   # a group waiting for its victims to go does not back off
        self._record_group(fwk, pg, gang, "Normal" if gst.is_success() else "Warning",
                           "Scheduled" if gst.is_success() else "FailedScheduling", group_note(result, gst.message()))
        self._keep_group_trace(pg, result)
        if not gang.writes_condition:
            pass
        elif gst.is_success():
            self._set_condition(pg, "True", REASON_SCHEDULED, gst.message())
            log.info("scheduled a pod group", extra=kv(pod_group=pg.key, placement=result.placement.name
                                                       if result.placement else "",
                                                       pods=sum(1 for m in result.members if m.host)))
        else:
            self._set_condition(pg, "False", REASON_UNSCHEDULABLE, gst.message())
        if not gst.is_success():
            log.info("unable to schedule a pod group", extra=kv(pod_group=pg.key, err=gst.message()))

    def _group_failed(self, fwk: Framework, members: list[QueuedPodInfo], gst: GroupStatus, start: float,
                      pg: WorkloadPodGroup | None, gang: PodGroupSource | None = None) -> None:
        st = Status(Code.ERROR, gst.message())
        for q in members:
            self._fail(fwk, q, st, start)   # type: ignore[attr-defined]
        if pg is not None and gang is not None:
            self._record_group(fwk, pg, gang, "Warning", "FailedScheduling", gst.message())
            gang.cycle_failed(pg.key, gst.message())
            if gang.writes_condition:
                self._set_condition(pg, "False", REASON_SCHEDULER_ERROR, gst.message())
        log.warning("error scheduling a pod group", extra=kv(pod_group=pg.key if pg else "", err=gst.message()))

    def _record_group(self, fwk: Framework, pg: WorkloadPodGroup, gang: PodGroupSource, type_: str, reason: str,
                      note: str) -> None:
        """One Event per group attempt, on the PodGroup (``regarding`` it: ``kubectl describe``)."""
        recorder = self.recorder   # type: ignore[attr-defined]
        if recorder is None:
            return
        ref = ObjectRef(pg.namespace, pg.name, pg.uid, getattr(gang, "podgroup_api_version", API_VERSION))
        recorder.record(ref, controller=fwk.profile_name, type_=type_, reason=reason, action="Scheduling",
                        note=note, kind="PodGroup", api_version=ref.api_version)

    def _keep_group_trace(self, pg: WorkloadPodGroup, result: GroupResult) -> None:
        traces = self.group_traces
        traces.pop(pg.key, None)
        traces[pg.key] = {"status": result.status.message() or "Scheduled",
                          "placement": result.placement.name if result.placement is not None else "",
                          "placements": [{k: v for k, v in t.items() if not k.startswith("_")} for t in result.tried]}
        if len(traces) > GROUP_TRACES_KEPT:
            del traces[next(iter(traces))]

    def group_explanation(self, key: str) -> dict[str, Any] | None:
        """The last attempt of pod group ``namespace/name``, placement by placement (/debug/explain)."""
        out = self.group_traces.get(key)
        return out if isinstance(out, dict) else None

    def _set_condition(self, pg: WorkloadPodGroup, status: str, reason: str, message: str) -> None:
        """``updatePodGroupCondition``: never back from True; nothing sent when nothing changes."""
        existing = pg.condition(CONDITION_SCHEDULED)
        writer = self._group_conditions
        if writer is None:
            return
        written = f"{pg.key}/{pg.uid}"     # a group deleted and created again is another object
        if status != "True" and "True" in ((existing or {}).get("status"), writer.last_status(written)):
            return      # True already, though the informer may not have delivered it yet
        if (existing is not None and existing.get("status") == status and existing.get("reason") == reason
                and existing.get("message") == message and existing.get("observedGeneration") == pg.generation):
            return
        cond: dict[str, Any] = {"type": CONDITION_SCHEDULED, "status": status, "reason": reason,
                                "message": message, "observedGeneration": pg.generation}
        if existing is None or existing.get("status") != status:
            cond["lastTransitionTime"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            cond["lastTransitionTime"] = existing.get("lastTransitionTime")
        # A strategic merge by the condition's type: the others (another writer's) stay.
        writer.queue(written, PODGROUPS_PATH.format(namespace=pg.namespace, name=pg.name), cond)


def validate_group(pg: WorkloadPodGroup, pending: list[PodInfo], scheduled: list[PodInfo]) -> str:
    """``validatePodGroup``: one schedulerName, one priority (the PodGroup's when it has one) and one
    preemption policy across the group. Returns the problem, or ""."""
    scheduler_name = pending[0].scheduler_name if pending else ""
    for pod in [*pending, *scheduled]:
        if pod.scheduler_name != scheduler_name:
            return ("all pods in a single pod group should have the same .spec.schedulerName set, "
                    f'got: "{pod.scheduler_name}" and "{scheduler_name}"')
    if pg.priority is None:
        return ""   # scheduler-plugins' PodGroups: members may differ (their queue sort orders them)
    priority = pg.priority
    policy = ""
    for pod in [*pending, *scheduled]:
        if pod.priority != priority:
            return ("all pods in a single pod group should have the same priority as the pod group's "
                    f"priority, got {pod.priority} and {priority}")
        if not policy:
            policy = pod.preemption_policy
        elif pod.preemption_policy != policy:
            return ("all pods in a single pod group should have the same preemption policy, "
                    f"got {pod.preemption_policy} and {policy}")
    return ""
