"""NodePorts, BalancedAllocation, ImageLocality, volumes, DRA."""

import pytest

from pysched.apis.config import ConfigError
from pysched.framework import decode_args, encode_args
from pysched.framework.cycle_state import CycleState
from pysched.framework.podinfo import PodInfo
from pysched.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from pysched.plugins.image_locality import ImageLocality
from pysched.plugins.node_ports import NodePorts
from pysched.plugins.volume_binding import (
    REASON_BIND_CONFLICT,
    REASON_NODE_CONFLICT,
    REASON_PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    VolumeBinding,
)
from pysched.plugins.volume_zone import VolumeZone
from pysched.testing import UAU, UNS, PluginTester

from .conftest import node, pod

Z = "topology.kubernetes.io/zone"


def test_node_ports_conflicts():
    used = pod("web", node_name="n1", host_ports=[8080])
    udp = pod("dns", node_name="n2")
    udp["spec"]["containers"][0]["ports"] = [{"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                              "hostIP": "10.0.0.1"}]
    hh = PluginTester(NodePorts, nodes=[node("n1"), node("n2"), node("n3")], pods=[used, udp])
    r = hh.filter(pod("p", host_ports=[8080]))
    assert r["n1"] == (UNS, ("node(s) didn't have free ports for the requested pod ports",))
    assert r["n2"] is None and r["n3"] is None
    q = pod("q")
    q["spec"]["containers"][0]["ports"] = [{"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                            "hostIP": "10.0.0.2"}]
    assert hh.filter(q)["n2"] is None                        # same port, other IP
    q["spec"]["containers"][0]["ports"][0]["hostIP"] = "0.0.0.0"
    assert hh.filter(q)["n2"] is not None                    # 0.0.0.0 conflicts with any IP
    q["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    assert hh.filter(q)["n2"] is None                        # other protocol
    assert hh.pre_filter(pod("none")).is_skip()


def balanced(nodes, args=None, *, release=(1, 37), pods=()):
    hh = PluginTester(NodeResourcesBalancedAllocation, args, nodes=nodes, pods=pods)
    hh.handle.kube_version = release
    return hh


def test_balanced_allocation_uses_pod_level_requests():
    """Unlike NodeResourcesFit's score, BalancedAllocation's scorer has the PodLevelResources gate
    (on in 1.35) and no non-zero defaults: pod-level requests count as they are."""
    hh = balanced([node("n", cpu="8", memory="1Gi")], release=(1, 35))
    p = pod("p", cpu=None, memory=None)
    p["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
    assert hh.plugin.pre_score(CycleState(), PodInfo.from_dict(p), hh.nodes()) is None   # not best-effort
    # cpu 1/8, memory 64Mi/1Gi -> std 0.03125 -> 96 (containers' 100m/200Mi would give 90)
    assert hh.score(p) == {"n": 96}
    hh.handle.kube_version = (1, 37)
    # 1.37: 50 + (50 + 96 - 100) / 2 = 73 (containers' values: 50 + (50 + 90 - 100) / 2 = 70)
    assert hh.score(p) == {"n": 73}


def test_balanced_allocation_as_1_35():
    hh = balanced([node("n", cpu="4", memory="8Gi"), node("m", cpu="4", memory="4Gi")], release=(1, 35))
    s = hh.score(pod("p", cpu="2", memory="2Gi"))
    # n: cpu 0.5, mem 0.25 -> std 0.125 -> 87 ; m: 0.5, 0.5 -> 100
    assert s == {"n": 87, "m": 100}


@pytest.mark.parametrize("release", [(1, 36), (1, 37)])
def test_balanced_allocation_scores_the_improvement_from_1_36(release):
    """``50 + (50 + S(with the pod) - S(without it)) / 2``, S = int((1 - std) * 100)."""
    hh = balanced([node("n", cpu="4", memory="8Gi"), node("m", cpu="4", memory="4Gi")], release=release)
    # empty nodes: S(without) = 100. n: S(with) = 87 -> 50 + 37 // 2 = 68; m: 100 -> 75
    assert hh.score(pod("p", cpu="2", memory="2Gi")) == {"n": 68, "m": 75}
    # a node made lopsided by a cpu-only pod (cpu 2/4, memory 0): S(without) = (1 - 0.25) * 100 = 75
    hh = balanced([node("l", cpu="4", memory="4Gi")], release=release,
                  pods=[pod("cpu-hog", cpu="2", memory=None, node_name="l")])
    # a memory-only pod evens it out (0.5, 0.5): S(with) = 100 -> 50 + (50 + 25) // 2 = 87
    assert hh.score(pod("mem", cpu=None, memory="2Gi")) == {"l": 87}
    # a cpu pod makes it worse (0.75, 0): S(with) = 62 -> 50 + (50 - 13) // 2 = 68
    assert hh.score(pod("cpu", cpu="1", memory=None)) == {"l": 68}
    # fractions are capped at 1, with and without the pod: cpu (2 + 3) / 4 -> 1, memory 1Gi/4Gi:
    # S(with) = (1 - 0.375) * 100 = 62 (uncapped it would be 50 -> 69)
    assert hh.score(pod("big", cpu="3", memory="1Gi")) == {"l": 50 + (50 + 62 - 75) // 2}


@pytest.mark.parametrize("release", [(1, 35), (1, 37)])
def test_balanced_allocation_over_three_resources(release):
    """std over every resource the node has; an extended resource the pod does not request is left
    out, as upstream."""
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]}
    hh = balanced([node("g", cpu="4", memory="4Gi", extended={"example.com/gpu": "4"})], args, release=release)
    # with: cpu 1/4, memory 2/4, gpu 4/4 -> mean 7/12, std sqrt(((4/12)^2+(1/12)^2+(5/12)^2)/3)
    # = 0.3118 -> 68; without: all 0 -> 100
    with_pod = int((1 - ((((4 / 12) ** 2 + (1 / 12) ** 2 + (5 / 12) ** 2) / 3) ** 0.5)) * 100)
    want = with_pod if release == (1, 35) else 50 + (50 + with_pod - 100) // 2
    assert hh.score(pod("p", cpu="1", memory="2Gi", extended={"example.com/gpu": "4"})) == {"g": want}
    # without a gpu request: cpu 1/4, memory 2/4 -> std 0.125 -> 87
    want = 87 if release == (1, 35) else 50 + (50 + 87 - 100) // 2
    assert hh.score(pod("q", cpu="1", memory="2Gi")) == {"g": want}


def test_balanced_allocation():
    hh = PluginTester(NodeResourcesBalancedAllocation, nodes=[node("n", cpu="4", memory="8Gi")])
    state = CycleState()
    assert hh.plugin.pre_score(state, PodInfo.from_dict(pod("be", cpu=None, memory=None)), hh.nodes()).is_skip()
    # configured resources: cpu alone has no spread to measure
    cpu_only = balanced([node("n", cpu="4", memory="8Gi")], {"resources": [{"name": "cpu"}]}, release=(1, 35))
    assert cpu_only.score(pod("p", cpu="2", memory="2Gi")) == {"n": 100}
    cpu_only.handle.kube_version = (1, 37)
    assert cpu_only.score(pod("p", cpu="2", memory="2Gi")) == {"n": 75}
    Args = NodeResourcesBalancedAllocation.Args
    assert encode_args(decode_args(Args, {"resources": []}, "args")) == {
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    with pytest.raises(ConfigError,
                       match=r"args.resources\[0\].weight: 2: resource weight of cpu not in valid range \(0, 1\]"):
        decode_args(Args, {"resources": [{"name": "cpu", "weight": 2}]}, "args")
    with pytest.raises(ConfigError, match=r"args.resources\[1\].name: Duplicate value: 'cpu'"):
        decode_args(Args, {"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "args")
    with pytest.raises(ConfigError, match=r"args.kind: expected NodeResourcesBalancedAllocationArgs"):
        decode_args(Args, {"kind": "NodeResourcesFitArgs"}, "args")


def imaged(name, images):
    n = node(name)
    n["status"]["images"] = [{"names": [i], "sizeBytes": s} for i, s in images]
    return n


def test_image_locality():
    mb = 2**20
    nodes = [imaged("has", [("registry.k8s.io/pause:3.10", 500 * mb)]), imaged("none", [])]
    hh = PluginTester(ImageLocality, nodes=nodes)
    s = hh.score(pod("p"))
    # 500MB * (1/2 nodes) = 250MB -> (250-23)/(1000-23)*100 = 23
    assert s["has"] == 100 * (250 * mb - 23 * mb) // (1000 * mb - 23 * mb) and s["none"] == 0


def test_image_locality_counts_image_volumes_as_the_release_does():
    """An image volume's image adds to the sum from 1.36 and to the image count (the upper bound,
    1000 MiB per image) from 1.37."""
    mb = 2**20
    pause, model = "registry.k8s.io/pause:3.10", "example.com/model:v1"
    nodes = [imaged("has", [(pause, 600 * mb), (model, 450 * mb)]), imaged("vol", [(model, 450 * mb)]),
             imaged("none", [])]
    p = pod("p")
    p["spec"]["volumes"] = [{"name": "weights", "image": {"reference": model}}]
    assert PodInfo.from_dict(p).image_volumes == (model,)
    hh = PluginTester(ImageLocality, nodes=nodes)
    # pause: 600MB on 1 of 3 nodes -> 200MB; the model: 450MB on 2 of 3 -> 300MB
    hh.handle.kube_version = (1, 35)   # the container alone, bound 1000MB
    assert hh.score(p) == {"has": 100 * (200 - 23) // (1000 - 23), "vol": 0, "none": 0}          # 18, 0
    hh.handle.kube_version = (1, 36)   # the volume in the sum, bound still 1000MB
    assert hh.score(p) == {"has": 100 * (500 - 23) // (1000 - 23), "vol": 100 * (300 - 23) // (1000 - 23),
                           "none": 0}                                                            # 48, 28
    hh.handle.kube_version = (1, 37)   # two images: bound 2000MB
    assert hh.score(p) == {"has": 100 * (500 - 23) // (2000 - 23), "vol": 100 * (300 - 23) // (2000 - 23),
                           "none": 0}                                                            # 24, 14


def pvc(name, sc="", volume="", phase="Pending", size="1Gi", modes=("ReadWriteOnce",)):
    spec = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if sc:
        spec["storageClassName"] = sc
    meta = {"name": name, "namespace": "default", "uid": f"u-{name}"}
    if volume:
        spec["volumeName"] = volume
        if phase == "Bound":
            meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pv(name, sc="local", node_name=None, zone=None, size="10Gi", claim=None):
    spec = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": sc}
    if node_name:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    labels = {Z: zone} if zone else {}
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"phase": "Bound" if claim else "Available"}}


def sc(name, mode="WaitForFirstConsumer", provisioner="example.com/csi", topo=None):
    out = {"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if topo:
        out["allowedTopologies"] = [{"matchLabelExpressions": [{"key": Z, "values": topo}]}]
    return out


def vpod(*claims):
    p = pod("vp")
    p["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return p


NODES = [node("n1", labels={Z: "a"}), node("n2", labels={Z: "b"})]


def vb(objects):
    return PluginTester(VolumeBinding, nodes=NODES, objects=objects)


def test_volume_binding_prefilter_rejections():
    assert vb([]).pre_filter(vpod("missing")).reasons == ('persistentvolumeclaim "missing" not found',)
    st = vb([pvc("imm", sc="fast"), sc("fast", mode="Immediate")]).pre_filter(vpod("imm"))
    assert st.code == UAU and st.reasons == (UNBOUND_IMMEDIATE,)
    assert vb([pvc("nocls")]).pre_filter(vpod("nocls")).reasons == (UNBOUND_IMMEDIATE,)
    lost = pvc("lost", volume="pv0", phase="Lost")
    assert "bound to non-existent persistentvolume" in vb([lost]).pre_filter(vpod("lost")).message()
    assert vb([]).pre_filter(pod("novol")).is_skip()
    # pre-bound (volumeName without bind-completed) waits for the PV controller, as upstream
    assert vb([pvc("pre", volume="pv1", phase="Pending")]).pre_filter(vpod("pre")).reasons == (UNBOUND_IMMEDIATE,)


def test_bound_pv_node_affinity():
    hh = vb([pvc("c", volume="pv1", phase="Bound"), pv("pv1", node_name="n2", claim="c")])
    r = hh.filter(vpod("c"))
    assert r == {"n1": (UAU, (REASON_NODE_CONFLICT,)), "n2": None}
    gone = vb([pvc("c", volume="nope", phase="Bound")])
    assert gone.filter(vpod("c"))["n1"] == (UAU, (REASON_PV_NOT_EXIST,))


def test_wait_for_first_consumer_static_and_provisioned():
    hh = vb([pvc("c", sc="local"), sc("local", provisioner="kubernetes.io/no-provisioner"), pv("pv1", node_name="n1")])
    r = hh.filter(vpod("c"))
    assert r == {"n1": None, "n2": (UAU, (REASON_BIND_CONFLICT,))}
    small = vb([pvc("c", sc="local", size="100Gi"), sc("local", provisioner="kubernetes.io/no-provisioner"),
                pv("pv1", node_name="n1", size="10Gi")])
    assert small.filter(vpod("c"))["n1"] == (UAU, (REASON_BIND_CONFLICT,))
    dyn = vb([pvc("d", sc="csi"), sc("csi", topo=["b"])])
    assert dyn.filter(vpod("d")) == {"n1": (UAU, (REASON_BIND_CONFLICT,)), "n2": None}


def test_wait_for_first_consumer_claims_do_not_share_a_volume():
    """Two claims on one node need two volumes: the smallest fitting PV goes to the first claim, and
    with no provisioner a node with a single fitting PV cannot take the pod."""
    local = sc("local", provisioner="kubernetes.io/no-provisioner")
    one = vb([pvc("c1", sc="local"), pvc("c2", sc="local"), local, pv("pv1", node_name="n1")])
    assert one.filter(vpod("c1", "c2"))["n1"] == (UAU, (REASON_BIND_CONFLICT,))
    two = vb([pvc("c1", sc="local"), pvc("c2", sc="local"), local,
              pv("big", node_name="n1", size="50Gi"), pv("small", node_name="n1", size="5Gi")])
    assert two.filter(vpod("c1", "c2")) == {"n1": None, "n2": (UAU, (REASON_BIND_CONFLICT,))}
    # the choice PreBind acts on: smallest first, in claim order
    state = CycleState()
    p = PodInfo.from_dict(vpod("c1", "c2"))
    two.plugin.pre_filter(state, p, two.nodes())
    two.plugin.filter(state, p, two.nodes())
    assert state.get("VolumeBinding/state").chosen("n1") == {"default/c1": "small", "default/c2": "big"}


def test_bound_claims_first_failure_decides_the_reason():
    hh = vb([pvc("a", volume="pv1", phase="Bound"), pv("pv1", node_name="n2", claim="a"),
             pvc("b", volume="gone", phase="Bound")])
    r = hh.filter(vpod("a", "b"))
    assert r == {"n1": (UAU, (REASON_NODE_CONFLICT,)), "n2": (UAU, (REASON_PV_NOT_EXIST,))}


def test_volume_binding_args():
    from pysched.framework.args import decode_args, encode_args

    assert encode_args(decode_args(VolumeBinding.Args, None, "args")) == {"bindTimeoutSeconds": 600}
    decoded = decode_args(VolumeBinding.Args, {"kind": "VolumeBindingArgs", "bindTimeoutSeconds": 30,
                                               "shape": [{"utilization": 0, "score": 0}]}, "args")
    assert decoded.bind_timeout_seconds == 30
    with pytest.raises(ConfigError, match=r"^args.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, "
                                          r"should not be a negative value$"):
        decode_args(VolumeBinding.Args, {"bindTimeoutSeconds": -1}, "args")


def test_volume_zone():
    hh = PluginTester(VolumeZone, nodes=NODES + [node("nozone")],
                       objects=[pvc("c", volume="pv1", phase="Bound"), pv("pv1", zone="b", claim="c")])
    r = hh.filter(vpod("c"))
    assert r == {"n1": (UAU, ("node(s) had no available volume zone",)), "n2": None, "nozone": None}
    multi = PluginTester(VolumeZone, nodes=NODES, objects=[pvc("c", volume="pv1", phase="Bound"),
                                                            pv("pv1", zone="a__b", claim="c")])
    assert multi.filter(vpod("c")) == {"n1": None, "n2": None}
    # a PV with the beta zone label against nodes labelled with the GA key only
    beta = pv("pv1", claim="c")
    beta["metadata"]["labels"] = {"failure-domain.beta.kubernetes.io/zone": "b"}
    translated = PluginTester(VolumeZone, nodes=NODES, objects=[pvc("c", volume="pv1", phase="Bound"), beta])
    assert translated.filter(vpod("c")) == {"n1": (UAU, ("node(s) had no available volume zone",)), "n2": None}
