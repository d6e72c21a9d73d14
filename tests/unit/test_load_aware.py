"""Load-aware scores against hand-computed values: TargetLoadPacking (with placements counted until
the next sample), LoadVariationRiskBalancing, MetricScore; every fallback (missing, stale, source
down; Neutral, Requests, Disable) and its count; bad arguments named by field; metrics files; the
sources' parsers and the collector's bounded rounds."""

import asyncio
import gc
import itertools
import logging

import numpy as np
import pytest

from pysched.apis.config.types import ConfigError
from pysched.apis.core.quantity import QuantityError
from pysched.framework import CycleState, PodInfo
from pysched.framework.loadmetrics import MetricProviderArgs, MetricSeries
from pysched.loadmetrics.collector import LoadCollector
from pysched.loadmetrics.sources import SourceError, node_of, parse_node_metrics, parse_vector
from pysched.loadmetrics.static import StaticLoad, check_metrics, load_metrics_file
from pysched.plugins.loadaware.load_variation_risk_balancing import LoadVariationRiskBalancing
from pysched.plugins.loadaware.metric_score import MetricScore
from pysched.plugins.loadaware.target_load_packing import TargetLoadPacking, target_load_score
from pysched.runtime.framework import CycleTrace
from pysched.testing import PluginTester
from pysched_dev.testkit import make_node, make_pod

T0 = 1_000_000.0
PROM = {"type": "Prometheus", "address": "http://127.0.0.1:9090", "intervalSeconds": 5}


def make_tester(plugin, values, *, args=None, age=0.0, nodes=("a", "b", "c"), now=T0, pods=()):
    load = StaticLoad({"nodes": values, "ageSeconds": age}, now=now)
    t = PluginTester(plugin, {"metricProvider": PROM, **(args or {})},
                     nodes=[make_node(n, cpu="4", memory="32Gi") for n in nodes], pods=pods, load=load)
    return t, load


def one_cpu_pod(name, **kw):
    return make_pod(name, cpu=None, memory=None, limits_only={"cpu": "1"}, **kw)


# -- TargetLoadPacking ----------------------------------------------------------------------------

@pytest.mark.parametrize("u,expected", [(0, 40), (10, 55), (20, 70), (40, 100), (55, 30), (70, 20), (100, 0),
                                        (101, 0), (250, 0)])
def test_target_load_formula(u, expected):
    assert target_load_score(np.array([float(u)]), 40.0).tolist() == [expected]


def test_target_load_packing_scores_measured_use_plus_the_pods_prediction():
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 10}, "b": {"cpu": 35}, "c": {"cpu": 80}})
    # request 500m, no limit: predicted 750m (x1.5). a: (400+750)/4000 = 28.75% -> 83.125;
    # b: 53.75% -> 40*46.25/60 = 30.83; c: 98.75% -> 0.83
    assert t.score(make_pod("p", cpu="500m")) == {"a": 83, "b": 31, "c": 1}
    # a limit wins over the request: (400+2000)/4000 = 60% -> 26.67
    assert t.score(make_pod("q", cpu="100m", limits_only={"cpu": "2"}))["a"] == 27
    # no cpu at all predicts defaultRequests (1 core): 35% -> 92.5, rounded half away from zero
    assert t.score(make_pod("r", cpu=None, memory=None))["a"] == 93
    assert load.fallbacks == {}


def test_prediction_limit_request_default():
    from pysched.plugins.loadaware.load import pod_cpu_prediction
    pod = PodInfo.from_dict(make_pod("p", cpu="100m", limits_only={"cpu": "2"}), keep_raw=True)
    assert pod_cpu_prediction(pod, 1000, 1.5) == 2000
    assert pod_cpu_prediction(PodInfo.from_dict(make_pod("q", cpu="300m"), keep_raw=True), 1000, 1.5) == 450
    assert pod_cpu_prediction(PodInfo.from_dict(make_pod("r", cpu=None), keep_raw=True), 700, 1.5) == 700


