"""Run ``pysched`` with the cyclic garbage collector's work timed (a measuring aid, not shipped).

``python hack/gc_stats.py run --config ... [pysched arguments]`` runs ``python -m pysched`` in this
process with a ``gc.callbacks`` hook that adds up, per generation, how many collections ran and how
long they took; at exit it writes one line to ``$GC_STATS_OUT`` (default ``/tmp/pysched-gc.txt``):
``collections [gen0, gen1, gen2] seconds [gen0, gen1, gen2] cpu <process CPU s>``. This is how the
numbers in ``bench/PROFILE.md`` on collector time were taken; to use it in a benchmark run, put
this file in place of ``-m pysched`` in ``bench/schedulers.py``.
"""

import atexit
import gc
import os
import runpy
import sys
import time

counts = [0, 0, 0]
seconds = [0.0, 0.0, 0.0]
_started = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    generation = info["generation"]
    counts[generation] += 1
    seconds[generation] += time.perf_counter() - _started[0]


def _write() -> None:
    with open(os.environ.get("GC_STATS_OUT", "/tmp/pysched-gc.txt"), "w") as f:
        f.write(f"collections {counts} seconds {[round(s, 3) for s in seconds]} cpu {time.process_time():.2f}\n")


gc.callbacks.append(_on_gc)
atexit.register(_write)
sys.argv = ["pysched", *sys.argv[1:]]
runpy.run_module("pysched", run_name="__main__", alter_sys=True)
