"""Scheduled Events posted for the measured pods, counted like with like for every scheduler.

A scheduler's CPU only compares with another's if both include posting the ``Scheduled`` Event of
every pod they bound. The watcher process (``bench.watcher``) watches the ``bench`` namespace's
events.k8s.io/v1 Events with reason ``Scheduled`` and ``reportingController`` = the scheduler's
name beside the pods, and timestamps the first such Event about each pod (``EventClock``). It keeps
going after the last bind until every bound pod has its Event, or no new one arrives for
``STALL_S`` seconds, or ``MAX_WAIT_S`` pass. The driver takes its end sample of CPU, memory and
metrics only after that, and reads how long after the last bind the last Event came from the
watcher's timestamps: a watch is one open request, so measuring puts no load on the API server
while trailing Events are still being posted (polling with LISTs did, and charged it to the
slower scheduler). A single LIST at the end cross-checks the count (``count_scheduled``).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_WAIT_S = 60.0
STALL_S = 5.0


def is_scheduled_by(ev: dict, controller: str) -> str | None:
    """The regarded pod's name if ``ev`` is a ``Scheduled`` Event from ``controller`` about a pod."""
    if ev.get("reason") != "Scheduled" or ev.get("reportingController") != controller:
        return None
    regarding = ev.get("regarding") or {}
    if regarding.get("kind", "Pod") != "Pod":
        return None
    return regarding.get("name") or None


def count_scheduled(events: Iterable[dict], controller: str, pods: set[str]) -> int:
    """Occurrences of ``Scheduled`` reported by ``controller`` about the pods named in ``pods``."""
    n = 0
    for ev in events:
        name = is_scheduled_by(ev, controller)
        if name is None or name not in pods:
            continue
        series = ev.get("series") or {}
        n += int(series.get("count") or 1) if series else 1
    return n


class EventClock:
    """When the first ``Scheduled`` Event about each pod was seen, and how many bound pods have
    theirs (watcher side). Both counts are kept as Events and binds arrive, so the watcher's check
    after every change costs the same with 10 pods or 10,000: it shares the control plane's core."""

    def __init__(self, controller: str):
        self.controller = controller
        self.first: dict[str, float] = {}
        self.bound: set[str] = set()
        self.covered = 0                      # pods in ``bound`` that are also in ``first``
        self.last_growth: float | None = None

    def observe(self, ev: dict, now: float) -> None:
        name = is_scheduled_by(ev, self.controller)
        if name is not None and name not in self.first:
            self.first[name] = now
            self.last_growth = now
            if name in self.bound:
                self.covered += 1

    def bound_pod(self, name: str) -> None:
        if name not in self.bound:
            self.bound.add(name)
            if name in self.first:
                self.covered += 1

    def done(self, all_bound_at: float, now: float, stall: float = STALL_S, max_wait: float = MAX_WAIT_S) -> bool:
        """After the last bind (``all_bound_at``): every bound pod has its Event, or none came for
        ``stall`` seconds, or ``max_wait`` passed."""
        if self.covered >= len(self.bound):
            return True
        since = max(all_bound_at, self.last_growth or all_bound_at)
        return now - since >= stall or now - all_bound_at >= max_wait


def summarise(records: dict[str, dict]) -> dict:
    """From the watcher's records (``bound``, ``event`` timestamps): Events seen for bound pods, and
    seconds from the last bind to the last of those Events (0 when they kept pace)."""
    bound = [r for r in records.values() if r.get("bound") is not None]
    with_event = [r for r in bound if r.get("event") is not None]
    if not bound:
        return {"seen": 0, "waited_s": None, "short": False}
    last_bind = max(r["bound"] for r in bound)
    last_event = max((r["event"] for r in with_event), default=last_bind)
    return {"seen": len(with_event), "waited_s": round(max(0.0, last_event - last_bind), 3),
            "short": len(with_event) < len(bound)}
