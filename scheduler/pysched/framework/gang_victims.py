"""Preemption victims that are gangs: which pods go together, in which order they are reprieved,
and pysched's rule that a preemption never leaves a gang below its minimum.

kube-scheduler 1.37 with GenericWorkload (``framework/preemption/types.go``, ``util.go``) builds
victims out of the pods a preemption may remove:

* a member of a ``scheduling.k8s.io`` PodGroup with ``disruptionMode: {all: {}}`` stands for the
  whole group: one victim made of every scheduled pod of that group, on whatever node (rank
  ``podgroup``, the PodGroup's priority);
* any other pod is a victim alone; a member of a single-mode PodGroup has the PodGroup's priority
  and rank ``podgroup``, a plain pod its own priority and rank ``pod``.

Victims are ordered most important first (``more_important``: priority, rank, number of pods,
earliest start), split by PodDisruptionBudgets (``split_by_pdb``: the violating ones are offered
the first reprieves) and reprieved one at a time as long as the preemptor still fits
(``VictimSelection``).

**pysched's rule beyond upstream** (on always; docs/gang-scheduling.md): a gang - a single-mode
workload PodGroup with ``gang.minCount``, or a scheduler-plugins PodGroup (pods labelled
``scheduling.x-k8s.io/pod-group``) with ``minMember`` - may lose members to a preemption only
while it keeps its minimum running. Once the reprieves leave more of its members victims than its
surplus (running members above the minimum), all its running members become victims, the other
victims get a second chance to be reprieved (the gang's room may be enough), and the gang goes
whole. A gang whose running members are not all of lower priority than the preemptor cannot go
whole: only its surplus may be taken (its members are no victims when there is none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pysched.framework.podgroups import WORKLOAD_PODGROUPS, group_key_of
from pysched.framework.podinfo import PodInfo
from pysched.framework.preemption import PDB, start_time

SCHEDULER_PLUGINS_PODGROUPS = "podgroups"            # scheduler-plugins' PodGroup CRD in the object store
SCHEDULER_PLUGINS_LABEL = "scheduling.x-k8s.io/pod-group"
RANK_POD = 1
RANK_PODGROUP = 2


@dataclass
class Gang:
    """A gang whose running members a preemption must not take below ``minimum``."""

    key: str                                  # "workload:ns/name" or "coscheduling:ns/name"
    minimum: int
    all_mode: bool = False                    # a workload PodGroup with disruptionMode all
    priority: int | None = None               # the workload PodGroup's priority (None: the pods' own)
    scheduled: list[PodInfo] = field(default_factory=list)   # its pods in the snapshot (terminating too)

    @property
    def running(self) -> list[PodInfo]:
        return [p for p in self.scheduled if not p.deleting]

    @property
    def surplus(self) -> int:
        return max(0, len(self.running) - self.minimum)


@dataclass
class Victim:
    """Pods that are evicted or kept together."""

    pods: list[PodInfo]
    priority: int
    rank: int
    gang: Gang | None = None                  # a member taken alone of a gang that keeps a minimum
    whole: bool = False                       # the whole gang (all mode, or pysched's rule)
    earliest: float = 0.0

    def __post_init__(self) -> None:
        if not self.earliest:
            self.earliest = min(start_time(p) for p in self.pods)

    @property
    def is_group(self) -> bool:
        return self.rank >= RANK_PODGROUP


def more_important(v: Victim) -> tuple[int, int, int, float]:
    """Sort key, most important first (``MoreImportantVictim``)."""
    return (-v.priority, -v.rank, -len(v.pods), v.earliest)


def _workload_podgroup(objects: Any, key: str) -> dict[str, Any] | None:
    return objects.get(WORKLOAD_PODGROUPS, key) if objects is not None and key else None


def workload_priority(pg: Mapping[str, Any]) -> int:
    """``util.PodGroupPriority``: ``spec.priority``, 0 when unset."""
    prio = (pg.get("spec") or {}).get("priority")
    return prio if isinstance(prio, int) else 0


def disruption_all(pg: Mapping[str, Any]) -> bool:
    mode = (pg.get("spec") or {}).get("disruptionMode") or {}
    return isinstance(mode, dict) and mode.get("all") is not None


class GangIndex:
    """The gangs of the pods in the snapshot, read once per preemption."""

    def __init__(self, pods: Iterable[PodInfo], objects: Any, *, workloads: bool):
        self.objects = objects
        self.workloads = workloads               # GenericWorkload: workload PodGroups are read
        self.gangs: dict[str, Gang] = {}
        self.gang_of: dict[str, Gang] = {}       # pod uid -> its gang
        self._none: set[str] = set()
        for p in pods:
            g = self._gang(p)
            if g is not None:
                g.scheduled.append(p)
                self.gang_of[p.uid] = g

    def _gang(self, pod: PodInfo) -> Gang | None:
        if pod.scheduling_group and self.workloads:
            key = "workload:" + group_key_of(pod)
            return self._lookup(key, lambda: self._workload(group_key_of(pod)))
        name = pod.labels.get(SCHEDULER_PLUGINS_LABEL) if pod.labels else None
        if name:
            key = f"coscheduling:{pod.namespace}/{name}"
            return self._lookup(key, lambda: self._coscheduling(f"{pod.namespace}/{name}"))
        return None

    def _lookup(self, key: str, make: Callable[[], Gang | None]) -> Gang | None:
        g = self.gangs.get(key)
        if g is not None or key in self._none:
            return g
        made = make()
        if made is None:
            self._none.add(key)
            return None
        made.key = key
        self.gangs[key] = made
        return made

    def _workload(self, key: str) -> Gang | None:
        pg = _workload_podgroup(self.objects, key)
        if pg is None:
            return None
        gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
        try:
            minimum = int((gang or {}).get("minCount") or 0) if isinstance(gang, dict) else 0
        except (TypeError, ValueError):
            minimum = 0
        return Gang("", minimum, disruption_all(pg), workload_priority(pg))

    def _coscheduling(self, key: str) -> Gang | None:
        obj = self.objects.get(SCHEDULER_PLUGINS_PODGROUPS, key) if self.objects is not None else None
        if obj is None:
            return None
        try:
            minimum = int((obj.get("spec") or {}).get("minMember") or 0)
        except (TypeError, ValueError):
            minimum = 0
        return Gang("", minimum)

    def priority_of(self, pod: PodInfo) -> int:
        """``GetPodPriority``: a workload member's is its PodGroup's."""
        g = self.gang_of.get(pod.uid)
        if g is not None and g.priority is not None:
            return g.priority
        if pod.scheduling_group and self.workloads:
            pg = _workload_podgroup(self.objects, group_key_of(pod))
            if pg is not None:
                return workload_priority(pg)
        return pod.priority

    def rank_of(self, pod: PodInfo) -> int:
        return RANK_PODGROUP if pod.scheduling_group and self.workloads else RANK_POD

    def victims(self, pods: Iterable[PodInfo], below: int) -> list[Victim]:
        """The victims ``pods`` make (a whole all-mode gang for any of its members), those of a
        priority lower than ``below`` only, each once."""
        out: list[Victim] = []
        seen: set[str] = set()
        for p in pods:
            g = self.gang_of.get(p.uid)
            if g is not None and g.all_mode:
                if g.key in seen:
                    continue
                seen.add(g.key)
                v = Victim(list(g.scheduled), self.priority_of(p), RANK_PODGROUP, whole=True)
            else:
                v = Victim([p], self.priority_of(p), self.rank_of(p))
                if g is not None and g.minimum > 0:
                    v.gang = g
            if v.priority < below:
                out.append(v)
        return self._keep_minimum(out, below)

    def _keep_minimum(self, victims: list[Victim], below: int) -> list[Victim]:
        """A gang that cannot go whole (a member of equal or higher priority than the preemptor)
        gives up at most its surplus: none of its members is a victim when there are more of them
        than that."""
        counts: dict[str, int] = {}
        for v in victims:
            if v.gang is not None:
                counts[v.gang.key] = counts.get(v.gang.key, 0) + 1
        blocked = {key for key, n in counts.items()
                   if n > self.gangs[key].surplus
                   and any(self.priority_of(p) >= below for p in self.gangs[key].running)}
        return [v for v in victims if v.gang is None or v.gang.key not in blocked]


def split_by_pdb(victims: Sequence[Victim], pdbs: Sequence[PDB]) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """``FilterVictimsWithPDBViolation`` (1.37): in the given order, each victim's pods use up the
    budgets of the PDBs selecting them (a pod in ``disruptedPods`` does not); a pod is violating
    once one budget goes below zero (the PDBs after that one are not charged for it). Returns the
    violating victims with their number of violating pods, and the others."""
    allowed = [p.disruptions_allowed for p in pdbs]

    def violates(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.selects(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    ok: list[Victim] = []
    for v in victims:
        n = sum(1 for p in v.pods if violates(p))
        if n:
            violating.append((v, n))
        else:
            ok.append(v)
    return violating, ok


class VictimSelection:
    """The reprieve loop, on a snapshot the caller has already taken every victim's pods off.

    ``put_back(pod)`` / ``take_out(pod)`` move one pod back onto / off its node (what-if moves);
    ``fits()`` tells whether the preemptor fits the snapshot as it is now. The victims offered a
    reprieve first are those violating a PDB, then the others, each most important first; a victim
    that the preemptor does not fit beside stays one. Then pysched's rule (module docstring).
    """

    def __init__(self, victims: Sequence[Victim], pdbs: Sequence[PDB], put_back: Callable[[PodInfo], None],
                 take_out: Callable[[PodInfo], None], fits: Callable[[], bool]):
        self.victims = sorted(victims, key=more_important)
        self.pdbs = pdbs
        self._put_back = put_back
        self._take_out = take_out
        self.fits = fits
        self.removed: set[str] = {p.uid for v in self.victims for p in v.pods}
        self.num_pdb_violations = 0
        self.expanded: list[Gang] = []

    def put_back(self, v: Victim) -> None:
        for p in v.pods:
            if p.uid in self.removed:
                self._put_back(p)
                self.removed.discard(p.uid)

    def take_out(self, v: Victim) -> None:
        for p in v.pods:
            if p.uid not in self.removed:
                self._take_out(p)
                self.removed.add(p.uid)

    def _offer(self, v: Victim) -> bool:
        """Reprieve ``v`` if the preemptor still fits; True when it did."""
        self.put_back(v)
        if self.fits():
            return True
        self.take_out(v)
        return False

    def select(self) -> list[Victim]:
        violating, non_violating = split_by_pdb(self.victims, self.pdbs)
        chosen: list[tuple[Victim, int]] = []
        for v, n in [*violating, *((v, 0) for v in non_violating)]:
            if not self._offer(v):
                chosen.append((v, n))
        chosen = self._whole_gangs(chosen)
        self.num_pdb_violations = sum(n for _, n in chosen)
        return sorted((v for v, _ in chosen), key=more_important)

    def _whole_gangs(self, chosen: list[tuple[Victim, int]]) -> list[tuple[Victim, int]]:
        taken: dict[str, list[Victim]] = {}
        for v, _ in chosen:
            if v.gang is not None:
                taken.setdefault(v.gang.key, []).append(v)
        broken = [vs[0].gang for vs in taken.values() if vs[0].gang is not None and len(vs) > vs[0].gang.surplus]
        if not broken:
            return chosen
        keys = {g.key for g in broken}
        rest: list[tuple[Victim, int]] = [(v, n) for v, n in chosen if v.gang is None or v.gang.key not in keys]
        wholes: list[tuple[Victim, Gang]] = []
        for g in broken:
            members = [(v, n) for v, n in chosen if v.gang is g]
            whole = Victim(list(g.scheduled), members[0][0].priority, RANK_PODGROUP, whole=True)
            self.take_out(whole)
            wholes.append((whole, g))
        # Second chance, whole gangs first (most important first): the reprieve above went member by
        # member and may have kept some members of every gang, so each broken gang is offered back
        # whole - as many gangs as the preemptor leaves room for stay; then the other victims, which
        # the gangs gone whole may have made unnecessary.
        gone: list[Victim] = []
        for whole, g in sorted(wholes, key=lambda w: more_important(w[0])):
            if not self._offer(whole):
                gone.append(whole)
                self.expanded.append(g)
        kept = [v for v, _ in rest if not self._offer(v)] + gone
        # The PDB violations of the set that goes, counted afresh (the whole gangs' pods were not
        # all classified before the reprieves).
        violating, _ = split_by_pdb(sorted(kept, key=more_important), self.pdbs)
        counts = {id(v): n for v, n in violating}
        return [(v, counts.get(id(v), 0)) for v in kept]
