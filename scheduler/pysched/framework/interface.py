"""Plugin interfaces: one base class per extension point, as in kube-scheduler's framework.

A plugin is a plain Python class with a ``name`` that subclasses the extension points it
implements; the framework finds them by ``isinstance``, the way Go finds implemented interfaces.
Constructor: ``Plugin(args, handle)`` where ``args`` is the plugin's typed arguments (its ``Args``
class built from ``pluginConfig``) and ``handle`` gives access to the snapshot, the client and
the event recorder.

Filter and Score have one form: they receive every candidate node at once as a ``NodeBatch``
and answer for all of them (a ``FilterResult``, an array of scores). Vector logic reads the
batch's accessors (``allocatable(res)``, ``requested(res)``, ``label(key)``...); per-node logic
goes through ``FilterResult.each`` / ``scores_each``. The same method serves the hot path, the
explanations (a batch of one node) and the extender server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, cast

import numpy as np
import numpy.typing as npt
from typing_extensions import TypeVar

from pysched.apis.core.model import Taint
from pysched.framework.status import Code, Diagnosis, FrameworkError, Status

if TYPE_CHECKING:
    from pysched.framework.cycle_state import CycleState
    from pysched.framework.handle import Handle
    from pysched.framework.nodeinfo import NodeInfo, NodeSpec
    from pysched.framework.podinfo import PodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
MIN_EXTENDER_PRIORITY = 0
MAX_TOTAL_SCORE = 2**63 - 1


_NON_ZERO_COLUMNS = {"cpu": 0, "memory": 1}


class LabelColumnView(Protocol):
    """One label key over the whole node table (see ``NodeBatch.label``)."""
    codes: np.ndarray
    vocab: dict[str, int]
    values: list[str]

    def codes_of(self, values: Iterable[str]) -> np.ndarray: ...
    def ints(self) -> np.ndarray: ...


class NodeColumns(Protocol):
    """What a NodeBatch reads from the cache's node table (``backend.cache.nodetable``): the
    framework depends on this shape, not on the backend."""
    infos: list[Any]
    res_index: dict[str, int]
    alloc: np.ndarray
    req: np.ndarray
    non0: np.ndarray
    npods: np.ndarray
    unsched: np.ndarray
    taint_class: np.ndarray
    taint_sets: list[tuple[Taint, ...]]
    slot_by_name: dict[str, int]
    memo: dict[Any, Any]
    version: int   # bumps when a node is added, changed or removed (for per-node-set caches)

    def label_column(self, key: str) -> LabelColumnView: ...
    def order(self) -> np.ndarray: ...


class LabelValues:
    """A label key's values on the nodes of a batch, as integer codes (-1: label absent).

    Compare codes instead of strings: ``isin(values)``, ``equals(value)``, ``exists()``, or
    ``ints()`` for ``Gt``/``Lt`` (NaN where absent or not an integer). ``value_of(code)`` maps back.
    """

    __slots__ = ("codes", "_col")

    def __init__(self, col: LabelColumnView, codes: np.ndarray):
        self._col = col
        self.codes = codes

    def code(self, value: str) -> int:
        """The code of ``value`` (-2, matching no node, when no node has it)."""
        return self._col.vocab.get(value, -2)

    def value_of(self, code: int) -> str | None:
        return self._col.values[code] if code >= 0 else None

    @property
    def vocabulary(self) -> list[str]:
        """Every value any node has (index = code)."""
        return self._col.values

    def exists(self) -> np.ndarray:
        return self.codes >= 0

    def equals(self, value: str) -> np.ndarray:
        return self.codes == self.code(value)

    def isin(self, values: Iterable[str]) -> np.ndarray:
        wanted = self._col.codes_of(values)
        if not len(wanted):
            return np.zeros(len(self.codes), dtype=bool)
        return np.isin(self.codes, wanted)

    def ints(self) -> np.ndarray:
        return self._col.ints()[self.codes]  # code -1 picks the trailing NaN

    def totals(self, per_node: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Per value (index = code): the int64 sum of ``per_node`` over the batch's nodes with that
        value (and, given ``mask``, where it is True); nodes without the label count nowhere. With
        ``lookup``, the two steps of a per-domain score (pods per zone, then each node's zone's)."""
        return sum_by_code(self.codes, per_node, len(self._col.values), mask)

    def lookup(self, per_value: np.ndarray, absent: int = 0) -> np.ndarray:
        """``per_value[code]`` for each node of the batch; ``absent`` where the node lacks the label
        or its code is beyond ``per_value``."""
        n = len(per_value)
        # One gather: the codes index a copy padded to the whole vocabulary plus a trailing slot
        # that code -1 (label absent) picks.
        padded = np.full(max(n, len(self._col.values)) + 1, absent, dtype=per_value.dtype)
        padded[:n] = per_value
        out: np.ndarray = padded[self.codes]
        return out


