"""Preemption: the Evaluator behind DefaultPreemption (upstream ``framework/preemption``).

``Evaluator.preempt`` runs in PostFilter, inside the scheduling cycle, after no node fit the pod:

1. the pod must be eligible (``Interface.pod_eligible``: ``preemptionPolicy: Never`` is not);
2. candidates: the nodes whose Filter status was ``Unschedulable`` (``UnschedulableAndUnresolvable``
   ones cannot be helped by removing pods), from a random offset, dry-run one by one
   (``Interface.select_victims``: the minimal victim set on that node) until enough candidates are
   found (``Interface.offset_and_count``), the ones violating no PodDisruptionBudget first;
3. extenders with a ``preemptVerb`` may narrow the candidates and their victims;
4. the best candidate (``pick_one_node``): fewest PDB violations, lowest highest-victim
   priority, smallest priority sum, fewest victims, latest start among the highest-priority
   victims, then the first;
5. the victims are preempted **asynchronously** (SchedulerAsyncPreemption, on by default since
   1.33): the cycle returns the nominated node at once and a background task clears the
   nominations of lower-priority pods on that node, then per victim adds the ``DisruptionTarget``
   condition, deletes it and records ``Preempted``. Until that task has sent its last delete the
   preemptor is held back from activeQ (``is_running_preemption``).

Dry runs do not copy nodes: victims are taken off the live snapshot with ``what_if()`` (and put
back before the cycle goes on), PreFilter is run again on the changed snapshot and every filter
plugin, custom ones included, judges the node as it would be. Every API write goes through the
scheduler's client and so through the write fence.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pysched.apis.core.model import ObjectError, parse_label_selector
from pysched.framework.cycle_state import CycleState
from pysched.framework.handle import Handle
from pysched.framework.interface import PostFilterResult
from pysched.framework.nodeinfo import NodeInfo
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Diagnosis, FitError, Status
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.framework.preemption")

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
PDB_PLURAL = "poddisruptionbudgets"
DOOMED_VICTIMS_KEPT = 10_000


def start_time(pod: PodInfo) -> float:
    """``util.GetPodStartTime``: ``status.startTime``, or now for a pod that has not started."""
    return pod.start_time or time.time()


def importance(pod: PodInfo) -> tuple[int, float]:
    """Sort key putting the more important pod first (``util.MoreImportantPod``: higher priority,
    then the earlier start)."""
    return (-pod.priority, start_time(pod))


@dataclass(frozen=True)
class GroupPreemptor:
    """A pod group preempting (``podGroupPreemptor``): the victims' Events and conditions name it,
    and its unscheduled members (``member_uids``) are held back while its victims go."""
    uid: str                  # the PodGroup's
    key: str                  # namespace/name
    scheduler_name: str
    priority: int
    member_uids: tuple[str, ...]
    kind: str = "podgroup"


def preemptor_kind(preemptor: PodInfo | GroupPreemptor) -> str:
    return preemptor.kind if isinstance(preemptor, GroupPreemptor) else "pod"


def held_uids(preemptor: PodInfo | GroupPreemptor) -> tuple[str, ...]:
    """The pods held back from activeQ while the preemption runs."""
    return preemptor.member_uids if isinstance(preemptor, GroupPreemptor) else (preemptor.uid,)


@dataclass
class Candidate:
    """A node where preemption makes room: its victims (most important first) and how many of
    them a PodDisruptionBudget protects."""
    name: str
    victims: list[PodInfo]
    num_pdb_violations: int = 0


@dataclass
class PDB:
    """What preemption reads of a PodDisruptionBudget."""
    namespace: str
    selector: Any                       # LabelSelector, or None (nil: matches nothing)
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> PDB | None:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        try:
            selector = parse_label_selector(spec.get("selector"), "spec.selector")
        except (ObjectError, ValueError):
            return None                 # upstream skips a PDB whose selector does not convert
        return cls(meta.get("namespace") or "default", selector, int(status.get("disruptionsAllowed") or 0),
                   frozenset(status.get("disruptedPods") or ()))

    def selects(self, pod: PodInfo) -> bool:
        sel = self.selector
        return (pod.namespace == self.namespace and sel is not None and not sel.empty
                and sel.matches(pod.labels))


def split_by_pdb(pods: Sequence[PodInfo], pdbs: Sequence[PDB]) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: (pods whose eviction would exceed a PDB's
    ``disruptionsAllowed``, the others), each in the given order; budgets are used up in order."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    ok: list[PodInfo] = []
    for pod in pods:
        hit = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb.selects(pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    hit = True
        (violating if hit else ok).append(pod)
    return violating, ok


def earliest_start_of_highest(victims: Sequence[PodInfo]) -> float:
    """``util.GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    top = max(v.priority for v in victims)
    return min(start_time(v) for v in victims if v.priority == top)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    """``pickOneNodeForPreemption``: each criterion keeps the best-scoring candidates, the next
    one breaks their tie; the first remaining candidate wins."""
    if not candidates:
        return None
    score_funcs: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_or_min,
    ]
    remaining = list(candidates)
    for f in score_funcs:
        best = -math.inf
        kept: list[Candidate] = []
        for c in remaining:
            s = f(c)
            if s > best:
                best, kept = s, [c]
            elif s == best:
                kept.append(c)
        if len(kept) == 1:
            return kept[0]
        remaining = kept
    return remaining[0]


