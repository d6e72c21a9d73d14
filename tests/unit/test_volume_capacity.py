"""VolumeBinding's storage capacity (Filter, all releases) and capacity scoring (StorageCapacityScoring:
kube 1.37's default, with its ``shape`` defaulted and validated as kube does), and NodeVolumeLimits'
Portworx migration (always on from 1.36) and VolumeLimitScaling (1.37's default)."""

from __future__ import annotations

import pytest

from pysched.apis import config as configmod
from pysched.apis.config import ConfigError
from pysched.backend.cache.cache import SchedulerCache
from pysched.framework import CycleState
from pysched.framework.args import dump_args, load_args
from pysched.framework.features import STORAGE_CAPACITY_SCORING, VOLUME_LIMIT_SCALING, default_gates
from pysched.framework.podinfo import PodInfo
from pysched.plugins.helper.shape import broken_linear
from pysched.plugins.helper.volumes import csi_driver_hint, storage_capacity_hint
from pysched.plugins.node_volume_limits import NodeVolumeLimits
from pysched.plugins.volume_binding import (
    REASON_BIND_CONFLICT,
    REASON_NOT_ENOUGH_SPACE,
    VolumeBinding,
    VolumeBindingArgs,
)
from pysched.profile import build_frameworks, default_registry
from pysched.testing import UAU, UNS, PluginTester, ProfileHarness

from .conftest import node, pod

DRIVER = "hostpath.csi.example.com"
GI = 1024 ** 3
ON = frozenset({STORAGE_CAPACITY_SCORING})
OFF: frozenset[str] = frozenset()
SHAPE_OFF = ("args.shape: Invalid value: {}: unexpected field `shape`, remove it or turn on the feature gate "
             "StorageCapacityScoring")


def nodes3():
    return [node(f"n{i}", labels={"pool": f"p{i}"}) for i in (1, 2, 3)]


def storage_class(name="fast", provisioner=DRIVER, topologies=None):
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
          "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}
    if topologies is not None:
        sc["allowedTopologies"] = topologies
    return sc


def csi_driver(name=DRIVER, capacity=True, **spec):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"storageCapacity": capacity, **spec}}


def capacity(name, pool, cap, cls="fast", maximum=None, topology=True):
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
           "metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": cls}
    if cap is not None:
        obj["capacity"] = cap
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    if topology:
        obj["nodeTopology"] = {"matchLabels": {"pool": pool}}
    return obj


def claim(name, size="1Gi", cls="fast"):
    spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": cls}
    if size is not None:
        spec["resources"] = {"requests": {"storage": size}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def local_pv(name, on, size, cls="fast"):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "pool", "operator": "In", "values": [on]}]}]}}},
            "status": {"phase": "Available"}}


