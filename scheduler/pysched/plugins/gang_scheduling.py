"""GangScheduling: Kubernetes' own gangs (``scheduling.k8s.io/v1beta1`` PodGroups, GenericWorkload).

A pod names its group with ``spec.schedulingGroup.podGroupName``. As kube-scheduler 1.37's plugin:

* PreEnqueue holds a member until its PodGroup exists (``waiting for pods's pod group "<name>" to
  appear in scheduling queue``) and, for a gang, until the scheduler knows ``minCount`` of its pods
  (``waiting for minCount pods from a gang to appear in scheduling queue``). Both are
  UnschedulableAndUnresolvable: the pod waits in the unschedulable pool, with no Event and no status
  of its own, as upstream; pysched adds a ``WaitingForMembers`` Event on the PodGroup (``waiting
  for minCount pods: fewer than 3 of the group's pods exist``).
* PlacementFeasible (the pod-group cycle, ``schedule_one_podgroup``) judges a placement as its
  members are tried: ``minCount (M) cannot be satisfied: S scheduled, R remaining`` once the
  members left cannot reach ``minCount``; ``minCount (M) is not yet satisfied: ...`` while they
  still can.
* Permit makes a member wait (5 minutes) until ``minCount`` members are scheduled (assumed or
  bound), then allows every waiting one. The pod-group cycle assumes the whole group before the
  first Permit, so a gang placed in one cycle never waits; the wait only holds a member whose
  siblings were placed in earlier cycles.
* Events: a member's arrival (or its PodGroup's) releases the members PreEnqueue held - counted
  here as the pods arrive (``PodGroupStates``), not by scanning the pool on every pod - and a
  PodGroup added or whose ``minCount`` went down requeues its members.

With the CompositePodGroup gate (``scheduling.k8s.io/v1alpha3`` CompositePodGroups, whose
children are PodGroups naming them in ``spec.parentCompositePodGroupName``, or other
CompositePodGroups), a PodGroup with a parent belongs to a tree scheduled whole from its root
(``cycle_tree``; ``schedule_composite_podgroup``), and as upstream's ``*WithHierarchies``:

* PreEnqueue holds a member of such a PodGroup until the whole tree is ready: a PodGroup is ready
  with ``minCount`` pods known (1 for a basic one), a CompositePodGroup with ``minGroupCount`` ready
  children (1 for a basic one) - ``waiting for composite pod group "<root>" tree to meet quorum``;
  a CompositePodGroup missing on the way holds it too (``failed to build hierarchy snapshot: ...``).
* Permit makes such a member wait until the tree is ready counting scheduled pods, then allows every
  waiting member of the tree.
* PlacementFeasible counts a CompositePodGroup's children placed against ``minGroupCount``.
* A pod, PodGroup or CompositePodGroup arriving in a tree runs PreEnqueue again for the tree's
  held members.

The engine runs the pod-group cycle only for members of a group whose PodGroup it reads; a pod
that names a group with this plugin disabled is scheduled on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    PermitPlugin,
    PodInfo,
    PodWatcher,
    PreEnqueuePlugin,
    Status,
)
from pysched.framework.podgroups import (
    API_VERSION,
    COMPOSITE_GATE,
    COMPOSITE_PODGROUPS,
    WORKLOAD_PODGROUPS,
    CompositePodGroup,
    GroupTree,
    ObjectRef,
    PodGroupHierarchy,
    PodGroupStates,
    WorkloadPodGroup,
    group_key_of,
    placement_feasibility,
)

NAME = "GangScheduling"
PERMIT_TIMEOUT_SECONDS = 300.0
WAITING_FOR_GANG = "waiting for minCount pods from a gang to appear in scheduling queue"


def waiting_for_group(name: str) -> str:
    return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


def waiting_for_tree(root: str) -> str:
    return f'waiting for composite pod group "{root}" tree to meet quorum'


# PlacementFeasible's verdict (shared with Coscheduling's, which says minMember).
feasibility = placement_feasibility


class GangScheduling(PreEnqueuePlugin[None], PermitPlugin[None], EnqueueExtensions, PodWatcher):
    name = NAME
    object_kinds: tuple[str, ...] = (WORKLOAD_PODGROUPS,)
    writes_condition = True
    group_cycle = True

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.states = PodGroupStates(lambda uid: uid in handle.snapshot.pods)
        self._reported: dict[str, int] = {}   # group key -> minCount last reported missing members for
        self.hierarchies = COMPOSITE_GATE in (getattr(handle, "feature_gates", None) or ())
        if self.hierarchies:
            self.object_kinds = (WORKLOAD_PODGROUPS, COMPOSITE_PODGROUPS)
        self._hierarchy: tuple[tuple[int, int], PodGroupHierarchy] | None = None

    # -- PodGroups and members -------------------------------------------------------------------

    def podgroup(self, key: str) -> WorkloadPodGroup | None:
        objects = self.handle.objects
        obj = objects.get(WORKLOAD_PODGROUPS, key) if objects is not None else None
        return WorkloadPodGroup.from_dict(obj) if obj is not None else None

    def hierarchy(self) -> PodGroupHierarchy:
        """The parent links of every PodGroup and CompositePodGroup (rebuilt when either kind changed)."""
        objects = self.handle.objects
        if objects is None:
            return PodGroupHierarchy({}, {})
        version = (objects.kind_version(WORKLOAD_PODGROUPS), objects.kind_version(COMPOSITE_PODGROUPS))
        if self._hierarchy is None or self._hierarchy[0] != version:
            pgs = {pg.key: pg for pg in map(WorkloadPodGroup.from_dict, objects.list(WORKLOAD_PODGROUPS))}
            cpgs = {c.key: c for c in map(CompositePodGroup.from_dict, objects.list(COMPOSITE_PODGROUPS))}
            self._hierarchy = (version, PodGroupHierarchy(pgs, cpgs))
        return self._hierarchy[1]

    def root_tree(self, key: str) -> GroupTree | None:
        """The tree PodGroup ``key`` belongs to, from its root CompositePodGroup; None when the gate is
        off, the PodGroup has no parent, or the tree is incomplete (a CompositePodGroup missing)."""
        if not self.hierarchies:
            return None
        h = self.hierarchy()
        pg = h.podgroups.get(key)
        if pg is None or not pg.parent:
            return None
        root = h.root_of(key)
        return h.tree(root[1]) if root is not None and root[0] else None

    def tree_ready(self, tree: GroupTree, count: Callable[[str], int]) -> bool:
        """``isCPGTreeReady``: at least ``minGroupCount`` children ready; a PodGroup is ready with
        ``count(key) >= minCount`` (1 for a basic one)."""
        if tree.composite is None:
            pg = tree.podgroup
            return pg is not None and count(tree.key) >= (pg.min_count if pg.gang else 1)
        return sum(1 for c in tree.children if self.tree_ready(c, count)) >= tree.composite.min_count

    def _tree_pending(self, tree: GroupTree) -> list[str]:
        return [p.uid for leaf in tree.leaves() for p in self.states.pods(leaf.key) if not self.states.is_scheduled(p)]

    def pod_seen(self, pod: PodInfo) -> None:
        key, new = self.states.track(pod)
        if not new or not key:
            return
        tree = self.root_tree(key)
        if tree is not None:
            if self.tree_ready(tree, self.states.all_count):
                self._regate_uids(self._tree_pending(tree))
            return
        pg = self.podgroup(key)
        if pg is not None and self.states.all_count(key) >= pg.min_count:
            self._regate(key)

    def pod_gone(self, uid: str) -> None:
        self.states.forget(uid)

    def _regate(self, key: str) -> None:
        """Run PreEnqueue again for the group's pending members (the queue skips pods it does not hold
        back): the pod just counted may be the one the others waited for."""
        self._regate_uids([p.uid for p in self.states.pods(key) if not self.states.is_scheduled(p)])

    def _regate_uids(self, uids: list[str]) -> None:
        regate = getattr(self.handle, "regate", None)
        if regate is not None and uids:
            regate(uids)

    # -- PreEnqueue / Permit ---------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.scheduling_group:
            return None
        key, new = self.states.track(pod)
        pg = self.podgroup(key)
        if pg is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, waiting_for_group(pod.scheduling_group))
        if self.hierarchies and pg.parent:
            return self._pre_enqueue_in_tree(pg, key, new)
        count = self.states.all_count(key)
        if pg.gang and count < pg.min_count:
            self._report_missing(pg)
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WAITING_FOR_GANG)
        if new and pg.gang and count == pg.min_count:
            self._regate(key)   # the pod the others waited for: they may go now
        return None

    def _pre_enqueue_in_tree(self, pg: WorkloadPodGroup, key: str, new: bool) -> Status | None:
        """``checkCPGHierarchyReadiness``: the whole tree from the root must be ready."""
        h = self.hierarchy()
        parent = f"{pg.namespace}/{pg.parent}"
        root = h.root_of_composite(parent)
        if root is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "failed to build hierarchy snapshot: composite pod "
                                                               f"group object not found in state for {parent}")
        tree = h.tree(root)
        if not self.tree_ready(tree, self.states.all_count):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, waiting_for_tree(root.partition("/")[2]))
        if new:
            self._regate_uids(self._tree_pending(tree))   # the pod the others waited for: they may go now
        return None

    # -- the pod-group cycle (framework.podgroups.PodGroupSource) ---------------------------------

    def cycle_tree(self, pod: PodInfo) -> GroupTree | None:
        """The tree ``pod``'s PodGroup belongs to (scheduled whole from its root), or None."""
        key = group_key_of(pod)
        return self.root_tree(key) if key else None

    def cycle_group_key(self, pod: PodInfo) -> str:
        return group_key_of(pod)

    def cycle_members(self, key: str) -> Iterable[PodInfo]:
        return self.states.pods(key)

    def cycle_is_scheduled(self, pod: PodInfo) -> bool:
        return self.states.is_scheduled(pod)

    def cycle_podgroup(self, key: str) -> WorkloadPodGroup | None:
        return self.podgroup(key)

    def cycle_missing(self, key: str) -> None:
        """A PodGroup gone while its members waited: PreEnqueue holds them again (no status, no
        Event), as upstream's incomplete-group pods; its Add requeues them."""
        return None

    def cycle_failed(self, key: str, message: str) -> None:
        """Nothing to keep: the group's members back off in the queue, together."""

    def _report_missing(self, pg: WorkloadPodGroup) -> None:
        """Why the group waits before any attempt (pysched's; upstream says nothing): an Event on the
        PodGroup when it is short of ``minCount`` pods (its note does not count them: repeats of an
        Event are one series, which keeps the first note)."""
        recorder = self.handle.recorder
        if self._reported.get(pg.key) == pg.min_count or recorder is None or not getattr(recorder, "accepting", True):
            return   # reported, or not writing Events (a standby): the leader that writes them reports it
        self._reported[pg.key] = pg.min_count
        if len(self._reported) > 10_000:
            del self._reported[next(iter(self._reported))]
        recorder.record(ObjectRef(pg.namespace, pg.name, pg.uid), controller=self.handle.profile_name,
                                    type_="Normal", reason="WaitingForMembers", action="Scheduling",
                                    note=f"waiting for minCount pods: fewer than {pg.min_count} of the group's "
                                         "pods exist",
                                    kind="PodGroup", api_version=API_VERSION)

    def placement_feasible(self, pg: WorkloadPodGroup | CompositePodGroup, scheduled: int,
                           remaining: int) -> Status | None:
        """For a CompositePodGroup, ``scheduled`` and ``remaining`` count children, ``minGroupCount``."""
        if isinstance(pg, CompositePodGroup):
            return feasibility(pg.min_count, scheduled, remaining)
        return feasibility(pg.min_count if pg.gang else 1, scheduled, remaining)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        key = group_key_of(pod)
        if not key:
            return None, 0.0
        pg = self.podgroup(key)
        if pg is None:
            return Status(Code.ERROR, f"failed to get podGroup {key}: podgroup {pod.scheduling_group!r} "
                                      "not found"), 0.0
        if self.hierarchies and pg.parent:
            return self._permit_in_tree(pod, pg)
        if not pg.gang:
            return None, 0.0
        self.states.track(pod)
        if self.states.scheduled_count(key) < pg.min_count:
            if self.handle.activate is not None:
                self.handle.activate([p.uid for p in self.states.unscheduled(key)])
            return Status(Code.WAIT, "waiting for minCount pods from a gang to be scheduled"), PERMIT_TIMEOUT_SECONDS
        for p in self.states.pods(key):
            wp = self.handle.waiting_pods.get(p.uid)
            if wp is not None:
                wp.allow(self.name)
        return None, 0.0

    def _permit_in_tree(self, pod: PodInfo, pg: WorkloadPodGroup) -> tuple[Status | None, float]:
        """``permitPodForHierarchy``: wait until the tree is ready counting scheduled pods."""
        self.states.track(pod)
        parent = f"{pg.namespace}/{pg.parent}"
        h = self.hierarchy()
        root = h.root_of_composite(parent)
        if root is None:
            return Status(Code.ERROR, "failed to build hierarchy snapshot: composite pod group object not found "
                                      f"in state for {parent}"), 0.0
        tree = h.tree(root)
        if not self.tree_ready(tree, self.states.scheduled_count):
            if self.handle.activate is not None:
                self.handle.activate(self._tree_pending(tree))
            return Status(Code.WAIT, waiting_for_tree(root.partition("/")[2])), PERMIT_TIMEOUT_SECONDS
        for leaf in tree.leaves():
            for p in self.states.pods(leaf.key):
                wp = self.handle.waiting_pods.get(p.uid)
                if wp is not None:
                    wp.allow(self.name)
        return None, 0.0

    # -- events ----------------------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        def own_group(pod: PodInfo, old: Any, new: Any) -> bool:
            obj = new if new is not None else old
            meta = (obj or {}).get("metadata") or {}
            if meta.get("namespace") != pod.namespace:
                return False
            if self.hierarchies:   # areSameHierarchy: the same root
                return same_root(pod, (False, f"{pod.namespace}/{meta.get('name')}"))
            return meta.get("name") == pod.scheduling_group

        def same_root(pod: PodInfo, target: tuple[bool, str]) -> bool:
            h = self.hierarchy()
            mine = h.root_of(group_key_of(pod))
            if mine is None:
                return False
            theirs = h.root_of(target[1]) if not target[0] else (
                (True, r) if (r := h.root_of_composite(target[1])) is not None else None)
            return mine == theirs

        def composite_added(pod: PodInfo, old: Any, new: Any) -> bool:
            meta = (new or {}).get("metadata") or {}
            return (meta.get("namespace") == pod.namespace
                    and same_root(pod, (True, f"{pod.namespace}/{meta.get('name')}")))

        def min_count_down(pod: PodInfo, old: Any, new: Any) -> bool:
            if not own_group(pod, old, new) or old is None or new is None:
                return False
            was, now = WorkloadPodGroup.from_dict(old), WorkloadPodGroup.from_dict(new)
            return was.gang and now.gang and now.min_count < was.min_count

        events = [ClusterEventWithHint(ClusterEvent("WorkloadPodGroup", "Add"), own_group),
                  ClusterEventWithHint(ClusterEvent("WorkloadPodGroup", "Update"), min_count_down)]
        if self.hierarchies:
            events.append(ClusterEventWithHint(ClusterEvent("CompositePodGroup", "Add"), composite_added))
        return events
