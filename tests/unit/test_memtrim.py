"""memtrim: the C heap's free pages go back to the OS after a large allocation is freed (glibc)."""

from __future__ import annotations

import platform

import pytest

from pysched.util import memtrim


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_trim_returns_freed_heap_memory():
    assert memtrim.available()
    # many medium blocks (below glibc's mmap threshold: they live in the heap), every other one
    # kept: the freed ones are holes inside the heap, which cannot shrink from its top by itself
    blocks = [bytearray(64 * 1024) for _ in range(800)]      # about 50 MiB
    keep = blocks[1::2]
    del blocks
    before = _rss_kib()
    assert memtrim.trim() is True
    after = _rss_kib()
    assert before - after > 1024, (before, after)        # at least a MiB of free heap went back
    del keep


def test_trims_after_each_relist_and_every_period_not_after_the_first_lists():
    sched = memtrim.TrimSchedule(every=60.0, now=1000.0)
    assert not sched.due(lists=1, now=1001.0)        # the first LISTs coming in
    assert not sched.due(lists=2, now=1002.0)
    assert sched.due(lists=3, now=1003.0)            # a re-list
    assert not sched.due(lists=3, now=1004.0)
    assert not sched.due(lists=3, now=1062.0)        # the period restarted at the re-list's trim
    assert sched.due(lists=3, now=1063.0)
    assert not sched.due(lists=3, now=1064.0)
    assert sched.due(lists=3, now=1123.5)
