"""OfflineScheduler: the real engine (cache, frameworks, scheduling cycle) without an API server.

Nodes and pods are fed as API dictionaries through the same event handlers the informers use;
``schedule()`` runs one scheduling cycle and, on success, assumes the pod exactly as the live
scheduler does before binding, then runs Permit: a pod a plugin holds (a gang member waiting for
its group) stays assumed as ``Waiting`` until a later pod's Permit allows it or the group is
released; ``settled`` says what became of it, ``expire_waiting()`` times the rest out.
Used by ``pysched simulate``, the unit tests and the differential
checks, so all of them exercise the production code path.

``schedule_group()`` places a gang as the live scheduler does when a source claims it (GangScheduling
with GenericWorkload, Coscheduling by default: ``framework.podgroups.PodGroupSource``): one attempt
of the live pod-group cycle (``Scheduler.attempt_group``: the placements, each member tried on the
placement's nodes, the best placement kept, PodGroupPostFilter), then the chosen placement's members
assumed, reserved and permitted as ``schedule()`` does one pod (no bind); or, when the group does
not fit, every member left unplaced with the cycle's message. Its ``GroupOutcome`` keeps the
attempt placement by placement (``placements``: what ``/debug/explain?podgroup=`` serves live).

Each ``Outcome`` also says how the cycle sampled and picked (``SamplingScheduler``): how many
candidate nodes were never evaluated because ``percentageOfNodesToScore`` stopped the feasible-node
search once it had found enough (``not_evaluated``; the same count with and without an explain
trace, which filters every node but scores the same first ``numFeasibleNodesToFind``), and how many
scored nodes tied at the top score, among which the seeded tie-break picked the node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from pysched.apis import config as configmod
from pysched.apis.features import NEWEST
from pysched.backend.cache.cache import SchedulerCache
from pysched.backend.queue.scheduling_queue import QueuedPodInfo
from pysched.client.objectstore import ObjectStore
from pysched.eventhandlers import ClusterEvents, EventHandlers, EventRegistry
from pysched.framework.cycle_state import TRACE_KEY, CycleState
from pysched.framework.interface import NodeBatch
from pysched.framework.interface import Placement as FrameworkPlacement
from pysched.framework.loadmetrics import LoadMetrics
from pysched.framework.podgroups import PodGroupSource
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Diagnosis, FitError, FrameworkError, NoNodesAvailable, Status
from pysched.profile import build_frameworks, build_queue, default_registry, waiting_room
from pysched.runtime.framework import CycleTrace, Framework
from pysched.runtime.registry import Registry
from pysched.schedule_one import Scheduler, ScheduleResult, rejected_on
from pysched.schedule_one_podgroup import (
    POD_GROUP_UNSCHEDULABLE,
    SIMULATION_KEY,
    GroupResult,
    member_order,
    placement_trace,
)

_DIGITS = re.compile(r"(\d+)")


@dataclass
class Outcome:
    pod: str
    node: str | None
    message: str = ""
    code: str = "Scheduled"
    trace: dict | None = None
    nominated_node: str = ""             # preemption: the node the pod was nominated for
    victims: tuple[str, ...] = ()        # ... and the pods it would evict there (ns/name)
    sampling: dict | None = None         # SamplingScheduler.cycle: candidates, numFeasibleNodesToFind,
                                         # notEvaluated, and when scored: topScore, tiedAtTop, tied, picked


@dataclass
class GroupOutcome:
    """One attempt of a gang (``OfflineScheduler.schedule_group``): each member's outcome (in the
    order given) and the attempt as ``/debug/explain?podgroup=`` shows it live, with its own facts:
    ``{"group", "source", "minCount", "result", "status", "placement", "placements": [{"placement",
    "tier", "nodes", "fits", "message", "placed", "unplaced", "scores", "chosen"}], "blockedBy"}``."""

    key: str
    outcomes: list[Outcome]
    trace: dict


SAMPLING_KEY = "pysched/offline-sampling"   # a group member's cycle: what SamplingScheduler.cycle saw


class SamplingScheduler(Scheduler):
    """The production ``Scheduler``, recording per cycle (``cycle``, reset by the caller) what the
    feasible-node search left out and how the best node was picked. Nothing it does changes a
    placement: it only reads what the search and the selection computed. In a pod-group attempt the
    members named in ``traced`` (uids) get a trace of their own, and every member's ``cycle`` is kept
    in its CycleState (``SAMPLING_KEY``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cycle: dict = {}
        self.traced: frozenset[str] = frozenset()

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo,
                     trace: CycleTrace | None = None) -> ScheduleResult:
        if trace is None and pod.uid in self.traced:
            trace = CycleTrace()
            state.write(TRACE_KEY, trace)
        self.cycle = {}
        try:
            return super().schedule_pod(fwk, state, pod, trace)
        finally:
            if state.get(SIMULATION_KEY):
                state.write(SAMPLING_KEY, self.cycle)

    def _filter_in_chunks(self, fwk: Framework, state: CycleState, pod: PodInfo, table: Any, rotated: np.ndarray,
                          to_find: int, diagnosis: Diagnosis, whole: bool) -> np.ndarray:
        pos = super()._filter_in_chunks(fwk, state, pod, table, rotated, to_find, diagnosis, whole)
        n_cand = len(rotated)
        # As find_feasible cuts: past ``to_find`` feasible nodes, the rest of the rotation (from the
        # node after the last one kept) is never evaluated.
        processed = int(pos[to_find - 1]) + 1 if len(pos) > to_find else n_cand
        self.cycle.update(candidates=n_cand, numFeasibleNodesToFind=int(to_find), notEvaluated=n_cand - processed)
        return pos

    def _select(self, feasible: NodeBatch, total: np.ndarray, diagnosis: Diagnosis) -> ScheduleResult:
        result = super()._select(feasible, total, diagnosis)
        top = total.max()
        names = feasible.names
        tied = sorted((names[i] for i in np.flatnonzero(total == top)), key=natural_key)
        self.cycle.update(topScore=int(top), tiedAtTop=len(tied), tied=tied[:TIED_LISTED], picked=result.host)
        return result