def sum_by_code(codes: np.ndarray, per_node: np.ndarray, size: int, mask: np.ndarray | None = None) -> np.ndarray:
    """int64 array of length ``size`` (at least): the sum of ``per_node`` over the nodes of each
    code, counting only nodes with one (code >= 0) and, given ``mask``, where it is True."""
    keep = codes >= 0
    if mask is not None:
        keep &= mask
    return np.bincount(codes[keep], weights=per_node[keep], minlength=size).astype(np.int64)


class NodeBatch:
    """Candidate nodes for one extension point call: a view over the cache's node table.

    Plugins read nodes through the accessors - ``allocatable(res)``, ``requested(res)``,
    ``non_zero_requested(res)``, ``pod_count()``, ``unschedulable()``, ``label(key)``,
    ``taint_class_ids()``, ``taint_lists`` - which return numpy arrays aligned with the batch (index i is the
    i-th node), or per node through ``infos`` (``NodeInfo``) and ``names``.

    **Per-slot arrays** (a plugin's own per-node cache, built once and read every cycle with one
    ``take``): every node of the snapshot has a slot in its node table, and ``slots`` are the
    batch's. A plugin may keep a numpy array of ``slot_count`` entries indexed by slot - filled
    through ``slot_index`` (node name -> slot) and ``allocatable_by_slot(res)`` - and read a batch's
    part with ``take(array)``. Invariants: a node keeps its slot while it exists; a removed node's
    slot may be given to a new node; slots that hold no node are never in a batch; ``nodes_version``
    changes whenever a node is added, changed or removed (or the table is another one), so an array
    built under one ``nodes_version`` is valid exactly while it is unchanged. ``table`` itself is
    the engine's; plugins do not use it.
    """

    __slots__ = ("slots", "table", "_infos")

    def __init__(self, table: NodeColumns, slots: np.ndarray):
        self.table = table
        self.slots = slots
        self._infos: list[NodeInfo] | None = None

    def __len__(self) -> int:
        return len(self.slots)

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.infos)

    @property
    def infos(self) -> list[NodeInfo]:
        if self._infos is None:
            tinfos = self.table.infos
            self._infos = [tinfos[s] for s in self.slots.tolist()]
        return self._infos

    @property
    def names(self) -> list[str]:
        return [i.spec.name for i in self.infos]

    def subset(self, mask: np.ndarray) -> NodeBatch:
        return NodeBatch(self.table, self.slots[mask])

    # -- accessors -----------------------------------------------------------------------------

    def has_resource(self, resource: str) -> bool:
        """Whether any node (or pod) of the cluster has ever named ``resource``."""
        return resource in self.table.res_index

    def allocatable(self, resource: str) -> np.ndarray:
        """int64 allocatable of ``resource`` per node (cpu in millicores; 0 where absent)."""
        i = self.table.res_index.get(resource)
        if i is None:
            return np.zeros(len(self.slots), dtype=np.int64)
        return self.table.alloc[self.slots, i]

    def requested(self, resource: str) -> np.ndarray:
        """int64 sum of the requests of the pods on each node (bound or assumed)."""
        i = self.table.res_index.get(resource)
        if i is None:
            return np.zeros(len(self.slots), dtype=np.int64)
        return self.table.req[self.slots, i]

    def non_zero_requested(self, resource: str) -> np.ndarray:
        """``cpu`` (millicores) or ``memory`` (bytes) requested per node, counting 100m / 200Mi for
        containers that request nothing (kube-scheduler's non-zero requests, used by scores)."""
        return self.table.non0[self.slots, _NON_ZERO_COLUMNS[resource]]

    def pod_count(self) -> np.ndarray:
        return self.table.npods[self.slots]

    def unschedulable(self) -> np.ndarray:
        """``spec.unschedulable`` per node."""
        return self.table.unsched[self.slots]

    def label(self, key: str) -> LabelValues:
        col = self.table.label_column(key)
        return LabelValues(col, col.codes[self.slots])

    @property
    def taint_lists(self) -> list[tuple[Taint, ...]]:
        """Every distinct taint list in the snapshot; its index is the taint class id (0: no taints)."""
        return self.table.taint_sets

    def taint_class_ids(self) -> np.ndarray:
        """The taint class of each node: nodes with the same taints share a class, so a toleration
        check runs once per distinct taint list (``taint_lists[id]``)."""
        return self.table.taint_class[self.slots]

    def index_of(self, node_name: str) -> int:
        """Position of ``node_name`` in the batch, -1 when it is not there."""
        slot = self.table.slot_by_name.get(node_name, -1)
        if slot < 0:
            return -1
        hits = np.flatnonzero(self.slots == slot)
        return int(hits[0]) if len(hits) else -1

    def take(self, per_slot: np.ndarray) -> np.ndarray:
        """An array indexed by table slot (what snapshot queries return), aligned with the batch."""
        return per_slot[self.slots]

    # -- per-slot arrays (see the class docstring) -------------------------------------------------

    @property
    def slot_count(self) -> int:
        """The length of a per-slot array: every slot of the node table, free ones included."""
        return len(self.table.infos)

    @property
    def slot_index(self) -> Mapping[str, int]:
        """Every node of the snapshot (not only the batch's): name -> slot. Read-only, and live:
        it follows the table as nodes come and go."""
        return self.table.slot_by_name

    @property
    def nodes_version(self) -> tuple[int, int, int]:
        """Changes whenever a per-slot array must be rebuilt (a node added, changed or removed)."""
        return (id(self.table), self.table.version, len(self.table.infos))

    def allocatable_by_slot(self, resource: str) -> np.ndarray:
        """int64 allocatable of ``resource`` for every slot (0 where absent or free)."""
        i = self.table.res_index.get(resource)
        if i is None:
            return np.zeros(len(self.table.infos), dtype=np.int64)
        out: np.ndarray = self.table.alloc[:, i]
        return out

    @property
    def memo(self) -> dict[Any, Any]:
        """A per-snapshot dict for plugins to memoise results across cycles (keys: plugin-prefixed)."""
        return self.table.memo


