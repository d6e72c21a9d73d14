"""`pysched extender` verbs: wire shapes, both node modes, validation of bad bodies, bind, preempt."""

from __future__ import annotations

import aiohttp
import orjson
import pytest
import pytest_asyncio

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.extender.server import NOT_IN_CACHE, ExtenderServer
from pysched.server.delegated_auth import AuthOptions
from pysched.server.delegated_auth import build as build_auth
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod

from .conftest import wait_for

pytestmark = pytest.mark.e2e
TAINT = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]


@pytest_asyncio.fixture
async def ext(control_plane, admin):
    await create_nodes(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2", taints=TAINT)])
    await create_pods(admin, [make_pod("victim", cpu="1500m", node_name="n1", scheduler="other")])
    app = SchedulerApp(configmod.default_config(), Options(kubeconfig=str(control_plane.kubeconfig), serve=False,
                                                           kopf=False, leader_elect=False),
                       load_kubeconfig(control_plane.kubeconfig))
    await app.start_informers()
    auth = await build_auth(AuthOptions(skip_lookup=True), load_kubeconfig(control_plane.kubeconfig))
    server = ExtenderServer(app, max_body=64 * 1024, bind_auth=auth)
    await server.start("127.0.0.1", 0, None)
    # bind/preempt need an authorized caller (test_delegated_auth): the admin's token
    session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}",
                                    headers={"Authorization": f"Bearer {control_plane.admin_token}"})
    try:
        yield app, session
    finally:
        await session.close()
        await server.stop()
        await app.shutdown()
        await auth.close()


def pod_obj(name="p", cpu="100m", **kw):
    p = make_pod(name, cpu=cpu, **kw)
    p["metadata"]["uid"] = f"uid-{name}"
    return p


async def post(session, verb, body, raw=False):
    data = body if raw else orjson.dumps(body)
    async with session.post(f"/{verb}", data=data) as r:
        text = await r.text()
        return r.status, (orjson.loads(text) if r.status == 200 else text)


async def test_filter_node_names_and_full_nodes(ext):
    app, s = ext
    status, res = await post(s, "filter", {"Pod": pod_obj(), "NodeNames": ["n1", "n2", "ghost"]})
    assert status == 200
    assert res["NodeNames"] == ["n1"] and res["Nodes"] is None and res["Error"] == ""
    assert res["FailedAndUnresolvableNodes"] == {"n2": "node(s) had untolerated taint(s)"}
    assert res["FailedNodes"] == {"ghost": NOT_IN_CACHE}
    status, res = await post(s, "filter", {"Pod": pod_obj(cpu="1"), "NodeNames": ["n1"]})
    assert res["NodeNames"] == [] and res["FailedNodes"] == {"n1": "Insufficient cpu"}   # 1.5 of 2 used
    nodes = {"apiVersion": "v1", "kind": "NodeList",
             "items": [make_node("n1", cpu="2"), make_node("n2", cpu="2", taints=TAINT)]}
    status, res = await post(s, "filter", {"Pod": pod_obj(), "Nodes": nodes})
    assert status == 200 and res["NodeNames"] is None
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["n1"]
    # Go field names match case-insensitively, as encoding/json does
    status, res = await post(s, "filter", {"pod": pod_obj(), "nodenames": ["n1"]})
    assert status == 200 and res["NodeNames"] == ["n1"]


async def test_prioritize_is_a_bare_list_of_0_to_10(ext):
    app, s = ext
    status, res = await post(s, "prioritize", {"Pod": pod_obj(), "NodeNames": ["n1", "n2"]})
    assert status == 200 and isinstance(res, list)
    assert {h["Host"] for h in res} == {"n1", "n2"}
    assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in res)
    by = {h["Host"]: h["Score"] for h in res}
    assert by["n2"] >= by["n1"]     # n1 is 75% allocated: LeastAllocated and friends prefer n2


@pytest.mark.parametrize("body,expected", [
    (b"this is not json", "request body is not valid JSON"),
    (b"", "request body is empty"),
    (b"[]", "ExtenderArgs: expected an object"),
    (b"{}", "ExtenderArgs.Pod: expected an object"),
    (orjson.dumps({"Pod": {"metadata": {}, "spec": {}}, "NodeNames": []}), "ExtenderArgs.Pod.metadata.name: required"),
    (orjson.dumps({"Pod": {"metadata": {"name": "x"}, "spec": {}}}), "one of Nodes or NodeNames is required"),
    (orjson.dumps({"Pod": {"metadata": {"name": "x"}, "spec": {}}, "NodeNames": "n1"}), "ExtenderArgs.NodeNames"),
    (orjson.dumps({"Pod": {"metadata": {"name": "x"}, "spec": {}}, "Nodes": {"items": [{}]}}),
     "ExtenderArgs.Nodes.items[0].metadata.name"),
    (b"{" + b'"a":' + b'"' + b"x" * 70000 + b'"}', "exceeds the limit"),
])
async def test_bad_bodies_get_400_naming_the_problem(ext, body, expected):
    app, s = ext
    for verb in ("filter", "prioritize"):
        status, text = await post(s, verb, body, raw=True)
        assert status == (413 if "limit" in expected else 400) and expected in text, (verb, text)


async def test_bind_and_its_errors(ext, admin):
    app, s = ext
    status, res = await post(s, "bind", {"PodName": "nope", "PodNamespace": "default", "PodUID": "u", "Node": "n1"})
    assert status == 200 and "not found" in res["Error"]
    status, text = await post(s, "bind", {"PodName": "x", "Node": "n1"})
    assert status == 400 and "ExtenderBindingArgs.PodNamespace: required" in text
    await create_pods(admin, [make_pod("bindme")])
    created = await admin.get("/api/v1/namespaces/default/pods/bindme")
    status, res = await post(s, "bind", {"PodName": "bindme", "PodNamespace": "default",
                                         "PodUID": created["metadata"]["uid"], "Node": "n2"})
    assert status == 200 and res == {"Error": ""}
    assert (await admin.get("/api/v1/namespaces/default/pods/bindme"))["spec"]["nodeName"] == "n2"


async def test_preempt_keeps_nodes_where_the_victims_make_room(ext, admin):
    app, s = ext
    await wait_for(lambda: _true(any(p.name == "victim" for p in app.cache.pods.values())), 20, what="victim cached")
    victim_uid = next(p.uid for p in app.cache.pods.values() if p.name == "victim")
    big = pod_obj("big", cpu="1")
    status, res = await post(s, "preempt", {"Pod": big, "NodeNameToMetaVictims": {
        "n1": {"Pods": [{"UID": victim_uid}], "NumPDBViolations": 0}}})
    assert status == 200 and res["NodeNameToMetaVictims"] == {"n1": {"Pods": [{"UID": victim_uid}],
                                                                      "NumPDBViolations": 0}}
    status, res = await post(s, "preempt", {"Pod": big, "NodeNameToMetaVictims": {"n1": {"Pods": []},
                                                                               "n1x": {"Pods": [{"UID": "nobody"}]}}})
    assert res["NodeNameToMetaVictims"] == {}            # no room without the victim; unknown node dropped
    assert any(p.name == "victim" for p in app.cache.nodes["n1"].pods.values())   # the simulation left no trace


async def _true(v):
    return v
