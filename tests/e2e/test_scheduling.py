"""The scheduler against a real kube-apiserver: binds, capacity, requeueing, crash recovery."""

from __future__ import annotations

import collections

import pytest

from pysched.apis.core.quantity import resource_value
from pysched.apis.core.resources import pod_requests
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition
from tests.differential import no_claims_verdict

from .conftest import scheduler_config, wait_for

pytestmark = pytest.mark.e2e


def node_usage(nodes: list[dict], pods: list[dict]) -> dict[str, dict[str, int]]:
    used: dict[str, collections.Counter] = {n["metadata"]["name"]: collections.Counter() for n in nodes}
    for p in pods:
        nn = p["spec"].get("nodeName")
        if nn and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used.setdefault(nn, collections.Counter()).update(pod_requests(p["spec"]))
            used[nn]["pods"] += 1
    return used


async def assert_no_overcommit(admin) -> None:
    nodes, _ = await admin.list_all("/api/v1/nodes")
    pods = await list_pods(admin)
    usage = node_usage(nodes, pods)
    for n in nodes:
        alloc = {k: resource_value(k, v) for k, v in n["status"]["allocatable"].items()}
        for res, amount in usage[n["metadata"]["name"]].items():
            assert amount <= alloc.get(res, 0), \
                f"{n['metadata']['name']} overcommitted on {res}: {amount} > {alloc.get(res, 0)}"


async def events_for(admin, name: str, reason: str | None = None) -> list[dict]:
    data = await admin.get("/api/v1/namespaces/default/events",
                           {"fieldSelector": f"involvedObject.name={name}"})
    return [e for e in data["items"] if reason is None or e.get("reason") == reason]