class OverlayBatch(NodeBatch):
    """A batch whose pods are changed on paper: ``requested`` and ``pod_count`` read the table plus
    per-node deltas (``d_req``: nodes x the table's resources; ``d_pods``: per node), the other
    accessors the nodes as they are. Preemption's dry runs and the nominated pods a cycle must
    count use it instead of moving pods in the cache, when every Filter that runs reads the pods
    on a node only through those two accessors (``FilterPlugin.reads_pods``)."""

    __slots__ = ("d_req", "d_pods")

    def __init__(self, table: NodeColumns, slots: np.ndarray, d_req: np.ndarray, d_pods: np.ndarray):
        super().__init__(table, slots)
        self.d_req = d_req
        self.d_pods = d_pods

    def subset(self, mask: np.ndarray) -> NodeBatch:
        return OverlayBatch(self.table, self.slots[mask], self.d_req[mask], self.d_pods[mask])

    def requested(self, resource: str) -> np.ndarray:
        i = self.table.res_index.get(resource)
        if i is None:
            return np.zeros(len(self.slots), dtype=np.int64)
        out: np.ndarray = self.table.req[self.slots, i] + self.d_req[:, i]
        return out

    def non_zero_requested(self, resource: str) -> np.ndarray:
        raise NotImplementedError("non_zero_requested is a scoring accessor: not available on an OverlayBatch")

    def pod_count(self) -> np.ndarray:
        out: np.ndarray = self.table.npods[self.slots] + self.d_pods
        return out


