"""Device taints (DRADeviceTaints) and DeviceTaintRules (DRADeviceTaintRules) in the DRA allocator
and DynamicResources, as kube-scheduler 1.37.2's allocator and resourceslice tracker treat them."""

from __future__ import annotations

import pytest

from pysched.framework import PodInfo
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.dynamic_resources.allocator import Allocator, SliceIndex, tolerates
from pysched.testing import UAU, PluginTester

from .conftest import node, pod
from .test_dra_allocator import CLASSES, DRIVER, claim, devices_of, exactly, gpu, node_slice

GATES = frozenset({"DRADeviceTaints", "DRADeviceTaintRules"})
NO_SCHEDULE = {"key": "example.com/broken", "value": "fan", "effect": "NoSchedule"}


def tainted(name: str, *taints: dict) -> dict:
    return gpu(name, taints=list(taints))


def allocate(claims, slices, *, features=GATES, rules=(), node_name="n1"):
    index = SliceIndex(slices, features=features, taint_rules=list(rules))
    return Allocator(claims, CLASSES, set(), index, features=features).allocate(node_name, {})


def tolerating(name: str, *tolerations: dict, count: int = 1, mode: str = "ExactCount") -> dict:
    r = exactly(name, count, mode=mode)
    r["exactly"]["tolerations"] = list(tolerations)
    return r


def rule(name: str, taint: dict, **selector) -> dict:
    spec: dict = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name,
                                                                                          "resourceVersion": "1"},
            "spec": spec}


SLICE = node_slice("n1", [tainted("g0", NO_SCHEDULE), gpu("g1")])


def test_a_tainted_device_is_skipped_and_the_next_one_taken():
    [a] = allocate([claim("c", exactly("r"))], [SLICE])
    assert devices_of(a) == [("r", "g1")]
    assert allocate([claim("c", exactly("r", 2))], [SLICE]) is None


def test_with_the_gate_off_taints_are_ignored_and_results_carry_no_tolerations():
    r = tolerating("r", {"operator": "Exists"})
    [a] = allocate([claim("c", r)], [SLICE], features=frozenset())
    assert devices_of(a) == [("r", "g0")]
    assert "tolerations" not in a["devices"]["results"][0]


@pytest.mark.parametrize("effect, blocks", [("NoSchedule", True), ("NoExecute", True), ("None", False),
                                            ("SomeFutureEffect", False)])
def test_only_noschedule_and_noexecute_keep_a_device(effect, blocks):
    s = node_slice("n1", [tainted("g0", {"key": "k", "effect": effect})])
    got = allocate([claim("c", exactly("r"))], [s])
    assert (got is None) == blocks


@pytest.mark.parametrize("toleration, ok", [
    ({"key": "example.com/broken", "operator": "Exists"}, True),
    ({"key": "example.com/broken", "operator": "Equal", "value": "fan"}, True),
    ({"key": "example.com/broken", "value": "fan"}, True),                        # Equal is the default
    ({"key": "example.com/broken", "value": "psu"}, False),
    ({"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"operator": "Exists"}, True),                                               # every taint
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "example.com/broken", "operator": "Lt", "value": "fan"}, False),    # unknown operator
])
def test_tolerations_as_resourceclaim_tolerates_taint(toleration, ok):
    assert tolerates(toleration, NO_SCHEDULE) is ok
    s = node_slice("n1", [tainted("g0", NO_SCHEDULE)])
    got = allocate([claim("c", tolerating("r", toleration))], [s])
    assert (got is not None) is ok
    if ok:
        assert got[0]["devices"]["results"] == [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0",
                                                 "tolerations": [toleration]}]


def test_every_taint_must_be_tolerated():
    s = node_slice("n1", [tainted("g0", NO_SCHEDULE, {"key": "b", "effect": "NoExecute"})])
    one = tolerating("r", {"key": "example.com/broken", "operator": "Exists"})
    both = tolerating("r", {"key": "example.com/broken", "operator": "Exists"}, {"key": "b", "operator": "Exists"})
    assert allocate([claim("c", one)], [s]) is None
    assert devices_of(allocate([claim("c", both)], [s])[0]) == [("r", "g0")]


