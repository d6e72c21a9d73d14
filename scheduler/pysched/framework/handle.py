"""Handle: what a plugin can reach - a read-only view of the snapshot, the low-volume object store,
the API client and the event recorder - with typed accessors.

The snapshot is the scheduler cache as one scheduling cycle sees it (``backend.cache``); plugins
read it through this Handle and ``NodeBatch`` accessors, never by writing to it. The protocols
below are the shape the framework relies on; the engine's cache, object store, client and
recorder implement them, and the framework testing helpers build small real ones.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from pysched.apis.core.model import LabelSelector
from pysched.apis.features import NEWEST
from pysched.framework.affinity import AffinityTerm
from pysched.framework.features import default_gates
from pysched.framework.interface import NodeBatch, NodeColumns, WaitingPod
from pysched.framework.loadmetrics import LoadMetrics
from pysched.framework.matchers import PodMatcher
from pysched.framework.nodeinfo import NodeInfo
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Status


class PodCounts(Protocol):
    def counts(self, matcher: PodMatcher) -> np.ndarray: ...


# Which existing pods' pod (anti-)affinity terms ``Handle.existing_term_domains`` reads.
TermKind = Literal["requiredAffinity", "requiredAntiAffinity", "preferred"]


class AffinityTermCounts(Protocol):
    """Existing pods (bound or assumed) by the distinct pod (anti-)affinity terms they declare,
    counted per topology domain (the cache's ``TermIndex``)."""

    def term_domains(self, kind: TermKind, accept: Callable[[AffinityTerm], bool],
                     labels: Mapping[str, str] | None = None) -> list[tuple[AffinityTerm, int, np.ndarray]]: ...


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

    def has_pod_below(self, priority: int) -> bool: ...

    def what_if(self) -> WhatIfMoves:
        """Temporary pod moves on the snapshot for one synchronous evaluation (preemption)."""
        ...


class WhatIfMoves(Protocol):
    """Pods taken off / put on nodes of the snapshot until ``restore()`` (``backend.cache.WhatIf``)."""

    def remove(self, pod: PodInfo) -> None: ...
    def add(self, pod: PodInfo) -> None: ...
    def restore(self) -> None: ...


class PodNominator(Protocol):
    """Pending pods expected on a node (``status.nominatedNodeName``); falsy when there are none."""

    def __bool__(self) -> bool: ...
    def add(self, pod: PodInfo, node: str | None = None) -> None: ...
    def delete(self, uid: str) -> None: ...
    def nominated_node(self, uid: str) -> str: ...
    def node_names(self) -> Iterable[str]: ...
    def pods_for_node(self, node: str) -> list[PodInfo]: ...


class FilterRunner(Protocol):
    """The profile's filters, as preemption runs them on one node (``runtime.Framework``)."""

    def filter_with_nominated(self, state: Any, pod: PodInfo, node_name: str, *,
                              simulated: bool) -> Status | None: ...

    def preemption_blocked(self, pod: PodInfo) -> str:
        """Why a ``PreemptionGate`` plugin forbids ``pod`` to preempt (a gang member whose group
        cannot be completed), or ""."""
        ...

    def nominated_pods_to_add(self, pod: PodInfo, node_name: str) -> list[PodInfo]: ...

    def on_paper(self, state: Any, pod: PodInfo) -> bool:
        """Whether the pod's Filters can judge pods moved on paper (``OverlayBatch``)."""
        ...

    def request_vector(self, pod: PodInfo) -> Any:
        """The pod's requests as a row of the node table (None if it cannot be counted on paper)."""
        ...

    def first_failures(self, state: Any, pod: PodInfo, batch: Any) -> list[Status | None]:
        """Every Filter over ``batch``: per node None or the first rejecting plugin's status."""
        ...


class PreemptionExtender(Protocol):
    """An extender as preemption sees it (``extender.client.HTTPExtender``)."""

    name: str
    preempt_verb: str
    ignorable: bool

    def is_interested(self, pod: PodInfo) -> bool: ...

    async def process_preemption(self, pod: PodInfo, victims: dict[str, tuple[list[PodInfo], int]],
                                 pods_on: Callable[[str], Mapping[str, PodInfo] | None]
                                 ) -> dict[str, tuple[list[PodInfo], int]]: ...


class ObjectLister(Protocol):
    """Namespaces, Services, controllers, PVCs, PVs, StorageClasses... as API dicts."""

    version: int   # moves on with every change of any kind: a key for what plugins derive from them

    def kind_version(self, kind: str) -> int:
        """Moves on with every change of ``kind`` alone (``resourceslices``...): a key for what a
        plugin derives from one kind, which ``version`` would invalidate on any change."""
        ...

    def get(self, kind: str, key: str) -> dict[str, Any] | None: ...
    def list(self, kind: str) -> list[dict[str, Any]]: ...
    def changed(self, timeout: float) -> Awaitable[bool]: ...

    def subscribe(self, listener: Callable[[str, str | None, dict[str, Any] | None, dict[str, Any]], None]) -> None:
        """Call ``listener(kind, event type, previous object or None, object)`` on every change
        from now on (``ADDED``, ``MODIFIED``, ``DELETED`` - the object removed - or None for an
        object from a listing applied without events): for an
        index a plugin keeps current per change instead of rebuilding it per cycle. It runs on the
        event loop between cycles and must not block."""
        ...

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
                       timeout: float | None = None, annotations: Mapping[str, str] | None = None) -> None: ...

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> Any: ...

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> Any: ...