class FilterResult:
    """Outcome of a batch filter over a NodeBatch.

    ``passed[i]`` says whether node i passes. ``failures`` lists (code, reason, mask) entries;
    a failing node's Status has every reason whose mask covers it, and the highest code.
    """

    __slots__ = ("passed", "failures")

    def __init__(self, passed: np.ndarray, failures: list[tuple[Code, str, np.ndarray]] | None = None):
        self.passed = passed
        self.failures = failures or []

    @classmethod
    def all_pass(cls, n: int) -> FilterResult:
        return cls(np.ones(n, dtype=bool))

    @classmethod
    def from_mask(cls, passed: np.ndarray, code: Code, reason: str) -> FilterResult:
        if passed.all():
            return cls(passed)
        return cls(passed, [(code, reason, ~passed)])

    @classmethod
    def each(cls, nodes: NodeBatch, check: Callable[[NodeInfo], Status | None]) -> FilterResult:
        """Per-node logic as a batch result: ``check(node)`` returns None to pass, or the
        rejecting Status. An Error status aborts the cycle (raises FrameworkError)."""

        passed = np.ones(len(nodes), dtype=bool)
        groups: dict[tuple[Code, str], list[int]] = {}
        for i, info in enumerate(nodes.infos):
            st = check(info)
            if st is None or st.is_success():
                continue
            if st.code == Code.ERROR:
                raise FrameworkError(st)
            passed[i] = False
            for r in st.reasons or ("",):
                groups.setdefault((st.code, r), []).append(i)
        failures = []
        for (c, r), idx in groups.items():
            m = np.zeros(len(nodes), dtype=bool)
            m[idx] = True
            failures.append((c, r, m))
        return cls(passed, failures)

    def status_at(self, i: int, plugin: str = "") -> Status | None:
        if self.passed[i]:
            return None
        code = Code.UNSCHEDULABLE
        reasons = []
        for c, reason, mask in self.failures:
            if mask[i]:
                reasons.append(reason)
                if c > code:
                    code = c
        return Status(code, *reasons, plugin=plugin)


def scores_each(nodes: NodeBatch, score: Callable[[NodeInfo], int]) -> np.ndarray:
    """Per-node scoring logic as a batch result: ``score(node)`` for each node, as int64."""
    return np.fromiter((score(info) for info in nodes.infos), dtype=np.int64, count=len(nodes))


@dataclass
class PreFilterResult:
    """Restricts the nodes to evaluate (``None`` = all nodes)."""
    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return self
        assert other.node_names is not None
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass
class PostFilterResult:
    """A PostFilter outcome that sets the pod's nominated node (an empty name clears it; no
    result at all leaves it as it is). ``victims``: the pods a preemption evicts (``ns/name``)."""
    nominated_node_name: str = ""
    victims: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of change that may make a rejected pod schedulable (``EventsToRegister``)."""
    resource: str      # "Node", "Pod", "AssignedPod", "PersistentVolumeClaim", ... or "*"
    action: str        # "Add", "Update", "Delete", "UpdateNodeLabel", "UpdateNodeTaint", "*"...


QueueingHint = Callable[["PodInfo", Any, Any], bool]
"""``hint(pod, old, new) -> bool``: True when the event may make ``pod`` (rejected by this plugin)
schedulable, so it goes back to the queue. ``old``/``new`` are the changed object before and after
(None for an add / a delete), typed by the event's resource: ``NodeEventHint`` for Node events,
``PodEventHint`` for Pod / AssignedPod events, ``ObjectEventHint`` (the API object as a dict) for
the others (PersistentVolumeClaim, ResourceSlice, CSINode, ...)."""
NodeEventHint = Callable[["PodInfo", "NodeSpec | None", "NodeSpec | None"], bool]
PodEventHint = Callable[["PodInfo", "PodInfo | None", "PodInfo | None"], bool]
ObjectEventHint = Callable[["PodInfo", "dict[str, Any] | None", "dict[str, Any] | None"], bool]


@dataclass(frozen=True)
class ClusterEventWithHint:
    """An event a plugin registers (``EnqueueExtensions.events_to_register``), with an optional
    ``QueueingHint``; without one, every such event requeues the pods the plugin rejected."""
    event: ClusterEvent
    hint: QueueingHint | None = None


ArgsT = TypeVar("ArgsT", default=None)
"""A plugin's typed arguments: ``class MyPlugin(ScorePlugin[MyArgs])`` (no type: no arguments)."""


