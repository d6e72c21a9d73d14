"""CPU of one pod-group cycle's placement step with topology: TopologyAwarePlacement beside
upstream's TopologyPlacementGenerator, offline (the production engine, no API server).

The cluster: 1,000 nodes (``--nodes``) in 2 zones x 4 blocks x 10 racks (25 nodes a rack), 32 cpu
each, a seeded random share of each already requested (``--load``); a gang of 8 (``--members``)
members of 8 cpu. Each scheduler runs the placement step (``Scheduler._group_algorithm``: the
placements generated, the group simulated per placement until a tier fits, the best kept; every
assumption taken back, so the runs are identical) ``--repeats`` times; reported: CPU seconds per
cycle (median ``time.process_time``), the placements generated and simulated, and where the
group went (how many racks and blocks its members span, the chosen rack's free cpu left over).

* ``pysched-tas``: TopologyAwarePlacement, levels zone/block/rack/hostname, no constraint
  (preferred from the lowest level);
* ``upstream-rack``: TopologyPlacementGenerator with the group's topology key ``rack`` (every rack
  simulated, PodGroupPodsCount then NodeResourcesFit's MostAllocated choose);
* ``upstream-zone``: the same with the key ``topology.kubernetes.io/zone`` (both zones simulated;
  inside the zone the members go where the node scores send them);
* ``no-topology``: the group's one placement, every node.

Run: ``.venv/bin/python -m bench.topology_placement`` (``--profile`` prints cProfile's top of the
pysched-tas cycle).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import time
from typing import Any

from pysched.apis import config as configmod
from pysched.backend.queue.scheduling_queue import QueuedPodInfo
from pysched.framework import PodGroupCycleInfo, PodInfo
from pysched.framework.features import default_gates
from pysched.testing.objects import make_node, make_pod
from pysched.tools.offline import OfflineScheduler

ZONE, BLOCK, RACK, HOST = ("topology.kubernetes.io/zone", "example.com/block", "example.com/rack",
                           "kubernetes.io/hostname")
GATES = default_gates((1, 37)) | {"GenericWorkload", "TopologyAwareWorkloadScheduling"}
NODE_CPU = 32


def profile(kind: str) -> dict[str, Any]:
    p: dict[str, Any] = {"schedulerName": "pysched"}
    if kind == "pysched-tas":
        p["plugins"] = {"placementGenerate": {"enabled": [{"name": "TopologyAwarePlacement"}],
                                              "disabled": [{"name": "TopologyPlacementGenerator"}]}}
        p["pluginConfig"] = [{"name": "TopologyAwarePlacement", "args": {"levels": [ZONE, BLOCK, RACK, HOST]}}]
    return p


def cluster(nodes: int, load: float, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    out, used = [], []
    for i in range(nodes):
        rack, block = i // 25, i // 250
        name = f"n{i:04d}"
        out.append(make_node(name, cpu=str(NODE_CPU), memory="256Gi", labels={
            ZONE: f"z{block // 2}", BLOCK: f"b{block}", RACK: f"r{rack}"}))
        cpu = rng.choice([0, 4, 8, 12, 16, 20, 24, 28]) if rng.random() < load else 0
        if cpu:
            p = make_pod(f"bg-{i}", cpu=str(cpu), memory="1Gi", node_name=name, scheduler="other")
            p["metadata"]["uid"] = f"bg-{i}"
            used.append(p)
    return out, used


def scheduler(kind: str, nodes: list[dict[str, Any]], used: list[dict[str, Any]]) -> OfflineScheduler:
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [profile(kind)]})
    s = OfflineScheduler(cfg, kube_version=(1, 37), feature_gates=GATES)
    for n in nodes:
        s.add_node(n)
    for p in used:
        s.add_pod(p)
    return s


def gang(s: OfflineScheduler, kind: str, members: int) -> tuple[Any, list[QueuedPodInfo]]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": members}}}
    if kind.startswith("upstream-"):
        spec["schedulingConstraints"] = {"topology": [{"key": {"upstream-rack": RACK, "upstream-zone": ZONE}[kind]}]}
    s.add_object({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": "g", "namespace": "default", "uid": "pg"}, "spec": spec})
    infos = []
    for i in range(members):
        p = make_pod(f"g-{i}", cpu="8", memory="8Gi")
        p["metadata"]["uid"] = f"g-{i}"
        p["spec"]["schedulingGroup"] = {"podGroupName": "g"}
        info = PodInfo.from_dict(p, keep_raw=True)
        s.observe_pending(info)
        infos.append(info)
    fwk = s.frameworks["pysched"]
    return fwk.gang.podgroup("default/g"), [QueuedPodInfo(i, float(n)) for n, i in enumerate(infos)]


def run(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    nodes, used = cluster(args.nodes, args.load, args.seed)
    s = scheduler(kind, nodes, used)
    fwk = s.frameworks["pysched"]
    pg, qs = gang(s, kind, args.members)
    sched: Any = s.scheduler
    tried: list[int] = []
    original = sched._try_placement

    def counting(*a: Any, **kw: Any) -> Any:
        tried[-1] += 1
        return original(*a, **kw)

    sched._try_placement = counting
    cpu: list[float] = []
    result = None

    def once() -> Any:
        info = PodGroupCycleInfo(pg, [], [q.pod for q in qs])
        return sched._group_algorithm(fwk, fwk.gang, pg, info, qs)

    for _ in range(args.repeats):
        tried.append(0)
        t0 = time.process_time()
        result = once()
        cpu.append(time.process_time() - t0)
    assert result is not None
    simulated = tried[-1]
    if args.profile and kind == "pysched-tas":
        prof = cProfile.Profile()
        prof.runcall(once)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
    hosts = [m.host for m in result.members if m.host]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    racks = {labels[h][RACK] for h in hosts}
    blocks = {labels[h][BLOCK] for h in hosts}
    left = ""
    if len(racks) == 1:
        (rack,) = racks
        used_cpu = {p["spec"]["nodeName"]: int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
                    for p in used}
        free = sum(NODE_CPU - used_cpu.get(n, 0) for n, lb in labels.items() if lb[RACK] == rack)
        left = str(free - 8 * len(hosts))
    generated = result.placement is not None
    return {"scheduler": kind, "ok": result.status.is_success(), "cpu_ms": statistics.median(cpu) * 1000,
            "simulated": simulated, "racks": len(racks), "blocks": len(blocks), "rack_cpu_left": left,
            "placement": result.placement.name if generated and result.placement else ""}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.topology_placement", description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--load", type=float, default=0.7, help="share of nodes with a background pod")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--schedulers", default="pysched-tas,upstream-rack,upstream-zone,no-topology")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    print(f"{'scheduler':14} {'ok':3} {'cpu ms':>8} {'simulated':>9} {'racks':>5} {'blocks':>6} "
          f"{'rack cpu left':>13}  placement")
    for kind in args.schedulers.split(","):
        r = run(kind, args)
        print(f"{r['scheduler']:14} {'yes' if r['ok'] else 'no':3} {r['cpu_ms']:8.1f} {r['simulated']:9d} "
              f"{r['racks']:5d} {r['blocks']:6d} {r['rack_cpu_left']:>13}  {r['placement']}")


if __name__ == "__main__":
    main()
