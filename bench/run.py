"""Benchmark driver: ``python -m bench.run`` (``make bench``).

For every workload, client QPS/burst (default unthrottled 5000/5000) and mode (``--modes``:
drain, steady, burst; ``bench.modes``) it runs each scheduler under test (``--schedulers``:
pysched and the real kube-scheduler 1.35 by default; the null binder, the control plane's own
ceiling, only when named) ``--repeats`` times, interleaved ABBA (``bench.plan``), each run on a
fresh control plane (``bench.runner``). With ``--pin auto`` and two or more CPUs the scheduler
under test runs alone on the last CPU and everything else on the others (``bench.pinning``).

Gang workloads (``Workload.gang_size``) also install the PodGroup CRD and one PodGroup per group
before the measured pods; pysched runs its Coscheduling profile, kube-scheduler (no Coscheduling
plugin) schedules the same pods without gang semantics as a reference (``bench.gangs``). The
gang-backlog workloads (``GangBacklog/...``, ``make bench-gangs``, bench/GANGS.md) put their gangs in
Kubernetes 1.37's PodGroups (the API server and the schedulers with the workload's feature gates;
pysched's ``topology`` profile: TopologyAwarePlacement) or in scheduler-plugins' (for
``scheduler-plugins``, its own scheduler, and pysched's Coscheduling), and count where each gang
went (one rack, one block) and the attempts per gang; a workload may name the schedulers it runs with.

Results go to ``--out`` (``results.json.gz``: the pinning, the machine and every run, gzipped as
``bench/runs`` keeps them, ``bench.rawdata``; a PNG chart per workload) and are printed as tables,
one per mode (``bench.report``); ``--results-md`` also writes them with the method, the machine
and the other load as Markdown. Exit 1 when a run failed, a placement violated a constraint, or a
pysched gang was left partial.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from pysched_dev.devcluster import ControlPlaneError, binaries_dir

from . import aggregate, charts, living, plan, rawdata, report
from .machine import machine_info
from .pinning import Pinning, pin_driver
from .pinning import plan as pin_plan
from .process import BenchError
from .runner import RunSpec, failed, run_one


def _line(d: dict) -> str:
    s = d["summary"]
    m = d.get("metrics") or {}
    ev = (d.get("events") or {}).get("posted")
    parts = [f"bound={s['bound']}/{s['pods']}", f"avg={s['avg']}"]
    if d.get("drain"):
        parts += [f"drain={d['drain'].get('drain_pods_per_s')}", f"ttfb_s={d['drain'].get('time_to_first_bind_s')}"]
    parts += [f"create/s={d.get('create_rate')}", f"lat_p99_ms={s['latency_p99_ms']}", f"cpu_s={d.get('cpu_s')}",
              f"peak_rss_mib={d.get('peak_rss_mib')}", f"events={ev}", f"api/pod={m.get('api_requests_per_pod')}",
              f"other_cpu={(d.get('load') or {}).get('other_cpu_per_s')}", f"violations={len(d['violations'])}"]
    return "  " + " ".join(parts) + (f" ERROR {d['error']}" if d["error"] else "")


async def main_async(args, pinning: Pinning, meta: dict) -> list[dict]:
    workloads = plan.select_workloads(args.workloads)
    if args.scale:
        workloads = [w.scaled(*(int(x) for x in args.scale.split(","))) for w in workloads]
    workloads = living_variants(workloads, args.cluster)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    planned = list(plan.runs(workloads, plan.parse_modes(args.modes), plan.parse_qps(args.qps),
                             plan.parse_schedulers(args.schedulers), args.repeats,
                             plan.parse_profiles(args.pysched_profile)))
    for i, p in enumerate(planned, 1):
        spec = RunSpec(p.workload, p.kind, p.mode, p.qps, p.burst, p.repeat, out / "runs" / p.slug, pinning,
                       steady_rate=args.steady_rate, profile_dir=Path(args.profile) if args.profile else None,
                       pysched_profile=p.profile or "default", load_metrics_always=args.load_metrics == "all",
                       cluster="living" if p.workload.name.endswith(living.SUFFIX) else "bare")
        who = f"{p.kind} profile={p.profile}" if p.profile else p.kind
        print(f"# [{i}/{len(planned)}] {p.workload.name} mode={p.mode} repeat={p.repeat} scheduler={who} "
              f"qps={p.qps:g}/{p.burst} ...", flush=True)
        try:
            d = (await run_one(spec)).as_dict()
        except (BenchError, ControlPlaneError) as exc:
            d = failed(spec, str(exc).splitlines()[0]).as_dict()
            print(f"  run failed: {exc}", file=sys.stderr, flush=True)
        results.append(d)
        print(_line(d), flush=True)
        rawdata.write_gz(out / "results.json.gz", json.dumps({**meta, "runs": results}, indent=1))
    return results


def living_variants(workloads: list, clusters: str) -> list:
    """The workloads for ``--cluster``: bare ones as they are, living ones renamed ``<name>+living``
    (their own cells in the report); a workload that cannot run living is left out with a note."""
    wanted = [c.strip() for c in clusters.split(",") if c.strip()]
    bad = [c for c in wanted if c not in ("bare", "living")]
    if bad or not wanted:
        raise SystemExit(f"--cluster: {', '.join(bad) or '(none)'}: choose from bare, living")
    out = list(workloads) if "bare" in wanted else []
    if "living" in wanted:
        for w in workloads:
            why = living.supported(w)
            if why:
                print(f"# {w.name}: not on a living cluster ({why})", flush=True)
            else:
                out.append(dataclasses.replace(w, name=w.name + living.SUFFIX))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="all", help="'all', 'smoke', or comma-separated names or prefixes")
    p.add_argument("--modes", default="drain,steady,burst", help="comma-separated: drain, steady, burst")
    p.add_argument("--qps", default="5000/5000", help="client QPS/burst pairs, comma-separated (e.g. 50/100,5000/5000)")
    p.add_argument("--schedulers", default="pysched,kube-scheduler",
                   help="comma-separated, in ABBA order: pysched, kube-scheduler, null-binder, scheduler-plugins "
                        "(its kube-scheduler with Coscheduling: hack/scheduler-plugins.sh)")
    p.add_argument("--repeats", type=int, default=3, help="runs per (workload, mode, scheduler), interleaved ABBA")
    p.add_argument("--steady-rate", type=float, default=100.0, help="steady mode: measured pods created per second")
    p.add_argument("--cluster", default="bare",
                   help="comma-separated: bare (etcd + kube-apiserver; pods nobody owns, nodes nothing manages), "
                        "living (kube-controller-manager and KWOK beside them: the pods belong to Deployments, go "
                        "Running and Ready, nodes renew Leases; bench.living)")
    p.add_argument("--pin", default="auto", choices=("auto", "off"),
                   help="auto: the scheduler under test alone on the last CPU, everything else on the others")
    p.add_argument("--scale", default="", help="override NODES,INIT,MEASURE for every selected workload")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "pysched-bench"))
    p.add_argument("--results-md", default="", help="write the Markdown report here (and charts beside it)")
    p.add_argument("--pysched-profile", default="default",
                   help="comma-separated, each run in pysched's place in the ABBA order: "
                        "default: kube-scheduler's plugins, as kube-scheduler runs them (like with like); "
                        "shipped: plus pysched's own scores, as the shipped ConfigMap; "
                        "loadaware: the default plus TargetLoadPacking and LoadVariationRiskBalancing on a real "
                        "Prometheus (needs the prometheus binary: PYSCHED_PROMETHEUS or hack/prometheus.sh); "
                        "topology: the default with TopologyAwarePlacement (levels: the gang-backlog workloads' "
                        "block and rack) in place of TopologyPlacementGenerator")
    p.add_argument("--load-metrics", default="loadaware", choices=("loadaware", "all"),
                   help="which runs get the node exporter and Prometheus: only the loadaware profile's, or all "
                        "(profiles then compared on the same machine load)")
    p.add_argument("--profile", default="", help="directory for py-spy profiles of pysched (raw collapsed stacks, "
                   "sampled only while it holds the GIL: its on-CPU Python time, not its waits)")
    p.add_argument("--report-from", default="",
                   help="run nothing: write the report (stdout, --results-md, charts) from these results.json.gz "
                        "(or plain results.json) files (comma-separated; e.g. several make bench invocations "
                        "on one machine)")
    args = p.parse_args(argv)
    if args.report_from:
        return report_from([Path(x) for x in args.report_from.split(",") if x], args)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if not args.steady_rate > 0:
        p.error("--steady-rate must be positive")
    plan.parse_profiles(args.pysched_profile)
    argv_used = argv if argv is not None else sys.argv[1:]
    command = "make bench BENCH_ARGS=" + shlex.quote(" ".join(argv_used))
    # Pin before anything starts: the control planes, the watcher and the creator inherit the mask.
    pinning = pin_plan(args.pin)
    pin_driver(pinning)
    info = machine_info(binaries_dir())
    meta = {"command": command, "machine": info, "pinning": pinning.as_dict(), "repeats": args.repeats,
            "steady_rate": args.steady_rate, "pysched_profile": args.pysched_profile,
            "load_metrics": args.load_metrics}
    print(f"pinning: {pinning.describe()}", flush=True)
    results = asyncio.run(main_async(args, pinning, meta))
    return write_report(results, args, [command], info, pinning.as_dict(), args.repeats, args.steady_rate,
                        plan.parse_schedulers(args.schedulers), args.pysched_profile)


def load_results(path: Path) -> dict:
    """A run's results, gzipped (``results.json.gz``, as ``bench.run`` writes them and ``bench/runs``
    keeps them) or plain (``results.json``, as it wrote them before)."""
    return json.loads(rawdata.read_text(path))


def report_from(paths: list[Path], args) -> int:
    """The report of earlier runs, from their results files. Each file's repeats are numbered on
    from the previous file's (each series starts at repeat 0), so two series of the same cells are
    one longer series whose runs still pair up by repeat."""
    metas = [load_results(p) for p in paths]
    results, offset = [], 0
    for m in metas:
        for r in m["runs"]:
            results.append({**r, "repeat": r["repeat"] + offset})
        offset += m["repeats"]
    first = metas[0]
    return write_report(results, args, [m["command"] for m in metas], first["machine"], first["pinning"],
                        max(len({r["repeat"] for r in c.runs}) for c in aggregate.cells(results)),
                        first["steady_rate"],
                        plan.parse_schedulers(args.schedulers),
                        ", ".join(sorted({m.get("pysched_profile", "shipped") for m in metas})))


def write_report(results: list[dict], args, commands: list[str], info: dict, pinning: dict, repeats: int,
                 steady_rate: float, schedulers: list[str], pysched_profile: str = "default") -> int:
    out = Path(args.out)
    chart_dir = Path(args.results_md).parent / "charts" if args.results_md else out
    chart_dir.mkdir(parents=True, exist_ok=True)
    pngs = charts.chart(results, chart_dir)
    print(f"\npinning: {pinning.get('description')}")
    for title, body in report.sections(results):
        print(f"\n## {title}\n\n{body}")
    print(f"\ncharts: {', '.join(str(c) for c in pngs)}")
    if args.results_md:
        md = report.markdown(results, info, "`, `".join(commands), pngs, Path(args.results_md).parent, pinning,
                             repeats, steady_rate, schedulers, pysched_profile)
        Path(args.results_md).write_text(md + "\n")
    return 1 if report.failed_runs(results) else 0


if __name__ == "__main__":
    sys.exit(main())