def test_prediction_sums_containers_and_reads_each_quantity_as_written():
    from pysched.plugins.loadaware.load import pod_cpu_prediction
    raw = make_pod("p", cpu="100m")
    base = raw["spec"]["containers"][0]
    raw["spec"]["containers"] = [
        {**base, "name": "limited", "resources": {"limits": {"cpu": "1500m"}, "requests": {"cpu": "1"}}},
        {**base, "name": "requested", "resources": {"requests": {"cpu": "250m"}}},     # 375
        {**base, "name": "bare", "resources": {}},                                   # default
        {**base, "name": "numeric", "resources": {"requests": {"cpu": 2}}},           # 3000
        {**base, "name": "half", "resources": {"requests": {"cpu": "1m"}}},           # 1.5 -> 2
    ]
    for _ in range(2):      # the same quantities again (remembered): the same answer
        assert pod_cpu_prediction(PodInfo.from_dict(raw, keep_raw=True), 700, 1.5) == 1500 + 375 + 700 + 3000 + 2
    raw["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "nonsense"
    with pytest.raises(Exception, match="nonsense"):
        pod_cpu_prediction(PodInfo.from_dict(raw, keep_raw=True), 700, 1.5)
    raw["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "250m"
    pod = PodInfo.from_dict(raw, keep_raw=True)
    raw["spec"]["containers"][0]["resources"]["limits"]["cpu"] = ["1"]     # not a quantity at all
    with pytest.raises(QuantityError, match=r"invalid quantity \['1'\]: expected a string"):
        pod_cpu_prediction(pod, 700, 1.5)


def place(t, name):
    """One scheduling decision as the framework makes it: the best score, then Reserve."""
    raw = one_cpu_pod(name)
    scores = t.score(raw)
    best = max(sorted(scores), key=lambda n: scores[n])
    t.plugin.reserve(CycleState(), PodInfo.from_dict(raw, keep_raw=True), best)
    return best


def test_a_burst_spreads_instead_of_piling_on_the_node_that_looked_best():
    # a at 15 %: a 1-CPU pod takes it to the 40 % target (100); b and c at 20 % -> 45 % (37).
    values = {"a": {"cpu": 15}, "b": {"cpu": 20}, "c": {"cpu": 20}}
    t, _ = make_tester(TargetLoadPacking, values)
    assert [place(t, f"p{i}") for i in range(3)] == ["a", "b", "c"]
    # Without the placements counted, every pod would see the same sample and pile onto a.
    t2, _ = make_tester(TargetLoadPacking, values)
    assert [max(sorted(s := t2.score(one_cpu_pod(f"p{i}"))), key=lambda n: s[n]) for i in range(3)] == ["a"] * 3


def test_placements_count_until_a_sample_that_has_them_and_unreserve_forgets_them():
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 15}, "b": {"cpu": 20}}, nodes=("a", "b"))
    raw = one_cpu_pod("p0")
    pod = PodInfo.from_dict(raw, keep_raw=True)
    t.score(raw)
    t.plugin.reserve(CycleState(), pod, "a")
    assert t.score(one_cpu_pod("p1"))["a"] == 23           # (600+1000+1000)/4000 = 65% -> 23.3
    t.plugin.unreserve(CycleState(), pod, "a")
    assert t.score(one_cpu_pod("p1"))["a"] == 100
    t.plugin.reserve(CycleState(), pod, "a")
    # A sample taken more than pendingLoadSeconds (60) after the placement includes the pod's use.
    series = load.series["cpu"]
    load._now = T0 + 61
    series.replace({"a": 40.0, "b": 20.0}, T0 + 61, T0 + 61)
    assert t.score(one_cpu_pod("p2"))["a"] == 23           # (1600 sampled + 1000) / 4000 = 65%, p0 not again
    assert len(t.plugin.placements) == 0


def test_reserve_counts_the_prediction_prescore_made_in_the_same_cycle():
    t, _ = make_tester(TargetLoadPacking, {"a": {"cpu": 15}}, nodes=("a",))
    pod = PodInfo.from_dict(one_cpu_pod("p0"), keep_raw=True)
    state = CycleState()
    t.plugin.pre_score(state, pod, t.nodes())
    assert state.read("TargetLoadPacking/prediction") == 1000             # a 1-CPU limit
    state.write("TargetLoadPacking/prediction", 777)                       # what PreScore left is used
    t.plugin.reserve(state, pod, "a")
    assert t.plugin.placements.by_uid[pod.uid][2] == 777
    other = PodInfo.from_dict(one_cpu_pod("p1"), keep_raw=True)
    t.plugin.reserve(CycleState(), other, "a")                             # no PreScore this cycle
    assert t.plugin.placements.by_uid[other.uid][2] == 1000


