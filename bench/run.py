"""Benchmark driver: ``python -m bench.run`` (``make bench``).

For every workload and client rate limit (default 50/100, then unthrottled 5000/5000) it runs each
scheduler under test on a fresh control plane: pysched, the real kube-scheduler 1.35 and (only
unthrottled) the null binder. One run:

1. start etcd + kube-apiserver, create the workload's Node objects and the ``bench`` namespace;
2. start the scheduler process with ``clientConnection.qps/burst`` set, leader election off;
3. create the init pods and wait until all are bound (this also waits out the scheduler's start);
4. start the watcher process (a separate client) and, once it is listening, create the measured
   pods as fast as the API server takes them (64 in flight);
5. when the watcher has seen every measured pod bound, sample the scheduler's CPU seconds and peak
   RSS from /proc, list every pod and check every placement against every hard constraint
   (``bench.verify``), then stop everything.

Gang workloads (``Workload.gang_size``) also install the PodGroup CRD from
``manifests/components/coscheduling/``, create one PodGroup per group before the measured pods, run
pysched with the Coscheduling profile (the PodGroup status controller off: only scheduling is
measured), wait for the pods of the groups that fit, and report groups placed per second, the
time to admit a group and partial groups (``bench.gangs``, ``bench.verify.check_gangs``).
kube-scheduler has no Coscheduling plugin: it schedules the same pods without gang semantics and
its row is a reference (its partial groups are reported, not failed); the null binder is skipped.

Results go to ``--out`` (JSON per run, a PNG chart per workload) and are printed as a table with
the throughput ratio pysched / kube-scheduler; ``--results-md`` also writes that table with the
machine and versions as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, binaries_dir, free_port
from pysched_dev.testkit import create_nodes, create_pods, custom_scores_profile, ensure_namespace

from . import gangs, procstat, stats, verify
from .workloads import NAMESPACE, PHASE_LABEL, SMOKE, WORKLOADS, Workload, podgroups

REPO = Path(__file__).resolve().parent.parent
PYSCHED, KUBE, NULL = "pysched", "kube-scheduler", "null-binder"
SCHEDULER_NAMES = {PYSCHED: "pysched", KUBE: "default-scheduler", NULL: "bench-null-binder"}
CREATE_CONCURRENCY = 64


class BenchError(RuntimeError):
    """A run could not complete (a process died, pods were left unbound past the timeout)."""


@dataclass
class RunResult:
    workload: str
    scheduler: str
    qps: float
    burst: int
    nodes: int
    init_pods: int
    summary: dict
    create_rate: float
    cpu_s: float
    peak_rss_mib: float
    violations: list[str]
    bind_offsets: list[float] = field(repr=False)
    seen_offsets: list[float] = field(repr=False, default_factory=list)
    error: str = ""
    gang: dict = field(default_factory=dict)   # gang workloads: bench.gangs.gang_summary + "partial"

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# -- scheduler processes --------------------------------------------------------------------------

class Process:
    """A benchmark subprocess with its log in the run directory."""

    def __init__(self, args: list[str], log: Path, cwd: Path = REPO):
        self.log_path = log
        self._log = open(log, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(args, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self, what: str) -> None:
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise BenchError(f"{what} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


COSCHEDULING_CRD = REPO / "manifests" / "components" / "coscheduling" / "crd.yaml"


def coscheduling_profile(scheduler_name: str) -> dict:
    """pysched as shipped with the coscheduling component (its configmap-patch.yaml profile)."""
    profile = custom_scores_profile(scheduler_name)
    profile["plugins"]["queueSort"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    profile["plugins"]["multiPoint"]["enabled"].append({"name": "Coscheduling"})
    return profile


def start_scheduler(kind: str, cp: ControlPlane, qps: float, burst: int, rundir: Path, gang: bool = False) -> Process:
    client_connection = {"qps": qps, "burst": burst}
    if kind == PYSCHED:
        # pysched as shipped (manifests/configmap.yaml): kube's default plugins plus its own scores.
        profile = (coscheduling_profile if gang else custom_scores_profile)(SCHEDULER_NAMES[PYSCHED])
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False}, "clientConnection": client_connection,
               "profiles": [profile]}
        path = rundir / "pysched-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([sys.executable, "-m", "pysched", "run", "--config", str(path),
                        "--kubeconfig", str(cp.kubeconfig), "--log-level", "warning",
                        "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
                        "--cert-dir", str(rundir / "pysched-certs"), "--podgroup-controller=off"],
                       rundir / "pysched.log")
    if kind == KUBE:
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False},
               "clientConnection": {**client_connection, "kubeconfig": str(cp.kubeconfig)},
               "profiles": [{"schedulerName": SCHEDULER_NAMES[KUBE]}]}
        path = rundir / "kube-scheduler-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([str(cp.bin / "kube-scheduler"), f"--config={path}", f"--secure-port={free_port()}",
                        "--bind-address=127.0.0.1", "--v=1"], rundir / "kube-scheduler.log")
    if kind == NULL:
        return Process([sys.executable, "-m", "bench.nullbinder", "--kubeconfig", str(cp.kubeconfig),
                        "--scheduler-name", SCHEDULER_NAMES[NULL], "--qps", str(qps), "--burst", str(burst)],
                       rundir / "null-binder.log")
    raise ValueError(f"unknown scheduler {kind!r}")


# -- one run --------------------------------------------------------------------------------------

async def _wait_all_bound(client: KubeClient, phase: str, sched: Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    params = {"labelSelector": f"{PHASE_LABEL}={phase}", "fieldSelector": "spec.nodeName="}
    while True:
        sched.check_alive("scheduler")
        pending, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods", params)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{len(pending)} {phase} pods still unbound after {timeout:.0f}s, "
                             f"e.g. {pending[0]['metadata']['name']}")
        await asyncio.sleep(0.5)


async def _start_watcher(cp: ControlPlane, expect: int, timeout: float, rundir: Path):
    out = rundir / "watcher.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.watcher", "--kubeconfig", str(cp.kubeconfig), "--namespace", NAMESPACE,
        "--selector", f"{PHASE_LABEL}=measure", "--expect", str(expect), "--timeout", str(timeout),
        "--out", str(out), cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=open(rundir / "watcher.log", "ab"))
    line = await asyncio.wait_for(proc.stdout.readline(), 120)
    if line.strip() != b"READY":
        raise BenchError(f"watcher did not start: {line!r}")
    return proc, out


def _py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise BenchError("--profile needs py-spy (pip install '.[bench]')")
    return found


def _timeout(pods: int, qps: float) -> float:
    return 180.0 + 3.0 * pods / min(qps, 200.0)


async def run_one(workload: Workload, kind: str, qps: float, burst: int, rundir: Path,
                  profile_dir: Path | None = None) -> RunResult:
    rundir.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane()
    cp.start()
    sched: Process | None = None
    profiler: subprocess.Popen | None = None
    client = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1, max_connections=CREATE_CONCURRENCY)
    name = SCHEDULER_NAMES[kind]
    try:
        await create_nodes(client, (workload.node(i) for i in range(workload.nodes)), concurrency=CREATE_CONCURRENCY)
        await ensure_namespace(client, NAMESPACE)
        for path, body in workload.prelude():
            await client.request("POST", path, body=body, rate_limit=False)
        if workload.gang_size:
            await install_podgroups(client, workload)
        sched = start_scheduler(kind, cp, qps, burst, rundir, gang=bool(workload.gang_size))
        if workload.init_pods:
            await create_pods(client, (workload.pod(i, name, "init") for i in range(workload.init_pods)),
                              concurrency=CREATE_CONCURRENCY)
            await _wait_all_bound(client, "init", sched, _timeout(workload.init_pods, qps))
        timeout = _timeout(workload.measure_pods, qps)
        expect = workload.expected_bound
        watcher, watcher_out = await _start_watcher(cp, expect, timeout, rundir)
        if profile_dir is not None and kind == PYSCHED:
            profile_dir.mkdir(parents=True, exist_ok=True)
            slug = workload.name.replace("/", "_")
            profiler = subprocess.Popen(
                [_py_spy(), "record", "--pid", str(sched.pid), "--rate", "200", "--format", "raw",
                 "--output", str(profile_dir / f"{slug}-qps{int(qps)}.txt")],
                stdout=subprocess.DEVNULL, stderr=open(rundir / "py-spy.log", "ab"))
        cpu0 = procstat.sample(sched.pid)
        pods = [workload.pod(i, name, "measure") for i in range(workload.measure_pods)]
        t0 = time.time()
        await create_pods(client, pods, concurrency=CREATE_CONCURRENCY)
        create_rate = workload.measure_pods / max(time.time() - t0, 1e-9)
        while watcher.returncode is None:
            sched.check_alive(kind)
            try:
                await asyncio.wait_for(watcher.wait(), 1.0)
            except TimeoutError:
                pass
        cpu1 = procstat.sample(sched.pid)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            try:
                profiler.wait(30)
            except subprocess.TimeoutExpired:
                profiler.kill()
        records = json.loads(watcher_out.read_text())["pods"]
        summary = stats.summarise(t0, records, expect)
        nodes, _ = await client.list_all("/api/v1/nodes")
        all_pods, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        violations = [str(v) for v in verify.check_placements(nodes, all_pods)]
        error = ""
        if summary.bound < expect:
            error = f"only {summary.bound}/{expect} measured pods bound within {timeout:.0f}s"
        gang = gang_report(workload, t0, records, all_pods) if workload.gang_size else {}
        binds = sorted(r["bound"] - t0 for r in records.values() if r.get("bound") is not None)
        seen = sorted(r["seen"] - t0 for r in records.values() if r.get("seen") is not None)
        return RunResult(workload.name, kind, qps, burst, workload.nodes, workload.init_pods, summary.as_dict(),
                         round(create_rate, 1), round(cpu1.cpu_s - cpu0.cpu_s, 2), round(cpu1.peak_rss_mib, 1),
                         violations, [round(b, 4) for b in binds], [round(x, 4) for x in seen], error, gang)
    finally:
        if profiler is not None and profiler.poll() is None:
            profiler.kill()
        if sched is not None:
            sched.stop()
        await client.close()
        for log in ("etcd.log", "kube-apiserver.log"):
            src = cp.workdir / log if cp.workdir else None
            if src and src.exists():
                shutil.copy(src, rundir / log)
        cp.stop()


async def install_podgroups(client: KubeClient, workload: Workload) -> None:
    """The PodGroup CRD (the coscheduling component's) and the workload's groups."""
    await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                         body=yaml.safe_load(COSCHEDULING_CRD.read_text()), rate_limit=False)
    path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"
    deadline = time.monotonic() + 60
    for pg in podgroups(workload):
        while True:
            try:
                await client.request("POST", path, body=pg, rate_limit=False)
                break
            except Exception:  # noqa: BLE001 - the CRD is not served yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


def gang_report(workload: Workload, t0: float, records: dict, all_pods: list[dict]) -> dict:
    group_of = {p["metadata"]["name"]: p["metadata"]["labels"][verify.GANG_LABEL] for p in all_pods
                if verify.GANG_LABEL in (p["metadata"].get("labels") or {})}
    out = gangs.gang_summary(t0, records, group_of, workload.gang_size)
    need = {f"{NAMESPACE}/{g}": workload.gang_size for g in set(group_of.values())}
    out["partial"] = len(verify.check_gangs(all_pods, need))
    out["fitting"] = workload.fitting_groups
    return out


# -- reporting ------------------------------------------------------------------------------------

def _row(r: dict, ratio: str) -> str:
    s = r["summary"]
    if r["error"]:
        valid = f"**NO**: {r['error']}"
    elif r["scheduler"] == NULL:
        valid = f"n/a (no filtering: {len(r['violations'])} violations)"
    else:
        valid = "yes" if not r["violations"] else f"**NO** ({len(r['violations'])} violations)"
    return (f"| {r['workload']} | {_qps(r)} | {r['scheduler']} | {s['avg']:.1f} | {s['p50']:.0f} | {s['p90']:.0f} | "
            f"{s['p99']:.0f} | {ratio} | {s['latency_p50_ms']:.0f} | {s['latency_p99_ms']:.0f} | {r['cpu_s']:.1f} | "
            f"{r['peak_rss_mib']:.0f} | {r['create_rate']:.0f} | {valid} |")


def _qps(r: dict) -> str:
    return f"{r['qps']:g}/{r['burst']}"


def table(results: list[dict]) -> str:
    head = ("| workload | QPS/burst | scheduler | pods/s avg | p50 | p90 | p99 | ratio ours/kube (avg) | "
            "latency p50 ms | latency p99 ms | sched CPU s | sched peak RSS MiB | create/s | placements valid |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    lines = [head]
    by_key: dict[tuple, dict] = {}
    for r in results:
        by_key[(r["workload"], r["qps"], r["scheduler"])] = r
    for r in results:
        ratio = ""
        if r["scheduler"] == PYSCHED:
            k = by_key.get((r["workload"], r["qps"], KUBE))
            if k and k["summary"]["avg"]:
                ratio = f"**{r['summary']['avg'] / k['summary']['avg']:.2f}**"
        elif r["scheduler"] == NULL:
            ratio = "(ceiling)"
        lines.append(_row(r, ratio))
    return "\n".join(lines)


def gang_table(results: list[dict]) -> str:
    """Gang workloads: groups placed, partial groups, groups/s and admit times ("" when none ran)."""
    rows = [r for r in results if r.get("gang")]
    if not rows:
        return ""
    lines = ["| workload | QPS/burst | scheduler | gang semantics | groups placed / fitting / total | "
             "partial groups | groups/s | admit p50 ms | admit p99 ms |",
             "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        g = r["gang"]
        sem = "Coscheduling" if r["scheduler"] == PYSCHED else "none (reference)"
        lines.append(f"| {r['workload']} | {_qps(r)} | {r['scheduler']} | {sem} | "
                     f"{g['placed']} / {g['fitting']} / {g['groups']} | {g['partial']} | {g['groups_per_s']:.2f} | "
                     f"{g['admit_p50_ms']:.0f} | {g['admit_p99_ms']:.0f} |")
    return "\n".join(lines)


def failed_runs(results: list[dict]) -> list[dict]:
    """Runs that make ``bench.run`` exit 1: errors, placement violations (not the null binder's), and
    partial groups under pysched's Coscheduling (kube-scheduler's gang row is only a reference)."""
    return [r for r in results if r["error"] or (r["violations"] and r["scheduler"] != NULL)
            or (r.get("gang") and r["scheduler"] == PYSCHED and r["gang"]["partial"])]


def chart(results: list[dict], out: Path) -> list[Path]:
    """One PNG per workload: cumulative bound pods over time per scheduler and QPS (dotted: created)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for wl in dict.fromkeys(r["workload"] for r in results):
        runs = [r for r in results if r["workload"] == wl]
        modes = sorted({r["qps"] for r in runs}, reverse=True)
        fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4), squeeze=False)
        for ax, qps in zip(axes[0], modes):
            for r in runs:
                if r["qps"] != qps:
                    continue
                xs, ys = stats.bound_over_time(0.0, r["bind_offsets"])
                line, = ax.plot(xs, ys, label=f"{r['scheduler']} bound ({r['summary']['avg']:.0f} pods/s)",
                                linestyle="--" if r["scheduler"] == NULL else "-")
                if r.get("seen_offsets"):
                    xs, ys = stats.bound_over_time(0.0, r["seen_offsets"])
                    ax.plot(xs, ys, color=line.get_color(), linestyle=":", linewidth=1, alpha=0.7,
                            label=f"{r['scheduler']} run: pods created")
            ax.set_title(f"{wl}, client QPS {qps:g}")
            ax.set_xlabel("seconds since the first measured pod was created")
            ax.set_ylabel("measured pods bound")
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right")
        fig.tight_layout()
        path = out / f"{wl.replace('/', '_')}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def machine_info(bin_dir: Path) -> dict:
    def version(args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in open("/proc/meminfo") if x.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = 0
    import aiohttp
    import numpy
    import orjson
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "kube-scheduler": version([str(bin_dir / "kube-scheduler"), "--version"]),
            "kube-apiserver": version([str(bin_dir / "kube-apiserver"), "--version"]),
            "etcd": version([str(bin_dir / "etcd"), "--version"]),
            "aiohttp": aiohttp.__version__, "orjson": orjson.__version__, "numpy": numpy.__version__}


