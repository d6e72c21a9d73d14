"""The controllers' work queue: coalescing per key, one worker per key at a time, backoff on retry."""

from __future__ import annotations

import asyncio

from pysched.controllers.workqueue import WorkQueue


async def test_adds_coalesce_until_taken():
    q = WorkQueue(qps=0)
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a" and await q.get() == "b"
    assert len(q) == 0


async def test_key_added_while_processing_comes_back_once_after_done():
    q = WorkQueue(qps=0)
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0            # not handed to a second worker while the first holds it
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"


async def test_retry_backs_off_exponentially_and_forget_resets():
    q = WorkQueue(qps=0, base_delay=0.01, max_delay=0.04)
    assert [q.retry("a") for _ in range(4)] == [0.01, 0.02, 0.04, 0.04]
    q.forget("a")
    assert q.retry("a") == 0.01
    assert await asyncio.wait_for(q.get(), 5) == "a"
    q.close()
