"""One benchmark run: a fresh control plane, one workload, one scheduler, one mode, one end sample.

1. start etcd + kube-apiserver (pinned with the driver to the other CPUs), create the workload's
   nodes, the ``bench`` namespace, the workload's prelude objects and, for gang workloads, the
   PodGroup CRD and groups: all before any scheduler starts;
2. start the scheduler under test (on its own CPU when pinned), create the init pods and wait
   until they are bound;
3. the mode's measured phase (``bench.modes``: drain, steady or burst);
4. wait until the watcher has seen every measured pod bound, then until the scheduler's
   ``Scheduled`` Events for them are posted (``bench.events``), and only then take the end
   sample: the scheduler's CPU seconds and peak RSS (/proc), its /metrics (``bench.scrape``), the
   other load on the machine (``bench.machine``);
5. list every pod and check every placement against every hard constraint (``bench.verify``;
   GPU-sharing workloads: pysched's GPUs too); stop everything.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import ApiError, KubeClient
from pysched_dev.devcluster import ControlPlane
from pysched_dev.livecluster import LivingCluster
from pysched_dev.promkit import BulkExporter, PrometheusServer, prometheus_binary
from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace

from . import events, gangs, living, procstat, prom, scrape, stats, verify
from . import watcher as watcher_mod
from .machine import loadavg
from .modes import CREATE_CONCURRENCY, PHASES, Phase
from .pinning import Pinning
from .process import REPO, BenchError, Process
from .querypump import QueryPump
from .schedulers import (
    COSCHEDULING_CRD,
    NULL,
    PYSCHED,
    SCHEDULER_NAMES,
    SCHEDULER_PLUGINS,
    load_aware_pump,
    load_aware_queries,
    start_scheduler,
)
from .workloads import BLOCK, NAMESPACE, PHASE_LABEL, RACK, Workload, podgroups


@dataclass
class RunSpec:
    workload: Workload
    kind: str            # pysched, kube-scheduler, null-binder
    mode: str            # drain, steady, burst
    qps: float
    burst: int
    repeat: int
    rundir: Path
    pinning: Pinning
    steady_rate: float = 100.0
    profile_dir: Path | None = None
    pysched_profile: str = "default"     # bench.schedulers.PROFILES
    load_metrics_always: bool = False    # the exporter and Prometheus in this run whatever the profile
    cluster: str = "bare"                # bare: the control plane alone; living: bench.living


@dataclass
class RunResult:
    workload: str
    mode: str
    scheduler: str
    repeat: int
    qps: float
    burst: int
    nodes: int
    init_pods: int
    expected: int
    summary: dict                       # bench.stats.Summary
    create_rate: float | None = None    # measured pods created per second
    target_rate: float | None = None    # steady: the creation rate asked for
    drain: dict = field(default_factory=dict)     # time_to_first_bind_s, drain_pods_per_s, overall_pods_per_s
    cpu_s: float | None = None          # scheduler CPU seconds (/proc) over the measured phase
    cpu_s_per_1000_pods: float | None = None
    peak_rss_mib: float | None = None
    metrics: dict = field(default_factory=dict)   # bench.scrape.figures ({} for the null binder)
    events: dict = field(default_factory=dict)    # posted, waited_s, short ({} for the null binder)
    load: dict = field(default_factory=dict)      # loadavg at start, other CPU over the phase
    affinity: dict = field(default_factory=dict)  # Cpus_allowed_list of the processes, as observed
    violations: list[str] = field(default_factory=list)
    bind_offsets: list[float] = field(default_factory=list, repr=False)
    seen_offsets: list[float] = field(default_factory=list, repr=False)
    error: str = ""
    gang: dict = field(default_factory=dict)      # gang workloads: bench.gangs.gang_summary + "partial"
    profile: str = ""                   # pysched's profile ("" for the other schedulers)
    load_metrics: bool = False          # the exporter and Prometheus ran beside the scheduler
    load_queries: bool = False          # ... and answered the loadaware queries (its own, or the pump's)
    cluster: str = "bare"
    living: dict = field(default_factory=dict)    # living runs: status_updates_per_pod, informer_events_per_pod

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def failed(spec: RunSpec, error: str) -> RunResult:
    w = spec.workload
    return RunResult(w.name, spec.mode, spec.kind, spec.repeat, spec.qps, spec.burst, w.nodes, w.init_pods,
                     w.expected_bound, stats.summarise(0.0, {}, w.expected_bound).as_dict(), error=error,
                     profile=spec.pysched_profile if spec.kind == PYSCHED else "")


def _timeout(pods: int, qps: float) -> float:
    return 180.0 + 3.0 * pods / min(qps, 200.0)


def _py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise BenchError("--profile needs py-spy (pip install '.[bench]')")
    return found


class Run:
    """The resources of one run (released by ``close``) and the helpers the modes use."""

    def __init__(self, spec: RunSpec, cp: ControlPlane, client: KubeClient):
        self.spec, self.cp, self.client = spec, cp, client
        self.apiserver0: prom.Samples | None = None     # living runs: the API server's metrics at t0
        self.processes: list[Process] = []
        self.watcher: watcher_mod.Spawned | None = None
        self.profiler: subprocess.Popen | None = None
        self.exporter: BulkExporter | None = None
        self.prometheus: PrometheusServer | None = None
        self.pump: QueryPump | None = None     # the loadaware queries, in the other profiles' runs

    @property
    def load_aware(self) -> bool:
        return self.spec.kind == PYSCHED and self.spec.pysched_profile == "loadaware"

    async def start_load_metrics(self) -> None:
        """For the loadaware profile (or every run, ``load_metrics_always``: profiles compared on the
        same machine load): an exporter of every node's cpu/memory figures and a real Prometheus
        scraping it every 5 s, answering every query the profile sends for every node before the
        scheduler starts (so no run is measured on the fallback)."""
        w = self.spec.workload
        names = [w.node(i)["metadata"]["name"] for i in range(w.nodes)]
        self.exporter = await BulkExporter(names).start()
        self.prometheus = PrometheusServer(prometheus_binary(), self.exporter.scrape_configs(5.0),
                                           scrape_interval_s=5.0, workdir=self.spec.rundir / "prometheus").start()
        for query in load_aware_queries(self.prometheus.address):
            await self.prometheus.wait_for_series(query, len(names), timeout=120)

    @property
    def gang(self) -> bool:
        """Gangs in scheduler-plugins' PodGroups: their CRD, and Coscheduling in pysched's profile."""
        return self.spec.workload.coscheduling

    @property
    def timeout(self) -> float:
        w, s = self.spec.workload, self.spec
        extra = w.measure_pods / s.steady_rate if s.mode == "steady" else 0.0
        return _timeout(w.measure_pods, s.qps) + extra

    def measured_pods(self) -> list[dict]:
        w = self.spec.workload
        return [w.pod(i, SCHEDULER_NAMES[self.spec.kind], "measure") for i in range(w.measure_pods)]

    @property
    def living(self) -> bool:
        return self.spec.cluster == "living"

    async def create_measured(self, pods: list[dict]) -> float:
        """Create the measured pods - bare, or (living) through Deployments whose controllers create
        them - and return pods created per second."""
        if self.living and not self.spec.workload.bare_pods:
            return await living.create_owned(self.client, pods, "measure", self.timeout)
        await create_pod_objects(self.client, self.spec.workload, self.spec.kind, "measure")
        t = time.monotonic()
        await create_pods(self.client, pods, concurrency=CREATE_CONCURRENCY)
        return len(pods) / max(time.monotonic() - t, 1e-9)

    async def mark_t0(self) -> None:
        """Living runs: the API server's counters as the measured phase starts."""
        if self.living:
            self.apiserver0 = await living.apiserver_metrics(self.client)

    def start_scheduler(self, tag: str = "") -> Process:
        s = self.spec
        p = start_scheduler(s.kind, self.cp, s.qps, s.burst, s.rundir, s.pinning, gang=self.gang, tag=tag,
                            profile=s.pysched_profile, feature_gates=s.workload.feature_gates,
                            gpu_share=s.workload.gpu_share,
                            metrics_address=self.prometheus.address if self.prometheus is not None else "")
        self.processes.append(p)
        if self.prometheus is not None and not self.load_aware:
            # Prometheus answers the loadaware queries in this run too, from the scheduler's start
            # as a loadaware scheduler's collector would: the same load on the machine.
            if self.pump is None:
                self.pump = load_aware_pump(self.prometheus.address)
            self.pump.start()
        return p

    def control_plane_pids(self) -> dict[str, int]:
        procs = {"apiserver": self.cp.apiserver_proc, "etcd": self.cp.etcd_proc}
        return {name: p.pid for name, p in procs.items() if p is not None}

    async def spawn_watcher(self) -> watcher_mod.Spawned:
        self.watcher = await watcher_mod.spawn(self.cp.kubeconfig, NAMESPACE, f"{PHASE_LABEL}=measure",
                                               self.spec.workload.expected_bound, self.timeout,
                                               self.spec.rundir, REPO,
                                               events_controller="" if self.spec.kind == NULL
                                               else SCHEDULER_NAMES[self.spec.kind])
        return self.watcher

    async def scrape(self, sched: Process) -> prom.Samples | None:
        if not sched.metrics_port:
            return None
        await scrape.wait_serving(sched.metrics_port, lambda: sched.check_alive(self.spec.kind))
        return await scrape.scrape(sched.metrics_port)

    def measuring(self, sched: Process) -> None:
        """The measured phase starts: attach py-spy to pysched when profiling."""
        s = self.spec
        if s.profile_dir is None or s.kind != PYSCHED:
            return
        s.profile_dir.mkdir(parents=True, exist_ok=True)
        slug = s.rundir.name          # the run's own name: workload, mode, QPS, repeat, profile
        self.profiler = subprocess.Popen(
            [_py_spy(), "record", "--pid", str(sched.pid), "--rate", "200", "--format", "raw", "--gil",
             "--output", str(s.profile_dir / f"{slug}.txt")],
            stdout=subprocess.DEVNULL, stderr=open(s.rundir / "py-spy.log", "ab"))

    def stop_profiler(self) -> None:
        if self.profiler is None:
            return
        if self.profiler.poll() is None:
            self.profiler.send_signal(signal.SIGINT)
            try:
                self.profiler.wait(30)
            except subprocess.TimeoutExpired:
                self.profiler.kill()
                self.profiler.wait()
        self.profiler = None

    async def close(self) -> None:
        if self.profiler is not None and self.profiler.poll() is None:
            self.profiler.kill()
            self.profiler.wait()
        if self.watcher is not None:
            self.watcher.kill()
            await self.watcher.proc.wait()
        for p in self.processes:
            p.stop()
        if self.pump is not None:
            await self.pump.stop()
        if self.prometheus is not None:
            self.prometheus.stop()
        if self.exporter is not None:
            await self.exporter.close()
        await self.client.close()


