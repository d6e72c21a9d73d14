"""The pod-group cycle for a tree of CompositePodGroups (``scheduling.k8s.io/v1alpha3``, the alpha
CompositePodGroup gate), as kube-scheduler 1.37's ``runRootSchedulingAlgorithm`` runs a root
CompositePodGroup.

A member of a PodGroup with a parent is scheduled with its whole tree: every pending member of
every leaf PodGroup the queue holds is taken, the tree is validated as one group (one
schedulerName, the root's priority, one preemption policy), then placed recursively:

* A CompositePodGroup is tried on each placement its PlacementGenerate plugin makes of its parent's
  placement (TopologyPlacementGenerator: one per domain of its topology key, its subtree's members
  already scheduled holding it to theirs; without a key, the parent placement). On each, its
  children are placed one after the other, each inside it - a leaf PodGroup by the ordinary
  placement algorithm (``PodGroupCycle._group_algorithm``), its best placement then assumed so the
  next child sees it. GangScheduling's PlacementFeasible counts the children placed against
  ``minGroupCount`` and stops as soon as it is out of reach. The placements the subtree fits in
  are scored (every placed member of its successful leaves) and the best one's leaves assumed.
* Failures flow down: a child whose parent failed takes the parent's status (the same status: a
  verdict appended to it later is appended once per holder), a member never tried gets its leaf's.
* A root that fails runs PodGroupPostFilter for the whole tree (its verdict appended to every
  result); then each leaf PodGroup is submitted as one group would be: its members bound or failed,
  its ``PodGroupInitiallyScheduled`` condition written. CompositePodGroups get no status.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pysched.backend.queue.scheduling_queue import QueuedPodInfo
from pysched.framework import Code, CycleState, FrameworkError, PodGroupCycleInfo, PodInfo, Status
from pysched.framework.interface import NodeBatch, Placement
from pysched.framework.podgroup_preemption import Assignment
from pysched.framework.podgroups import COMPOSITE_PODGROUPS, GroupTree, PodGroupSource
from pysched.schedule_one_podgroup import (
    POD_GROUP_UNSCHEDULABLE,
    GroupResult,
    GroupStatus,
    MemberResult,
    member_order,
    unschedulable,
    validate_group,
)
from pysched.util.logs import kv

if TYPE_CHECKING:
    from pysched.runtime.framework import Framework
    from pysched.schedule_one import Scheduler

Reverts = list[tuple[CycleState, PodInfo, str]]


@dataclass
class TreeAttempt:
    """One attempt of a tree: its members per leaf (in the order tried) and every node's result."""

    sched: Scheduler
    fwk: Framework
    gang: PodGroupSource
    root: GroupTree
    members: dict[str, list[QueuedPodInfo]]
    results: dict[str, GroupResult] = field(default_factory=dict)

    # -- helpers --------------------------------------------------------------------------------

    def scheduled(self, node: GroupTree) -> list[PodInfo]:
        return [p for leaf in node.leaves() for p in self.gang.cycle_members(leaf.key)
                if self.gang.cycle_is_scheduled(p)]

    def pending(self, node: GroupTree) -> list[QueuedPodInfo]:
        return [q for leaf in node.leaves() for q in self.members.get(leaf.key, ())]

    def info(self, node: GroupTree) -> PodGroupCycleInfo:
        return PodGroupCycleInfo(node.group, self.scheduled(node), [q.pod for q in self.pending(node)])

    def assume(self, result: GroupResult, reverts: Reverts) -> None:
        """Assume and reserve the placed members of a leaf (``assumeSubtreeWithRevert``)."""
        for m in result.members:
            if m.host is None or m.state is None:
                continue
            a = self.sched.cache.assume(m.qpi.pod, m.host)
            st = self.fwk.run_reserve(m.state, a, m.host)
            if st is not None and not st.is_success():
                self.fwk.run_unreserve(m.state, a, m.host)
                self.sched.cache.forget(a)
                raise FrameworkError(Status(Code.ERROR, f"failed to assume the subtree: {st.message()}"))
            reverts.append((m.state, a, m.host))

    def revert(self, reverts: Reverts) -> None:
        for state, a, host in reversed(reverts):
            self.fwk.run_unreserve(state, a, host)
            self.sched.cache.forget(a)
        reverts.clear()

    def successful_leaves(self, node: GroupTree, results: dict[str, GroupResult]) -> list[GroupResult]:
        """``successfulLeafResults``: the leaves under ``node`` whose every ancestor succeeded."""
        r = results.get(node.key)
        if r is None or not r.status.is_success():
            return []
        if node.composite is None:
            return [r] if r.members else []
        return [leaf for c in node.children for leaf in self.successful_leaves(c, results)]

    # -- the algorithm ----------------------------------------------------------------------------

    def run(self) -> GroupResult:
        """``runRootSchedulingAlgorithm`` for a root CompositePodGroup: every assumption taken back."""
        reverts: Reverts = []
        table = self.sched.cache.table
        try:
            root = self.composite(self.root, Placement("", table.order()), self.results, reverts)
        except FrameworkError as exc:
            root = GroupResult(GroupStatus(Code.ERROR, [exc.status.message()]), [])
            self.results[self.root.key] = root
        finally:
            self.revert(reverts)
        if root.status.is_success() and not root.any_scheduled:
            root.status = unschedulable()
        return root

    def leaf(self, node: GroupTree, parent: Placement, reverts: Reverts) -> GroupResult:
        pg = node.podgroup
        assert pg is not None
        members = self.members.get(node.key, [])
        info = PodGroupCycleInfo(pg, self.scheduled(node), [q.pod for q in members])
        result: GroupResult = self.sched._group_algorithm(self.fwk, self.gang, pg, info, members, parent)
        if result.status.is_success():
            self.assume(result, reverts)
        return result

    def composite(self, node: GroupTree, parent: Placement, results: dict[str, GroupResult],
                  reverts: Reverts) -> GroupResult:
        """``compositePodGroupSchedulingPlacementAlgorithm``."""
        info = self.info(node)
        placements = [parent]
        if self.fwk.placement_generate:
            placements = self.fwk.placement_generate[0].generate_placements(
                info, parent, NodeBatch(self.sched.cache.table, parent.slots))
        if not placements:
            out = GroupResult(GroupStatus(Code.UNSCHEDULABLE, ["no feasible placements found"]), [])
            results[node.key] = out
            return out
        first: dict[str, GroupResult] | None = None
        fits: list[tuple[Placement, dict[str, GroupResult]]] = []
        for tier in sorted({p.tier for p in placements}):
            for placement in placements:
                if placement.tier != tier:
                    continue
                subtree: dict[str, GroupResult] = {}
                trial: Reverts = []
                try:
                    result = self.default(node, placement, subtree, trial)
                finally:
                    self.revert(trial)
                if result.status.code == Code.ERROR:
                    results[node.key] = result
                    return result
                first = first if first is not None else subtree
                if result.status.is_success():
                    fits.append((placement, subtree))
            if fits:
                break
        if not fits:
            assert first is not None
            out = first[node.key]
            out.status = unschedulable(f"0/{len(placements)} placements are available, first placement status: "
                                       f"{out.status.error_text()}")
            results.update(first)
            return out
        placement, best = fits[0] if len(fits) == 1 else self.best(node, info, fits)
        for leaf in self.successful_leaves(node, best):
            self.assume(leaf, reverts)
        results.update(best)
        out = best[node.key]
        out.placement = placement
        return out

    def best(self, node: GroupTree, info: PodGroupCycleInfo,
             fits: list[tuple[Placement, dict[str, GroupResult]]]) -> tuple[Placement, dict[str, GroupResult]]:
        """The best placement of a subtree (PlacementScore over every placed member of its leaves)."""
        combined = [GroupResult(GroupStatus(Code.SUCCESS),
                                [m for leaf in self.successful_leaves(node, subtree) for m in leaf.members],
                                placement) for placement, subtree in fits]
        chosen = self.sched._best_placement(self.fwk, info, combined, [])
        return fits[combined.index(chosen)]

    def default(self, node: GroupTree, placement: Placement, results: dict[str, GroupResult],
                reverts: Reverts) -> GroupResult:
        """``compositePodGroupSchedulingDefaultAlgorithm``: the children one after the other."""
        cpg = node.composite
        assert cpg is not None
        remaining, scheduled = len(node.children), 0
        st = self.gang.placement_feasible(cpg, scheduled, remaining)
        out = GroupResult(GroupStatus.of(st), [], placement)
        results[node.key] = out
        if st is not None and st.code in (Code.UNSCHEDULABLE, Code.ERROR):
            return out
        any_scheduled = False
        try:
            for c in node.children:
                if c.composite is None:
                    r = self.leaf(c, placement, reverts)
                    results[c.key] = r
                else:
                    r = self.composite(c, placement, results, reverts)
                if r.status.code == Code.ERROR:
                    out.status = GroupStatus(Code.ERROR, ["composite pod group evaluation failed due to child "
                                                          f"error: {r.status.error_text()}"])
                    return out
                any_scheduled = any_scheduled or r.any_scheduled
                remaining -= 1
                scheduled += 1 if r.status.is_success() else 0
                st = self.gang.placement_feasible(cpg, scheduled, remaining)
                if st is not None and st.code in (Code.UNSCHEDULABLE, Code.ERROR):
                    break
            if st is not None and st.code == Code.WAIT:
                out.status = GroupStatus(Code.UNSCHEDULABLE, [st.message()], POD_GROUP_UNSCHEDULABLE)
            else:
                out.status = GroupStatus.of(st)
            out.any_scheduled = any_scheduled
            return out
        finally:
            if not out.status.is_success():
                self.revert(reverts)
                out.any_scheduled = False

    # -- completing the results -------------------------------------------------------------------

    def complete(self, node: GroupTree, parent: GroupResult) -> None:
        """``completeCompositePodGroupAlgorithmResultMap`` and, per leaf, every member given a result."""
        r = self.results.get(node.key)
        if r is None or (not parent.status.is_success() and r.status.is_success()):
            r = GroupResult(parent.status, [])   # the parent's status itself, not a copy
            self.results[node.key] = r
        for c in node.children:
            self.complete(c, r)
        if node.composite is None:
            for m in r.members:
                if not m.tried and m.status is None:
                    m.status = Status(r.status.code, r.status.message())
            have = {m.qpi.pod.uid for m in r.members}
            for q in self.members.get(node.key, ()):
                if q.pod.uid not in have:
                    r.members.append(MemberResult(q, status=Status(r.status.code, r.status.message())))
            order = {q.pod.uid: i for i, q in enumerate(self.members.get(node.key, ()))}
            r.members.sort(key=lambda m: order.get(m.qpi.pod.uid, len(order)))

    def post_filter(self, root: GroupResult) -> None:
        """PodGroupPostFilter for the root (DefaultPreemption for the whole tree); its verdict is
        appended to every result (``applyPodGroupPostFilterResult``), an Error replaces them."""
        plugin = self.fwk.plugins.get("DefaultPreemption")
        run = getattr(plugin, "pod_group_post_filter", None)
        if run is None:
            return
        cpg = self.root.composite
        assert cpg is not None
        objects = self.fwk.handle.objects
        obj = objects.get(COMPOSITE_PODGROUPS, cpg.key) if objects is not None else None
        uid = ((obj or {}).get("metadata") or {}).get("uid") or cpg.key
        pods = [q.pod for q in self.pending(self.root)]

        def feasibility() -> tuple[Status, list[Assignment]]:
            again = TreeAttempt(self.sched, self.fwk, self.gang, self.root, self.members)
            r = again.run()
            assignments = [Assignment(m.qpi.pod, m.host, m.state) for leaf in again.successful_leaves(
                self.root, again.results) for m in leaf.members if m.host and m.state is not None]
            return Status(r.status.code, r.status.message()), assignments

        post, st = run(cpg, uid, pods, feasibility)
        holders = [r.status for r in self.results.values()]
        if st.code == Code.SUCCESS:
            for r in self.results.values():
                r.waiting_on_preemption = True
                if r.members:
                    r.nominating = dict(post.nominating) if post is not None else {}
        if st.code == Code.ERROR:
            for r in self.results.values():
                r.status = GroupStatus(Code.ERROR, [st.message()])
            return
        for s in holders:   # a status held by two results gets the verdict twice, as upstream's
            s.reasons.append(st.message())


