"""NodeResourcesFit: filter reasons/codes and the three scoring strategies, batch == per-node."""

import pytest

from pysched.apis.config import ConfigError
from pysched.framework import decode_args, encode_args
from pysched.plugins.node_resources_fit import NodeResourcesFit
from pysched.testing import UAU, UNS, PluginTester

from .conftest import node, pod

GI = 2**30


def h(nodes, pods=(), args=None, ignored=()):
    return PluginTester(NodeResourcesFit, args, nodes=nodes, pods=pods, ignored_extended_resources=ignored)


def test_fits_and_insufficient_reasons():
    hh = h([node("big", cpu="4", memory="8Gi"), node("small", cpu="1", memory="1Gi")],
           [pod("used", cpu="3500m", memory="1Gi", node_name="big", scheduler="other")])
    r = hh.filter(pod("p", cpu="1", memory="2Gi"))
    assert r["big"] == (UNS, ("Insufficient cpu",))            # 4 - 3.5 < 1, counts another scheduler's pod
    assert r["small"] == (UAU, ("Insufficient memory",))       # 2Gi > 1Gi allocatable: unresolvable
    assert h([node("n", cpu="4", memory="8Gi")]).filter(pod("p", cpu="1", memory="2Gi"))["n"] is None


def test_all_reasons_reported_and_too_many_pods():
    hh = h([node("n", cpu="1", memory="1Gi", pods="1")], [pod("x", cpu="500m", memory="10Mi", node_name="n")])
    code, reasons = hh.filter(pod("p", cpu="1", memory="2Gi"))["n"]
    assert set(reasons) == {"Too many pods", "Insufficient cpu", "Insufficient memory"}
    assert code == UAU  # memory request exceeds the whole node


def test_zero_request_pod_only_needs_a_pod_slot():
    hh = h([node("full", cpu="1", memory="1Gi")], [pod("x", cpu="1", memory="1Gi", node_name="full")])
    assert hh.filter(pod("p", cpu="0", memory="0"))["full"] is None
    assert hh.filter(pod("p2", cpu=None, memory=None))["full"] is None


def test_extended_resources_and_limits_only():
    hh = h([node("gpu", extended={"nvidia.com/gpu": "2"}), node("cpu")],
           [pod("x", node_name="gpu", extended={"nvidia.com/gpu": "1"})])
    r = hh.filter(pod("p", limits_only={"nvidia.com/gpu": "2"}, cpu=None, memory=None))
    assert r["gpu"] == (UNS, ("Insufficient nvidia.com/gpu",))   # 2 - 1 left < 2 (limit-only becomes request)
    assert r["cpu"] == (UAU, ("Insufficient nvidia.com/gpu",))
    assert hh.filter(pod("q", extended={"nvidia.com/gpu": "1"}))["gpu"] is None