class Plugin(Generic[ArgsT]):
    """Base of every plugin: ``class MyPlugin(FilterPlugin[MyArgs], ScorePlugin[MyArgs])``.

    A subclass sets ``name`` (the name profiles use). Its arguments are the dataclass it names as
    the type parameter (``MyArgs``, decoded from ``pluginConfig``; see ``framework.args``), which
    becomes ``Args`` and types ``self.args``: the framework builds ``MyArgs()`` when the profile
    gives none, so ``self.args`` is never None in a plugin that has arguments. A plugin without
    arguments names no type (``self.args`` is None).
    """

    name: ClassVar[str] = ""
    Args: ClassVar[type[Any] | None] = None   # set from the type parameter (or by hand): a dataclass, or None
    # Optional API kinds (object-store plurals, e.g. "podgroups") this plugin reads: the scheduler
    # lists and watches an optional kind - and needs RBAC for it - only when an enabled plugin
    # names it here. A class sets it; an instance may set its own in ``__init__`` (a kind read only
    # under a feature gate: DynamicResources' "devicetaintrules").
    object_kinds: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = _args_type_of(cls)
        if declared is None:
            return
        own = cls.__dict__.get("Args")
        if own is not None and own is not declared:
            raise TypeError(f"{cls.__name__}: Args = {own.__name__} but the class is typed with "
                            f"{declared.__name__}; name one (the type parameter is enough)")
        cls.Args = declared

    def __init__(self, args: ArgsT | None, handle: Handle) -> None:
        """``args``: the decoded ``Args``, or None when the profile gave none (the defaults are
        built here); ``handle``: what the plugin may reach."""
        if args is None and self.Args is not None:
            args = self.Args()
        self.args: ArgsT = cast(ArgsT, args)
        self.handle = handle

    def __repr__(self) -> str:
        return f"<plugin {self.name}>"


def _args_type_of(cls: type) -> type | None:
    """The dataclass a plugin class names as its type parameter (``FilterPlugin[MyArgs]``), if any."""
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = typing.get_origin(base)
        if isinstance(origin, type) and issubclass(origin, Plugin):
            for arg in typing.get_args(base):
                if isinstance(arg, type) and dataclasses.is_dataclass(arg):
                    return arg
    return None


class PreEnqueuePlugin(Plugin[ArgsT]):
    """PreEnqueue: whether a pod may enter the active queue at all.

    When: on every add or update of a pending pod of the profile, before it is queued. Return None
    to let it in, or a non-success Status to hold it (gated: no attempt, no condition, no event, as
    upstream's SchedulingGates). Must not: call the API, block, or depend on nodes. Cost: per pod
    event on the informer's hot path - constant time.
    """

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        raise NotImplementedError


class QueuedPod(Protocol):
    """What a QueueSort plugin reads of a queued pod: the pod and when it was (re)queued."""

    @property
    def pod(self) -> PodInfo: ...

    @property
    def timestamp(self) -> float:
        """Monotonic seconds when the pod last entered the active queue."""
        ...


class QueueSortPlugin(Plugin[ArgsT]):
    """QueueSort: the order of the active queue. Exactly one per scheduler (every profile shares it).

    When: on every heap insertion. Return a key; smaller pops first (PrioritySort: higher priority,
    then earlier queue time). Must not: change between calls for the same pod state, or read the
    cluster. Cost: per heap operation - a tuple from the pod's fields.
    """

    def sort_key(self, qpi: QueuedPod) -> tuple[Any, ...]:
        """Key for the activeQ heap: smaller pops first."""
        raise NotImplementedError


class EnqueueExtensions:
    """Events that may make a pod this plugin rejected schedulable again (``EventsToRegister``).

    When: once, at start-up. Each ``ClusterEventWithHint`` names a resource and action and an
    optional queueing hint ``(pod, old, new) -> bool`` that decides, per event, whether the waiting
    pod is worth another attempt. Without it, a rejected pod waits for the 5-minute flush. Hints
    run on the informer's hot path: compare fields, do not allocate much, never call the API.
    """

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return ()


READS_NONE, READS_REQUESTS, READS_ANY = "none", "requests", "any"