def schedule_tree(sched: Scheduler, first: QueuedPodInfo, gang: PodGroupSource, root: GroupTree) -> None:
    """The pod-group cycle of ``root``'s tree, ``first`` (a member of one of its leaves) popped."""
    fwk: Framework = sched.frameworks[first.pod.scheduler_name]
    start = time.perf_counter()
    taken: dict[str, list[QueuedPodInfo]] = {}
    for leaf in root.leaves():
        for pod in list(gang.cycle_members(leaf.key)):
            if gang.cycle_is_scheduled(pod):
                continue
            q = first if pod.uid == first.pod.uid else sched.take_member(pod.uid)
            if q is not None:
                taken.setdefault(leaf.key, []).append(q)
    if not any(q is first for qs in taken.values() for q in qs):
        taken.setdefault(gang.cycle_group_key(first.pod), []).append(first)
    members = {k: sorted((q for q in qs if sched._still_to_schedule(fwk, q, start)), key=member_order)
               for k, qs in taken.items()}
    members = {k: qs for k, qs in members.items() if qs}
    if not members:
        return
    attempt = TreeAttempt(sched, fwk, gang, root, members)
    pending = [q.pod for qs in members.values() for q in qs]
    scheduled = attempt.scheduled(root)
    problem = validate_group(root.group, pending, scheduled)   # type: ignore[arg-type]
    if problem:
        for leaf in root.leaves():
            assert leaf.podgroup is not None
            sched._group_failed(fwk, members.get(leaf.key, []), GroupStatus(Code.ERROR, [problem]), start,
                                leaf.podgroup, gang)
        return
    result = attempt.run()
    attempt.complete(root, GroupResult(GroupStatus(Code.SUCCESS), []))
    if result.status.code == Code.UNSCHEDULABLE:
        attempt.post_filter(result)
    for leaf in root.leaves():
        r = attempt.results[leaf.key]
        assert leaf.podgroup is not None
        r.untried = None
        _submit_leaf(sched, fwk, leaf, r, start, gang, result.status.is_success())
    from pysched.schedule_one_podgroup import log
    log.debug("attempted a composite pod group", extra=kv(root=root.key, status=result.status.message()))


def _submit_leaf(sched: Any, fwk: Framework, leaf: GroupTree, result: GroupResult, start: float,
                 gang: PodGroupSource, root_fits: bool) -> None:
    """One leaf's outcome, as a pod group's (``PodGroupCycle._submit``)."""
    assert leaf.podgroup is not None
    sched._submit(fwk, leaf.podgroup, result, start, gang, root_fits)
