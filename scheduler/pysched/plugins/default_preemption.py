"""DefaultPreemption (PostFilter): evict lower-priority pods so that a pod no node fits can run.

kube-scheduler 1.35's ``defaultpreemption`` plugin on our ``framework.preemption.Evaluator``:

* eligibility: ``preemptionPolicy: Never`` never preempts ("not eligible due to
  preemptionPolicy=Never."); a pod already nominated to a node where a lower-priority victim is
  terminating because of a preemption waits for it ("not eligible due to a terminating pod on the
  nominated node."), unless that node became UnschedulableAndUnresolvable;
* candidates: ``minCandidateNodesPercentage`` (default 10) of the nodes whose filter status was
  Unschedulable, at least ``minCandidateNodesAbsolute`` (default 100), from a random offset;
* victims on a node: every pod of lower priority is removed; if the pod then passes the filters
  (nominated pods counted, as in the scheduling cycle), victims are reprieved one by one - those
  whose eviction would violate a PodDisruptionBudget first, then the others, each group most
  important first - as long as the pod still fits.

Messages are upstream's, prefixed ``preemption: `` (they end the FailedScheduling message).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    Handle,
    NodeInfo,
    PodInfo,
    PostFilterPlugin,
    PostFilterResult,
    Status,
    arg,
)
from pysched.framework.api import ConfigError
from pysched.framework.gang_victims import SCHEDULER_PLUGINS_LABEL, GangIndex, VictimSelection
from pysched.framework.interface import OverlayBatch
from pysched.framework.podgroup_preemption import Feasibility, PodGroupEvaluator, PodGroupPostFilterResult
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.preemption import NO_VICTIMS, PDB, Evaluator, importance, split_by_pdb
from pysched.framework.status import Code, Diagnosis

NAME = "DefaultPreemption"
# Shared by every node without lower-priority pods (read-only: only counted into the message).
_NO_VICTIMS = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)


@dataclass
class DefaultPreemptionArgs:
    KIND: ClassVar[str] = "DefaultPreemptionArgs"
    min_candidate_nodes_percentage: int = field(default=10, metadata=arg(bits=32))
    min_candidate_nodes_absolute: int = field(default=100, metadata=arg(bits=32))

    def validate(self, path: str) -> None:
        """``ValidateDefaultPreemptionArgs``: upstream's field paths and messages."""
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        pct_path, abs_path = f"{path}.minCandidateNodesPercentage", f"{path}.minCandidateNodesAbsolute"
        errs = []
        if pct < 0 or pct > 100:
            errs.append(f"{pct_path}: Invalid value: {pct}: not in valid range [0, 100]")
        if absolute < 0:
            errs.append(f"{abs_path}: Invalid value: {absolute}: not in valid range [0, inf)")
        if pct == 0 and absolute == 0:
            errs.append(f"{pct_path}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
            errs.append(f"{abs_path}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage")
        if len(errs) == 1:
            raise ConfigError(errs[0])
        if errs:
            raise ConfigError(f"[{', '.join(errs)}]")


class DefaultPreemption(PostFilterPlugin[DefaultPreemptionArgs], EnqueueExtensions):
    name = NAME
    args: DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.rng = random.Random()
        self.evaluator = Evaluator(NAME, handle, self)
        self._gangs: tuple[CycleState, GangIndex] | None = None

    # -- PostFilter -------------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        return self._prefixed(*self.evaluator.preempt(state, pod, diagnosis))

    async def post_filter_async(self, state: CycleState, pod: PodInfo,
                                diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """PostFilter when extenders may take part (``preemptVerb``)."""
        return self._prefixed(*await self.evaluator.preempt_async(state, pod, diagnosis))

    def pod_group_post_filter(self, pg: WorkloadPodGroup, pg_uid: str, members: Sequence[PodInfo],
                              feasibility: Feasibility) -> tuple[PodGroupPostFilterResult | None, Status]:
        """PodGroupPostFilter: preemption for a pod group the pod-group cycle could not place
        (``framework.podgroup_preemption``); the message is prefixed ``pod group preemption: ``."""
        result, st = PodGroupEvaluator(self.evaluator).preempt(pg, pg_uid, members, feasibility)
        msg = st.message()
        return result, (Status(st.code, "pod group preemption: " + msg) if msg else st)

    @staticmethod
    def _prefixed(result: PostFilterResult | None, st: Status) -> tuple[PostFilterResult | None, Status | None]:
        msg = st.message()
        if msg:
            return result, Status(st.code, "preemption: " + msg)
        return result, st

    def is_running_preemption(self, uid: str) -> bool:
        """The pod's preemption is still under way: the queue holds it back from activeQ."""
        return self.evaluator.is_running_preemption(uid)

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # Upstream registers pod deletions with a hint that always skips: the plugins that
        # rejected the pod decide when it is worth retrying.
        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete"), lambda pod, old, new: False),)

    # -- preemption.PreemptionPolicy --------------------------------------------------------------

    def num_candidates(self, num_nodes: int) -> int:
        """``calculateNumCandidates``."""
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def offset_and_count(self, num_nodes: int) -> tuple[int, int]:
        return (self.rng.randrange(num_nodes) if num_nodes > 0 else 0), self.num_candidates(num_nodes)

    def pod_eligible(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        gates = self.handle.framework
        if gates is not None:
            blocked = gates.preemption_blocked(pod)
            if blocked:
                return False, blocked
        nom = self.handle.nominator
        # The nomination this scheduler made may not be back from the API yet (pod.nominated_node
        # is the informer's copy): the nominator knows it at once.
        nominated = pod.nominated_node or (nom.nominated_node(pod.uid) if nom else "")
        if nominated:
            if nominated_node_status is not None and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.snapshot.nodes.get(nominated)
            if info is not None:
                # A victim whose DELETE we sent counts as terminating before the informer shows it:
                # else a preemptor retried in that window would preempt again elsewhere.
                for p in info.pods.values():
                    if p.priority < pod.priority and self.evaluator.terminating(p):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def select_victims_on_paper(self, state: CycleState, pod: PodInfo, infos: Sequence[NodeInfo],
                                pdbs: Sequence[PDB]) -> list[tuple[list[PodInfo], int, Status | None]] | None:
        """``select_victims`` for many nodes at once, with the pods removed and reprieved on paper
        (``OverlayBatch``): each step runs the Filters once over every node still deciding, instead
        of once per node after moving pods in the cache. The same victims, in the same order, and
        the same statuses as node by node - valid only when ``Framework.on_paper`` says so; None
        when a pod cannot be counted on paper (the caller goes node by node)."""
        fwk = self.handle.framework
        assert fwk is not None
        table = self.handle.snapshot.table
        prio = pod.priority
        n = len(infos)
        width = table.req.shape[1]
        vectors: dict[str, Any] = {}

        def vec(p: PodInfo) -> Any:
            v = vectors.get(p.uid)
            if v is None:
                v = vectors[p.uid] = fwk.request_vector(p)
            return v

        results: list[tuple[list[PodInfo], int, Status | None]] = [([], 0, _NO_VICTIMS)] * n
        slots = np.array([info.slot for info in infos], dtype=np.int64)
        d_req = np.zeros((n, width), dtype=np.int64)
        d_pods = np.zeros(n, dtype=np.int64)
        nom_req = np.zeros((n, width), dtype=np.int64)
        nom_pods = np.zeros(n, dtype=np.int64)
        order: list[list[tuple[PodInfo, bool]]] = [[] for _ in range(n)]
        deciding: list[int] = []
        for i, info in enumerate(infos):
            potential = [p for p in info.pods.values() if p.priority < prio]
            if not potential:
                continue
            if any(in_gang(p) for p in potential):
                return None       # gangs go as units, possibly across nodes: node by node
            for p in potential:
                v = vec(p)
                if v is None:
                    return None
                d_req[i] -= v
                d_pods[i] -= 1
            for p in fwk.nominated_pods_to_add(pod, info.spec.name):
                v = vec(p)
                if v is None:
                    return None
                nom_req[i] += v
                nom_pods[i] += 1
            potential.sort(key=importance)
            violating, non_violating = split_by_pdb(potential, pdbs)
            order[i] = [(p, True) for p in violating] + [(p, False) for p in non_violating]
            deciding.append(i)
        has_nom = nom_pods > 0

        def judge(rows: list[int]) -> list[Status | None]:
            """filter_with_nominated on paper for ``rows``: with the nominated pods, then without."""
            idx = np.array(rows, dtype=np.int64)
            out = fwk.first_failures(state, pod, OverlayBatch(table, slots[idx], d_req[idx], d_pods[idx]))
            nom = idx[has_nom[idx]]
            if len(nom):
                with_nom = fwk.first_failures(state, pod, OverlayBatch(
                    table, slots[nom], d_req[nom] + nom_req[nom], d_pods[nom] + nom_pods[nom]))
                where = {int(r): st for r, st in zip(nom.tolist(), with_nom, strict=True) if st is not None}
                out = [where.get(r, st) for r, st in zip(rows, out, strict=True)]
            return out

        victims: dict[int, list[PodInfo]] = {}
        violations = dict.fromkeys(deciding, 0)
        if deciding:
            for i, st in zip(deciding, judge(deciding), strict=True):
                if st is not None:
                    results[i] = ([], 0, st)
                else:
                    victims[i] = []
        step = 0
        while True:
            rows = [i for i in victims if step < len(order[i])]
            if not rows:
                break
            for i in rows:
                p = order[i][step][0]
                d_req[i] += vec(p)
                d_pods[i] += 1
            for i, st in zip(rows, judge(rows), strict=True):
                if st is None:
                    continue
                if st.code == Code.ERROR:
                    results[i] = ([], 0, st)
                    del victims[i]
                    continue
                p, counts = order[i][step]
                d_req[i] -= vec(p)
                d_pods[i] -= 1
                victims[i].append(p)
                if counts:
                    violations[i] += 1
            step += 1
        for i, vs in victims.items():
            if any(c for _, c in order[i]) and any(not c for _, c in order[i]):
                vs.sort(key=importance)   # both groups present: as select_victims does
            results[i] = (vs, violations[i], None)
        return results

    def select_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                       pdbs: Sequence[PDB]) -> tuple[list[PodInfo], int, Status | None]:
        """``SelectVictimsOnNode``: the fewest lower-priority pods to evict from ``node`` so that
        ``pod`` passes the filters, and how many of them a PDB protects."""
        prio = pod.priority
        if any(in_gang(p) for p in node.pods.values()):
            return self.select_gang_victims(state, pod, node, pdbs)
        potential = [p for p in node.pods.values() if p.priority < prio]
        if not potential:
            return [], 0, _NO_VICTIMS
        fwk = self.handle.framework
        assert fwk is not None
        node_name = node.name
        moves = self.handle.snapshot.what_if()
        try:
            for p in potential:
                moves.remove(p)
            st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
            if st is not None:
                return [], 0, st
            potential.sort(key=importance)
            violating, non_violating = split_by_pdb(potential, pdbs)
            victims: list[PodInfo] = []
            num_violating = 0
            for group, counts in ((violating, True), (non_violating, False)):
                for p in group:
                    moves.add(p)
                    st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
                    if st is None:
                        continue
                    if st.code == Code.ERROR:
                        return [], 0, st
                    moves.remove(p)
                    victims.append(p)
                    if counts:
                        num_violating += 1
        finally:
            moves.restore()
        if violating and non_violating:
            victims.sort(key=importance)
        return victims, num_violating, None

    def gang_index(self, state: CycleState) -> GangIndex:
        """The gangs of the snapshot's pods, read once per preemption (the cycle's state)."""
        cached = self._gangs
        if cached is not None and cached[0] is state:
            return cached[1]
        index = GangIndex(self.handle.snapshot.pods.values(), self.handle.objects,
                          workloads=GENERIC_WORKLOAD in self.handle.feature_gates)
        self._gangs = (state, index)
        return index

    def select_gang_victims(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                            pdbs: Sequence[PDB]) -> tuple[list[PodInfo], int, Status | None]:
        """``select_victims`` when gang members run on ``node``: an all-mode gang is one victim,
        whole, wherever its pods are (upstream); a gang that keeps a minimum goes whole rather than
        below it (pysched's rule, ``gang_victims``)."""
        victims = self.gang_index(state).victims(node.pods.values(), pod.priority)
        if not victims:
            return [], 0, _NO_VICTIMS
        fwk = self.handle.framework
        assert fwk is not None
        node_name = node.name
        moves = self.handle.snapshot.what_if()

        def fits() -> bool:
            st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
            if st is not None and st.code == Code.ERROR:
                raise _FilterError(st)
            return st is None

        try:
            for v in victims:
                for p in v.pods:
                    moves.remove(p)
            st = fwk.filter_with_nominated(state, pod, node_name, simulated=True)
            if st is not None:
                return [], 0, st
            selection = VictimSelection(victims, pdbs, moves.add, moves.remove, fits)
            try:
                chosen = selection.select()
            except _FilterError as exc:
                return [], 0, exc.status
        finally:
            moves.restore()
        return [p for v in chosen for p in v.pods], selection.num_pdb_violations, None


GENERIC_WORKLOAD = "GenericWorkload"


def in_gang(pod: PodInfo) -> bool:
    """A member of a workload PodGroup or of a scheduler-plugins one (cheap: labels and spec only)."""
    return bool(pod.scheduling_group) or bool(pod.labels and SCHEDULER_PLUGINS_LABEL in pod.labels)


class _FilterError(Exception):
    def __init__(self, status: Status):
        super().__init__(status.message())
        self.status = status