async def create_prelude(client: KubeClient, workload: Workload) -> None:
    """The workload's prelude objects (POST path, body[, a status to merge-patch in]), in order."""
    for path, body, *status in workload.prelude():
        await client.request("POST", path, body=body, rate_limit=False)
        if status:
            await client.request("PATCH", f"{path}/{body['metadata']['name']}/status", body=status[0],
                                 content_type="application/merge-patch+json", rate_limit=False)


async def create_objects(client: KubeClient, items: list[tuple]) -> None:
    """POST each (path, body), ``CREATE_CONCURRENCY`` at a time."""
    sem = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(path: str, body: dict) -> None:
        async with sem:
            await client.request("POST", path, body=body, rate_limit=False, decode=False)

    await asyncio.gather(*(one(path, body) for path, body, *_ in items))


async def create_node_objects(client: KubeClient, workload: Workload) -> None:
    """What each node brings (a DRA driver's ResourceSlices), after the nodes."""
    if workload.node_objects is not None:
        await create_objects(client, [o for i in range(workload.nodes) for o in workload.node_objects(i)])


async def create_pod_objects(client: KubeClient, workload: Workload, kind: str, phase: str) -> None:
    """What each pod of ``phase`` needs before it exists (its ResourceClaim)."""
    if workload.pod_objects is None:
        return
    count = workload.init_pods if phase == "init" else workload.measure_pods
    name = SCHEDULER_NAMES[kind]
    await create_objects(client, [o for i in range(count) for o in workload.pod_objects(i, name, phase)])


