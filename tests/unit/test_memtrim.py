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
    # many medium blocks (below glibc's mmap threshold: they live in the heap), the last one kept
    # so the heap cannot shrink from its top by itself
    blocks = [bytearray(64 * 1024) for _ in range(800)]      # about 50 MiB
    keep = bytearray(1024)
    del blocks
    before = _rss_kib()
    assert memtrim.trim() is True
    after = _rss_kib()
    assert before - after > 1024, (before, after)        # at least a MiB of free heap went back
    del keep
