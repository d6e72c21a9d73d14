"""Garbage-collector settings for a process that holds a large, long-lived object graph.

The scheduler keeps every node and pod of the cluster in memory. CPython's cyclic collector
traverses all tracked objects in each full (generation 2) collection and is triggered by
allocation counts, so decoding a LIST of 10,000 pods or a steady stream of watch events keeps
re-walking the whole cache although nothing in it is cyclic garbage. Measured in the 5,000-node,
10,000-pod drain benchmark: 2.9 s of 23.7 s of scheduler CPU were collections (1,216 young, 111
middle, 9 full ones taking 1.6 s), and a 10,000-pod LIST decoded in 0.52 s with the collector on
against 0.15 s with it off.

What this module does, all reversible and none of it affecting correctness (reference counting
still frees everything that is not part of a cycle):

* a larger young-generation threshold, so short-lived decode objects are mostly gone before the
  collector looks at them (fewer promotions into older generations);
* ``paused()`` around decoding a large response (``orjson`` builds acyclic dicts and lists).
  Pausing alone only defers the work: the decoded page is counted as young allocations, and the
  first allocation after ``gc.enable()`` collects all of it (0.27 s of a 1.9 s start-up at 5,000
  nodes and 10,000 pods, measured with py-spy). Until the start-up LISTs are done, a large
  response is therefore frozen right after decoding (``gc.freeze()`` moves what is tracked to the
  permanent generation and resets the young count, in constant time): the listed objects become
  the cache, which would be frozen at ``freeze()`` anyway;
* ``freeze()`` once the informers have synced: the objects alive then (modules, the listed cache)
  move to the permanent generation, so later full collections walk only what changed since.

Freezing keeps cyclic garbage that exists at that moment forever; it is done only during the
scheduler's start-up (a bounded, one-time amount), never for the LISTs of later re-lists nor in
other processes that use the API client.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000   # CPython's default is 700

_starting = False   # from ``configure()`` until ``freeze()``: large decodes are frozen, not collected


def configure() -> None:
    """The scheduler process's settings; start-up begins (see ``paused``) until ``freeze()``. Other
    users of the API client (tools, the benchmark driver) never freeze what they decode."""
    global _starting
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    _starting = True


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside (for decoding large acyclic documents)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _starting:
            gc.freeze()
        if was:
            gc.enable()


def freeze() -> None:
    """Move every object tracked now out of future collections (``gc.freeze``); ends start-up."""
    global _starting
    _starting = False
    gc.freeze()