def with_claims(p, *names):
    p["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(names)]
    return p


def binding(objects, *, gates=ON, args=None):
    return PluginTester(VolumeBinding, args, nodes=nodes3(), objects=objects, feature_gates=gates)


def scores(hh, raw_pod):
    """PreFilter, Filter, PreScore and Score as the framework runs them: ``None`` when PreScore skips."""
    pl = hh.plugin
    p = PodInfo.from_dict(raw_pod, keep_raw=True)
    state = CycleState()
    nodes = hh.nodes()
    _, st = pl.pre_filter(state, p, nodes)
    assert st is None, st
    res = pl.filter(state, p, nodes)
    feasible = nodes.subset(res.passed)
    st = pl.pre_score(state, p, feasible)
    if st is not None and st.is_skip():
        return None
    return dict(zip(feasible.names, pl.score(state, p, feasible).tolist()))


# -- VolumeBindingArgs: shape defaulted and validated per the gate ------------------------------

def test_shape_is_defaulted_only_with_storage_capacity_scoring():
    on = load_args(VolumeBindingArgs, None, "args", ON)
    assert dump_args(on) == {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "VolumeBindingArgs",
                             "bindTimeoutSeconds": 600,
                             "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}
    # an empty list is defaulted too (len(obj.Shape) == 0)
    assert dump_args(load_args(VolumeBindingArgs, {"shape": []}, "args", ON))["shape"] == dump_args(on)["shape"]
    given = load_args(VolumeBindingArgs, {"shape": [{"utilization": 50, "score": 3}]}, "args", ON)
    assert dump_args(given)["shape"] == [{"utilization": 50, "score": 3}]
    assert "shape" not in dump_args(load_args(VolumeBindingArgs, None, "args", OFF))


@pytest.mark.parametrize(("shape", "printed"), [
    ([{"utilization": 0, "score": 10}], '[{"Utilization":0,"Score":10}]'),
    ([], "[]"),
])
def test_shape_is_refused_without_the_gate_even_empty(shape, printed):
    with pytest.raises(ConfigError) as e:
        load_args(VolumeBindingArgs, {"shape": shape}, "args", OFF)
    assert str(e.value) == SHAPE_OFF.format(printed)
    # shape: null is no shape
    assert load_args(VolumeBindingArgs, {"shape": None}, "args", OFF).shape is None


@pytest.mark.parametrize(("shape", "message"), [
    ([{"utilization": 101, "score": 3}], "args.shape[0].utilization: Invalid value: 101: not in valid range [0, 100]"),
    ([{"utilization": -1, "score": 3}], "args.shape[0].utilization: Invalid value: -1: not in valid range [0, 100]"),
    ([{"utilization": 1, "score": 11}], "args.shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
    ([{"utilization": 10, "score": 1}, {"utilization": 10, "score": 2}],
     "args.shape[1].utilization: Invalid value: 10: values must be sorted in increasing order"),
    # every problem, in kube's order, aggregated as kube prints several
    ([{"utilization": 50, "score": 11}, {"utilization": 40, "score": -1}],
     "[args.shape[1].utilization: Invalid value: 40: values must be sorted in increasing order, "
     "args.shape[0].score: Invalid value: 11: not in valid range [0, 10], "
     "args.shape[1].score: Invalid value: -1: not in valid range [0, 10]]"),
])
def test_shape_is_validated_as_validate_function_shape(shape, message):
    with pytest.raises(ConfigError) as e:
        load_args(VolumeBindingArgs, {"shape": shape}, "args", ON)
    assert str(e.value) == message


def test_negative_bind_timeout_has_kubes_words():
    with pytest.raises(ConfigError) as e:
        load_args(VolumeBindingArgs, {"bindTimeoutSeconds": -1}, "args", ON)
    assert str(e.value) == "args.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a " \
                           "negative value"


@pytest.mark.parametrize(("release", "accepted"), [((1, 35), False), ((1, 36), False), ((1, 37), True)])
def test_profiles_validate_shape_with_their_releases_gates(release, accepted):
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [
        {"schedulerName": "x", "pluginConfig": [{"name": "VolumeBinding", "args": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}]}]})

    def build(gates=None):
        return build_frameworks(cfg, default_registry(), cache=SchedulerCache(), client=None, recorder=None,
                                kube_version=release, feature_gates=gates)
    if accepted:
        assert build()["x"].plugin_args["VolumeBinding"].shape[1].score == 10
    else:
        with pytest.raises(ConfigError, match=r"^profiles\[0\]\.pluginConfig\[0\]\.args\.shape: Invalid value: "
                                              r"\[\{\"Utilization\":0,\"Score\":0\},.*turn on the feature gate "
                                              r"StorageCapacityScoring$"):
            build()
        # the gate turned on at that release (kube: --feature-gates StorageCapacityScoring=true)
        assert build(default_gates(release) | ON)["x"].plugin_args["VolumeBinding"].shape[0].score == 0


def test_broken_linear_truncates_toward_zero_like_go():
    shape = [(0, 100), (100, 0)]
    assert [broken_linear(shape, p) for p in (0, 1, 33, 99, 100, 150)] == [100, 99, 67, 1, 0, 0]
    rising = [(10, 0), (20, 30), (80, 90)]
    assert [broken_linear(rising, p) for p in (0, 10, 11, 15, 21, 79, 80, 95)] == [0, 0, 3, 15, 31, 89, 90, 90]


# -- Filter: storage capacity (CSIStorageCapacity), every release --------------------------------

def test_provisioning_needs_a_capacity_with_room_on_the_node_when_the_driver_tracks_it():
    objects = [storage_class(), csi_driver(), claim("c", "5Gi"),
               capacity("c1", "p1", "10Gi"), capacity("c2", "p2", "4Gi"),
               capacity("c3", "p3", "100Gi", maximum="2Gi")]   # maximumVolumeSize is the limit when set
    for gates in (ON, OFF):
        assert binding(objects, gates=gates).filter(with_claims(pod("p"), "c")) == {
            "n1": None, "n2": (UAU, (REASON_NOT_ENOUGH_SPACE,)), "n3": (UAU, (REASON_NOT_ENOUGH_SPACE,))}


@pytest.mark.parametrize("objects", [
    [storage_class(), claim("c", "5Gi")],                                    # no CSIDriver: not a CSI driver
    [storage_class(), csi_driver(capacity=False), claim("c", "5Gi")],        # the driver does not track it
    [storage_class(), csi_driver(), claim("c", None)],                       # no storage request
], ids=["no-driver", "not-tracked", "no-request"])
def test_capacity_is_not_checked_unless_the_driver_tracks_it_and_the_claim_requests_storage(objects):
    assert binding(objects).filter(with_claims(pod("p"), "c")) == {"n1": None, "n2": None, "n3": None}


def test_capacity_without_topology_or_of_another_class_gives_no_room():
    objects = [storage_class(), csi_driver(), claim("c"), capacity("c1", "p1", "10Gi", topology=False),
               capacity("c2", "p2", "10Gi", cls="slow"), capacity("c3", "p3", "10Gi")]
    assert binding(objects).filter(with_claims(pod("p"), "c")) == {
        "n1": (UAU, (REASON_NOT_ENOUGH_SPACE,)), "n2": (UAU, (REASON_NOT_ENOUGH_SPACE,)), "n3": None}


def test_the_first_claim_that_cannot_be_provisioned_decides_the_reason():
    """Claims are checked smallest request first; the first failure returns (checkVolumeProvisions)."""
    topo = [{"matchLabelExpressions": [{"key": "pool", "values": ["p1", "p2"]}]}]
    objects = [storage_class(), storage_class("zoned", topologies=topo), csi_driver(),
               claim("big", "8Gi"), claim("small", "1Gi", cls="zoned"),
               capacity("c1", "p1", "4Gi"), capacity("c3", "p3", "4Gi")]
    # n1: small (zoned, allowed) then big (no room); n2: big has no capacity; n3: small's topology first
    assert binding(objects).filter(with_claims(pod("p"), "big", "small")) == {
        "n1": (UAU, (REASON_NOT_ENOUGH_SPACE,)), "n2": (UAU, (REASON_NOT_ENOUGH_SPACE,)),
        "n3": (UAU, (REASON_BIND_CONFLICT,))}


# -- Score (StorageCapacityScoring) ---------------------------------------------------------------

def test_without_the_gate_volume_binding_does_not_score():
    objects = [storage_class(), csi_driver(), claim("c", "5Gi"), capacity("c1", "p1", "10Gi")]
    assert scores(binding(objects, gates=OFF), with_claims(pod("p"), "c")) is None


def test_dynamic_provisioning_scores_the_emptiest_node_highest_by_default():
    objects = [storage_class(), csi_driver(), claim("c", "5Gi"),
               capacity("c1", "p1", "10Gi"), capacity("c2", "p2", "20Gi"), capacity("c3", "p3", "40Gi")]
    # utilisation 50, 25, 12 (integer division) through 100 - u
    assert scores(binding(objects), with_claims(pod("p"), "c")) == {"n1": 50, "n2": 75, "n3": 88}
    # a shape that prefers full nodes
    packed = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    assert scores(binding(objects, args=packed), with_claims(pod("p"), "c")) == {"n1": 50, "n2": 25, "n3": 12}


def test_a_class_takes_the_last_capacity_found_and_the_sum_of_its_requests():
    """Two claims of one class on one node: capacity is set (not summed), requests add up, and a
    sum over capacity scores as 100% utilisation."""
    objects = [storage_class(), csi_driver(), claim("a", "3Gi"), claim("b", "4Gi"),
               capacity("c1", "p1", "10Gi"), capacity("c2", "p2", "5Gi"), capacity("c3", "p3", "100Gi")]
    assert scores(binding(objects), with_claims(pod("p"), "a", "b")) == {"n1": 30, "n2": 0, "n3": 93}


def test_classes_are_averaged_and_rounded_half_away_from_zero():
    objects = [storage_class(), storage_class("slow"), csi_driver(), claim("a", "1Gi"), claim("b", "1Gi", cls="slow"),
               capacity("f1", "p1", "2Gi"), capacity("s1", "p1", "1Gi", cls="slow"),        # 50 and 0: 25
               capacity("f2", "p2", "4Gi"), capacity("s2", "p2", "1Gi", cls="slow"),        # 75 and 0: 37.5 -> 38
               capacity("f3", "p3", "100Gi")]                                               # slow: no room
    hh = binding(objects)
    assert hh.filter(with_claims(pod("p"), "a", "b"))["n3"] == (UAU, (REASON_NOT_ENOUGH_SPACE,))
    assert scores(hh, with_claims(pod("p"), "a", "b")) == {"n1": 25, "n2": 38}


def test_claims_without_a_tracked_capacity_score_zero():
    objects = [storage_class(), claim("c", "5Gi")]   # no CSIDriver: nothing to weigh
    assert scores(binding(objects), with_claims(pod("p"), "c")) == {"n1": 0, "n2": 0, "n3": 0}


def test_static_bindings_score_the_chosen_volumes_and_win_over_provisioning():
    objects = [storage_class(), csi_driver(), claim("a", "2Gi"), claim("b", "2Gi"),
               local_pv("pv1", "p1", "4Gi"), local_pv("pv2", "p2", "8Gi"), local_pv("pv2b", "p2", "8Gi"),
               capacity("c1", "p1", "100Gi"), capacity("c2", "p2", "100Gi"), capacity("c3", "p3", "100Gi")]
    # n1: a -> pv1 (2/4), b provisioned: only the static binding counts, 50; n2: both static, 4/16 -> 75;
    # n3: both provisioned on 100Gi -> 4%, 96
    assert scores(binding(objects), with_claims(pod("p"), "a", "b")) == {"n1": 50, "n2": 75, "n3": 96}


def test_pods_without_claims_to_bind_skip_scoring():
    objects = [storage_class(), claim("c")]
    hh = binding(objects)
    st = hh.plugin.pre_score(CycleState(), PodInfo.from_dict(pod("plain")), hh.nodes())
    assert st is not None and st.is_skip()


def test_capacity_scoring_places_the_pod_in_a_whole_profile():
    objects = [storage_class(), csi_driver(), claim("c", "5Gi"),
               capacity("c1", "p1", "10Gi"), capacity("c2", "p2", "40Gi"), capacity("c3", "p3", "20Gi")]
    h = ProfileHarness(nodes=nodes3(), objects=objects)   # the newest release: the gate is on
    out = h.schedule(with_claims(pod("p"), "c"))
    assert out.node == "n2"
    assert ProfileHarness.scores(out)["VolumeBinding"] == {"n1": 50, "n2": 88, "n3": 75}


# -- hints -----------------------------------------------------------------------------------------

def test_storage_capacity_and_driver_hints():
    waiting = PodInfo.from_dict(with_claims(pod("w"), "c"), keep_raw=True)
    assert storage_capacity_hint(waiting, None, capacity("c1", "p1", "1Gi"))
    assert storage_capacity_hint(waiting, capacity("c1", "p1", "1Gi"), capacity("c1", "p1", "2Gi"))
    assert not storage_capacity_hint(waiting, capacity("c1", "p1", "2Gi"), capacity("c1", "p1", "1Gi"))
    # the limit is maximumVolumeSize when set
    assert not storage_capacity_hint(waiting, capacity("c1", "p1", "1Gi", maximum="1Gi"),
                                     capacity("c1", "p1", "9Gi", maximum="1Gi"))
    assert storage_capacity_hint(waiting, capacity("c1", "p1", None), capacity("c1", "p1", "1Gi"))
    assert not storage_capacity_hint(waiting, capacity("c1", "p1", "1Gi"), capacity("c1", "p1", None))
    inline = pod("i")
    inline["spec"]["volumes"] = [{"name": "x", "csi": {"driver": DRIVER}}]
    with_inline = PodInfo.from_dict(inline, keep_raw=True)
    assert csi_driver_hint(with_inline, csi_driver(), csi_driver(capacity=False))
    assert not csi_driver_hint(with_inline, csi_driver(capacity=False), csi_driver())
    assert not csi_driver_hint(waiting, csi_driver(), csi_driver(capacity=False))   # no in-line volume of it
    regs = {(r.event.resource, r.event.action) for r in binding([]).plugin.events_to_register()}
    assert {("CSIDriver", "Update"), ("CSIStorageCapacity", "Add"), ("CSIStorageCapacity", "Update")} <= regs


def test_capacity_and_driver_changes_reach_the_queue():
    objects = [storage_class(), csi_driver(), claim("c", "5Gi")]
    h = ProfileHarness(nodes=nodes3(), objects=objects)
    out = h.schedule(with_claims(pod("p"), "c"))
    assert out.node is None and REASON_NOT_ENOUGH_SPACE in out.message
    engine = h.engine
    moved = []
    engine.queue.move_all = lambda event, accept=None: moved.append(event)   # type: ignore[method-assign]
    engine.queue.has_unschedulable = lambda: True                             # type: ignore[method-assign]
    engine.add_object(capacity("c1", "p1", "10Gi"))
    assert moved == ["CSIStorageCapacityAdd"], "a CSIStorageCapacity Add reaches the queue"
    engine.add_object(csi_driver(capacity=False))
    assert moved == ["CSIStorageCapacityAdd", "CSIDriverAdd"]


# -- NodeVolumeLimits ------------------------------------------------------------------------------

PORTWORX_PV = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "px"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "portworxVolume": {"volumeID": "px-1"}}}


