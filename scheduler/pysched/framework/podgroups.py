"""Workload PodGroups (``scheduling.k8s.io/v1beta1``, Kubernetes 1.36+): the parsed object and the
scheduler's view of each group's pods, as kube-scheduler's PodGroupManager keeps them.

A pod joins a group with ``spec.schedulingGroup.podGroupName``; the PodGroup, in the pod's
namespace, says how the group is scheduled: ``schedulingPolicy.gang.minCount`` (all or nothing for
at least that many pods) or ``schedulingPolicy.basic`` (each pod on its own, but in one cycle), and
``schedulingConstraints.topology`` (the first key: the whole group in one domain of that node
label). The object store keeps them as ``workloadpodgroups`` (``WORKLOAD_PODGROUPS``).

CompositePodGroups (``scheduling.k8s.io/v1alpha3``, the alpha ``CompositePodGroup`` gate; stored as
``compositepodgroups``) group PodGroups into trees: a PodGroup names its parent with
``spec.parentCompositePodGroupName``, a CompositePodGroup may name one too. ``GroupTree`` is one
such tree as the pod-group cycle walks it (``schedule_composite_podgroup``): the whole tree is
scheduled as one, from its root.

``PodGroupStates`` follows every pod of ours that names a group (``track``/``forget``, fed by the
GangScheduling plugin's pod events) and answers what upstream's PodGroupState does: how many pods
the group has, which are scheduled (bound, or assumed in the scheduler's cache) and which are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Status

WORKLOAD_PODGROUPS = "workloadpodgroups"
API_VERSION = "scheduling.k8s.io/v1beta1"
COMPOSITE_PODGROUPS = "compositepodgroups"
COMPOSITE_GATE = "CompositePodGroup"
CONDITION_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_SCHEDULED = "Scheduled"


@dataclass(frozen=True)
class WorkloadPodGroup:
    """One ``scheduling.k8s.io`` PodGroup, as the scheduler reads it."""

    namespace: str
    name: str
    generation: int
    gang: bool                       # schedulingPolicy.gang (else basic)
    min_count: int                   # gang.minCount; 1 for a basic group
    topology_keys: tuple[str, ...]   # schedulingConstraints.topology[*].key
    # spec.priority (resolved by the API server from priorityClassName; 0 when unset, as upstream);
    # None: the group has none of its own (scheduler-plugins' PodGroups) - its members must agree
    priority: int | None
    preemption_policy: str | None
    conditions: tuple[dict[str, Any], ...]
    uid: str = ""
    parent: str | None = None        # spec.parentCompositePodGroupName (CompositePodGroup gate)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, type_: str) -> dict[str, Any] | None:
        for c in self.conditions:
            if c.get("type") == type_:
                return c
        return None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> WorkloadPodGroup:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        policy = spec.get("schedulingPolicy") or {}
        gang = policy.get("gang")
        try:
            min_count = int((gang or {}).get("minCount") or 0) if gang is not None else 1
        except (TypeError, ValueError):
            min_count = 0
        constraints = spec.get("schedulingConstraints") or {}
        keys = tuple(t.get("key", "") for t in constraints.get("topology") or ()
                     if isinstance(t, dict) and t.get("key"))
        prio = spec.get("priority")
        status = obj.get("status") or {}
        return cls(namespace=meta.get("namespace") or "default", name=meta.get("name") or "",
                   generation=int(meta.get("generation") or 0), gang=gang is not None, min_count=min_count,
                   topology_keys=keys, priority=prio if isinstance(prio, int) else 0,
                   preemption_policy=spec.get("preemptionPolicy"),
                   conditions=tuple(c for c in status.get("conditions") or () if isinstance(c, dict)),
                   uid=meta.get("uid") or "",
                   parent=spec.get("parentCompositePodGroupName") or None)


@dataclass(frozen=True)
class CompositePodGroup:
    """One ``scheduling.k8s.io/v1alpha3`` CompositePodGroup: a group of PodGroups (and of other
    CompositePodGroups). ``gang.minGroupCount`` of its children must be placed (1 for a basic one);
    ``schedulingConstraints.topology``'s first key holds its whole subtree in one domain."""

    namespace: str
    name: str
    generation: int
    gang: bool
    min_group_count: int
    topology_keys: tuple[str, ...]
    priority: int | None
    preemption_policy: str | None
    parent: str | None
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def min_count(self) -> int:
        """What PlacementFeasible counts against: children, not pods (upstream's ``getMinCount``)."""
        return self.min_group_count if self.gang else 1

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> CompositePodGroup:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        gang = (spec.get("schedulingPolicy") or {}).get("gang")
        try:
            count = int((gang or {}).get("minGroupCount") or 0) if gang is not None else 1
        except (TypeError, ValueError):
            count = 0
        constraints = spec.get("schedulingConstraints") or {}
        keys = tuple(t.get("key", "") for t in constraints.get("topology") or ()
                     if isinstance(t, dict) and t.get("key"))
        prio = spec.get("priority")
        return cls(namespace=meta.get("namespace") or "default", name=meta.get("name") or "",
                   generation=int(meta.get("generation") or 0), gang=gang is not None, min_group_count=count,
                   topology_keys=keys, priority=prio if isinstance(prio, int) else 0,
                   preemption_policy=spec.get("preemptionPolicy"),
                   parent=spec.get("parentCompositePodGroupName") or None, uid=meta.get("uid") or "")