def markdown(results: list[dict], info: dict, command: str, charts: list[Path], md_dir: Path) -> str:
    lines = ["# Benchmark results", "",
             f"Command: `{command}`", "",
             "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), "",
             "Each run uses a fresh etcd + kube-apiserver (etcd on tmpfs), the workload's nodes, the init",
             "pods (scheduled first, not measured), then the measured pods created by 64 concurrent",
             "clients while a separate watcher process timestamps each bind. pods/s are per-second",
             "samples (scheduler_perf's SchedulingThroughput); latency is watcher-seen creation to",
             "watcher-seen bind; CPU seconds and peak RSS (VmHWM) are the scheduler process's during the",
             "measured phase; `placements valid` is `bench.verify` over every pod at the end.", "",
             table(results), ""]
    if gang_table(results):
        lines += ["Gang workloads (pods/s and latency above count the pods of the groups that fit):", "",
                  gang_table(results), ""]
    lines += READING
    for c in charts:
        rel = os.path.relpath(c, md_dir)
        lines += [f"![{c.stem}]({rel})", ""]
    return "\n".join(lines)


READING = [
    "How to read it: everything (etcd, kube-apiserver, the scheduler, the pod creator and the",
    "watcher) shares the machine's cores, so unthrottled throughput is bounded by the API server;",
    "the `create/s` column is the rate the measured pods were created at, and a scheduler that keeps",
    "up binds at about that rate. The less CPU a scheduler takes, the more the API server gets. At",
    "QPS 50 both schedulers bind at the client limit, and latency is how long the last pods wait",
    "for a token, so it mostly reflects how fast the pods were created. The null binder binds",
    "round-robin without any checks (its violations are expected); it is the ceiling. Where the",
    "scheduler's time goes is in `bench/PROFILE.md`.",
    "",
]