class PreFilterPlugin(Plugin[ArgsT]):
    """PreFilter: work done once per pod per cycle, before any node is filtered.

    When: first in each scheduling cycle. Write what Filter and Score need into ``state`` (the
    pod's own requests, its parsed terms); return ``(PreFilterResult, None)`` to restrict the nodes
    (``PreFilterResult(node_names)``), ``(None, Status(Code.SKIP))`` when the plugin has nothing to
    check for this pod (its Filter is then skipped), or a non-success Status to reject the pod on
    every node. Must not: write to the API or keep per-pod state on ``self``. Cost: once per cycle,
    so work that depends only on the pod belongs here, not in Filter.
    """

    # Whether what PreFilter computes (its CycleState entries, its PreFilterResult) depends on
    # which other pods run where. Preemption's dry runs and the filtering of nodes with nominated
    # pods evaluate the pod on a changed pod set: a plugin that reads other pods (inter-pod
    # affinity, topology spread, ...) must see PreFilter run again, one that does not (the pod's
    # own requests, ports, volumes, claims) lets that state be reused - as upstream reuses it,
    # updating only the plugins with PreFilterExtensions. True unless a plugin says otherwise: the
    # safe answer for a plugin that does not know. A plugin that returned Skip counts as False.
    pre_filter_reads_other_pods: ClassVar[bool] = True

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        raise NotImplementedError


class FilterPlugin(Plugin[ArgsT]):
    """Filter: which nodes can run the pod.

    When: every cycle, on batches of candidate nodes (the whole batch at once, vectorised over the
    node table; ``FilterResult.each`` for per-node logic). Return a ``FilterResult``: pass/fail per
    node and, for the failed ones, a code (``UNSCHEDULABLE``: preemption may help;
    ``UNSCHEDULABLE_AND_UNRESOLVABLE``: it will not) and a reason, counted into kube-scheduler's
    ``0/N nodes are available`` message. A node's verdict must not depend on the batch's other nodes
    (``PluginTester`` checks it). Must not: write to the API or state shared across pods. Cost: the
    hot path - no per-node API calls, no Python loop over nodes where a vector check will do.
    """

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        """Which of ``nodes`` can run ``pod``: vector checks over the batch's accessors, or
        ``FilterResult.each(nodes, check)`` for per-node logic."""
        raise NotImplementedError

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        """How this Filter's verdict on ``pod`` depends on the pods already on a node: ``"none"``
        (node properties only), ``"requests"`` (only through ``NodeBatch.requested`` and
        ``pod_count``), or ``"any"`` - the default, always safe. Preemption's dry runs and the
        nodes with nominated pods are evaluated on paper (``OverlayBatch``), without moving pods
        in the cache, when every Filter that runs says "none" or "requests"."""
        return READS_ANY


