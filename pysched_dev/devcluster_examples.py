"""What ``examples/`` needs on ``make dev-cluster``, beside the sample nodes.

``install`` runs from ``devcluster_cli.populate`` once the sample nodes are Ready:

* the **ElasticQuota CRD** (``manifests/components/capacityscheduling/crd.yaml``): ``examples/quota``;
* two **GPU nodes** for ``examples/gpu-share``: ``kwok-gpu-v100`` (4 x V100M16) and
  ``kwok-gpu-a10`` (4 x A10), with the ``nvidia.com/gpu`` taint so that only pods tolerating it go
  there, and the ``alibabacloud.com/gpu-card-model`` label GPUShare reads;
* a fake **DRA driver**, ``gpu.example.com``: its DeviceClass and a ResourceSlice on ``kwok-b1``
  (two A100 devices) and one on ``kwok-b2`` (one T4), as a driver's kubelet plugin would publish
  them (nothing prepares the devices: KWOK runs the pods): ``examples/dra``;
* **Kueue**'s manager (``pysched_dev.kueuekit``: CRDs, webhooks, controllers) for ``examples/kueue``,
  when ``--kueue`` says so: ``auto`` (the default) starts it when its binary is already built
  (``make kueue``, ``PYSCHED_KUEUE``), ``on`` builds it first if needed, ``off`` skips it;
* **Prometheus** for ``examples/load-aware``, the same way (``--prometheus``; ``make prometheus``,
  ``PYSCHED_PROMETHEUS``), on ``127.0.0.1:<--prometheus-port>`` (9090 by default: the address
  ``examples/load-aware/scheduler-config.yaml`` names). KWOK's nodes run nothing, so they have no
  load to measure: Prometheus's recording rules in ``examples/load-aware/prometheus-rules.yaml``
  state each node's CPU utilisation, and pysched reads them through Prometheus's HTTP API exactly
  as it reads node_exporter figures in a real cluster. Edit the file and
  ``curl -X POST http://127.0.0.1:9090/-/reload`` to change them.

Kueue and Prometheus stop with the cluster (``LivingCluster.on_stop``). In ``auto`` mode a service
that cannot start is reported on stderr and the rest of the cluster comes up without it.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysched.client.rest import KubeClient
from pysched_dev.devcluster import REPO_ROOT, hack_output
from pysched_dev.livecluster import CAPACITY_TYPE, GPU_TAINT, INSTANCE_TYPE, ZONE, LivingCluster, kwok_node
from pysched_dev.release.buildenv import cache_root
from pysched_dev.testkit import create_nodes, install_crd

EXAMPLES = REPO_ROOT / "examples"
ELASTIC_QUOTA_CRD = REPO_ROOT / "manifests" / "components" / "capacityscheduling" / "crd.yaml"
PROMETHEUS_RULES = EXAMPLES / "load-aware" / "prometheus-rules.yaml"
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
DRA_DRIVER = "gpu.example.com"
#: The fake DRA driver's devices per node: (device name, model, memory).
DRA_DEVICES: dict[str, list[tuple[str, str, str]]] = {
    "kwok-b1": [("gpu-0", "A100", "40Gi"), ("gpu-1", "A100", "40Gi")],
    "kwok-b2": [("gpu-0", "T4", "16Gi")],
}
MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class ExamplesOptions:
    """What ``install`` starts besides the objects: Kueue and Prometheus, each ``auto``, ``on`` or
    ``off``; Prometheus's port (0: a free one). The defaults start neither (tests); the command
    line's (``from_args``) are ``auto`` and 9090."""

    kueue: str = "off"
    prometheus: str = "off"
    prometheus_port: int = 9090

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExamplesOptions:
        return cls(kueue=args.kueue, prometheus=args.prometheus, prometheus_port=args.prometheus_port)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``make dev-cluster``'s flags for the examples' services."""
    p.add_argument("--kueue", choices=MODES, default="auto",
                   help="start Kueue's manager for examples/kueue: auto (when already built: make kueue), "
                        "on (build it if needed), off")
    p.add_argument("--prometheus", choices=MODES, default="auto",
                   help="start Prometheus for examples/load-aware: auto (when already built: make prometheus), "
                        "on (build it if needed), off")
    p.add_argument("--prometheus-port", type=int, default=9090, metavar="PORT",
                   help="Prometheus's loopback port (the address examples/load-aware/scheduler-config.yaml names)")


def gpu_nodes() -> list[dict[str, Any]]:
    """The GPU-sharing example's nodes: four V100s in zone a, four A10s in zone b."""
    def node(name: str, zone: str, itype: str, model: str, cpu: str, memory: str) -> dict[str, Any]:
        return kwok_node(name, cpu=cpu, memory=memory, taints=[GPU_TAINT], extended={"nvidia.com/gpu": "4"},
                         labels={ZONE: zone, INSTANCE_TYPE: itype, CAPACITY_TYPE: "on-demand",
                                 GPU_MODEL_LABEL: model})
    return [node("kwok-gpu-v100", "zone-a", "p3.8xlarge", "V100M16", "32", "244Gi"),
            node("kwok-gpu-a10", "zone-b", "g5.12xlarge", "A10", "48", "192Gi")]


