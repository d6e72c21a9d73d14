"""The benchmark's tables (Markdown, also printed) and which runs make ``bench.run`` exit 1.

One table per mode (drain, steady, burst) with every figure as ``median [min-max]`` over the
repeats of a cell and ratios of medians pysched / kube-scheduler; the drain extension-point means;
the other load on the machine; the targets (drain, >= 5,000 nodes); the gang table; the method.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import aggregate, living
from .aggregate import Cell
from .schedulers import NULL, PYSCHED
from .scrape import EXTENSION_POINTS
from .stats import Spread, ratio, spread

NA = "n/a"
NO_GANGS = "none (reference)"


def fmt(s: Spread | None, nd: int = 0, of: int = 0) -> str:
    """``median [min-max]`` (just the value for one repeat or no spread), n/a when not measured;
    ``(k/N repeats)`` when only k of the ``of`` repeats had the figure."""
    if s is None:
        return NA
    med = f"{s.median:,.{nd}f}"
    text = med if s.n == 1 or round(s.low, nd) == round(s.high, nd) else f"{med} [{s.low:,.{nd}f}-{s.high:,.{nd}f}]"
    return text + (f" ({s.n}/{of} repeats)" if s.n < of else "")


def cf(c: Cell, figure: str, nd: int = 0) -> str:
    """A cell's figure over its completed repeats."""
    return fmt(c.fig(figure), nd, of=len(c.completed))


def fmt_ratio(x: float | None) -> str:
    return NA if x is None else f"**{x:.2f}**"


def _qps(c: Cell) -> str:
    return f"{c.qps:g}/{c.burst}"


def _verified(c: Cell) -> str:
    if c.scheduler == NULL:
        n = max((len(r.get("violations") or []) for r in c.runs), default=0)
        return f"n/a (no filtering: up to {n} violations)"
    errors = [r["error"] for r in c.runs if r.get("error")]
    text = f"{c.verified}/{len(c.runs)}"
    if c.verified < len(c.runs):
        text = f"**{text}**"
        if errors:
            text += f" ({errors[0][:80]})"
    return text


def _events(c: Cell) -> str:
    if c.scheduler == NULL:
        return NA
    text = cf(c, "events")
    if c.events_short:
        text += f" **below bound in {c.events_short}/{len(c.runs)}**"
    return text