def test_pods_bound_by_others_count_and_deleted_pods_do_not():
    t, _ = make_tester(TargetLoadPacking, {"a": {"cpu": 15}, "b": {"cpu": 20}}, nodes=("a", "b"))
    other = PodInfo.from_dict(dict(one_cpu_pod("x", node_name="a"),
                                   status={"startTime": "1970-01-12T13:46:30Z"}), keep_raw=True)
    assert other.start_time == T0 - 10
    t.plugin.pod_seen(other)
    assert t.score(one_cpu_pod("p"))["a"] == 23
    t.plugin.pod_gone(other.uid)
    assert t.score(one_cpu_pod("p"))["a"] == 100
    old = PodInfo.from_dict(dict(one_cpu_pod("y", node_name="a"),
                                 status={"startTime": "1970-01-01T00:00:01Z"}), keep_raw=True)
    t.plugin.pod_seen(old)                                  # started long ago: already in the sample
    assert t.score(one_cpu_pod("p"))["a"] == 100


@pytest.mark.parametrize("values,age,reason", [
    ({"a": {"cpu": 10}, "b": {"cpu": 10}}, 0, "missing"),   # c has no sample
    ({"a": {"cpu": 10}, "b": {"cpu": 10}, "c": {"cpu": 10}}, 61, "stale"),
    ({}, 0, "source_down"),
])
def test_neutral_fallback_scores_50_and_is_counted_once_per_cycle(values, age, reason):
    t, load = make_tester(TargetLoadPacking, values, age=age)
    scores = t.score(make_pod("p", cpu="500m"))
    assert scores["c"] == 50
    if reason == "missing":
        assert scores["a"] == 83                             # (400+750)/4000 = 28.75% -> 83.1
    assert load.fallbacks == {("TargetLoadPacking", reason): 1}


def test_samples_from_before_an_outage_serve_until_stale_then_count_as_source_down():
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 10}, "b": {"cpu": 35}}, nodes=("a", "b"))
    load.series["cpu"].failed("no answer within 2s")          # one failed fetch: samples still fresh
    assert t.score(make_pod("p", cpu="500m")) == {"a": 83, "b": 31}
    assert load.fallbacks == {}
    load._now = T0 + 61                                        # now older than maxStalenessSeconds
    assert t.score(make_pod("p", cpu="500m")) == {"a": 50, "b": 50}
    assert load.fallbacks == {("TargetLoadPacking", "source_down"): 1}


def test_reserve_forgets_old_placements_even_when_every_cycle_is_skipped():
    t, load = make_tester(TargetLoadPacking, {}, args={"fallback": "Disable"}, nodes=("a",))
    for i in range(5):
        load._now = T0 + 200 * i                               # > pendingLoadSeconds + maxStaleness apart
        t.plugin.reserve(CycleState(), PodInfo.from_dict(one_cpu_pod(f"p{i}"), keep_raw=True), "a")
    assert len(t.plugin.placements) == 1 and len(t.plugin.placements._heap) == 1


def test_requests_fallback_scores_requested_cpu():
    pods = [make_pod("old", cpu="1", node_name="c")]
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 10}, "b": {"cpu": 10}}, args={"fallback": "Requests"},
                     pods=pods)
    # c: no sample; (1000 requested + 500 requested by the pod) / 4000 = 37.5% -> 96.25
    assert t.score(make_pod("p", cpu="500m"))["c"] == 96
    assert load.fallbacks == {("TargetLoadPacking", "missing"): 1}


def test_disable_fallback_skips_the_plugin_for_the_cycle():
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 10}}, args={"fallback": "Disable"})
    t.score(make_pod("p"))
    assert t.status is not None and t.status.is_skip()
    assert load.fallbacks == {("TargetLoadPacking", "missing"): 1}


def test_metrics_server_units_are_millicores():
    load = StaticLoad({"nodes": {}}, now=T0)
    series = load.subscribe(MetricProviderArgs(type="KubernetesMetricsServer"), "cpu", "usage_cpu", "millicores")
    series.replace({"a": 1000.0}, T0, T0)
    t = PluginTester(TargetLoadPacking, {"metricProvider": {"type": "KubernetesMetricsServer"}},
                     nodes=[make_node("a", cpu="4")], load=_Fixed(series))
    assert t.score(one_cpu_pod("p")) == {"a": round(40 * 50 / 60)}   # (1000+1000)/4000 = 50% -> 33.3


class _Fixed(StaticLoad):
    def __init__(self, series):
        super().__init__(now=T0)
        self.one = series

    def subscribe(self, provider, query, name, unit="percent"):
        return self.one


# -- LoadVariationRiskBalancing -------------------------------------------------------------------