class EventRecorder(Protocol):
    """Events about a pod (or, with ``kind``/``api_version``, another object: a PodGroup - anything
    with ``namespace``, ``name``, ``uid`` and ``resource_version``)."""

    def record(self, pod: Any, *, controller: str, type_: str, reason: str, action: str,
               note: str, related: PodInfo | None = None, kind: str = "Pod", api_version: str = "v1") -> None: ...


class QuotaSource(Protocol):
    """A plugin whose quotas are exported as gauges (``PluginMetrics.export_quotas``): ``quotas()``
    maps a namespace to its quota (``key``, ``min``, ``max``), ``usage.of(namespace)`` what is charged."""

    def quotas(self) -> Mapping[str, Any]: ...

    @property
    def usage(self) -> Any: ...


class GPUSource(Protocol):
    """A plugin whose GPUs are exported as gauges (``PluginMetrics.export_gpus``): ``gpu_summary()``
    gives ``{"free": n, "partial": n, "full": n}`` GPUs (none of it held, part of it, all of it),
    ``"allocated"`` and ``"capacity"`` in thousandths of a GPU, and ``"fragmented"``: the free
    share its policy counts as fragments (FGD's F summed over the nodes; absent without it)."""

    def gpu_summary(self) -> Mapping[str, float]: ...


class PluginMetrics(Protocol):
    """What plugins record in the process's metrics (``Handle.metrics``); the engine labels each
    sample with the profile. Offline and in ``PluginTester`` the calls still go somewhere harmless."""

    def podgroups_waiting(self, groups: int) -> None:
        """How many groups have members waiting at Permit now (``pysched_podgroups_waiting``)."""
        ...

    def podgroup_admitted(self) -> None:
        """A group reached its quorum: its waiting members were allowed together."""
        ...

    def podgroup_timed_out(self) -> None:
        """A group's Permit wait expired before quorum: its waiting members were rejected together."""
        ...

    def export_quotas(self, source: QuotaSource) -> None:
        """Export ``source``'s quotas as ``pysched_quota_used``/``_min``/``_max`` while it lives."""
        ...

    def export_gpus(self, source: GPUSource) -> None:
        """Export ``source``'s GPUs as ``pysched_gpus``, ``pysched_gpu_allocated_ratio`` and
        ``pysched_gpu_fragmented_ratio`` while it lives (read when Prometheus scrapes)."""
        ...

    def quota_victim(self, quota: str, reason: str) -> None:
        """A preemption chose a pod of ``quota`` as a victim: ``reclaim`` or ``priority``."""
        ...

    def binding_conditions(self, driver: str, status: str, waited: float | None) -> None:
        """DRA binding conditions at PreBind (kube-scheduler's ``dra_bindingconditions_*``): one
        device of ``driver`` with binding conditions (``waited`` None) or one allocated device whose
        wait lasted ``waited`` seconds; ``status``: success, failure, timeout or error."""
        ...

    def resource_claim_created(self, status: str) -> None:
        """A pod's extended-resource ResourceClaim created (``success``) or refused (``failure``):
        ``dynamic_resource_allocation_resourceclaim_creates_total``."""
        ...


