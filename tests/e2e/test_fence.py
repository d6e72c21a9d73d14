"""The write fence under a paused leader and a deep bind backlog, judged by the API server's audit log.

Two replicas at the manifests' settings (lease 15/10/2 s, qps 50, burst 100) and 50 nodes that
1,000 pods fill exactly. The leader assumes pods far faster than 50 binds/s, so hundreds of binds
queue in its client. It is paused (SIGSTOP: a GC pause, a VM freeze, CPU throttling) past its
lease, the follower takes over, and the old leader is resumed at once: every queued bind of the
old leader must be refused by its own fence. The audit log - the API server's record, not ours -
shows who sent which request when.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import os
import signal
import time

import pytest

from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .auditkit import audit_policy, audited_plane, ok
from .conftest import scheduler_config, wait_for
from .test_ha import LE, _at_least, _holder_is
from .test_ha import holder as _holder
from .test_scheduling import assert_no_overcommit

pytestmark = pytest.mark.e2e

LEASE_DURATION = datetime.timedelta(seconds=15)
AUDIT_POLICY = audit_policy(("", ["pods/binding"]), ("coordination.k8s.io", ["leases"]))


@pytest.fixture
def control_plane():
    """This module's control plane: one user per replica, and an audit log of binds and Lease writes."""
    yield from audited_plane(AUDIT_POLICY, extra_users=["r1", "r2"])


