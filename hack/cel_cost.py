"""Cost of DRA selector evaluation in both engines (a measuring aid, not shipped).

``PYSCHED_CEL_HELPER=$(hack/pysched-cel.sh) .venv/bin/python hack/cel_cost.py [DEVICES]`` measures, for
three selectors (a string attribute, a quantity comparison, an optional field with the strings
library), in the built-in subset and in pysched-cel:

* compile: the first ``Selector(expr)`` of an expression (a fresh expression each time);
* one device: a selector evaluated on one device it has no answer for (what ``CelDevice.matches``
  pays on a miss);
* batch: ``prefetch`` over DEVICES devices (default 64; what the allocator asks per node), per device.

Wall-clock microseconds on this machine, medians of 31 repeats; ``docs/dra.md`` quotes them.
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "scheduler")]

from pysched.plugins.dynamic_resources.cel import CelDevice, Selector, SelectorError, prefetch  # noqa: E402
from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine  # noqa: E402
from pysched.plugins.dynamic_resources.cel_go import GoEngine  # noqa: E402

D = 'device.attributes["gpu.example.com"]'
SELECTORS = {
    "string": f'{D}.model == "a100"',
    "quantity": 'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0',
    "optional+strings": f'{D}.?model.orValue("").lowerAscii() == "a100"',
}


def device(i: int) -> CelDevice:
    return CelDevice("gpu.example.com", {
        "name": f"gpu-{i}", "attributes": {"model": {"string": "a100" if i % 2 else "h100"}, "numa": {"int": i % 2},
                                           "driverVersion": {"version": "1.2.3"}},
        "capacity": {"memory": {"value": "40Gi"}}})


def median_us(fn, repeats: int = 31) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


def measure(engine, name: str, expr: str, n: int) -> str:
    counter = iter(range(10**9))

    def compile_fresh():
        Selector(f"{expr} || {next(counter)} < 0", engine)

    try:
        Selector(expr, engine)
    except SelectorError as exc:
        return f"{engine.name:12} {name:18} cannot compile: {str(exc)[:60]}"
    compile_us = median_us(compile_fresh)
    sel = Selector(expr, engine)
    one_us = median_us(lambda: device(0).matches(sel))
    batch_us = median_us(lambda: prefetch(sel, [device(i) for i in range(n)])) / n
    return (f"{engine.name:12} {name:18} compile {compile_us:8.0f}  one device {one_us:7.0f}  "
            f"batch of {n} {batch_us:6.1f}/device")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    engines = [BuiltinEngine()]
    helper = os.environ.get("PYSCHED_CEL_HELPER")
    if helper:
        engines.append(GoEngine(helper))
    else:
        print("PYSCHED_CEL_HELPER not set: only the built-in engine")
    for eng in engines:
        Selector('device.driver == "x"', eng)   # warm: the helper started, the Rust module loaded
        for name, expr in SELECTORS.items():
            print(measure(eng, name, expr, n))


if __name__ == "__main__":
    main()
