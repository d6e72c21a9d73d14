"""The policy plugins (GPU, CapacityType, InstanceType, AZSpread), tested with the public testing kit
only (``pysched.testing``), as a user's plugin package is."""

import itertools

import pytest

from pysched.framework import Code, CycleState, PodInfo, decode_args, encode_args
from pysched.framework.api import ConfigError
from pysched.testing import PluginTester, make_node, make_pod
from pysched_policy import GPU, AZSpread, CapacityType, InstanceType

Z = "topology.kubernetes.io/zone"
_uid = itertools.count(1)


def node(name, **kw):
    return make_node(name, **kw)


def pod(name, **kw):
    p = make_pod(name, **kw)
    p["metadata"]["uid"] = f"uid-{name}-{next(_uid)}"
    return p


def test_gpu_scores():
    nodes = [node("gpu", extended={"nvidia.com/gpu": "4"}), node("cpu")]
    hh = PluginTester(GPU, nodes=nodes)
    assert hh.score(pod("trainer", extended={"nvidia.com/gpu": "1"})) == {"gpu": 50, "cpu": 50}
    assert hh.score(pod("web")) == {"gpu": 0, "cpu": 100}
    # limits-only request counts; a zero request is no demand
    assert hh.score(pod("lim", cpu=None, memory=None, limits_only={"nvidia.com/gpu": "1"})) == {"gpu": 50, "cpu": 50}
    zero = pod("zero")
    zero["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0"
    assert hh.score(zero) == {"gpu": 0, "cpu": 100}
    init = pod("init", init_containers=[{"name": "i", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    assert hh.score(init)["cpu"] == 50
    custom = PluginTester(GPU, {"resourceNames": ["amd.com/gpu"]},
                          nodes=[node("amd", extended={"amd.com/gpu": "1"}), node("x")])
    assert custom.score(pod("w")) == {"amd": 0, "x": 100}
    with pytest.raises(ConfigError, match=r"resourceNames\[0\]"):
        decode_args(GPU.Args, {"resourceNames": ["gpu"]}, "args")
    assert encode_args(decode_args(GPU.Args, {"resourceNames": []}, "args")) == {
        "resourceNames": ["nvidia.com/gpu"], "deviceClassNames": ["gpu.nvidia.com"], "draDrivers": ["gpu.nvidia.com"]}
    with pytest.raises(ConfigError, match=r"args.draDrivers\[0\]: must be a non-empty string"):
        decode_args(GPU.Args, {"draDrivers": [""]}, "args")


def test_gpu_score_counts_dra_gpus():
    """DRA: a claim on a GPU DeviceClass makes a GPU pod; a GPU driver's ResourceSlice a GPU node."""
    gpu_slice = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                 "spec": {"driver": "gpu.nvidia.com", "nodeName": "dra", "devices": [{"name": "gpu-0"}],
                          "pool": {"name": "dra", "generation": 1, "resourceSliceCount": 1}}}

    def claim(name, cls):
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]}}}

    def claiming(name, claim_name=None, template_status=None):
        p = pod(name)
        if claim_name:
            p["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": claim_name}]
        if template_status:
            p["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": "t"}]
            p["status"] = {"resourceClaimStatuses": [{"name": "c", "resourceClaimName": template_status}]}
        return p

    hh = PluginTester(GPU, nodes=[node("dra"), node("cpu")],
                      objects=[gpu_slice, claim("gpus", "gpu.nvidia.com"), claim("nics", "nic.example.com"),
                               claim("from-template", "gpu.nvidia.com")])
    assert hh.score(pod("web")) == {"dra": 0, "cpu": 100}
    assert hh.score(claiming("trainer", "gpus")) == {"dra": 50, "cpu": 50}
    assert hh.score(claiming("net", "nics")) == {"dra": 0, "cpu": 100}
    assert hh.score(claiming("t", template_status="from-template")) == {"dra": 50, "cpu": 50}
    hh.objects.apply("resourceslices", "DELETED", gpu_slice)
    assert hh.score(pod("web")) == {"dra": 100, "cpu": 100}
    # a node that joins later, with its slice: known at once
    hh.add_node(node("late"))
    late = {**gpu_slice, "metadata": {"name": "late"}, "spec": {**gpu_slice["spec"], "nodeName": "late"}}
    hh.objects.add(late)
    assert hh.score(pod("web")) == {"dra": 100, "cpu": 100, "late": 0}


