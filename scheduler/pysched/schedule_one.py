"""The scheduling cycle and the binding cycle, as kube-scheduler's ``schedule_one.go``.

Scheduling cycle (synchronous, one pod at a time, never awaits - so it sees one consistent cache):
PreFilter -> Filter over nodes from a rotating start index, stopping at ``numFeasibleNodesToFind``
feasible nodes -> filter extenders -> PreScore/Score/NormalizeScore x weight (+ prioritize
extenders) -> highest total wins, ties broken at random -> **assume** (the cache counts the pod on
the node at once) -> Reserve -> Permit.

Binding cycle (an asyncio task per pod, overlapping later scheduling cycles): wait for Permit ->
PreBind -> fence (the leader must still hold a fresh lease) -> Bind (a binder extender if one is
interested, else the Bind plugins) -> ``Scheduled`` event -> PostBind. On failure the pod is
unreserved, **forgotten** and retried with backoff - unless the pod turns out bound or deleted:
whatever the error (a 409 is not always "already bound": kube-apiserver answers 409 when etcd is
unavailable), the informer's copy, or one GET when the informer still shows the pod pending,
decides (``podlocation``). A bind that errored but took effect counts as a success.

Failures record ``FailedScheduling`` with kube-scheduler's message, set ``PodScheduled=False``
(reason ``Unschedulable`` or ``SchedulerError``) when it changed, and put the pod in the
unschedulable pool (or backoffQ for errors).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
import time
from collections.abc import Callable

import numpy as np

from pysched import explanation as explain
from pysched.backend.cache.cache import SchedulerCache
from pysched.backend.queue.scheduling_queue import ACTIVE, QueuedPodInfo, SchedulingQueue
from pysched.client.events import EventRecorder
from pysched.client.fence import NotLeaderError, WriteFence
from pysched.client.statuswriter import PodStatusWriter
from pysched.extender.wire import ExtenderError
from pysched.framework.cycle_state import TRACE_KEY, CycleState
from pysched.framework.interface import MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE, NodeBatch
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import (
    EXTENDER_NAME,
    Code,
    Diagnosis,
    FitError,
    FrameworkError,
    NoNodesAvailable,
    Status,
    truncate_message,
)
from pysched.metrics import METRICS
from pysched.podlocation import BOUND, GONE, locate
from pysched.runtime.framework import CycleTrace, Framework
from pysched.schedule_one_podgroup import GROUP_PREFIX, PodGroupCycle
from pysched.util.logs import kv

log = logging.getLogger("pysched.schedule_one")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
FILTER_CHUNK_SLACK = 64  # extra nodes in the first filter chunk, and the smallest chunk
PLUGIN_METRICS_SAMPLE_PERCENT = 10
MIN_BINDS_OUTSTANDING = 8
MAX_BINDS_OUTSTANDING = 1000
LAST_RESULTS_LIMIT = 1000   # pods whose last outcome ``Scheduler.last_results`` keeps
BIND_RETRY_BASE = 0.2       # seconds before a pod admitted with its group binds again (doubling)
BIND_RETRY_MAX = 5.0

# What ``_write_failed`` found: the bind took effect, the pod is out of our hands (bound elsewhere,
# deleted, or back in the queue), or it is still pending and its bind is to be sent again.
BOUND_NOW, ENDED, RETRY_BIND = "bound", "ended", "retry"


def num_feasible_nodes_to_find(percentage: int | None, global_pct: int, num_all: int) -> int:
    """kube-scheduler's adaptive ``numFeasibleNodesToFind``."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    pct = percentage if percentage is not None else global_pct
    if pct == 0:
        pct = 50 - num_all // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    n = num_all * pct // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


def max_binds_for(qps: float, bind_timeout: float, connections: int = 0) -> int:
    """How many binds may be outstanding: half of what the client's rate limiter lets out within
    one bind timeout (the waits count against it), the rest of the tokens left to status patches;
    and with ``connections`` (the client's connection pool), at most twice that many, one in
    flight and one waiting per connection. Binds beyond that only wait in the pool while their
    pods' scheduling attempts age: in the 5,000-node drain benchmark, with the API server the
    limit, 1,000 outstanding binds put the attempt-duration median near 2 s at the same bind rate."""
    n = MAX_BINDS_OUTSTANDING if qps <= 0 else int(qps * bind_timeout / 2)
    if connections > 0:
        n = min(n, 2 * connections)
    return max(MIN_BINDS_OUTSTANDING, min(MAX_BINDS_OUTSTANDING, n))


def rejected_on(pod: PodInfo, host: str, st: Status) -> tuple[Status, Diagnosis | None]:
    """A Reserve or Permit rejection (or a wait at Permit rejected or timed out) as kube-scheduler
    reports it: a FitError over the one node chosen, ``0/1 nodes are available: 1 <reason>.``,
    with the plugin unschedulable. Any other status (an error) is returned as it is."""
    if not st.is_rejected():
        return st, None
    d = Diagnosis()
    d.add_node_status(host, st)
    return Status(st.code, FitError(pod.key, 1, d).message(), plugin=st.plugin), d


class ScheduleResult:
    __slots__ = ("host", "evaluated", "feasible")

    def __init__(self, host: str, evaluated: int, feasible: int):
        self.host = host
        self.evaluated = evaluated
        self.feasible = feasible


