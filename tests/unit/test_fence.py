"""WriteFence: refuses writes unless fresh, tracks writes that went out, wakes waiters without spinning."""

import asyncio

import pytest

from pysched.client.fence import NotLeaderError, WriteFence
from pysched.client.rest import ApiError


def test_refuses_when_not_fresh_and_for_good_once_closed():
    fresh = {"v": True}
    f = WriteFence(lambda: fresh["v"])
    f.check()
    fresh["v"] = False
    with pytest.raises(NotLeaderError, match="leader lease is not fresh") as info:
        f.check()
    assert isinstance(info.value, ApiError) and info.value.status == 0  # callers that catch ApiError see it
    fresh["v"] = True
    f.close("leader election lost")
    with pytest.raises(NotLeaderError, match="leader election lost"):
        f.check()
    assert not f.allows() and f.refused == 2


async def test_tracks_the_tasks_whose_write_went_out():
    f = WriteFence(lambda: True)
    gate = asyncio.Event()

    async def write():
        f.check()
        f.sent()
        await gate.wait()
        f.finished()

    t = asyncio.create_task(write())
    await asyncio.sleep(0)
    assert f.in_flight == {t}
    gate.set()
    await t
    assert not f.in_flight


async def test_wait_allowed_sleeps_until_notified_and_returns_false_when_closed():
    fresh = {"v": False}
    f = WriteFence(lambda: fresh["v"])
    checks = 0

    def counted():
        nonlocal checks
        checks += 1
        return fresh["v"]

    f._fresh = counted
    waiter = asyncio.create_task(f.wait_allowed())
    for _ in range(50):
        await asyncio.sleep(0)
    assert not waiter.done() and checks == 1  # no spinning while nothing changes
    fresh["v"] = True
    f.notify()
    assert await waiter is True
    fresh["v"] = False
    closed = asyncio.create_task(f.wait_allowed())
    await asyncio.sleep(0)
    f.close("shutting down")
    assert await closed is False