def px_csinode(annotated):
    meta = {"name": "n1"}
    if annotated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/portworx-volume"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta,
            "spec": {"drivers": [{"name": "pxd.portworx.com", "nodeID": "n1", "allocatable": {"count": 1}}]}}


@pytest.mark.parametrize(("release", "annotated", "counted"), [
    ((1, 35), False, False), ((1, 35), True, True), ((1, 36), False, True), ((1, 37), False, True)])
def test_portworx_is_migrated_always_from_136_and_by_annotation_at_135(release, annotated, counted):
    existing = pod("old", node_name="n1")
    existing["spec"]["volumes"] = [{"name": "v", "portworxVolume": {"volumeID": "px-0"}}]
    bound = {**claim("c"), "spec": {**claim("c")["spec"], "volumeName": "px"}}
    hh = PluginTester(NodeVolumeLimits, nodes=[node("n1")], pods=[existing],
                      objects=[px_csinode(annotated), PORTWORX_PV, bound], kube_version=release)
    # the node's one Portworx slot is taken by the pod already there, when migration counts it
    assert hh.filter(with_claims(pod("p"), "c"))["n1"] == ((UNS, ("node(s) exceed max volume count",))
                                                            if counted else None)


def nvl(objects, release=(1, 37), gates=None):
    csinodes = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
                 "spec": {"drivers": [{"name": DRIVER, "nodeID": "n1"}]}},
                {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n2"},
                 "spec": {"drivers": [{"name": "other.csi.example.com", "nodeID": "n2"}]}}]
    csi = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-c"},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "csi": {"driver": DRIVER, "volumeHandle": "h"}}}
    bound = {**claim("c"), "spec": {**claim("c")["spec"], "volumeName": "pv-c"}}
    return PluginTester(NodeVolumeLimits, nodes=[node("n1"), node("n2"), node("n3")],
                        objects=[*csinodes, csi, bound, *objects], kube_version=release, feature_gates=gates)


