"""Events against a real kube-apiserver: nothing dropped under a burst, series instead of copies,
client-go's retry policy, and shutdown accounting.

The first tests drive an ``EventRecorder`` in-process with its own client (so a test can stop the
API server under it or give it a tiny rate limit); the last two run the scheduler as deployed
and count the Events kube-scheduler would have posted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import pytest

from pysched.client.auth import load_kubeconfig
from pysched.client.events import EventRecorder
from pysched.client.rest import KubeClient
from pysched.framework.podinfo import PodInfo
from pysched.metrics import METRICS
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .conftest import scheduler_config, wait_for

pytestmark = pytest.mark.e2e

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def fake_pod(name: str, rv: str = "1") -> PodInfo:
    """A pod as the recorder sees it; the API does not require the regarding object to exist."""
    p = make_pod(name)
    p["metadata"].update(uid=f"uid-{name}", resourceVersion=rv)
    return PodInfo.from_dict(p)


def sample(name: str, **labels) -> float:
    return METRICS.registry.get_sample_value(name, labels) or 0.0


def total(name: str) -> float:
    """The sum over every label set of a counter in this process."""
    return sum(s.value for fam in METRICS.registry.collect() for s in fam.samples if s.name == name)


def scheduled(rec: EventRecorder, pod: PodInfo, node: str = "n1") -> None:
    rec.record(pod, controller="pysched", type_="Normal", reason="Scheduled", action="Binding",
               note=f"Successfully assigned {pod.namespace}/{pod.name} to {node}")


def failed(rec: EventRecorder, pod: PodInfo, note: str = "0/1 nodes are available: 1 Insufficient cpu.") -> None:
    rec.record(pod, controller="pysched", type_="Warning", reason="FailedScheduling", action="Scheduling", note=note)


async def our_events(admin, reason: str | None = None) -> list[dict]:
    items, _ = await admin.list_all(EVENTS)
    return [e for e in items if e.get("reportingController") == "pysched" and (reason is None or e["reason"] == reason)]


def count_of(ev: dict) -> int:
    return (ev.get("series") or {}).get("count") or 1


@contextlib.asynccontextmanager
async def recorder(control_plane, *, qps: float = 100, burst: int = 100, **kw):
    client = KubeClient(load_kubeconfig(control_plane.kubeconfig), qps=qps, burst=burst, max_connections=8)
    rec = EventRecorder(client, instance="test", **kw)
    rec.start()
    try:
        yield rec
    finally:
        await rec.stop(drain=0)
        await client.close()


async def settled(rec: EventRecorder, timeout: float = 120.0) -> None:
    async def done():
        return rec.backlog.pending == 0
    await wait_for(done, timeout, what=f"the event backlog to drain (pending={rec.backlog.pending})")


# -- in-process recorder --------------------------------------------------------------------------


async def test_a_burst_far_beyond_the_old_queue_is_posted_in_full(control_plane, admin):
    # 1,500 distinct events at once on a 100 qps client: the old bounded queue (1,000) dropped 500.
    n = 1500
    async with recorder(control_plane, qps=100, burst=100) as rec:
        for i in range(n):
            scheduled(rec, fake_pod(f"burst-{i:04d}"))
        assert rec.backlog.pending == n and rec.dropped == 0
        await settled(rec)
        assert rec.dropped == 0 and rec.posted == n
    events = await our_events(admin, "Scheduled")
    per_pod = collections.Counter(e["regarding"]["name"] for e in events)
    assert len(per_pod) == n and set(per_pod.values()) == {1}
    assert all("series" not in e for e in events)
    e = next(e for e in events if e["regarding"]["name"] == "burst-0007")
    assert e["note"] == "Successfully assigned default/burst-0007 to n1"
    assert e["type"] == "Normal" and e["action"] == "Binding" and e["reportingInstance"] == "pysched-test"
    assert e["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "burst-0007",
                              "uid": "uid-burst-0007", "resourceVersion": "1"}


async def test_while_the_scheduler_has_a_backlog_events_yield_to_binds_and_none_is_lost(control_plane, admin):
    """``defer_while``: with pods waiting and binds in flight only a few workers write (binds get the
    API server first); Events keep coming meanwhile, and the rest catch up once the backlog is gone."""
    busy = [True]
    in_flight, peak = [0], {True: 0, False: 0}
    async with recorder(control_plane, qps=1000, burst=1000, workers=8) as rec:
        rec.defer_while(lambda: busy[0], workers=1)
        create = rec.client.create_event

        async def counting(*a, **kw):
            phase = busy[0]
            in_flight[0] += 1
            peak[phase] = max(peak[phase], in_flight[0])
            try:
                return await create(*a, **kw)
            finally:
                in_flight[0] -= 1

        rec.client.create_event = counting
        for i in range(300):
            scheduled(rec, fake_pod(f"yield-{i:03d}"))

        async def some_written():
            return rec.posted >= 20
        await wait_for(some_written, 60, what="events written while busy")
        assert peak[True] == 1                   # one writer while the scheduler is busy
        busy[0] = False
        await settled(rec)
        assert rec.posted == 300 and rec.dropped == 0
        assert peak[False] > 1                   # every worker again
    ours = [e for e in await our_events(admin, "Scheduled") if e["regarding"]["name"].startswith("yield-")]
    assert len(ours) == 300


async def test_repeats_become_one_object_with_a_series_and_a_new_resource_version_a_new_object(control_plane, admin):
    pod = fake_pod("stuck", rv="10")
    async with recorder(control_plane, series_interval=0.2) as rec:
        failed(rec, pod)
        await settled(rec)
        for i in range(5):
            failed(rec, pod, note=f"a different message {i}")  # the note is not part of the key
        await settled(rec)
        failed(rec, fake_pod("stuck", rv="11"))                # the pod changed: a new Event, as upstream
        await settled(rec)
        assert rec.aggregated == 5 and rec.dropped == 0
    events = sorted(await our_events(admin, "FailedScheduling"), key=lambda e: e["regarding"]["resourceVersion"])
    assert [(e["regarding"]["resourceVersion"], count_of(e)) for e in events] == [("10", 6), ("11", 1)]
    assert events[0]["note"] == "0/1 nodes are available: 1 Insufficient cpu."


async def test_a_series_whose_event_was_deleted_is_created_again(control_plane, admin):
    pod = fake_pod("gone")
    async with recorder(control_plane) as rec:
        failed(rec, pod)
        await settled(rec)
        [ev] = await our_events(admin)
        await admin.request("DELETE", f"{EVENTS}/{ev['metadata']['name']}")
        before = sample("pysched_events_post_errors_total", code="404")
        failed(rec, pod)                                  # count 2: PATCH answers 404, so create
        await settled(rec)
        assert rec.dropped == 0
    assert sample("pysched_events_post_errors_total", code="404") == before  # handled, not a failure
    [again] = await our_events(admin)
    assert again["metadata"]["name"] == ev["metadata"]["name"] and again["series"]["count"] == 2


async def test_a_rejected_event_is_dropped_without_retrying(control_plane, admin):
    before = sample("pysched_events_post_errors_total", code="422")
    rejected = sample("pysched_events_dropped_total", reason="rejected")
    async with recorder(control_plane, retry_interval=0.05) as rec:
        failed(rec, fake_pod("chatty"), note="x" * 2000)  # the API allows 1024 bytes
        scheduled(rec, fake_pod("fine"))
        await settled(rec)
        await asyncio.sleep(0.5)                          # time enough for retries, had there been any
        assert rec.posted == 1 and rec.dropped == 1 and rec.backlog.tracked == 1
    assert sample("pysched_events_post_errors_total", code="422") - before == 1
    assert sample("pysched_events_dropped_total", reason="rejected") - rejected == 1
    assert [e["regarding"]["name"] for e in await our_events(admin)] == ["fine"]


async def test_writes_are_retried_while_the_api_server_is_down(control_plane, admin):
    async with recorder(control_plane, retry_interval=1.0, max_tries=120) as rec:
        await asyncio.to_thread(control_plane.stop_apiserver)
        for i in range(20):
            scheduled(rec, fake_pod(f"outage-{i}"))

        errors = total("pysched_events_post_errors_total")

        async def failing():
            return total("pysched_events_post_errors_total") - errors >= 40
        await wait_for(failing, 60, what="failed attempts while the API server is down")
        assert rec.posted == 0 and rec.dropped == 0
        await asyncio.to_thread(control_plane.restart_apiserver, 120.0)
        await settled(rec)
        assert rec.posted == 20 and rec.dropped == 0
    assert len(await our_events(admin, "Scheduled")) == 20


async def test_writes_are_dropped_after_the_last_try(control_plane):
    exhausted = sample("pysched_events_dropped_total", reason="retries_exhausted")
    async with recorder(control_plane, retry_interval=0.05, max_tries=3) as rec:
        await asyncio.to_thread(control_plane.stop_apiserver)
        for i in range(5):
            scheduled(rec, fake_pod(f"lost-{i}"))
        await settled(rec, 30)
        assert rec.posted == 0 and rec.dropped == 5 and rec.backlog.tracked == 0
    assert sample("pysched_events_dropped_total", reason="retries_exhausted") - exhausted == 5


async def test_a_full_backlog_drops_the_oldest_and_counts_it(control_plane, admin):
    full = sample("pysched_events_dropped_total", reason="backlog_full")
    async with recorder(control_plane, qps=20, burst=1, limit=50, workers=1) as rec:
        for i in range(80):
            scheduled(rec, fake_pod(f"cap-{i:02d}"))
        assert rec.backlog.tracked == 50 and rec.dropped == 30   # nothing was written yet
        await settled(rec)
        assert rec.posted == 50 and rec.dropped == 30
    assert sample("pysched_events_dropped_total", reason="backlog_full") - full == 30
    names = sorted(e["regarding"]["name"] for e in await our_events(admin))
    assert names == [f"cap-{i:02d}" for i in range(30, 80)]  # the oldest waiting ones went


async def test_stop_writes_last_series_counts_and_counts_what_it_could_not_flush(control_plane, admin):
    shutdown = sample("pysched_events_dropped_total", reason="shutdown")
    client = KubeClient(load_kubeconfig(control_plane.kubeconfig), qps=100, burst=100)
    rec = EventRecorder(client, instance="test", series_interval=3600)
    rec.start()
    pod = fake_pod("series")
    for _ in range(2):
        failed(rec, pod)
    await settled(rec)
    for _ in range(3):
        failed(rec, pod)                      # count 5, waiting for a sync an hour away
    await rec.stop(drain=10)
    assert rec.dropped == 0
    [ev] = await our_events(admin)
    assert ev["series"]["count"] == 5

    await client.close()

    client = KubeClient(load_kubeconfig(control_plane.kubeconfig), qps=10, burst=1)
    slow = EventRecorder(client, instance="test", workers=1)
    slow.start()
    for i in range(100):
        scheduled(slow, fake_pod(f"late-{i:03d}"))
    await slow.stop(drain=1.0)
    scheduled(slow, fake_pod("after-stop"))   # recording after stop is a counted drop too
    assert slow.posted > 0 and slow.dropped > 0 and slow.posted + slow.dropped == 101
    assert sample("pysched_events_dropped_total", reason="shutdown") - shutdown == slow.dropped
    assert slow.backlog.pending == 0
    late = await our_events(admin, "Scheduled")
    assert slow.posted <= len(late) <= slow.posted + 1   # one cancelled write may still have landed
    await client.close()


# -- the scheduler as deployed --------------------------------------------------------------------


async def test_burst_of_2000_pods_gets_one_scheduled_event_each(admin, scheduler_factory):
    # The manifests' client settings: events share nothing with binds but their qps/burst.
    await create_nodes(admin, [make_node(f"n{i:02d}", cpu="8", memory="64Gi") for i in range(50)])
    sched = scheduler_factory(scheduler_config(clientConnection={"qps": 50, "burst": 100})).start()
    await sched.wait_log("caches synced")
    pods = await create_pods(admin, [make_pod(f"b-{i:04d}", cpu="50m", memory="64Mi") for i in range(2000)],
                             concurrency=64)
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}

    async def all_bound():
        items = await list_pods(admin, "default")
        nodes = {p["metadata"]["uid"]: p["spec"].get("nodeName") for p in items}
        return nodes if len(nodes) == 2000 and all(nodes.values()) else None
    nodes = await wait_for(all_bound, 300, interval=2, what="2000 pods bound")

    async def all_events():
        evs = await our_events(admin, "Scheduled")
        return evs if sum(count_of(e) for e in evs) >= 2000 else None
    events = await wait_for(all_events, 300, interval=2, what="a Scheduled event per pod")
    per_pod = collections.Counter(e["regarding"]["uid"] for e in events)
    assert set(per_pod) == set(uids) and set(per_pod.values()) == {1}
    assert all(count_of(e) == 1 for e in events)
    for e in events:
        uid = e["regarding"]["uid"]
        assert e["note"] == f"Successfully assigned default/{uids[uid]} to {nodes[uid]}"
    dropped = 0.0
    for reason in ("backlog_full", "rejected", "retries_exhausted", "shutdown"):
        dropped += await sched.metric("pysched_events_dropped_total", reason=reason) or 0.0
    assert dropped == 0
    assert await sched.metric("pysched_events_posted_total", type="Normal", reason="Scheduled",
                              operation="create") == 2000
    assert await sched.metric("pysched_events_backlog") == 0
    sched.terminate()


async def test_unschedulable_pod_retried_many_times_keeps_one_event_per_version(admin, scheduler_factory):
    await create_nodes(admin, [make_node("small", cpu="2")])
    cfg = scheduler_config(podInitialBackoffSeconds=1, podMaxBackoffSeconds=1)
    sched = scheduler_factory(cfg).start()
    await sched.wait_log("caches synced")
    await create_pods(admin, [make_pod("stuck", cpu="4")])

    async def attempts():
        return await sched.metric("scheduler_schedule_attempts_total", result="unschedulable", profile="pysched") or 0

    async def failed_events():
        return sorted(await our_events(admin, "FailedScheduling"), key=lambda e: e["metadata"]["creationTimestamp"])

    async def retry():
        # Deleting a bound pod frees resources: NodeResourcesFit requeues the stuck pod.
        before = await attempts()
        name = f"churn-{before:.0f}"
        await create_pods(admin, [make_pod(name, cpu="100m", node_name="small", scheduler="other")])
        await admin.request("DELETE", f"/api/v1/namespaces/default/pods/{name}", params={"gracePeriodSeconds": "0"})

        async def more():
            return await attempts() > before
        await wait_for(more, 30, what="another scheduling attempt")

    async def all_counted():
        n, evs = await attempts(), await failed_events()
        return (n, evs) if n and sum(count_of(e) for e in evs) == n else None

    await wait_for(attempts, 30, what="first attempt")
    for _ in range(4):
        await retry()
    n_mid, evs_mid = await wait_for(all_counted, 60, what="series counts for every attempt")
    for _ in range(4):
        await retry()
    n_end, evs_end = await wait_for(all_counted, 60, what="series counts for every attempt")
    assert n_end >= 9 and n_end > n_mid
    # One Event object per isomorphic key: the regarding pod's resourceVersion changes when the
    # PodScheduled condition is first written, as with kube-scheduler; after that the repeats
    # are one object whose series count grows.
    versions = [e["regarding"]["resourceVersion"] for e in evs_end]
    assert len(versions) == len(set(versions)) and len(evs_end) <= 3 < n_end
    mid = {e["metadata"]["name"]: count_of(e) for e in evs_mid}
    assert count_of(evs_end[-1]) > mid.get(evs_end[-1]["metadata"]["name"], 0)
    pod = await admin.get("/api/v1/namespaces/default/pods/stuck")
    assert evs_end[-1]["regarding"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert (await sched.metric("pysched_events_aggregated_total", type="Warning", reason="FailedScheduling")
            == n_end - len(evs_end))
    sched.terminate()
