"""Handle: what a plugin can reach - a read-only view of the snapshot, the low-volume object store,
the API client and the event recorder - with typed accessors.

The snapshot is the scheduler cache as one scheduling cycle sees it (``backend.cache``); plugins
read it through this Handle and ``NodeBatch`` accessors, never by writing to it. The protocols
below are the shape the framework relies on; the engine's cache, object store, client and
recorder implement them, and the framework testing helpers build small real ones.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from pysched.apis.core.model import LabelSelector
from pysched.framework.affinity import AffinityTerm
from pysched.framework.interface import NodeBatch, NodeColumns, WaitingPod
from pysched.framework.matchers import PodMatcher
from pysched.framework.nodeinfo import NodeInfo
from pysched.framework.podinfo import PodInfo


class PodCounts(Protocol):
    def counts(self, matcher: PodMatcher) -> np.ndarray: ...


# Which existing pods' pod (anti-)affinity terms ``Handle.existing_term_domains`` reads.
TermKind = Literal["requiredAffinity", "requiredAntiAffinity", "preferred"]


class AffinityTermCounts(Protocol):
    """Existing pods (bound or assumed) by the distinct pod (anti-)affinity terms they declare,
    counted per topology domain (the cache's ``TermIndex``)."""

    def term_domains(self, kind: TermKind,
                     accept: Callable[[AffinityTerm], bool]) -> list[tuple[AffinityTerm, int, np.ndarray]]: ...


class SnapshotView(Protocol):
    """The scheduler cache, read-only: nodes with their pods (bound or assumed) and indices."""

    @property
    def nodes(self) -> Mapping[str, NodeInfo]: ...
    @property
    def pods(self) -> Mapping[str, PodInfo]: ...
    @property
    def table(self) -> NodeColumns: ...
    @property
    def index(self) -> PodCounts: ...
    @property
    def terms(self) -> AffinityTermCounts: ...
    @property
    def image_nodes(self) -> Mapping[str, int]: ...
    @property
    def with_affinity(self) -> Mapping[str, PodInfo]: ...
    @property
    def with_required_anti(self) -> Mapping[str, PodInfo]: ...
    @property
    def pvc_users(self) -> Mapping[str, int]: ...

    def image_sizes(self, name: str) -> np.ndarray: ...


class ObjectLister(Protocol):
    """Namespaces, Services, controllers, PVCs, PVs, StorageClasses... as API dicts."""

    def get(self, kind: str, key: str) -> dict[str, Any] | None: ...
    def list(self, kind: str) -> list[dict[str, Any]]: ...
    def changed(self, timeout: float) -> Awaitable[bool]: ...

    def namespace_labels(self, name: str) -> dict[str, str]:
        """The labels of Namespace ``name`` ({} when unknown)."""
        ...

    def namespaces_matching(self, selector: LabelSelector) -> builtins.list[str]:
        """Names of the Namespaces whose labels ``selector`` matches."""
        ...

    def default_selector(self, pod: PodInfo) -> LabelSelector | None:
        """``helper.DefaultSelector``: the selectors of the Services selecting ``pod`` and of its
        controller (ReplicaSet, StatefulSet, ReplicationController), ANDed; None when none."""
        ...


class APIClient(Protocol):
    """The scheduler's own API client (writes pass the leader fence)."""

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
                      content_type: str = ..., timeout: float | None = None,
                      rate_limit: bool = True) -> Any: ...

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str,
                       timeout: float | None = None) -> None: ...


class EventRecorder(Protocol):
    def record(self, pod: PodInfo, *, controller: str, type_: str, reason: str, action: str,
               note: str) -> None: ...


@dataclass
class Handle:
    snapshot: SnapshotView
    objects: ObjectLister
    client: APIClient | None = None
    recorder: EventRecorder | None = None
    profile_name: str = ""
    waiting_pods: dict[str, WaitingPod] = field(default_factory=dict)
    bind_timeout: float | None = None          # seconds a bind may take (None: the client's timeout)
    ignored_extended_resources: frozenset[str] = frozenset()  # extenders' ignoredByScheduler resources

    def node_info(self, name: str) -> NodeInfo | None:
        return self.snapshot.nodes.get(name)

    def all_nodes(self) -> NodeBatch:
        """Every node of the snapshot, in the cache's node-tree order (zones interleaved)."""
        table = self.snapshot.table
        return NodeBatch(table, table.order())

    def pod_counts(self, matcher: PodMatcher, nodes: NodeBatch) -> np.ndarray:
        """How many pods (bound or assumed) matching ``matcher`` run on each node of ``nodes``."""
        return nodes.take(self.snapshot.index.counts(matcher))

    def existing_term_domains(self, kind: TermKind,
                              accept: Callable[[AffinityTerm], bool]) -> list[tuple[AffinityTerm, int, np.ndarray]]:
        """The pod (anti-)affinity terms of ``kind`` that existing pods (bound or assumed) declare,
        each distinct term once, restricted to those ``accept(term)`` admits (called once per
        distinct term): ``(term, weight, per_domain)`` where ``per_domain[code]`` is how many pods
        declaring the term run in the domain whose ``term.topology_key`` label has that code (the
        codes of ``NodeBatch.label(term.topology_key)``). Terms none of whose pods is on a node
        with the key are left out. ``weight``: 1 for required terms; for ``preferred`` the
        term's weight, negative for preferred anti-affinity (a term may come once per weight)."""
        return self.snapshot.terms.term_domains(kind, accept)

    def pvc_in_use(self, namespace: str, claim: str) -> bool:
        """Whether a pod on a node (bound or assumed) mounts PersistentVolumeClaim ``namespace/claim``
        (a ``persistentVolumeClaim`` volume; kube-scheduler's ``IsPVCUsedByPods``)."""
        return f"{namespace}/{claim}" in self.snapshot.pvc_users

    # The engine's name for the snapshot; kept so plugins written against it keep working.
    @property
    def cache(self) -> SnapshotView:
        return self.snapshot