def test_ignored_resources_and_groups():
    n = [node("cpu-only")]
    p = pod("p", extended={"example.com/foo": "1", "vendor.io/bar": "1"})
    assert h(n).filter(p)["cpu-only"][1] != ()
    args = {"ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["vendor.io"]}
    assert h(n, args=args).filter(p)["cpu-only"] is None
    # extenders' managedResources with ignoredByScheduler arrive through the handle
    hh = h(n, args={"ignoredResources": ["example.com/foo"]}, ignored=["vendor.io/bar"])
    assert hh.filter(p)["cpu-only"] is None


def test_ephemeral_storage_and_overhead_and_init_containers():
    hh = h([node("n", cpu="4", memory="4Gi", ephemeral_storage="10Gi")], [pod("x", cpu="2", node_name="n")])
    p = pod("p", cpu="100m", memory="100Mi", overhead={"cpu": "1950m"})
    assert hh.filter(p)["n"] == (UNS, ("Insufficient cpu",))  # 100m + 1950m overhead > 2 left
    assert hh.filter(pod("p1", cpu="100m", memory="100Mi", overhead={"cpu": "1850m"}))["n"] is None
    p2 = pod("p2", cpu="100m", init_containers=[{"name": "i", "image": "x",
                                                 "resources": {"requests": {"ephemeral-storage": "20Gi"}}}])
    assert hh.filter(p2)["n"] == (UAU, ("Insufficient ephemeral-storage",))


def test_least_allocated_score():
    # cpu: (4000-(1000+500))*100/4000 = 62; mem: (8Gi-(2Gi+1Gi))*100/8Gi = 62 -> 62
    hh = h([node("a", cpu="4", memory="8Gi"), node("b", cpu="8", memory="8Gi")],
           [pod("x", cpu="1", memory="2Gi", node_name="a")])
    s = hh.score(pod("p", cpu="500m", memory="1Gi"))
    assert s["a"] == (62 + 62) // 2
    assert s["b"] == ((8000 - 500) * 100 // 8000 + (8 * GI - GI) * 100 // (8 * GI)) // 2


def test_non_zero_defaults_in_scoring():
    hh = h([node("a", cpu="1", memory="1Gi")])
    # no requests: scored as 100m / 200Mi
    s = hh.score(pod("p", cpu=None, memory=None))
    assert s["a"] == ((1000 - 100) * 100 // 1000 + (GI - 200 * 2**20) * 100 // GI) // 2


def test_most_allocated_and_weights():
    args = {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 3},
                                                                       {"name": "memory", "weight": 1}]}}
    hh = h([node("a", cpu="4", memory="8Gi")], [pod("x", cpu="2", memory="2Gi", node_name="a")], args=args)
    s = hh.score(pod("p", cpu="1", memory="2Gi"))
    assert s["a"] == (3 * (3000 * 100 // 4000) + 1 * (4 * GI * 100 // (8 * GI))) // 4


def test_requested_to_capacity_ratio():
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "cpu", "weight": 1}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}
    hh = h([node("a", cpu="4"), node("b", cpu="10")], args=args)
    s = hh.score(pod("p", cpu="1"))
    assert s["a"] == 25 and s["b"] == 10


def test_scalar_resource_scored_only_when_requested():
    args = {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]}}
    hh = h([node("g", cpu="4", extended={"nvidia.com/gpu": "4"})], args=args)
    no_gpu = hh.score(pod("p", cpu="1", memory=None))["g"]
    assert no_gpu == 75  # only cpu counted
    with_gpu = hh.score(pod("q", cpu="1", memory=None, extended={"nvidia.com/gpu": "2"}))["g"]
    assert with_gpu == (75 + 50) // 2


