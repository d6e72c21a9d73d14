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
"""

from __future__ import annotations

from enum import IntEnum


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