class NoMetrics:
    """``PluginMetrics`` that records nothing: a Handle's default."""

    def podgroups_waiting(self, groups: int) -> None:
        pass

    def binding_conditions(self, driver: str, status: str, waited: float | None) -> None:
        pass

    def resource_claim_created(self, status: str) -> None:
        pass

    def podgroup_admitted(self) -> None:
        pass

    def podgroup_timed_out(self) -> None:
        pass

    def export_quotas(self, source: QuotaSource) -> None:
        pass

    def export_gpus(self, source: GPUSource) -> None:
        pass

    def quota_victim(self, quota: str, reason: str) -> None:
        pass


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
    nominator: PodNominator | None = None      # the scheduling queue's nominated pods (None: none kept)
    extenders: Sequence[PreemptionExtender] = ()   # configured extenders (preemption asks those with preemptVerb)
    # Runs a coroutine in the background, tracked by the engine (drained at shutdown); returns
    # False when it will not (this scheduler does not write: shadow mode). None: a plain task on
    # the running loop, or nothing when no loop runs (offline).
    spawn: Callable[[Coroutine[Any, Any, None]], bool] | None = None
    activate: Callable[[Iterable[str]], None] | None = None   # move pods (by uid) to the activeQ
    # Run PreEnqueue again for the pods (by uid) it holds back (a gang's last member arrived).
    regate: Callable[[Iterable[str]], None] | None = None
    framework: FilterRunner | None = None      # the profile's framework (set when it is built)
    # Node load from metric sources (``framework.loadmetrics``): the background collector live, a
    # metrics file offline; None when nothing provides it (load-aware plugins then fall back).
    load: LoadMetrics | None = None
    # The kube-scheduler release pysched behaves as, and the feature gates that are on (kube's names
    # and pysched's own; ``framework.features``). Default: the newest release, its default gates.
    kube_version: tuple[int, int] = NEWEST
    feature_gates: frozenset[str] = field(default_factory=default_gates)
    # What plugins record in the process's metrics (the engine's Prometheus metrics for this profile).
    metrics: PluginMetrics = field(default_factory=NoMetrics)

    def node_info(self, name: str) -> NodeInfo | None:
        return self.snapshot.nodes.get(name)

    def all_nodes(self) -> NodeBatch:
        """Every node of the snapshot, in the cache's node-tree order (zones interleaved)."""
        table = self.snapshot.table
        return NodeBatch(table, table.order())

    def pod_counts(self, matcher: PodMatcher, nodes: NodeBatch) -> np.ndarray:
        """How many pods (bound or assumed) matching ``matcher`` run on each node of ``nodes``."""
        return nodes.take(self.snapshot.index.counts(matcher))

    def existing_term_domains(self, kind: TermKind, accept: Callable[[AffinityTerm], bool],
                              labels: Mapping[str, str] | None = None) -> list[tuple[AffinityTerm, int, np.ndarray]]:
        """The pod (anti-)affinity terms of ``kind`` that existing pods (bound or assumed) declare,
        each distinct term once, restricted to those ``accept(term)`` admits (called once per
        distinct term): ``(term, weight, per_domain)`` where ``per_domain[code]`` is how many pods
        declaring the term run in the domain whose ``term.topology_key`` label has that code (the
        codes of ``NodeBatch.label(term.topology_key)``). Terms none of whose pods is on a node
        with the key are left out. ``weight``: 1 for required terms; for ``preferred`` the
        term's weight, negative for preferred anti-affinity (a term may come once per weight).

        ``labels``: the labels of the pod the terms are matched against, when ``accept`` admits no
        term whose label selector rejects them; terms whose selector requires a label pair the
        pod does not carry are then skipped without calling ``accept`` (an index lookup instead of
        one call per distinct term)."""
        return self.snapshot.terms.term_domains(kind, accept, labels)

    def pvc_in_use(self, namespace: str, claim: str) -> bool:
        """Whether a pod on a node (bound or assumed) mounts PersistentVolumeClaim ``namespace/claim``
        (a ``persistentVolumeClaim`` volume; kube-scheduler's ``IsPVCUsedByPods``)."""
        return f"{namespace}/{claim}" in self.snapshot.pvc_users
