"""PodStatusWriter: failed attempts' status patches coalesced per pod, kept behind the binds'
rate-limiter tokens, retried on 5xx, and never landing after the pod's binding (``settle``)."""

from __future__ import annotations

import asyncio

from pysched.apis.core.errors import ApiError
from pysched.client.rest import TokenBucket
from pysched.client.statuswriter import PodStatusWriter, merge_patch

from .livekit import until


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeClient:
    """Records each patch; ``hold`` blocks writes until set; ``errors`` are raised first, in order."""

    def __init__(self, qps: float = 0.0, burst: int = 100, clock=None) -> None:
        self.limiter = TokenBucket(qps, burst, clock=clock or FakeClock())
        self.sent: list[tuple[str, dict]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.errors: list[Exception] = []
        self.in_call = 0

    async def patch_pod_status(self, namespace, name, patch, *, rate_limit=True):
        assert rate_limit is False     # the writer takes its tokens itself
        self.in_call += 1
        try:
            await self.hold.wait()
            if self.errors:
                raise self.errors.pop(0)
            self.sent.append((f"{namespace}/{name}", patch))
        finally:
            self.in_call -= 1


def writer_for(client, **kw):
    tasks: set[asyncio.Task] = set()

    def spawn(coro):
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return True
    return PodStatusWriter(client, spawn, **kw), tasks


def condition(msg: str) -> dict:
    return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "message": msg}]}}


async def one_write_held(msg: str):
    """A writer whose first write (``condition(msg)`` for pod u1) is in flight and held there."""
    client = FakeClient()
    w, tasks = writer_for(client)
    client.hold.clear()
    w.queue("u1", "default", "p", condition(msg))
    await until(lambda: client.in_call == 1)
    return client, w, tasks


def test_merge_takes_the_newer_value_and_keeps_the_rest():
    older = {"status": {"conditions": [1], "nominatedNodeName": "a"}, "metadata": {"annotations": {"x": "1"}}}
    newer = {"status": {"conditions": [2]}, "metadata": {"annotations": {"y": "2"}}}
    assert merge_patch(older, newer) == {"status": {"conditions": [2], "nominatedNodeName": "a"},
                                         "metadata": {"annotations": {"x": "1", "y": "2"}}}


def test_a_storm_of_failures_costs_one_write_in_flight_and_one_waiting():
    async def main():
        client, w, tasks = await one_write_held("attempt 0")
        for i in range(1, 100):
            w.queue("u1", "default", "p", condition(f"attempt {i}"))
        await asyncio.sleep(0.01)
        assert client.in_call == 1            # never two writes of one pod at once
        client.hold.set()
        await until(lambda: not w.busy() and not tasks)
        assert [p["status"]["conditions"][0]["message"] for _, p in client.sent] == ["attempt 0", "attempt 99"]
    asyncio.run(main())


def test_settle_drops_the_waiting_condition_and_waits_for_the_one_sent():
    async def main():
        client, w, tasks = await one_write_held("first")
        w.queue("u1", "default", "p", condition("second"))
        w.queue("u1", "default", "p", {"metadata": {"annotations": {"explain": "x"}}})
        settling = asyncio.create_task(w.settle("u1"))
        await asyncio.sleep(0.01)
        assert not settling.done()            # the write already sent must land before the bind
        client.hold.set()
        await settling
        assert [p for _, p in client.sent][0] == condition("first")
        await until(lambda: not w.busy() and not tasks)
        # the condition waiting went unwritten; the annotation still went
        assert [p for _, p in client.sent] == [condition("first"), {"metadata": {"annotations": {"explain": "x"}}}]
    asyncio.run(main())


def test_writes_leave_the_binds_their_tokens():
    async def main():
        clock = FakeClock()
        client = FakeClient(qps=10, burst=20, clock=clock)
        client.limiter.tokens = 2.0           # binds took the rest
        w, tasks = writer_for(client, reserve=5, max_defer=3600)
        w.queue("u1", "default", "p", condition("x"))
        await asyncio.sleep(0.05)
        assert client.sent == [] and client.limiter.tokens == 2.0    # waits, takes nothing, owes nothing
        clock.now += 1.0                      # 10 more tokens: 7 to spare beyond the reserve
        await until(lambda: client.sent)
        assert 10.9 <= client.limiter.available() <= 11.0           # exactly one token taken
    asyncio.run(main())


def test_a_settled_write_waiting_for_its_token_is_not_sent():
    async def main():
        clock = FakeClock()
        client = FakeClient(qps=10, burst=20, clock=clock)
        client.limiter.tokens = 0.5           # no spare token, and max_defer 0: the writer takes one and waits
        w, tasks = writer_for(client, reserve=5, max_defer=0)
        w.queue("u1", "default", "p", condition("x"))
        await until(lambda: "u1" in w.taking)
        await w.settle("u1")
        await until(lambda: not tasks)
        assert client.sent == [] and client.limiter.tokens == 0.5    # the token was given back
    asyncio.run(main())


def test_retried_on_5xx_not_on_404_and_not_after_the_bind():
    async def main():
        client = FakeClient()
        w, tasks = writer_for(client, retry_base=0.01)
        client.errors = [ApiError(500, "InternalError")]
        w.queue("u1", "default", "p", condition("x"))
        await until(lambda: client.sent)
        assert client.sent == [("default/p", condition("x"))]

        client.sent.clear()
        client.errors = [ApiError(404, "NotFound")]
        w.queue("u2", "default", "gone", condition("x"))
        await until(lambda: not w.busy() and not tasks)
        await asyncio.sleep(0.05)
        assert client.sent == []               # the pod is gone: not retried

        w2, tasks2 = writer_for(client, retry_base=0.05)
        client.errors = [ApiError(503, "ServiceUnavailable")]
        w2.queue("u3", "default", "q", condition("x"))
        await until(lambda: "u3" in w2.retrying)
        await w2.settle("u3")                   # bound before the retry: nothing more to write
        await asyncio.sleep(0.15)
        assert client.sent == [] and not w2.busy()
    asyncio.run(main())
