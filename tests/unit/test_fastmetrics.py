"""The lock-free Counter/Histogram expose exactly what prometheus-client's own classes would."""

import random

import prometheus_client as pc
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from pysched.util import fastmetrics as fm


def _exposition(registry: CollectorRegistry, name: str) -> list[str]:
    lines = generate_latest(registry).decode().splitlines()
    return [line.replace(name, "M", 1) for line in lines
            if line.startswith((name, f"# HELP {name}", f"# TYPE {name}"))]


def test_histogram_and_counter_match_prometheus_client_sample_for_sample():
    pc.disable_created_metrics()
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    buckets = [0.0001 * 2 ** i for i in range(12)]
    h1 = pc.Histogram("h", "help text", ["a", "b"], buckets=buckets, registry=theirs)
    h2 = fm.Histogram("h", "help text", ["a", "b"], buckets=buckets, registry=ours)
    c1 = pc.Counter("c_total", "count", ["a"], registry=theirs)
    c2 = fm.Counter("c_total", "count", ["a"], registry=ours)
    u1 = pc.Histogram("u", "unlabelled", buckets=(1, 2, 4), registry=theirs)
    u2 = fm.Histogram("u", "unlabelled", buckets=(1, 2, 4), registry=ours)
    rng = random.Random(7)
    for _ in range(2000):
        v = rng.choice([0.0, 0.0001, 0.0002, 1.0, 5.0, rng.random() * 0.5])   # bounds hit exactly, too
        labels = (rng.choice("xy"), rng.choice(["1", "2"]))
        h1.labels(*labels).observe(v)
        h2.labels(*labels).observe(v)
        c1.labels(labels[0]).inc(v)
        c2.labels(labels[0]).inc(v)
        u1.observe(v * 8)
        u2.observe(v * 8)
    for name in ("h", "c", "u"):
        assert _exposition(ours, name) == _exposition(theirs, name), name
    assert ours.get_sample_value("h_count", {"a": "x", "b": "1"}) == theirs.get_sample_value(
        "h_count", {"a": "x", "b": "1"})


def test_misuse_is_refused_with_the_metric_named():
    reg = CollectorRegistry()
    h = fm.Histogram("lat", "x", ["ep"], buckets=(1,), registry=reg)
    with pytest.raises(ValueError, match="lat: expected 1 label values"):
        h.labels("a", "b")
    with pytest.raises(ValueError, match="lat: has label names"):
        h.observe(1)
    c = fm.Counter("n_total", "x", registry=reg)
    with pytest.raises(ValueError, match="non-negative"):
        c.inc(-1)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        fm.Counter("n_total", "again", registry=reg)


def test_labels_given_as_other_types_share_one_exported_child():
    reg = CollectorRegistry()
    c = fm.Counter("n_total", "x", ["code"], registry=reg)
    c.labels(200).inc()
    c.labels("200").inc()
    c.labels(200).inc()
    assert c.labels(200) is c.labels("200")
    assert reg.get_sample_value("n_total", {"code": "200"}) == 3
    assert generate_latest(reg).decode().count('n_total{code="200"}') == 1


def test_equal_but_differently_typed_values_stay_apart_as_prometheus_client_keeps_them():
    reg = CollectorRegistry()
    c = fm.Counter("v_total", "x", ["v"], registry=reg)
    for v in (1, True, 1.0, 1):
        c.labels(v).inc()
    assert reg.get_sample_value("v_total", {"v": "1"}) == 2
    assert reg.get_sample_value("v_total", {"v": "True"}) == 1
    assert reg.get_sample_value("v_total", {"v": "1.0"}) == 1