async def install_podgroups(client: KubeClient, workload: Workload) -> None:
    """The workload's groups: Kubernetes' PodGroups (served by the API server with the workload's
    ``apiserver_args``), or the PodGroup CRD (the coscheduling component's) and scheduler-plugins'."""
    if workload.gang_api == "kubernetes":
        await create_objects(client, [(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups", pg)
                                      for pg in podgroups(workload)])
        return
    await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                         body=yaml.safe_load(COSCHEDULING_CRD.read_text()), rate_limit=False)
    path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"
    deadline = time.monotonic() + 60
    for pg in podgroups(workload):
        while True:
            try:
                await client.request("POST", path, body=pg, rate_limit=False)
                break
            except ApiError:   # the CRD is not served yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def _wait_all_bound(client: KubeClient, phase: str, sched: Process, kind: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    params = {"labelSelector": f"{PHASE_LABEL}={phase}", "fieldSelector": "spec.nodeName="}
    while True:
        sched.check_alive(kind)
        pending, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods", params)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{len(pending)} {phase} pods still unbound after {timeout:.0f}s, "
                             f"e.g. {pending[0]['metadata']['name']}")
        await asyncio.sleep(0.5)


def gang_semantics(workload: Workload, kind: str) -> str:
    """What treats the workload's groups as gangs under scheduler ``kind``."""
    if workload.gang_api == "kubernetes":
        return "pod-group cycle (scheduling.k8s.io PodGroups)"
    return "Coscheduling" if kind in (PYSCHED, SCHEDULER_PLUGINS) else "none (reference)"


