"""pysched's own Deployment (``manifests/``), two replicas, rolled to a new ConfigMap while pods keep
arriving - in a living cluster where kube-scheduler places pysched's pods, KWOK reports them Running
and ``pod_runner`` runs each one as a real ``pysched`` process with the pod's arguments, its
ConfigMap and its ServiceAccount's token, stopping it when the Deployment controller deletes the pod.

Judged by the API server's record: the Lease moved to a replica of the new ReplicaSet, every pod
that arrived during the roll is bound exactly once (audit log), no node holds more than its
allocatable, and every old replica exited 0 on its SIGTERM.
"""

from __future__ import annotations

import asyncio
import collections

import pytest
import yaml

from pysched.apis.core import resources
from pysched_dev.devcluster import KubeSchedulerProcess
from pysched_dev.livecluster import kwok_node, wait_nodes_ready
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_pod

from . import kustomize
from .auditkit import successful_binds
from .conftest import REPO, wait_for
from .pod_runner import PodRunner

pytestmark = pytest.mark.e2e
NS = "pysched-system"
SELECTOR = "app.kubernetes.io/name=pysched,app.kubernetes.io/component=scheduler"
ZONE = "topology.kubernetes.io/zone"
LOAD = 240


async def lease_holder(admin) -> str | None:
    try:
        lease = await admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/pysched")
    except Exception:   # noqa: BLE001 - 404 before the first election
        return None
    return lease["spec"].get("holderIdentity")


async def test_own_deployment_rolls_to_a_new_configmap_while_pods_arrive(living_cluster, live_admin, tmp_path):
    nodes = [kwok_node(f"n{i}", cpu="8", memory="32Gi", labels={ZONE: f"zone-{i % 2}"}) for i in range(4)]
    await create_nodes(live_admin, nodes)
    await wait_nodes_ready(live_admin, [n["metadata"]["name"] for n in nodes])
    # The cluster's own scheduler places pysched's pods (they name no schedulerName).
    kube_scheduler = KubeSchedulerProcess(living_cluster.cp, {"profiles": [{"schedulerName": "default-scheduler"}]},
                                          extra_args=["--secure-port=0"]).start()
    runner = None
    try:
        objs = await kustomize.apply(live_admin, REPO / "manifests")
        cm = next(o for o in objs if o["kind"] == "ConfigMap")
        runner = PodRunner(living_cluster.cp, live_admin, NS, SELECTOR, tmp_path / "pods").start()

        async def led_by_a_replica():
            holder = await lease_holder(live_admin)
            pods = await list_pods(live_admin, NS, labelSelector=SELECTOR)
            return holder if holder and any(holder.startswith(p["metadata"]["name"] + "_") for p in pods) else None
        try:
            first = await wait_for(led_by_a_replica, 90, what="a pysched replica holding the Lease")
        except AssertionError as exc:
            pods = await list_pods(live_admin, NS)
            state = [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase")) for p in pods]
            raise AssertionError(f"{exc}\npods: {state}\n{runner.logs()}") from None
        old = {p["metadata"]["name"] for p in await list_pods(live_admin, NS, labelSelector=SELECTOR)}
        assert len(old) == 2

        async def arrive():
            for i in range(0, LOAD, 12):
                await create_pods(live_admin, [make_pod(f"load-{j}", cpu="100m", memory="64Mi")
                                               for j in range(i, i + 12)])
                await asyncio.sleep(0.5)
        load = asyncio.create_task(arrive())
        await asyncio.sleep(2)

        # The roll: a new ConfigMap (another percentageOfNodesToScore) and the Deployment pointing at it.
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        cfg["percentageOfNodesToScore"] = 100
        await live_admin.request("POST", f"/api/v1/namespaces/{NS}/configmaps", rate_limit=False, body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pysched-config-v2", "namespace": NS},
            "data": {"config.yaml": yaml.safe_dump(cfg)}})
        dep = await live_admin.get(f"/apis/apps/v1/namespaces/{NS}/deployments/pysched")
        volumes = dep["spec"]["template"]["spec"]["volumes"]
        for v in volumes:
            if v["name"] == "config":
                v["configMap"]["name"] = "pysched-config-v2"
        await live_admin.request("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/pysched", rate_limit=False,
                                 body={"spec": {"template": {"spec": {"volumes": volumes}}}},
                                 content_type="application/strategic-merge-patch+json")

        async def rolled():
            d = await live_admin.get(f"/apis/apps/v1/namespaces/{NS}/deployments/pysched")
            st = d.get("status") or {}
            live = {p["metadata"]["name"] for p in await list_pods(live_admin, NS, labelSelector=SELECTOR)
                    if not p["metadata"].get("deletionTimestamp")}
            return live if (st.get("updatedReplicas") == 2 and st.get("availableReplicas") == 2
                            and st.get("replicas") == 2 and not live & old) else None
        new = await wait_for(rolled, 120, what="the Deployment rolled to the new ConfigMap")
        await load

        async def all_bound():
            pods = [p for p in await list_pods(live_admin, "default") if p["metadata"]["name"].startswith("load-")]
            return pods if len(pods) == LOAD and all(p["spec"].get("nodeName") for p in pods) else None
        pods = await wait_for(all_bound, 120, what="every pod that arrived during the roll bound")

        async def new_leader():
            holder = await lease_holder(live_admin)
            return holder if holder and any(holder.startswith(n + "_") for n in new) else None
        leader = await wait_for(new_leader, 60, what="the Lease held by a new replica")
        assert leader != first

        # Both generations did part of the work: the Scheduled Events name the replica that bound.
        async def scheduled_by():
            events, _ = await live_admin.list_all("/apis/events.k8s.io/v1/namespaces/default/events")
            # reportingInstance: "pysched-" + the replica's pod name, "pysched-<template hash>-<suffix>"
            # (the hash is 9 or 10 characters)
            by = collections.Counter(e.get("reportingInstance", "").removeprefix("pysched-pysched-").rsplit("-", 1)[0]
                                     for e in events if e.get("reason") == "Scheduled")
            return by if sum(by.values()) == LOAD else None
        by = await wait_for(scheduled_by, 60, what="a Scheduled Event per pod")
        templates = {n.rsplit("-", 1)[0].removeprefix("pysched-") for n in old | new}
        assert set(by) == templates and len(templates) == 2, (by, templates)

        async def old_exited():
            return all(name in runner.exited for name in old)
        await wait_for(old_exited, 60, what="the old replicas' processes gone")
        assert {name: runner.exited[name] for name in old} == dict.fromkeys(old, 0), runner.logs()

        binds = successful_binds(living_cluster.cp)
        load_binds = {name: n for name, n in binds.items() if name.startswith("load-")}
        assert len(load_binds) == LOAD and set(load_binds.values()) == {1}, \
            {n: c for n, c in load_binds.items() if c != 1}
        used: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for p in await list_pods(live_admin):
            if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed"):
                used[p["spec"]["nodeName"]].update(resources.pod_requests(p["spec"], p.get("status")))
        for node in nodes:
            alloc = resources.parse_resource_list(node["status"]["allocatable"])
            for res, amount in used[node["metadata"]["name"]].items():
                assert amount <= alloc.get(res, 0), (node["metadata"]["name"], res, amount, alloc)
        assert len(pods) == LOAD
    finally:
        if runner:
            await runner.stop()
        kube_scheduler.stop()
