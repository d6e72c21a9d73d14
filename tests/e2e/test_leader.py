"""LeaderElector on the real Lease API, with an injected monotonic clock (no sleeping on time)."""

from __future__ import annotations

import pytest

from pysched.client.leaderelection import LeaderElector

pytestmark = pytest.mark.e2e
PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/lock"


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def elector(admin, identity, clock):
    return LeaderElector(admin, namespace="default", name="lock", identity=identity, clock=clock,
                         lease_duration=15, renew_deadline=10, retry_period=2)


async def test_acquire_hold_expire_takeover(admin):
    ca, cb = Clock(), Clock()
    a, b = elector(admin, "a", ca), elector(admin, "b", cb)
    assert await a.try_acquire_or_renew()
    lease = await admin.get(PATH)
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseTransitions"] == 0
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert a.is_leader() and a.is_fresh()

    assert not await b.try_acquire_or_renew()      # held and, as b observes it, fresh
    cb.t += 14.9
    assert not await b.try_acquire_or_renew()      # b still sees the same record: 14.9s < 15s
    ca.t += 5
    assert await a.try_acquire_or_renew()          # a renews: the record changes
    cb.t += 1                                      # 15.9s since b first saw a's *old* record...
    assert not await b.try_acquire_or_renew()      # ...but the record changed, so b's clock restarts
    cb.t += 15.1                                   # a stopped renewing; b waits a full leaseDuration
    assert await b.try_acquire_or_renew()
    lease = await admin.get(PATH)
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    # a's optimistic update now conflicts (resourceVersion moved) and a sees b's fresh record
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader() and not a.is_fresh()


async def test_a_holder_is_given_the_lease_duration_it_wrote_not_ours(admin):
    # A holder configured with a 60 s lease (another replica's settings, or an older release) must
    # not lose it to a candidate configured with 15 s after 15 s: client-go waits for the
    # leaseDurationSeconds in the record it observed.
    ca, cb = Clock(), Clock()
    a = LeaderElector(admin, namespace="default", name="lock", identity="a", clock=ca,
                      lease_duration=60, renew_deadline=40, retry_period=2)
    b = elector(admin, "b", cb)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    cb.t += 30
    assert not await b.try_acquire_or_renew()      # 30 s: past b's own 15 s, inside a's 60 s
    cb.t += 30.1
    assert await b.try_acquire_or_renew()          # 60.1 s without a change: a's lease ran out
    lease = await admin.get(PATH)
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseDurationSeconds"] == 15


async def test_fence_is_false_after_renew_deadline(admin):
    c = Clock()
    a = elector(admin, "a", c)
    assert await a.try_acquire_or_renew()
    c.t += 9.9
    assert a.is_fresh()
    c.t += 0.2
    assert a.is_leader() and not a.is_fresh()       # still holder on paper, but must not bind


async def test_release_lets_a_follower_take_over_at_once(admin):
    ca, cb = Clock(), Clock()
    a, b = elector(admin, "a", ca), elector(admin, "b", cb)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a.release()
    lease = await admin.get(PATH)
    assert lease["spec"]["holderIdentity"] == "" and lease["spec"]["leaseDurationSeconds"] == 1
    assert await b.try_acquire_or_renew()          # no waiting for leaseDuration
    assert (await admin.get(PATH))["spec"]["leaseTransitions"] == 1


async def test_acquire_time_kept_while_renewing(admin):
    c = Clock()
    a = elector(admin, "a", c)
    assert await a.try_acquire_or_renew()
    first = (await admin.get(PATH))["spec"]
    c.t += 2
    assert await a.try_acquire_or_renew()
    second = (await admin.get(PATH))["spec"]
    assert second["acquireTime"] == first["acquireTime"] and second["renewTime"] >= first["renewTime"]


def test_invalid_durations_rejected():
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="x", lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError):
        LeaderElector(None, namespace="n", name="x", lease_duration=15, renew_deadline=2, retry_period=2)


class SlowWrites:
    """The real client, but each Lease write takes ``delay`` seconds on the elector's clock (a slow
    API server, or a pause while the request is out)."""

    def __init__(self, client, clock, delay):
        self.client, self.clock, self.delay = client, clock, delay

    async def request(self, method, path, **kw):
        out = await self.client.request(method, path, **kw)
        if method != "GET":
            self.clock.t += self.delay
        return out


async def test_freshness_counts_from_when_the_renewal_was_sent_not_answered(admin):
    c = Clock()
    a = elector(admin, "a", c)
    a.client = SlowWrites(admin, c, delay=9.0)
    assert await a.try_acquire_or_renew()          # the write left at t and was answered at t+9
    assert a.is_fresh()
    c.t += 1.1
    # The API server may have recorded it (and a successor started counting) right after t:
    # 10.1s since it was sent is past renewDeadline, however recent the answer.
    assert a.is_leader() and not a.is_fresh()


async def test_renew_loop_gives_up_at_once_when_another_holder_is_seen(admin, caplog):
    ca, cb = Clock(), Clock()
    a, b = elector(admin, "a", ca), elector(admin, "b", cb)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    cb.t += 15.1                                   # a paused; b sees the record unchanged for leaseDuration
    assert await b.try_acquire_or_renew()
    attempts = []

    async def no_sleep(seconds):                   # a resumes: its sleeps are over at once
        ca.t += seconds

    async def counted():
        attempts.append(ca.t)
        return await type(a).try_acquire_or_renew(a)

    a.sleep = no_sleep
    a.try_acquire_or_renew = counted
    await a.renew_loop()                           # returns: the lease is lost
    assert len(attempts) == 1, "a kept retrying a lease it saw held by b"
    assert "held by another candidate" in caplog.text
    assert not a.is_fresh()
