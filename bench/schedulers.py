"""The schedulers under test, started as processes: pysched, kube-scheduler 1.35, the null binder.

All get the same client QPS/burst and leader election off. pysched runs as shipped (kube's default
plugins plus its own scores; the Coscheduling profile for gang workloads, its PodGroup status
controller off so only scheduling is measured). pysched and kube-scheduler serve /metrics without
credentials (``--authorization-always-allow-paths``, a bench-only lab setting) so the driver can
scrape them. Every scheduler starts through the pinning's ``preexec_fn``: on its own CPU when pinned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from pysched_dev.devcluster import ControlPlane, free_port
from pysched_dev.testkit import custom_scores_profile

from .pinning import Pinning
from .process import REPO, Process
from .scrape import ALLOW_PATHS

PYSCHED, KUBE, NULL = "pysched", "kube-scheduler", "null-binder"
KINDS = (PYSCHED, KUBE, NULL)
SCHEDULER_NAMES = {PYSCHED: "pysched", KUBE: "default-scheduler", NULL: "bench-null-binder"}
COSCHEDULING_CRD = REPO / "manifests" / "components" / "coscheduling" / "crd.yaml"


def coscheduling_profile(scheduler_name: str) -> dict:
    """pysched as shipped with the coscheduling component (its configmap-patch.yaml profile)."""
    profile = custom_scores_profile(scheduler_name)
    profile["plugins"]["queueSort"] = {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    profile["plugins"]["multiPoint"]["enabled"].append({"name": "Coscheduling"})
    return profile


def start_scheduler(kind: str, cp: ControlPlane, qps: float, burst: int, rundir: Path, pinning: Pinning,
                    gang: bool = False, tag: str = "") -> Process:
    """Start scheduler ``kind``; ``tag`` tells apart a second process of the same run (drain mode)."""
    client_connection = {"qps": qps, "burst": burst}
    preexec = pinning.scheduler_preexec()
    port = free_port()
    if kind == PYSCHED:
        profile = (coscheduling_profile if gang else custom_scores_profile)(SCHEDULER_NAMES[PYSCHED])
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False}, "clientConnection": client_connection,
               "profiles": [profile]}
        path = rundir / "pysched-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([sys.executable, "-m", "pysched", "run", "--config", str(path),
                        "--kubeconfig", str(cp.kubeconfig), "--log-level", "warning",
                        "--bind-address", "127.0.0.1", "--secure-port", str(port),
                        f"--authorization-always-allow-paths={ALLOW_PATHS}",
                        "--cert-dir", str(rundir / f"pysched-certs{tag}"), "--podgroup-controller=off"],
                       rundir / f"pysched{tag}.log", preexec=preexec, metrics_port=port)
    if kind == KUBE:
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "leaderElection": {"leaderElect": False},
               "clientConnection": {**client_connection, "kubeconfig": str(cp.kubeconfig)},
               "profiles": [{"schedulerName": SCHEDULER_NAMES[KUBE]}]}
        path = rundir / "kube-scheduler-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return Process([str(cp.bin / "kube-scheduler"), f"--config={path}", f"--secure-port={port}",
                        "--bind-address=127.0.0.1", f"--authorization-always-allow-paths={ALLOW_PATHS}", "--v=1"],
                       rundir / f"kube-scheduler{tag}.log", preexec=preexec, metrics_port=port)
    if kind == NULL:
        return Process([sys.executable, "-m", "bench.nullbinder", "--kubeconfig", str(cp.kubeconfig),
                        "--scheduler-name", SCHEDULER_NAMES[NULL], "--qps", str(qps), "--burst", str(burst)],
                       rundir / f"null-binder{tag}.log", preexec=preexec)
    raise ValueError(f"unknown scheduler {kind!r}")
