"""Condition writes to one object land in the order they were decided (client.conditionwriter)."""

from __future__ import annotations

import asyncio

from pysched.client.conditionwriter import OrderedConditionWriter


class SlowFirstClient:
    """An API server that answers the first PATCH last: the race the writer must not lose."""

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.calls = 0
        self.first_may_finish = asyncio.Event()

    async def request(self, method, path, body=None, content_type=None):
        self.calls += 1
        status = body["status"]["conditions"][0]["status"]
        if self.calls == 1:
            await self.first_may_finish.wait()
        self.applied.append(f"{path}={status}")


def spawner(tasks: set):
    def spawn(coro) -> bool:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        return True
    return spawn


async def test_the_last_decision_is_the_last_write_and_waiting_ones_are_coalesced():
    client, tasks = SlowFirstClient(), set()
    writer = OrderedConditionWriter(client, spawner(tasks))
    writer.queue("ns/g/u1", "/pg/g", {"type": "PodGroupScheduled", "status": "False"})
    await asyncio.sleep(0)                        # the False write is in flight (slow)
    writer.queue("ns/g/u1", "/pg/g", {"type": "PodGroupScheduled", "status": "False", "message": "again"})
    writer.queue("ns/g/u1", "/pg/g", {"type": "PodGroupScheduled", "status": "True"})
    writer.queue("ns/h/u2", "/pg/h", {"type": "PodGroupScheduled", "status": "True"})   # another group: not held
    await asyncio.sleep(0.01)
    assert client.applied == ["/pg/h=True"]
    assert writer.last_status("ns/g/u1") == "True"
    client.first_may_finish.set()
    await asyncio.gather(*tasks)
    assert client.applied == ["/pg/h=True", "/pg/g=False", "/pg/g=True"]     # False first, True last
    assert client.calls == 3                                                  # the second False coalesced
    assert not writer.sending and not writer.waiting


async def test_a_write_that_fails_does_not_stop_the_ones_behind_it():
    class Failing:
        def __init__(self) -> None:
            self.seen: list[str] = []

        async def request(self, method, path, body=None, content_type=None):
            self.seen.append(body["status"]["conditions"][0]["status"])
            if len(self.seen) == 1:
                raise RuntimeError("500")

    client, tasks = Failing(), set()
    writer = OrderedConditionWriter(client, spawner(tasks))
    writer.queue("k", "/p", {"status": "False"})
    await asyncio.sleep(0)                        # sent, and refused
    writer.queue("k", "/p", {"status": "True"})
    await asyncio.gather(*tasks)
    assert client.seen == ["False", "True"]
    assert not writer.sending
