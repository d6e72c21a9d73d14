"""Give the C heap's free memory back to the operating system (glibc ``malloc_trim``).

The scheduler trims after every re-list and once a minute (``TrimSchedule``). A re-list (after a
watch cannot resume, or a deliberate `--resync-period`) decodes every object of a resource again,
a page at a time. CPython frees those objects at once, but the larger blocks go back to the C
allocator, which keeps them: a glibc heap only shrinks from its top, so a resident set that grew
for one re-list stays grown, and each new high-water mark of the cluster's size adds to it.
``malloc_trim(0)`` returns every free page of the heap. Measured in the soak (1,000 nodes, about
2,000 pods, a re-list every 5-6 minutes): one call took a standby replica from 176 to 164 MiB.
Watch events and scheduling cycles free memory the same way, only less at a time, hence the
periodic trim; one that finds nothing to return costs microseconds. With another C library
(musl, macOS) ``trim`` does nothing and says so."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

_UNSET: object = object()
_malloc_trim: Callable[[int], int] | None | object = _UNSET


def _load() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def available() -> bool:
    global _malloc_trim
    if _malloc_trim is _UNSET:
        _malloc_trim = _load()
    return _malloc_trim is not None


def trim() -> bool:
    """Return the heap's free memory to the OS; True when the C library did (glibc), else False."""
    if not available():
        return False
    assert callable(_malloc_trim)
    return bool(_malloc_trim(0))


class TrimSchedule:
    """When the scheduler trims: after each re-list (the informers' LIST count passed the first
    LISTs, ``initial_lists``), and every ``every`` seconds otherwise - watch events and cycles free
    memory too, and without re-lists nothing else would ever return it. ``due`` is asked once a
    second; a trim that has nothing to return costs microseconds."""

    def __init__(self, every: float, now: float, initial_lists: int = 2):
        self.every = every
        self.next_at = now + every
        self.lists = initial_lists

    def due(self, lists: int, now: float) -> bool:
        relisted = lists > self.lists
        self.lists = max(self.lists, lists)
        if relisted or now >= self.next_at:
            self.next_at = now + self.every
            return True
        return False