def test_capacity_type():
    nodes = [node("k-spot", labels={"karpenter.sh/capacity-type": "spot"}),
             node("k-od", labels={"karpenter.sh/capacity-type": "on-demand"}),
             node("k-res", labels={"karpenter.sh/capacity-type": "reserved"}),
             node("eks-spot", labels={"eks.amazonaws.com/capacityType": "SPOT"}),
             node("eks-od", labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"}),
             node("legacy", labels={"node.kubernetes.io/lifecycle": "spot"}),
             node("plain")]
    hh = PluginTester(CapacityType, nodes=nodes)
    spot = hh.score(pod("s", labels={"lifecycle-preference": "spot"}))
    assert spot == {"k-spot": 100, "k-od": 0, "k-res": 0, "eks-spot": 100, "eks-od": 0, "legacy": 50, "plain": 50}
    od = hh.score(pod("o", labels={"lifecycle-preference": "on-demand"}))
    assert od["k-res"] == 100 and od["eks-od"] == 100 and od["k-spot"] == 0
    assert set(hh.score(pod("n", labels={"lifecycle-preference": "cheap"})).values()) == {50}
    assert set(hh.score(pod("none")).values()) == {50}
    # configured labels: the first one a node carries decides; an unknown value is neutral
    custom = PluginTester(CapacityType, {"podLabel": "wants", "nodeLabels": [
        {"key": "pool", "values": {"cheap": "spot", "steady": "on-demand"}}, {"key": "karpenter.sh/capacity-type"}]},
        nodes=nodes + [node("pool-cheap", labels={"pool": "cheap", "karpenter.sh/capacity-type": "on-demand"}),
                       node("pool-odd", labels={"pool": "odd", "karpenter.sh/capacity-type": "spot"})])
    s = custom.score(pod("c", labels={"wants": "spot"}))
    assert (s["pool-cheap"], s["pool-odd"], s["k-spot"], s["eks-spot"]) == (100, 50, 50, 50)


def test_capacity_type_args():
    from pysched.framework.args import decode_args, encode_args

    defaults = encode_args(decode_args(CapacityType.Args, {"podLabel": "", "nodeLabels": []}, "args"))
    assert defaults["podLabel"] == "lifecycle-preference"
    assert [e["key"] for e in defaults["nodeLabels"]] == ["karpenter.sh/capacity-type",
                                                          "eks.amazonaws.com/capacityType"]
    with pytest.raises(ConfigError, match=r"args.nodeLabels\[0\].key: Required value"):
        decode_args(CapacityType.Args, {"nodeLabels": [{"values": {"a": "spot"}}]}, "args")
    with pytest.raises(ConfigError, match=r"args.nodeLabels\[0\].values\[a\]: 'cheap' must be"):
        decode_args(CapacityType.Args, {"nodeLabels": [{"key": "k", "values": {"a": "cheap"}}]}, "args")


def test_instance_type():
    from pysched.framework.args import decode_args, encode_args

    args = {"preferences": [{"prefix": "c5.", "score": 100}, {"prefix": "m5.", "score": 50},
                            {"prefix": "r5.", "score": 30}, {"exact": "c5.metal", "score": 5}], "defaultScore": 10}
    it = "node.kubernetes.io/instance-type"
    nodes = [node("c", labels={it: "c5.xlarge"}), node("m", labels={it: "m5.large"}),
             node("r", labels={it: "r5.2xlarge"}), node("metal", labels={it: "c5.metal"}),
             node("p", labels={it: "p3.2xlarge"}), node("none")]
    hh = PluginTester(InstanceType, args, nodes=nodes)
    assert hh.score(pod("x")) == {"c": 100, "m": 50, "r": 30, "metal": 5, "p": 10, "none": 10}
    assert set(PluginTester(InstanceType, nodes=nodes).score(pod("y")).values()) == {0}
    with pytest.raises(ConfigError, match=r"preferences\[0\].score"):
        decode_args(InstanceType.Args, {"preferences": [{"prefix": "c5", "score": 101}]}, "args")
    with pytest.raises(ConfigError, match=r"preferences\[0\]: exactly one"):
        decode_args(InstanceType.Args, {"preferences": [{"score": 1}]}, "args")
    with pytest.raises(ConfigError, match=r"preferences\[0\].score: Required value"):
        decode_args(InstanceType.Args, {"preferences": [{"prefix": "c5"}]}, "args")
    with pytest.raises(ConfigError, match=r"preferences\[0\].prefix: must not be empty"):
        decode_args(InstanceType.Args, {"preferences": [{"prefix": "", "score": 1}]}, "args")
    assert encode_args(decode_args(InstanceType.Args, args, "args")) == {
        "label": "node.kubernetes.io/instance-type", "preferences": args["preferences"], "defaultScore": 10}


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": True}


def az_nodes():
    return [node(f"{z}{i}", labels={Z: z}) for z in "abc" for i in (1, 2)]


def test_az_spread_formula_counts_assumed_and_empty_zones():
    pods = [pod(f"w{i}", node_name=n, owner=OWNER) for i, n in enumerate(["a1", "a2", "b1"])]
    hh = PluginTester(AZSpread, nodes=az_nodes(), pods=pods)
    s = hh.score(pod("new", owner=OWNER))
    # counts a=2 b=1 c=0, max 2: a 0, b 50, c 100
    assert s == {"a1": 0, "b1": 50, "c1": 100, "a2": 0, "b2": 50, "c2": 100}
    hh.assume(pod("inflight", owner=OWNER), "c1")   # assumed, not yet bound
    s = hh.score(pod("new2", owner=OWNER))
    assert s["c1"] == 50 and s["b1"] == 50 and s["a1"] == 0
    # pods of another owner do not count; an ownerless pod is alone
    assert set(hh.score(pod("stranger")).values()) == {100}


def test_az_spread_label_selector_and_keys():
    pods = [pod("x1", node_name="a1", labels={"team": "t", "app": "api"}),
            pod("x2", node_name="b1", labels={"team": "t", "app": "web"})]
    by_sel = PluginTester(AZSpread, {"labelSelector": {"matchLabels": {"team": "t"}}}, nodes=az_nodes(), pods=pods)
    assert by_sel.score(pod("p"))["c1"] == 100 and by_sel.score(pod("p"))["a1"] == 0
    by_keys = PluginTester(AZSpread, {"workloadLabelKeys": ["app"]}, nodes=az_nodes(), pods=pods)
    s = by_keys.score(pod("q", labels={"app": "api"}))
    assert s["a1"] == 0 and s["b1"] == 100


def test_az_spread_node_without_zone_is_an_error():
    hh = PluginTester(AZSpread, nodes=az_nodes() + [node("nozone")])
    st = hh.plugin.pre_score(CycleState(), PodInfo.from_dict(pod("p", owner=OWNER)), hh.nodes())
    assert st.code == Code.ERROR and "nozone" in st.message()
    zoneless = PluginTester(AZSpread, nodes=[node("x"), node("y")])
    assert zoneless.plugin.pre_score(CycleState(), PodInfo.from_dict(pod("p")), zoneless.nodes()).is_skip()


def test_az_spread_args():
    from pysched.framework import decode_args, encode_args

    assert encode_args(decode_args(AZSpread.Args, None, "args")) == {"zoneLabel": Z, "nodesWithoutZone": "Error"}
    given = {"zoneLabel": "example.com/rack", "labelSelector": {"matchLabels": {"team": "t"}},
             "workloadLabelKeys": ["app"], "nodesWithoutZone": "Error"}
    assert encode_args(decode_args(AZSpread.Args, given, "args")) == given
    assert decode_args(AZSpread.Args, {"zoneLabel": ""}, "args").zone_label == Z
    for raw, error in [({"nodesWithoutZone": "Ignore"}, "args.nodesWithoutZone: 'Ignore' is not one of Error"),
                       ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
                        "args.labelSelector.matchExpressions[0]"),
                       ({"zoneLabels": "x"}, "args.zoneLabels: unknown field")]:
        with pytest.raises(ConfigError) as err:
            decode_args(AZSpread.Args, raw, "args")
        assert str(err.value).startswith(error)


def test_az_spread_zone_label_arg():
    rack = [node(f"{r}{i}", labels={"example.com/rack": r}) for r in "xy" for i in (1, 2)]
    pods = [pod("w1", node_name="x1", owner=OWNER)]
    hh = PluginTester(AZSpread, {"zoneLabel": "example.com/rack"}, nodes=rack, pods=pods)
    assert hh.score(pod("new", owner=OWNER)) == {"x1": 0, "y1": 100, "x2": 0, "y2": 100}


def test_the_reports_read_node_types_as_the_plugins_do():
    """simulate's report groups nodes by capacity and instance type with the plugins' default labels."""
    from pysched.tools import report_data
    from pysched_policy import capacity_type, instance_type

    assert report_data.CAPACITY_TYPE_LABELS == capacity_type.DEFAULT_NODE_LABELS
    assert report_data.INSTANCE_TYPE_LABEL == instance_type.LABEL