def _ts(event: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


async def _bound(admin) -> int:
    return sum(1 for p in await list_pods(admin, "default") if p["spec"].get("nodeName"))


async def _leader_and_follower(cp, admin, scheduler_factory, cfg1: dict, cfg2: dict):
    """r1 leads, r2 follows with its caches synced; each as its own API user."""
    r1, r2 = (scheduler_factory(cfg, name=n, kubeconfig=cp.kubeconfig_for_user(n), extra_args=["--identity", n])
              for n, cfg in (("r1", cfg1), ("r2", cfg2)))
    r1.start()
    assert await wait_for(lambda: _holder(admin), 60, what="r1 leads") == "r1"
    r2.start()
    await r2.wait_log("caches synced", 60)
    return r1, r2


async def test_paused_leader_sends_no_bind_after_its_lease_expired(control_plane, admin, scheduler_factory):
    cp = control_plane
    await create_nodes(admin, [make_node(f"n{i:02d}", cpu="2", memory="64Gi") for i in range(50)])
    cfg = scheduler_config(leaderElection=LE, clientConnection={"qps": 50, "burst": 100})
    r1, r2 = await _leader_and_follower(cp, admin, scheduler_factory, cfg, cfg)

    await create_pods(admin, [make_pod(f"p-{i:04d}", cpu="100m", memory="256Mi") for i in range(1000)])
    await wait_for(lambda: _at_least(lambda: _bound(admin), 100), 120, interval=0.05, what="binds under way")
    os.killpg(r1.proc.pid, signal.SIGSTOP)
    try:
        at_pause = await _bound(admin)
        assert at_pause < 900, "the backlog drained before the pause; the test proves nothing"
        await wait_for(lambda: _holder_is(admin, "r2"), 60, interval=0.1, what="r2 takes the lease")
    finally:
        os.killpg(r1.proc.pid, signal.SIGCONT)  # resumed right after the takeover

    # The old leader finds out it lost the lease and exits 1, as kube-scheduler does.
    deadline = time.monotonic() + 60
    while r1.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert r1.proc.returncode == 1, r1.log()[-3000:]
    assert "leader election lost" in r1.log()

    await wait_for(lambda: _at_least(lambda: _bound(admin), 1000), 180, what="all pods bound")
    await assert_no_overcommit(admin)
    pods = await list_pods(admin, "default")
    assert collections.Counter(p["spec"]["nodeName"] for p in pods) == {f"n{i:02d}": 20 for i in range(50)}

    events = cp.audit_events()
    binds = [e for e in events if (e.get("objectRef") or {}).get("subresource") == "binding"
             and e.get("stage") == "ResponseComplete"]
    lease_writes = [e for e in events if (e.get("objectRef") or {}).get("resource") == "leases" and ok(e)]
    r1_last_renew = max(_ts(e) for e in lease_writes if e["user"]["username"] == "r1")
    r2_acquired = min(_ts(e) for e in lease_writes if e["user"]["username"] == "r2")
    r1_binds = [e for e in binds if e["user"]["username"] == "r1"]
    assert r1_binds and len(r1_binds) < 1000
    late = [e for e in r1_binds if _ts(e) >= r1_last_renew + LEASE_DURATION or _ts(e) >= r2_acquired]
    assert not late, (f"{len(late)} binds from the old leader after its lease expired "
                      f"(last renewal {r1_last_renew}, r2 acquired {r2_acquired}): {late[:3]}")
    # Every pod bound exactly once: one successful binding per pod in the API server's own record.
    ok_per_pod = collections.Counter(e["objectRef"]["name"] for e in binds if ok(e))
    assert set(ok_per_pod) == {f"p-{i:04d}" for i in range(1000)}
    assert set(ok_per_pod.values()) == {1}
    print(f"bound before the pause: {at_pause}; binds by r1: {len(r1_binds)}, "
          f"by r2: {sum(1 for e in binds if e['user']['username'] == 'r2')}")


async def test_sigterm_with_a_deep_backlog_cancels_what_was_not_sent_and_hands_over_fast(
        control_plane, admin, scheduler_factory):
    cp = control_plane
    await create_nodes(admin, [make_node(f"n{i}", cpu="8") for i in range(5)])
    slow = scheduler_config(leaderElection=LE, clientConnection={"qps": 5, "burst": 5})
    r1, r2 = await _leader_and_follower(cp, admin, scheduler_factory, slow, scheduler_config(leaderElection=LE))
    await create_pods(admin, [make_pod(f"b-{i:03d}", cpu="100m", memory="64Mi") for i in range(300)])
    await wait_for(lambda: _at_least(lambda: _bound(admin), 5), 60, interval=0.05, what="binds under way")
    t = time.monotonic()
    os.killpg(r1.proc.pid, signal.SIGTERM)
    assert await wait_for(lambda: _holder_is(admin, "r2"), 30, interval=0.05, what="r2 leads") == "r2"
    handover = time.monotonic() - t
    assert r1.proc.wait(30) == 0
    log = r1.log()
    assert "cancelled binding cycles and API calls that had not been sent" in log
    assert "released leader lease" in log
    print(f"handover after SIGTERM with a backlog: {handover:.2f}s")
    assert handover <= 2 + 1.5, "handover should take about a retryPeriod, whatever the backlog"
    await wait_for(lambda: _at_least(lambda: _bound(admin), 300), 120, what="r2 binds the rest")
    binds = [e for e in cp.audit_events() if (e.get("objectRef") or {}).get("subresource") == "binding" and ok(e)]
    per_pod = collections.Counter(e["objectRef"]["name"] for e in binds)
    assert len(per_pod) == 300 and set(per_pod.values()) == {1}
    assert any(e["user"]["username"] == "r2" for e in binds)
    await assert_no_overcommit(admin)


class Freshness:
    """Stands in for the LeaderElector's ``is_fresh`` in an in-process app (the elector's own
    freshness rules have their tests in test_leader.py)."""

    def __init__(self) -> None:
        self.fresh = True
        self.checks = 0

    def __call__(self) -> bool:
        self.checks += 1
        return self.fresh


def _fenced(app) -> Freshness:
    fresh = Freshness()
    app.fence._fresh = fresh
    return fresh


async def test_not_fresh_the_loop_waits_without_spinning_and_resumes_on_renewal(control_plane, admin):
    from .inprocess import in_process_app

    app = await in_process_app(control_plane, scheduler_config())
    fresh = _fenced(app)
    fresh.fresh = False
    await create_nodes(admin, [make_node("a")])
    await create_pods(admin, [make_pod(f"w-{i}") for i in range(5)])
    task = asyncio.create_task(app.run())
    try:
        await wait_for(lambda: _synced(app), 30, what="informers synced")
        await wait_for(lambda: _pending(app, 5), 30, what="pods queued")
        checks = fresh.checks
        await asyncio.sleep(0.5)
        assert app.queue.scheduling_cycle == 0 and not app.cache.assumed   # not a single cycle ran
        assert fresh.checks - checks <= 2, "the loop polled the fence instead of waiting"
        fresh.fresh = True
        app.fence.notify()                                                  # a renewal
        await wait_for(lambda: _at_least(lambda: _bound(admin), 5), 30, what="bound after the renewal")
    finally:
        app.request_stop()
        await task


async def test_binds_queued_in_the_rate_limiter_are_refused_once_the_lease_is_not_fresh(control_plane, admin):
    """One bind per second: the rest wait in the client's rate limiter and must meet the fence
    when their token comes, not when they started waiting."""
    from .inprocess import in_process_app

    app = await in_process_app(control_plane, scheduler_config(clientConnection={"qps": 1, "burst": 1}))
    fresh = _fenced(app)
    await create_nodes(admin, [make_node("a")])
    task = asyncio.create_task(app.run())
    try:
        await wait_for(lambda: _synced(app), 30, what="informers synced")
        await create_pods(admin, [make_pod(f"q-{i}") for i in range(6)])
        await wait_for(lambda: _at_least(lambda: _bound(admin), 1), 30, what="the first bind")
        assert len(app.scheduler.binding_tasks) >= 3, "binds should be queued in the limiter"
        fresh.fresh = False
        await wait_for(lambda: _nothing_in_flight(app), 30, what="a bind already sent has landed")
        bound_then = await _bound(admin)
        await wait_for(lambda: _no_binding_tasks(app), 30, what="every queued bind met the fence")
        assert await _bound(admin) == bound_then, "a bind went out while the lease was not fresh"
        assert not app.cache.assumed and len(app.queue) == 6 - bound_then  # forgotten and queued again
        fresh.fresh = True
        app.fence.notify()
        await wait_for(lambda: _at_least(lambda: _bound(admin), 6), 60, what="all bound after the renewal")
    finally:
        app.request_stop()
        await task


async def _nothing_in_flight(app):
    return not app.fence.in_flight


async def _no_binding_tasks(app):
    return not app.scheduler.binding_tasks


async def _synced(app):
    return app.synced.is_set()


async def _pending(app, n):
    return len(app.queue) >= n
