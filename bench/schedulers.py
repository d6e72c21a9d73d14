"""The schedulers under test, started as processes: pysched, the control plane's kube-scheduler, the null
binder, scheduler-plugins' kube-scheduler.

All get the same client QPS/burst and leader election off. pysched runs one of three profiles
(``PROFILES``): ``default``, kube-scheduler's default plugins, the very set kube-scheduler
runs beside it (like with like: the same Filter and Score work per pod); ``shipped``, those plus
pysched's own scores (GPU, AZSpread, CapacityType, InstanceType) as the shipped ConfigMap enables
them; or ``loadaware``, the default plus TargetLoadPacking and LoadVariationRiskBalancing reading
a real Prometheus that scrapes one exporter of every node's figures (``Run.start_load_metrics``).
A fourth, ``topology``, is the default plus pysched's TopologyAwarePlacement (levels: the
benchmark's block and rack labels) in place of upstream's TopologyPlacementGenerator, for gangs
in Kubernetes' PodGroups. Gang workloads in scheduler-plugins' PodGroups add Coscheduling to any
of them (its PodGroup status controller off so only scheduling is measured), GPU-sharing
workloads (``Workload.gpu_share``) GPUShare with the workload's policy; a workload's
``feature_gates`` go to pysched and kube-scheduler. ``scheduler-plugins`` is scheduler-plugins'
own kube-scheduler (``hack/scheduler-plugins.sh``) with kube-scheduler's default plugins and
Coscheduling. pysched and kube-scheduler serve /metrics without credentials
(``--authorization-always-allow-paths``, a bench-only lab setting) so the driver can scrape them.
Every scheduler starts through the pinning's ``preexec_fn``: on its own CPU when pinned.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from pysched.framework.args import load_args
from pysched.framework.loadmetrics import MetricProviderArgs
from pysched.loadmetrics.sources import PrometheusSource
from pysched.plugins.loadaware.load_variation_risk_balancing import LoadVariationRiskBalancingArgs, window_queries
from pysched_dev.devcluster import ControlPlane, free_port
from pysched_dev.promkit import CPU_METRIC, MEMORY_METRIC
from pysched_dev.testkit import custom_scores_profile

from .pinning import Pinning
from .process import REPO, Process
from .querypump import QueryPump
from .scrape import ALLOW_PATHS

PYSCHED, KUBE, NULL, SCHEDULER_PLUGINS = "pysched", "kube-scheduler", "null-binder", "scheduler-plugins"
KINDS = (PYSCHED, KUBE, NULL, SCHEDULER_PLUGINS)
SCHEDULER_NAMES = {PYSCHED: "pysched", KUBE: "default-scheduler", NULL: "bench-null-binder",
                   SCHEDULER_PLUGINS: "scheduler-plugins"}
COSCHEDULING_CRD = REPO / "manifests" / "components" / "coscheduling" / "crd.yaml"
SP_SCRIPT = REPO / "hack" / "scheduler-plugins.sh"


PROFILES = ("default", "shipped", "loadaware", "topology")
#: The topology profile's TopologyAwarePlacement levels (bench.workloads' node labels, outermost first).
TOPOLOGY_LEVELS = ("bench.pysched.io/block", "bench.pysched.io/rack")
LOAD_AWARE_PLUGINS = ("TargetLoadPacking", "LoadVariationRiskBalancing")


def load_aware_args(address: str) -> list[dict]:
    """pluginConfig for the load-aware profile: both Trimaran scores on the bench exporter's gauges,
    the provider at its defaults (a fetch every 15 s, 2 s timeout)."""
    provider = {"type": "Prometheus", "address": address}
    return [{"name": "TargetLoadPacking", "args": {"metricProvider": provider, "query": CPU_METRIC}},
            {"name": "LoadVariationRiskBalancing", "args": {"metricProvider": provider, "cpuQuery": CPU_METRIC,
                                                            "memoryQuery": MEMORY_METRIC}}]


def load_aware_queries(address: str) -> list[str]:
    """Every query the loadaware profile's plugins send (the benchmark waits until each answers for
    every node, so no run starts on the fallback: LoadVariationRiskBalancing's window subqueries
    have no value until the series is one interval old)."""
    by_name = {c["name"]: c["args"] for c in load_aware_args(address)}
    lvrb = load_args(LoadVariationRiskBalancingArgs, by_name["LoadVariationRiskBalancing"], "pluginConfig")
    return [by_name["TargetLoadPacking"]["query"], *window_queries(lvrb).values()]


def load_aware_pump(address: str) -> QueryPump:
    """The queries the loadaware profile sends, as it sends them (each wrapped as its collector
    wraps it), at its provider's interval and timeout: for the runs of the other profiles."""
    provider = load_args(MetricProviderArgs, load_aware_args(address)[0]["args"]["metricProvider"],
                         "pluginConfig.metricProvider")
    source = PrometheusSource(provider)
    return QueryPump(address, [source.wrap(q) for q in load_aware_queries(address)],
                     provider.interval_seconds, provider.timeout_seconds)


