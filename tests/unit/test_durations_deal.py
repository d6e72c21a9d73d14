"""The e2e order for parallel runs (tests/e2e/durations.py): xdist's worksteal cuts the collection
into contiguous slices; dealt in turn, each slice starts with its share of the longest tests."""

from __future__ import annotations

import pytest

from tests.e2e.durations import deal, from_report


def worksteal_cut(items: list, workers: int) -> list[list]:
    """How xdist's worksteal first hands out a collection: worker i takes remaining // (workers - i)."""
    out, rest = [], list(items)
    for i in range(workers):
        n = len(rest) // (workers - i)
        out.append(rest[:n])
        rest = rest[n:]
    return out


@pytest.mark.parametrize("count,workers", [(10, 4), (11, 4), (349, 4), (7, 3), (3, 4), (5, 1)])
def test_each_worker_starts_with_one_of_the_longest(count, workers):
    ordered = list(range(count))          # longest first
    dealt = deal(ordered, workers)
    assert sorted(dealt) == ordered
    slices = [s for s in worksteal_cut(dealt, workers) if s]
    assert sorted(s[0] for s in slices) == list(range(len(slices)))
    assert all(s == sorted(s) for s in slices)


def test_a_report_sums_each_tests_phases():
    report = ("1.50s setup    tests/e2e/test_a.py::test_x\n"
              "10.00s call     tests/e2e/test_a.py::test_x\n"
              "0.20s teardown tests/e2e/test_a.py::test_x\n"
              "0.30s call     tests/e2e/test_a.py::test_quick\n"
              "9.00s call     tests/unit/test_b.py::test_y\n")
    assert from_report(report) == {"tests/e2e/test_a.py::test_x": 11.7}