MISSING = (UNS, (f"{DRIVER} CSI driver is not installed on the node",))


def test_volume_limit_scaling_refuses_nodes_without_an_opted_in_driver():
    opted = csi_driver(preventPodSchedulingIfMissing=True)
    p = with_claims(pod("p"), "c")
    # n2's CSINode lacks the driver, n3 has no CSINode
    assert nvl([opted]).filter(p) == {"n1": None, "n2": MISSING, "n3": MISSING}
    # not opted in, or no CSIDriver object: no check
    assert nvl([csi_driver()]).filter(p) == {"n1": None, "n2": None, "n3": None}
    assert nvl([]).filter(p) == {"n1": None, "n2": None, "n3": None}
    # the gate off (1.35 and 1.36's default): no check
    for release in ((1, 35), (1, 36)):
        assert nvl([opted], release).filter(p) == {"n1": None, "n2": None, "n3": None}
    assert nvl([opted], gates=default_gates() - {VOLUME_LIMIT_SCALING}).filter(p) == {"n1": None, "n2": None,
                                                                                        "n3": None}


def test_volume_limit_scaling_at_135_needs_no_opt_in():
    """1.35's alpha: any CSIDriver object of the volume's driver must be on the node."""
    on135 = default_gates((1, 35)) | {VOLUME_LIMIT_SCALING}
    p = with_claims(pod("p"), "c")
    assert nvl([csi_driver()], (1, 35), on135).filter(p) == {"n1": None, "n2": MISSING, "n3": MISSING}
    assert nvl([], (1, 35), on135).filter(p) == {"n1": None, "n2": None, "n3": None}