def lvrb_values(cpu, cpu_sd, mem, mem_sd):
    return {"cpu": cpu, "cpu_stddev": cpu_sd, "memory": mem, "memory_stddev": mem_sd}


def test_load_variation_rounds_exact_halves_up():
    # cpu: mu (0 + 3800) / 4000 = .95, sigma 0 -> (1 - .475) * 100 = 52.5 exactly -> 53 (Go's Round);
    # multiplying by a stored 1/4000 instead of dividing gives 52.4999... -> 52
    t, _ = make_tester(LoadVariationRiskBalancing, {"a": lvrb_values(0, 0, 0, 0)}, nodes=("a",))
    pod = PodInfo.from_dict(make_pod("p", cpu="3800m", memory=None), keep_raw=True)
    assert t.plugin._fast(pod, t.nodes(), T0).tolist() == [53]
    assert t.score(make_pod("p", cpu="3800m", memory=None)) == {"a": 53}


@pytest.mark.parametrize("args,expected", [
    ({}, 64),                                   # cpu: mu (2000+500)/4000 = .625, sigma .1 -> 63.75
    ({"safeVarianceSensitivity": 2}, 53),       # sigma sqrt(.1) = .316 -> (1 - .9412/2) * 100 = 52.9
    ({"safeVarianceMargin": 3}, 54),            # sigma .3 -> (1 - .925/2) * 100 = 53.75
])
def test_load_variation_risk_formula(args, expected):
    t, load = make_tester(LoadVariationRiskBalancing, {"a": lvrb_values(50, 10, 25, 0)}, args=args, nodes=("a",))
    # memory: mu .25 + 500Mi/32Gi, sigma 0 -> about 87: cpu is the lower score
    assert t.score(make_pod("p", cpu="500m", memory="500Mi")) == {"a": expected}
    assert load.fallbacks == {}


def test_load_variation_risk_requests_fallback_and_queries():
    pods = [make_pod("old", cpu="2", memory="0", node_name="b")]
    t, load = make_tester(LoadVariationRiskBalancing, {"a": lvrb_values(50, 10, 25, 0)},
                     args={"fallback": "Requests", "window": "10m"}, nodes=("a", "b"), pods=pods)
    # b: mean = requested 2000m, sd 0: mu (2000+500)/4000 -> (1 - .625/2) * 100 = 68.75
    assert t.score(make_pod("p", cpu="500m", memory=None))["b"] == 69
    assert load.fallbacks == {("LoadVariationRiskBalancing", "missing"): 1}
    assert load.series["cpu"].query.startswith("avg_over_time((100 * (1 - avg by (instance)")
    assert load.series["cpu_stddev"].query.endswith("[10m:5s])")


@pytest.mark.parametrize("plugin,values", [
    (TargetLoadPacking, {"a": {"cpu": 10}}),
    (LoadVariationRiskBalancing, {"a": lvrb_values(50, 10, 25, 0)}),
])
def test_min_score_fallback_scores_a_node_without_metrics_0_as_trimaran(plugin, values):
    t, load = make_tester(plugin, values, args={"fallback": "MinScore"}, nodes=("a", "c"))
    scores = t.score(make_pod("p", cpu="500m", memory="500Mi"))
    assert scores["c"] == 0 and scores["a"] > 0
    assert load.fallbacks == {(plugin.name, "missing"): 1}


def test_metric_score_min_score_fallback_scores_a_missing_metric_0():
    args = {"fallback": "MinScore", "metrics": [{"name": "free_gb", "query": "node_free_gb", "max": 200}]}
    t, _ = make_tester(MetricScore, {"a": {"free_gb": 100}}, args=args, nodes=("a", "c"))
    assert t.score(make_pod("p")) == {"a": 50, "c": 0}


# -- MetricScore ----------------------------------------------------------------------------------

def test_metric_score_bounds_direction_weights_and_missing_values():
    args = {"metrics": [
        {"name": "gpu_temp", "query": "gpu_temp_celsius", "min": 30, "max": 90, "direction": "LowerIsBetter",
         "weight": 3},
        {"name": "free_gb", "query": "node_free_gb", "min": 0, "max": 200, "direction": "HigherIsBetter"}]}
    values = {"a": {"gpu_temp": 45, "free_gb": 100},      # 75*3 + 50 -> 275/4 = 68.75
              "b": {"gpu_temp": 120, "free_gb": 300},     # clamped: 0*3 + 100 -> 25
              "c": {"free_gb": 0}}                         # temp missing -> 50*3 + 0 -> 37.5
    t, load = make_tester(MetricScore, values, args=args)
    assert t.score(make_pod("p")) == {"a": 69, "b": 25, "c": 38}
    assert load.fallbacks == {("MetricScore", "missing"): 1}


