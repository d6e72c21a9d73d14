"""DefaultPreemption against a real kube-apiserver: the minimal victims on the best node are
marked and deleted, the preemptor is nominated and binds there once they are gone; a PDB steers
the choice; ``preemptionPolicy: Never`` does not preempt; two preemptors never nominate the same
room. Victims stay terminating until the test finalizes them (no kubelet: see preemption_kit)."""

from __future__ import annotations

import pytest

from pysched_dev.devcluster import binaries_version
from pysched_dev.testkit import create_nodes, create_pods, make_node, pod_scheduled_condition
from tests.differential import no_claims_verdict

from .conftest import scheduler_config, wait_for
from .preemption_kit import (
    create_pdb,
    create_priority_classes,
    disruption_target,
    events_about,
    finish_terminating,
    pods_by_name,
    prio_pod,
)

pytestmark = pytest.mark.e2e

CLASSES = {"p1": 1, "p2": 2, "p5": 5, "p10": 10, "p20": 20, "p50": 50, "p100": 100, "never100": 100}


async def setup(admin, nodes, victims):
    await create_priority_classes(admin, CLASSES, never=("never100",))
    await create_nodes(admin, nodes)
    await create_pods(admin, victims)


async def test_preempts_minimal_victims_on_the_best_node_and_binds_there(admin, scheduler_factory):
    await setup(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")],
                [prio_pod("low-a", "p10", 10, cpu="1", node="n1"), prio_pod("low-b", "p5", 5, cpu="1", node="n1"),
                 prio_pod("mid", "p20", 20, cpu="2", node="n2")])
    sched = scheduler_factory().start()
    await create_pods(admin, [prio_pod("high", "p100", 100, cpu="1")])

    async def preempted():
        pods = await pods_by_name(admin)
        return pods if pods["high"]["status"].get("nominatedNodeName") and \
            pods["low-b"]["metadata"].get("deletionTimestamp") else None

    pods = await wait_for(preempted, 60, what="high nominated and low-b terminating")
    high = pods["high"]
    assert high["status"]["nominatedNodeName"] == "n1"
    assert not high["spec"].get("nodeName")
    # Only the minimal victim: low-a (more important) stays, n2's pod is untouched.
    assert not pods["low-a"]["metadata"].get("deletionTimestamp")
    assert not pods["mid"]["metadata"].get("deletionTimestamp")
    cond = disruption_target(pods["low-b"])
    assert cond is not None and cond["status"] == "True" and cond["reason"] == "PreemptionByScheduler"
    assert cond["message"] == "pysched: preempting to accommodate a higher priority pod"
    tail = (" preemption: found a potential placement for pod on node n1, preempting 1 victims"
            if binaries_version() >= (1, 37) else "")   # 1.37 says what the preemption did
    assert pod_scheduled_condition(high)["message"] == "0/2 nodes are available: 2 Insufficient cpu." + tail

    async def preempted_event():
        return await events_about(admin, pods["low-b"], "Preempted")
    ev = (await wait_for(preempted_event, 30, what="Preempted event"))[0]
    assert ev["type"] == "Normal" and ev["action"] == "Preempting"
    assert ev["note"] == f"Preempted by pod {high['metadata']['uid']} on node n1"
    if binaries_version() >= (1, 37):
        assert "related" not in ev   # as kube-scheduler 1.37's (its preemptor wrapper is no API type)
    else:
        assert ev["related"]["name"] == "high" and ev["related"]["uid"] == high["metadata"]["uid"]
    assert ev["reportingController"] == "pysched"

    # The victim is still terminating: the preemptor waits for it.
    assert not (await pods_by_name(admin))["high"]["spec"].get("nodeName")
    assert await finish_terminating(admin) == ["low-b"]

    async def bound():
        return (await pods_by_name(admin))["high"]["spec"].get("nodeName")
    assert await wait_for(bound, 60, what="high bound") == "n1"
    assert await sched.metric("scheduler_preemption_attempts_total") >= 1
    assert await sched.metric("scheduler_preemption_victims_count") == 1


async def test_pdb_steers_the_choice(admin, scheduler_factory):
    # Without budgets n1 wins (its victim has the lowest priority); a's budget allows no
    # disruption, so n2's victim goes instead.
    await setup(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")],
                [prio_pod("a", "p1", 1, cpu="2", node="n1", labels={"app": "a"}),
                 prio_pod("b", "p5", 5, cpu="2", node="n2", labels={"app": "b"})])
    await create_pdb(admin, "protect-a", {"app": "a"}, 0)
    scheduler_factory().start()
    await create_pods(admin, [prio_pod("high", "p100", 100, cpu="2")])

    async def preempted():
        pods = await pods_by_name(admin)
        victims = [n for n in ("a", "b") if pods[n]["metadata"].get("deletionTimestamp")]
        nominated = pods["high"]["status"].get("nominatedNodeName")
        return (nominated, victims) if victims and nominated else None
    assert await wait_for(preempted, 60, what="a victim terminating") == ("n2", ["b"])


