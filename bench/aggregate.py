"""Runs grouped into cells, figures summarised over repeats, and the targets evaluated.

A cell is one (workload, mode, client QPS/burst, scheduler, pysched profile); its figures are the
median and range of the repeats that completed (``bench.stats.spread``); a comparison is the ratio
of medians pysched / kube-scheduler, and between pysched's profiles also the median of the ratios
of runs made in the same repeat (next to each other in the ABBA order). The targets are evaluated
on drain mode for pysched's default profile, for workloads with at least ``TARGET_MIN_NODES``
nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .schedulers import KUBE, PYSCHED
from .scrape import EXTENSION_POINTS
from .stats import Spread, ratio, spread

TARGET_MIN_NODES = 5000


def _get(*path: str) -> Callable[[dict], float | None]:
    def get(run: dict) -> float | None:
        cur: object = run
        for k in path:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(k)
        return float(cur) if isinstance(cur, int | float) and not isinstance(cur, bool) else None
    return get


def _loadavg1(run: dict) -> float | None:
    avg = (run.get("load") or {}).get("loadavg_start") or []
    return float(avg[0]) if avg else None


def _throughput(run: dict) -> float | None:
    if run.get("mode") == "drain":
        return _get("drain", "drain_pods_per_s")(run)
    return _get("summary", "avg")(run)


def _metrics_cpu_per_1000(run: dict) -> float | None:
    cpu, bound = _get("metrics", "cpu_s")(run), _get("summary", "bound")(run)
    return cpu / bound * 1000 if cpu is not None and bound else None


def _drain_with_events(run: dict) -> float | None:
    """Drain: bound / (last - first bind + how long after the last bind the last Scheduled Event
    came, as the watcher's Event watch timed it): throughput counting all of the scheduler's API
    work, for a scheduler that lets Events trail its binds."""
    if run.get("mode") != "drain":
        return None
    binds, waited = run.get("bind_offsets") or [], (run.get("events") or {}).get("waited_s")
    if len(binds) < 2 or waited is None or (run.get("events") or {}).get("short"):   # not every Event: n/a
        return None
    span = max(binds) - min(binds) + float(waited)
    return round(len(binds) / span, 1) if span > 0 else None


def _cpu_per_filter(run: dict) -> float | None:
    """Per-pod CPU in units of the same run's mean Filter call (ms per pod / ms per call): the
    machine's speed taken out. Filter is the same work in every profile (the same plugins over the
    same nodes) and, on this machine, moves with the per-pod CPU run by run (0.063-0.102 ms for
    the same Filter work over 20 runs of one profile). It also takes out what a profile does to
    that same work (a colder cache): a lower bound of the profile's cost, beside the plain ratio."""
    cpu = _get("cpu_s_per_1000_pods")(run)
    per_call = _get("metrics", "extension_point_mean_ms", "Filter")(run)
    return cpu / per_call if cpu is not None and per_call else None


def _ready_tail_cpu_per_1000(run: dict) -> float | None:
    """Living runs: the scheduler's CPU s per 1,000 bound pods from its last Event until every pod
    was Running and Ready (the cluster's status updates, nothing left to schedule); part of
    ``cpu_s_per_1000_pods``, not added to it."""
    cpu = _get("living", "ready_tail_cpu_s")(run)
    bound = _get("summary", "bound")(run)
    return round(cpu / bound * 1000, 3) if cpu is not None and bound else None


FIGURES: dict[str, Callable[[dict], float | None]] = {
    "throughput": _throughput,                       # drain: bound / (last - first bind); else pods/s avg
    "with_events": _drain_with_events,
    "overall": _get("drain", "overall_pods_per_s"),
    "ttfb": _get("drain", "time_to_first_bind_s"),
    "pps_p50": _get("summary", "p50"), "pps_p90": _get("summary", "p90"), "pps_p99": _get("summary", "p99"),
    "lat_p50": _get("summary", "latency_p50_ms"), "lat_p90": _get("summary", "latency_p90_ms"),
    "lat_p99": _get("summary", "latency_p99_ms"),
    "create_rate": _get("create_rate"),
    "cpu_per_1000": _get("cpu_s_per_1000_pods"),
    "cpu_per_filter": _cpu_per_filter,
    "metrics_cpu_per_1000": _metrics_cpu_per_1000,
    "peak_rss": _get("peak_rss_mib"),
    "events": _get("events", "posted"),
    "api_per_pod": _get("metrics", "api_requests_per_pod"),
    "attempts": _get("metrics", "attempts"),
    "attempt_p50": _get("metrics", "attempt_p50_ms"), "attempt_p99": _get("metrics", "attempt_p99_ms"),
    "other_cpu": _get("load", "other_cpu_per_s"),
    "apiserver_cpu": _get("load", "apiserver_cpu_per_s"),
    "etcd_cpu": _get("load", "etcd_cpu_per_s"),
    "loadavg1": _loadavg1,
    "status_updates": _get("living", "status_updates_per_pod"),
    "informer_events": _get("living", "informer_events_per_pod"),
    "informer_share": _get("living", "informer_cpu_share"),
    "ready_tail_s": _get("living", "ready_tail_s"),
    "ready_tail_cpu_per_1000": _ready_tail_cpu_per_1000,
    **{f"ext:{ep}": _get("metrics", "extension_point_mean_ms", ep) for ep in EXTENSION_POINTS},
}