def dra_objects() -> list[tuple[str, dict[str, Any]]]:
    """(API path, object): the fake driver's DeviceClass and one ResourceSlice per node."""
    base = "/apis/resource.k8s.io/v1"
    objs: list[tuple[str, dict[str, Any]]] = [(f"{base}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRA_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}})]
    for node, devices in DRA_DEVICES.items():
        objs.append((f"{base}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRA_DRIVER}"},
            "spec": {"driver": DRA_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": name, "attributes": {"model": {"string": model}},
                                  "capacity": {"memory": {"value": memory}}}
                                 for name, model, memory in devices]}}))
    return objs


def cached_binary(env: str, pattern: str) -> Path | None:
    """``$env``, else the newest ``hack/*.sh`` cache entry matching ``pattern`` (lib.sh's layout:
    ``$PYSCHED_CACHE``, else ``$XDG_CACHE_HOME/pysched``, else ``~/.cache/pysched``, then ``bin/``);
    None when neither exists. Never builds."""
    if os.environ.get(env):
        return Path(os.environ[env])
    found = sorted(glob.glob(str(cache_root() / "bin" / pattern)))
    return Path(found[-1]) if found and os.access(found[-1], os.X_OK) else None


def _binary(mode: str, env: str, script: str, pattern: str) -> Path | None:
    if mode == "off":
        return None
    if mode == "on":
        return hack_output(env, REPO_ROOT / "hack" / script)
    return cached_binary(env, pattern)


def start_kueue(lc: LivingCluster, mode: str) -> str:
    """Kueue's manager beside ``lc`` (its CRDs, webhooks and controllers); a line saying what happened."""
    from pysched_dev.kueuekit import Kueue, kueue_binary

    binary = _binary(mode, "PYSCHED_KUEUE", "kueue.sh", "kueue-v*/kueue")
    if binary is None:
        return "Kueue: not started (--kueue off, or not built: make kueue; then make dev-cluster again)"
    os.environ["PYSCHED_KUEUE"] = str(binary)
    assert lc.cp is not None
    kueue = Kueue(lc.cp, binary=kueue_binary())
    lc.on_stop.append(kueue.stop)
    kueue.start()
    return f"Kueue {binary.parent.name.removeprefix('kueue-')}: running (examples/kueue)"


def start_prometheus(lc: LivingCluster, mode: str, port: int) -> str:
    """Prometheus on ``127.0.0.1:port`` evaluating ``PROMETHEUS_RULES``; a line saying what happened."""
    from pysched_dev.promkit import PrometheusServer

    binary = _binary(mode, "PYSCHED_PROMETHEUS", "prometheus.sh", "prometheus-v*")
    if binary is None:
        return "Prometheus: not started (--prometheus off, or not built: make prometheus; then make dev-cluster again)"
    prom = PrometheusServer(binary, [], scrape_interval_s=1.0, workdir=lc.workdir / "prometheus",
                            rule_files=[PROMETHEUS_RULES], extra_args=["--web.enable-lifecycle"])
    prom.port = port
    lc.on_stop.append(prom.stop)
    prom.start()
    return f"Prometheus: {prom.address}, node load from {PROMETHEUS_RULES.relative_to(REPO_ROOT)} (examples/load-aware)"


async def install(admin: KubeClient, lc: LivingCluster, options: ExamplesOptions) -> list[str]:
    """Everything ``examples/`` needs (module docstring); the names of the nodes it added."""
    from pysched_dev.livecluster import wait_nodes_ready

    await install_crd(admin, ELASTIC_QUOTA_CRD)
    nodes = gpu_nodes()
    await create_nodes(admin, nodes)
    for path, obj in dra_objects():
        await admin.request("POST", path, body=obj, rate_limit=False)
    names = [n["metadata"]["name"] for n in nodes]
    await wait_nodes_ready(admin, names)
    for what, start in (("kueue", lambda: start_kueue(lc, options.kueue)),
                        ("prometheus", lambda: start_prometheus(lc, options.prometheus, options.prometheus_port))):
        try:
            line = await asyncio.to_thread(start)
        except (RuntimeError, OSError) as exc:  # ControlPlaneError, KueueError, PrometheusError
            if getattr(options, what) == "on":
                raise
            line = f"{what}: not started: {exc}".splitlines()[0]
        print(line, file=sys.stderr, flush=True)
    return names
