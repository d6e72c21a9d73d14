"""The same preemption through kube-scheduler 1.35 and through pysched, one scheduler at a time on
one API server: the same nominated node, the same victims (a PDB and reprieve decide them), the
same DisruptionTarget condition and Preempted event, and the preemptor bound to the same node."""

from __future__ import annotations

import pytest

from pysched_dev.devcluster import KubeSchedulerProcess, binaries_version
from pysched_dev.testkit import create_nodes, create_pods, make_node, pod_scheduled_condition

from .conftest import scheduler_config, wait_for
from .preemption_kit import (
    condition_shape,
    create_pdb,
    create_priority_classes,
    delete_all_pods,
    disruption_target,
    event_shape,
    events_about,
    finish_terminating,
    pods_by_name,
    prio_pod,
)

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

CLASSES = {"p1": 1, "p2": 2, "p5": 5, "p10": 10, "p20": 20, "p30": 30, "p100": 100}


def scenario() -> list[dict]:
    """n1: the preemptor fits by evicting v1 (priority 10). n2: v3 (priority 1) alone, but a PDB
    protects it. n3: v4 (30) is reprieved, v5 (1) and v6 (2) go - highest victim priority 2.
    Without the PDB n2 would win (1); with it n3 does, over n1 (10)."""
    return [prio_pod("v1", "p10", 10, cpu="1", node="n1"), prio_pod("v2", "p20", 20, cpu="1", node="n1"),
            prio_pod("v3", "p1", 1, cpu="2", node="n2", labels={"app": "protected"}),
            prio_pod("v4", "p30", 30, cpu="1", node="n3"), prio_pod("v5", "p1", 1, cpu="500m", node="n3"),
            prio_pod("v6", "p2", 2, cpu="500m", node="n3")]


async def run_once(admin, start_scheduler) -> dict:
    await create_pods(admin, scenario())
    sched = start_scheduler()
    try:
        await create_pods(admin, [prio_pod("high", "p100", 100, cpu="1")])

        async def preempted():
            pods = await pods_by_name(admin)
            victims = sorted(n for n, p in pods.items() if p["metadata"].get("deletionTimestamp"))
            return pods if pods["high"]["status"].get("nominatedNodeName") and len(victims) >= 2 else None
        pods = await wait_for(preempted, 90, what="preemption")
        high = pods["high"]
        victims = sorted(n for n, p in pods.items() if p["metadata"].get("deletionTimestamp"))

        async def preempted_events():
            evs = {v: await events_about(admin, pods[v], "Preempted") for v in victims}
            return evs if all(evs.values()) else None
        evs = await wait_for(preempted_events, 30, what="Preempted events")
        result = {
            "nominated": high["status"]["nominatedNodeName"],
            "victims": victims,
            "marked": sorted(n for n, p in pods.items() if disruption_target(p) is not None),
            "conditions": {v: condition_shape(disruption_target(pods[v])) for v in victims},
            "events": {v: event_shape(evs[v][0], high) for v in victims},
            "failed_message": (pod_scheduled_condition(high) or {}).get("message"),
        }
        await finish_terminating(admin)

        async def bound():
            return (await pods_by_name(admin))["high"]["spec"].get("nodeName")
        result["bound"] = await wait_for(bound, 60, what="preemptor bound")
        return result
    finally:
        if isinstance(sched, KubeSchedulerProcess):
            sched.stop()
        else:
            sched.terminate()


async def test_same_node_victims_condition_and_event_as_kube_scheduler(control_plane, admin, scheduler_factory):
    await create_priority_classes(admin, CLASSES)
    await create_nodes(admin, [make_node(f"n{i}", cpu="2") for i in (1, 2, 3)])
    await create_pdb(admin, "protect", {"app": "protected"}, 0)
    # kube-scheduler with a profile named like ours: the pods are the same objects for both.
    kube = await run_once(admin, lambda: KubeSchedulerProcess(
        control_plane, {"profiles": [{"schedulerName": "pysched"}]}).start())
    await delete_all_pods(admin)

    async def empty():
        return not await pods_by_name(admin)
    await wait_for(empty, 30, what="pods gone")
    ours = await run_once(admin, lambda: scheduler_factory(scheduler_config()).start())
    # The scenario is what we think it is, and every compared field was really written.
    assert kube["nominated"] == "n3" and kube["victims"] == kube["marked"] == ["v5", "v6"]
    tail = (" preemption: found a potential placement for pod on node n3, preempting 2 victims"
            if binaries_version() >= (1, 37) else "")   # 1.37 says what the preemption did
    assert kube["failed_message"] == "0/3 nodes are available: 3 Insufficient cpu." + tail
    assert kube["conditions"]["v5"]["reason"] == "PreemptionByScheduler" and kube["events"]["v6"]["note"]
    assert ours == kube
