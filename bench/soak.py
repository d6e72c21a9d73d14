"""``make soak``: pysched for an hour on a living cluster under steady churn, sampled every minute.

The cluster is ``pysched_dev.livecluster.LivingCluster`` - etcd, kube-apiserver (auditing every pod
binding), kube-controller-manager and KWOK - with ``--nodes`` KWOK nodes (4 CPU, 16 GiB, 110 pods) in
three zones, renewing their Leases every 10 s as kubelets do. Two pysched replicas share one Lease
(leader election on, as deployed); kube-scheduler 1.35 runs beside them for pods of its own, on a
pool of nodes of its own (``pool=kube``; pysched's pods go to ``pool=pysched``), so that each
scheduler's placements can be checked against allocatable without the other's race.

Churn, until ``--minutes`` are up:

* Deployments (``--deployments`` for pysched, a quarter as many for kube-scheduler; plain, zone
  spread, hostname anti-affinity) scaled to a random size every ``--scale-every`` seconds;
* a Job (8 completions, 4 at a time) every ``--job-every`` seconds, its pods Succeeded by KWOK and
  the Job removed by its TTL;
* a node failing (KWOK lets go of it: unreachable, tainted, its pods evicted) every
  ``--node-failure-every`` seconds, back ``--node-down`` seconds later;
* a leader handover every ``--handover-every`` seconds: the leading replica is stopped (SIGTERM: it
  releases the Lease) and started again as the standby, as a rolling update of pysched would.

Every ``--sample-every`` seconds a line of ``samples.jsonl`` (gzipped into ``samples.jsonl.gz`` when
the run is over; ``summary.json`` stays plain): each process's RSS, open descriptors
and threads (``/proc``), pysched's asyncio tasks, queue lengths and Event backlog (its /metrics),
the scheduling latency p50/p99 of the interval per scheduler
(``scheduler_pod_scheduling_sli_duration_seconds``), the cluster's pod counts, and what happened.
At the end the churn stops, every pod must get placed, and the API server's audit log and the
nodes' requests say whether each pod was bound exactly once and no node went above allocatable.
``bench.soakcheck`` judges; ``bench.soakreport`` writes ``SOAK.md`` with a chart per series.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from pysched.apis.core.quantity import resource_value
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import ApiError, KubeClient
from pysched_dev.audit import BINDINGS_POLICY, successful_binds
from pysched_dev.devcluster import free_port
from pysched_dev.livecluster import LivingCluster, kwok_node
from pysched_dev.testkit import PAUSE_IMAGE, create_nodes, ensure_namespace

from . import living, procstat, prom, rawdata, soakcheck, soakreport
from .process import REPO, BenchError, Process
from .scrape import ALLOW_PATHS, fetch_text

NAMESPACE = "soak"
SLI = "scheduler_pod_scheduling_sli_duration_seconds"
LEASE = "pysched-soak"
ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass
class Plan:
    minutes: float = 60.0
    nodes: int = 1000
    kube_share: float = 0.2          # of the nodes, kube-scheduler's pool (0: no kube-scheduler)
    deployments: int = 24
    min_replicas: int = 20
    max_replicas: int = 120
    scale_every: float = 5.0
    job_every: float = 30.0
    node_failure_every: float = 240.0
    node_down: float = 90.0
    handover_every: float = 900.0
    sample_every: float = 60.0
    # Minutes of each process's time in a role not judged: one leader for an hour rose from 132 to
    # 138.5 MiB over its first 9 minutes and stayed there (bench/SOAK.md, run 2).
    warmup: float = 10.0
    seed: int = 1

    def command(self) -> str:
        """The ``make soak`` line that runs this plan."""
        flags = " ".join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float) else f"--{k.replace('_', '-')} {v}"
                         for k, v in asdict(self).items() if k != "minutes" and v != getattr(Plan, k))
        return " ".join(filter(None, ["make soak", f"SOAK_MINUTES={self.minutes:g}",
                                      f"SOAK_ARGS={shlex.quote(flags)}" if flags else ""]))


# -- the workload ---------------------------------------------------------------------------------


def _template(app: str, scheduler: str, pool: str, kind: int) -> dict[str, Any]:
    labels = {"app": app}
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "terminationGracePeriodSeconds": 1, "nodeSelector": {"pool": pool},
        "containers": [{"name": "app", "image": PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": f"{250 * (1 + kind % 3)}m", "memory": "256Mi"}}}]}
    if kind % 3 == 1:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {
                                                  "matchLabels": labels}}]
    elif kind % 3 == 2:
        spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                              "labelSelector": {"matchLabels": labels}}}]}}
    return {"metadata": {"labels": labels}, "spec": spec}


def deployment(name: str, replicas: int, scheduler: str, pool: str, kind: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": _template(name, scheduler, pool, kind)}}


def job(name: str) -> dict[str, Any]:
    tpl = _template(name, "pysched", "pysched", 0)
    tpl["metadata"]["labels"] = {"job": name}
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"completions": 8, "parallelism": 4, "backoffLimit": 20, "ttlSecondsAfterFinished": 20,
                     "template": tpl}}


def node_objects(plan: Plan) -> list[dict[str, Any]]:
    kube_nodes = int(plan.nodes * plan.kube_share)
    out = []
    for i in range(plan.nodes):
        pool = "kube" if i < kube_nodes else "pysched"
        out.append(kwok_node(f"soak-{i:05d}", cpu="4", memory="16Gi", pods="110",
                             labels={"topology.kubernetes.io/zone": ZONES[i % 3], "pool": pool}))
    return out


# -- the processes --------------------------------------------------------------------------------


class Replica:
    """One pysched replica slot: its process and how many times it was started."""

    def __init__(self, slot: str, lc: LivingCluster, rundir: Path):
        self.slot, self.lc, self.rundir = slot, lc, rundir
        self.incarnation = 0
        self.proc: Process | None = None
        self.port = 0
        self.prev: prom.Samples | None = None     # the last scrape of this incarnation

    def start(self) -> None:
        self.incarnation += 1
        self.port = free_port()
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": True, "resourceName": LEASE, "resourceNamespace": "kube-system",
                                  "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"},
               "clientConnection": {"qps": 200, "burst": 400},
               "profiles": [{"schedulerName": "pysched"}]}
        path = self.rundir / "pysched-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        tag = f"{self.slot}{self.incarnation}"
        self.proc = Process([sys.executable, "-m", "pysched", "--config", str(path),
                             "--kubeconfig", str(self.lc.kubeconfig), "--log-level", "warning",
                             "--identity", f"pysched-{tag}", "--bind-address", "127.0.0.1",
                             "--secure-port", str(self.port), f"--authorization-always-allow-paths={ALLOW_PATHS}",
                             "--cert-dir", str(self.rundir / f"certs-{tag}")],
                            self.rundir / f"pysched-{tag}.log", metrics_port=self.port)
        self.prev = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def start_kube_scheduler(lc: LivingCluster, rundir: Path) -> Process:
    port = free_port()
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False},
           "clientConnection": {"qps": 200, "burst": 400, "kubeconfig": str(lc.kubeconfig)},
           "profiles": [{"schedulerName": "default-scheduler"}]}
    path = rundir / "kube-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert lc.cp is not None
    return Process([str(lc.cp.bin / "kube-scheduler"), f"--config={path}", f"--secure-port={port}",
                    "--bind-address=127.0.0.1", f"--authorization-always-allow-paths={ALLOW_PATHS}", "--v=1"],
                   rundir / "kube-scheduler.log", metrics_port=port)


def proc_stats(pid: int) -> dict[str, Any]:
    s = procstat.sample(pid)
    threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
    return {"pid": pid, "rss_mib": round(s.rss_mib, 1), "cpu_s": round(s.cpu_s, 2),
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads}


async def scrape(port: int) -> prom.Samples | None:
    try:
        return prom.parse(await asyncio.to_thread(fetch_text, port, 10.0))
    except OSError:
        return None          # starting, stopping: this minute has no scrape of it


def latency(deltas: list[prom.Samples]) -> dict[str, Any]:
    """p50/p99 of the SLI histogram over the interval, summed over processes (only a leader schedules)."""
    acc: dict[float, float] = {}
    for d in deltas:
        for le, count in prom.buckets(d, SLI):
            acc[le] = acc.get(le, 0.0) + count
    cumulative = sorted(acc.items())
    count = cumulative[-1][1] if cumulative else 0
    return {"count": int(count), "p50": prom.histogram_quantile(0.5, cumulative),
            "p99": prom.histogram_quantile(0.99, cumulative)}


# -- the run --------------------------------------------------------------------------------------


class Soak:
    def __init__(self, plan: Plan, rundir: Path):
        self.plan, self.rundir = plan, rundir
        self.rng = random.Random(plan.seed)
        self.happened: list[str] = []
        self.start_time = 0.0
        self.lc: LivingCluster | None = None
        self.admin: KubeClient | None = None
        self.replicas: list[Replica] = []
        self.kube: Process | None = None
        self.kube_prev: prom.Samples | None = None
        self.samples = rundir / "samples.jsonl"
        self.deployments: list[tuple[str, str, str, int]] = []     # (name, scheduler, pool, kind)
        self.failed: set[str] = set()

    def note(self, what: str) -> None:
        self.happened.append(f"{time.monotonic() - self.start_time:7.1f}s {what}")
        print(f"soak: {what}", flush=True)

    async def run(self) -> dict[str, Any]:
        p = self.plan
        self.lc = LivingCluster(lease_duration_seconds=40, node_monitor_grace_seconds=50, toleration_seconds=20,
                                audit_policy=BINDINGS_POLICY)
        self.lc.start()
        self.admin = KubeClient(load_kubeconfig(self.lc.kubeconfig), qps=0, burst=1)
        try:
            return await self._run(p)
        finally:
            for r in self.replicas:
                r.stop()
            if self.kube is not None:
                self.kube.stop()
            await self.admin.close()
            self.lc.stop()

    async def _run(self, p: Plan) -> dict[str, Any]:
        assert self.admin is not None and self.lc is not None
        nodes = node_objects(p)
        await create_nodes(self.admin, nodes)
        await living.wait_nodes_ready(self.admin, len(nodes))
        await ensure_namespace(self.admin, NAMESPACE)
        self.replicas = [Replica("a", self.lc, self.rundir), Replica("b", self.lc, self.rundir)]
        for r in self.replicas:
            r.start()
        if p.kube_share > 0:
            self.kube = start_kube_scheduler(self.lc, self.rundir)
        kube_deployments = max(1, p.deployments // 4) if p.kube_share > 0 else 0
        self.deployments = [(f"p-{i:02d}", "pysched", "pysched", i) for i in range(p.deployments)]
        self.deployments += [(f"k-{i:02d}", "default-scheduler", "kube", i) for i in range(kube_deployments)]
        for name, sched, pool, kind in self.deployments:
            replicas = self.replicas_for(pool, p.min_replicas)
            await self.admin.request("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                                     body=deployment(name, replicas, sched, pool, kind))
        self.start_time = time.monotonic()
        self.note(f"{len(nodes)} nodes Ready, {len(self.deployments)} Deployments, churn starts")
        deadline = self.start_time + p.minutes * 60
        loops = [self.scaling(deadline), self.jobs(deadline), self.node_failures(deadline),
                 self.handovers(deadline), self.sampling(deadline)]
        await asyncio.gather(*loops)
        self.note("churn stopped")
        end_checks = await self.end_checks()
        samples = soakcheck.read_samples(self.samples)
        verdicts = soakcheck.judge(samples, end_checks, p.warmup)
        summary = {"plan": asdict(p), "command": p.command(), "verdicts": verdicts, "end_checks": end_checks,
                   "happened": self.happened, "machine": {"cpus": os.cpu_count()}}
        (self.rundir / "summary.json").write_text(json.dumps(summary, indent=1))
        rawdata.compress(self.samples)      # samples.jsonl.gz, as bench/runs keeps raw samples
        return summary

    def replicas_for(self, pool: str, n: int) -> int:
        # kube-scheduler's pool is a fraction of the nodes: its Deployments scale in proportion
        return n if pool == "pysched" else max(1, n // 2)

    # -- churn ----------------------------------------------------------------------------------

    async def scaling(self, deadline: float) -> None:
        assert self.admin is not None
        p = self.plan
        while time.monotonic() < deadline:
            await asyncio.sleep(p.scale_every)
            name, _, pool, _ = self.rng.choice(self.deployments)
            replicas = self.replicas_for(pool, self.rng.randint(p.min_replicas, p.max_replicas))
            await self.admin.request("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}/scale",
                                     body={"spec": {"replicas": replicas}},
                                     content_type="application/merge-patch+json")

    async def jobs(self, deadline: float) -> None:
        assert self.admin is not None
        n = 0
        while time.monotonic() < deadline:
            await asyncio.sleep(self.plan.job_every)
            n += 1
            await self.admin.request("POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", body=job(f"j-{n:04d}"))

    async def node_failures(self, deadline: float) -> None:
        assert self.admin is not None
        p = self.plan
        if p.node_failure_every <= 0:
            return
        names = [f"soak-{i:05d}" for i in range(p.nodes)]
        while time.monotonic() + p.node_failure_every < deadline:
            await asyncio.sleep(p.node_failure_every)
            name = self.rng.choice([n for n in names if n not in self.failed])
            await LivingCluster.fail_node(self.admin, name)
            self.failed.add(name)
            self.note(f"node {name} failed")
            asyncio.get_running_loop().call_later(p.node_down, lambda n=name: asyncio.ensure_future(self.restore(n)))

    async def restore(self, name: str) -> None:
        assert self.admin is not None
        await LivingCluster.restore_node(self.admin, name)
        self.failed.discard(name)
        self.note(f"node {name} back")

    async def handovers(self, deadline: float) -> None:
        p = self.plan
        if p.handover_every <= 0:
            return
        while time.monotonic() + p.handover_every / 2 < deadline:
            await asyncio.sleep(p.handover_every)
            if time.monotonic() >= deadline:
                return
            leader = await self.leader()
            if leader is None:
                self.note("handover skipped: no leader seen")
                continue
            await asyncio.to_thread(leader.stop)
            self.note(f"leader {leader.slot}{leader.incarnation} stopped (Lease released)")
            leader.start()
            self.note(f"{leader.slot}{leader.incarnation} started as the standby")

    async def leader(self) -> Replica | None:
        for r in self.replicas:
            s = await scrape(r.port)
            if s is not None and (prom.total(s, "leader_election_master_status") or 0) >= 1:
                return r
        return None

    # -- sampling -------------------------------------------------------------------------------

    async def sampling(self, deadline: float) -> None:
        n = 0
        while time.monotonic() < deadline:
            await asyncio.sleep(min(self.plan.sample_every, max(0.0, deadline - time.monotonic())))
            n += 1
            record = await self.sample(n)
            with self.samples.open("a") as f:
                f.write(json.dumps(record) + "\n")

    async def sample(self, n: int) -> dict[str, Any]:
        assert self.admin is not None
        rows, deltas = [], []
        for r in self.replicas:
            assert r.proc is not None
            r.proc.check_alive(f"pysched {r.slot}{r.incarnation}")
            row: dict[str, Any] = {"slot": r.slot, "incarnation": r.incarnation, **proc_stats(r.proc.pid)}
            s = await scrape(r.port)
            if s is not None:
                row["leader"] = (prom.total(s, "leader_election_master_status") or 0) >= 1
                row["tasks"] = prom.total(s, "pysched_asyncio_tasks")
                row["heap_blocks"] = prom.total(s, "pysched_python_heap_blocks")
                row["events_backlog"] = prom.total(s, "pysched_events_backlog")
                row["pending"] = {d["queue"]: v for d, v in prom.select(s, "scheduler_pending_pods")}
                if r.prev is not None:
                    deltas.append(prom.delta(s, r.prev))
                r.prev = s
            rows.append(row)
        kube_row = None
        lat = {"pysched": latency(deltas)}
        if self.kube is not None:
            self.kube.check_alive("kube-scheduler")
            kube_row = proc_stats(self.kube.pid)
            s = await scrape(self.kube.metrics_port)
            if s is not None:
                kube_row["pending"] = {d["queue"]: v for d, v in prom.select(s, "scheduler_pending_pods")}
                if self.kube_prev is not None:
                    lat["kube"] = latency([prom.delta(s, self.kube_prev)])
                self.kube_prev = s
        pods, _ = await self.admin.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        now = time.time()
        unbound = [x for x in pods if not x["spec"].get("nodeName") and not x["metadata"].get("deletionTimestamp")]
        old = [x for x in unbound if now - _created(x) > 30]
        happened, self.happened = self.happened, []
        elapsed = time.monotonic() - self.start_time
        return {"n": n, "minute": round(elapsed / 60, 3), "t": round(elapsed, 1), "pysched": rows,
                "kube": kube_row, "latency": lat, "happened": happened,
                "cluster": {"pods": len(pods), "unbound": len(unbound), "unbound_30s": len(old),
                            "failed_nodes": len(self.failed)}}

    # -- the end --------------------------------------------------------------------------------

    async def end_checks(self, timeout: float = 300.0) -> dict[str, Any]:
        assert self.admin is not None and self.lc is not None and self.lc.cp is not None
        for name in list(self.failed):
            await self.restore(name)
        deadline = time.monotonic() + timeout
        left: list[str] = []
        while time.monotonic() < deadline:
            pods, _ = await self.admin.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
            left = [x["metadata"]["name"] for x in pods
                    if not x["spec"].get("nodeName") and not x["metadata"].get("deletionTimestamp")]
            if not left:
                break
            await asyncio.sleep(2.0)
        pods, _ = await self.admin.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods")
        nodes, _ = await self.admin.list_all("/api/v1/nodes")
        # Per pod UID: a Deployment's generated pod names repeat within an hour of churn (two
        # pods, one after the other, each bound once); the API server refuses a second binding
        # of one pod, so two 2xx for one UID would be a bug in it, and for one name is not.
        binds = successful_binds(self.lc.cp.audit_events(), by_uid=True)
        twice = sorted(f"{ns}/{name} (uid {uid}) x{n}" for (ns, name, uid), n in binds.items() if n > 1)
        live_bound = [x for x in pods if x["spec"].get("nodeName")]
        unaudited = sorted(x["metadata"]["name"] for x in live_bound
                           if binds.get((NAMESPACE, x["metadata"]["name"], x["metadata"]["uid"]), 0) != 1)
        over = soakcheck.overcommitted(nodes, pods, resource_value)
        return {
            "all_placed": {"judged": True, "ok": not left, "unbound": left[:20], "count": len(left)},
            "placed_exactly_once": {"judged": True, "ok": not twice and not unaudited, "bindings": sum(binds.values()),
                                    "pods_bound_twice": twice[:20], "bound_pods_not_bound_once": unaudited[:20]},
            "within_allocatable": {"judged": True, "ok": not over, "nodes_over": over[:20],
                                   "nodes_checked": len(nodes)},
        }


def _created(pod: dict[str, Any]) -> float:
    from datetime import datetime

    ts = pod["metadata"].get("creationTimestamp")
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() if ts else time.time()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    defaults = Plan()
    for name, value in asdict(defaults).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    ap.add_argument("--out", type=Path, default=None, help="run directory (default: bench/out/soak-<time>)")
    ap.add_argument("--results-md", type=Path, default=None, help="write the report here (e.g. bench/SOAK.md)")
    ap.add_argument("--charts-dir", type=Path, default=REPO / "bench" / "charts")
    ap.add_argument("--report-also", default="", help="comma-separated run directories of earlier soaks "
                    "to report after this one (e.g. a run with --handover-every 0)")
    ap.add_argument("--report-from", default="", help="run nothing: write --results-md from these run "
                    "directories (comma-separated), each judged under the current rules")
    args = ap.parse_args(argv)
    if args.report_from:
        if not args.results_md:
            ap.error("--report-from needs --results-md")
        md, ok = soakreport.write([Path(d) for d in args.report_from.split(",") if d], args.results_md,
                                  args.charts_dir, warmup=args.warmup)
        print(f"soak: {'PASS' if ok else 'FAIL'} ({md})", flush=True)
        return 0 if ok else 1
    plan = Plan(**{k: getattr(args, k) for k in asdict(defaults)})
    rundir = args.out or REPO / "bench" / "out" / time.strftime("soak-%Y%m%d-%H%M%S")
    rundir.mkdir(parents=True, exist_ok=True)
    def stop(*_: object) -> None:
        raise KeyboardInterrupt      # SIGTERM ends the run as Ctrl-C does: every process is stopped

    signal.signal(signal.SIGTERM, stop)
    summary = asyncio.run(Soak(plan, rundir).run())
    if args.results_md:
        also = [Path(d) for d in args.report_also.split(",") if d]
        soakreport.write([rundir, *also], args.results_md, args.charts_dir, warmup=args.warmup)
    v = summary["verdicts"]
    print(f"soak: {'PASS' if v['pass'] else 'FAIL'} ({rundir / 'summary.json'})", flush=True)
    return 0 if v["pass"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ApiError, BenchError) as exc:
        print(f"soak: {exc}", file=sys.stderr)
        sys.exit(2)