def gang_report(workload: Workload, kind: str, t0: float, records: dict, all_pods: list[dict], nodes: list[dict],
                metrics: dict) -> dict:
    label = workload.group_label
    group_of = {p["metadata"]["name"]: p["metadata"]["labels"][label] for p in all_pods
                if label in (p["metadata"].get("labels") or {})}
    out = gangs.gang_summary(t0, records, group_of, workload.gang_size)
    need = {f"{NAMESPACE}/{g}": workload.gang_size for g in set(group_of.values())}
    out["partial"] = len(verify.check_gangs(all_pods, need, label))
    out["fitting"] = workload.fitting_groups
    out["semantics"] = gang_semantics(workload, kind)
    node_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
    hosts = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in all_pods}
    out.update(gangs.domains(group_of, hosts, node_labels, workload.gang_size, {"rack": RACK, "block": BLOCK}))
    out.update(gangs.attempts_per_group(metrics, out["groups"]))
    return out


def drain_figures(t0: float, binds: list[float]) -> dict:
    """Drain mode: time to first bind, drain throughput (first to last bind) and overall (from t0)."""
    if not binds:
        return {"time_to_first_bind_s": None, "drain_pods_per_s": None, "overall_pods_per_s": None}
    first, last, n = min(binds), max(binds), len(binds)
    return {"time_to_first_bind_s": round(first - t0, 3),
            "drain_pods_per_s": round(n / (last - first), 1) if last > first else None,
            "overall_pods_per_s": round(n / (last - t0), 1) if last > t0 else None}