def test_driver_check_covers_claims_to_provision_and_skips_pods_without_new_volumes():
    opted = csi_driver(preventPodSchedulingIfMissing=True)
    hh = nvl([opted, storage_class(), claim("late")])
    # an unbound claim counts against its class's provisioner
    assert hh.filter(with_claims(pod("p"), "late")) == {"n1": None, "n2": MISSING, "n3": MISSING}
    assert hh.filter(pod("plain")) == {"n1": None, "n2": None, "n3": None}


# -- simulate ------------------------------------------------------------------------------------

def test_snapshots_carry_csi_drivers_and_storage_capacities(tmp_path):
    import yaml

    from pysched.tools.offline import OfflineScheduler
    from pysched.tools.snapshot import load_snapshot

    objects = [storage_class(), csi_driver(), claim("c", "5Gi"), capacity("c2", "p2", "10Gi")]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes3(), *objects]}))
    snap = load_snapshot(path)
    assert snap.ignored == {} and [o["kind"] for o in snap.objects] == [o["kind"] for o in objects]
    engine = OfflineScheduler()
    for n in snap.nodes:
        engine.add_node(n)
    for o in snap.objects:
        assert engine.add_object(o)
    p = with_claims(pod("p", scheduler=engine.profile), "c")
    assert [n for n in ("n1", "n2", "n3") if engine.filter_status(p, n) is None] == ["n2"]