@dataclass
class GroupTree:
    """A CompositePodGroup and its subtree, or a leaf PodGroup (``podgroup``; no children)."""

    key: str
    composite: CompositePodGroup | None = None
    podgroup: WorkloadPodGroup | None = None
    children: list[GroupTree] = field(default_factory=list)

    @property
    def group(self) -> CompositePodGroup | WorkloadPodGroup:
        g = self.composite if self.composite is not None else self.podgroup
        assert g is not None
        return g

    def leaves(self) -> list[GroupTree]:
        if self.composite is None:
            return [self]
        return [leaf for c in self.children for leaf in c.leaves()]

    def walk(self) -> list[GroupTree]:
        """Every node of the tree, parents before their children."""
        return [self, *(n for c in self.children for n in c.walk())]


class PodGroupHierarchy:
    """The parent links of PodGroups and CompositePodGroups, as upstream's workload forest keeps
    them: each node's root, each CompositePodGroup's children, the tree under a root.

    ``podgroups`` and ``composites`` map ``namespace/name`` to the parsed objects."""

    def __init__(self, podgroups: Mapping[str, WorkloadPodGroup], composites: Mapping[str, CompositePodGroup]):
        self.podgroups = podgroups
        self.composites = composites
        self.children: dict[str, list[tuple[bool, str]]] = {}   # cpg key -> [(is composite, key)]
        for key, pg in podgroups.items():
            if pg.parent:
                self.children.setdefault(f"{pg.namespace}/{pg.parent}", []).append((False, key))
        for key, cpg in composites.items():
            if cpg.parent:
                self.children.setdefault(f"{cpg.namespace}/{cpg.parent}", []).append((True, key))

    def root_of_composite(self, key: str) -> str | None:
        """The key of the root CompositePodGroup above (or at) CompositePodGroup ``key``; None when
        one on the way is missing or the parents go round in a circle."""
        seen: set[str] = set()
        while key not in seen:
            seen.add(key)
            cpg = self.composites.get(key)
            if cpg is None:
                return None
            if not cpg.parent:
                return key
            key = f"{cpg.namespace}/{cpg.parent}"
        return None

    def root_of(self, podgroup_key: str) -> tuple[bool, str] | None:
        """(is composite, key) of the root of PodGroup ``podgroup_key``'s tree (itself when it has no
        parent); None when the PodGroup or a CompositePodGroup on the way is missing."""
        pg = self.podgroups.get(podgroup_key)
        if pg is None:
            return None
        if not pg.parent:
            return False, podgroup_key
        root = self.root_of_composite(f"{pg.namespace}/{pg.parent}")
        return (True, root) if root is not None else None

    def tree(self, cpg_key: str, seen: set[str] | None = None) -> GroupTree:
        """CompositePodGroup ``cpg_key`` and everything under it (a node met twice is left out)."""
        seen = seen if seen is not None else set()
        seen.add("c:" + cpg_key)
        node = GroupTree(cpg_key, composite=self.composites.get(cpg_key))
        for composite, key in self.children.get(cpg_key, ()):
            mark = ("c:" if composite else "p:") + key
            if mark in seen:
                continue
            if composite:
                node.children.append(self.tree(key, seen))
            else:
                seen.add(mark)
                node.children.append(GroupTree(key, podgroup=self.podgroups[key]))
        return node