def test_subrequests_have_their_own_tolerations():
    s = node_slice("n1", [tainted("g0", NO_SCHEDULE)])
    req = {"name": "r", "firstAvailable": [
        {"name": "plain", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        {"name": "tolerant", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
         "tolerations": [{"operator": "Exists"}]}]}
    [a] = allocate([claim("c", req)], [s])
    assert a["devices"]["results"] == [{"request": "r/tolerant", "driver": DRIVER, "pool": "n1", "device": "g0",
                                        "tolerations": [{"operator": "Exists"}]}]


def test_all_mode_with_a_tainted_device_has_no_answer_and_no_error():
    assert allocate([claim("c", exactly("r", mode="All"))], [SLICE]) is None
    # taints are checked before constraints: no "constraint would not be satisfied" error either
    c = claim("c", exactly("r", mode="All"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert allocate([c], [SLICE]) is None
    [a] = allocate([claim("c", tolerating("r", {"operator": "Exists"}, mode="All"))], [SLICE])
    assert devices_of(a) == [("r", "g0"), ("r", "g1")]


def test_device_taint_rules_taint_the_devices_their_selector_names():
    s = node_slice("n1", [gpu("g0"), gpu("g1")])
    by_device = rule("r1", NO_SCHEDULE, driver=DRIVER, pool="n1", device="g0")
    assert devices_of(allocate([claim("c", exactly("r"))], [s], rules=[by_device])[0]) == [("r", "g1")]
    whole_pool = rule("r2", NO_SCHEDULE, pool="n1")
    assert allocate([claim("c", exactly("r"))], [s], rules=[whole_pool]) is None
    every_device = rule("r3", NO_SCHEDULE)   # an empty selector: every device of every driver
    assert allocate([claim("c", exactly("r"))], [s], rules=[every_device]) is None
    for elsewhere in (rule("r4", NO_SCHEDULE, driver="other.example.com"), rule("r5", NO_SCHEDULE, pool="n2"),
                      rule("r6", NO_SCHEDULE, device="g9")):
        assert devices_of(allocate([claim("c", exactly("r"))], [s], rules=[elsewhere])[0]) == [("r", "g0")]
    no_selector = rule("r7", NO_SCHEDULE)
    del no_selector["spec"]["deviceSelector"]   # no selector selects nothing
    assert devices_of(allocate([claim("c", exactly("r"))], [s], rules=[no_selector])[0]) == [("r", "g0")]
    # a rule's taint is tolerated like the device's own
    tolerant = tolerating("r", {"key": "example.com/broken", "operator": "Exists"})
    assert devices_of(allocate([claim("c", tolerant)], [s], rules=[whole_pool])[0]) == [("r", "g0")]


# -- the plugin ------------------------------------------------------------------------------------

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
NODES = [node("n1"), node("n2")]


def api_slice(node_name: str, *devices: dict) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            **node_slice(node_name, list(devices), name=f"{node_name}-gpus")}


def api_claim(name: str, *tolerations: dict) -> dict:
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **claim(name, tolerating("gpu", *tolerations))}
    c["metadata"].update(namespace="default", resourceVersion="1")
    return c


def dra_pod(name: str, claim_name: str) -> dict:
    p = pod(name)
    p["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": claim_name}]
    return p


def make_tester(*objects, gates=GATES) -> PluginTester:
    return PluginTester(DynamicResources, nodes=NODES, feature_gates=gates,
                        objects=[CLASS, api_slice("n1", gpu("g0")), api_slice("n2", tainted("g0", NO_SCHEDULE)),
                                 *objects])


CANNOT = (UAU, ("cannot allocate all claims",))


def test_filter_rejects_nodes_whose_devices_are_all_tainted():
    hh = make_tester(api_claim("plain"), api_claim("tolerant", {"operator": "Exists"}))
    assert hh.filter(dra_pod("p", "plain")) == {"n1": None, "n2": CANNOT}
    assert hh.filter(dra_pod("p", "tolerant")) == {"n1": None, "n2": None}
    off = make_tester(api_claim("plain"), gates=frozenset())
    assert off.filter(dra_pod("p", "plain")) == {"n1": None, "n2": None}


def test_device_taint_rules_from_the_store_and_their_changes():
    hh = make_tester(api_claim("plain"))
    assert hh.filter(dra_pod("p", "plain"))["n1"] is None
    hh.objects.add(rule("broken-n1", NO_SCHEDULE, pool="n1"))
    assert hh.filter(dra_pod("p", "plain")) == {"n1": CANNOT, "n2": CANNOT}
    hh.objects.apply("devicetaintrules", "DELETED", rule("broken-n1", NO_SCHEDULE, pool="n1"))
    assert hh.filter(dra_pod("p", "plain"))["n1"] is None
    # without DRADeviceTaintRules the rules are neither watched nor applied
    only_taints = make_tester(api_claim("plain"), rule("broken-n1", NO_SCHEDULE, pool="n1"),
                         gates=frozenset({"DRADeviceTaints"}))
    assert only_taints.filter(dra_pod("p", "plain"))["n1"] is None
    assert only_taints.plugin.object_kinds == ()
    assert make_tester().plugin.object_kinds == ("devicetaintrules",)


def _taint_rule_hint(hh: PluginTester):
    [reg] = [r for r in hh.plugin.events_to_register() if r.event.resource == "DeviceTaintRule"]
    assert reg.event.action == "*" and reg.hint is not None
    return reg.hint


def test_a_taint_rule_change_moves_pods_iff_some_device_taints_change():
    hint = _taint_rule_hint(make_tester())
    p = PodInfo.from_dict(dra_pod("p", "plain"))
    on_n2 = rule("r", NO_SCHEDULE, pool="n2")
    nowhere = rule("r", NO_SCHEDULE, pool="n9")
    assert hint(p, None, on_n2) is True            # added: n2's device gets a taint
    assert hint(p, on_n2, None) is True            # deleted: its taint goes (the pod may fit now)
    assert hint(p, None, nowhere) is False         # selects no device: no slice changes
    assert hint(p, on_n2, nowhere) is True         # no longer selects n2's device
    relabelled = rule("r", NO_SCHEDULE, pool="n2")
    relabelled["metadata"]["labels"] = {"team": "x"}
    assert hint(p, on_n2, relabelled) is False     # same devices, same taint
    softer = rule("r", {**NO_SCHEDULE, "effect": "None"}, pool="n2")
    assert hint(p, on_n2, softer) is True          # the taint itself changed
    assert [r for r in make_tester(gates=frozenset({"DRADeviceTaints"})).plugin.events_to_register()
            if r.event.resource == "DeviceTaintRule"] == []