@dataclass
class Cell:
    workload: str
    mode: str
    qps: float
    burst: int
    scheduler: str
    nodes: int
    runs: list[dict] = field(default_factory=list)
    profile: str = ""          # pysched's profile ("" for the other schedulers and older results)

    @property
    def key(self) -> tuple:
        return (self.workload, self.mode, self.qps, self.scheduler, self.profile)

    @property
    def label(self) -> str:
        """The scheduler, with pysched's profile when it is not the default."""
        return f"{self.scheduler} ({self.profile})" if self.profile not in ("", "default") else self.scheduler

    @property
    def completed(self) -> list[dict]:
        return [r for r in self.runs if not r.get("error")]

    def fig(self, name: str) -> Spread | None:
        return spread(FIGURES[name](r) for r in self.completed)

    @property
    def verified(self) -> int:
        """Repeats that bound every pod and whose placements passed ``bench.verify``."""
        return sum(1 for r in self.runs if not r.get("error") and not r.get("violations"))

    @property
    def events_short(self) -> int:
        """Repeats whose Scheduled Events fell short of the bound pods."""
        return sum(1 for r in self.runs if (r.get("events") or {}).get("short"))


def cells(results: list[dict]) -> list[Cell]:
    """Cells in the order their first run appears."""
    out: dict[tuple, Cell] = {}
    for r in results:
        profile = r.get("profile", "")
        key = (r["workload"], r["mode"], r["qps"], r["scheduler"], profile)
        cell = out.get(key)
        if cell is None:
            cell = out[key] = Cell(r["workload"], r["mode"], r["qps"], r["burst"], r["scheduler"], r.get("nodes", 0),
                                   profile=profile)
        cell.runs.append(r)
    return list(out.values())


def peer(all_cells: list[Cell], cell: Cell, scheduler: str) -> Cell | None:
    for c in all_cells:
        if (c.workload, c.mode, c.qps, c.scheduler) == (cell.workload, cell.mode, cell.qps, scheduler):
            return c
    return None


def ratio_to_kube(all_cells: list[Cell], cell: Cell, figure: str) -> float | None:
    """Ratio of medians pysched / kube-scheduler of ``figure`` (only for pysched's cell)."""
    if cell.scheduler != PYSCHED:
        return None
    kube = peer(all_cells, cell, KUBE)
    return ratio(cell.fig(figure), kube.fig(figure)) if kube else None


@dataclass(frozen=True)
class Target:
    workload: str
    qps: float
    name: str
    rule: str
    ours: float | None
    theirs: float | None
    value: float | None      # the ratio (for ratio targets) or ours
    passed: bool | None      # None: not measurable (a cell or a figure missing)


TARGETS: tuple[tuple[str, str, str, str, float], ...] = (
    # (name, figure, rule text, kind, bound): kind ratio_min / ratio_max compare ours / kube's with bound,
    # kind le compares ours <= kube's (bound unused)
    ("drain throughput", "throughput", ">= 2.0x kube", "ratio_min", 2.0),
    ("scheduler CPU per pod", "cpu_per_1000", "<= 0.4x kube", "ratio_max", 0.4),
    ("throughput incl. Events", "with_events", ">= 2.0x kube", "ratio_min", 2.0),
    ("time to first bind", "ttfb", "<= kube's", "le", 0.0),
    ("peak RSS", "peak_rss", "<= kube's", "le", 0.0),
)


def evaluate_targets(all_cells: list[Cell], min_nodes: int = TARGET_MIN_NODES) -> list[Target]:
    out = []
    for cell in all_cells:
        if (cell.mode != "drain" or cell.scheduler != PYSCHED or cell.profile not in ("", "default")
                or cell.nodes < min_nodes):
            continue
        kube = peer(all_cells, cell, KUBE)
        for name, figure, rule, kind, bound in TARGETS:
            ours = cell.fig(figure)
            theirs = kube.fig(figure) if kube else None
            o = ours.median if ours else None
            t = theirs.median if theirs else None
            if o is None or t is None:
                out.append(Target(cell.workload, cell.qps, name, rule, o, t, None, None))
                continue
            if kind in ("ratio_min", "ratio_max"):
                value = o / t if t else None
                passed = None if value is None else (value >= bound if kind == "ratio_min" else value <= bound)
            else:
                value, passed = o, o <= t
            out.append(Target(cell.workload, cell.qps, name, rule, o, t, value, passed))
    return out


def paired_ratio(cell: Cell, base: Cell, figure: str) -> Spread | None:
    """``figure`` of ``cell`` over ``base``, run by run: the ratio of each repeat's two runs (made
    next to each other), summarised over the repeats both completed."""
    ours = {r["repeat"]: FIGURES[figure](r) for r in cell.completed}
    theirs = {r["repeat"]: FIGURES[figure](r) for r in base.completed}
    return spread(o / t for rep, o in ours.items()
                  if o is not None and (t := theirs.get(rep)) is not None and t)


def profile_pairs(all_cells: list[Cell], base: str = "default") -> list[tuple[Cell, Cell]]:
    """(pysched cell of another profile, the same workload/mode/QPS cell of ``base``)."""
    bases = {(c.workload, c.mode, c.qps): c for c in all_cells if c.scheduler == PYSCHED and c.profile == base}
    return [(c, b) for c in all_cells
            if c.scheduler == PYSCHED and c.profile not in ("", base)
            and (b := bases.get((c.workload, c.mode, c.qps))) is not None]
