"""Our scheduler calling external extenders that are slow, down, lying, answering garbage, or binding."""

from __future__ import annotations

import asyncio
import collections

import pytest
from aiohttp import web

from pysched_dev.devcluster import free_port
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import scheduler_config, wait_for
from .test_scheduling import events_for

pytestmark = pytest.mark.e2e
KINDS = ("slow", "down", "garbage", "liar", "bind")


class FakeExtenders:
    def __init__(self, admin):
        self.admin = admin
        self.calls: collections.Counter = collections.Counter()
        self.pods_seen: set[str] = set()

    def app(self) -> web.Application:
        a = web.Application()
        a.router.add_post("/slow/filter", self.slow_filter)
        a.router.add_post("/garbage/prioritize", self.garbage_prioritize)
        a.router.add_post("/liar/filter", self.liar_filter)
        a.router.add_post("/bind/bind", self.bind)
        return a

    def _seen(self, name, body):
        self.calls[name] += 1
        pod = body.get("Pod") or {}
        self.pods_seen.add(pod.get("metadata", {}).get("name", body.get("PodName", "")))

    async def slow_filter(self, request):
        body = await request.json()
        self._seen("slow", body)
        await asyncio.sleep(3)
        return web.json_response({"NodeNames": body["NodeNames"], "FailedNodes": {}, "Error": ""})

    async def garbage_prioritize(self, request):
        body = await request.json()
        self._seen("garbage", body)
        # the wrapped shape some Python extenders send: kube-scheduler cannot decode it
        return web.json_response({"HostPriorityList": [{"Host": n, "Score": 10} for n in body["NodeNames"]]})

    async def liar_filter(self, request):
        body = await request.json()
        self._seen("liar", body)
        return web.json_response({"NodeNames": ["ghost"], "FailedNodes": {}, "Error": ""})

    async def bind(self, request):
        body = await request.json()
        self._seen("bind", body)
        await self.admin.bind_pod(body["PodNamespace"], body["PodName"], body["PodUID"], body["Node"])
        return web.json_response({"Error": ""})


async def test_extender_failures_are_contained_and_nothing_binds_twice(admin, scheduler_factory):
    fake = FakeExtenders(admin)
    runner = web.AppRunner(fake.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    down = f"http://127.0.0.1:{free_port()}"
    extenders = [
        {"urlPrefix": f"{base}/slow", "filterVerb": "filter", "ignorable": True, "httpTimeout": "1s",
         "nodeCacheCapable": True, "managedResources": [{"name": "example.com/slow"}]},
        {"urlPrefix": down, "filterVerb": "filter", "nodeCacheCapable": True,
         "managedResources": [{"name": "example.com/down"}]},
        {"urlPrefix": f"{base}/garbage", "prioritizeVerb": "prioritize", "weight": 1, "nodeCacheCapable": True,
         "managedResources": [{"name": "example.com/garbage"}]},
        {"urlPrefix": f"{base}/liar", "filterVerb": "filter", "nodeCacheCapable": True,
         "managedResources": [{"name": "example.com/liar"}]},
        {"urlPrefix": f"{base}/bind", "bindVerb": "bind", "nodeCacheCapable": True,
         "managedResources": [{"name": "example.com/bind"}]},
    ]
    ext_res = {f"example.com/{k}": "10" for k in KINDS}
    await create_nodes(admin, [make_node("n1", extended=ext_res), make_node("n2", extended=ext_res)])
    await create_pods(admin, [make_pod(f"p-{k}", extended={f"example.com/{k}": "1"}) for k in KINDS]
                      + [make_pod("p-plain")])
    sched = scheduler_factory(scheduler_config(extenders=extenders)).start()
    try:
        async def settled():
            pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
            done = all(p["spec"].get("nodeName") or pod_scheduled_condition(p) for p in pods.values())
            return pods if done and len(pods) == 6 else None

        pods = await wait_for(settled, 90, what="every pod bound or failed")
        def node(n):
            return pods[n]["spec"].get("nodeName")
        assert node("p-slow") and node("p-garbage") and node("p-plain") and node("p-bind")
        assert not node("p-down") and not node("p-liar")
        down_cond = pod_scheduled_condition(pods["p-down"])
        assert down_cond["reason"] == "SchedulerError" and down in down_cond["message"]
        ev = await wait_for(lambda: events_for(admin, "p-down", "FailedScheduling"), 20, what="FailedScheduling")
        assert down in ev[0]["message"]
        assert "claims a filtered node 'ghost'" in pod_scheduled_condition(pods["p-liar"])["message"]
        log = sched.log()
        assert "skipping ignorable extender after an error" in log and f"{base}/slow" in log
        assert "extender prioritize failed; ignored" in log and "must be a bare JSON array" in log
        assert fake.calls["bind"] == 1 and "bind refused" not in log  # the extender bound it; we did not too
        assert "p-plain" not in fake.pods_seen   # managedResources: only pods that use them are sent
    finally:
        sched.terminate()
        await runner.cleanup()