# -- arguments ------------------------------------------------------------------------------------

@pytest.mark.parametrize("plugin,args,where", [
    (TargetLoadPacking, {}, "args.metricProvider: Required value"),
    (TargetLoadPacking, {"metricProvider": {"type": "Prometheus", "address": "localhost:9090"}},
     "args.metricProvider.address: a Prometheus provider needs an http:// or https:// URL"),
    (TargetLoadPacking, {"metricProvider": {**PROM, "timeoutSeconds": 10}}, "args.metricProvider.timeoutSeconds: 10"),
    (TargetLoadPacking, {"metricProvider": PROM, "fallback": "Guess"}, "args.fallback: 'Guess' is not one of"),
    (TargetLoadPacking, {"metricProvider": PROM, "targetUtilization": 100}, "args.targetUtilization: must be <= 99"),
    (TargetLoadPacking, {"metricProvider": PROM, "maxStalenessSeconds": 2},
     "args.maxStalenessSeconds: 2 is shorter than metricProvider.intervalSeconds"),
    (TargetLoadPacking, {"metricProvider": PROM, "defaultRequests": {"cpu": "lots"}}, "args.defaultRequests.cpu:"),
    (LoadVariationRiskBalancing, {"metricProvider": {"type": "KubernetesMetricsServer"}},
     "args.metricProvider.type: LoadVariationRiskBalancing needs PromQL"),
    (LoadVariationRiskBalancing, {"metricProvider": PROM, "window": "5 minutes"}, "args.window:"),
    (LoadVariationRiskBalancing, {"metricProvider": PROM, "window": "0m"}, "args.window: must be longer than 0"),
    (TargetLoadPacking, {"metricProvider": PROM, "defaultRequests": {"cpu": "0"}},
     "args.defaultRequests.cpu: must be more than 0"),
    (MetricScore, {"metricProvider": PROM, "metrics": [{"name": "x", "query": "x", "max": float("inf")}]},
     "args.metrics[0].max: must be a finite number"),
    (MetricScore, {"metricProvider": PROM}, "args.metrics: Required value"),
    (MetricScore, {"metricProvider": PROM, "fallback": "Requests", "metrics": [{"name": "x", "query": "x"}]},
     "args.fallback: Requests has no meaning for MetricScore"),
    (MetricScore, {"metricProvider": PROM, "metrics": [{"name": "x", "query": "x", "min": 5, "max": 5}]},
     "args.metrics[0].max: 5 must be greater than min"),
    (MetricScore, {"metricProvider": PROM, "metrics": [{"name": "x", "query": "x"}, {"name": "x", "query": "y"}]},
     "args.metrics[1].name: 'x' is listed twice"),
])
def test_bad_arguments_name_the_field(plugin, args, where):
    from pysched.framework.args import load_args
    with pytest.raises(ConfigError) as err:
        load_args(plugin.Args, args, "args")
    assert str(err.value).startswith(where), str(err.value)


# -- metrics files --------------------------------------------------------------------------------

def test_metrics_file_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"nodes.n1.cpu: expected a number, got 'high'"):
        check_metrics({"nodes": {"n1": {"cpu": "high"}}})
    with pytest.raises(ConfigError, match="nodes: expected a mapping"):
        check_metrics({"node": {}})
    p = tmp_path / "m.yaml"
    p.write_text("nodes: {n1: {cpu: 12.5}}\nageSeconds: 3\n")
    assert load_metrics_file(str(p))["nodes"]["n1"]["cpu"] == 12.5


# -- sources and collector ------------------------------------------------------------------------

def test_prometheus_vector_maps_instance_to_node():
    body = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": "node-1:9100"}, "value": [1, "12.5"]},
        {"metric": {"instance": "node-2"}, "value": [1, "NaN"]},
        {"metric": {"job": "x"}, "value": [1, "3"]}]}}
    assert parse_vector(body, "instance") == {"node-1": 12.5}
    names: dict[str, str] = {}
    for _ in range(2):          # labels remembered across answers: the same values
        assert parse_vector(body, "instance", names) == {"node-1": 12.5}
    assert names == {"node-1:9100": "node-1"}
    names["node-1:9100"] = "stale-entry"
    names.update({f"x{i}": "x" for i in range(100_001)})      # grown past its bound: forgotten
    assert parse_vector(body, "instance", names) == {"node-1": 12.5}
    assert names == {"node-1:9100": "node-1"}
    assert node_of("[::1]:9100") == "::1"
    with pytest.raises(SourceError, match="bad_data: parse error"):
        parse_vector({"status": "error", "errorType": "bad_data", "error": "parse error"}, "instance")
    with pytest.raises(SourceError, match="matrix"):
        parse_vector({"status": "success", "data": {"resultType": "matrix"}}, "instance")