def pysched_profile(scheduler_name: str, profile: str = "default", gang: bool = False,
                    metrics_address: str = "", gpu_share: str = "") -> dict:
    """pysched's profile: ``default`` (kube-scheduler's plugins), ``shipped`` (plus pysched's own
    scores) or ``loadaware`` (the default plus TargetLoadPacking and LoadVariationRiskBalancing,
    reading Prometheus at ``metrics_address``); ``gang`` adds Coscheduling as the coscheduling
    component's configmap-patch.yaml does; ``gpu_share`` (a policy, e.g. ``FGD``) adds GPUShare
    with that policy and its other arguments at their defaults (the target workload learned)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown pysched profile {profile!r} (one of {', '.join(PROFILES)})")
    out = (custom_scores_profile(scheduler_name) if profile == "shipped"
           else {"schedulerName": scheduler_name, "plugins": {"multiPoint": {"enabled": []}}})
    if profile == "loadaware":
        if not metrics_address:
            raise ValueError("the loadaware profile needs a Prometheus address")
        out["plugins"]["multiPoint"]["enabled"] += [{"name": n} for n in LOAD_AWARE_PLUGINS]
        out["pluginConfig"] = load_aware_args(metrics_address)
    if profile == "topology":
        out["plugins"]["placementGenerate"] = {"enabled": [{"name": "TopologyAwarePlacement"}],
                                               "disabled": [{"name": "TopologyPlacementGenerator"}]}
        out["pluginConfig"] = [{"name": "TopologyAwarePlacement", "args": {"levels": list(TOPOLOGY_LEVELS)}}]
    if gang:
        out["plugins"]["queueSort"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
        out["plugins"]["multiPoint"]["enabled"].append({"name": "Coscheduling"})
    if gpu_share:
        out["plugins"]["multiPoint"]["enabled"].append({"name": "GPUShare"})
        out["pluginConfig"] = [*out.get("pluginConfig", ()), {"name": "GPUShare", "args": {"policy": gpu_share}}]
    return out


def scheduler_plugins_binary(kubernetes: str = "") -> Path:
    """scheduler-plugins' kube-scheduler (``hack/scheduler-plugins.sh`` builds or finds it):
    v0.34.7 by default, or a checkout following Kubernetes ``kubernetes`` (``SCHEDULER_PLUGINS_SOURCE``)."""
    env = dict(os.environ, SCHEDULER_PLUGINS_KUBERNETES=kubernetes)
    if kubernetes:
        env.pop("PYSCHED_SCHEDULER_PLUGINS", None)   # that one is the default build
        if not env.get("SCHEDULER_PLUGINS_SOURCE"):
            raise SystemExit("scheduler-plugins-1.35 needs SCHEDULER_PLUGINS_SOURCE: a checkout of "
                             "sigs.k8s.io/scheduler-plugins whose go.mod follows Kubernetes 1.35")
    else:
        env.pop("SCHEDULER_PLUGINS_SOURCE", None)
    out = subprocess.run([str(SP_SCRIPT)], env=env, check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def start_scheduler(kind: str, cp: ControlPlane, qps: float, burst: int, rundir: Path, pinning: Pinning,
                    gang: bool = False, tag: str = "", profile: str = "default", metrics_address: str = "",
                    feature_gates: str = "", gpu_share: str = "") -> Process:
    """Start scheduler ``kind``; ``tag`` tells apart a second process of the same run (drain mode);
    ``gpu_share``: the GPUShare policy pysched adds (``pysched_profile``; the others ignore it)."""
    client_connection = {"qps": qps, "burst": burst}
    preexec = pinning.scheduler_preexec()
    port = free_port()
    gates = [f"--feature-gates={feature_gates}"] if feature_gates else []
    if kind == PYSCHED:
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False}, "clientConnection": client_connection,
               "profiles": [pysched_profile(SCHEDULER_NAMES[PYSCHED], profile, gang, metrics_address,
                                                gpu_share)]}
        path = rundir / "pysched-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([sys.executable, "-m", "pysched", "run", "--config", str(path),
                        "--kubeconfig", str(cp.kubeconfig),
                        # PYSCHED_BENCH_LOG_LEVEL=info: pysched's decisions in the run's log (costs CPU)
                        "--log-level", os.environ.get("PYSCHED_BENCH_LOG_LEVEL", "warning"),
                        "--bind-address", "127.0.0.1", "--secure-port", str(port),
                        f"--authorization-always-allow-paths={ALLOW_PATHS}",
                        "--cert-dir", str(rundir / f"pysched-certs{tag}"), "--podgroup-controller=off", *gates],
                       rundir / f"pysched{tag}.log", preexec=preexec, metrics_port=port)
    if kind == KUBE:
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False},
               "clientConnection": {**client_connection, "kubeconfig": str(cp.kubeconfig)},
               "profiles": [{"schedulerName": SCHEDULER_NAMES[KUBE]}]}
        path = rundir / "kube-scheduler-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([str(cp.bin / "kube-scheduler"), f"--config={path}", f"--secure-port={port}",
                        "--bind-address=127.0.0.1", f"--authorization-always-allow-paths={ALLOW_PATHS}", "--v=1",
                        *gates], rundir / f"kube-scheduler{tag}.log", preexec=preexec, metrics_port=port)
    if kind == SCHEDULER_PLUGINS:
        # Built on Kubernetes 1.34's libraries: it knows neither 1.37's gates nor its PodGroups.
        prof = pysched_profile(SCHEDULER_NAMES[SCHEDULER_PLUGINS], gang=True)
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False},
               "clientConnection": {**client_connection, "kubeconfig": str(cp.kubeconfig)}, "profiles": [prof]}
        path = rundir / "scheduler-plugins-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([str(scheduler_plugins_binary()), f"--config={path}", f"--secure-port={port}",
                        "--bind-address=127.0.0.1", f"--authorization-always-allow-paths={ALLOW_PATHS}", "--v=1"],
                       rundir / f"scheduler-plugins{tag}.log", preexec=preexec, metrics_port=port)
    if kind == NULL:
        return Process([sys.executable, "-m", "bench.nullbinder", "--kubeconfig", str(cp.kubeconfig),
                        "--scheduler-name", SCHEDULER_NAMES[NULL], "--qps", str(qps), "--burst", str(burst)],
                       rundir / f"null-binder{tag}.log", preexec=preexec)
    raise ValueError(f"unknown scheduler {kind!r}")
