"""Preemption for a pod group (kube-scheduler 1.37's ``PodGroupEvaluator``, GenericWorkload): when
the pod-group cycle finds no placement for a ``scheduling.k8s.io`` PodGroup, DefaultPreemption's
PodGroupPostFilter looks for lower-priority victims across the whole cluster.

1. Eligibility: the group's preemption policy (the PodGroup's ``preemptionPolicy`` with
   PodGroupPreemptionPolicy, else ``Never`` when a member says so) must not be ``Never``.
2. Ongoing preemption: a member's nominated node holds a lower-priority pod that is leaving
   because of a preemption - the group waits for it (Success, the members keep their nominations).
3. The domain is the cluster: every pod of a priority lower than the PodGroup's is a possible
   victim (a whole all-mode gang as one, ``gang_victims``). All are taken off the snapshot
   (what-if moves) and the group's own placement algorithm runs again (``feasibility``: the
   cycle's, every assumption taken back); if the group still does not fit, that is the answer.
4. The members that fitted keep their nodes. The victims, PDB-violating ones first, each most
   important first, are put back one at a time: each member is filtered on its node (nominated
   pods counted) and, if it passes, counted there and reserved so that the next member sees it;
   a victim the members do not all fit beside stays a victim. Then pysched's rule: a gang is
   never left below its minimum (``gang_victims``). Every move is undone before returning.
Which pods are victims, and what else must hold beside the members' filters, is the plugin's
(``GroupVictimRules``): DefaultPreemption's are above; CapacityScheduling's reclaim borrowed quota
(``capacity_scheduling.group_reclaim``) on the same steps.

5. The victims are preempted as a single pod's are (``Evaluator.prepare_candidate_async``:
   candidate ``cluster``, ``DisruptionTarget``, delete, ``Preempted by podgroup <uid> on node
   cluster``), the members are held back from activeQ until the last delete went out, and each
   member that fitted is nominated to its node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pysched.framework.cycle_state import CycleState
from pysched.framework.gang_victims import GangIndex, Victim, VictimSelection
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.podinfo import PodInfo
from pysched.framework.preemption import Candidate, Evaluator, GroupPreemptor
from pysched.framework.status import Code, Status
from pysched.util.logs import kv

log = logging.getLogger("pysched.framework.preemption")

NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
ONGOING = "ongoing preemption on nominated nodes"
NO_VICTIMS_FOR_GROUP = "No preemption victims found for incoming preemptor"
POD_GROUP_PREEMPTION_POLICY = "PodGroupPreemptionPolicy"
CLUSTER = "cluster"


@dataclass
class Assignment:
    """A member the feasibility run placed (``ProposedAssignment``)."""
    pod: PodInfo
    node: str
    state: CycleState


# Runs the group's placement algorithm on the snapshot as it is: its status, and a node for every
# member that got one (all its assumptions undone).
Feasibility = Callable[[], tuple[Status, list[Assignment]]]


@dataclass
class PodGroupPostFilterResult:
    """``NominatingInfos``: member uid -> its nominated node from now on ("" clears it)."""
    nominating: dict[str, str] = field(default_factory=dict)
    victims: tuple[str, ...] = ()


def preemption_policy(pg: WorkloadPodGroup, members: Sequence[PodInfo], gates: frozenset[str]) -> str:
    """``resolvePreemptionPolicy``."""
    if POD_GROUP_PREEMPTION_POLICY in gates:
        return pg.preemption_policy or "PreemptLowerPriority"
    if any(p.preemption_policy == "Never" for p in members):
        return "Never"
    return "PreemptLowerPriority"


class GroupVictimRules:
    """Which pods a pod group's preemption may take and what must hold besides the members'
    filters; these are DefaultPreemption's (every pod of a lower priority than the group's, a whole
    all-mode gang as one). A plugin with other rules (CapacityScheduling) overrides them."""

    def __init__(self, evaluator: Evaluator, pg: WorkloadPodGroup, members: Sequence[PodInfo]):
        self.ev = evaluator
        self.pg = pg
        self.members = members
        # scheduler-plugins' PodGroups have no priority of their own: the members' (validated equal)
        self.priority = pg.priority if pg.priority is not None else (members[0].priority if members else 0)

    def leaving_victim(self, index: GangIndex, pod: PodInfo) -> bool:
        """``pod`` is leaving because of a preemption and the group could be waiting for it."""
        return index.priority_of(pod) < self.priority and self.ev.terminating(pod)

    def victims(self, index: GangIndex, pods: Sequence[PodInfo]) -> list[Victim]:
        return index.victims(pods, self.priority)

    def take_out(self, pod: PodInfo) -> None:
        """A victim leaves the what-if snapshot (the plugin's own accounting follows it)."""

    def put_back(self, pod: PodInfo) -> None:
        """A victim is back in the what-if snapshot."""

    def holds(self) -> bool:
        """Beside the members' filters, with the members reserved on their nodes: may they stay?"""
        return True


class PodGroupEvaluator:
    """DefaultPreemption's preemption for a pod group, on the plugin's ``Evaluator`` (its PDBs,
    its record of victims being preempted, its background eviction). ``rules``: another plugin's
    victims (default: DefaultPreemption's, ``GroupVictimRules``)."""

    def __init__(self, evaluator: Evaluator,
                 rules: Callable[[Evaluator, WorkloadPodGroup, Sequence[PodInfo]], GroupVictimRules] | None = None):
        self.ev = evaluator
        self.handle = evaluator.handle
        self.rules = rules or GroupVictimRules

    def preempt(self, pg: WorkloadPodGroup, pg_uid: str, members: Sequence[PodInfo],
                feasibility: Feasibility) -> tuple[PodGroupPostFilterResult | None, Status]:
        handle = self.handle
        nodes = handle.snapshot.nodes
        pods = [p for info in nodes.values() for p in info.pods.values()]
        index = GangIndex(pods, handle.objects, workloads=True)
        rules = self.rules(self.ev, pg, members)
        priority = rules.priority
        if preemption_policy(pg, members, handle.feature_gates) == "Never":
            return None, Status(Code.UNSCHEDULABLE, NOT_ELIGIBLE_NEVER)
        nominated = {uid: node for uid, node in ((p.uid, self._nominated(p)) for p in members)}
        for node in set(nominated.values()):
            info = nodes.get(node) if node else None
            if info is not None and any(rules.leaving_victim(index, p) for p in info.pods.values()):
                return PodGroupPostFilterResult(dict(nominated)), Status(Code.SUCCESS, ONGOING)
        victims = rules.victims(index, pods)
        if not victims:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS_FOR_GROUP)
        pdbs = self.ev.pdbs()
        fwk: Any = handle.framework
        assert fwk is not None
        moves = handle.snapshot.what_if()

        def take_out(p: PodInfo) -> None:
            moves.remove(p)
            rules.take_out(p)

        def put_back(p: PodInfo) -> None:
            moves.add(p)
            rules.put_back(p)

        try:
            for v in victims:
                for p in v.pods:
                    take_out(p)
            st, assignments = feasibility()
            if not st.is_success():
                return None, st
            valid = [a for a in assignments if a.node]

            def fits() -> bool:
                placed = handle.snapshot.what_if()
                reserved: list[tuple[Assignment, PodInfo]] = []
                try:
                    for a in valid:
                        if fwk.filter_with_nominated(a.state, a.pod, a.node, simulated=True) is not None:
                            return False
                        on_node = a.pod.with_node(a.node)
                        placed.add(on_node)
                        fwk.run_reserve(a.state, on_node, a.node)
                        reserved.append((a, on_node))
                    return rules.holds()
                finally:
                    for a, on_node in reversed(reserved):
                        fwk.run_unreserve(a.state, on_node, a.node)
                    placed.restore()

            selection = VictimSelection(victims, pdbs, put_back, take_out, fits)
            chosen = selection.select()
        finally:
            moves.restore()
        victim_pods = [p for v in chosen for p in v.pods]
        log.info("found a placement for a pod group by preemption", extra=kv(
            pod_group=pg.key, victims=",".join(p.key for p in victim_pods),
            whole_gangs=",".join(g.key for g in selection.expanded)))
        preemptor = GroupPreemptor(pg_uid, pg.key, members[0].scheduler_name if members else "", priority,
                                   tuple(p.uid for p in members))
        self.ev.prepare_candidate_async(Candidate(CLUSTER, victim_pods, selection.num_pdb_violations), preemptor)
        result = PodGroupPostFilterResult({a.pod.uid: a.node for a in valid}, tuple(p.key for p in victim_pods))
        return result, Status(Code.SUCCESS, f"found a placement for podgroup, preempting {len(victim_pods)} victims")

    def _nominated(self, pod: PodInfo) -> str:
        nom = self.handle.nominator
        return pod.nominated_node or (nom.nominated_node(pod.uid) if nom else "")