def earliest_or_min(c: Candidate) -> float:
    return earliest_start_of_highest(c.victims) if c.victims else -math.inf


class PreemptionPolicy(Protocol):
    """What a preemption plugin decides (upstream ``preemption.Interface``)."""

    def offset_and_count(self, num_nodes: int) -> tuple[int, int]: ...
    def pod_eligible(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]: ...
    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                       pdbs: Sequence[PDB]) -> tuple[list[PodInfo], int, Status | None]: ...


class Evaluator:
    """Finds the node and victims for a preemptor and carries the preemption out."""

    def __init__(self, plugin_name: str, handle: Handle, policy: PreemptionPolicy):
        self.plugin_name = plugin_name
        self.handle = handle
        self.policy = policy
        self.preempting: set[str] = set()                       # preemptor uids with a running task
        self.last_victim: dict[str, PodInfo] = {}               # preemptor uid -> victim deleted last
        # Victims a preemption chose: terminating by preemption from that moment, even before
        # their DELETE went out or the informer shows their deletionTimestamp (pod_eligible's
        # "terminating pod on the nominated node"): a preemptor retried meanwhile must wait for
        # them, not preempt again somewhere else.
        self.doomed_victims: set[str] = set()

    # -- the scheduling cycle's part ----------------------------------------------------------

    def preempt(self, state: CycleState, pod: PodInfo,
                diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        METRICS.preemption_attempts.inc()
        found = self._find(state, pod, diagnosis)
        if isinstance(found, tuple):
            return found
        return self._conclude(pod, found)

    async def preempt_async(self, state: CycleState, pod: PodInfo,
                            diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        """``preempt`` with the extenders that support preemption consulted (the cycle awaits them)."""
        METRICS.preemption_attempts.inc()
        found = self._find(state, pod, diagnosis)
        if isinstance(found, tuple):
            return found
        try:
            candidates = await self.call_extenders(pod, found)
        except PreemptionError as exc:
            return None, Status(Code.ERROR, str(exc))
        return self._conclude(pod, candidates)

    def _find(self, state: CycleState, pod: PodInfo,
              diagnosis: Diagnosis) -> list[Candidate] | tuple[PostFilterResult | None, Status]:
        codes = diagnosis.node_codes()
        absent = diagnosis.absent_status
        # kube-scheduler's NodeToStatus: a node without a status has the absent one (PreFilter's
        # verdict), by default UnschedulableAndUnresolvable.
        absent_code = int(absent.code) if absent is not None else int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        nominated = pod.nominated_node
        ok, msg = self.policy.pod_eligible(pod, Status(Code(codes.get(nominated, absent_code))) if nominated else None)
        if not ok:
            log.debug("pod is not eligible for preemption", extra=kv(pod=pod.key, reason=msg))
            return None, Status(Code.UNSCHEDULABLE, msg)
        table = self.handle.snapshot.table
        infos = table.infos
        order = table.order().tolist()
        if not order:
            return None, Status(Code.ERROR, "no nodes available")
        unschedulable = int(Code.UNSCHEDULABLE)
        potential = [name for name in (infos[s].spec.name for s in order)
                     if codes.get(name, absent_code) == unschedulable]
        out = Diagnosis()
        out.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL)
        candidates: list[Candidate] = []
        errors: list[str] = []
        need_lower = getattr(self.policy, "victims_need_lower_priority", None)
        if (potential and (need_lower is None or need_lower(state, pod))
                and not self.handle.snapshot.has_pod_below(pod.priority)):
            # No cached pod anywhere has a lower priority: every dry run would find no victim.
            no_victims = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
            own = getattr(self.policy, "no_victims_status", None)   # a policy's own words for it
            for name in potential:
                out.add_node_status(name, own(pod, name) if own is not None else no_victims)
        elif potential:
            pdbs = self.pdbs()
            offset, count = self.policy.offset_and_count(len(potential))
            candidates, errors = self.dry_run(state, pod, potential, pdbs, offset, count, out)
        if errors and not candidates:
            return None, Status(Code.ERROR, "; ".join(errors))
        if not candidates:
            log.debug("no preemption candidate; preemption is not helpful", extra=kv(pod=pod.key))
            fit = FitError(pod.key, len(order), out)
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, fit.message())
        return candidates

    def _conclude(self, pod: PodInfo, candidates: list[Candidate]) -> tuple[PostFilterResult | None, Status]:
        best = self.select_candidate(candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, "no candidate node for preemption")
        log.info("the target node for the preemption is determined", extra=kv(
            pod=pod.key, node=best.name, victims=",".join(v.key for v in best.victims)))
        self.prepare_candidate_async(best, pod)
        result = PostFilterResult(best.name, tuple(v.key for v in best.victims))
        if self.handle.kube_version >= (1, 37):
            # 1.37 says what it did: DefaultPreemption prefixes "preemption: " and the line ends
            # the pod's FailedScheduling Event and condition.
            return result, Status(Code.SUCCESS, f"found a potential placement for pod on node {best.name}, "
                                                f"preempting {len(best.victims)} victims")
        return result, Status(Code.SUCCESS)

    def pdbs(self) -> list[PDB]:
        try:
            objs = self.handle.objects.list(PDB_PLURAL)
        except KeyError:
            return []
        out = []
        for obj in objs:
            pdb = PDB.from_dict(obj)
            if pdb is not None:
                out.append(pdb)
        return out

    def dry_run(self, state: CycleState, pod: PodInfo, potential: list[str], pdbs: Sequence[PDB], offset: int,
                count: int, out: Diagnosis) -> tuple[list[Candidate], list[str]]:
        """``DryRunPreemption``: nodes from ``offset`` on (wrapping) until ``count`` candidates
        with at least one violating no PDB; candidates violating none come first. Failures go
        to ``out`` (the "not helpful" message)."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        errors: list[str] = []
        nodes = self.handle.snapshot.nodes
        n = len(potential)
        fwk = self.handle.framework
        on_paper = getattr(self.policy, "select_victims_on_paper", None)
        if on_paper is not None and (fwk is None or not fwk.on_paper(state, pod)):
            on_paper = None
        # On paper, nodes are judged a chunk at a time (as many as the candidates wanted, at least
        # 16); the results are then taken in the same order, and the same stop, as node by node.
        ahead: list[tuple[list[PodInfo], int, Status | None]] = []
        for i in range(n):
            name = potential[(offset + i) % n]
            info = nodes.get(name)
            if info is None:
                continue
            if on_paper is not None and not ahead:
                chunk = [nodes[nm] for nm in (potential[(offset + j) % n] for j in range(i, min(n, i + max(count, 16))))
                         if nm in nodes]
                got = on_paper(state, pod, chunk, pdbs)
                if got is None:
                    on_paper = None
                else:
                    ahead = list(reversed(got))
            if ahead:
                victims, n_pdb, st = ahead.pop()
            else:
                victims, n_pdb, st = self.policy.select_victims(state, pod, info, pdbs)
            if st is None and victims:
                (non_violating if n_pdb == 0 else violating).append(Candidate(name, victims, n_pdb))
                if non_violating and len(non_violating) + len(violating) >= count:
                    break
                continue
            if st is None:
                st = Status(Code.ERROR, f"expected at least one victim pod on node {name!r}")
            if st.code == Code.ERROR:
                errors.append(st.message())
            out.add_node_status(name, st)
        return non_violating + violating, errors

    def select_candidate(self, candidates: list[Candidate]) -> Candidate | None:
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        return pick_one_node(candidates)

    async def call_extenders(self, pod: PodInfo, candidates: list[Candidate]) -> list[Candidate]:
        """``callExtenders``: each interested extender with a ``preemptVerb``, in order, gets the
        candidates and their victims and answers the ones it accepts."""
        extenders = [e for e in self.handle.extenders if e.preempt_verb and e.is_interested(pod)]
        if not extenders or not candidates:
            return candidates
        victims = {c.name: (c.victims, c.num_pdb_violations) for c in candidates}

        def pods_on(node: str) -> dict[str, PodInfo] | None:
            info = self.handle.snapshot.nodes.get(node)
            return info.pods if info is not None else None

        for ext in extenders:
            try:
                answer = await ext.process_preemption(pod, victims, pods_on)
            except Exception as exc:  # noqa: BLE001 - the extender client's errors
                if ext.ignorable:
                    log.info("skipped ignorable extender after a preemption error", extra=kv(
                        extender=ext.name, pod=pod.key, error=str(exc)))
                    continue
                raise PreemptionError(str(exc)) from None
            for node in list(answer):
                if not answer[node][0]:
                    if ext.ignorable:
                        del answer[node]
                        continue
                    raise PreemptionError(f"expected at least one victim pod on node {node!r}")
            victims = answer
            if not victims:
                break
        return [Candidate(node, vs, n) for node, (vs, n) in victims.items()]

    # -- the background part --------------------------------------------------------------------

    def is_running_preemption(self, uid: str) -> bool:
        """Whether the preemption started for pod ``uid`` has not sent its last delete yet (or it
        has, but the informer still shows that victim alive)."""
        if uid not in self.preempting:
            return False
        last = self.last_victim.get(uid)
        if last is None:
            return True
        current = self.handle.snapshot.pods.get(last.uid)
        return current is not None and not current.deleting

    def prepare_candidate_async(self, c: Candidate, pod: PodInfo | GroupPreemptor) -> None:
        """``prepareCandidateAsync``: evict the victims and clear lower-priority nominations in
        the background; the cycle does not wait. ``pod`` is the preemptor: a pod, or a pod group
        (``actuatePodGroupPreemption``: candidate ``cluster``, every member held back)."""
        METRICS.preemption_victims.observe(len(c.victims))
        victims = [v for v in c.victims if not v.deleting]
        if not victims or self.handle.client is None:
            return
        for v in victims:     # terminating from now on, for pod_eligible (upstream: once the DELETE lands)
            self.note_doomed(v.uid)
        held = held_uids(pod)
        self.preempting.update(held)
        self._spawn(held, self._preempt_in_background(c, pod, victims))

    def _spawn(self, held: tuple[str, ...], coro: Coroutine[Any, Any, None]) -> None:
        if self.handle.spawn is not None:
            if not self.handle.spawn(coro):
                coro.close()
                self.preempting.difference_update(held)
            return
        try:
            asyncio.get_running_loop().create_task(coro)
        except RuntimeError:          # no loop (offline): nothing to send
            coro.close()
            self.preempting.difference_update(held)

    async def _preempt_in_background(self, c: Candidate, pod: PodInfo | GroupPreemptor,
                                     victims: list[PodInfo]) -> None:
        held = held_uids(pod)
        ok = True
        try:
            if not await self.clear_lower_nominations(pod, c.name):
                ok = False
            if len(victims) > 1:
                results = await asyncio.gather(*(self.preempt_pod(c, pod, v) for v in victims[:-1]),
                                               return_exceptions=True)
                for r in results:
                    if isinstance(r, BaseException):
                        ok = False
                        if isinstance(r, asyncio.CancelledError):
                            raise r
                        log.warning("error during async preemption", extra=kv(pod=pod.key, node=c.name, error=str(r)))
            for uid in held:
                self.last_victim[uid] = victims[-1]
            try:
                await self.preempt_pod(c, pod, victims[-1])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                ok = False
                log.warning("error during async preemption", extra=kv(pod=pod.key, node=c.name, error=str(exc)))
        finally:
            self.preempting.difference_update(held)
            for uid in held:
                self.last_victim.pop(uid, None)
            if not ok:
                # Victims whose deletion failed are not leaving: the preemptor must not wait for them.
                pods = self.handle.snapshot.pods
                for v in victims:
                    current = pods.get(v.uid)
                    if current is not None and not current.deleting:
                        self.doomed_victims.discard(v.uid)
            pods = self.handle.snapshot.pods
            if self.handle.activate is not None and (not ok or not any(v.uid in pods for v in victims)):
                # The pod may wait in the unschedulable pool for events that never come: a failed
                # deletion, or victims all gone already - their Delete events (another preemption
                # deleted them first) arrived while this pod was held, so none will move it now.
                self.handle.activate(list(held))
        log.info("async preemption finished", extra=kv(pod=pod.key, node=c.name, ok=ok, victims=len(victims)))

    async def clear_lower_nominations(self, pod: PodInfo | GroupPreemptor, node: str) -> bool:
        """``getLowerPriorityNominatedPods`` + ``clearNominatedNodeName``: lower-priority pods
        nominated for ``node`` may not fit any more; dropping their nomination sends them to look
        elsewhere sooner."""
        nom = self.handle.nominator
        if not nom:
            return True
        ok = True
        for p in nom.pods_for_node(node):
            if p.priority >= pod.priority:
                continue
            nom.delete(p.uid)
            if not p.nominated_node:
                continue
            try:
                await self._client().patch_pod_status(p.namespace, p.name, {"status": {"nominatedNodeName": None}})
            except Exception as exc:  # noqa: BLE001
                if getattr(exc, "status", None) == 404:
                    continue
                ok = False
                log.warning("cannot clear nominatedNodeName", extra=kv(pod=p.key, node=node, error=str(exc)))
        return ok

    def _client(self) -> Any:
        client = self.handle.client
        assert client is not None
        return client

    async def preempt_pod(self, c: Candidate, preemptor: PodInfo | GroupPreemptor, victim: PodInfo) -> None:
        """``PreemptPod``: reject a victim waiting at Permit; otherwise mark it
        ``DisruptionTarget`` and delete it. Then the ``Preempted`` event on the victim."""
        waiting = self.handle.waiting_pods.get(victim.uid)
        since_1_37 = self.handle.kube_version >= (1, 37)
        kind = preemptor_kind(preemptor)
        note = f"Preempted by {kind} {preemptor.uid} on node {c.name}"
        if waiting is not None:
            if since_1_37:   # 1.37: an Error for the victim's cycle, and the Event says so
                waiting.preempt(self.plugin_name, "preempted")
                note += " (in kube-scheduler memory)."
            else:
                waiting.reject(self.plugin_name, "preempted")
            log.info("preemptor rejected a waiting pod", extra=kv(pod=preemptor.key, victim=victim.key, node=c.name))
        else:
            client = self._client()
            if not victim.preempted_by_scheduler:
                cond: dict[str, Any] = {
                    "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                    "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority {kind}",
                    "lastProbeTime": None,
                    "lastTransitionTime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
                if victim.generation:
                    cond["observedGeneration"] = victim.generation
                try:
                    await client.patch_pod_status(victim.namespace, victim.name, {"status": {"conditions": [cond]}})
                except Exception as exc:
                    if getattr(exc, "status", None) == 404:
                        log.info("victim pod is already deleted", extra=kv(pod=preemptor.key, victim=victim.key))
                        return
                    raise
            try:
                await client.delete_pod(victim.namespace, victim.name, uid=victim.uid or None)
            except Exception as exc:
                # 404: already gone; 409: the name now belongs to a new pod, which is no victim.
                if getattr(exc, "status", None) == 409:
                    self.doomed_victims.discard(victim.uid)
                if getattr(exc, "status", None) in (404, 409):
                    log.info("victim pod is already deleted", extra=kv(pod=preemptor.key, victim=victim.key,
                                                                       status=getattr(exc, "status", None)))
                    return
                raise
            log.info("preemptor pod preempted victim pod", extra=kv(pod=preemptor.key, victim=victim.key, node=c.name))
        recorder = self.handle.recorder
        if recorder is not None:
            # 1.37 passes its preemptor wrapper (not an API type) as the related object, which the
            # event recorder cannot reference: its Preempted Events have none, and so do ours.
            related = None if since_1_37 or isinstance(preemptor, GroupPreemptor) else preemptor
            recorder.record(victim, controller=self.handle.profile_name, type_="Normal", reason="Preempted",
                            action="Preempting", note=note, related=related)


    def note_doomed(self, uid: str) -> None:
        doomed = self.doomed_victims
        doomed.add(uid)
        if len(doomed) > DOOMED_VICTIMS_KEPT:
            still = self.handle.snapshot.pods   # forget the ones the cache no longer holds
            self.doomed_victims = {u for u in doomed if u in still}

    def terminating(self, victim: PodInfo) -> bool:
        """The pod is leaving because a preemption chose it (ours, or another scheduler's as its
        DisruptionTarget condition says)."""
        return (victim.deleting and victim.preempted_by_scheduler) or victim.uid in self.doomed_victims


class PreemptionError(RuntimeError):
    """An extender's preemption answer could not be used."""


def random_offset(num_nodes: int, rng: random.Random | None = None) -> int:
    """``rand.Int31n(numNodes)``."""
    return (rng or random).randrange(num_nodes) if num_nodes > 0 else 0
