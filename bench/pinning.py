"""CPU pinning: the scheduler under test gets a CPU of its own, everything else the others.

With ``--pin auto`` (the default) and at least two CPUs in this process's affinity mask, the last
CPU goes to the scheduler under test alone and the driver pins itself (every thread) to the
others *before* it starts anything: etcd, kube-apiserver, the watcher and the pod creator are the
driver's children or the driver itself and inherit that mask (Go processes' threads too, they
inherit it at exec). The scheduler is started with a ``preexec_fn`` that moves it to its CPU
before exec, so all of its threads start there. With one CPU (or ``--pin off``) nothing is pinned
and the report says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pinning:
    mode: str                          # "auto" or "off"
    scheduler_cpus: tuple[int, ...]    # () when not pinned
    other_cpus: tuple[int, ...]
    note: str

    @property
    def active(self) -> bool:
        return bool(self.scheduler_cpus)

    def scheduler_preexec(self) -> Callable[[], None] | None:
        """``preexec_fn`` for the scheduler under test (None when not pinned)."""
        if not self.active:
            return None
        cpus = set(self.scheduler_cpus)
        return lambda: os.sched_setaffinity(0, cpus)

    def describe(self) -> str:
        if not self.active:
            return f"no pinning ({self.note})"
        return (f"scheduler under test alone on CPU {_cpus(self.scheduler_cpus)}; driver, etcd, "
                f"kube-apiserver, watcher and pod creator on CPU {_cpus(self.other_cpus)}")

    def as_dict(self) -> dict:
        return {"mode": self.mode, "scheduler_cpus": list(self.scheduler_cpus),
                "other_cpus": list(self.other_cpus), "note": self.note, "description": self.describe()}


def _cpus(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


def plan(mode: str, available: set[int] | None = None) -> Pinning:
    """Which CPUs go where for ``--pin MODE`` given the CPUs this process may use."""
    if mode not in ("auto", "off"):
        raise ValueError(f"--pin: expected auto or off, got {mode!r}")
    cpus = tuple(sorted(os.sched_getaffinity(0) if available is None else available))
    if mode == "off":
        return Pinning(mode, (), cpus, "--pin off")
    if len(cpus) < 2:
        return Pinning(mode, (), cpus, f"only {len(cpus)} CPU available")
    return Pinning(mode, cpus[-1:], cpus[:-1], f"{len(cpus)} CPUs available")


def pin_driver(p: Pinning) -> None:
    """Move every thread of this process to the other CPUs (children started later inherit it)."""
    if not p.active:
        return
    others = set(p.other_cpus)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), others)
        except ProcessLookupError:
            continue
