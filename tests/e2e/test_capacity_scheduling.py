"""Team quotas (CapacityScheduling, ElasticQuota) against a real API server.

Two teams, each guaranteed 4 of the cluster's 8 GPUs (``min``) and allowed 8 (``max``):

* team a borrows all 8 while team b is idle;
* team b submits 4 pods and gets exactly its guarantee back: 4 of a's pods are preempted, none of
  b's, and a keeps its own 4; a fifth b pod preempts nothing (a is back at its guarantee);
* a gang of team a (a PodGroup of 3) is admitted whole or not at all: nothing of it binds while
  the quotas leave no room, all of it once b's pods finish;
* all along, no team holds more than its max and the teams together never hold more than 8 GPUs;
* ``status.used`` of each ElasticQuota follows the pods (the status controller, leader only).

There is no kubelet: a test task plays it, deleting terminating pods (``gracePeriodSeconds: 0``).
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import yaml

from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, list_pods, make_node, make_pod

from .conftest import REPO, scheduler_config, wait_for
from .podgroup_kit import LABEL, create_podgroup, install_crd, podgroup
from .preemption_kit import finish_terminating, force_delete

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"
EQ_API = "/apis/scheduling.x-k8s.io/v1alpha1"
CRD = REPO / "manifests" / "components" / "capacityscheduling" / "crd.yaml"


def quota_config() -> dict:
    profile = {"schedulerName": "pysched", "plugins": {
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]},
        "postFilter": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}],
                       "disabled": [{"name": "*"}]}}}
    return scheduler_config(profiles=[profile])


async def install_quota_crd(admin) -> None:
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        body=yaml.safe_load(CRD.read_text()), rate_limit=False)

    async def served():
        try:
            found = await admin.get(EQ_API)
        except Exception:  # noqa: BLE001 - not served yet
            return False
        return any(r["name"] == "elasticquotas" for r in found.get("resources") or ())
    await wait_for(served, 30, what="ElasticQuota CRD served")


async def create_quota(admin, ns: str, lo: dict, hi: dict) -> None:
    await ensure_namespace(admin, ns)
    body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": f"{ns}-quota", "namespace": ns}, "spec": {"min": lo, "max": hi}}
    await admin.request("POST", f"{EQ_API}/namespaces/{ns}/elasticquotas", body=body, rate_limit=False)


def gpu_pod(name: str, ns: str, **kw) -> dict:
    return make_pod(name, namespace=ns, cpu="100m", memory="100Mi", extended={GPU: "1"}, **kw)


async def held(admin) -> dict[str, list[str]]:
    """namespace -> its pods holding a GPU on a node (bound, not terminating)."""
    out: dict[str, list[str]] = {"a": [], "b": []}
    for p in await list_pods(admin):
        ns = p["metadata"]["namespace"]
        if ns in out and p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
            out[ns].append(p["metadata"]["name"])
    return out


async def test_two_teams_borrow_and_reclaim_exactly_their_guarantee(admin, scheduler_factory):
    await install_crd(admin)                       # PodGroups, for the gang
    await install_quota_crd(admin)
    await create_nodes(admin, [make_node(f"gpu{i}", cpu="64", memory="256Gi", extended={GPU: "4"})
                               for i in range(2)])
    for ns in ("a", "b"):
        await create_quota(admin, ns, {GPU: "4"}, {GPU: "8"})
    sched = scheduler_factory(quota_config()).start()
    await sched.wait_log("caches synced", 60)

    worst = {"a": 0, "b": 0, "total": 0}
    deleted: list[str] = []         # pods that held a GPU and are gone (preempted), in order
    ever: set[str] = set()
    finished: set[str] = set()      # pods the test itself deleted

    async def kubelet_and_watch():
        while True:
            for ns in ("a", "b"):
                await finish_terminating(admin, ns)
            now = await held(admin)
            present = {f"{ns}/{n}" for ns, names in now.items() for n in names}
            deleted.extend(sorted(ever - present - finished - set(deleted)))
            ever.update(present)
            worst["a"] = max(worst["a"], len(now["a"]))
            worst["b"] = max(worst["b"], len(now["b"]))
            worst["total"] = max(worst["total"], len(now["a"]) + len(now["b"]))
            await asyncio.sleep(0.1)

    watcher = asyncio.create_task(kubelet_and_watch())
    try:
        # a borrows everything while b is idle
        await create_pods(admin, [gpu_pod(f"a{i}", "a") for i in range(8)])
        await wait_for(lambda: _count(admin, "a", 8), 60, what="team a holds all 8 GPUs")

        async def status_used(ns, want):
            eq = await admin.get(f"{EQ_API}/namespaces/{ns}/elasticquotas/{ns}-quota")
            used = (eq.get("status") or {}).get("used") or {}
            return used if str(used.get(GPU)) == want else None
        used = await wait_for(lambda: status_used("a", "8"), 30, what="a's status.used reads 8 GPUs")
        assert used["cpu"] == "800m", used

        # b takes its guarantee back from a's borrowed GPUs: exactly 4, all a's
        await create_pods(admin, [gpu_pod(f"b{i}", "b") for i in range(4)])

        async def settled():
            now = await held(admin)
            return now if len(now["b"]) == 4 and len(now["a"]) == 4 else None
        now = await wait_for(settled, 90, what="b holds its 4 GPUs and a keeps 4")
        assert sorted(now["b"]) == ["b0", "b1", "b2", "b3"]

        async def watched_all():   # the watcher polls: let it see the deletions settled() saw
            return len(deleted) >= 4
        await wait_for(watched_all, 10, what="the watcher records the 4 victims")
        assert len(deleted) == 4 and all(d.startswith("a/") for d in deleted), deleted
        await wait_for(lambda: status_used("b", "4"), 30, what="b's status.used reads 4 GPUs")
        await wait_for(lambda: status_used("a", "4"), 30, what="a's status.used back to 4 GPUs")

        # a fifth b pod would borrow from a's guarantee: it waits, nothing is preempted
        await create_pods(admin, [gpu_pod("b4", "b")])
        pending_msg = await wait_for(lambda: _failed_message(admin, "b", "b4"), 30, what="b4's FailedScheduling")
        assert "total ElasticQuota used is more than min" in pending_msg, pending_msg
        await asyncio.sleep(2)
        assert len(deleted) == 4, deleted
        finished.add("b/b4")
        await force_delete(admin, "b", "b4")

        # a gang of a: no room while b holds its guarantee, so none of it binds
        await create_podgroup(admin, podgroup("job", "a", 3))
        await create_pods(admin, [gpu_pod(f"m{i}", "a", labels={LABEL: "job"}) for i in range(3)])
        await asyncio.sleep(4)
        now = await held(admin)
        assert not [n for n in now["a"] if n.startswith("m")], now
        assert len(deleted) == 4, deleted

        # b's pods finish: the gang is admitted whole
        for i in range(4):
            finished.add(f"b/b{i}")
            await force_delete(admin, "b", f"b{i}")

        async def gang_whole():
            now = await held(admin)
            return now if sorted(n for n in now["a"] if n.startswith("m")) == ["m0", "m1", "m2"] else None
        await wait_for(gang_whole, 60, what="the gang of a bound whole")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert worst["a"] <= 8 and worst["b"] <= 8 and worst["total"] <= 8, worst
    assert await sched.metric("pysched_quota_min", quota="a/a-quota", resource=GPU) == 4
    assert await sched.metric("pysched_quota_preemption_victims_total", quota="a/a-quota", reason="reclaim") == 4
    assert sched.terminate() == 0, sched.log()[-3000:]


async def _count(admin, ns: str, n: int) -> bool:
    return len((await held(admin))[ns]) == n


async def _failed_message(admin, ns: str, name: str) -> str | None:
    events, _ = await admin.list_all(f"/api/v1/namespaces/{ns}/events",
                                     {"fieldSelector": f"involvedObject.name={name},reason=FailedScheduling"})
    return events[0].get("message") if events else None


async def test_a_gang_inside_its_quota_reclaims_with_the_documented_plugin_order(admin, scheduler_factory):
    """Team f (min = max = 6 CPU) submits a PodGroup of 3 x 2 CPU while team g borrows 2 CPU of
    the 8 (it holds 4 with a min of 2). The third member fits nowhere: CapacityScheduling reclaims
    g's borrowed pod and the gang binds whole - with ``postFilter: [Coscheduling,
    CapacityScheduling]`` as the docs and the kustomize component list them. (There, Coscheduling's
    PostFilter released the two waiting members first and its preemption gate then saw 0 of 3:
    the reclaim was vetoed on every retry and the gang never ran.)"""
    await install_crd(admin)
    await install_quota_crd(admin)
    await create_nodes(admin, [make_node(f"n{i}", cpu="4", memory="64Gi") for i in range(2)])
    await create_quota(admin, "f", {"cpu": "6"}, {"cpu": "6"})
    await create_quota(admin, "g", {"cpu": "2"}, {"cpu": "8"})
    assert quota_config()["profiles"][0]["plugins"]["postFilter"]["enabled"][0] == {"name": "Coscheduling"}
    sched = scheduler_factory(quota_config()).start()
    await sched.wait_log("caches synced", 60)

    async def on_nodes(ns: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in await list_pods(admin, ns)
                      if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))

    async def kubelet():
        while True:
            for ns in ("f", "g"):
                await finish_terminating(admin, ns)
            await asyncio.sleep(0.1)

    watcher = asyncio.create_task(kubelet())
    try:
        await create_pods(admin, [make_pod(f"g{i}", namespace="g", cpu="2", memory="1Gi") for i in range(2)])

        async def g_runs():
            return len(await on_nodes("g")) == 2
        await wait_for(g_runs, 60, what="team g holds 4 CPU")
        await create_podgroup(admin, podgroup("job", "f", 3))
        await create_pods(admin, [make_pod(f"m{i}", namespace="f", cpu="2", memory="1Gi", labels={LABEL: "job"})
                                  for i in range(3)])

        async def gang_whole():
            return await on_nodes("f") == ["m0", "m1", "m2"]
        await wait_for(gang_whole, 60, what="the gang of f bound whole")
        assert len(await on_nodes("g")) == 1          # exactly g's borrowed 2 CPU reclaimed
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert await sched.metric("pysched_quota_preemption_victims_total", quota="g/g-quota", reason="reclaim") == 1
    assert sched.terminate() == 0, sched.log()[-3000:]
