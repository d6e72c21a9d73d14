"""The cycle-only benchmark: one workload's scheduling cycles per profile, without an API server.

``python -m bench.cycle [--workload W] [--profiles default,loadaware] [--repeats N]`` feeds the
workload's nodes and pods to ``OfflineScheduler`` (the production cache, queue-less cycle, assume,
Reserve and Permit; no bind, no Events, no informers) once per profile per repeat, the profiles
interleaved, and prints the process CPU time per pod for each, the median of the runs and the
ratio to the first profile. The loadaware profile reads the same per-node figures the end-to-end
benchmark's exporter serves (``promkit.BulkExporter``), from a ``StaticLoad`` whose samples are
renewed every ``--sample-every`` pods as a live collector's would be. A profile named
``PROFILE+GPUShare`` or ``PROFILE+GPUShare:POLICY`` is that profile with GPUShare added (policy FGD
unless named, the target workload learned), as the end-to-end benchmark runs a GPU-sharing
workload: ``--workload SchedulingGPUShare/1000Nodes --profiles
default,default+GPUShare:FGD,default+GPUShare:BestFit`` gives the CPU GPUShare adds per pod.

The end-to-end benchmark's CPU per pod (``make bench``) is mostly the client's work (watch
decoding, binds, Events) and moves with the API server's speed; this one isolates what a profile's
plugins cost per cycle, the number to watch when a plugin changes.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from pysched.apis.config import decode
from pysched.loadmetrics.static import StaticLoad
from pysched.metrics import METRICS
from pysched.plugins.gpushare.args import FGD
from pysched.plugins.gpushare.args import POLICIES as GPU_POLICIES
from pysched.tools.offline import OfflineScheduler
from pysched.util import gctune
from pysched_dev.promkit import node_figures

from .schedulers import PROFILES, PYSCHED, SCHEDULER_NAMES, pysched_profile
from .workloads import WORKLOADS


class RenewedLoad(StaticLoad):
    """StaticLoad whose samples are stamped again by ``renew()`` (a collector round)."""

    def renew(self) -> None:
        now = time.time()
        for s in self.series.values():
            s.replace(s.values, now, now)


def load_for(node_names: list[str]) -> RenewedLoad:
    nodes = {}
    for n in node_names:
        cpu, mem = node_figures(n)
        nodes[n] = {"cpu": cpu, "memory": mem, "cpu_stddev": 0.0, "memory_stddev": 0.0}
    return RenewedLoad({"nodes": nodes})


GPU_SHARE = "GPUShare"


def parse_profile(spec: str) -> tuple[str, str]:
    """``PROFILE`` or ``PROFILE+GPUShare[:POLICY]`` as (pysched profile, GPUShare policy or "")."""
    base, plus, plugin = spec.partition("+")
    name, _, policy = plugin.partition(":")
    if base not in PROFILES:
        raise ValueError(f"unknown profile {base!r} (one of {', '.join(PROFILES)})")
    if not plus:
        return base, ""
    if name != GPU_SHARE:
        raise ValueError(f"{spec!r}: only {GPU_SHARE} can be added to a profile ({base}+{GPU_SHARE}[:POLICY])")
    policy = policy or FGD
    if policy not in GPU_POLICIES:
        raise ValueError(f"{spec!r}: unknown {GPU_SHARE} policy {policy!r} (one of {', '.join(GPU_POLICIES)})")
    return base, policy


def filter_seconds(profile: str) -> tuple[float, int]:
    """The Filter extension point's (total seconds, calls) so far, for the profile named ``profile``'s
    scheduler (the same histogram /metrics serves)."""
    child = METRICS.extension_point_duration.labels("Filter", "Success", profile)
    return child.sum, sum(child.counts)


def run_once(workload, profile: str, sample_every: int) -> tuple[float, int, int, int, float]:
    """(CPU seconds of the measured pods' cycles, pods scheduled, pods measured, fallbacks taken:
    0 unless the load-aware plugins missed a sample, mean Filter ms over the measured pods: the
    same work in every profile but those adding GPUShare, which filters too, so equal means the
    profile does not slow it)."""
    name = SCHEDULER_NAMES[PYSCHED]
    base, gpu_share = parse_profile(profile)
    cfg = decode.parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [pysched_profile(name, base, metrics_address="http://127.0.0.1:9",
                                                     gpu_share=gpu_share)]})
    nodes = [workload.node(i) for i in range(workload.nodes)]
    load = load_for([n["metadata"]["name"] for n in nodes]) if base == "loadaware" else None
    sim = OfflineScheduler(cfg, load=load)

    def add(body: dict) -> None:
        # As the API server would: a uid and a resourceVersion (the DRA plugin tracks claims by uid).
        meta = body["metadata"]
        meta.setdefault("uid", f"{body['kind']}-{meta.get('namespace', '')}-{meta['name']}")
        meta.setdefault("resourceVersion", "1")
        sim.add_object(body)

    for _, body, *_ in workload.prelude():
        add(body)
    for i, n in enumerate(nodes):
        sim.add_node(n)
        for _, body, *_ in workload.node_objects(i) if workload.node_objects else ():
            add(body)

    def objects_of(i: int, phase: str) -> None:
        for _, body, *_ in workload.pod_objects(i, name, phase) if workload.pod_objects else ():
            add(body)

    for i in range(workload.init_pods):
        objects_of(i, "init")
        sim.schedule(workload.pod(i, name, "init"))
    for i in range(workload.measure_pods):
        objects_of(i, "measure")
    pods = [workload.pod(i, name, "measure") for i in range(workload.measure_pods)]
    gc.collect()
    gctune.freeze()       # as the live scheduler does once its caches are synced
    scheduled = 0
    f0, c0 = filter_seconds(name)
    t0 = time.process_time()
    for i, pod in enumerate(pods):
        if load is not None and i % sample_every == 0:
            load.renew()
        if sim.schedule(pod).node is not None:
            scheduled += 1
    cpu = time.process_time() - t0
    f1, c1 = filter_seconds(name)
    filter_ms = (f1 - f0) / (c1 - c0) * 1000 if c1 > c0 else float("nan")
    return cpu, scheduled, len(pods), sum(load.fallbacks.values()) if load is not None else 0, filter_ms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cycle", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="SchedulingBasic/5000Nodes_10000Pods", choices=sorted(WORKLOADS))
    p.add_argument("--profiles", default="default,loadaware",
                   help="comma-separated: PROFILE or PROFILE+GPUShare[:POLICY] (e.g. default+GPUShare:BestFit)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scale", default="", help="override the workload's NODES,INIT,MEASURE")
    p.add_argument("--sample-every", type=int, default=2000,
                   help="pods between renewed samples: a 15 s collector interval at 133 pods/s, well below "
                        "the end-to-end drain rate (more renewals than live, against the loadaware profile)")
    args = p.parse_args(argv)
    profiles = [x for x in args.profiles.split(",") if x]
    for prof in profiles:
        try:
            parse_profile(prof)
        except ValueError as exc:
            p.error(f"--profiles: {exc}")
    workload = WORKLOADS[args.workload]
    if args.scale:
        workload = workload.scaled(*(int(x) for x in args.scale.split(",")))
    gctune.configure()
    per_pod: dict[str, list[float]] = {prof: [] for prof in profiles}
    filters: dict[str, list[float]] = {prof: [] for prof in profiles}
    for r in range(args.repeats):
        order = profiles if r % 2 == 0 else profiles[::-1]
        for prof in order:
            cpu, scheduled, total, fallbacks, filter_ms = run_once(workload, prof, args.sample_every)
            per_pod[prof].append(cpu / total * 1000)
            filters[prof].append(filter_ms)
            print(f"run={r + 1} profile={prof} pods={total} scheduled={scheduled} fallbacks={fallbacks} "
                  f"cpu_ms_per_pod={cpu / total * 1000:.4f} filter_ms={filter_ms:.4f}", flush=True)
    base = statistics.median(per_pod[profiles[0]])
    base_filter = statistics.median(filters[profiles[0]])
    print(f"\n{args.workload}, cycle CPU ms per pod and mean Filter ms (median of {args.repeats}, [min-max]):")
    width = max(10, *(len(prof) for prof in profiles))
    for prof in profiles:
        m, f = statistics.median(per_pod[prof]), statistics.median(filters[prof])
        print(f"  {prof:<{width}} {m:.4f} [{min(per_pod[prof]):.4f}-{max(per_pod[prof]):.4f}]  "
              f"{(m / base - 1) * 100:+.1f} % vs {profiles[0]}   Filter {f:.4f} [{min(filters[prof]):.4f}-"
              f"{max(filters[prof]):.4f}]  {(f / base_filter - 1) * 100:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
