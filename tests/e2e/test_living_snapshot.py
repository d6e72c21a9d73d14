"""Snapshot, simulate and shadow against a living cluster (controllers' pods, KWOK nodes).

* ``pysched snapshot`` exports the cluster with its controllers' objects (ReplicaSets,
  StatefulSets, the pods they own, Running); replayed in ``pysched simulate`` with the live run's seed
  - the pods pysched placed made pending again, queued in creation order - it makes the same
  placements pysched made: per workload, the same number of pods on each node.
* ``pysched run --shadow`` beside kube-scheduler predicts every placement of a Deployment once, even
  though KWOK then updates each pod's status twice (ContainerCreating, then Running and Ready), and
  reports its agreement.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest
import yaml

from pysched_dev.devcluster import KubeSchedulerProcess
from pysched_dev.livecluster import sample_nodes, wait_nodes_ready
from pysched_dev.testkit import create_nodes, list_pods

from .conftest import REPO, scheduler_config, wait_for
from .living_kit import create, deployment, get, running, template, wait_available

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"
SEED = "5"


def pysched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def owner_of(pod: dict) -> str:
    ref = (pod["metadata"].get("ownerReferences") or [{}])[0]
    return f"{ref.get('kind')}/{ref.get('name')}"


async def test_snapshot_of_the_living_cluster_replays_in_simulate(living_cluster, live_admin,
                                                                  live_scheduler_factory, tmp_path):
    nodes = sample_nodes()
    await create_nodes(live_admin, nodes)
    await wait_nodes_ready(live_admin, [n["metadata"]["name"] for n in nodes])
    sched = live_scheduler_factory(scheduler_config(), extra_args=["--seed", SEED]).start()
    # Synced means every informer, the ReplicaSets' and StatefulSets' included: a pod scheduled
    # from here on gets its workload's default spreading.
    await sched.wait_log("caches synced", 60)

    # One workload at a time, so that the queue order is the creation order.
    web = await create(live_admin, deployment("web", 5, cpu="700m"))
    await wait_available(live_admin, web, 5)
    labels = {"app": "db"}
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": labels}}]
    db = await create(live_admin, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
        "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels},
                 "template": template(labels, cpu="1", topologySpreadConstraints=spread)}})

    async def db_ready():
        return ((await get(live_admin, db)).get("status") or {}).get("readyReplicas") == 3
    await wait_for(db_ready, 60, what="the StatefulSet Ready")
    batch = template({"app": "batch"}, cpu="300m", restartPolicy="Never")
    batch["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}
    await create(live_admin, {"apiVersion": "batch/v1", "kind": "Job",
                              "metadata": {"name": "batch", "namespace": "default"},
                              "spec": {"parallelism": 4, "completions": 4, "template": batch}})

    async def all_running():
        pods = await list_pods(live_admin, "default")
        return pods if len(pods) == 12 and all(running(p) for p in pods) else None
    live = await wait_for(all_running, 60, what="every pod Running")
    live_placement = collections.Counter((owner_of(p), p["spec"]["nodeName"]) for p in live)

    snap = tmp_path / "snapshot.yaml"
    proc = pysched("snapshot", "--kubeconfig", str(living_cluster.kubeconfig), "-o", str(snap))
    assert proc.returncode == 0, proc.stderr
    items = yaml.safe_load(snap.read_text())["items"]
    kinds = collections.Counter(o["kind"] for o in items)
    assert kinds["Node"] == len(nodes) and kinds["Pod"] == 12
    assert kinds["ReplicaSet"] == 1 and kinds["StatefulSet"] == 1, kinds
    exported = [o for o in items if o["kind"] == "Pod"]
    assert all(p["status"]["phase"] == "Running" and p["metadata"].get("ownerReferences") for p in exported)

    # Replay: the cluster without the pods pysched placed, then those pods arriving again in the order
    # they were created (no node, no status), everything else as exported.
    for pod in exported:
        del pod["spec"]["nodeName"]
        pod["status"] = {}
    arrivals = sorted(exported, key=lambda p: p["metadata"]["creationTimestamp"])
    replay, pods_file = tmp_path / "replay.yaml", tmp_path / "arrivals.yaml"
    replay.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [o for o in items if o["kind"] != "Pod"]}))
    pods_file.write_text(yaml.safe_dump_all(arrivals))
    proc = pysched("simulate", "--cluster", str(replay), "--pods", str(pods_file), "--seed", SEED, "--output",
                   "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    by_name = {f"default/{p['metadata']['name']}": p for p in exported}
    simulated = collections.Counter((owner_of(by_name[p["pod"]]), p["node"]) for p in result["placements"])
    if simulated != live_placement:
        live_nodes = {f"default/{p['metadata']['name']}": p["spec"]["nodeName"] for p in live}
        order = "\n".join(f"{p['pod']:<32} live {live_nodes[p['pod']]:<8} simulated {p['node']}"
                           for p in result["placements"])
        raise AssertionError(f"simulate placed the pods elsewhere:\n{order}\n{sched.log()[-3000:]}")


async def test_shadow_mode_beside_kube_scheduler_in_a_living_cluster(living_cluster, live_admin,
                                                                     live_scheduler_factory):
    nodes = sample_nodes()
    await create_nodes(live_admin, nodes)
    await wait_nodes_ready(live_admin, [n["metadata"]["name"] for n in nodes])
    shadow = live_scheduler_factory(scheduler_config(), extra_args=["--shadow"]).start()
    await shadow.wait_log("caches synced", 60)
    kube = KubeSchedulerProcess(living_cluster.cp, {"profiles": [{"schedulerName": "default-scheduler"}]},
                                extra_args=["--secure-port=0"]).start()
    try:
        dep = await create(live_admin, deployment("web", 8, cpu="500m", scheduler="default-scheduler"))
        await wait_available(live_admin, dep, 8)
        results = ("same_node", "equivalent_node", "feasible_node", "infeasible_node", "unschedulable_here")

        async def compared():
            total = 0.0
            for r in results:
                total += await shadow.metric("pysched_shadow_placements_total", result=r) or 0.0
            return total
        assert await wait_for(compared, 60, what="every placement compared") == 8
        await wait_for(lambda: _all_running(live_admin), 30, what="every pod Running and Ready")
        assert await compared() == 8, "a pod's status updates must not count as new placements"
        assert (await shadow.metric("pysched_shadow_placements_total", result="infeasible_node") or 0) == 0
        ratio = await shadow.metric("pysched_shadow_agreement_ratio")
        assert ratio is not None and 0.0 <= ratio <= 1.0
        assert (await shadow.metric("scheduler_schedule_attempts_total", result="scheduled", profile="pysched")
                or 0) == 0
    finally:
        kube.stop()


async def _all_running(admin):
    pods = await list_pods(admin, "default")
    return len(pods) == 8 and all(running(p) for p in pods)