TIED_LISTED = 20     # tied nodes named in an outcome (the count is always complete)


def natural_key(name: str) -> tuple:
    """Sort key putting ``n2`` before ``n10`` (digit runs compared as numbers)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(name) if part)


class OfflineScheduler:
    def __init__(self, cfg: configmod.SchedulerConfig | None = None, *, registry: Registry | None = None,
                 seed: int | None = 0, observer=None, load: LoadMetrics | None = None,
                 kube_version: tuple[int, int] = NEWEST, feature_gates: frozenset[str] | None = None):
        """``kube_version``, ``feature_gates``: the kube-scheduler release to behave as (default the
        newest pysched follows) and the gates on (default: that release's). The requests of pods
        resized in place are counted by the process's accounting (``apis.core.resources``: the
        newest release's unless ``set_accounting`` or ``accounting`` says otherwise), which this
        does not change: several offline schedulers of different releases may share a process."""
        self.cfg = cfg or configmod.default_config()
        self.registry = registry if registry is not None else default_registry()
        self.cache = SchedulerCache()
        self.objects = ObjectStore()
        self.frameworks = build_frameworks(self.cfg, self.registry, cache=self.cache, client=None, recorder=None,
                                           objects=self.objects, load=load, kube_version=kube_version,
                                           feature_gates=feature_gates)
        self.queue = build_queue(self.cfg, self.frameworks)
        self.events = ClusterEvents(self.queue, EventRegistry(self.frameworks.values()))
        self.objects.subscribe(self.events.object_event)
        self.handlers = EventHandlers(self.cache, self.queue, self.cfg.scheduler_names, self.events,
                                      observer=observer,
                                      waiting_pods=waiting_room(self.frameworks))
        # Pods held at Permit (uid -> framework, state, assumed pod, node), and what became of the
        # ones no longer held (uid -> node if allowed else None, message).
        self.waiting: dict[str, tuple] = {}
        self.settled: dict[str, tuple[str | None, str]] = {}
        self.scheduler = SamplingScheduler(cache=self.cache, queue=self.queue, frameworks=self.frameworks,
                                   percentage_of_nodes_to_score=self.cfg.percentage_of_nodes_to_score, seed=seed,
                                   on_cluster_event=self.events.move)

    @property
    def profile(self) -> str:
        return self.cfg.profiles[0].scheduler_name

    def add_node(self, node: dict) -> None:
        self.handlers.node_upsert(node)

    def remove_node(self, name: str) -> None:
        self.handlers.node_delete(name, None)

    def add_pod(self, pod: dict) -> None:
        """An existing pod (bound ones are counted on their node)."""
        self.handlers.pod_upsert(pod)

    def add_object(self, obj: dict) -> bool:
        """A Namespace, Service, ReplicaSet, StatefulSet, ReplicationController, PVC, PV, StorageClass,
        CSINode, VolumeAttachment or ResourceClaim."""
        return self.objects.add(obj)

    def observe_pending(self, pod: dict | PodInfo) -> None:
        """Make a pending pod known to the plugins that follow pods (a gang's members are counted
        before the first of them is scheduled), without queueing it."""
        info = pod if isinstance(pod, PodInfo) else PodInfo.from_dict(pod, keep_raw=True)
        for w in self.handlers.pod_watchers:
            w.pod_seen(info)

    def remove_pod(self, uid: str) -> None:
        self.handlers.pod_delete(uid, None)

    def schedule(self, pod: dict | PodInfo, *, assume: bool = True, explain: bool = False) -> Outcome:
        info = pod if isinstance(pod, PodInfo) else PodInfo.from_dict(pod, keep_raw=True)
        fwk = self.frameworks.get(info.scheduler_name) or self.frameworks[self.profile]
        state = CycleState()
        trace = CycleTrace() if explain else None
        if trace is not None:
            state.write(TRACE_KEY, trace)
        if info.parse_error:
            return Outcome(info.key, None, f"invalid pod: {info.parse_error}", "SchedulerError")
        out = self._schedule(fwk, state, info, trace, assume)
        cycle, self.scheduler.cycle = self.scheduler.cycle, {}
        if cycle:
            out.sampling = cycle
            if out.trace is not None:
                out.trace["sampling"] = cycle
        return out

    def _schedule(self, fwk, state: CycleState, info: PodInfo, trace: CycleTrace | None, assume: bool) -> Outcome:
        self.scheduler.cycle = {}
        try:
            result = self.scheduler.schedule_pod(fwk, state, info, trace)
        except FitError as fe:
            nominated = ""
            victims: tuple[str, ...] = ()
            if fwk.post_filter:
                # Preemption runs as in the live cycle; offline nothing is evicted, the outcome
                # reports the node it chose and the victims.
                res, st = fwk.run_post_filter(state, info, fe.diagnosis)
                if st is not None and st.message():
                    fe.diagnosis.post_filter_msg = st.message()
                if res is not None and res.nominated_node_name:
                    nominated, victims = res.nominated_node_name, tuple(res.victims)
                    if trace is not None:
                        trace.nominated = {"node": nominated, "victims": list(victims)}
                self._settle()   # a gang's PostFilter may have released its waiting members
            if trace is not None:
                trace.error = fe.message()
            return Outcome(info.key, None, fe.message(), "Unschedulable", trace.to_dict() if trace else None,
                           nominated, victims)
        except (NoNodesAvailable, FrameworkError) as exc:
            return Outcome(info.key, None, str(exc), "SchedulerError", trace.to_dict() if trace else None)
        if trace is not None:
            trace.selected = result.host
        if assume:
            return self._commit(fwk, state, info, result.host, trace)
        return Outcome(info.key, result.host, "", "Scheduled", trace.to_dict() if trace else None)

    def _commit(self, fwk: Framework, state: CycleState, info: PodInfo, host: str,
                trace: CycleTrace | None) -> Outcome:
        """Assume ``info`` on ``host``, Reserve and Permit as the live scheduler does before binding."""
        assumed = self.cache.assume(info, host)
        st = fwk.run_reserve(state, assumed, host)
        if st is not None and not st.is_success():
            fwk.run_unreserve(state, assumed, host)
            self.cache.forget(assumed)
            st, _ = rejected_on(info, host, st)
            return Outcome(info.key, None, st.message(),
                           "Unschedulable" if st.is_rejected() else "SchedulerError")
        st, _ = fwk.run_permit(state, assumed, host)
        if st is not None and st.is_wait():
            # Held at Permit (a gang waiting for its quorum): counted on the node until a
            # later pod's Permit allows it or it is released (``settled``).
            self.waiting[info.uid] = (fwk, state, assumed, host)
            self._settle()
            if info.uid in self.waiting:
                return Outcome(info.key, host, st.message(), "Waiting", trace.to_dict() if trace else None)
        elif st is not None and not st.is_success():
            fwk.run_unreserve(state, assumed, host)
            self.cache.forget(assumed)
            self._settle()
            st, _ = rejected_on(info, host, st)
            return Outcome(info.key, None, st.message(),
                           "Unschedulable" if st.is_rejected() else "SchedulerError",
                           trace.to_dict() if trace else None)
        # Offline there is no bind: the assumed pod stands for the bound one.
        self.cache.assumed.pop(info.uid, None)
        self._settle()
        return Outcome(info.key, host, "", "Scheduled", trace.to_dict() if trace else None)

    # -- gangs: the live pod-group cycle ----------------------------------------------------------

    def group_of(self, pod: dict | PodInfo) -> tuple[PodGroupSource, str] | None:
        """The source whose pod-group cycle places ``pod`` and its group's key, or None (scheduled on
        its own: no source claims it, or its profile has none)."""
        info = pod if isinstance(pod, PodInfo) else PodInfo.from_dict(pod, keep_raw=True)
        source = self.scheduler.group_source(QueuedPodInfo(info, 0.0))
        return (source, source.cycle_group_key(info)) if source is not None else None

    def schedule_group(self, pods: list[dict | PodInfo], *, explain: frozenset[str] | set[str] = frozenset()
                       ) -> GroupOutcome:
        """One attempt of the gang ``pods`` belong to (all of one group, in queue order), as the live
        pod-group cycle makes it: members PreEnqueue holds back (GangScheduling: the PodGroup or
        ``minCount`` pods missing) are not taken; the others are placed together or not at all.
        ``explain``: the ``ns/name`` of the members to trace. Nothing is bound, nothing backs off:
        ``simulate`` retries a group that did not fit in its next pass."""
        infos = [p if isinstance(p, PodInfo) else PodInfo.from_dict(p, keep_raw=True) for p in pods]
        claim = self.group_of(infos[0])
        assert claim is not None, f"{infos[0].key}: no pod-group source claims it"
        gang, key = claim
        fwk = self.frameworks[infos[0].scheduler_name]
        outcomes: dict[str, Outcome] = {}
        members: list[QueuedPodInfo] = []
        for seq, info in enumerate(infos):
            if info.parse_error:
                outcomes[info.uid] = Outcome(info.key, None, f"invalid pod: {info.parse_error}", "SchedulerError")
                continue
            st = fwk.run_pre_enqueue(info)
            if st is not None and not st.is_success():
                outcomes[info.uid] = Outcome(info.key, None, st.message(), "Unschedulable")
                continue
            qpi = QueuedPodInfo(info, float(seq))
            qpi.attempts = 1    # counted as the queue counts a popped pod
            members.append(qpi)
        trace: dict[str, Any] = {"group": key, "source": gang.name, "members": len(infos), "inAttempt": len(members)}
        if members:
            members.sort(key=getattr(gang, "cycle_member_order", member_order))
            self.scheduler.traced = frozenset(q.pod.uid for q in members if q.pod.key in explain)
            try:
                pg, result = self.scheduler.attempt_group(fwk, gang, key, members)
            finally:
                self.scheduler.traced = frozenset()
                self.scheduler.cycle = {}
            if pg is not None:
                trace["minCount"] = pg.min_count
            outcomes.update(self._group_outcomes(fwk, result))
            trace.update(self._group_trace(result))
        else:
            trace.update(result="Unschedulable", status=next(iter(outcomes.values())).message, placement="",
                         placements=[])
        return GroupOutcome(key, [outcomes[i.uid] for i in infos], trace)

    def _group_outcomes(self, fwk: Framework, result: GroupResult) -> dict[str, Outcome]:
        """Each member's outcome, as ``PodGroupCycle._submit`` tells it live: the chosen placement's
        members assumed and permitted; for a group that does not fit, the member's own verdict if it
        fit nowhere, ``pod group is unschedulable, ...`` for the others."""
        gst = result.status
        out: dict[str, Outcome] = {}
        for m in result.members:
            info = m.qpi.pod
            state = m.state
            tr = state.get(TRACE_KEY) if state is not None else None
            sampling = (state.get(SAMPLING_KEY) if state is not None else None) or None
            nominated = result.nominating.get(info.uid, "")
            if gst.code == Code.ERROR:
                o = Outcome(info.key, None, gst.message(), "SchedulerError")
            elif not m.tried:
                told = m.status or Status((result.untried or gst).code, (result.untried or gst).message())
                o = Outcome(info.key, None, told.message(), "Unschedulable", nominated_node=nominated)
            elif m.host is not None and gst.is_success():
                assert state is not None
                state.delete(SIMULATION_KEY)
                if tr is not None:
                    tr.selected = m.host
                o = self._commit(fwk, state, info, m.host, tr)
            elif m.host is not None:
                msg = gst.message() if result.waiting_on_preemption else f"{POD_GROUP_UNSCHEDULABLE}, {gst.message()}"
                o = Outcome(info.key, None, msg, "Unschedulable", nominated_node=nominated)
            else:
                msg = m.status.message() if m.status is not None else gst.message()
                o = Outcome(info.key, None, msg, "Unschedulable", nominated_node=nominated)
            if tr is not None and o.trace is None:
                tr.error = "" if o.node else o.message
                o.trace = tr.to_dict()
            if o.trace is not None and result.placement is not None:
                o.trace["groupPlacement"] = result.placement.name or "all nodes"
            if sampling:
                o.sampling = sampling
                if o.trace is not None:
                    o.trace["sampling"] = sampling
            out[info.uid] = o
        # A member held at Permit until a later sibling's Permit allowed it (GangScheduling counts the
        # members assumed so far): settled within this attempt.
        for uid, o in out.items():
            if o.code == "Waiting" and uid in self.settled:
                node, message = self.settled.pop(uid)
                o.node, o.message, o.code = node, message, "Scheduled" if node else "Unschedulable"
        return out

    def _group_trace(self, result: GroupResult) -> dict[str, Any]:
        """The attempt placement by placement; one without placements (TopologyAwareWorkloadScheduling
        off: every node is the group's one placement) is shown as that one placement."""
        tried = result.tried
        if not tried and result.members and any(m.tried for m in result.members):
            table = self.cache.table
            tried = [placement_trace(result.placement or FrameworkPlacement("", table.order()), result)]
            tried[0]["_placement"] = result.placement
        gst = result.status
        placements = []
        for t in tried:
            row = {k: v for k, v in t.items() if not k.startswith("_")}
            row["chosen"] = bool(gst.is_success() and t.get("_placement") is result.placement)
            placements.append(row)
        own = next((m for m in result.members if m.tried and not m.host and m.status is not None
                    and not m.status.message().startswith(POD_GROUP_UNSCHEDULABLE)), None)
        code = "Scheduled" if gst.is_success() else "SchedulerError" if gst.code == Code.ERROR else "Unschedulable"
        out: dict[str, Any] = {"result": code, "status": gst.message() or "Scheduled",
                               "placement": (result.placement.name or "all nodes")
                               if gst.is_success() and result.placement is not None else
                               ("all nodes" if gst.is_success() else ""),
                               "placements": placements}
        if not gst.is_success() and own is not None:
            out["blockedBy"] = own.qpi.pod.key
        if result.waiting_on_preemption:
            out["nominated"] = {p.qpi.pod.key: result.nominating[p.qpi.pod.uid] for p in result.members
                                if result.nominating.get(p.qpi.pod.uid)}
        return out

    def _settle(self) -> None:
        """Pods held at Permit that were allowed since (bound, offline) or rejected (released:
        Unreserve, forgotten) go to ``settled`` as ``uid -> (node or None, message)``."""
        changed = True
        while changed:
            changed = False
            for uid, (fwk, state, assumed, host) in list(self.waiting.items()):
                wp = fwk.handle.waiting_pods.get(uid)
                if wp is not None and wp.rejection is None and wp.pending:
                    continue
                del self.waiting[uid]
                fwk.handle.waiting_pods.pop(uid, None)
                changed = True
                if wp is not None and wp.rejection is None:
                    self.cache.assumed.pop(uid, None)
                    self.settled[uid] = (host, "")
                    continue
                fwk.run_unreserve(state, assumed, host)
                self.cache.forget(assumed)
                rejection = wp.rejection if wp is not None and wp.rejection else Status(Code.UNSCHEDULABLE, "rejected")
                self.settled[uid] = (None, rejected_on(assumed, host, rejection)[0].message())

    def expire_waiting(self) -> None:
        """End of the run: every pod still held at Permit times out (as its wait would), and is
        released - a gang that never reached its quorum holds nothing afterwards."""
        for uid, (fwk, _state, _assumed, _host) in list(self.waiting.items()):
            wp = fwk.handle.waiting_pods.get(uid)
            if wp is not None:
                wp.reject(",".join(sorted(wp.pending)), "rejected due to timeout: the group never reached its "
                                                        "quorum at Permit")
        self._settle()

    def filter_status(self, pod: dict, node_name: str) -> Status | None:
        """Every filter on one node (scalar path), for checks and explanations."""
        info = PodInfo.from_dict(pod, keep_raw=True)   # as a pod to schedule: plugins may read its object
        fwk = self.frameworks.get(info.scheduler_name) or self.frameworks[self.profile]
        state = CycleState()
        table = self.cache.table
        _, st, _ = fwk.run_pre_filter(state, info, NodeBatch(table, table.order()))
        if st is not None and not st.is_success():
            return st
        node = self.cache.nodes.get(node_name)
        if node is None:
            return Status(Code.ERROR, f"node {node_name} not found")
        return fwk.run_filters_on_node(state, info, NodeBatch(table, np.array([node.slot], dtype=np.int64)))