async def _measure(run: Run, phase: Phase) -> RunResult:
    spec, w, kind = run.spec, run.spec.workload, run.spec.kind
    expect = w.expected_bound
    records = await phase.watcher.records(lambda: phase.sched.check_alive(kind))
    binds = [r["bound"] for r in records.values() if r.get("bound") is not None]
    ev: dict = {}
    if kind != NULL:
        # The watcher has waited for the Events too (bench.events); one LIST cross-checks the count.
        items, _ = await run.client.list_all(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events", {
            "fieldSelector": f"reason=Scheduled,reportingController={SCHEDULER_NAMES[kind]}"})
        seen = events.summarise(records)
        ev = {"posted": events.count_scheduled(items, SCHEDULER_NAMES[kind], set(records)),
              "seen": seen["seen"], "waited_s": seen["waited_s"], "short": seen["short"]}
    before_ready = None
    if run.living and len(binds) >= expect:
        # ... and, on a living cluster, every bound pod Running and Ready: its status updates are
        # part of what the run measures. The CPU sampled here splits the scheduler's CPU into its
        # scheduling (to the last Event) and the status updates it then takes while pods go Ready.
        before_ready = (procstat.sample(phase.sched.pid), time.monotonic())
        await living.wait_running(run.client, "measure", expect, run.timeout)
    # The end sample: only now that every Event is posted.
    phase.sched.check_alive(kind)
    end, end_at = procstat.sample(phase.sched.pid), time.monotonic()
    load = phase.load.stop()
    affinity = {"scheduler": procstat.allowed_cpus(phase.sched.pid), "driver": procstat.allowed_cpus(os.getpid())}
    if run.cp.apiserver_proc is not None:
        affinity["kube-apiserver"] = procstat.allowed_cpus(run.cp.apiserver_proc.pid)
    metrics1 = await run.scrape(phase.sched)
    run.stop_profiler()
    metrics = {}
    informer_events = informer_seconds = None
    if metrics1 is not None:
        d = metrics1 if phase.metrics0 is None else prom.delta(metrics1, phase.metrics0)
        metrics = scrape.figures(d, len(binds))
        informer_events = prom.total(d, "pysched_informer_events_total")
        informer_seconds = prom.total(d, "pysched_informer_handler_seconds_total")

    if phase.mode == "drain":
        start = min(binds) if binds else phase.t0
        summary = stats.summarise(start, records, expect).as_dict()
        for k in ("latency_p50_ms", "latency_p90_ms", "latency_p99_ms"):
            summary[k] = None   # the pods existed before the scheduler: no creation-to-bind latency
    else:
        summary = stats.summarise(phase.t0, records, expect).as_dict()
    cpu = end.cpu_s - phase.cpu0
    nodes, _ = await run.client.list_all("/api/v1/nodes")
    all_pods, _ = await run.client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
    violations = [str(v) for v in verify.check_placements(nodes, all_pods)]
    if w.pod_objects is not None and kind != NULL:   # the null binder allocates nothing
        claims, _ = await run.client.list_all(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")
        violations += [str(v) for v in verify.check_claims(claims, all_pods)]
    if w.gpu_share and kind == PYSCHED:   # the others do not know the GPU-share annotations
        violations += [str(v) for v in verify.check_gpu_share(nodes, all_pods)]
    violations += [str(v) for v in verify.check_evictions(
        all_pods, PHASE_LABEL, {"init": w.init_pods, "measure": w.measure_pods}, w.eviction_budget)]
    living_figures = {}
    if run.living and binds:
        updates = living.status_updates(await living.apiserver_metrics(run.client))
        before = living.status_updates(run.apiserver0) if run.apiserver0 is not None else 0.0
        living_figures = {"status_updates_per_pod": round((updates - before) / len(binds), 2),
                          "informer_events_per_pod": round(informer_events / len(binds), 2)
                          if informer_events else None,
                          "informer_cpu_share": round(informer_seconds / cpu, 3)
                          if informer_seconds is not None and cpu > 0 else None}
        if before_ready is not None:
            sample, at = before_ready
            living_figures["ready_tail_s"] = round(end_at - at, 1)
            living_figures["ready_tail_cpu_s"] = round(end.cpu_s - sample.cpu_s, 2)
    error = ""
    if len(binds) < expect:
        error = f"only {len(binds)}/{expect} measured pods bound within {run.timeout:.0f}s"
    t0 = phase.t0
    return RunResult(
        w.name, spec.mode, kind, spec.repeat, spec.qps, spec.burst, w.nodes, w.init_pods, expect, summary,
        create_rate=phase.create_rate, target_rate=phase.target_rate,
        drain=drain_figures(t0, binds) if phase.mode == "drain" else {},
        cpu_s=round(cpu, 2), cpu_s_per_1000_pods=round(cpu / len(binds) * 1000, 3) if binds else None,
        peak_rss_mib=round(end.peak_rss_mib, 1), metrics=metrics, events=ev, load=load, affinity=affinity,
        violations=violations, bind_offsets=[round(b - t0, 4) for b in sorted(binds)],
        seen_offsets=sorted(round(r["seen"] - t0, 4) for r in records.values() if r.get("seen") is not None),
        error=error, gang=gang_report(w, kind, t0, records, all_pods, nodes, metrics) if w.gang_size else {},
        profile=spec.pysched_profile if kind == PYSCHED else "", load_metrics=run.prometheus is not None,
        load_queries=run.load_aware or (run.pump is not None and run.pump.rounds > 0),
        cluster=spec.cluster, living=living_figures)


async def run_one(spec: RunSpec) -> RunResult:
    w = spec.workload
    spec.rundir.mkdir(parents=True, exist_ok=True)
    avg = loadavg()
    lc: LivingCluster | None = None
    if spec.cluster == "living":
        why = living.supported(w)
        if why:
            raise BenchError(f"{w.name} cannot run on a living cluster: {why}")
        lc = LivingCluster(lease_duration_seconds=living.LEASE_SECONDS,
                           node_monitor_grace_seconds=living.NODE_GRACE_SECONDS,
                           extra_apiserver_args=list(w.apiserver_args)).start()
        assert lc.cp is not None
        cp = lc.cp
    else:
        cp = ControlPlane(extra_apiserver_args=list(w.apiserver_args))
        cp.start()
    run = Run(spec, cp, KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1,
                                   max_connections=CREATE_CONCURRENCY))
    try:
        nodes = living.kwok_nodes(w) if lc is not None else (w.node(i) for i in range(w.nodes))
        await create_nodes(run.client, nodes, concurrency=CREATE_CONCURRENCY)
        if lc is not None:
            await living.wait_nodes_ready(run.client, w.nodes)
        await ensure_namespace(run.client, NAMESPACE)
        await create_prelude(run.client, w)
        await create_node_objects(run.client, w)
        if run.load_aware or spec.load_metrics_always:
            await run.start_load_metrics()
        if w.gang_size:
            await install_podgroups(run.client, w)
        sched: Process | None = None
        if spec.mode != "drain" or w.init_pods:
            sched = run.start_scheduler()
        if w.init_pods and sched is not None:
            init = [w.pod(i, SCHEDULER_NAMES[spec.kind], "init") for i in range(w.init_pods)]
            if run.living:
                await living.create_owned(run.client, init, "init", _timeout(w.init_pods, spec.qps))
            else:
                await create_pod_objects(run.client, w, spec.kind, "init")
                await create_pods(run.client, init, concurrency=CREATE_CONCURRENCY)
            await _wait_all_bound(run.client, "init", sched, spec.kind, _timeout(w.init_pods, spec.qps))
        phase = await PHASES[spec.mode](run, sched)
        result = await _measure(run, phase)
        result.load = {"loadavg_start": avg, **result.load}
        return result
    finally:
        await run.close()
        for log in ("etcd.log", "kube-apiserver.log", "kube-controller-manager.log", "kwok.log"):
            src = cp.workdir / log if cp.workdir else None
            if src and src.exists():
                shutil.copy(src, spec.rundir / log)
        if lc is not None:
            lc.stop()
        else:
            cp.stop()
