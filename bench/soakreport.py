"""``SOAK.md`` and its charts from a soak's run directory (``samples.jsonl[.gz]``, ``summary.json``).

One chart per series over the run's minutes: each pysched process's RSS (standby dotted, leader
solid) beside kube-scheduler's, open descriptors, asyncio tasks and Python allocator blocks, the
scheduling latency p50/p99 of both schedulers, queue lengths and the Event backlog, and the
cluster's pods. The page states the plan, the command that reproduces it, every verdict and the
events of the run.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from . import rawdata, soakcheck


def _series(samples: list[dict[str, Any]]) -> dict[tuple[str, int], list[tuple[int, dict[str, Any]]]]:
    out: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
    for s in samples:
        for p in s["pysched"]:
            out.setdefault((p["slot"], p["incarnation"]), []).append((s["minute"], p))
    return out


def charts(samples: list[dict[str, Any]], out: Path, stem: str = "soak") -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    procs = _series(samples)
    kube = [(s["minute"], s["kube"]) for s in samples if s.get("kube")]
    paths = []

    def finish(fig: Any, ax: Any, title: str, unit: str, name: str) -> None:
        ax.set_title(title)
        ax.set_xlabel("minute")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        path = out / f"{stem}-{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    def per_process(key: str, title: str, unit: str, name: str) -> None:
        fig, ax = plt.subplots(figsize=(9, 3.6))
        for (slot, inc), rows in procs.items():
            xs = [m for m, _ in rows]
            ys = [r.get(key) or 0 for _, r in rows]
            lead = [r.get("leader") for _, r in rows]
            line, = ax.plot(xs, ys, ":", linewidth=1)
            ax.plot([x if ld else None for x, ld in zip(xs, lead)], [y if ld else None for y, ld in zip(ys, lead)],
                    "-", color=line.get_color(), linewidth=2, label=f"pysched {slot}{inc}")
        if kube and key in kube[0][1]:
            ax.plot([m for m, _ in kube], [k.get(key) or 0 for _, k in kube], "-", color="black", linewidth=1.2,
                    label="kube-scheduler")
        finish(fig, ax, title, unit, name)

    per_process("rss_mib", "Resident memory (solid: leading, dotted: standby)", "MiB", "rss")
    per_process("fds", "Open file descriptors", "descriptors", "fds")
    per_process("tasks", "asyncio tasks (pysched)", "tasks", "tasks")
    per_process("heap_blocks", "Python allocator blocks in use (pysched)", "blocks", "heap-blocks")
    per_process("events_backlog", "Event backlog (pysched)", "events", "events")

    fig, ax = plt.subplots(figsize=(9, 3.6))
    for who, colour in (("pysched", "tab:blue"), ("kube", "black")):
        rows = [(s["minute"], s["latency"].get(who) or {}) for s in samples]
        for q, style in (("p50", "--"), ("p99", "-")):
            pts = [(m, r[q] * 1000) for m, r in rows if r.get(q) is not None]
            if pts:
                ax.plot(*zip(*pts), style, color=colour, label=f"{'kube-scheduler' if who == 'kube' else who} {q}")
    finish(fig, ax, "Scheduling latency per sample interval (pod_scheduling_sli_duration)", "ms", "latency")

    fig, ax = plt.subplots(figsize=(9, 3.6))
    minutes = [s["minute"] for s in samples]
    ax.plot(minutes, [s["cluster"]["pods"] for s in samples], label="pods in the namespace")
    ax.plot(minutes, [s["cluster"]["unbound"] for s in samples], label="not yet bound")
    queued = [sum(sum((p.get("pending") or {}).values()) for p in s["pysched"] if p.get("leader")) for s in samples]
    ax.plot(minutes, queued, label="pysched's queues (leader)")
    finish(fig, ax, "Cluster pods and pysched's queues", "pods", "pods")
    return paths


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.1f}"


def _judged(summary: dict[str, Any], samples: list[dict[str, Any]], warmup: float | None) -> dict[str, Any]:
    """The run's verdicts under the current rules (``soakcheck``), from its samples and end checks:
    a run recorded under older rules is judged as a new one would be."""
    warm = summary["plan"]["warmup"] if warmup is None else warmup
    return soakcheck.judge(samples, summary["end_checks"], warm)


def _run_section(summary: dict[str, Any], samples: list[dict[str, Any]], v: dict[str, Any], warm: float,
                 chart_paths: list[Path], md: Path) -> list[str]:
    plan = summary["plan"]
    handover = (f"a leader handover every {plan['handover_every']:g} s" if plan["handover_every"] > 0
                else "no handover (one leader for the whole run)")
    lines = [
        f"**{'PASS' if v['pass'] else 'FAIL'}** - reproduce with `{summary['command']}`.",
        "",
        f"{plan['minutes']:g} minutes, {plan['nodes']:,} KWOK nodes (kube-controller-manager and KWOK: pods go "
        f"Running and Ready, nodes renew Leases every 10 s), two pysched replicas on one Lease beside "
        f"kube-scheduler 1.35 ({plan['kube_share']:.0%} of the nodes are its pool). Churn: a Deployment rescaled "
        f"every {plan['scale_every']:g} s ({plan['deployments']} for pysched, {plan['min_replicas']}-"
        f"{plan['max_replicas']} replicas), a Job every {plan['job_every']:g} s, a node failing every "
        f"{plan['node_failure_every']:g} s for {plan['node_down']:g} s, {handover}. Sampled every "
        f"{plan['sample_every']:g} s; the first {warm:g} minutes of each process in each role are warm-up. "
        f"Machine: {summary['machine']['cpus']} CPUs, everything on it.",
        "",
        "| Verdict | Result | Detail |",
        "|---|---|---|",
    ]

    def row(name: str, key: str, detail: str, judged: bool | None = None) -> None:
        x = v[key]
        judged = x.get("judged") if judged is None else judged
        res = "not judged" if not judged else ("pass" if x.get("ok") else "**FAIL**")
        lines.append(f"| {name} | {res} | {detail} |")

    tenures = [t for t in v["memory_tasks_fds"]["tenures"] if t["judged"]]

    def drift(t: dict[str, Any]) -> str:
        why = "" if t["rss_drift_judged"] else f"; {t['minutes']} min: not judged"
        heap = (f"; Python heap blocks {t['heap_blocks_drift_pct_per_hour']:+.1f} %/h"
                if "heap_blocks_drift_pct_per_hour" in t else "")
        return (f"{t['slot']}{t['incarnation']} {t.get('role', 'leader')}: {t['rss_drift_pct_per_hour']:+.1f} "
                f"± {t.get('rss_drift_stderr_pct_per_hour', 0):.1f} %/h ({t['rss_mib_first']:.0f}->"
                f"{t['rss_mib_last']:.0f} MiB over {t['minutes']} min{heap}{why})")

    mem = v["memory_tasks_fds"]
    row(f"RSS drift < {soakcheck.MAX_DRIFT_PCT:g} %/h (tenures of {soakcheck.MIN_DRIFT_MINUTES}+ minutes "
        f"after warm-up)", "memory_tasks_fds", ", ".join(drift(t) for t in tenures) or "no tenure long enough",
        judged=mem.get("rss_drift_judged", False))
    grown = [t["tasks_grew"] or t["fds_grew"] for t in tenures]
    fds = ", ".join(f"{t['slot']}{t['incarnation']} {t.get('role', 'leader')}: {'grew' if g else 'flat'}"
                    for t, g in zip(tenures, grown))
    res = "not judged" if not tenures else ("**FAIL**" if any(grown) else "pass")
    lines.append(f"| No growth in asyncio tasks or descriptors | {res} | {fds or 'no tenure long enough'} |")
    lat = v["latency_flat"]
    row("Latency flat (p99, last third vs first third)", "latency_flat",
        f"{_ms(lat.get('first_p99_s'))} -> {_ms(lat.get('last_p99_s'))} ms (limit {_ms(lat.get('limit_s'))})"
        if lat.get("judged") else lat.get("why", ""))
    e = summary["end_checks"]
    row("Every pod placed", "all_placed", f"{e['all_placed']['count']} left unbound")
    once, alloc = e["placed_exactly_once"], e["within_allocatable"]
    row("Every pod bound exactly once (audit log, per pod UID)", "placed_exactly_once",
        f"{once['bindings']:,} bindings; bound twice: {len(once['pods_bound_twice'])}")
    row("No node above allocatable", "within_allocatable",
        f"{alloc['nodes_checked']:,} nodes checked, {len(alloc['nodes_over'])} over")

    after = [s for s in samples if s["minute"] > warm]
    leaders = [p for s in after for p in s["pysched"] if p.get("leader")]
    kube = [s["kube"] for s in after if s.get("kube")]
    p_lat = [s["latency"]["pysched"] for s in after if s["latency"]["pysched"].get("p99") is not None]
    k_lat = [s["latency"]["kube"] for s in after if (s["latency"].get("kube") or {}).get("p99") is not None]

    per_min = 60.0 / plan["sample_every"]

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.0f}" if xs else "n/a"

    def med_ms(rows: list[dict[str, Any]], q: str) -> str:
        return _ms(statistics.median(r[q] for r in rows)) if rows else "n/a"
    lines += [
        "",
        "| After warm-up (median per minute) | pysched (leader) | kube-scheduler |",
        "|---|---|---|",
        f"| RSS (MiB) | {med([p['rss_mib'] for p in leaders])} | {med([k['rss_mib'] for k in kube])} |",
        f"| Open descriptors | {med([p['fds'] for p in leaders])} | {med([k['fds'] for k in kube])} |",
        f"| Pods scheduled per minute | {med([r['count'] * per_min for r in p_lat])} "
        f"| {med([r['count'] * per_min for r in k_lat])} |",
        f"| Scheduling latency p50 (ms) | {med_ms(p_lat, 'p50')} | {med_ms(k_lat, 'p50')} |",
        f"| Scheduling latency p99 (ms) | {med_ms(p_lat, 'p99')} | {med_ms(k_lat, 'p99')} |",
        "",
        "kube-scheduler scheduled its own, smaller share of the churn on its own pool: its figures are "
        "a reference for the same control plane and machine, not a race.",
        "",
    ]
    for p in chart_paths:
        rel = p.relative_to(md.parent) if p.is_relative_to(md.parent) else p
        lines.append(f"![{p.stem}]({rel.as_posix()})")
        lines.append("")
    lines += ["What happened:", "", "```"]
    lines += [h for s in samples for h in s.get("happened") or ()] + summary.get("happened", [])
    lines += ["```", ""]
    return lines


def markdown(runs: list[tuple[dict[str, Any], list[dict[str, Any]], list[Path]]], md: Path,
             warmup: float | None = None) -> tuple[str, bool]:
    """The page for one or more runs (each: summary, samples, its charts), every run judged under
    the current rules, and whether the soak passed: every run did, and at least one was long
    enough, in one role, to judge RSS drift."""
    judged = [(_judged(s, smp, warmup), s, smp, paths) for s, smp, paths in runs]
    drift_judged = any(v["memory_tasks_fds"].get("rss_drift_judged") for v, *_ in judged)
    ok = all(v["pass"] for v, *_ in judged) and drift_judged
    lines = [
        "# Soak: pysched for an hour on a living cluster",
        "",
        f"**{'PASS' if ok else 'FAIL'}**" + ("" if drift_judged else " (RSS drift not judged: no tenure of "
                                                                  f"{soakcheck.MIN_DRIFT_MINUTES}+ minutes)")
        + f" - {len(runs)} run{'s' if len(runs) > 1 else ''} (`bench/soak.py`; each run directory keeps "
          "`samples.jsonl` and `summary.json`; this page is `python -m bench.soak --report-from DIR,... "
          "--results-md bench/SOAK.md`, every run judged under the current rules).",
        "",
    ]
    for i, (v, summary, samples, paths) in enumerate(judged):
        plan = summary["plan"]
        title = ("Leader handovers" if plan["handover_every"] > 0 else "One leader for the hour")
        lines += [f"## Run {i + 1}: {title}", ""]
        warm = summary["plan"]["warmup"] if warmup is None else warmup
        lines += _run_section(summary, samples, v, warm, paths, md)
    return "\n".join(lines), ok


def write(rundirs: list[Path], md: Path, charts_dir: Path, warmup: float | None = None) -> tuple[Path, bool]:
    """Write the page for ``rundirs`` (charts of run i+1 > 1 named ``soak<i+1>-*``); return it and
    whether the soak passed."""
    md, charts_dir = md.resolve(), charts_dir.resolve()      # chart links relative to the page
    runs = []
    for i, rundir in enumerate(rundirs):
        summary = json.loads(rawdata.read_text(rundir / "summary.json"))
        samples = soakcheck.read_samples(rundir / "samples.jsonl")      # or samples.jsonl.gz beside it
        runs.append((summary, samples, charts(samples, charts_dir, stem="soak" if i == 0 else f"soak{i + 1}")))
    text, ok = markdown(runs, md, warmup)
    md.write_text(text)
    return md, ok