async def test_never_policy_does_not_preempt(admin, scheduler_factory):
    await setup(admin, [make_node("n1", cpu="1")], [prio_pod("low", "p1", 1, cpu="1", node="n1")])
    scheduler_factory().start()
    await create_pods(admin, [prio_pod("polite", "never100", 100, cpu="1")])

    async def failed():
        cond = pod_scheduled_condition((await pods_by_name(admin))["polite"])
        return cond if cond and cond.get("reason") == "Unschedulable" else None
    cond = await wait_for(failed, 60, what="polite unschedulable")
    assert cond["message"] == (f"0/1 nodes are available: 1 Insufficient cpu. {no_claims_verdict()}"
                               "preemption: not eligible due to preemptionPolicy=Never.")
    pods = await pods_by_name(admin)
    assert not pods["low"]["metadata"].get("deletionTimestamp") and disruption_target(pods["low"]) is None
    assert not pods["polite"]["status"].get("nominatedNodeName")


async def test_two_preemptors_do_not_nominate_the_same_room(admin, scheduler_factory):
    await setup(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")],
                [prio_pod("v1", "p1", 1, cpu="2", node="n1"), prio_pod("v2", "p2", 2, cpu="2", node="n2")])
    scheduler_factory().start()
    await create_pods(admin, [prio_pod("h1", "p100", 100, cpu="2"), prio_pod("h2", "p100", 100, cpu="2")])

    async def both_nominated():
        pods = await pods_by_name(admin)
        nn = {pods[h]["status"].get("nominatedNodeName") for h in ("h1", "h2")}
        gone = all(pods[v]["metadata"].get("deletionTimestamp") for v in ("v1", "v2"))
        return pods if None not in nn and len(nn) == 2 and gone else None
    pods = await wait_for(both_nominated, 60, what="both preemptors nominated")
    assert {pods["h1"]["status"]["nominatedNodeName"], pods["h2"]["status"]["nominatedNodeName"]} == {"n1", "n2"}
    assert await finish_terminating(admin) == ["v1", "v2"]

    async def both_bound():
        pods = await pods_by_name(admin)
        nodes = {h: pods[h]["spec"].get("nodeName") for h in ("h1", "h2")}
        return nodes if all(nodes.values()) else None
    nodes = await wait_for(both_bound, 60, what="both preemptors bound")
    assert nodes == {h: pods[h]["status"]["nominatedNodeName"] for h in ("h1", "h2")}


async def test_preempt_extender_narrows_the_candidates(admin, scheduler_factory):
    """An extender with ``preemptVerb`` gets every candidate with its victims (UIDs: it is
    nodeCacheCapable) and keeps only n2, which our own order ranks below n1."""
    from aiohttp import web

    from pysched_dev.devcluster import free_port

    seen: list[dict] = []

    async def preempt(request):
        body = await request.json()
        seen.append(body)
        victims = body["NodeNameToMetaVictims"]
        return web.json_response({"NodeNameToMetaVictims": {"n2": victims["n2"]}})

    app = web.Application()
    app.router.add_post("/ext/preempt", preempt)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await setup(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")],
                    [prio_pod("a", "p1", 1, cpu="2", node="n1"), prio_pod("b", "p5", 5, cpu="2", node="n2")])
        cfg = scheduler_config(extenders=[{"urlPrefix": f"http://127.0.0.1:{port}/ext", "preemptVerb": "preempt",
                                           "nodeCacheCapable": True}])
        scheduler_factory(cfg).start()
        await create_pods(admin, [prio_pod("high", "p100", 100, cpu="2")])

        async def preempted():
            pods = await pods_by_name(admin)
            return pods if pods["high"]["status"].get("nominatedNodeName") and \
                pods["b"]["metadata"].get("deletionTimestamp") else None
        pods = await wait_for(preempted, 60, what="high nominated, b terminating")
        assert pods["high"]["status"]["nominatedNodeName"] == "n2"
        assert not pods["a"]["metadata"].get("deletionTimestamp")
        sent = seen[0]["NodeNameToMetaVictims"]
        assert sent == {"n1": {"Pods": [{"UID": pods["a"]["metadata"]["uid"]}], "NumPDBViolations": 0},
                        "n2": {"Pods": [{"UID": pods["b"]["metadata"]["uid"]}], "NumPDBViolations": 0}}
        assert seen[0]["Pod"]["metadata"]["name"] == "high"
    finally:
        await runner.cleanup()


async def test_victim_delete_names_the_pod_by_uid(admin):
    """A victim's name may belong to a new pod by the time the delete goes out (a StatefulSet
    recreates it): the delete carries the victim's UID, so the new pod is not touched."""
    from pysched.client.rest import ApiError
    from pysched_dev.testkit import make_pod
    await create_pods(admin, [make_pod("web-0")])
    live = await admin.request("GET", "/api/v1/namespaces/default/pods/web-0")
    with pytest.raises(ApiError) as exc:
        await admin.delete_pod("default", "web-0", uid="00000000-0000-0000-0000-000000000000")
    assert exc.value.status == 409
    assert (await admin.request("GET", "/api/v1/namespaces/default/pods/web-0"))["metadata"]["uid"] == live[
        "metadata"]["uid"]
    await admin.delete_pod("default", "web-0", uid=live["metadata"]["uid"])
    with pytest.raises(ApiError) as exc:       # never scheduled: the API server removes it at once
        await admin.request("GET", "/api/v1/namespaces/default/pods/web-0")
    assert exc.value.status == 404