@pytest.mark.parametrize("args,field", [
    ({"scoringStrategy": {"type": "Nope"}}, "scoringStrategy.type"),
    ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}}, "scoringStrategy.resources[0].weight"),
    ({"ignoredResourceGroups": ["a/b"]}, "ignoredResourceGroups[0]"),
    ({"ignoredResourceGroups": [""]},
     "ignoredResourceGroups[0]: '' is not a valid group name: name part must be non-empty"),
    ({"ignoredResources": ["example.com/my gpu"]},
     "ignoredResources[0]: 'example.com/my gpu' is not a valid resource name: name part must consist of"),
    ({"ignoredResources": ["Example.com/gpu"]}, "ignoredResources[0]: 'Example.com/gpu' is not a valid resource name: "
                                                "prefix part a lowercase RFC 1123 subdomain"),
    ({"ignoredResources": ["x" * 64]}, "ignoredResources[0]"),
    # kube-scheduler 1.36's validation of the strategy's parameters
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     "scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is "
     "RequestedToCapacityRatio"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified"),
    ({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}}, "shape[1].utilization"),
    ({"bogus": 1}, "args.bogus"),
    ({"kind": "OtherArgs"}, "args.kind: expected NodeResourcesFitArgs"),
    ({"scoringStrategy": {"resources": [{"weight": 2}]}}, "scoringStrategy.resources[0].name: Required value"),
    ({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}},
     "scoringStrategy.resources[1].name: Duplicate value: 'cpu'"),
    ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": -3}]}},
     "scoringStrategy.resources[0].weight: -3: resource weight of cpu not in valid range"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 11}]}}}, "shape[0].score: must be <= 10"),
])
def test_bad_args_name_the_field(args, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        decode_args(NodeResourcesFit.Args, args, "args")


def test_args_defaults_and_wire_form():
    default = decode_args(NodeResourcesFit.Args, None, "args")
    cpu_mem = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    assert encode_args(default) == {"scoringStrategy": {"type": "LeastAllocated", "resources": cpu_mem}}
    # an empty resources list gets the defaults; weight 0 (or none) means 1, as upstream's defaulting
    empty = decode_args(NodeResourcesFit.Args, {"scoringStrategy": {"resources": []}}, "args")
    assert encode_args(empty) == encode_args(default)
    raw = {"kind": "NodeResourcesFitArgs", "ignoredResources": ["example.com/foo"],
           "scoringStrategy": {"type": "RequestedToCapacityRatio",
                               "resources": [{"name": "cpu"}, {"name": "memory", "weight": 0}],
                               "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                      {"utilization": 100, "score": 0}]}}}
    a = decode_args(NodeResourcesFit.Args, raw, "args")
    out = encode_args(a)
    assert out == {"ignoredResources": ["example.com/foo"],
                   "scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": cpu_mem,
                                       "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                              {"utilization": 100, "score": 0}]}}}
    assert decode_args(NodeResourcesFit.Args, out, "args") == a
    # the decoded shape drives the score: utilisation 25% on "a" -> 10 - 2.5 -> 75
    hh = h([node("a", cpu="4", memory="4Gi")], args=raw)
    assert hh.score(pod("p", cpu="1", memory="1Gi"))["a"] == 75


def _pod_level(name, cpu="1", memory="64Mi", **kw):
    """A pod whose only requests are pod-level ``spec.resources`` (its container states none)."""
    p = pod(name, cpu=None, memory=None, **kw)
    p["spec"]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    return p


def test_score_counts_container_requests_not_pod_level_ones():
    """kube-scheduler 1.35 builds the scoring strategies without the PodLevelResources gate: the
    score sees the containers' requests (100m / 200Mi non-zero defaults), the filter the pod-level."""
    nodes = [node("cpu-heavy", cpu="8", memory="1Gi"), node("mem-heavy", cpu="4", memory="16Gi")]
    hh = h(nodes)
    got = hh.score(_pod_level("p"))
    # LeastAllocated of (100m, 200Mi): cpu-heavy (7900/8000, 824/1024) -> (98 + 80) // 2; mem-heavy -> (97 + 98) // 2
    assert got == {"cpu-heavy": (98 + 80) // 2, "mem-heavy": (97 + 98) // 2}
    # the same pod asking its containers for 1 cpu / 64Mi is scored on those
    assert hh.score(pod("q", cpu="1", memory="64Mi")) == {"cpu-heavy": (87 + 93) // 2, "mem-heavy": (75 + 99) // 2}
    # MostAllocated and RequestedToCapacityRatio read the same requests
    most = h(nodes, args={"scoringStrategy": {"type": "MostAllocated"}}).score(_pod_level("r"))
    assert most == {"cpu-heavy": (1 + 19) // 2, "mem-heavy": (2 + 1) // 2}
    # the filter still uses the pod-level requests
    small = h([node("small", cpu="500m", memory="1Gi")])
    assert small.filter(_pod_level("s"))["small"] == (UAU, ("Insufficient cpu",))


def test_pod_level_requests_score_view_of_containers():
    from pysched.framework.podinfo import PodInfo
    plain = PodInfo.from_dict(pod("plain", cpu="250m", memory="1Gi"))
    assert plain.fit_score_requests is None          # the common case costs nothing
    two = pod("two", cpu="300m", memory=None)
    two["spec"]["containers"].append({"name": "d", "image": "x", "resources": {"requests": {"memory": "1Gi"}}})
    two["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "3Gi"}}
    info = PodInfo.from_dict(two)
    assert info.requests["cpu"] == 2000 and info.requests["memory"] == 3 * GI       # pod-level for the filter
    reqs, cpu, mem = info.fit_score_requests
    assert (cpu, mem) == (300 + 100, 200 * 2**20 + GI)                               # containers, non-zero defaults
