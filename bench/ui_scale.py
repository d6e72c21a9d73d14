"""pysched ui at scale: 5,000 nodes, 5,000 bound and 10,000 pending pods (ten 1,000-replica
Deployments). Measures a run against ``Simulation.run`` alone on the same inputs, ``GET
/api/scenario`` (size and time), the explanation of the last pod in the queue, export and edits.

A measurement, not a test (speed belongs here, beside the benchmark, not in ``make test``); about
a minute: ``.venv/bin/python -m pytest -q -s bench/ui_scale.py -p no:cacheprovider``
(``PYSCHED_UI_SCALE=N`` divides the cluster by N for a quick look).
"""

import gc
import json
import os
import time

import yaml
from aiohttp.test_utils import TestClient, TestServer

from pysched.testing.objects import make_node, make_pod
from pysched.tools.simulate import Simulation
from pysched.tools.snapshot import Snapshot
from pysched.ui.scenario import Scenario
from pysched.ui.server import make_app, tune_gc

SCALE = os.environ.get("PYSCHED_UI_SCALE", "1")
TOKEN = "t"
REPEATS = 2
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TYPES = [("m5.2xlarge", "8", "32Gi"), ("c5.4xlarge", "16", "32Gi"), ("r5.xlarge", "4", "32Gi")]


def eks_node(i: int) -> dict:
    itype, cpu, mem = TYPES[i % len(TYPES)]
    zone = f"us-east-1{'abc'[i % 3]}"
    cap = "spot" if i % 4 == 0 else "on-demand"
    labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": itype,
              "beta.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone,
              "failure-domain.beta.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-east-1",
              "failure-domain.beta.kubernetes.io/region": "us-east-1", "karpenter.sh/capacity-type": cap,
              "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/instance-family": itype.split(".")[0]}
    return make_node(f"ip-10-{i // 250}-{i % 250}-{i % 7}.ec2.internal", cpu=cpu, memory=mem, labels=labels)