def test_series_replace_drops_non_finite_values_and_keeps_times_in_the_values_order():
    s = MetricSeries(name="cpu", query="q")
    s.replace({"a": 1.0, "b": float("nan"), "c": float("inf"), "d": 4.0}, T0, T0 + 1)
    assert (s.values, s.times, s.fetched_at, s.up) == ({"a": 1.0, "d": 4.0}, {"a": T0, "d": T0}, T0 + 1, True)
    s.replace({"b": 2.0, "a": 1.0}, {"a": T0 - 1, "b": T0 - 2, "z": T0}, T0)
    assert list(s.times.items()) == [("b", T0 - 2), ("a", T0 - 1)]


def test_a_prometheus_round_keeps_no_garbage_collected_object_per_node():
    """5,000 (value, time) tuples per query were enough to set off a young collection of all the
    scheduler had allocated since the last one; floats and strings are not tracked."""
    body = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": f"n{i}:9100"}, "value": [1, str(i)]} for i in range(1000)]}}
    c = LoadCollector(clock=lambda: T0)
    series = c.subscribe(MetricProviderArgs(address="http://127.0.0.1:1"), "q", "q")
    p = next(iter(c.providers.values()))

    class Answer:
        label = "canned"

        async def fetch(self, queries):
            return {q: (parse_vector(body, "instance"), T0) for q in queries}
    p.source = Answer()
    asyncio.run(c.fetch_round(p))
    assert len(series.values) == len(series.times) == 1000
    kept = itertools.chain(series.values, series.values.values(), series.times.values())
    assert not any(map(gc.is_tracked, kept))


def test_metrics_server_node_metrics_units():
    body = {"kind": "NodeMetricsList", "items": [
        {"metadata": {"name": "n1"}, "timestamp": "1970-01-12T13:46:40Z", "window": "20s",
         "usage": {"cpu": "250000000n", "memory": "1Gi"}}]}
    got = parse_node_metrics(body)
    assert got == {"cpu": ({"n1": 250.0}, {"n1": T0}), "memory": ({"n1": float(2**30)}, {"n1": T0})}


class _SlowSource:
    label = "slow"

    def __init__(self, delay):
        self.delay = delay

    async def fetch(self, queries):
        await asyncio.sleep(self.delay)
        return {q: ({"a": 1.0}, T0) for q in queries}

    async def close(self):
        pass


def test_collector_rounds_are_bounded_and_a_failure_keeps_the_old_samples():
    provider = MetricProviderArgs(address="http://127.0.0.1:1", interval_seconds=1, timeout_seconds=0.05)
    c = LoadCollector(clock=lambda: T0)
    series = c.subscribe(provider, "up", "up")
    assert c.subscribe(provider, "up", "again") is series           # one series per provider and query
    p = next(iter(c.providers.values()))
    p.source = _SlowSource(0)
    asyncio.run(c.fetch_round(p))
    assert series.up and (series.values, series.times) == ({"a": 1.0}, {"a": T0})
    version = series.version
    p.source = _SlowSource(30)
    asyncio.run(c.fetch_round(p))                                     # cancelled at the timeout
    assert not series.up and series.error == "no answer within 0.05s"
    assert (series.values, series.times) == ({"a": 1.0}, {"a": T0}) and series.version == version + 1


class _Answers:
    """A source whose answers are given in turn (node -> value per round)."""

    def __init__(self, rounds):
        self.label, self.rounds = "test", list(rounds)

    async def fetch(self, queries):
        values = self.rounds.pop(0)
        return {q: (values, T0) for q in queries}

    async def close(self):
        pass


