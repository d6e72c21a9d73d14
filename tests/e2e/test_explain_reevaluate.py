"""Explaining a pod that already failed, against the real API server and the scheduler process.

A pending pod that failed without asking sits in the unschedulable pool, where no cluster event
may come for minutes. Adding ``pysched.io/explain: "true"`` (a plain PATCH, as ``kubectl annotate``
sends) re-evaluates it at once: the explanation, with every node's verdict, is there within
seconds, and each request costs exactly one scheduling attempt - the scheduler's own explanation
write, unrelated updates and withdrawing the request cost none.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pysched_dev.testkit import create_nodes, make_node, make_pod, pod_scheduled_condition

from .conftest import scheduler_config, wait_for

pytestmark = pytest.mark.e2e
PODS = "/api/v1/namespaces/default/pods"
EXPLAIN, RESULT = "pysched.io/explain", "pysched.io/explanation"


async def annotate(admin, name: str, **annotations) -> None:
    await admin.request("PATCH", f"{PODS}/{name}", body={"metadata": {"annotations": annotations}},
                        content_type="application/merge-patch+json")


async def test_annotating_a_failed_pod_explains_it_within_seconds(control_plane, admin, scheduler_factory):
    await create_nodes(admin, [make_node(f"node-{i}", cpu="4", memory="16Gi") for i in range(3)])
    sched = scheduler_factory(scheduler_config()).start()
    await sched.wait_log("caches synced")

    async def attempts() -> float:
        return await sched.metric("scheduler_schedule_attempts_total", result="unschedulable",
                                  profile="pysched") or 0.0

    async def force_activated() -> float:
        return await sched.metric("scheduler_queue_incoming_pods_total", queue="active",
                                  event="ForceActivate") or 0.0

    await admin.request("POST", PODS, body=make_pod("late", cpu="40"))

    async def unschedulable():
        cond = pod_scheduled_condition(await admin.get(f"{PODS}/late"))
        return cond is not None and cond.get("reason") == "Unschedulable"
    await wait_for(unschedulable, 60, what="late rejected")
    assert await attempts() == 1
    status, _ = await sched.get("/debug/explain?pod=default/late")
    assert status == 404                  # it did not ask: no trace

    async def explanation():
        pod = await admin.get(f"{PODS}/late")
        value = (pod["metadata"].get("annotations") or {}).get(RESULT)
        return json.loads(value) if value else None

    await annotate(admin, "late", **{EXPLAIN: "true"})
    why = await wait_for(explanation, 10, what="explanation after the annotation")  # no node changed
    assert why["selectedNode"] is None and why["error"].startswith("0/3 nodes are available")
    assert why["filterRejections"] == {"NodeResourcesFit": {"Insufficient cpu": 3}}
    status, body = await sched.get("/debug/explain?pod=default/late")
    assert status == 200
    fit = next(f for f in json.loads(body)["filter"] if f["plugin"] == "NodeResourcesFit")
    assert fit["nodes"] == {f"node-{i}": "Insufficient cpu" for i in range(3)}
    assert await attempts() == 2 and await force_activated() == 1

    # The explanation write came back as an update already; these come after it, in order. None
    # but the last asks again, so exactly one more attempt follows, and nothing after it.
    await annotate(admin, "late", note="unrelated")
    await annotate(admin, "late", **{EXPLAIN: "false"})
    await annotate(admin, "late", **{EXPLAIN: "true"})

    async def asked_again():
        return await attempts() >= 3
    await wait_for(asked_again, 10, what="a re-evaluation for the second request")
    await asyncio.sleep(2)                # room for a retry storm to show; none may
    assert await attempts() == 3 and await force_activated() == 2

    # A pod that asked but has had no cycle yet (held by its scheduling gate): /debug/explain says
    # where it waits instead of "no explanation".
    await admin.request("POST", PODS, body=make_pod("gated", gates=["example.com/hold"],
                                                    annotations={EXPLAIN: "true"}))

    async def gated():
        status, body = await sched.get("/debug/explain?pod=default/gated")
        return json.loads(body) if status == 202 else None
    waiting = await wait_for(gated, 30, what="gated pod known to the scheduler")
    assert waiting["reevaluating"] is True and waiting["gatingPlugin"] == "SchedulingGates"
    assert waiting["queue"] == "unschedulable"
