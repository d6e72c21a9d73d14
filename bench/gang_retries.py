"""How often a gang that cannot run is retried: pysched beside scheduler-plugins' own scheduler.

The scenario of ``tests/e2e/test_coscheduling.py`` (and scheduler-plugins#429): two PodGroups of
four 1-GPU pods (``scheduleTimeoutSeconds`` 4) on three nodes of 2 GPUs. One job runs whole; the
other can never complete while it does. For ``--seconds`` after the first job is bound, count the
scheduler's failed attempts (``scheduler_schedule_attempts_total``, result unschedulable or error)
and its pods/status PATCHes (``rest_client_requests_total``); check that the waiting job never has
a member bound. Each scheduler gets a control plane of its own, one after the other.

Schedulers (``--schedulers``):

* ``pysched``: Coscheduling with pysched's defaults (a failed group backs off 1 s doubling to 10 s);
* ``pysched-compatible``: ``schedulerPluginsCompatible: true`` (no group backoff);
* ``scheduler-plugins``: its kube-scheduler v0.34.7 on Kubernetes 1.34.7 libraries
  (``hack/scheduler-plugins.sh``);
* ``scheduler-plugins-1.35``: scheduler-plugins on Kubernetes 1.35.4 libraries. v0.34.7 does not
  build on them (1.35 moved the framework's interfaces to ``k8s.io/kube-scheduler/framework``) and
  the proxy serves no release for 1.35, so this builds a checkout of its master branch (which
  follows 1.35) named by ``SCHEDULER_PLUGINS_SOURCE`` (``SCHEDULER_PLUGINS_SOURCE=DIR
  SCHEDULER_PLUGINS_KUBERNETES=1.35.4 hack/scheduler-plugins.sh``; built on first use).

Run: ``.venv/bin/python -m bench.gang_retries --repeats 3`` (``make bench-gang-retries``), about
four minutes with the binaries cached; ``--results-md`` writes the table (docs/compatibility.md
quotes it). ``GANG_RETRIES_KEEP=DIR`` keeps each run's scheduler log there,
``GANG_RETRIES_LOG_LEVEL=info`` makes pysched's say why each attempt failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, free_port
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from . import prom
from .process import REPO, Process
from .schedulers import scheduler_plugins_binary
from .scrape import ALLOW_PATHS, scrape, wait_serving

GPU = "nvidia.com/gpu"
LABEL = "scheduling.x-k8s.io/pod-group"
PG_API = "/apis/scheduling.x-k8s.io/v1alpha1"
CRD = REPO / "manifests" / "components" / "coscheduling" / "crd.yaml"
SCHEDULERS = ("pysched", "pysched-compatible", "scheduler-plugins", "scheduler-plugins-1.35")
QPS, BURST = 50, 100        # kube-scheduler's default client limits, for every scheduler


def profile(kind: str) -> dict:
    prof: dict = {"schedulerName": "gangs", "plugins": {
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}
    if kind == "pysched-compatible":
        prof["pluginConfig"] = [{"name": "Coscheduling", "args": {"schedulerPluginsCompatible": True}}]
    return prof


def start(kind: str, cp: ControlPlane, rundir: Path) -> Process:
    port = free_port()
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False}, "clientConnection": {"qps": QPS, "burst": BURST},
           "profiles": [profile(kind)]}
    path = rundir / f"{kind}-config.yaml"
    if kind.startswith("pysched"):
        path.write_text(yaml.safe_dump(cfg))
        return Process([sys.executable, "-m", "pysched", "run", "--config", str(path),
                        "--kubeconfig", str(cp.kubeconfig),
                        "--log-level", os.environ.get("GANG_RETRIES_LOG_LEVEL", "warning"),
                        "--bind-address", "127.0.0.1", "--secure-port", str(port),
                        f"--authorization-always-allow-paths={ALLOW_PATHS}", "--cert-dir", str(rundir / "certs"),
                        "--podgroup-controller=off"], rundir / f"{kind}.log", metrics_port=port)
    binary = scheduler_plugins_binary("1.35.4" if kind.endswith("1.35") else "")
    cfg["clientConnection"]["kubeconfig"] = str(cp.kubeconfig)
    path.write_text(yaml.safe_dump(cfg))
    return Process([str(binary), f"--config={path}", f"--secure-port={port}", "--bind-address=127.0.0.1",
                    f"--authorization-always-allow-paths={ALLOW_PATHS}", "--v=1"],
                   rundir / f"{kind}.log", metrics_port=port)


def counts(samples: prom.Samples) -> tuple[float, float]:
    """(failed scheduling attempts, pods/status-and-other PATCH requests) so far."""
    failed = patches = 0.0
    for (name, labels), v in samples.items():
        got = dict(labels)
        if name == "scheduler_schedule_attempts_total" and got.get("result") in ("unschedulable", "error"):
            failed += v
        elif name == "rest_client_requests_total" and got.get("method") == "PATCH":
            patches += v
    return failed, patches


async def run_one(kind: str, seconds: float, rundir: Path) -> dict:
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                body=yaml.safe_load(CRD.read_text()), rate_limit=False)
            for _ in range(300):
                try:
                    found = await admin.get(PG_API)
                    if any(r["name"] == "podgroups" for r in found.get("resources") or ()):
                        break
                except Exception:  # noqa: BLE001 - not served yet
                    pass
                await asyncio.sleep(0.1)
            await create_nodes(admin, [make_node(f"gpu{i}", cpu="64", memory="256Gi", extended={GPU: "2"})
                                       for i in range(3)])
            for job in ("job-a", "job-b"):
                await admin.request("POST", f"{PG_API}/namespaces/default/podgroups", rate_limit=False, body={
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": job, "namespace": "default"},
                    "spec": {"minMember": 4, "scheduleTimeoutSeconds": 4}})
            proc = start(kind, cp, rundir)
            try:
                await wait_serving(proc.metrics_port, lambda: proc.check_alive(kind))
                t0 = time.monotonic()
                await create_pods(admin, [make_pod(f"{job}-{i}", scheduler="gangs", labels={LABEL: job},
                                                   cpu="100m", memory="100Mi", extended={GPU: "1"})
                                          for job in ("job-a", "job-b") for i in range(4)])
                winner = ""
                while not winner:
                    proc.check_alive(kind)
                    if time.monotonic() - t0 > 120:
                        raise RuntimeError(f"{kind}: no job bound whole within 120 s")
                    bound: dict[str, int] = {}
                    for p in await list_pods(admin, "default"):
                        if p["spec"].get("nodeName"):
                            job = p["metadata"]["labels"][LABEL]
                            bound[job] = bound.get(job, 0) + 1
                    winner = next((j for j, n in bound.items() if n == 4), "")
                    await asyncio.sleep(0.1)
                first_whole = time.monotonic() - t0
                f0, p0 = counts(await scrape(proc.metrics_port))
                await asyncio.sleep(seconds)
                f1, p1 = counts(await scrape(proc.metrics_port))
                loser_bound = sum(1 for p in await list_pods(admin, "default")
                                  if p["spec"].get("nodeName") and p["metadata"]["labels"][LABEL] != winner)
            finally:
                proc.stop()
        finally:
            await admin.close()
    return {"scheduler": kind, "first_whole_s": first_whole, "failed_attempts": f1 - f0, "patches": p1 - p0,
            "loser_bound": loser_bound}


def table(rows: list[dict], seconds: float) -> str:
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["scheduler"], []).append(r)
    out = [f"| scheduler | failed attempts in {seconds:g} s (median, runs) | PATCH requests | first job whole (s) "
           "| waiting job's members bound |", "|---|---|---|---|---|"]
    for kind, rs in by.items():
        each = ", ".join(f"{r['failed_attempts']:,.0f}" for r in rs)
        out.append(f"| {kind} | {statistics.median(r['failed_attempts'] for r in rs):,.0f} ({each}) "
                   f"| {statistics.median(r['patches'] for r in rs):,.0f} "
                   f"| {statistics.median(r['first_whole_s'] for r in rs):.2f} "
                   f"| {max(r['loser_bound'] for r in rs)} |")
    return "\n".join(out) + "\n"


async def main_async(args) -> int:
    kinds = [k for k in args.schedulers.split(",") if k]
    unknown = [k for k in kinds if k not in SCHEDULERS]
    if unknown:
        print(f"--schedulers: unknown {unknown}; known: {', '.join(SCHEDULERS)}", file=sys.stderr)
        return 2
    rows = []
    keep = os.environ.get("GANG_RETRIES_KEEP")   # a directory to keep the runs' logs in
    with (contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory(prefix="gang-retries-")) as tmp:
        for rep in range(args.repeats):
            for kind in kinds:
                rundir = Path(tmp) / f"{kind}-{rep}"
                rundir.mkdir()
                row = await run_one(kind, args.seconds, rundir)
                print(f"{kind} run {rep + 1}: {row['failed_attempts']:,.0f} failed attempts, "
                      f"{row['patches']:,.0f} PATCHes in {args.seconds:g} s; first job whole after "
                      f"{row['first_whole_s']:.2f} s; waiting job's members bound: {row['loser_bound']}", flush=True)
                rows.append(row)
    text = table(rows, args.seconds)
    print(text)
    if args.results_md:
        Path(args.results_md).write_text(
            "# Gang retries beside scheduler-plugins\n\n"
            "Two PodGroups of four 1-GPU pods on 6 GPUs; one runs, the other cannot complete. Failed "
            f"scheduling attempts and PATCH requests in the {args.seconds:g} s after the first job is bound "
            f"(client qps {QPS}, burst {BURST}). Reproduce: `.venv/bin/python -m bench.gang_retries "
            f"--repeats {args.repeats} --seconds {args.seconds:g}`.\n\n" + text)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gang_retries", description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results-md", default="")
    return asyncio.run(main_async(ap.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