class PodGroupSource(Protocol):
    """A plugin whose gangs go through the pod-group cycle (``schedule_one_podgroup``): GangScheduling
    (``scheduling.k8s.io`` PodGroups) and Coscheduling (scheduler-plugins' PodGroups, unless
    ``schedulerPluginsCompatible``). The cycle asks it, for a pod, which group it is in; for a group,
    its pods and its PodGroup (as a ``WorkloadPodGroup``: ``min_count`` is scheduler-plugins'
    ``minMember``); and, as placements are tried, whether ``minCount`` is still within reach."""

    name: str
    # Whether the cycle writes the PodGroup's PodGroupInitiallyScheduled condition (scheduler-plugins'
    # PodGroups have a status controller of their own).
    writes_condition: bool

    def cycle_group_key(self, pod: PodInfo) -> str: ...
    def cycle_members(self, key: str) -> Iterable[PodInfo]: ...
    def cycle_is_scheduled(self, pod: PodInfo) -> bool: ...
    def cycle_podgroup(self, key: str) -> WorkloadPodGroup | None: ...
    def placement_feasible(self, pg: Any, scheduled: int, remaining: int) -> Any: ...
    def cycle_failed(self, key: str, message: str) -> None: ...


@dataclass(frozen=True)
class ObjectRef:
    """What the Event recorder needs of a PodGroup an Event is about."""

    namespace: str
    name: str
    uid: str
    api_version: str = API_VERSION
    resource_version: str = ""


def placement_feasibility(min_count: int, scheduled: int, remaining: int, term: str = "minCount") -> Status | None:
    """PlacementFeasible: None when ``min_count`` is met; Wait while it still can be; else
    Unschedulable (``term``: the PodGroup field's name - scheduler-plugins' is ``minMember``)."""
    if remaining + scheduled < min_count:
        return Status(Code.UNSCHEDULABLE, f"{term} ({min_count}) cannot be satisfied: "
                                          f"{scheduled} scheduled, {remaining} remaining")
    if scheduled < min_count:
        return Status(Code.WAIT, f"{term} ({min_count}) is not yet satisfied: "
                                 f"{scheduled} scheduled, {remaining} remaining")
    return None


def group_key_of(pod: PodInfo) -> str:
    """``namespace/podGroupName`` of the group ``pod`` names, or ""."""
    return f"{pod.namespace}/{pod.scheduling_group}" if pod.scheduling_group else ""


class PodGroupStates:
    """The pods of each workload PodGroup this scheduler knows of (pending or placed).

    ``assumed(uid)`` tells whether the scheduler's cache holds a pod (assumed or bound): a pod is
    *scheduled* when it is bound or assumed, as upstream's ``ScheduledPodsCount`` counts it.
    """

    def __init__(self, assumed: Callable[[str], bool]):
        self._assumed = assumed
        self.members: dict[str, dict[str, PodInfo]] = {}   # group key -> uid -> pod
        self.group_of: dict[str, str] = {}                  # uid -> group key

    def track(self, pod: PodInfo) -> tuple[str, bool]:
        """Record ``pod``; returns (its group key, whether it is new to the group)."""
        key = group_key_of(pod)
        old = self.group_of.get(pod.uid)
        if old is not None and old != key:
            self.forget(pod.uid)
        if not key:
            return "", False
        pods = self.members.setdefault(key, {})
        new = pod.uid not in pods
        pods[pod.uid] = pod
        self.group_of[pod.uid] = key
        return key, new

    def forget(self, uid: str) -> str:
        key = self.group_of.pop(uid, "")
        pods = self.members.get(key)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self.members[key]
        return key

    def pods(self, key: str) -> Iterable[PodInfo]:
        return (self.members.get(key) or {}).values()

    def all_count(self, key: str) -> int:
        """Pods of the group the scheduler knows of, pending (scheduling gates or not), assumed or
        bound - upstream's ``AllPodsCount``."""
        return len(self.members.get(key) or ())

    def is_scheduled(self, pod: PodInfo) -> bool:
        return bool(pod.node_name) or self._assumed(pod.uid)

    def scheduled(self, key: str) -> list[PodInfo]:
        return [p for p in self.pods(key) if self.is_scheduled(p)]

    def scheduled_count(self, key: str) -> int:
        return sum(1 for p in self.pods(key) if self.is_scheduled(p))

    def unscheduled(self, key: str) -> list[PodInfo]:
        return [p for p in self.pods(key) if not self.is_scheduled(p)]