def test_the_log_says_when_the_source_comes_up_and_when_its_node_count_changes(caplog):
    """A user waiting for load data (docs: the load-aware example) sees the nodes arrive in the log,
    also when the source was up with none at first (Prometheus before its first rule evaluation)."""
    provider = MetricProviderArgs(address="http://127.0.0.1:1", interval_seconds=1, timeout_seconds=1)
    c = LoadCollector(clock=lambda: T0)
    c.subscribe(provider, "up", "up")
    p = next(iter(c.providers.values()))
    p.source = _Answers([{}, {}, {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 3.0}])
    with caplog.at_level(logging.INFO, logger="pysched.loadmetrics"):
        for _ in range(4):
            asyncio.run(c.fetch_round(p))
    assert [(r.getMessage(), r.kv["nodes"]) for r in caplog.records if r.levelno == logging.INFO] == [
        ("metrics source up", 0), ("metrics source: nodes with values changed", 2)]


# -- explanations ---------------------------------------------------------------------------------

def test_explain_notes_say_what_was_read_and_which_fallback():
    t, _ = make_tester(TargetLoadPacking, {"a": {"cpu": 10}, "b": {"cpu": 35}})
    state = CycleState()
    trace = CycleTrace()
    state.write("pysched/trace", trace)
    pod = PodInfo.from_dict(make_pod("p", cpu="500m"), keep_raw=True)
    t.plugin.pre_score(state, pod, t.nodes())
    notes = trace.to_dict()["scoreNotes"]["TargetLoadPacking"]
    assert notes["a"].startswith("cpu sample 10.0 (0s old); pending 0m; pod 750m; predicted 28.8% of 4000m")
    assert notes["c"].startswith("cpu no sample: fallback Neutral")


def test_load_variation_fast_path_matches_the_general_one():
    rng = np.random.default_rng(7)
    names = [f"n{i}" for i in range(60)]
    values = {n: lvrb_values(*rng.uniform(0, 120, 4).round(2).tolist()) for n in names}
    for args in ({}, {"safeVarianceSensitivity": 0.5, "safeVarianceMargin": 2}, {"safeVarianceSensitivity": 0}):
        t, _ = make_tester(LoadVariationRiskBalancing, values, args=args, nodes=names)
        pod = PodInfo.from_dict(make_pod("p", cpu="700m", memory="3Gi"), keep_raw=True)
        fast, general = CycleState(), CycleState()
        general.write("pysched/trace", CycleTrace())           # explained cycles take the general path
        assert t.plugin._fast(pod, t.nodes(), T0) is not None
        t.plugin.pre_score(fast, pod, t.nodes())
        t.plugin.pre_score(general, pod, t.nodes())
        assert fast.read("LoadVariationRiskBalancing/preScore")[1].tolist() == \
            general.read("LoadVariationRiskBalancing/preScore")[1].tolist()


def test_target_load_fast_path_matches_the_general_one():
    rng = np.random.default_rng(11)
    names = [f"n{i}" for i in range(80)]
    values = {n: {"cpu": float(v)} for n, v in zip(names, rng.uniform(0, 110, len(names)).round(3), strict=True)}
    t, _ = make_tester(TargetLoadPacking, values, nodes=names)
    for k in range(40):                                        # pending placements on some nodes
        t.plugin.placements.add(f"u{k}", names[k % 13], T0, int(rng.integers(100, 3000)))
    for round_, cpu in enumerate(("100m", "750m", "3", "100m", "750m", "100m")):
        # between rounds placements come and go: the cached scores follow them node by node
        for k in range(5):
            t.plugin.placements.add(f"r{round_}-{k}", names[(round_ * 7 + k) % 80], T0, 500 + 100 * k)
        t.plugin.placements.remove(f"u{round_}")
        pod = PodInfo.from_dict(make_pod("p", cpu=cpu), keep_raw=True)
        fast, general = CycleState(), CycleState()
        general.write("pysched/trace", CycleTrace())           # explained cycles take the general path
        assert t.plugin._fast(150, t.nodes(), T0) is not None
        t.plugin.pre_score(fast, pod, t.nodes())
        t.plugin.pre_score(general, pod, t.nodes())
        assert fast.read("TargetLoadPacking/preScore")[1].tolist() == \
            general.read("TargetLoadPacking/preScore")[1].tolist()


# -- a cycle with no usable load ------------------------------------------------------------------

MS_ARGS = {"metrics": [{"name": "gpu_temp", "query": "gpu_temp_celsius", "min": 30, "max": 90, "weight": 3},
                       {"name": "free_gb", "query": "node_free_gb", "max": 200}]}
NO_LOAD = {  # scenario: (values, age, whether the source is down, the reason every node falls back for)
    "none yet": ({}, 0, False, "missing"),                       # before the first fetch
    "down": ({}, 0, True, "source_down"),
    "down, old samples": ({"a": {"cpu": 10, "cpu_stddev": 1, "memory": 5, "memory_stddev": 1,
                                 "gpu_temp": 40, "free_gb": 9}}, 61, True, "source_down"),
}


