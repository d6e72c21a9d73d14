"""The Reflector against a real kube-apiserver: list+watch, resume, 410 relist, synthetic deletes."""

from __future__ import annotations

import asyncio

import pytest

from pysched.client.auth import load_kubeconfig
from pysched.client.prefetch import ListPrefetch
from pysched.client.reflector import Reflector, _Relist
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane
from pysched_dev.testkit import create_pods, make_pod

from .conftest import wait_for

pytestmark = pytest.mark.e2e


class Recorder:
    def __init__(self):
        self.objs: dict[str, dict] = {}
        self.deleted: list[str] = []

    def upsert(self, obj):
        self.objs[obj["metadata"]["uid"]] = obj

    def delete(self, key, obj):
        self.objs.pop(key, None)
        self.deleted.append(key)


async def test_list_watch_and_synthetic_delete_after_gap(admin):
    await create_pods(admin, [make_pod(f"p{i}") for i in range(5)])
    rec = Recorder()
    r = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                  on_upsert=rec.upsert, on_delete=rec.delete, page_size=2)
    task = asyncio.create_task(r.run())
    await asyncio.wait_for(r.synced.wait(), 30)
    assert len(rec.objs) == 5 and r.lists == 1  # paginated list of 2 per page
    await create_pods(admin, [make_pod("late")])
    await wait_for(lambda: _has(rec, "late"), 20, what="watch ADDED")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    # While nobody watches, a pod disappears. A relist must report it deleted.
    victim = next(u for u, o in rec.objs.items() if o["metadata"]["name"] == "p0")
    await admin.request("DELETE", "/api/v1/namespaces/default/pods/p0", params={"gracePeriodSeconds": "0"})
    await r._list("resync")
    assert victim in rec.deleted and victim not in rec.objs
    assert len(rec.objs) == 5


async def test_expired_resource_version_forces_relist():
    # Without the watch cache for pods the watch is served by etcd, whose compaction expires
    # old resourceVersions exactly as a long disconnect does in a busy cluster.
    with ControlPlane(extra_apiserver_args=["--watch-cache-sizes=pods#0"]) as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await _expired_relist(admin, cp)
        finally:
            await admin.close()


async def _expired_relist(admin, control_plane):
    await create_pods(admin, [make_pod("x")])
    rec = Recorder()
    r = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                  on_upsert=rec.upsert, on_delete=rec.delete)
    await r._list("initial")
    r.resource_version = "1"
    control_plane.compact_etcd()  # now resourceVersion 1 is gone
    with pytest.raises(_Relist) as exc:
        await asyncio.wait_for(r._watch_loop(deadline=float("inf")), 30)
    assert exc.value.reason == "expired"
    # what run() does next: a LIST that does not depend on the expired resourceVersion
    await create_pods(admin, [make_pod("after")])
    await r._list(exc.value.reason)
    assert await _has(rec, "after") and r.resource_version != "1"


async def _has(rec, name):
    return any(o["metadata"]["name"] == name for o in rec.objs.values())


async def test_list_pages_reach_the_handlers_as_they_arrive(admin):
    """Each page is handed over before the next is requested, so a 10,000-pod LIST never holds
    every decoded pod at once; the relist diff still sees the whole list."""
    await create_pods(admin, [make_pod(f"pg{i}", namespace="default") for i in range(5)])
    requests_at_first_upsert: list[int] = []
    rec = Recorder()

    def upsert(obj):
        if not requests_at_first_upsert:
            requests_at_first_upsert.append(admin.requests_total)
        rec.upsert(obj)

    before = admin.requests_total
    r = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                  on_upsert=upsert, on_delete=rec.delete, page_size=2)
    await r._list("initial")
    assert requests_at_first_upsert == [before + 1]          # delivered after the first page
    assert admin.requests_total - before >= 3                   # 5+ pods, 2 per page
    assert {o["metadata"]["name"] for o in rec.objs.values()} >= {f"pg{i}" for i in range(5)}
    assert rec.deleted == []


async def test_an_object_delivered_before_a_failed_page_still_gets_its_delete(admin):
    """A LIST that fails after its first page has already delivered objects; one of them is deleted
    before the LIST is retried: the retry must report it deleted, or it would stay forever."""
    names = [f"fp{i}" for i in range(5)]
    await create_pods(admin, [make_pod(n, namespace="default") for n in names])
    rec = Recorder()
    r = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                  on_upsert=rec.upsert, on_delete=rec.delete, page_size=2)
    real = admin.list_pages

    async def fail_after_first_page(*args, **kwargs):
        async for page in real(*args, **kwargs):
            yield page
            raise ConnectionResetError("connection lost after the first page")

    admin.list_pages = fail_after_first_page
    try:
        with pytest.raises(ConnectionResetError):
            await r._list("initial")
    finally:
        del admin.list_pages
    delivered = {o["metadata"]["name"]: uid for uid, o in rec.objs.items()}
    assert delivered and len(delivered) <= 2
    gone_name, gone_uid = next(iter(delivered.items()))
    await admin.request("DELETE", f"/api/v1/namespaces/default/pods/{gone_name}",
                        params={"gracePeriodSeconds": "0"})
    await r._list("error")
    assert gone_uid in rec.deleted and gone_uid not in rec.objs


