"""A cancel is never lost, and shutdown ends every task even one that swallowed it.

On Python 3.11, ``asyncio.wait_for`` returns the result instead of raising when the thing it
awaits finishes in the same loop step the caller is cancelled. A cancelled informer then went on
listing and watching, and shutdown waited for it forever (a scheduler that never exited). Each
test below finishes the awaited thing and cancels the caller in one synchronous step: with
``wait_for`` the caller carries on, with ``asyncio.timeout`` it is cancelled.
"""

import asyncio
import logging
import math

import pytest

from pysched.client.httppool import HTTPPool
from pysched.client.leaderelection import LeaderElector
from pysched.client.objectstore import ObjectStore
from pysched.framework.interface import WaitingPod
from pysched.framework.loadmetrics import MetricProviderArgs
from pysched.framework.podinfo import PodInfo
from pysched.loadmetrics.collector import LoadCollector
from pysched.util.eventloop import cancel_and_wait

from .conftest import node, pod
from .test_framework import offline
from .test_httppool import Server, reply


async def steps(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def assert_cancelled(task: asyncio.Task) -> None:
    """The task ends cancelled. One that lost the cancel may run on for ever (a renew loop), so
    the wait is bounded (a liveness bound, not a speed check) and the task is stopped after."""
    await asyncio.wait([task], timeout=10)
    lost = not task.cancelled()
    await cancel_and_wait([task])
    assert not lost, "the cancel was lost: the task carried on"


async def test_a_cancel_landing_as_the_connection_opens_stops_the_request():
    async with Server(reply(b"{}")) as srv:
        pool = HTTPPool(srv.url(), None, limit=4)
        loop = asyncio.get_running_loop()
        opened, gate = loop.create_future(), loop.create_future()
        connect = pool._connect

        async def gated_connect():
            conn = await connect()
            opened.set_result(conn)
            await gate
            return conn
        pool._connect = gated_connect
        task = asyncio.create_task(pool.request("GET", "/api/v1/nodes", {}))
        conn = await opened
        gate.set_result(None)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)    # let a wrongly sent request reach the server
        assert srv.requests == []
        conn.close()
        await pool.close()


async def test_a_cancel_landing_as_the_store_changes_is_not_lost():
    store = ObjectStore()
    task = asyncio.create_task(store.changed(30))
    await steps()
    store.add({"kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"}})
    task.cancel()
    await assert_cancelled(task)


async def test_a_cancel_landing_as_the_permit_is_given_is_not_lost():
    sched = offline({}, [])
    sched.add_node(node("n1"))
    fwk = sched.frameworks["pysched"]
    p = PodInfo.from_dict(pod("p"))
    wp = WaitingPod(pod=p, pending={"Gate"})
    fwk.handle.waiting_pods[p.uid] = wp
    task = asyncio.create_task(fwk.wait_on_permit(p, 30))
    await steps()
    wp.allow("Gate")
    task.cancel()
    await assert_cancelled(task)
    assert p.uid not in fwk.handle.waiting_pods


class _GatedSource:
    label = "gated"

    def __init__(self):
        self.gate = asyncio.get_running_loop().create_future()

    async def fetch(self, queries):
        await self.gate
        return {q: {} for q in queries}

    async def close(self):
        pass


async def test_a_cancel_landing_as_a_metrics_answer_arrives_is_not_lost():
    c = LoadCollector()
    series = c.subscribe(MetricProviderArgs(address="http://127.0.0.1:1", timeout_seconds=30), "up", "up")
    p = next(iter(c.providers.values()))
    p.source = _GatedSource()
    version = series.version
    task = asyncio.create_task(c.fetch_round(p))
    await steps()
    p.source.gate.set_result(None)
    task.cancel()
    await assert_cancelled(task)
    assert series.version == version        # the answer was not applied after the cancel


async def test_a_cancel_landing_as_a_renewal_succeeds_is_not_lost():
    async def no_sleep(_):
        await asyncio.sleep(0)
    le = LeaderElector(None, namespace="default", name="lock", identity="me", clock=lambda: 0.0, sleep=no_sleep)
    le._last_renew = 0.0
    gate = asyncio.get_running_loop().create_future()
    renewing = asyncio.Event()

    async def renew():
        renewing.set()
        await gate
        return True
    le.try_acquire_or_renew = renew
    task = asyncio.create_task(le.renew_loop())
    await renewing.wait()
    gate.set_result(None)
    task.cancel()
    await assert_cancelled(task)


async def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_first_cancel():
    swallowed = []

    async def stubborn():
        try:
            await asyncio.sleep(math.inf)
        except asyncio.CancelledError:
            swallowed.append(1)         # lost, as wait_for loses one
        await asyncio.sleep(math.inf)

    async def failing():
        raise ValueError("boom")

    tasks = [asyncio.create_task(stubborn(), name="stubborn"), asyncio.create_task(failing(), name="failing")]
    await steps()
    assert await cancel_and_wait(tasks, grace=30, recancel=0.01) == []
    assert swallowed == [1] and all(t.done() for t in tasks)


async def test_cancel_and_wait_gives_up_after_the_grace_and_names_the_task(caplog):
    async def immortal():
        while True:
            try:
                await asyncio.sleep(math.inf)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(immortal(), name="immortal")
    await steps()
    with caplog.at_level(logging.ERROR, logger="pysched.util.eventloop"):
        assert await cancel_and_wait([task], grace=0.05, recancel=0.01) == [task]
    assert [r.kv["tasks"] for r in caplog.records] == ["immortal"]
    task.get_coro().close()   # the test's own clean-up: nothing else can end it