@pytest.mark.parametrize("plugin,args", [(TargetLoadPacking, {}), (LoadVariationRiskBalancing, {}),
                                         (MetricScore, MS_ARGS)])
@pytest.mark.parametrize("fallback", ["Neutral", "MinScore", "Requests", "Disable"])
@pytest.mark.parametrize("scenario", NO_LOAD)
def test_no_usable_load_anywhere_skips_the_per_node_work_with_the_same_outcome(monkeypatch, plugin, args,
                                                                                fallback, scenario):
    if plugin is MetricScore and fallback == "Requests":
        return                                                 # refused for MetricScore (see above)
    values, age, down, reason = NO_LOAD[scenario]
    load = StaticLoad({"nodes": values, "ageSeconds": age}, now=T0)
    nodes = [make_node("a", cpu="4", memory="32Gi"), make_node("b", cpu="4", memory="32Gi"),
             make_node("nocpu", cpu="0", memory="32Gi")]
    t = PluginTester(plugin, {"metricProvider": PROM, "fallback": fallback, **args}, nodes=nodes,
                     pods=[make_pod("old", cpu="1", node_name="b")], load=load)
    for s in load.series.values():
        if down:
            s.failed("no answer within 2s")
        elif not values:
            s.replace({}, T0, T0)                                # up, but no node has a sample yet
    pod = PodInfo.from_dict(make_pod("p", cpu="500m", memory="1Gi"), keep_raw=True)
    explained = CycleState()
    explained.write("pysched/trace", CycleTrace())             # explained cycles read every node
    general_status = t.plugin.pre_score(explained, pod, t.nodes())
    assert load.fallbacks == {(plugin.name, reason): 1}
    module = __import__(plugin.__module__, fromlist=["read"])
    if fallback != "Requests":                                 # Requests needs each node's requests
        monkeypatch.setattr(module, "read", lambda *a, **k: pytest.fail("read every node"))
    state = CycleState()
    status = t.plugin.pre_score(state, pod, t.nodes())
    assert load.fallbacks == {(plugin.name, reason): 2}          # counted once more, for this cycle
    assert (status is not None and status.is_skip()) == (general_status is not None and general_status.is_skip())
    key = f"{plugin.name}/preScore"
    fast, general = state.read(key), explained.read(key)
    if fallback == "Disable":
        assert fast is False and general is False
    else:
        assert fast[1].tolist() == general[1].tolist()


def test_slot_values_know_the_oldest_and_newest_sample_over_the_nodes_not_the_spare_slots():
    from pysched.plugins.loadaware.load import SlotValues
    t, load = make_tester(TargetLoadPacking, {"a": {"cpu": 1}, "b": {"cpu": 2}, "c": {"cpu": 3}})
    nodes = t.nodes()
    assert nodes.slot_count > 3                                # the table keeps spare slots
    series = load.series["cpu"]
    series.replace({"a": 1.0, "b": 2.0, "c": 3.0, "gone": 4.0},
                   {"gone": T0 - 99, "c": T0 - 9, "b": T0 - 5, "a": T0 - 30, "other": T0}, T0)
    sv = SlotValues(series)
    sv.refresh(nodes)
    assert (sv.oldest, sv.newest, sv.covered) == (T0 - 30, T0 - 5, 3)
    series.replace({"a": 1.0, "b": 2.0}, {"a": T0 - 30, "b": T0 - 5}, T0)   # c has none: not every node is fresh
    sv.refresh(nodes)
    assert (sv.oldest, sv.newest, sv.covered) == (-np.inf, T0 - 5, 2)
    slot = nodes.slot_index
    assert (sv.values[slot["a"]], sv.times[slot["a"]]) == (1.0, T0 - 30)
    assert (sv.values[slot["b"]], sv.times[slot["b"]]) == (2.0, T0 - 5)
    assert np.isnan(sv.values[slot["c"]]) and sv.times[slot["c"]] == -np.inf     # no longer sampled
    spare = sorted(set(range(nodes.slot_count)) - set(slot.values()))
    assert np.isnan(sv.values[spare]).all() and (sv.times[spare] == -np.inf).all()
    series.replace({}, T0, T0)
    sv.refresh(nodes)
    assert (sv.oldest, sv.newest, sv.covered) == (-np.inf, -np.inf, 0) and np.isnan(sv.values).all()