async def test_watch_resumes_without_relisting_unless_a_resync_period_is_set(admin):
    # The server ends each watch after 1 s; by default the reflector resumes from the last
    # resourceVersion and never LISTs again (client-go's behaviour: a re-list decodes the whole
    # cluster and, in the soak, raised the resident set each time).
    await create_pods(admin, [make_pod("w0")])
    rec = Recorder()
    r = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                  on_upsert=rec.upsert, on_delete=rec.delete, watch_timeout=1)
    task = asyncio.create_task(r.run())
    periodic = Reflector(admin, name="pods", path="/api/v1/namespaces/default/pods",
                         on_upsert=lambda o: None, on_delete=lambda k, o: None, watch_timeout=1,
                         resync_period=0.5)
    periodic_task = asyncio.create_task(periodic.run())
    try:
        await asyncio.wait_for(r.synced.wait(), 30)
        for i in range(1, 4):  # each pod created after at least one more watch has timed out
            await asyncio.sleep(1.5)
            await create_pods(admin, [make_pod(f"w{i}")])
            await wait_for(lambda i=i: _has(rec, f"w{i}"), 20, what=f"watch ADDED w{i}")
        assert r.lists == 1
        await wait_for(lambda: _true(periodic.lists >= 3), 20, what="deliberate re-lists with resync_period")
    finally:
        task.cancel()
        periodic_task.cancel()
        await asyncio.gather(task, periodic_task, return_exceptions=True)


async def _true(value: bool) -> bool:
    return value


async def test_a_prefetched_list_is_delivered_without_listing_again(admin, control_plane):
    """The CLI sends the first LISTs from a thread before the scheduler is imported: the reflector
    delivers those pages and asks the server for nothing more than the watch."""
    await create_pods(admin, [make_pod(f"pf{i}", namespace="default") for i in range(5)])
    path = "/api/v1/namespaces/default/pods"
    creds = load_kubeconfig(control_plane.kubeconfig)
    prefetch = ListPrefetch(creds, {"pods": (path, {})}, page_size=2).start()
    fut = prefetch.take("pods")
    assert fut is not None and prefetch.take("pods") is None   # taken once
    got = await asyncio.wrap_future(fut)
    assert len(got.pages) >= 3 and got.next_continue == "" and got.resource_version
    rec = Recorder()
    r = Reflector(admin, name="pods", path=path, on_upsert=rec.upsert, on_delete=rec.delete,
                  page_size=2, prefetched=_done(got))
    before = admin.requests_total
    await r._list("initial")
    assert admin.requests_total == before
    assert {o["metadata"]["name"] for o in rec.objs.values()} >= {f"pf{i}" for i in range(5)}
    assert r.resource_version == got.resource_version and got.pages == []   # pages dropped once decoded


async def test_a_prefetch_stopped_at_its_budget_is_continued_by_the_reflector(admin, control_plane):
    await create_pods(admin, [make_pod(f"pb{i}", namespace="default") for i in range(6)])
    path = "/api/v1/namespaces/default/pods"
    prefetch = ListPrefetch(load_kubeconfig(control_plane.kubeconfig), {"pods": (path, {})}, page_size=2,
                            byte_budget=1).start()
    got = await asyncio.wrap_future(prefetch.take("pods"))
    assert len(got.pages) == 1 and got.next_continue
    rec = Recorder()
    r = Reflector(admin, name="pods", path=path, on_upsert=rec.upsert, on_delete=rec.delete,
                  page_size=2, prefetched=_done(got))
    before = admin.requests_total
    await r._list("initial")
    assert admin.requests_total - before >= 2          # the rest of the LIST, from the continue token
    names = {o["metadata"]["name"] for o in rec.objs.values()}
    assert names >= {f"pb{i}" for i in range(6)}
    assert rec.deleted == []


async def test_a_failed_prefetch_falls_back_to_listing(admin, control_plane):
    await create_pods(admin, [make_pod("pz", namespace="default")])
    path = "/api/v1/namespaces/default/pods"
    # A field selector pods do not support: the API server answers 400.
    prefetch = ListPrefetch(load_kubeconfig(control_plane.kubeconfig),
                            {"pods": (path, {"fieldSelector": "spec.noSuchField=x"})}).start()
    fut = prefetch.take("pods")
    with pytest.raises(Exception, match="HTTP 400"):
        await asyncio.wrap_future(fut)
    rec = Recorder()
    r = Reflector(admin, name="pods", path=path, on_upsert=rec.upsert, on_delete=rec.delete, prefetched=fut)
    await r._list("initial")
    assert await _has(rec, "pz") and r.lists == 1


def _done(value):
    import concurrent.futures
    fut = concurrent.futures.Future()
    fut.set_result(value)
    return fut
