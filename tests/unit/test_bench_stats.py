"""Throughput/latency statistics of the benchmark follow scheduler_perf's definitions."""

import pytest

from bench import stats


def test_nearest_rank_percentile():
    xs = [float(i) for i in range(1, 101)]
    assert stats.percentile(xs, 50) == 50.0
    assert stats.percentile(xs, 90) == 90.0
    assert stats.percentile(xs, 99) == 99.0
    assert stats.percentile([7.0], 99) == 7.0
    assert stats.percentile([], 50) == 0.0


def test_per_second_samples_drop_the_final_partial_interval():
    binds = [0.1, 0.2, 0.5, 1.1, 1.9, 2.05]  # 3 in [0,1), 2 in [1,2), 1 in the partial [2,2.05]
    assert stats.per_second_samples(0.0, binds) == [3.0, 2.0]


def test_short_run_is_one_scaled_sample():
    assert stats.per_second_samples(10.0, [10.25, 10.5]) == [pytest.approx(4.0)]


def test_summary_average_latency_and_unbound():
    records = {f"p{i}": {"seen": i * 0.1, "bound": i * 0.1 + 0.05} for i in range(40)}
    records["late"] = {"seen": 0.0, "bound": None}
    s = stats.summarise(0.0, records, expected=41)
    assert s.bound == 40
    assert s.elapsed_s == pytest.approx(3.95, abs=1e-6)
    assert s.avg == pytest.approx(40 / 3.95, abs=0.1)
    assert s.latency_p50_ms == pytest.approx(50.0, abs=0.01)
    assert s.p50 == 10.0


def test_bound_over_time_is_cumulative_and_ends_at_total():
    xs, ys = stats.bound_over_time(0.0, [0.1, 0.3, 0.3, 1.2], step=0.5)
    assert xs == [0.0, 0.5, 1.0, 1.5]
    assert ys == [0, 3, 3, 4]
