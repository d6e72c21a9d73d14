"""Plugin interfaces: one base class per extension point, as in kube-scheduler's framework.

A plugin is a plain Python class with a ``name`` that subclasses the extension points it
implements; the framework finds them by ``isinstance``, the way Go finds implemented interfaces.
Constructor: ``Plugin(args, handle)`` where ``args`` is the plugin's typed arguments (its ``Args``
class built from ``pluginConfig``) and ``handle`` gives access to the snapshot, the client and
the event recorder.

Filter and Score have two forms. The per-node form (``filter``/``score``) is all a plugin author
must write. A plugin may also implement the batch form (``filter_nodes``/``score_nodes``), which
receives every candidate node at once as a ``NodeBatch`` over the ``NodeTable`` columns; the
framework then uses it on the hot path and keeps the per-node form for explanations and for the
extender server. Both forms must agree; the in-tree plugins have tests that check they do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

import numpy as np

from pysched.framework.status import Code, Status

if TYPE_CHECKING:
    from pysched.framework.nodeinfo import NodeInfo
    from pysched.backend.cache.nodetable import NodeTable
    from pysched.framework.podinfo import PodInfo
    from pysched.framework.cycle_state import CycleState

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_EXTENDER_PRIORITY = 10
MIN_EXTENDER_PRIORITY = 0
MAX_TOTAL_SCORE = 2**63 - 1


class NodeBatch:
    """A set of candidate nodes: ``slots`` index the NodeTable arrays."""

    __slots__ = ("slots", "table", "_infos")

    def __init__(self, table: "NodeTable", slots: np.ndarray):
        self.table = table
        self.slots = slots
        self._infos = None

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def infos(self) -> list["NodeInfo"]:
        if self._infos is None:
            tinfos = self.table.infos
            self._infos = [tinfos[s] for s in self.slots.tolist()]
        return self._infos

    @property
    def names(self) -> list[str]:
        return [i.spec.name for i in self.infos]

    def subset(self, mask: np.ndarray) -> "NodeBatch":
        return NodeBatch(self.table, self.slots[mask])


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
    def all_pass(cls, n: int) -> "FilterResult":
        return cls(np.ones(n, dtype=bool))

    @classmethod
    def from_mask(cls, passed: np.ndarray, code: Code, reason: str) -> "FilterResult":
        if passed.all():
            return cls(passed)
        return cls(passed, [(code, reason, ~passed)])

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


@dataclass
class PreFilterResult:
    """Restricts the nodes to evaluate (``None`` = all nodes)."""
    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: "PreFilterResult | None") -> "PreFilterResult":
        if other is None or other.all_nodes():
            return self
        if self.all_nodes():
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass
class PostFilterResult:
    nominated_node_name: str = ""


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of change that may make a rejected pod schedulable (``EventsToRegister``)."""
    resource: str      # "Node", "Pod", "AssignedPod", "PersistentVolumeClaim", ... or "*"
    action: str        # "Add", "Update", "Delete", "UpdateNodeLabel", "UpdateNodeTaint", "*"...


@dataclass(frozen=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: Callable[..., bool] | None = None  # (pod, old, new) -> True to requeue


class Plugin:
    """Base of every plugin. Subclasses set ``name`` and optionally ``Args``."""

    name: ClassVar[str] = ""
    Args: ClassVar[Any] = None

    def __init__(self, args: Any = None, handle: Any = None):
        self.args = args
        self.handle = handle

    def __repr__(self) -> str:
        return f"<plugin {self.name}>"


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: "PodInfo") -> Status | None:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def sort_key(self, qpi: Any) -> tuple:
        """Key for the activeQ heap: smaller pops first."""
        raise NotImplementedError


class EnqueueExtensions:
    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return ()


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: "CycleState", pod: "PodInfo",
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        raise NotImplementedError


class FilterPlugin(Plugin):
    def filter(self, state: "CycleState", pod: "PodInfo", node: "NodeInfo") -> Status | None:
        raise NotImplementedError

    # Optional fast path; the default loops over ``filter``.
    filter_nodes: Callable[..., FilterResult] | None = None


class PostFilterPlugin(Plugin):
    def post_filter(self, state: "CycleState", pod: "PodInfo",
                    diagnosis: Any) -> tuple[PostFilterResult | None, Status | None]:
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: "CycleState", pod: "PodInfo", nodes: NodeBatch) -> Status | None:
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, state: "CycleState", pod: "PodInfo", node: "NodeInfo") -> int | tuple[int, Status | None]:
        raise NotImplementedError

    # Optional fast path returning an int64 array aligned with ``nodes``.
    score_nodes: Callable[..., np.ndarray] | None = None
    # Optional ScoreExtensions.NormalizeScore: adjust ``scores`` in place (0..100 afterwards).
    normalize_score: Callable[..., Status | None] | None = None


class ReservePlugin(Plugin):
    def reserve(self, state: "CycleState", pod: "PodInfo", node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: "CycleState", pod: "PodInfo", node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: "CycleState", pod: "PodInfo", node_name: str) -> tuple[Status | None, float]:
        """Return (status, timeout seconds); a WAIT status holds the pod until allowed or rejected."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind(self, state: "CycleState", pod: "PodInfo", node_name: str) -> Status | None:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: "CycleState", pod: "PodInfo", node_name: str) -> Status | None:
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: "CycleState", pod: "PodInfo", node_name: str) -> None:
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
}


@dataclass
class WaitingPod:
    """A pod held at Permit. Plugins call ``allow(plugin)`` or ``reject(plugin, msg)``."""
    pod: Any
    pending: set[str] = field(default_factory=set)
    future: Any = None

    def allow(self, plugin: str) -> None:
        self.pending.discard(plugin)
        if not self.pending and self.future is not None and not self.future.done():
            self.future.set_result(None)

    def reject(self, plugin: str, msg: str) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(Status(Code.UNSCHEDULABLE, msg, plugin=plugin))