class PostFilterPlugin(Plugin[ArgsT]):
    """PostFilter: what to do when no node passed Filter (DefaultPreemption, Coscheduling).

    When: after a cycle found no feasible node. Return ``(PostFilterResult(nominated_node), None)``
    to nominate a node (preemption), or a Status saying why nothing helps; the message ends the
    pod's FailedScheduling event. May: evict victims through the handle (asynchronously). Cost: rare,
    but may dry-run Filter over many nodes - bound it.
    """

    def post_filter(self, state: CycleState, pod: PodInfo,
                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        raise NotImplementedError


class PreScorePlugin(Plugin[ArgsT]):
    """PreScore: work done once per cycle before scoring, over the feasible nodes.

    When: after Filter, with the nodes that passed. Write what Score reads into ``state``; return
    ``Status(Code.SKIP)`` when this plugin has nothing to score for the pod (its Score is skipped),
    a non-success Status to fail the cycle. Must not: write to the API. Cost: once per cycle.
    """

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        raise NotImplementedError


NormalizeScore = Callable[["CycleState", "PodInfo", NodeBatch, npt.NDArray[np.int64]], "Status | None"]
"""``normalize_score(state, pod, nodes, scores)``: ScoreExtensions.NormalizeScore, on the scores of
every feasible node at once (``scores`` aligned with ``nodes``, changed in place)."""


class ScorePlugin(Plugin[ArgsT]):
    """Score: how much the plugin likes each feasible node.

    When: after PreScore, on batches of feasible nodes. Return one integer per node of the batch,
    aligned with it (an int64 array, or ``scores_each(nodes, fn)``); after the optional
    ``normalize_score`` every score must be in [0, 100] (``MIN_NODE_SCORE``..``MAX_NODE_SCORE``),
    then the profile's weight multiplies it. A float that is not a whole number, or a score out of
    range, fails the cycle with an error naming the plugin. Must not: depend on the batch's other
    nodes (normalize in ``normalize_score``, which sees them all), call the API. Cost: the hot path,
    as Filter.
    """

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray | Sequence[int]:
        """A score per node of ``nodes`` (0..100 once normalised), aligned with the batch; or
        ``scores_each(nodes, fn)`` for per-node logic. Raise ``FrameworkError(Status(Code.ERROR,
        ...))`` to fail the cycle."""
        raise NotImplementedError

    # Optional ScoreExtensions.NormalizeScore: a method ``normalize_score(state, pod, nodes, scores)``
    # (``NormalizeScore``) that adjusts ``scores`` - every Score of the batch, int64 - in place, so
    # they are in 0..100 afterwards; None for a plugin whose raw scores already are.
    normalize_score: NormalizeScore | None = None


class ReservePlugin(Plugin[ArgsT]):
    """Reserve / Unreserve: claim resources for the chosen node, and give them back.

    When: ``reserve`` after the node is chosen and the pod assumed on it, before Permit; a
    non-success Status aborts the cycle. ``unreserve`` whenever a later step fails (Permit rejects,
    PreBind or Bind fails, the binding cycle is cancelled): it must undo ``reserve`` exactly and
    must not fail. Both must be idempotent and quick; no API writes (that is PreBind's job).
    """

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin[ArgsT]):
    """Permit: approve, deny or hold the pod after Reserve (gangs hold members here).

    When: after Reserve. Return ``(None, 0)`` to approve, ``(Status(Code.WAIT), timeout_seconds)``
    to hold the pod in the waiting room until ``WaitingPod.allow``/``reject`` is called (another
    cycle's Permit, typically) or the timeout rejects it, or a non-success Status to reject it now
    (Unreserve runs). Must not block: waiting happens outside the scheduling cycle.
    """

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """Return (status, timeout seconds); a WAIT status holds the pod until allowed or rejected."""
        raise NotImplementedError


class PreBindPlugin(Plugin[ArgsT]):
    """PreBind: API writes the bind depends on (volume binding, DRA allocations).

    When: in the binding cycle (asynchronous, off the scheduling loop), after Permit. ``async``:
    await the API through the handle's client; every write goes through the leader fence. A
    non-success Status fails the binding cycle (Unreserve runs, the pod is retried). Must be safe
    to run again for the same pod.
    """

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        raise NotImplementedError


class BindPlugin(Plugin[ArgsT]):
    """Bind: write the pod's node (DefaultBinder POSTs the Binding subresource).

    When: after PreBind, in the binding cycle. Return None when bound, ``Status(Code.SKIP)`` to let
    the next Bind plugin try, or an error. A failed answer is settled by the engine (the bind may
    have taken effect): do not retry inside the plugin.
    """

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        raise NotImplementedError


class PostBindPlugin(Plugin[ArgsT]):
    """PostBind: informational, after a successful bind (clean-up, metrics). Must not fail or block."""

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise NotImplementedError


@dataclass
class Placement:
    """A set of nodes a pod group may be placed on as a whole (the pod-group cycle): ``name`` is the
    topology domain ("" for every node), ``slots`` the nodes' slots in the snapshot's table.
    ``tier``: placements are tried tier by tier, lowest first, and the cycle stops at the first tier
    where the group fits (a rack before a block before a zone); upstream's generator makes one tier."""

    name: str
    slots: np.ndarray
    tier: int = 0


@dataclass
class PodGroupCycleInfo:
    """What placement plugins see of the group being scheduled: its PodGroup (a
    ``framework.podgroups.WorkloadPodGroup``), its members already scheduled (bound or assumed) and
    the members this cycle places."""

    pod_group: Any
    scheduled: list[PodInfo]
    members: list[PodInfo]


class PlacementGeneratePlugin(Plugin[ArgsT]):
    """PlacementGenerate (Kubernetes 1.37, TopologyAwareWorkloadScheduling): split ``parent`` into the
    placements a whole pod group is tried on (TopologyPlacementGenerator: one per domain of the
    group's topology key). Return ``[parent]`` when the group has nothing to split on."""

    def generate_placements(self, group: PodGroupCycleInfo, parent: Placement,
                            nodes: NodeBatch) -> list[Placement]:
        raise NotImplementedError


