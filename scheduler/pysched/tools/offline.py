"""OfflineScheduler: the real engine (cache, frameworks, scheduling cycle) without an API server.

Nodes and pods are fed as API dictionaries through the same event handlers the informers use;
``schedule()`` runs one scheduling cycle and, on success, assumes the pod exactly as the live
scheduler does before binding, then runs Permit: a pod a plugin holds (a gang member waiting for
its group) stays assumed as ``Waiting`` until a later pod's Permit allows it or the group is
released; ``settled`` says what became of it, ``expire_waiting()`` times the rest out.
Used by ``pysched simulate``, the unit tests and the differential
checks, so all of them exercise the production code path.

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
from pysched.client.objectstore import ObjectStore
from pysched.eventhandlers import ClusterEvents, EventHandlers, EventRegistry
from pysched.framework.cycle_state import TRACE_KEY, CycleState
from pysched.framework.interface import NodeBatch
from pysched.framework.loadmetrics import LoadMetrics
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Diagnosis, FitError, FrameworkError, NoNodesAvailable, Status
from pysched.profile import build_frameworks, build_queue, default_registry, waiting_room
from pysched.runtime.framework import CycleTrace, Framework
from pysched.runtime.registry import Registry
from pysched.schedule_one import Scheduler, ScheduleResult, rejected_on

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


class SamplingScheduler(Scheduler):
    """The production ``Scheduler``, recording per cycle (``cycle``, reset by the caller) what the
    feasible-node search left out and how the best node was picked. Nothing it does changes a
    placement: it only reads what the search and the selection computed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cycle: dict = {}

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
            assumed = self.cache.assume(info, result.host)
            st = fwk.run_reserve(state, assumed, result.host)
            if st is not None and not st.is_success():
                fwk.run_unreserve(state, assumed, result.host)
                self.cache.forget(assumed)
                st, _ = rejected_on(info, result.host, st)
                return Outcome(info.key, None, st.message(),
                               "Unschedulable" if st.is_rejected() else "SchedulerError")
            st, _ = fwk.run_permit(state, assumed, result.host)
            if st is not None and st.is_wait():
                # Held at Permit (a gang waiting for its quorum): counted on the node until a
                # later pod's Permit allows it or it is released (``settled``).
                self.waiting[info.uid] = (fwk, state, assumed, result.host)
                self._settle()
                if info.uid in self.waiting:
                    return Outcome(info.key, result.host, st.message(), "Waiting", trace.to_dict() if trace else None)
            elif st is not None and not st.is_success():
                fwk.run_unreserve(state, assumed, result.host)
                self.cache.forget(assumed)
                self._settle()
                st, _ = rejected_on(info, result.host, st)
                return Outcome(info.key, None, st.message(),
                               "Unschedulable" if st.is_rejected() else "SchedulerError",
                               trace.to_dict() if trace else None)
            # Offline there is no bind: the assumed pod stands for the bound one.
            self.cache.assumed.pop(info.uid, None)
            self._settle()
        return Outcome(info.key, result.host, "", "Scheduled", trace.to_dict() if trace else None)

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