def _table(head: list[str], align: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _cells(all_cells: list[Cell], mode: str) -> list[Cell]:
    return [c for c in all_cells if c.mode == mode]


def drain_table(all_cells: list[Cell]) -> str:
    rows = []
    for c in _cells(all_cells, "drain"):
        r = aggregate.ratio_to_kube
        rows.append([c.workload, _qps(c), c.label, cf(c, "throughput"),
                     fmt_ratio(r(all_cells, c, "throughput")), cf(c, "with_events"),
                     fmt_ratio(r(all_cells, c, "with_events")), cf(c, "overall"), cf(c, "ttfb", 2),
                     cf(c, "cpu_per_1000", 2),
                     fmt_ratio(r(all_cells, c, "cpu_per_1000")), cf(c, "peak_rss"), _events(c),
                     cf(c, "api_per_pod", 2), cf(c, "attempt_p50", 1), cf(c, "attempt_p99", 1),
                     _verified(c)])
    if not rows:
        return ""
    head = ["workload", "QPS/burst", "scheduler", "drain pods/s", "ratio ours/kube", "incl. Events pods/s",
            "ratio ours/kube", "overall pods/s",
            "time to first bind s", "sched CPU s / 1,000 pods", "CPU ratio ours/kube", "peak RSS MiB",
            "events posted", "API requests / pod", "attempt p50 ms", "attempt p99 ms", "placements verified"]
    return _table(head, ["---"] * 3 + ["---:"] * 13 + ["---"], rows)


def extension_table(all_cells: list[Cell]) -> str:
    rows = []
    for c in _cells(all_cells, "drain"):
        if c.scheduler == NULL:
            continue
        rows.append([c.workload, _qps(c), c.label] + [cf(c, f"ext:{ep}", 3) for ep in EXTENSION_POINTS])
    if not rows:
        return ""
    return _table(["workload", "QPS/burst", "scheduler"] + [f"{ep} ms" for ep in EXTENSION_POINTS],
                  ["---"] * 3 + ["---:"] * len(EXTENSION_POINTS), rows)


def steady_table(all_cells: list[Cell]) -> str:
    rows = []
    for c in _cells(all_cells, "steady"):
        target = spread(r.get("target_rate") for r in c.completed)
        rows.append([c.workload, _qps(c), c.label, fmt(target), cf(c, "create_rate", 1),
                     cf(c, "lat_p50"), cf(c, "lat_p90"), cf(c, "lat_p99"),
                     cf(c, "cpu_per_1000", 2), _events(c), _verified(c)])
    if not rows:
        return ""
    head = ["workload", "QPS/burst", "scheduler", "target create/s", "achieved create/s", "latency p50 ms",
            "latency p90 ms", "latency p99 ms", "sched CPU s / 1,000 pods", "events posted", "placements verified"]
    return _table(head, ["---"] * 3 + ["---:"] * 7 + ["---"], rows)


def burst_table(all_cells: list[Cell]) -> str:
    rows = []
    for c in _cells(all_cells, "burst"):
        rows.append([c.workload, _qps(c), c.label, cf(c, "throughput"),
                     fmt_ratio(aggregate.ratio_to_kube(all_cells, c, "throughput")),
                     cf(c, "pps_p50"), cf(c, "pps_p90"), cf(c, "pps_p99"), cf(c, "create_rate"),
                     cf(c, "lat_p50"), cf(c, "lat_p99"), cf(c, "cpu_per_1000", 2),
                     cf(c, "peak_rss"), _events(c), _verified(c)])
    if not rows:
        return ""
    head = ["workload", "QPS/burst", "scheduler", "pods/s avg", "ratio ours/kube", "per-second p50", "p90", "p99",
            "create/s", "latency p50 ms", "latency p99 ms", "sched CPU s / 1,000 pods", "peak RSS MiB",
            "events posted", "placements verified"]
    return _table(head, ["---"] * 3 + ["---:"] * 13 + ["---"], rows)


def load_table(all_cells: list[Cell]) -> str:
    rows = [[c.workload, c.mode, _qps(c), c.label, str(len(c.runs)), cf(c, "loadavg1", 2),
             cf(c, "other_cpu", 2), cf(c, "apiserver_cpu", 2), cf(c, "etcd_cpu", 2)] for c in all_cells]
    if not rows:
        return ""
    return _table(["workload", "mode", "QPS/burst", "scheduler", "repeats", "loadavg 1 min at start",
                   "other CPU (CPU-s/s)", "kube-apiserver CPU-s/s", "etcd CPU-s/s"],
                  ["---"] * 4 + ["---:"] * 5, rows)


def _num(x: float | None, nd: int) -> str:
    return NA if x is None else f"{x:,.{nd}f}"


def targets_table(all_cells: list[Cell]) -> str:
    targets = aggregate.evaluate_targets(all_cells)
    if not targets:
        return ""
    rows = []
    for t in targets:
        nd = 3 if t.name in ("time to first bind", "scheduler CPU per pod") else 1
        value = _num(t.value, 2) + "x" if t.value is not None and "x kube" in t.rule else _num(t.value, nd)
        result = NA if t.passed is None else ("PASS" if t.passed else "**FAIL**")
        rows.append([t.workload, f"{t.qps:g}", t.name, t.rule, _num(t.ours, nd), _num(t.theirs, nd), value, result])
    return _table(["workload", "QPS", "target", "rule", "pysched (median)", "kube-scheduler (median)", "value",
                   "result"], ["---"] * 4 + ["---:"] * 3 + ["---"], rows)


def gang_table(all_cells: list[Cell]) -> str:
    """Gang workloads: groups placed, partial groups, groups/s and admit times ("" when none ran)."""
    rows = []
    for c in all_cells:
        gs = [r["gang"] for r in c.runs if r.get("gang")]
        if not gs:
            continue
        sem = gs[0].get("semantics") or ("Coscheduling" if c.scheduler == PYSCHED else NO_GANGS)
        rows.append([c.workload, c.mode, _qps(c), c.label, sem,
                     f"{min(g['placed'] for g in gs)} / {gs[0]['fitting']} / {gs[0]['groups']}",
                     str(max(g["partial"] for g in gs)), fmt(spread(g["groups_per_s"] for g in gs), 2),
                     fmt(spread(g["admit_p50_ms"] for g in gs)), fmt(spread(g["admit_p99_ms"] for g in gs))])
    if not rows:
        return ""
    return _table(["workload", "mode", "QPS/burst", "scheduler", "gang semantics",
                   "groups placed (min) / fitting / total", "partial groups (max)", "groups/s", "admit p50 ms",
                   "admit p99 ms"], ["---"] * 5 + ["---:"] * 5, rows)


def gang_backlog_table(all_cells: list[Cell]) -> str:
    """Gang runs that counted where their groups went (``bench.gangs.domains``): time to place all,
    groups whole and inside one rack / one block, partial groups, attempts per group, CPU per pod."""
    rows = []
    for c in all_cells:
        runs = [r for r in c.completed if "whole" in (r.get("gang") or {})]
        if not runs:
            continue
        gs = [r["gang"] for r in runs]

        def g(key: str, nd: int = 0, gs: list[dict] = gs) -> str:
            return fmt(spread(x.get(key) for x in gs), nd)

        last = spread(r["bind_offsets"][-1] if r.get("bind_offsets") else None for r in runs)
        rows.append([c.workload, c.mode, c.label, gs[0].get("semantics") or NA, str(len(runs)), fmt(last, 1),
                     f"{min(x['whole'] for x in gs)} / {gs[0]['groups']}", g("one_rack"), g("one_block"),
                     str(max(x["partial"] for x in gs)), g("pod_attempts_per_group", 1),
                     g("group_attempts_per_group", 2), cf(c, "cpu_per_1000", 2), cf(c, "peak_rss"),
                     cf(c, "loadavg1", 2)])
    if not rows:
        return ""
    return _table(["workload", "mode", "scheduler", "gang semantics", "repeats", "time to place all s",
                   "gangs whole (min) / total", "in one rack", "in one block", "partial gangs (max)",
                   "pod attempts / gang", "group attempts / gang", "sched CPU ms / pod", "peak RSS MiB",
                   "loadavg 1 min at start"], ["---"] * 5 + ["---:"] * 10, rows)


def failed_runs(results: list[dict]) -> list[dict]:
    """Runs that make ``bench.run`` exit 1: errors, placement violations (not the null binder's), and
    partial groups under a scheduler with gang semantics (pysched's Coscheduling or pod-group cycle,
    kube-scheduler 1.37's, scheduler-plugins'; kube-scheduler on scheduler-plugins' PodGroups is only
    a reference)."""
    def gangs(r: dict) -> bool:
        return (r["gang"].get("semantics") or ("Coscheduling" if r["scheduler"] == PYSCHED else NO_GANGS)) != NO_GANGS
    return [r for r in results if r["error"] or (r["violations"] and r["scheduler"] != NULL)
            or (r.get("gang") and gangs(r) and r["gang"]["partial"])]


def profiles_table(all_cells: list[Cell]) -> str:
    """pysched's other profiles against its default profile on the same workload, mode and QPS."""
    rows = []
    for c, base in aggregate.profile_pairs(all_cells):
        med = ratio(c.fig("cpu_per_1000"), base.fig("cpu_per_1000"))
        paired = aggregate.paired_ratio(c, base, "cpu_per_1000")
        corrected = aggregate.paired_ratio(c, base, "cpu_per_filter")
        rows.append([c.workload, c.mode, _qps(c), c.profile, cf(c, "cpu_per_1000", 2), cf(base, "cpu_per_1000", 2),
                     NA if med is None else f"**{med:.3f}**", fmt(paired, 3), fmt(corrected, 3),
                     cf(c, "ext:Filter", 3), cf(base, "ext:Filter", 3), cf(c, "throughput"),
                     cf(base, "throughput"), cf(c, "peak_rss"), cf(base, "peak_rss"), _fallbacks(c),
                     _prometheus_load(c.runs + base.runs)])
    if not rows:
        return ""
    head = ["workload", "mode", "QPS/burst", "profile", "sched CPU s / 1,000 pods", "default profile's",
            "ratio of medians", "ratio run by run", "run by run, per Filter call", "Filter ms", "default's",
            "pods/s", "default's", "peak RSS MiB", "default's", "cycles on a load fallback",
            "Prometheus in every run"]
    return _table(head, ["---"] * 4 + ["---:"] * 12 + ["---"], rows)


def _prometheus_load(runs: list[dict]) -> str:
    """Whether Prometheus scraped in every run ("yes"), and also answered the loadaware queries in
    every run (the loadaware scheduler's own, the driver's in the others: "yes, and its queries")."""
    if not all(r.get("load_metrics") for r in runs):
        return "no"
    return "yes, and its queries" if all(r.get("load_queries") for r in runs) else "yes"


def _fallbacks(c: Cell) -> str:
    """Cycles in which a load-aware plugin used its fallback, over the cell's runs (by plugin/reason)."""
    total: dict[str, int] = {}
    for r in c.completed:
        for k, v in ((r.get("metrics") or {}).get("load_fallbacks") or {}).items():
            total[k] = total.get(k, 0) + v
    return ", ".join(f"{k} {v}" for k, v in sorted(total.items())) or "0"


def living_table(all_cells: list[Cell]) -> str:
    """Living-cluster cells (``<workload>+living``): the drain figures, the pod status updates per pod
    the cluster generated, pysched's informer events per pod, CPU per pod against the same
    scheduler's bare run of the workload (what the living cluster's events cost it), and the part
    of that CPU spent after the last Event while the pods went Running and Ready."""
    rows = []
    for c in all_cells:
        if not c.workload.endswith(living.SUFFIX) or c.mode != "drain":
            continue
        bare = next((b for b in all_cells if b.workload == c.workload[:-len(living.SUFFIX)] and b.mode == c.mode
                     and b.scheduler == c.scheduler and b.qps == c.qps and b.profile == c.profile), None)
        r = aggregate.ratio_to_kube
        rows.append([c.workload, c.label, cf(c, "throughput"), fmt_ratio(r(all_cells, c, "throughput")),
                     cf(c, "cpu_per_1000", 2), fmt_ratio(r(all_cells, c, "cpu_per_1000")),
                     fmt_ratio(ratio(c.fig("cpu_per_1000"), bare.fig("cpu_per_1000"))) if bare else NA,
                     cf(c, "ready_tail_cpu_per_1000", 2), cf(c, "ready_tail_s", 0),
                     cf(c, "status_updates", 2), cf(c, "informer_events", 2), cf(c, "informer_share", 3),
                     cf(c, "peak_rss"), _verified(c)])
    if not rows:
        return ""
    head = ["workload", "scheduler", "drain pods/s", "ratio ours/kube", "sched CPU s / 1,000 pods",
            "CPU ratio ours/kube", "CPU living/bare", "of which while pods went Ready, s / 1,000 pods",
            "pods going Ready after the last Event, s", "pod status updates / pod", "informer events / pod",
            "informer handlers' share of CPU", "peak RSS MiB", "placements verified"]
    return _table(head, ["---"] * 2 + ["---:"] * 11 + ["---"], rows)


def sections(results: list[dict]) -> list[tuple[str, str]]:
    """(title, table) of every non-empty table, in report order."""
    cs = aggregate.cells(results)
    out = [("Drain (scheduler throughput with a backlog)", drain_table(cs)),
           ("Drain: extension-point means (ms per call, status Success)", extension_table(cs)),
           ("Steady (creation-to-bind latency at a fixed creation rate)", steady_table(cs)),
           ("Burst (pods created as fast as the API server takes them)", burst_table(cs)),
           ("Living cluster (kube-controller-manager and KWOK: owned pods go Running, nodes heartbeat)",
            living_table(cs)),
           (f"Targets (drain mode, workloads with >= {aggregate.TARGET_MIN_NODES:,} nodes)", targets_table(cs)),
           ("pysched's profiles against its default profile", profiles_table(cs)),
           ("Gang workloads", gang_table(cs)),
           ("Gang backlog: where the gangs went (time to place all: to the last bind, in drain mode from the "
            "scheduler's start with every pod created, in burst mode from the first creation; sched CPU per pod "
            "from /proc)", gang_backlog_table(cs)),
           ("Other load on the machine", load_table(cs))]
    return [(t, body) for t, body in out if body]


PROFILE_TEXT = {
    "default": "pysched ran its default profile: kube-scheduler's default plugins (of the control plane's "
               "release), the same set kube-scheduler ran (like with like: the same Filter and Score work per "
               "pod).",
    "shipped": "pysched ran the shipped profile: kube-scheduler's default plugins (of the control plane's "
               "release) plus pysched's own scores (GPU, AZSpread, CapacityType, InstanceType), work "
               "kube-scheduler did not do.",
    "loadaware": "pysched ran the loadaware profile: kube-scheduler's default plugins (of the control plane's "
                 "release) plus TargetLoadPacking and LoadVariationRiskBalancing, reading every node's cpu/memory "
                 "figures from a real Prometheus (scraping one exporter every 5 s; the scheduler fetches at the "
                 "default 15 s interval, 2 s timeout).",
    "topology": "pysched ran the topology profile: its default profile with TopologyAwarePlacement (levels "
                "block, rack) in place of upstream's TopologyPlacementGenerator.",
}


def method(pinning: dict, repeats: int, steady_rate: float, schedulers: list[str],
           pysched_profile: str = "default") -> list[str]:
    order = ", ".join(schedulers)
    profiles = " ".join(PROFILE_TEXT.get(p.strip(), p) for p in pysched_profile.split(","))
    return [
        "## Method", "", profiles, "",
        "Every run starts a fresh etcd (on tmpfs) and kube-apiserver, creates the workload's nodes, the "
        "`bench` namespace and the workload's prelude objects, starts the scheduler under test, creates the "
        "init pods and waits until they are bound (not measured). Then, by mode:", "",
        "* **drain** (scheduler throughput): the scheduler is stopped, every measured pod is created, the "
        "watcher lists them, and a fresh scheduler process is started with that backlog. *time to first bind* "
        "is from just before it is started to the first bind the watcher sees; *drain pods/s* is bound pods / "
        "(last bind - first bind); *incl. Events pods/s* is bound pods / (last bind - first bind + the time from "
        "the last bind to the last Scheduled Event, both as the watcher's watches saw them), the throughput of "
        "all the scheduler's API work; *overall pods/s* is "
        "bound pods / (last bind - start). Its CPU and peak RSS "
        "(VmHWM) are over its whole life, startup included: peak RSS with a backlog.",
        f"* **steady** (latency): the scheduler keeps running; the measured pods are created on a fixed "
        f"schedule of {steady_rate:g} pods/s (at most 64 in flight); *achieved create/s* is pods / time until "
        "the last creation returned; latency is watcher-seen creation to watcher-seen bind.",
        "* **burst**: the scheduler keeps running; the measured pods are created as fast as the API server "
        "takes them (64 in flight); *pods/s avg* is bound pods / (last bind - first creation). Per-second "
        "percentiles are of whole-second samples (scheduler_perf's SchedulingThroughput) and only shown with "
        "at least 10 samples (n/a otherwise).", "",
        "The watcher also watches the scheduler's `Scheduled` Events (one watch, no polling) and, after the "
        "last bind, goes on until every bound measured pod has its Event (at most 60 s, less when none comes "
        "for 5 s); only then does the driver take the end sample, so every scheduler's CPU includes posting "
        "every Event (*events posted*, counted by one LIST at the end; a run short of the bound count is "
        "flagged). *sched CPU s / 1,000 pods* is the "
        "scheduler process's CPU from /proc over the measured phase per 1,000 bound pods (its "
        "`process_cpu_seconds_total` is recorded as a cross-check in results.json). From each scheduler's "
        "/metrics (scraped before and after the measured phase and subtracted; drain: the fresh process's "
        "totals): *API requests / pod* is `rest_client_requests_total` per bound pod; *attempt p50/p99* are "
        "`scheduler_scheduling_attempt_duration_seconds{result=\"scheduled\"}` quantiles estimated from the "
        "buckets as PromQL's histogram_quantile does; extension-point means are "
        "`scheduler_framework_extension_point_duration_seconds{status=\"Success\"}` sum / count. "
        "*placements verified* counts "
        "the repeats that bound every measured pod and whose every placement passed `bench.verify`.", "",
        f"**Pinning**: {pinning.get('description', NA)}.", "",
        f"**Repeats**: {repeats} per cell, interleaved ABBA (repeat r runs {order} when r is even, the reverse "
        "when odd). Every figure is `median [min-max]` over the repeats; ratios are of medians "
        "pysched / kube-scheduler.", "",
        *([] if "," not in pysched_profile else [
            "**pysched's profiles against its default**: a profile takes pysched's place in the ABBA order, "
            "so each repeat runs the two profiles next to each other. *ratio run by run* is the median over the "
            "repeats of the two runs' ratio of CPU per pod. *run by run, per Filter call* divides each run's CPU "
            "per pod by its own mean Filter call first: Filter is the same work in both profiles (the same "
            "plugins over the same nodes), so it tracks how fast the machine ran during that run, which on a "
            "shared virtual machine moves by tens of percent from one run to the next and takes the CPU per pod "
            "with it. It also takes out whatever the profile itself does to that same work (a colder cache, a "
            "collection landing in Filter): when the profiles' Filter ms differ, the cost lies between the two "
            "run-by-run ratios, and the plain one is the one to hold a target to. *Prometheus in every run*: "
            "with `--load-metrics all` the exporter and Prometheus run beside every profile (\"yes\"), and the "
            "driver sends the loadaware profile's queries during the other profiles' runs, as its collector "
            "does from the scheduler's start (\"yes, and its queries\"): Prometheus evaluates them on the "
            "core the API server uses, so only then is that load the same in every run.",
            ""]),
        "**Other load**: per run, /proc/loadavg at its start, and the machine's busy CPU seconds (/proc/stat) "
        "over the measured phase minus those of the run's own processes (driver, etcd, kube-apiserver, "
        "scheduler, watcher), as CPU-seconds per second; beside it the CPU-seconds per second kube-apiserver "
        "and etcd used over the same phase (they share the non-scheduler core with the driver and watcher, "
        "so near 1.0 together the API server is the ceiling, whichever scheduler runs).", ""]


def markdown(results: list[dict], info: dict, command: str, charts: list[Path], md_dir: Path, pinning: dict,
             repeats: int, steady_rate: float, schedulers: list[str], pysched_profile: str = "default") -> str:
    lines = ["# Benchmark results", "", f"Command: `{command}`", "",
             "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), ""]
    lines += method(pinning, repeats, steady_rate, schedulers, pysched_profile)
    for title, body in sections(results):
        lines += [f"## {title}", "", body, ""]
    if charts:
        lines += ["## Charts", "", "Cumulative measured pods bound per mode (one line per repeat; dotted: "
                  "pods seen created).", ""]
    for c in charts:
        lines += [f"![{c.stem}]({os.path.relpath(c, md_dir)})", ""]
    return "\n".join(lines)