def deployment(i: int, replicas: int) -> dict:
    cpu, mem = [("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("100m", "256Mi")][i % 4]
    meta = {"name": f"svc-{i}", "namespace": f"team-{i % 3}"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": f"svc-{i}"}},
                     "template": {"metadata": {"labels": {"app": f"svc-{i}", "tier": "web"}},
                                  "spec": {"schedulerName": "pysched", "containers": [
                                      {"name": "app", "image": "registry.example/app:1",
                                       "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}}}


def ms(t0: float) -> int:
    return round((time.perf_counter() - t0) * 1000)


async def test_scale():
    div = max(1, int(SCALE or 1))
    n_nodes, per_deploy = 5000 // div, 1000 // div
    nodes = [eks_node(i) for i in range(n_nodes)]
    bound = [make_pod(f"agent-{i}", namespace="kube-system", cpu="100m", memory="128Mi", scheduler="default-scheduler",
                      node_name=nodes[i]["metadata"]["name"], labels={"app": "agent"}) for i in range(n_nodes)]
    out: dict[str, object] = {"nodes": n_nodes, "boundPods": len(bound), "pendingPods": 10 * per_deploy}
    t0 = time.perf_counter()
    sc = Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), [deployment(i, per_deploy) for i in range(10)])
    out["from_snapshot_ms"] = ms(t0)
    state = sc.freeze()
    assert len(state.pending) == 10 * per_deploy

    client = TestClient(TestServer(make_app(sc, token=TOKEN)))
    await client.start_server()
    threshold = gc.get_threshold()
    tune_gc()                       # as serve() does
    try:
        # Simulation.run alone and a run through the API, alternately (the best of REPEATS each:
        # wall time is noisy on a shared machine; CPU time less so).
        direct_wall, direct_cpu, api_wall, api_cpu, sim_ms, dur_ms = [], [], [], [], [], []
        for _ in range(REPEATS):
            t0, c0 = time.perf_counter(), time.process_time()
            direct = Simulation(state.config(), seed=0).run(state.snapshot(), state.to_schedule())
            direct_wall.append(ms(t0))
            direct_cpu.append(round((time.process_time() - c0) * 1000))
            t0, c0 = time.perf_counter(), time.process_time()
            resp = await client.post("/api/runs", json={"label": "scale"}, headers=AUTH)
            run_body = await resp.read()
            assert resp.status == 200, run_body
            api_wall.append(ms(t0))
            api_cpu.append(round((time.process_time() - c0) * 1000))
            run = json.loads(run_body)
            sim_ms.append(run["simulationMs"])
            dur_ms.append(run["durationMs"])
        out["Simulation.run wall_ms (best)"] = min(direct_wall)
        out["Simulation.run cpu_ms (best)"] = min(direct_cpu)
        out["POST /api/runs wall_ms (best)"] = min(api_wall)
        out["POST /api/runs cpu_ms (best)"] = min(api_cpu)
        out["run simulationMs (best)"] = min(sim_ms)
        out["run durationMs (best)"] = min(dur_ms)
        out["run bytes"] = len(run_body)
        out["placed"] = run["placed"]
        assert {p["pod"]: p["node"] for p in run["placements"]} == {p.pod: p.node for p in direct.placements}

        t0, c0 = time.perf_counter(), time.process_time()
        resp = await client.get("/api/scenario", headers=AUTH)
        body = await resp.read()
        out["GET /api/scenario first wall_ms"] = ms(t0)
        out["GET /api/scenario first cpu_ms"] = round((time.process_time() - c0) * 1000)
        out["GET /api/scenario bytes"] = len(body)
        t0 = time.perf_counter()
        await (await client.get("/api/scenario", headers=AUTH)).read()
        out["GET /api/scenario cached_ms"] = ms(t0)
        data = json.loads(body)
        per_node = len(json.dumps(data["nodes"])) // max(1, len(data["nodes"]))
        out["node row bytes (avg)"] = per_node
        out["node labels bytes (all nodes)"] = sum(len(json.dumps(n["labels"])) for n in data["nodes"])

        last = state.to_schedule()[-1]["metadata"]
        pod = f"{last['namespace']}/{last['name']}"
        t0, c0 = time.perf_counter(), time.process_time()
        resp = await client.get(f"/api/runs/{run['id']}/explain", params={"pod": pod}, headers=AUTH)
        explain = await resp.read()
        assert resp.status == 200, explain
        out["explain last pod wall_ms"] = ms(t0)
        out["explain last pod cpu_ms"] = round((time.process_time() - c0) * 1000)
        out["explain bytes"] = len(explain)
        t0 = time.perf_counter()
        await (await client.get(f"/api/runs/{run['id']}/explain", params={"pod": pod}, headers=AUTH)).read()
        out["explain cached_ms"] = ms(t0)

        t0 = time.perf_counter()
        resp = await client.get("/api/export?download=scenario", headers=AUTH)
        exported = await resp.read()
        out["export_ms"] = ms(t0)
        out["export bytes"] = len(exported)

        t0 = time.perf_counter()
        resp = await client.post("/api/objects", headers=AUTH, json={"yaml": yaml.safe_dump(deployment(99, 100))})
        assert resp.status == 200, await resp.text()
        out["apply a 100-replica Deployment_ms"] = ms(t0)
        t0 = time.perf_counter()
        resp = await client.delete(f"/api/nodes/{nodes[0]['metadata']['name']}", headers=AUTH)
        assert resp.status == 200
        out["delete a node_ms"] = ms(t0)
        t0 = time.perf_counter()
        resp = await client.post("/api/nodes/clone", headers=AUTH,
                                 json={"node": nodes[1]["metadata"]["name"], "count": 1000})
        assert resp.status == 200
        out["clone 1000 nodes_ms"] = ms(t0)
        t0, c0 = time.perf_counter(), time.process_time()
        await (await client.get("/api/scenario", headers=AUTH)).read()
        out["GET /api/scenario after edits wall_ms"] = ms(t0)
        out["GET /api/scenario after edits cpu_ms"] = round((time.process_time() - c0) * 1000)
    finally:
        await client.close()
        gc.unfreeze()
        gc.set_threshold(*threshold)
    width = max(map(len, out))
    print()
    for k, v in out.items():
        print(f"{k.ljust(width)}  {v}")
