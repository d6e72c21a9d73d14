"""The bench's Prometheus text reader, scrape deltas and figures, and histogram quantiles."""

import math

import pytest

from bench import prom, scrape

BEFORE = """\
# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.1"} 1
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.2"} 1
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.4"} 2
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="+Inf"} 2
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 0.35
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 2
process_cpu_seconds_total 1.5
rest_client_requests_total{code="200",host="h:1",method="GET"} 10
"""

AFTER = """\
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.1"} 3
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.2"} 7
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="0.4"} 11
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="scheduled",le="+Inf"} 12
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 2.35
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 12
scheduler_scheduling_attempt_duration_seconds_bucket{profile="p",result="unschedulable",le="+Inf"} 50
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="unschedulable"} 50
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",profile="p",status="Success"} 0.5
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="p",status="Success"} 10
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",profile="p",status="Error"} 9
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="p",status="Error"} 1
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Bind",profile="p",status="Success"} 0.3
scheduler_framework_extension_point_duration_seconds_count{extension_point="Bind",profile="p",status="Success"} 10
process_cpu_seconds_total 4.0
rest_client_requests_total{code="200",host="h:1",method="GET"} 12
rest_client_requests_total{code="201",host="h:1",method="POST"} 20
rest_client_requests_total{code="<error>",host="h:1",method="POST"} 1
"""


def test_parse_labels_escapes_comments_and_special_values():
    text = ('# HELP x y\n\nm{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 3 1712345\n'
            'plain 2.5e-3\nh_bucket{le="+Inf"} 7\nnan_metric NaN\n')
    s = prom.parse(text)
    assert s[("m", (("a", 'q"uote'), ("b", "back\\slash"), ("c", "new\nline")))] == 3.0
    assert s[("plain", ())] == 0.0025
    assert s[("h_bucket", (("le", "+Inf"),))] == 7.0
    assert math.isnan(s[("nan_metric", ())])
    with pytest.raises(ValueError):
        prom.parse("novalue{a=\"b\"}\n")


def test_delta_subtracts_the_earlier_scrape_and_keeps_new_series():
    d = prom.delta(prom.parse(AFTER), prom.parse(BEFORE))
    assert prom.total(d, "process_cpu_seconds_total") == 2.5
    assert prom.total(d, "rest_client_requests_total") == 23.0          # 2 GET + 20 POST + 1 failed POST
    assert prom.total(d, "rest_client_requests_total", method="POST") == 21.0
    assert prom.total(d, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled") == 10.0
    assert prom.total(d, "not_exported") is None


def test_histogram_quantile_interpolates_inside_the_bucket_like_promql():
    # Cumulative: 2 obs <= 0.1, 6 <= 0.2, 9 <= 0.4, 10 in total.
    cum = [(0.1, 2.0), (0.2, 6.0), (0.4, 9.0), (math.inf, 10.0)]
    # p50: rank 5 lies in (0.1, 0.2], which holds observations 3..6: 0.1 + 0.1 * (5 - 2) / 4 = 0.175
    assert prom.histogram_quantile(0.5, cum) == pytest.approx(0.175)
    # p10: rank 1 in the first bucket, lower bound 0: 0.1 * 1 / 2 = 0.05
    assert prom.histogram_quantile(0.1, cum) == pytest.approx(0.05)
    # p90: rank 9 is the last observation of (0.2, 0.4]: its upper bound
    assert prom.histogram_quantile(0.9, cum) == pytest.approx(0.4)
    # p99: rank 9.9 falls in +Inf: the highest finite bound
    assert prom.histogram_quantile(0.99, cum) == 0.4
    assert prom.histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None   # no observations
    assert prom.histogram_quantile(0.5, []) is None


def test_buckets_sum_over_other_labels():
    text = ('h_bucket{profile="a",le="1"} 1\nh_bucket{profile="b",le="1"} 2\n'
            'h_bucket{profile="a",le="+Inf"} 3\nh_bucket{profile="b",le="+Inf"} 5\n')
    assert prom.buckets(prom.parse(text), "h") == [(1.0, 3.0), (math.inf, 8.0)]


def test_figures_from_a_delta():
    d = prom.delta(prom.parse(AFTER), prom.parse(BEFORE))
    f = scrape.figures(d, bound=10)
    assert f["attempts"] == 10
    assert f["attempt_mean_ms"] == pytest.approx(200.0)              # (2.35 - 0.35) / 10
    # delta buckets: 0.1:2, 0.2:6, 0.4:9, +Inf:10 -> the hand-computed 0.175 s above
    assert f["attempt_p50_ms"] == pytest.approx(175.0)
    assert f["attempt_p99_ms"] == pytest.approx(400.0)
    assert f["extension_point_mean_ms"]["Filter"] == pytest.approx(50.0)   # Success only, not the Error series
    assert f["extension_point_mean_ms"]["Bind"] == pytest.approx(30.0)
    assert f["extension_point_mean_ms"]["Permit"] is None                  # not exported: n/a
    assert f["cpu_s"] == 2.5
    assert f["api_requests"] == 23 and f["api_requests_per_pod"] == 2.3
    assert f["api_requests_by_method"] == {"GET": 2, "POST": 21}


def test_figures_when_nothing_is_exported():
    f = scrape.figures({}, bound=5)
    assert f["attempts"] is None and f["attempt_p50_ms"] is None and f["api_requests_per_pod"] is None
    assert set(f["extension_point_mean_ms"].values()) == {None}
