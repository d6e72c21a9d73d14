"""Throughput/latency statistics of the benchmark follow scheduler_perf's definitions; repeats are
summarised as median and range; per-second percentiles need at least 10 samples."""

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
    assert stats.per_second_samples(10.0, [10.25, 10.5]) == []   # shorter than a second: no sample


def test_per_second_percentiles_are_na_below_ten_samples():
    nine = [0.5 + i for i in range(9)] + [9.5]          # 9 whole seconds, then a partial one
    s = stats.summarise(0.0, {f"p{i}": {"seen": 0.0, "bound": t} for i, t in enumerate(nine)}, 10)
    assert s.seconds == 9 and (s.p50, s.p90, s.p99) == (None, None, None)
    ten = [0.5 + i for i in range(10)] + [10.5] + [3.2, 3.7]
    s = stats.summarise(0.0, {f"p{i}": {"seen": 0.0, "bound": t} for i, t in enumerate(ten)}, 13)
    assert s.seconds == 10
    assert (s.p50, s.p90, s.p99) == (1.0, 1.0, 3.0)     # nine 1s and one 3 (second 3)
    assert stats.second_percentiles([5.0] * 9) == (None, None, None)
    assert stats.second_percentiles([float(i) for i in range(1, 11)]) == (5.0, 9.0, 10.0)


def test_summary_average_latency_and_unbound():
    records = {f"p{i}": {"seen": i * 0.1, "bound": i * 0.1 + 0.05} for i in range(40)}
    records["late"] = {"seen": 0.0, "bound": None}
    s = stats.summarise(0.0, records, expected=41)
    assert s.bound == 40
    assert s.elapsed_s == pytest.approx(3.95, abs=1e-6)
    assert s.avg == pytest.approx(40 / 3.95, abs=0.1)
    assert s.latency_p50_ms == pytest.approx(50.0, abs=0.01)
    assert s.latency_p90_ms == pytest.approx(50.0, abs=0.01)
    assert s.p50 is None                                  # 3 whole seconds only


def test_median_and_range_over_repeats():
    assert stats.spread([3.0, 1.0, 2.0]) == stats.Spread(2.0, 1.0, 3.0, 3)
    assert stats.spread([4.0, 1.0, 2.0, 10.0]) == stats.Spread(3.0, 1.0, 10.0, 4)   # even: mean of the middle two
    assert stats.spread([None, 5.0]) == stats.Spread(5.0, 5.0, 5.0, 1)               # a repeat without the figure
    assert stats.spread([None, None]) is None
    assert stats.ratio(stats.spread([6.0, 2.0, 4.0]), stats.spread([2.0, 1.0, 3.0])) == 2.0   # medians 4 / 2
    assert stats.ratio(stats.spread([1.0]), stats.spread([0.0])) is None
    assert stats.ratio(None, stats.spread([1.0])) is None


def test_bound_over_time_is_cumulative_and_ends_at_total():
    xs, ys = stats.bound_over_time(0.0, [0.1, 0.3, 0.3, 1.2], step=0.5)
    assert xs == [0.0, 0.5, 1.0, 1.5]
    assert ys == [0, 3, 3, 4]
