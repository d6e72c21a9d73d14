"""How long each end-to-end test took (``durations.json``), so a parallel run starts the longest first.

Under pytest-xdist a worker that picks up a two-minute test near the end runs alone while the
others idle; started first, the long tests overlap the short ones. The table only orders the
run - a test missing from it (a new one) counts as ``DEFAULT_S`` - so it may be stale without
harm. Refresh it from a run's ``--durations=0`` report::

    make test PYTEST_ARGS=--durations=0 | tee /tmp/run.log
    python -m tests.e2e.durations /tmp/run.log
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
TABLE = Path(__file__).with_name("durations.json")
DEFAULT_S = 3.0
_LINE = re.compile(r"^([0-9.]+)s (?:setup|call|teardown) +(tests/e2e/\S.*)$")


def load() -> dict[str, float]:
    try:
        return json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return {}


def deal(ordered: list[T], workers: int) -> list[T]:
    """``ordered`` dealt to ``workers`` slices in turn, the slices joined: the order xdist's worksteal
    cuts back into the same slices (its first cut gives worker i ``remaining // (workers - i)``)."""
    if workers <= 1:
        return list(ordered)
    sizes, left = [], len(ordered)
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    slices: list[list[T]] = [[] for _ in range(workers)]
    turn = 0
    for item in ordered:
        while len(slices[turn]) >= sizes[turn]:
            turn = (turn + 1) % workers
        slices[turn].append(item)
        turn = (turn + 1) % workers
    return [item for s in slices for item in s]


def from_report(text: str) -> dict[str, float]:
    """Seconds per test (setup + call + teardown) from pytest's ``--durations=0`` lines."""
    total: Counter[str] = Counter()
    for line in text.splitlines():
        m = _LINE.match(line.rstrip())
        if m:
            total[m.group(2)] += float(m.group(1))
    return {k: round(v, 1) for k, v in total.items() if v >= 1.0}


if __name__ == "__main__":
    table = from_report(Path(sys.argv[1]).read_text())
    TABLE.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{len(table)} tests, {sum(table.values()):.0f} s in all -> {TABLE}")
