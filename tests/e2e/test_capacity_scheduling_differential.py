"""CapacityScheduling against scheduler-plugins' own scheduler (issue 38): the same ElasticQuotas,
nodes and pods through scheduler-plugins' kube-scheduler (``hack/scheduler-plugins.sh``, which
registers its CapacityScheduling) and through pysched, one after the other on one API server,
compared on which pods run, how many were preempted and from which team, and each pod's first
FailedScheduling message.

Two nodes with two GPUs each; team a (min 2 GPUs, max 3) and team b (min 2, max 4), both naming
cpu and memory too (scheduler-plugins counts any resource a quota leaves out as 0):

1. a submits four pods: three run (a's max), the fourth is refused ("more than Max"; no victims:
   a may only preempt its own lower-priority pods);
2. b submits one: it runs (the total, 4, is within the mins' 4);
3. b submits another: the total would pass the mins, b is within its min, so it reclaims one of
   a's borrowed GPUs - exactly one pod of a is preempted.

pysched runs with ``schedulerPluginsCompatible: true``. Each run's quotas are deleted before the
other scheduler's run: the total-min rule adds up every quota in the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, list_pods, make_node, make_pod

from .conftest import wait_for
from .preemption_kit import finish_terminating, force_delete
from .scheduler_plugins_kit import pysched_starter, upstream_starter
from .test_capacity_scheduling import EQ_API, install_quota_crd
from .test_coscheduling_differential import first_failures

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"
UPSTREAM = "sp-scheduler"
ROOMY = {"cpu": "8", "memory": "16Gi"}


def profile(name: str, **args) -> dict:
    prof: dict = {"schedulerName": name, "plugins": {
        "multiPoint": {"enabled": [{"name": "CapacityScheduling"}]},
        "postFilter": {"enabled": [{"name": "CapacityScheduling"}], "disabled": [{"name": "*"}]}}}
    if args:
        prof["pluginConfig"] = [{"name": "CapacityScheduling", "args": args}]
    return prof


def team_pod(name: str, ns: str, scheduler: str) -> dict:
    return make_pod(name, namespace=ns, scheduler=scheduler, cpu="100m", memory="100Mi", extended={GPU: "1"})


async def bound(admin, ns: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, ns)
            if not p["metadata"].get("deletionTimestamp")}


async def run(admin, scheduler: str, start) -> dict:
    a, b = f"a-{scheduler}", f"b-{scheduler}"
    for ns, gpus in ((a, ("2", "3")), (b, ("2", "4"))):
        await ensure_namespace(admin, ns)
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": "quota", "namespace": ns},
                "spec": {"min": {**ROOMY, GPU: gpus[0]}, "max": {**ROOMY, GPU: gpus[1]}}}
        await admin.request("POST", f"{EQ_API}/namespaces/{ns}/elasticquotas", body=body, rate_limit=False)
    deleted: list[str] = []      # pods that ran and are gone: preempted
    ever: set[str] = set()

    async def kubelet():
        while True:
            present = set()
            for ns in (a, b):
                await finish_terminating(admin, ns)
                present |= {f"{ns}/{n}" for n, node in (await bound(admin, ns)).items() if node}
            deleted.extend(sorted(ever - present - set(deleted)))
            ever.update(present)
            await asyncio.sleep(0.1)

    stop = await start()
    task = asyncio.create_task(kubelet())
    try:
        # one after the other: both schedulers' queues take them in creation order
        await create_pods(admin, [team_pod(f"a{i}", a, scheduler) for i in range(4)], concurrency=1)

        async def a_settled():
            placed = await bound(admin, a)
            return sum(1 for v in placed.values() if v) == 3 and "a3" in await first_failures(admin, a)
        await wait_for(a_settled, 60, what=f"{scheduler}: three of a's pods run, a3 refused")
        await create_pods(admin, [team_pod("b0", b, scheduler)])
        await wait_for(lambda: _runs(admin, b, "b0"), 60, what=f"{scheduler}: b0 runs")
        await create_pods(admin, [team_pod("b1", b, scheduler)])
        await wait_for(lambda: _runs(admin, b, "b1"), 60, what=f"{scheduler}: b1 runs after a reclaim")
        await asyncio.sleep(1)
        out = {"a": sorted(k for k, v in (await bound(admin, a)).items() if v),
               "b": sorted(k for k, v in (await bound(admin, b)).items() if v),
               "victims": sorted(d.split("/")[0][:1] for d in deleted),
               "failures": {**await first_failures(admin, a), **await first_failures(admin, b)}}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await stop()
    for ns in (a, b):
        for p in await list_pods(admin, ns):
            await force_delete(admin, ns, p["metadata"]["name"])
        await admin.request("DELETE", f"{EQ_API}/namespaces/{ns}/elasticquotas/quota", rate_limit=False)

    async def gone():
        return not any([await list_pods(admin, ns) for ns in (a, b)])
    await wait_for(gone, 60, what=f"{scheduler}'s pods gone")
    return out


async def _runs(admin, ns: str, name: str) -> bool:
    return bool((await bound(admin, ns)).get(name))


async def test_capacity_scheduling_outcomes_and_messages_match_scheduler_plugins(control_plane, admin,
                                                                                  scheduler_factory):
    await install_quota_crd(admin)
    await create_nodes(admin, [make_node(f"gpu{i}", cpu="64", memory="256Gi", extended={GPU: "2"}) for i in range(2)])

    start_upstream = upstream_starter(control_plane, profile(UPSTREAM))
    start_pysched = pysched_starter(scheduler_factory, profile("pysched", schedulerPluginsCompatible=True))
    theirs = await run(admin, UPSTREAM, start_upstream)
    ours = await run(admin, "pysched", start_pysched)

    def normalised(result: dict, scheduler: str) -> dict:
        out = dict(result)
        out["failures"] = {pod: msg.replace(f"-{scheduler}", "") for pod, msg in result["failures"].items()}
        return out

    theirs_n, ours_n = normalised(theirs, UPSTREAM), normalised(ours, "pysched")
    print("scheduler-plugins:", theirs_n)   # shown on a failure, beside pysched's in the assertion
    assert len(theirs_n["a"]) == 2 and theirs_n["b"] == ["b0", "b1"] and theirs_n["victims"] == ["a"], theirs_n
    assert theirs_n["failures"]["a3"].startswith(
        "0/2 nodes are available: Pod a/a3 is rejected in PreFilter because ElasticQuota a is more than Max."), theirs_n
    assert ours_n["b"] == theirs_n["b"] and ours_n["victims"] == theirs_n["victims"]
    assert len(ours_n["a"]) == len(theirs_n["a"])
    assert ours_n["failures"] == theirs_n["failures"]
