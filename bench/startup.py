"""Time to first bind, repeated cheaply: ``python -m bench.startup`` (issue 37's start-up work).

``bench.run``'s drain mode measures time to first bind once per full drain, which at 5,000 nodes
costs minutes a repeat. This builds one cluster per node count - the nodes, ``--init`` pods
already bound, and a backlog of ``--backlog`` pending pods for *each* scheduler under test - and
then starts each scheduler again and again (interleaved ABBA, pinned as ``bench.run`` pins it),
timing from just before its process starts to the first bind of one of its pods that a watch in
this process sees. The scheduler is killed at once; the few pods it bound are deleted and created
again pending, so every start faces the same backlog.

Every start of pysched logs at info, so its start-up milestones (``since_start_s`` on the
``informer synced`` and ``caches synced`` lines, and ``cpu_s``) come out beside the total;
``--py-spy DIR`` records each pysched start with py-spy (raw collapsed stacks, its on-CPU Python
time) from exec until it is killed.

Both schedulers list every pod, their own backlog and the other's (``backlog * 2 + init`` pods in
all), which is why the absolute figures are a little above a drain run's; the comparison is like
with like.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane
from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace

from . import rawdata
from .pinning import pin_driver, plan
from .process import Process
from .schedulers import KUBE, PYSCHED, SCHEDULER_NAMES, start_scheduler
from .workloads import NAMESPACE, WORKLOADS

MILESTONES = {"nodes": re.compile(r'informer synced.*resource=nodes.*?since_start_s=([0-9.]+)'),
              "pods": re.compile(r'informer synced.*resource=pods.*?since_start_s=([0-9.]+)'),
              "caches": re.compile(r'caches synced.*?since_start_s=([0-9.]+)'),
              "cpu": re.compile(r'caches synced.*?cpu_s=([0-9.]+)')}
CREATE_CONCURRENCY = 64


def workload_pods(count: int, scheduler: str, phase: str, start: int = 0) -> list[dict]:
    w = WORKLOADS["SchedulingBasic/5000Nodes_10000Pods"]
    return [w.pod(i, scheduler, f"{phase}-{scheduler}") for i in range(start, start + count)]


async def first_bind(client: KubeClient, scheduler_name: str, rv: str, started: float, timeout: float) -> float:
    """Seconds from ``started`` to the first MODIFIED pod of ``scheduler_name`` with a node."""
    params = {"resourceVersion": rv, "fieldSelector": f"spec.schedulerName={scheduler_name}"}
    deadline = started + timeout
    while time.monotonic() < deadline:
        async for ev in client.watch(f"/api/v1/namespaces/{NAMESPACE}/pods", params):
            obj = ev.get("object") or {}
            if ev.get("type") == "MODIFIED" and (obj.get("spec") or {}).get("nodeName"):
                return time.monotonic() - started
            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            params["resourceVersion"] = rv
    raise TimeoutError(f"no bind by {scheduler_name} within {timeout:.0f}s")


async def refill(client: KubeClient, scheduler_name: str) -> int:
    """Delete the backlog pods the last start bound and create them again pending."""
    items, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods", {
        "fieldSelector": f"spec.schedulerName={scheduler_name},spec.nodeName!=",
        "labelSelector": "bench.pysched.io/phase=backlog-" + scheduler_name})
    fresh = []
    for pod in items:
        meta = pod["metadata"]
        await client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{meta['name']}",
                             params={"gracePeriodSeconds": "0"})
        spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
        fresh.append({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                      "metadata": {"name": meta["name"], "namespace": NAMESPACE, "labels": meta.get("labels", {})}})
    for pod in fresh:   # a deleted pod with grace 0 and no kubelet is gone at once; wait if not
        for _ in range(100):
            try:
                await client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod)
                break
            except Exception:  # noqa: BLE001 - 409 while the old one is still going
                await asyncio.sleep(0.05)
    return len(fresh)


def milestones(log: Path) -> dict[str, float]:
    text = log.read_text(errors="replace")
    out = {}
    for name, rx in MILESTONES.items():
        m = rx.search(text)
        if m:
            out[name] = float(m.group(1))
    return out


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set so far (VmHWM), MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def spy(pid: int, out: Path) -> subprocess.Popen | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        return None
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "500", "--format", "raw",
                             "--output", str(out), "--nonblocking"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


async def measure(nodes: int, init: int, backlog: int, repeats: int, kinds: list[str], qps: float,
                  spy_dir: Path | None) -> dict:
    pinning = plan("auto")
    pin_driver(pinning)
    os.environ["PYSCHED_BENCH_LOG_LEVEL"] = "info"
    w = WORKLOADS["SchedulingBasic/5000Nodes_10000Pods"]
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        rundir = Path(tmp)
        client = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1, max_connections=CREATE_CONCURRENCY)
        try:
            await ensure_namespace(client, NAMESPACE)
            await create_nodes(client, (w.node(i) for i in range(nodes)), concurrency=CREATE_CONCURRENCY)
            bound = workload_pods(init, "init", "init")
            for i, pod in enumerate(bound):
                pod["spec"]["nodeName"] = w.node(i % nodes)["metadata"]["name"]
            await create_pods(client, bound, concurrency=CREATE_CONCURRENCY)
            for kind in kinds:
                await create_pods(client, workload_pods(backlog, SCHEDULER_NAMES[kind], "backlog"),
                                  concurrency=CREATE_CONCURRENCY)
            print(f"cluster: {nodes} nodes, {init} bound pods, {backlog} pending per scheduler", flush=True)
            for r in range(repeats):
                order = kinds if r % 2 == 0 else list(reversed(kinds))
                for kind in order:
                    name = SCHEDULER_NAMES[kind]
                    head = await client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                                params={"limit": "1"})   # one page: only its resourceVersion
                    rv = head["metadata"]["resourceVersion"]
                    started = time.monotonic()
                    proc: Process = start_scheduler(kind, cp, qps, int(qps), rundir, pinning, tag=f"-{r}")
                    profiler = spy(proc.pid, spy_dir / f"{kind}-{r}.txt") if spy_dir and kind == PYSCHED else None
                    try:
                        ttfb = await first_bind(client, name, rv, started, 120.0)
                        peak = peak_rss_mib(proc.pid)
                    finally:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.proc.wait()
                        if profiler is not None:
                            profiler.wait(10)
                    row = {"repeat": r, "ttfb_s": round(ttfb, 3), "peak_rss_mib": peak}
                    if kind == PYSCHED:
                        row.update(milestones(proc.log_path))
                    runs[kind].append(row)
                    refilled = await refill(client, name)
                    print(json.dumps({"scheduler": kind, **row, "refilled": refilled}), flush=True)
        finally:
            await client.close()
    summary = {k: {"ttfb_median_s": statistics.median(r["ttfb_s"] for r in rows),
                   "ttfb_min_s": min(r["ttfb_s"] for r in rows), "ttfb_max_s": max(r["ttfb_s"] for r in rows),
                   "peak_rss_median_mib": statistics.median(r["peak_rss_mib"] or 0 for r in rows)}
               for k, rows in runs.items() if rows}
    if runs.get(PYSCHED):
        for m in MILESTONES:
            vals = [r[m] for r in runs[PYSCHED] if m in r]
            if vals:
                summary[PYSCHED][f"{m}_median_s"] = statistics.median(vals)
    return {"nodes": nodes, "init": init, "backlog": backlog, "repeats": repeats, "pinning": pinning.describe(),
            "runs": runs, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--init", type=int, default=1000, help="pods already bound (spread over the nodes)")
    ap.add_argument("--backlog", type=int, default=10000, help="pending pods per scheduler")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--schedulers", default=f"{PYSCHED},{KUBE}")
    ap.add_argument("--qps", type=float, default=5000.0)
    ap.add_argument("--py-spy", type=Path, default=None, help="record each pysched start here")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here, gzipped when the "
                    "name ends in .gz (as bench/runs/startup keeps them)")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.schedulers.split(",") if k.strip()]
    for k in kinds:
        if k not in (PYSCHED, KUBE):
            ap.error(f"--schedulers: {k!r} is not one of {PYSCHED}, {KUBE}")
    if args.py_spy:
        args.py_spy.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(measure(args.nodes, args.init, args.backlog, args.repeats, kinds, args.qps, args.py_spy))
    print(json.dumps(result["summary"], indent=2))
    if args.out:
        rawdata.write_text(args.out, json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
