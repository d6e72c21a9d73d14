"""Status: the result every plugin returns, with kube-scheduler's codes and meaning.

``None`` and a ``SUCCESS`` status both mean success. The codes (``framework/interface.go``):

* ``ERROR`` - an internal error; the pod goes to the backoff queue, condition ``SchedulerError``.
* ``UNSCHEDULABLE`` - the pod does not fit this node now; preemption (PostFilter) may help.
* ``UNSCHEDULABLE_AND_UNRESOLVABLE`` - the pod can never fit this node whatever is evicted;
  PostFilter skips the node.
* ``WAIT`` - only from Permit: hold the pod until allowed, rejected or timed out.
* ``SKIP`` - from PreFilter/PreScore: skip this plugin's Filter/Score for the cycle; from Bind:
  this binder does not handle the pod, try the next one.
* ``PENDING`` - the pod waits for something outside scheduling; it is requeued without backoff
  when a registered event arrives.

Diagnosis and FitError say why a pod did not fit, in kube-scheduler's words.
The message is byte-compatible with upstream ``FitError.Error()``::

    0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint {dedicated: gpu}.

reasons are counted per node (a node short of cpu and memory counts for both), rendered as
``"<count> <reason>"``, sorted as strings and joined by ", "; a PreFilter rejection replaces the
per-node reasons; a PostFilter message is appended after a space.

``FrameworkError``: a plugin returned an Error status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pysched.framework.interface import FilterResult


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def upstream(self) -> str:
        return {0: "Success", 1: "Error", 2: "Unschedulable", 3: "UnschedulableAndUnresolvable",
                4: "Wait", 5: "Skip", 6: "Pending"}[int(self)]


class Status:
    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, plugin: str = "",
                 error: BaseException | None = None):
        self.code = Code(code)
        self.reasons = tuple(reasons)
        self.plugin = plugin
        self.error = error

    @classmethod
    def as_error(cls, err: BaseException | str, plugin: str = "") -> Status:
        if isinstance(err, BaseException):
            return cls(Code.ERROR, str(err) or type(err).__name__, plugin=plugin, error=err)
        return cls(Code.ERROR, err, plugin=plugin)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def with_plugin(self, plugin: str) -> Status:
        if not self.plugin:
            self.plugin = plugin
        return self

    def __repr__(self) -> str:
        p = f" plugin={self.plugin}" if self.plugin else ""
        return f"Status({self.code.name}{p}: {self.message()!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Status) and self.code == other.code
                and self.reasons == other.reasons)

    __hash__ = None  # type: ignore[assignment]


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def code_of(status: Status | None) -> Code:
    return Code.SUCCESS if status is None else status.code


SUCCESS = Code.SUCCESS
ERROR = Code.ERROR
UNSCHEDULABLE = Code.UNSCHEDULABLE
UNSCHEDULABLE_AND_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
WAIT = Code.WAIT
SKIP = Code.SKIP
PENDING = Code.PENDING


NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_REGISTERED_MSG = "no nodes available to schedule pods"
EXTENDER_NAME = "Extender"


class Diagnosis:
    """What the filters said about the nodes that failed."""

    __slots__ = ("reason_counts", "unschedulable_plugins", "pending_plugins", "pre_filter_msg",
                 "post_filter_msg", "num_failed", "absent_status", "_records", "_explicit")

    def __init__(self) -> None:
        self.reason_counts: Counter[str] = Counter()
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""
        self.num_failed = 0
        self.absent_status: Status | None = None
        self._records: list[tuple[str, Callable[[], list[str]] | list[str], FilterResult]] = []
        self._explicit: dict[str, Status] = {}

    def add_batch(self, plugin: str, names_fn: Callable[[], list[str]] | list[str], result: FilterResult) -> None:
        failed = ~result.passed
        n_failed = int(failed.sum())
        if not n_failed:
            return
        self.num_failed += n_failed
        for _code, reason, mask in result.failures:
            c = int(np.count_nonzero(mask & failed))
            if c:
                self.reason_counts[reason] += c
        codes = {c for c, _, m in result.failures}
        if Code.PENDING in codes:
            self.pending_plugins.add(plugin)
        if codes - {Code.PENDING} or not codes:
            self.unschedulable_plugins.add(plugin)
        self._records.append((plugin, names_fn, result))

    def add_node_status(self, node: str, status: Status) -> None:
        """A single node's failure (extenders, per-node paths)."""
        self.num_failed += 1
        for r in status.reasons:
            self.reason_counts[r] += 1
        self._explicit[node] = status
        if status.plugin:
            if status.code == Code.PENDING:
                self.pending_plugins.add(status.plugin)
            else:
                self.unschedulable_plugins.add(status.plugin)

    def node_statuses(self) -> Iterator[tuple[str, Status]]:
        """Every failed node with its Status (materialised on demand: preemption, explain)."""
        for plugin, names_fn, result in self._records:
            names = names_fn() if callable(names_fn) else names_fn
            for i in np.flatnonzero(~result.passed).tolist():
                st = result.status_at(i, plugin)
                if st is not None:
                    yield names[i], st
        yield from self._explicit.items()

    def node_codes(self) -> dict[str, int]:
        """Every failed node's status code (as ``node_statuses`` would give it) without building
        the Statuses: what preemption needs to pick the nodes worth a dry run."""
        out: dict[str, int] = {}
        for _plugin, names_fn, result in self._records:
            names = names_fn() if callable(names_fn) else names_fn
            code = np.full(len(result.passed), int(Code.UNSCHEDULABLE), dtype=np.int64)
            for c, _, mask in result.failures:
                np.maximum(code, np.where(mask, int(c), 0), out=code)
            idx = np.flatnonzero(~result.passed)
            for i, c in zip(idx.tolist(), code[idx].tolist()):
                out[names[i]] = c
        for node, st in self._explicit.items():
            out[node] = int(st.code)
        return out

    def node_status_map(self) -> dict[str, Status]:
        return dict(self.node_statuses())


class FitError(Exception):
    """No node fits the pod."""

    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis):
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__(self.message())

    def message(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            counts = Counter(d.reason_counts)
            if d.num_failed < self.num_all_nodes and d.absent_status is not None:
                for r in d.absent_status.reasons:
                    counts[r] += self.num_all_nodes - d.num_failed
            parts = sorted(f"{v} {k}" for k, v in counts.items())
            if parts:
                msg += f" {', '.join(parts)}."
        if d.post_filter_msg:
            msg += f" {d.post_filter_msg}"
        return msg


class NoNodesAvailable(Exception):
    def __init__(self) -> None:
        super().__init__(NO_NODES_REGISTERED_MSG)


class FrameworkError(Exception):
    """A plugin returned an Error status; the cycle fails with condition SchedulerError."""

    def __init__(self, status: Status):
        self.status = status
        # The runtime wraps each extension point's errors in kube-scheduler's words (``running
        # "X" filter plugin: ...``, ``running PreScore plugin "X": ...``); a bare one from elsewhere
        # names its plugin the way Filter does.
        msg = status.message()
        wrapped = msg.startswith(("running ", "applying "))
        prefix = f'running "{status.plugin}" filter plugin: ' if status.plugin and not wrapped else ""
        super().__init__(prefix + msg)


def truncate_message(message: str, limit: int = 1024) -> str:
    """Event notes are limited to 1024 bytes; kube-scheduler cuts with a " ..." suffix."""
    data = message.encode()
    if len(data) <= limit:
        return message
    return data[: limit - 4].decode(errors="ignore") + " ..."
