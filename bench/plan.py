"""Which runs a benchmark makes, and in which order.

For every workload, client QPS/burst and mode, ``--repeats`` repeats of every scheduler, interleaved
ABBA: repeat ``r`` runs the schedulers in the given order when ``r`` is even and reversed when it
is odd (A B, B A, A B, ...), so a slow drift of the machine does not favour one of them. Several
pysched profiles (``--pysched-profile default,loadaware``) take pysched's place in that order, one
run each. The null binder runs only when named in ``--schedulers``, only unthrottled and never for
gang workloads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from .modes import MODES
from .schedulers import KINDS, NULL, PROFILES, PYSCHED
from .workloads import SMOKE, WORKLOADS, Workload

T = TypeVar("T")


def abba_order(schedulers: list[T], repeat: int) -> list[T]:
    return list(schedulers) if repeat % 2 == 0 else list(reversed(schedulers))


def parse_qps(text: str) -> list[tuple[float, int]]:
    out = []
    for part in text.split(","):
        q, _, b = part.partition("/")
        try:
            out.append((float(q), int(b or q)))
        except ValueError:
            raise SystemExit(f"--qps: expected QPS/BURST pairs like 5000/5000, got {part!r}") from None
    return out


def _names(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise SystemExit(f"{flag}: unknown {', '.join(bad) or '(none)'}; known: {', '.join(known)}")
    return names


def parse_modes(text: str) -> list[str]:
    return _names(text, MODES, "--modes")


def parse_schedulers(text: str) -> list[str]:
    return _names(text, KINDS, "--schedulers")


def parse_profiles(text: str) -> list[str]:
    names = _names(text, PROFILES, "--pysched-profile")
    if len(set(names)) != len(names):
        raise SystemExit(f"--pysched-profile: a profile is named twice in {text!r}")
    return names


def select_workloads(names: str) -> list[Workload]:
    if names == "smoke":
        return [SMOKE]
    if names == "all":
        return list(WORKLOADS.values())
    out = []
    for n in names.split(","):
        matches = [w for k, w in WORKLOADS.items() if k == n or k.startswith(n)]
        if not matches:
            raise SystemExit(f"unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
        out.extend(matches)
    return out


@dataclass(frozen=True)
class Planned:
    workload: Workload
    mode: str
    qps: float
    burst: int
    repeat: int
    kind: str
    profile: str = ""      # pysched's profile ("" for the other schedulers)

    @property
    def slug(self) -> str:
        who = f"{self.kind}-{self.profile}" if self.profile else self.kind
        return f"{self.workload.name.replace('/', '_')}-{self.mode}-qps{int(self.qps)}-r{self.repeat}-{who}"


def runs(workloads: list[Workload], modes: list[str], qps: list[tuple[float, int]], schedulers: list[str],
         repeats: int, profiles: list[str] = ("default",)) -> Iterator[Planned]:
    who = [(k, p) for k in schedulers for p in (profiles if k == PYSCHED else [""])]
    for wl in workloads:
        for q, b in qps:
            for mode in modes:
                for r in range(repeats):
                    for kind, profile in abba_order(who, r):
                        if kind == NULL and (q < 1000 or wl.gang_size):
                            continue  # the ceiling is only interesting unthrottled, and means nothing for gangs
                        if not wl.admits(kind, profile):
                            continue  # e.g. scheduler-plugins' PodGroups are not kube-scheduler's
                        yield Planned(wl, mode, q, b, r, kind, profile)