class PlacementScorePlugin(Plugin[ArgsT]):
    """PlacementScore: rank the placements a pod group fits in whole. ``assignments`` are the
    (pod, node) pairs the group's members got in ``placement``; ``nodes`` the placement's nodes.
    Scores are weighted by the plugin's weight and summed; the highest total wins (ties at random).
    A plugin may define ``normalize_placement_scores(group, scores) -> Status | None`` to rescale its
    scores (in place) to 0..100 once all placements are scored."""

    def score_placement(self, group: PodGroupCycleInfo, placement: Placement, nodes: NodeBatch,
                        assignments: Sequence[tuple[PodInfo, str]]) -> int:
        raise NotImplementedError


EXTENSION_POINTS: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
    "placementGenerate": PlacementGeneratePlugin,
    "placementScore": PlacementScorePlugin,
}


class PodWatcher:
    """A plugin that keeps its own view of pods, as upstream plugins add informer handlers: the
    engine calls ``pod_seen`` for every pod of ours it learns of or sees change (pending, assumed
    ones excepted, or bound - by anyone) and ``pod_gone`` when a pod is deleted or terminates.
    Called on the event loop between cycles; must be cheap (no I/O, O(1) for pods it ignores)."""

    def pod_seen(self, pod: PodInfo) -> None:
        raise NotImplementedError

    def pod_gone(self, uid: str) -> None:
        raise NotImplementedError


class PreemptionGate:
    """A plugin that may forbid a pod from preempting others (DefaultPreemption asks every gate
    before its dry runs): ``preemption_blocked(pod)`` returns why not, or "" to let it try."""

    def preemption_blocked(self, pod: PodInfo) -> str:
        raise NotImplementedError


class QuotaStatusSource:
    """A plugin whose quota usage the scheduler publishes as ElasticQuota ``status.used``
    (CapacityScheduling). When a profile enables one, the scheduler process runs its ElasticQuota
    status controller on it (``--elasticquota-controller auto``; never in shadow mode, nor offline);
    with several, the first of the first profile that has one.

    When: ``watch_usage`` once, while the process is assembled, before any informer runs; from then
    on the plugin calls that callback with each namespace whose usage changed (on the event loop,
    from ``pod_seen``/``pod_gone``, Reserve/Unreserve or a preemption). ``bound_used`` is read when
    the controller, on the leader only, reconciles a namespace's quotas. Must: answer from memory,
    without I/O; return a dict the caller may keep (a copy, not the plugin's own)."""

    def bound_used(self, namespace: str) -> dict[str, int]:
        """What the namespace's bound pods (on a node, not terminated) request, by resource, in the
        scheduler's units (``format_resource`` writes them back as quantities)."""
        raise NotImplementedError

    def watch_usage(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(namespace)`` whenever that namespace's usage changes (one callback: a
        later call replaces the earlier one)."""
        raise NotImplementedError


@dataclass
class WaitingPod:
    """A pod held at Permit. Plugins call ``allow(plugin)`` or ``reject(plugin, msg)``.

    Either may come before the binding cycle starts waiting (``future`` not created yet): an
    allow empties ``pending``, a rejection is kept in ``rejection``, and the wait ends at once."""
    pod: PodInfo
    pending: set[str] = field(default_factory=set)
    future: asyncio.Future[Status | None] | None = None
    rejection: Status | None = None
    timeouts: dict[str, float] = field(default_factory=dict)   # plugin -> the wait it asked for, s

    def allow(self, plugin: str) -> None:
        self.pending.discard(plugin)
        if not self.pending and self.future is not None and not self.future.done():
            self.future.set_result(None)

    def reject(self, plugin: str, msg: str) -> None:
        self._stop(Status(Code.UNSCHEDULABLE, msg, plugin=plugin))

    def preempt(self, plugin: str, msg: str) -> None:
        """The pod was chosen as a preemption victim while it waited (kube-scheduler 1.37's
        ``WaitingPod.Preempt``): its cycle ends with an Error, not Unschedulable, so it goes back
        through the error backoff rather than to the unschedulable pool."""
        self._stop(Status(Code.ERROR, msg, plugin=plugin))

    def _stop(self, st: Status) -> None:
        if self.future is None:
            if self.rejection is None:
                self.rejection = st
        elif not self.future.done():
            self.future.set_result(st)