async def test_binds_only_our_pending_pods_to_feasible_nodes(admin, scheduler_factory):
    await create_nodes(admin, [
        make_node("n-ssd", cpu="4", labels={"disk": "ssd"}),
        make_node("n-hdd", cpu="4", labels={"disk": "hdd"}),
        make_node("n-gpu", cpu="4", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
    ])
    ours = [make_pod(f"ours-{i}", cpu="200m") for i in range(4)]
    ours.append(make_pod("ssd-only", node_selector={"disk": "ssd"}))
    ours.append(make_pod("tolerates-gpu", tolerations=[{"key": "gpu", "operator": "Exists"}],
                         node_selector={"kubernetes.io/hostname": "n-gpu"}))
    others = [make_pod("other-sched", scheduler="someone-else"),
              make_pod("preset-node", node_name="n-hdd")]  # has our schedulerName but nodeName is set
    await create_pods(admin, ours + others)

    sched = scheduler_factory().start()

    async def all_bound():
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        return pods if all(pods[p["metadata"]["name"]]["spec"].get("nodeName") for p in ours) else None

    pods = await wait_for(all_bound, 60, what="our pods bound")
    assert pods["ssd-only"]["spec"]["nodeName"] == "n-ssd"
    assert pods["tolerates-gpu"]["spec"]["nodeName"] == "n-gpu"
    for i in range(4):
        assert pods[f"ours-{i}"]["spec"]["nodeName"] in ("n-ssd", "n-hdd")  # never the tainted node
    assert pods["preset-node"]["spec"]["nodeName"] == "n-hdd"
    other = pods["other-sched"]
    assert not other["spec"].get("nodeName") and pod_scheduled_condition(other) is None
    assert await events_for(admin, "other-sched") == []
    ev = await wait_for(lambda: events_for(admin, "ssd-only", "Scheduled"), 20, what="Scheduled event")
    assert ev[0]["message"] == "Successfully assigned default/ssd-only to n-ssd"
    assert ev[0]["type"] == "Normal" and ev[0]["reportingComponent"] == "pysched"
    assert "Successfully assigned" not in "".join(e["message"] for e in await events_for(admin, "preset-node"))
    sched.terminate()


async def test_burst_fills_exactly_to_capacity_and_reports_the_rest(admin, scheduler_factory):
    # 12 nodes x 3 CPU = 36 CPU; another client already bound 6 x 1 CPU. 30 CPU left = 300 pods of 100m.
    await create_nodes(admin, [make_node(f"n{i:02d}", cpu="3", memory="64Gi") for i in range(12)])
    await create_pods(admin, [make_pod(f"pre-{i}", cpu="1", memory="1Gi", node_name=f"n{i:02d}", scheduler="other")
                              for i in range(6)])
    burst = [make_pod(f"b-{i:03d}", cpu="100m", memory="100Mi") for i in range(330)]
    await create_pods(admin, burst)
    sched = scheduler_factory().start()

    async def settled():
        pods = [p for p in await list_pods(admin, "default") if p["metadata"]["name"].startswith("b-")]
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [p for p in pods if not p["spec"].get("nodeName")
                   and (pod_scheduled_condition(p) or {}).get("reason") == "Unschedulable"]
        return (bound, pending) if len(bound) + len(pending) == 330 else None

    bound, pending = await wait_for(settled, 120, what="330 pods bound or marked unschedulable")
    assert len(bound) == 300 and len(pending) == 30
    await assert_no_overcommit(admin)
    cond = pod_scheduled_condition(pending[0])
    assert cond["status"] == "False"
    # DefaultPreemption's verdict ends the message: every pod has the same priority (0).
    expected = (f"0/12 nodes are available: 12 Insufficient cpu. {no_claims_verdict()}"
                "preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod.")
    assert cond["message"] == expected
    name = pending[0]["metadata"]["name"]
    ev = await wait_for(lambda: events_for(admin, name, "FailedScheduling"), 20, what="FailedScheduling event")
    assert ev[0]["type"] == "Warning" and ev[0]["message"] == expected
    sched.terminate()


async def test_unschedulable_pod_is_retried_on_node_add_and_pod_delete(admin, scheduler_factory):
    await create_nodes(admin, [make_node("first", cpu="1")])
    await create_pods(admin, [make_pod("blocker", cpu="800m")])
    sched = scheduler_factory().start()

    async def bound(name):
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        p = pods.get(name)
        return p["spec"].get("nodeName") if p else None

    async def unschedulable(name):
        for p in await list_pods(admin, "default"):
            if p["metadata"]["name"] == name:
                return (pod_scheduled_condition(p) or {}).get("reason") == "Unschedulable"
        return False

    assert await wait_for(lambda: bound("blocker"), 60) == "first"
    await create_pods(admin, [make_pod("waits-for-node", cpu="800m")])
    await wait_for(lambda: unschedulable("waits-for-node"), 30, what="waits-for-node unschedulable")
    await create_nodes(admin, [make_node("second", cpu="1")])
    # The 5-minute leftover flush cannot explain a bind within 20s: the NodeAdd event did it.
    assert await wait_for(lambda: bound("waits-for-node"), 20, what="bind after node add") == "second"

    await create_pods(admin, [make_pod("waits-for-delete", cpu="800m")])
    await wait_for(lambda: unschedulable("waits-for-delete"), 30, what="waits-for-delete unschedulable")
    await admin.request("DELETE", "/api/v1/namespaces/default/pods/blocker", params={"gracePeriodSeconds": "0"})
    assert await wait_for(lambda: bound("waits-for-delete"), 20, what="bind after pod delete") == "first"
    sched.terminate()


async def test_kill_mid_burst_and_restart_loses_and_double_books_nothing(admin, scheduler_factory):
    await create_nodes(admin, [make_node(f"n{i:02d}", cpu="2", memory="64Gi") for i in range(20)])
    await create_pods(admin, [make_pod(f"p-{i:03d}", cpu="100m", memory="64Mi") for i in range(400)])  # exactly full
    # The first replica is throttled to 20 writes/s so the burst lasts ~20s and the kill lands in
    # the middle of it on any machine; unthrottled it can bind all 400 between two polls.
    slow = scheduler_config(clientConnection={"qps": 20, "burst": 20})
    first = scheduler_factory(slow, name="first").start()

    async def count_bound():
        return sum(1 for p in await list_pods(admin, "default") if p["spec"].get("nodeName"))

    await wait_for(lambda: _at_least(count_bound, 60), 120, interval=0.05, what="some pods bound")
    first.kill()
    after_kill = await count_bound()
    assert after_kill < 400, "the first scheduler finished before it could be killed; the test proves nothing"
    second = scheduler_factory(name="second").start()
    await wait_for(lambda: _at_least(count_bound, 400), 120, what="all 400 pods bound after restart")
    pods = await list_pods(admin, "default")
    assert len(pods) == 400 and len({p["metadata"]["uid"] for p in pods}) == 400
    await assert_no_overcommit(admin)
    per_node = collections.Counter(p["spec"]["nodeName"] for p in pods)
    assert all(v == 20 for v in per_node.values()) and len(per_node) == 20
    second.terminate()


async def _at_least(fn, n):
    v = await fn()
    return v if v >= n else None


async def test_two_profiles_in_one_process(admin, scheduler_factory):
    await create_nodes(admin, [make_node("x", cpu="4"), make_node("y", cpu="4")])
    cfg = scheduler_config(profiles=[
        {"schedulerName": "pysched"},
        {"schedulerName": "packer", "pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "MostAllocated"}}}]}])
    await create_pods(admin, [make_pod(f"spread-{i}", cpu="500m") for i in range(4)]
                      + [make_pod(f"pack-{i}", cpu="500m", scheduler="packer") for i in range(4)])
    sched = scheduler_factory(cfg).start()

    async def all_bound():
        pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, "default")}
        return pods if all(pods.values()) else None

    placed = await wait_for(all_bound, 60, what="both profiles bound their pods")
    packed = collections.Counter(placed[f"pack-{i}"] for i in range(4))
    assert len(packed) == 1, f"MostAllocated should bin-pack: {packed}"
    ev = await wait_for(lambda: events_for(admin, "pack-0", "Scheduled"), 20, what="packer event")
    assert ev[0]["reportingComponent"] == "packer"
    sched.terminate()