class Scheduler(PodGroupCycle):
    def __init__(self, *, cache: SchedulerCache, queue: SchedulingQueue, frameworks: dict[str, Framework],
                 recorder: EventRecorder | None = None, client=None, percentage_of_nodes_to_score: int = 0,
                 extenders=(), fence: WriteFence | None = None, max_binds_outstanding: int = MAX_BINDS_OUTSTANDING,
                 explain_all: bool = False, seed: int | None = None, on_cluster_event: Callable | None = None):
        """``fence``: writes only while this replica leads (``client.fence``); ``max_binds_outstanding``:
        backpressure (``max_binds_for``); ``explain_all``: trace every cycle for /debug/explain;
        ``on_cluster_event``: where capacity freed by a forgotten pod is reported (requeue)."""
        self.cache = cache
        self.queue = queue
        self.frameworks = frameworks
        self.recorder = recorder
        self.client = client
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.extenders = list(extenders)
        self.fence = fence                         # with leader election: no write unless we lead
        # Pods past Permit/PreBind whose bind is queued or in flight; the scheduling loop waits
        # while there are this many (see ``max_binds_for``).
        self.max_binds_outstanding = max_binds_outstanding
        self._binds_outstanding = 0
        self._bind_room: asyncio.Event | None = None
        self._fenced_logged = False
        self.rng = random.Random(seed)             # tie-breaks only: a seed reproduces placements
        self._sample_rng = random.Random()         # plugin-metrics sampling, kept off the tie-break stream
        self.next_start_node_index = 0
        self.on_cluster_event = on_cluster_event
        self.binding_tasks: set[asyncio.Task] = set()
        self.binding_pods: dict[str, asyncio.Task] = {}   # uid -> its binding cycle
        self._in_async_cycle: set[str] = set()           # uids in a scheduling cycle that awaits (extenders)
        self.api_tasks: set[asyncio.Task] = set()
        # Failed attempts' status patches: coalesced per pod, behind the binds, never after a bind.
        self.status_writer = PodStatusWriter(client, self._spawn_api_task) if client is not None else None
        self.explain_all = explain_all
        self.traces: dict[str, dict] = {}
        self.init_pod_group_cycle()
        self._explained: dict[str, str] = {}       # uid -> explanation annotation last written
        self.trace_limit = 2000
        # The last outcome of the most recent pods (diagnostics and tests), oldest dropped first: a
        # dict cleared only at 10,000 entries rose 3 MiB through each soak tenure before falling.
        self.last_results: dict[str, dict] = {}
        self.scheduled = 0
        self.stopped = False
        # Set once the scheduler is under way: its first bind was answered or an attempt failed, or
        # it found nothing to schedule or bind. What can wait that long (the secure port) waits for it.
        self.under_way = asyncio.Event()
        # Read when /metrics is scraped, not written twice per pod.
        METRICS.goroutines.labels("binding").set_function(lambda: len(self.binding_tasks))
        for fwk in {id(f): f for f in frameworks.values()}.values():
            # Preemption's background API calls are tracked (drained, cancelled) like status
            # patches; without a client (shadow mode, offline) nothing is sent.
            fwk.handle.spawn = self._spawn_api_task
            fwk.handle.extenders = self.extenders

    # -- main loop -----------------------------------------------------------------------------

    def backlogged(self) -> bool:
        """Working through a backlog: pods wait in activeQ while binds are in flight (what the
        Event recorder yields to, ``EventRecorder.defer_while``)."""
        return self._binds_outstanding > 0 and self.queue.counts[ACTIVE] > 0

    async def run(self) -> None:
        self.queue.update_metrics()
        while not self.stopped:
            if self.fence is not None and not self.fence.allows():
                # Nothing scheduled now could be bound: wait (without spinning) for a renewal, or
                # for the fence to close (lease lost, shutting down) and the loop to stop.
                if not await self.fence.wait_allowed():
                    return
                continue
            if self._binds_outstanding >= self.max_binds_outstanding:
                # Backpressure: binds wait for the client's rate limiter within their timeout, so
                # the cycle does not run further ahead of them than they can be sent.
                if self._bind_room is None:
                    self._bind_room = asyncio.Event()
                self._bind_room.clear()
                await self._bind_room.wait()
                continue
            qpi = None if self.queue.closed else self.queue.pop_nowait()
            if qpi is None:
                if not self._binds_outstanding:
                    self.under_way.set()   # nothing to schedule or bind now
                qpi = await self.queue.pop()
                if qpi is None:
                    return
            try:
                source = self.group_source(qpi)
                if source is not None:
                    self.schedule_pod_group(qpi, source)
                elif self.extenders:
                    await self.schedule_one_async(qpi)
                else:
                    self.schedule_one(qpi)
            except Exception:  # noqa: BLE001 - never let one pod stop the loop
                log.exception("scheduling cycle crashed", extra=kv(pod=qpi.pod.key))
                if qpi.pod.uid not in self.binding_pods:   # a binding cycle owns it now
                    self._fail(self.frameworks.get(qpi.pod.scheduler_name), qpi, Status(Code.ERROR, "internal error"),
                               time.perf_counter())
            await asyncio.sleep(0)

    def _note_result(self, uid: str, result: dict) -> None:
        """Keep ``result`` as ``uid``'s last outcome; beyond ``LAST_RESULTS_LIMIT`` pods the oldest goes."""
        results = self.last_results
        results.pop(uid, None)
        results[uid] = result
        if len(results) > LAST_RESULTS_LIMIT:
            del results[next(iter(results))]

    def stop(self) -> None:
        self.stopped = True
        self.queue.close()
        if self._bind_room is not None:
            self._bind_room.set()

    def abort_pending(self, *, keep_in_flight: bool) -> int:
        """Cancel binding cycles and API calls (their pods are unreserved and forgotten).

        With ``keep_in_flight`` the tasks whose write already went out (``fence.in_flight``) are
        left to finish - a graceful handover waits for them - and only the ones still queued
        (rate limiter, connection pool, Permit, PreBind) are cancelled. Returns how many were.
        """
        sent = self.fence.in_flight if (keep_in_flight and self.fence is not None) else ()
        cancelled = 0
        for task in (*self.binding_tasks, *self.api_tasks):
            if task not in sent and not task.done():
                task.cancel()
                cancelled += 1
        if cancelled:
            log.info("cancelled binding cycles and API calls that had not been sent", extra=kv(count=cancelled))
        return cancelled

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for binding cycles and API calls to end (graceful shutdown, before the lease is
        released); whatever is still running after ``timeout`` is cancelled."""
        pending = list(self.binding_tasks) + list(self.api_tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=1.0)

    # -- scheduling cycle ----------------------------------------------------------------------

    def _begin(self, qpi: QueuedPodInfo):
        """Checks before a cycle; returns (framework, state, trace, start) or None to skip the pod."""
        pod = qpi.pod
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None:
            log.error("no profile for pod's schedulerName", extra=kv(pod=pod.key, scheduler_name=pod.scheduler_name))
            self.queue.done(pod.uid)
            return None
        if pod.deleting:
            self._record(fwk, pod, "Warning", "FailedScheduling", "Scheduling",
                         f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            self.queue.done(pod.uid)
            return None
        if pod.uid in self.cache.pods:
            self.queue.done(pod.uid)  # already assumed or bound
            return None
        start = time.perf_counter()
        state = CycleState()
        state.record_plugin_metrics = self._sample_rng.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT
        trace = CycleTrace() if (self.explain_all or explain.requested(pod)) else None
        if trace is not None:
            state.write(TRACE_KEY, trace)
        if pod.parse_error:
            self._fail(fwk, qpi, Status(Code.ERROR, f"invalid pod: {pod.parse_error}"), start, trace=trace)
            return None
        return fwk, state, trace, start

    def _cycle_failed(self, fwk, state, qpi, exc, start, trace, post=None) -> None:
        """A cycle that found no node: PostFilter (preemption) for a FitError - ``post`` when the
        async cycle already ran it - then the failure, with the nominated node it chose."""
        pod = qpi.pod
        if isinstance(exc, FitError):
            nominating: str | None = ""     # no PostFilter plugin: clear any nomination
            if fwk.post_filter:
                result, st = post if post is not None else fwk.run_post_filter(state, pod, exc.diagnosis)
                if st is not None and st.message():
                    exc.diagnosis.post_filter_msg = st.message()
                nominating = result.nominated_node_name if result is not None else None
                if trace is not None and result is not None and result.nominated_node_name:
                    trace.nominated = {"node": result.nominated_node_name, "victims": list(result.victims)}
            d = exc.diagnosis
            code = Code.PENDING if d.pending_plugins and not d.unschedulable_plugins else Code.UNSCHEDULABLE
            self._fail(fwk, qpi, Status(code, exc.message()), start, diagnosis=d, trace=trace, nominating=nominating)
        else:
            self._fail(fwk, qpi, Status(Code.ERROR, str(exc)), start, trace=trace)

    def schedule_one(self, qpi: QueuedPodInfo) -> None:
        begun = self._begin(qpi)
        if begun is None:
            return
        fwk, state, trace, start = begun
        try:
            result = self.schedule_pod(fwk, state, qpi.pod, trace)
        except (FitError, NoNodesAvailable, FrameworkError) as exc:
            self._cycle_failed(fwk, state, qpi, exc, start, trace)
            return
        self._finish(fwk, state, qpi, result, start, trace)

    def working(self, uid: str) -> bool:
        """Whether a scheduling or binding cycle holds the pod now (the safety net's question)."""
        return uid in self.binding_pods or uid in self._in_async_cycle

    def _binding_ended(self, uid: str, task: asyncio.Task) -> None:
        self.binding_tasks.discard(task)
        if self.binding_pods.get(uid) is task:
            del self.binding_pods[uid]

    async def schedule_one_async(self, qpi: QueuedPodInfo) -> None:
        """The same cycle with extender calls: the pod waits, informer events may arrive meanwhile."""
        uid = qpi.pod.uid
        self._in_async_cycle.add(uid)
        try:
            await self._schedule_one_async(qpi)
        finally:
            self._in_async_cycle.discard(uid)

    async def _schedule_one_async(self, qpi: QueuedPodInfo) -> None:
        begun = self._begin(qpi)
        if begun is None:
            return
        fwk, state, trace, start = begun
        try:
            result = await self.schedule_pod_async(fwk, state, qpi.pod, trace)
        except (FitError, NoNodesAvailable, FrameworkError, ExtenderError) as exc:
            post = None
            if isinstance(exc, FitError) and fwk.post_filter and any(e.preempt_verb for e in self.extenders):
                post = await fwk.run_post_filter_async(state, qpi.pod, exc.diagnosis)
            self._cycle_failed(fwk, state, qpi, exc, start, trace, post)
            return
        if qpi.pod.uid in self.cache.pods or qpi.pod.uid not in self.queue:
            self.queue.done(qpi.pod.uid)  # bound or deleted while the extenders answered
            return
        self._finish(fwk, state, qpi, result, start, trace)

    def _finish(self, fwk, state, qpi: QueuedPodInfo, result, start: float, trace) -> None:
        pod = qpi.pod
        METRICS.algorithm_duration.observe(time.perf_counter() - start)
        host = result.host
        if trace is not None:
            # Served at /debug/explain now; the pod annotation waits for the outcome (bound or
            # failed) so it never names a node the pod is not on.
            trace.selected = host
            self._store_trace(pod, trace)

        assumed = self.cache.assume(pod, host)
        self.queue.nominator.delete(pod.uid)   # counted on its node now (DeleteNominatedPodIfExists)
        st = fwk.run_reserve(state, assumed, host)
        if st is not None and not st.is_success():
            fwk.run_unreserve(state, assumed, host)
            self._forget(assumed)
            st, d = rejected_on(pod, host, st)
            self._fail(fwk, qpi, st, start, trace=trace, diagnosis=d)
            return
        st, timeout = fwk.run_permit(state, assumed, host)
        waiting = st is not None and st.is_wait()
        if waiting and trace is not None:
            self._store_trace(pod, trace)   # /debug/explain shows what the pod waits for
        if st is not None and not st.is_success() and not waiting:
            fwk.run_unreserve(state, assumed, host)
            self._forget(assumed)
            st, d = rejected_on(pod, host, st)
            self._fail(fwk, qpi, st, start, trace=trace, diagnosis=d)
            return
        task = asyncio.get_running_loop().create_task(
            self.binding_cycle(fwk, state, qpi, assumed, host, start, waiting, timeout))
        self.binding_tasks.add(task)
        uid = pod.uid
        self.binding_pods[uid] = task
        task.add_done_callback(lambda t: self._binding_ended(uid, t))

    def find_feasible(self, fwk: Framework, state: CycleState, pod: PodInfo,
                      trace: CycleTrace | None) -> tuple[NodeBatch, Diagnosis, int]:
        """PreFilter and Filter from the rotating start, up to numFeasibleNodesToFind nodes."""
        table = self.cache.table
        # In a pod-group cycle's placement (``schedule_one_podgroup``) only the placement's nodes exist.
        placement = self._placement_slots
        order = table.order() if placement is None else placement
        n_all = len(order)
        if n_all == 0:
            raise NoNodesAvailable()
        diagnosis = Diagnosis()
        all_nodes = NodeBatch(table, order)
        pre_res, st, with_nodes = fwk.run_pre_filter(state, pod, all_nodes)
        diagnosis.unschedulable_plugins = set(with_nodes)
        if st is not None and not st.is_success():
            if not st.is_rejected():
                raise FrameworkError(st)
            diagnosis.absent_status = st
            diagnosis.pre_filter_msg = st.message()
            if st.plugin:
                (diagnosis.pending_plugins if st.code == Code.PENDING
                 else diagnosis.unschedulable_plugins).add(st.plugin)
            raise FitError(pod.key, n_all, diagnosis)

        nominated = pod.nominated_node or self.queue.nominator.nominated_node(pod.uid)
        if nominated and not self.extenders_filter_any() and placement is None:
            hit = self._evaluate_nominated_node(fwk, state, pod, table, nominated, pre_res)
            if hit is not None:
                return hit, diagnosis, n_all

        start_idx = self.next_start_node_index % n_all
        rotated = np.concatenate([order[start_idx:], order[:start_idx]]) if start_idx else order
        if pre_res is not None and pre_res.node_names is not None:   # PreFilter narrowed the nodes
            wanted = {table.slot_by_name[n] for n in pre_res.node_names if n in table.slot_by_name}
            rotated = rotated[np.isin(rotated, np.fromiter(wanted, dtype=np.int64, count=len(wanted)))]
            diagnosis.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(with_nodes))}]")
        n_cand = len(rotated)
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, self.percentage_of_nodes_to_score,
                                             n_cand)
        if not self.extenders_filter_any() and not fwk.has_score_plugins() and not self.extenders_prioritize_any():
            to_find = 1
        if fwk.has_filter_plugins() and n_cand:
            feasible_pos = self._filter_in_chunks(fwk, state, pod, table, rotated, to_find, diagnosis,
                                                  whole=trace is not None)
        else:
            feasible_pos = np.arange(min(to_find, n_cand))
        if len(feasible_pos) > to_find:
            feasible_pos = feasible_pos[:to_find]
            processed = int(feasible_pos[-1]) + 1
        else:
            processed = n_cand
        self.next_start_node_index = (self.next_start_node_index + processed) % n_all
        return NodeBatch(table, rotated[feasible_pos]), diagnosis, n_all

    def _evaluate_nominated_node(self, fwk: Framework, state: CycleState, pod: PodInfo, table, node: str,
                                 pre_res) -> NodeBatch | None:
        """``evaluateNominatedNode``: a preemptor tries the node it was nominated for first (the
        room was made there); the node, if it passes every filter, is the only feasible one."""
        slot = table.slot_by_name.get(node)
        if slot is None or (pre_res is not None and not pre_res.all_nodes() and node not in pre_res.node_names):
            return None
        batch = NodeBatch(table, np.array([slot], dtype=np.int64))
        if not fwk.run_filters(state, pod, batch, None)[0]:
            return None
        # upstream's findNodesThatPassFilters over a list of one node: the start index wraps to 0
        self.next_start_node_index = 0
        return batch

    def _filter_in_chunks(self, fwk: Framework, state: CycleState, pod: PodInfo, table, rotated: np.ndarray,
                          to_find: int, diagnosis: Diagnosis, whole: bool) -> np.ndarray:
        """Positions in ``rotated`` of the nodes that pass every filter, in order.

        As kube-scheduler stops checking nodes once ``to_find`` are feasible, the filters run over
        consecutive chunks of the rotated order: the first chunk is a little larger than
        ``to_find``, later ones are sized from the feasible fraction seen so far. The feasible set
        is the same as filtering everything and keeping the first ``to_find`` (and so is the next
        start index); only nodes past the cut are not evaluated, so the Diagnosis counts only the
        failures among the nodes that were. An explain trace (``whole``) evaluates every node.
        """
        n_cand = len(rotated)
        if whole or to_find >= n_cand:
            return np.flatnonzero(fwk.run_filters(state, pod, NodeBatch(table, rotated), diagnosis))
        found: list[np.ndarray] = []
        n_found = pos = 0
        chunk = to_find + to_find // 4 + FILTER_CHUNK_SLACK
        while pos < n_cand:
            end = min(n_cand, pos + chunk)
            mask = fwk.run_filters(state, pod, NodeBatch(table, rotated[pos:end]), diagnosis)
            hits = np.flatnonzero(mask)
            if len(hits):
                found.append(hits + pos)
                n_found += len(hits)
            pos = end
            if n_found > to_find:  # one more than needed, as kube-scheduler stops: fixes the rotation
                break
            ratio = max(n_found / pos, 1.0 / FILTER_CHUNK_SLACK)
            chunk = max(FILTER_CHUNK_SLACK, int((to_find - n_found) / ratio * 1.25))
        if not found:
            return np.zeros(0, dtype=np.int64)
        return found[0] if len(found) == 1 else np.concatenate(found)

    def _select(self, feasible: NodeBatch, total: np.ndarray, diagnosis: Diagnosis) -> ScheduleResult:
        best = np.flatnonzero(total == total.max())
        pick = int(best[self.rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
        info = self.cache.table.infos[int(feasible.slots[pick])]
        assert info is not None  # a feasible node's slot is alive
        return ScheduleResult(info.spec.name, len(feasible) + diagnosis.num_failed, len(feasible))

    def _settle(self, pod: PodInfo, feasible: NodeBatch, diagnosis: Diagnosis, n_all: int,
                trace: CycleTrace | None) -> ScheduleResult | None:
        """After filtering: record the feasible set, fail when it is empty, take a lone node unscored."""
        if trace is not None:
            trace.feasible = feasible.names
        if not len(feasible):
            raise FitError(pod.key, n_all, diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible.names[0], 1 + diagnosis.num_failed, 1)
        return None

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo,
                     trace: CycleTrace | None = None) -> ScheduleResult:
        feasible, diagnosis, n_all = self.find_feasible(fwk, state, pod, trace)
        settled = self._settle(pod, feasible, diagnosis, n_all, trace)
        if settled is not None:
            return settled
        return self._select(feasible, self.prioritize(fwk, state, pod, feasible, trace), diagnosis)

    async def schedule_pod_async(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                 trace: CycleTrace | None = None) -> ScheduleResult:
        feasible, diagnosis, n_all = self.find_feasible(fwk, state, pod, trace)
        names = await self.run_filter_extenders(pod, feasible.names, diagnosis, trace)
        feasible = self._batch_of(names)
        settled = self._settle(pod, feasible, diagnosis, n_all, trace)
        if settled is not None:
            return settled
        interested = [e for e in self.extenders if e.prioritize_verb and e.is_interested(pod)]
        if not interested:
            return self._select(feasible, self.prioritize(fwk, state, pod, feasible, trace), diagnosis)
        # With prioritize extenders, a profile without score plugins contributes 0, not the 1 that
        # prioritize gives when nothing at all scores.
        total = self.prioritize(fwk, state, pod, feasible, trace) if fwk.has_score_plugins() else \
            np.zeros(len(feasible), dtype=np.int64)
        names = feasible.names
        extra = await self.run_prioritize_extenders(pod, names, interested, trace)
        feasible = self._batch_of(names)          # nodes may have gone while we waited
        keep = [i for i, n in enumerate(names) if n in self.cache.nodes]
        total = total[keep] + np.array([extra.get(names[i], 0) for i in keep], dtype=np.int64)
        if not len(feasible):
            raise FitError(pod.key, n_all, diagnosis)
        return self._select(feasible, total, diagnosis)

    def _batch_of(self, names: list[str]) -> NodeBatch:
        table = self.cache.table
        slots = [table.slot_by_name[n] for n in names if n in table.slot_by_name]
        return NodeBatch(table, np.array(slots, dtype=np.int64))

    def prioritize(self, fwk: Framework, state: CycleState, pod: PodInfo, feasible: NodeBatch,
                   trace: CycleTrace | None) -> np.ndarray:
        if not fwk.has_score_plugins():
            return np.ones(len(feasible), dtype=np.int64)
        st = fwk.run_pre_score(state, pod, feasible)
        if st is not None and not st.is_success():
            raise FrameworkError(st)
        total = fwk.run_score(state, pod, feasible)
        if trace is not None:
            names = feasible.names
            trace.totals = {names[i]: int(total[i]) for i in range(len(names))}
        return total

    # -- extenders (scheduler.extender_client) --------------------------------------------------

    def extenders_filter_any(self) -> bool:
        return any(e.filter_verb for e in self.extenders)

    def extenders_prioritize_any(self) -> bool:
        return any(e.prioritize_verb for e in self.extenders)

    def _nodes_raw(self, names: list[str]) -> list[dict]:
        out = []
        for n in names:
            info = self.cache.nodes.get(n)
            if info is not None:
                out.append(info.spec.raw or {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n,
                                                                                            "labels": info.labels}})
        return out

    async def run_filter_extenders(self, pod: PodInfo, names: list[str], diagnosis: Diagnosis,
                                   trace: CycleTrace | None) -> list[str]:
        """``findNodesThatPassExtenders``: each interested filter extender narrows the list, in order."""
        for ext in self.extenders:
            if not names:
                break
            if not ext.filter_verb or not ext.is_interested(pod):
                continue
            try:
                passed, failed, unresolvable = await ext.filter(pod, names, self._nodes_raw)
            except ExtenderError as exc:
                if ext.ignorable:
                    log.warning("skipping ignorable extender after an error", extra=kv(
                        extender=ext.name, verb="filter", pod=pod.key, error=str(exc)))
                    continue
                raise
            for node, msg in unresolvable.items():
                diagnosis.add_node_status(node, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=EXTENDER_NAME))
            for node, msg in failed.items():
                if node not in unresolvable:
                    diagnosis.add_node_status(node, Status(Code.UNSCHEDULABLE, msg, plugin=EXTENDER_NAME))
            if len(passed) != len(names):
                diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
            if trace is not None:
                trace.extenders.append({"extender": ext.name, "verb": "filter", "passed": passed,
                                        "failed": failed, "failedAndUnresolvable": unresolvable})
            names = passed
        return names

    async def run_prioritize_extenders(self, pod: PodInfo, names: list[str], extenders,
                                       trace: CycleTrace | None) -> dict[str, int]:
        """All interested prioritize extenders concurrently; score x weight x 10; errors ignored."""
        if not extenders:
            return {}
        results = await asyncio.gather(*(e.prioritize(pod, names, self._nodes_raw) for e in extenders),
                                       return_exceptions=True)
        combined: dict[str, int] = {}
        for ext, res in zip(extenders, results):
            if isinstance(res, BaseException):
                log.warning("extender prioritize failed; ignored", extra=kv(extender=ext.name, pod=pod.key,
                                                                            error=str(res)))
                continue
            for host, score in res.items():
                combined[host] = combined.get(host, 0) + score * ext.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
            if trace is not None:
                trace.extenders.append({"extender": ext.name, "verb": "prioritize", "scores": res,
                                        "weight": ext.weight})
        return combined

    async def bind_with_extenders(self, fwk, state, pod, host) -> Status | None:
        """The first interested binder extender binds; SKIP when none does."""
        for ext in self.extenders:
            if not ext.is_binder() or not ext.is_interested(pod):
                continue
            try:
                await ext.bind(pod, host)
            except ExtenderError as exc:
                if ext.ignorable:
                    log.info("skipping ignorable binder extender after an error", extra=kv(
                        extender=ext.name, pod=pod.key, node=host, error=str(exc)))
                    continue
                return Status(Code.ERROR, str(exc), plugin=EXTENDER_NAME)
            return None
        return Status(Code.SKIP)

    # -- binding cycle -------------------------------------------------------------------------

    async def binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                            host: str, start: float, waiting: bool, timeout: float) -> None:
        step = "Permit"
        try:
            if waiting:
                st = await fwk.wait_on_permit(assumed, timeout)
                if st is not None and not st.is_success():
                    self._binding_failed(fwk, state, qpi, assumed, host, st, start)
                    return
            step = "PreBind"
            st = await fwk.run_pre_bind(state, assumed, host)
            if st is not None and not st.is_success():
                if isinstance(st.error, NotLeaderError):
                    raise st.error
                await self._write_failed(fwk, state, qpi, assumed, host, st, start, step)
                return
            step = "Bind"
            tries = 0
            while True:
                if tries and assumed.uid not in self.queue:   # deleted while its bind waited to go again
                    fwk.run_unreserve(state, assumed, host)
                    self._forget(assumed)
                    return
                if host not in self.cache.nodes:
                    # The node went away while the pod waited in PreBind/Permit (or to bind again):
                    # the API would still accept the binding (PodGC cleans up later); retry the pod
                    # elsewhere instead.
                    self._binding_failed(fwk, state, qpi, assumed, host,
                                         Status(Code.ERROR, f"node {host!r} was deleted before the pod could be "
                                                            "bound"), start)
                    return
                if self.status_writer is not None:
                    # A failed attempt's PodScheduled=False must not land after this binding.
                    await self.status_writer.settle(assumed.uid)
                if self.fence is not None and not self.fence.allows():
                    raise NotLeaderError(self.fence.closed_reason or "the leader lease is not fresh")
                st = await self._bind_once(fwk, state, assumed, host)
                if st is None or st.is_success():
                    break
                if isinstance(st.error, NotLeaderError):
                    raise st.error
                outcome = await self._write_failed(fwk, state, qpi, assumed, host, st, start, step,
                                                   retry_in_place=state.binds_until_bound())
                if outcome == BOUND_NOW:
                    break
                if outcome == ENDED:
                    return
                # Admitted with its group: the reservation stays, the same bind goes out again.
                tries += 1
                delay = min(BIND_RETRY_MAX, BIND_RETRY_BASE * 2 ** (tries - 1))
                METRICS.bind_retries.labels(fwk.profile_name).inc()
                log.warning("bind failed; binding again: the pod was admitted with its group", extra=kv(
                    pod=assumed.key, node=host, tries=tries, retry_in=delay, error=st.message()))
                await asyncio.sleep(delay)
        except NotLeaderError as exc:
            # The write fence refused (lease not fresh, lost, or handing over): nothing was sent.
            # The pod goes back to the queue quietly - no event, no condition: those are writes too.
            self._fenced_out(fwk, state, qpi, assumed, host, exc)
            return
        except asyncio.CancelledError:
            fwk.run_unreserve(state, assumed, host)
            self._forget(assumed)
            self.queue.requeue_in_flight(qpi)
            raise
        except Exception as exc:  # noqa: BLE001
            log.exception("binding cycle crashed", extra=kv(pod=assumed.key, node=host, step=step))
            await self._write_failed(fwk, state, qpi, assumed, host, Status.as_error(exc), start, "crash")
            return
        self.scheduled += 1
        now = time.perf_counter()
        prof = fwk.profile_name
        METRICS.schedule_attempts.labels("scheduled", prof).inc()
        METRICS.attempt_duration.labels("scheduled", prof).observe(now - start)
        attempts = qpi.attempts
        METRICS.sli_duration.labels(str(attempts) if attempts < 15 else "15+").observe(
            max(0.0, time.monotonic() - qpi.first_enqueued))
        METRICS.pod_attempts.observe(attempts)
        if qpi.was_flushed:   # no event requeued it: the 5-minute flush did (a hint that missed)
            log.debug("pod scheduled after flush from the unschedulable pool", extra=kv(
                pod=assumed.key, unschedulable_plugins=",".join(sorted(qpi.unschedulable_plugins)) or None))
            METRICS.pod_scheduled_after_flush.inc()
        self._note_result(assumed.uid, {"node": host})
        self._record(fwk, assumed, "Normal", "Scheduled", "Binding",
                     f"Successfully assigned {assumed.namespace}/{assumed.name} to {host}")
        fwk.run_post_bind(state, assumed, host)
        self.queue.done(assumed.uid)
        trace = state.get(TRACE_KEY)
        if trace is not None:
            self._publish_explanation(assumed, trace.to_dict())

    async def _bind_once(self, fwk: Framework, state: CycleState, assumed: PodInfo, host: str) -> Status | None:
        """One bind: a binder extender if one is interested, else the Bind plugins."""
        self._binds_outstanding += 1
        try:
            st = await self.bind_with_extenders(fwk, state, assumed, host)
            if st is not None and st.is_skip():
                st = await fwk.run_bind(state, assumed, host)
            return st
        finally:
            self._binds_outstanding -= 1
            if self._bind_room is not None and self._binds_outstanding < self.max_binds_outstanding:
                self._bind_room.set()
            self.under_way.set()

    def _fenced_out(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                    host: str, exc: NotLeaderError) -> None:
        fwk.run_unreserve(state, assumed, host)
        self._forget(assumed)
        self.queue.requeue_in_flight(qpi)
        METRICS.fenced_writes.labels("binding").inc()
        if not self._fenced_logged:  # once: a backlog of thousands must not flood the log
            self._fenced_logged = True
            log.warning("not binding: this replica cannot prove it leads; pods go back to the queue",
                        extra=kv(pod=assumed.key, node=host, reason=exc.message))

    async def _write_failed(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                            host: str, st: Status, start: float, step: str, *, retry_in_place: bool = False) -> str:
        """A write of the binding cycle failed (PreBind, Bind - a plugin or a binder extender - or
        the cycle crashed): whatever the error said (a 409 during an etcd outage is not "already
        bound"), find out where the pod is and act on that. Returns BOUND_NOW when the pod turned
        out bound to ``host`` by this Bind (the write took effect; the caller finishes as a
        success), RETRY_BIND when it is still pending and ``retry_in_place`` (its bind is sent
        again, its reservation kept), else ENDED."""
        if st.is_rejected() and st.plugin:
            self._binding_failed(fwk, state, qpi, assumed, host, st, start)   # a plugin's verdict
            return ENDED
        where = await locate(assumed, cache=self.cache, queue=self.queue, client=self.client)
        took_effect = where.state == BOUND and where.node == host and step == "Bind"
        status_code = getattr(st.error, "status", None)
        if status_code in (404, 409):
            reason = "took_effect" if took_effect else {BOUND: "already_bound", GONE: "not_found"}.get(
                where.state, "still_pending")
            METRICS.bind_conflicts.labels(fwk.profile_name, reason).inc()
        fields = kv(pod=assumed.key, node=host, step=step, status=status_code, error=st.message(),
                    found=where.state, found_node=where.node or None, source=where.source)
        if took_effect:
            log.info("bind reported an error but took effect; the pod is bound", extra=fields)
            return BOUND_NOW
        if where.state in (BOUND, GONE):
            fwk.run_unreserve(state, assumed, host)
            self._forget(assumed)
            log.info("bind failed and the pod is no longer pending; not retrying", extra=fields)
            self.queue.done(assumed.uid)
            return ENDED
        if retry_in_place and step == "Bind":
            return RETRY_BIND
        # Still pending (or the API server could not say): retry it after an error backoff.
        log.warning("bind failed; will retry", extra=fields)
        self._binding_failed(fwk, state, qpi, assumed, host, st, start, rejected_ok=False)
        return ENDED

    def _binding_failed(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                        host: str, st: Status, start: float, *, rejected_ok: bool = True) -> None:
        """The pod is not bound: unreserve, forget, and back to the queue (unschedulable for a
        plugin's rejection, backoffQ for an error)."""
        fwk.run_unreserve(state, assumed, host)
        self._forget(assumed)
        if rejected_ok and st.is_rejected() and st.plugin:
            # A plugin rejected the pod in the binding cycle (Permit wait rejected or timed out, a
            # gang released): as upstream's handleBindingCycleError, the pod is unschedulable with
            # that plugin in its UnschedulablePlugins, so the plugin's events requeue it.
            log.info("pod rejected in the binding cycle; waiting", extra=kv(
                pod=assumed.key, node=host, plugin=st.plugin, err=st.message()))
            st, d = rejected_on(assumed, host, Status(Code.UNSCHEDULABLE, *st.reasons, plugin=st.plugin))
            assert d is not None   # a rejection: always wrapped
            d.unschedulable_plugins = {p for p in st.plugin.split(",") if p}
            self._fail(fwk, qpi, st, start, binding=True, diagnosis=d, trace=state.get(TRACE_KEY))
            return
        self._fail(fwk, qpi, Status(Code.ERROR, st.message(), plugin=st.plugin), start, binding=True,
                   trace=state.get(TRACE_KEY))

    def _forget(self, assumed: PodInfo) -> None:
        if self.cache.forget(assumed) and self.on_cluster_event is not None:
            # Capacity came back: an "assigned pod deleted" event for the unschedulable pool.
            self.on_cluster_event("Pod", {"Delete"}, assumed, None)

    # -- failures ------------------------------------------------------------------------------

    def _fail(self, fwk: Framework | None, qpi: QueuedPodInfo, status: Status, start: float, *,
              diagnosis: Diagnosis | None = None, trace: CycleTrace | None = None, binding: bool = False,
              nominating: str | None = "") -> None:
        """``handleSchedulingFailure``. ``nominating``: the pod's nominated node from now on (""
        clears it, as every failure but a PostFilter's does; None leaves it as it is)."""
        self.under_way.set()
        pod = qpi.pod
        prof = fwk.profile_name if fwk is not None else pod.scheduler_name
        rejected = status.is_rejected()
        reason = "Unschedulable" if rejected else "SchedulerError"
        result = "unschedulable" if rejected else "error"
        METRICS.schedule_attempts.labels(result, prof).inc()
        METRICS.attempt_duration.labels(result, prof).observe(time.perf_counter() - start)
        msg = status.message()
        if trace is not None:
            trace.error = msg
            self._publish_explanation(pod, self._store_trace(pod, trace))
        self._note_result(pod.uid, {"error": msg})
        if diagnosis is not None:
            qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(diagnosis.pending_plugins)
        if rejected:
            log.info("unable to schedule pod; no fit; waiting", extra=kv(pod=pod.key, err=msg))
        else:
            log.warning("error scheduling pod; retrying", extra=kv(pod=pod.key, err=msg))
        bound = self.cache.pods.get(pod.uid)
        if bound is not None and not self.cache.is_assumed(pod.uid):
            log.info("pod has been assigned to node; abort adding it back to queue",
                     extra=kv(pod=pod.key, node=bound.node_name))
            self.queue.done(pod.uid)
            return
        if pod.uid not in self.queue:
            return  # deleted while we were scheduling it
        self.queue.add_unschedulable_if_not_present(qpi)
        latest = qpi.pod
        # Recorded at once: the next cycle must see the nomination before the patch comes back.
        if nominating is None:
            self.queue.nominator.add(latest)
        else:
            self.queue.nominator.add(latest, nominating)
        if fwk is None:
            return
        self._record(fwk, latest, "Warning", "FailedScheduling", "Scheduling", truncate_message(msg))
        self._patch_condition(latest, reason, msg, nominating)

    def _record(self, fwk: Framework, pod: PodInfo, type_: str, reason: str, action: str, note: str) -> None:
        if self.recorder is not None:
            self.recorder.record(pod, controller=fwk.profile_name, type_=type_, reason=reason, action=action,
                                 note=truncate_message(note))

    def _patch_condition(self, pod: PodInfo, reason: str, message: str, nominating: str | None = None) -> None:
        """``updatePod``: the PodScheduled condition and the nominated node in one pods/status
        patch, sent only when one of them changes."""
        if self.client is None:
            return
        nnn_changed = nominating is not None and pod.nominated_node != nominating
        cond_changed = pod.scheduled_condition != ("False", reason, message)
        if not cond_changed and not nnn_changed:
            return
        status: dict = {}
        if cond_changed:
            cond: dict[str, object] = {"type": "PodScheduled", "status": "False", "reason": reason,
                                       "message": message, "lastProbeTime": None}
            if not pod.scheduled_condition or pod.scheduled_condition[0] != "False":
                cond["lastTransitionTime"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if pod.generation:
                cond["observedGeneration"] = pod.generation
            status["conditions"] = [cond]
        if nnn_changed:
            status["nominatedNodeName"] = nominating or None
        self._patch_soon(pod, {"status": status})

    def _spawn_api_task(self, coro) -> bool:
        """Run API calls made for a plugin (preemption) in the background, tracked in ``api_tasks``."""
        if self.client is None:
            return False
        task = asyncio.get_running_loop().create_task(coro)
        self.api_tasks.add(task)
        task.add_done_callback(self.api_tasks.discard)
        return True

    def _patch_soon(self, pod: PodInfo, patch: dict) -> None:
        """Send a pods/status patch in the background (``statuswriter``: coalesced per pod)."""
        if self.status_writer is not None:
            self.status_writer.queue(pod.uid, pod.namespace, pod.name, patch)

    def _store_trace(self, pod: PodInfo, trace: CycleTrace) -> dict:
        """Keep the cycle's trace for /debug/explain (bounded, oldest out first)."""
        if len(self.traces) >= self.trace_limit:
            self.traces.pop(next(iter(self.traces)))
        data = self.traces[pod.key] = trace.to_dict()
        return data

    def explanation(self, pod_key: str) -> dict | None:
        """``/debug/explain``: the pod's last traced cycle; for a pending pod that asked for an
        explanation but has no trace yet (it failed before it asked, and its re-evaluation has
        not ended), where it waits (``explain.reevaluating``); else None."""
        if pod_key.startswith(GROUP_PREFIX):
            return self.group_explanation(pod_key[len(GROUP_PREFIX):])
        got = self.traces.get(pod_key)
        if got is not None:
            return got
        for qpi in self.queue.pending():
            if qpi.pod.key == pod_key and explain.requested(qpi.pod):
                return explain.reevaluating(pod_key, qpi.where, qpi.gating_plugin if qpi.gated else "")
        return None

    def _publish_explanation(self, pod: PodInfo, data: dict) -> None:
        """Write the summary onto a pod that asked for it, once the cycle's outcome is known."""
        if self.client is not None and explain.requested(pod):
            values = explain.annotations(data, pod.key)
            value = values[explain.RESULT_ANNOTATION]
            if self._explained.get(pod.uid) == value:
                return
            if len(self._explained) >= self.trace_limit:
                self._explained.pop(next(iter(self._explained)))
            self._explained[pod.uid] = value
            self._patch_soon(pod, {"metadata": {"annotations": values}})