# -- entry point ----------------------------------------------------------------------------------

def parse_modes(text: str) -> list[tuple[float, int]]:
    modes = []
    for part in text.split(","):
        q, _, b = part.partition("/")
        modes.append((float(q), int(b or q)))
    return modes


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


async def main_async(args) -> list[dict]:
    workloads = select_workloads(args.workloads)
    if args.scale:
        workloads = [w.scaled(*(int(x) for x in args.scale.split(","))) for w in workloads]
    modes = parse_modes(args.qps)
    schedulers = args.schedulers.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    for wl in workloads:
        for qps, burst in modes:
            for kind in schedulers:
                if kind == NULL and (qps < 1000 or wl.gang_size):
                    continue  # the ceiling is only interesting unthrottled, and means nothing for gangs
                rundir = out / "runs" / f"{wl.name.replace('/', '_')}-{kind}-qps{int(qps)}"
                print(f"# {wl.name} scheduler={kind} qps={qps:g}/{burst} ...", flush=True)
                try:
                    r = await run_one(wl, kind, qps, burst, rundir,
                                      Path(args.profile) if args.profile else None)
                    d = r.as_dict()
                except BenchError as exc:
                    d = RunResult(wl.name, kind, qps, burst, wl.nodes, wl.init_pods,
                                  stats.Summary(wl.measure_pods, 0, 0, 0, 0, 0, 0, 0, 0).as_dict(),
                                  0.0, 0.0, 0.0, [], [], [], error=str(exc).splitlines()[0]).as_dict()
                    print(f"  run failed: {exc}", file=sys.stderr, flush=True)
                results.append(d)
                s = d["summary"]
                print(f"  bound={s['bound']}/{s['pods']} avg={s['avg']} p50={s['p50']} p99={s['p99']} "
                      f"lat_p99_ms={s['latency_p99_ms']} cpu_s={d['cpu_s']} peak_rss_mib={d['peak_rss_mib']} "
                      f"violations={len(d['violations'])} {d['error']}", flush=True)
                (out / "results.json").write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="all", help="'all', 'smoke', or comma-separated names or prefixes")
    p.add_argument("--qps", default="50/100,5000/5000", help="client QPS/burst modes, comma-separated")
    p.add_argument("--schedulers", default=f"{PYSCHED},{KUBE},{NULL}")
    p.add_argument("--scale", default="", help="override NODES,INIT,MEASURE for every selected workload")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "pysched-bench"))
    p.add_argument("--results-md", default="", help="write the Markdown report here (and charts beside it)")
    p.add_argument("--profile", default="", help="directory for py-spy profiles of pysched (raw collapsed stacks)")
    args = p.parse_args(argv)
    results = asyncio.run(main_async(args))
    out = Path(args.out)
    chart_dir = Path(args.results_md).parent / "charts" if args.results_md else out
    chart_dir.mkdir(parents=True, exist_ok=True)
    charts = chart(results, chart_dir)
    print()
    print(table(results))
    if gang_table(results):
        print()
        print(gang_table(results))
    print(f"\ncharts: {', '.join(str(c) for c in charts)}")
    if args.results_md:
        command = "make bench BENCH_ARGS=" + shlex.quote(" ".join(argv if argv is not None else sys.argv[1:]))
        md = markdown(results, machine_info(binaries_dir()), command, charts, Path(args.results_md).parent)
        Path(args.results_md).write_text(md + "\n")
    return 1 if failed_runs(results) else 0


if __name__ == "__main__":
    sys.exit(main())
