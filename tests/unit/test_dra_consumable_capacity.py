"""Consumable capacity (DRAConsumableCapacity) in the DRA allocator and DynamicResources: devices
with ``allowMultipleAllocations`` shared while their capacity lasts, ``capacity.requests`` and the
capacities' request policies, the results' ``shareID`` and ``consumedCapacity``, shares in the
cluster (persisted and in flight), ``distinctAttribute``, and the gate off - as kube-scheduler
1.37.2's incubating allocator and its allocated-devices tracker do them."""

from __future__ import annotations

import uuid
from fractions import Fraction

import pytest

from pysched.framework import CycleState, PodInfo
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.dynamic_resources import cel as dracel
from pysched.plugins.dynamic_resources.allocated import AllocatedDevices, Unavailable
from pysched.plugins.dynamic_resources.allocator import AllocationError, Allocator, SliceIndex
from pysched.plugins.dynamic_resources.capacity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    SharedAllocations,
    parse_capacities,
    parse_requests,
)
from pysched.plugins.dynamic_resources.cel import CelDevice
from pysched.testing import UAU, PluginTester

from .conftest import node, pod
from .test_dra_allocator import CLASSES, DRIVER, claim, devices_of, exactly, gpu, node_slice

GATES = frozenset({"DRAConsumableCapacity"})
OFF: frozenset[str] = frozenset()


def shared(name: str, memory: str = "40Gi", policy: dict | None = None, **extra) -> dict:
    """A multi-allocatable GPU with one capacity, ``memory``."""
    cap: dict = {"value": memory}
    if policy is not None:
        cap["requestPolicy"] = policy
    return gpu(name, allowMultipleAllocations=True, capacity={"memory": cap}, **extra)


def wanting(name: str, count: int = 1, *, mode: str = "ExactCount", **requests: str) -> dict:
    """A request whose ``capacity.requests`` are ``requests``."""
    r = exactly(name, count, mode=mode)
    r["exactly"]["capacity"] = {"requests": dict(requests)}
    return r


def allocate(claims, slices, *, features=GATES, allocated=frozenset(), shares=None, node_name="n1"):
    index = SliceIndex(slices, features=features)
    return Allocator(claims, CLASSES, set(allocated), index, features=features,
                     shared=shares).allocate(node_name, {})


def results(allocation: dict) -> list[dict]:
    """The results with each shareID checked to be a random UUID and replaced by "<uuid>"."""
    out = []
    for r in allocation["devices"]["results"]:
        r = dict(r)
        if "shareID" in r:
            assert uuid.UUID(r["shareID"]).version == 4
            r["shareID"] = "<uuid>"
        out.append(r)
    return out


def share(device: str, request: str = "r", pool: str = "n1", **consumed: str) -> dict:
    r = {"request": request, "driver": DRIVER, "pool": pool, "device": device, "shareID": "<uuid>"}
    if consumed:
        r["consumedCapacity"] = consumed
    return r


def whole(device: str, request: str = "r", pool: str = "n1") -> dict:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device}


# -- quantities ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, canonical, fmt", [
    ("12Gi", "12Gi", BINARY_SI), ("1.5Gi", "1536Mi", BINARY_SI), ("1000", "1k", DECIMAL_SI),
    ("1e3", "1e3", DECIMAL_EXPONENT), ("1500", "1500", DECIMAL_SI), ("0.5", "500m", DECIMAL_SI),
    ("1024", "1024", DECIMAL_SI), ("2e-3", "2e-3", DECIMAL_EXPONENT), ("0.1Ki", "102400m", BINARY_SI),
    ("1.5e3", "1500", DECIMAL_EXPONENT), ("12884901888", "12884901888", DECIMAL_SI),
])
def test_quantities_keep_their_format_and_print_as_apimachinery(text, canonical, fmt):
    q = Quantity.parse(text)
    assert (str(q), q.format) == (canonical, fmt)


@pytest.mark.parametrize("value, fmt, canonical", [
    (12884901888, BINARY_SI, "12Gi"), (1500, BINARY_SI, "1500"), (3000, DECIMAL_SI, "3k"),
    (Fraction(3, 2), BINARY_SI, "1500m"), (Fraction(3, 2), DECIMAL_EXPONENT, "1500e-3"),
    (3000, DECIMAL_EXPONENT, "3e3"), (2048, BINARY_SI, "2Ki"),
])
def test_computed_quantities_print_as_new_quantity_does(value, fmt, canonical):
    assert str(Quantity(Fraction(value), fmt)) == canonical


# -- sharing -------------------------------------------------------------------------------------

def test_a_multi_allocatable_device_serves_several_claims_while_its_capacity_lasts():
    s = node_slice("n1", [shared("g0")])
    x, y = allocate([claim("x", wanting("r", memory="10Gi")), claim("y", wanting("r", memory="30Gi"))], [s])
    assert results(x) == [share("g0", memory="10Gi")] and results(y) == [share("g0", memory="30Gi")]
    assert x["devices"]["results"][0]["shareID"] != y["devices"]["results"][0]["shareID"]
    assert allocate([claim("x", wanting("r", memory="10Gi")), claim("y", wanting("r", memory="31Gi"))], [s]) is None


def test_two_requests_of_one_claim_share_a_device_but_one_request_never_takes_it_twice():
    s = node_slice("n1", [shared("g0"), shared("g1")])
    [a] = allocate([claim("c", wanting("a", memory="10Gi"), wanting("b", memory="10Gi"))], [s])
    assert results(a) == [share("g0", "a", memory="10Gi"), share("g0", "b", memory="10Gi")]
    [b] = allocate([claim("c", wanting("r", 2, memory="10Gi"))], [s])
    assert results(b) == [share("g0", memory="10Gi"), share("g1", memory="10Gi")]
    assert allocate([claim("c", wanting("r", 2, memory="10Gi"))], [node_slice("n1", [shared("g0")])]) is None


def test_without_capacity_requests_a_share_consumes_the_default_or_else_everything():
    s = node_slice("n1", [shared("g0")])
    [a] = allocate([claim("c", exactly("r"))], [s])
    assert results(a) == [share("g0", memory="40Gi")]
    assert allocate([claim("x", exactly("r")), claim("y", wanting("r", memory="1"))], [s]) is None
    with_default = node_slice("n1", [shared("g0", policy={"default": "10Gi"})])
    got = allocate([claim(f"c{i}", exactly("r")) for i in range(4)], [with_default])
    assert [results(c) for c in got] == [[share("g0", memory="10Gi")]] * 4
    assert allocate([claim(f"c{i}", exactly("r")) for i in range(5)], [with_default]) is None


def test_a_device_with_no_capacities_is_shared_without_limit_and_records_no_consumed_capacity():
    s = node_slice("n1", [{"name": "g0", "allowMultipleAllocations": True}])
    got = allocate([claim(f"c{i}", exactly("r")) for i in range(3)], [s])
    assert [results(c) for c in got] == [[share("g0")]] * 3


def test_requests_naming_a_capacity_the_device_lacks_skip_it():
    s = node_slice("n1", [shared("g0"), gpu("g1", allowMultipleAllocations=True,
                                            capacity={"memory": {"value": "40Gi"}, "cores": {"value": "8"}})])
    [a] = allocate([claim("c", wanting("r", cores="2"))], [s])
    assert results(a) == [share("g1", cores="2", memory="40Gi")]


def test_ordinary_devices_are_checked_against_their_capacity_and_taken_whole():
    s = node_slice("n1", [gpu("g0", memory="40Gi"), gpu("g1", memory="80Gi")])
    [a] = allocate([claim("c", wanting("r", memory="64Gi"))], [s])
    assert results(a) == [whole("g1")]                  # no share, no consumedCapacity
    assert allocate([claim("c", wanting("r", memory="81Gi"))], [s]) is None
    x, y = allocate([claim("x", wanting("r", memory="1Gi")), claim("y", wanting("r", memory="1Gi"))], [s])
    assert devices_of(x) == [("r", "g0")] and devices_of(y) == [("r", "g1")]


def test_the_clusters_shares_persisted_or_in_flight_count_against_the_capacity():
    s = node_slice("n1", [shared("g0")])
    g0 = (DRIVER, "n1", "g0")
    held = SharedAllocations()
    held.add(g0, "share-1", {"memory": Fraction(30 * 2**30)})
    [a] = allocate([claim("c", wanting("r", memory="10Gi"))], [s], shares=held)
    assert results(a) == [share("g0", memory="10Gi")]
    assert allocate([claim("c", wanting("r", memory="11Gi"))], [s], shares=held) is None
    # a share of the device is not the device: requests without capacity take it whole only when free
    assert allocate([claim("c", exactly("r"))], [s], shares=held) is None
    # the whole device taken by a claim (no share) is not shareable
    assert allocate([claim("c", wanting("r", memory="1"))], [s], allocated={g0}) is None


def test_the_search_gives_back_a_share_it_backtracks_over():
    # r1 and r2 must be on one numa; g0 (numa 0) has room for r1 but then not for r2, so r1 moves
    # to g1 and r2 to g2; r3 then needs all of g0, free again
    s = node_slice("n1", [shared("g0", numa=0), shared("g1", numa=1), shared("g2", numa=1)])
    c = claim("c", wanting("r1", memory="30Gi"), wanting("r2", memory="20Gi"), wanting("r3", memory="40Gi"),
              constraints=[{"requests": ["r1", "r2"], "matchAttribute": f"{DRIVER}/numa"}])
    [a] = allocate([c], [s])
    assert results(a) == [share("g1", "r1", memory="30Gi"), share("g2", "r2", memory="20Gi"),
                          share("g0", "r3", memory="40Gi")]


def test_all_mode_uses_the_devices_whose_capacity_could_serve_it_and_fails_when_one_is_short():
    s = node_slice("n1", [shared("g0", memory="40Gi"), shared("g1", memory="8Gi"), shared("g2", memory="40Gi")])
    [a] = allocate([claim("c", wanting("r", mode="All", memory="16Gi"))], [s])
    assert results(a) == [share("g0", memory="16Gi"), share("g2", memory="16Gi")]
    held = SharedAllocations()
    held.add((DRIVER, "n1", "g2"), "share-1", {"memory": Fraction(30 * 2**30)})
    assert allocate([claim("c", wanting("r", mode="All", memory="16Gi"))], [s], shares=held) is None


def test_a_shared_device_charges_its_counters_once():
    counters = {"metadata": {"name": "n1-counters"},
                "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                        "resourceSliceCount": 2},
                         "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}}
    consumes = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    devs = node_slice("n1", [shared("g0", consumesCounters=consumes), gpu("g1", consumesCounters=consumes)],
                      name="n1-devices", count=2)
    features = GATES | {"DRAPartitionableDevices"}
    x, y = allocate([claim("x", wanting("r", memory="10Gi")), claim("y", wanting("r", memory="10Gi"))],
                    [counters, devs], features=features)
    assert results(x) == [share("g0", memory="10Gi")] and results(y) == [share("g0", memory="10Gi")]
    # g0's counters are taken while any claim holds a share of it: g1 does not fit beside it
    held = SharedAllocations()
    held.add((DRIVER, "n1", "g0"), "share-1", {"memory": Fraction(2**30)})
    assert allocate([claim("c", exactly("r", 2))], [counters, devs], features=features, shares=held) is None
    # a further share is not charged again: 39Gi of g0 are left
    [a] = allocate([claim("c", wanting("r", memory="39Gi"))], [counters, devs], features=features, shares=held)
    assert results(a) == [share("g0", memory="39Gi")]
    assert allocate([claim("c", wanting("r", memory="40Gi"))], [counters, devs], features=features,
                    shares=held) is None      # 1Gi of g0 is taken; g1's counters are g0's


# -- request policies ------------------------------------------------------------------------------

STEP = {"default": "1Gi", "validRange": {"min": "1Gi", "max": "32Gi", "step": "1Gi"}}
VALUES = {"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]}


@pytest.mark.parametrize("policy, requested, consumed", [
    (STEP, "1536Mi", "2Gi"),                      # up to the next step from min
    (STEP, "100Mi", "1Gi"),                       # up to min
    (STEP, "4Gi", "4Gi"),
    (STEP, None, "1Gi"),                          # the default
    (STEP, "32Gi", "32Gi"),
    ({"default": "1G", "validRange": {"min": "1G", "step": "1G"}}, "1536Mi", "2G"),   # the step's format
    ({"default": "2Gi", "validRange": {"min": "2Gi"}}, "3000Mi", "3000Mi"),           # no step: as asked
    (VALUES, "15Gi", "20Gi"),                     # the next valid value
    (VALUES, "1", "10Gi"),
    (VALUES, None, "10Gi"),
    ({"default": "8Gi"}, "12Gi", "12Gi"),         # a policy without values or range: as asked
])
def test_request_policies_round_the_request_up(policy, requested, consumed):
    s = node_slice("n1", [shared("g0", policy=policy)])
    req = wanting("r", memory=requested) if requested else exactly("r")
    [a] = allocate([claim("c", req)], [s])
    assert results(a) == [share("g0", memory=consumed)]


@pytest.mark.parametrize("policy, requested", [
    (STEP, "33Gi"),                               # past max
    (VALUES, "41Gi"),                             # past every valid value
    ({"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}, "41Gi"),   # past the capacity
])
def test_a_request_its_policy_does_not_allow_skips_the_device(policy, requested):
    s = node_slice("n1", [shared("g0", policy=policy), gpu("g1", memory="80Gi")])
    [a] = allocate([claim("c", wanting("r", memory=requested))], [s])
    assert results(a) == [whole("g1")]


def test_rounded_amounts_count_against_the_capacity():
    s = node_slice("n1", [shared("g0", memory="4Gi", policy=STEP)])
    got = allocate([claim(f"c{i}", wanting("r", memory="1500Mi")) for i in range(2)], [s])
    assert [results(c) for c in got] == [[share("g0", memory="2Gi")]] * 2
    assert allocate([claim(f"c{i}", wanting("r", memory="1500Mi")) for i in range(3)], [s]) is None


def test_fractional_ranges_use_milli_arithmetic_only_with_their_gate():
    policy = {"default": "100m", "validRange": {"min": "100m", "step": "100m"}}
    s = node_slice("n1", [gpu("g0", allowMultipleAllocations=True,
                              capacity={"cores": {"value": "4", "requestPolicy": policy}})])
    [a] = allocate([claim("c", wanting("r", cores="250m"))], [s], features=GATES | {"DRAFractionalCapacityRange"})
    assert results(a) == [share("g0", cores="300m")]
    [b] = allocate([claim("c", wanting("r", cores="250m"))], [s])   # Value(): 1, 1 and 1
    assert results(b) == [share("g0", cores="1")]


# -- errors ----------------------------------------------------------------------------------------

UNREPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


def test_a_request_past_int64_aborts_with_upstreams_error():
    s = node_slice("n1", [shared("g0", policy=STEP)])
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", wanting("r", memory="10E"))], [s])
    assert str(exc.value) == (f'claim ns/c, request r: checking capacity for device {DRIVER}/n1/g0: capacity '
                              f'"memory": {UNREPRESENTABLE}: request 10E exceeds MaxInt64')
    # "All" checks the devices while it lists them, and names the device alone
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", wanting("r", mode="All", memory="10E"))], [s])
    assert str(exc.value) == (f'claim ns/c, request r: checking capacity for device g0: capacity "memory": '
                              f'{UNREPRESENTABLE}: request 10E exceeds MaxInt64')
    # a subrequest is named by its own name
    sub = {"name": "r", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount",
                                            "count": 1, "capacity": {"requests": {"memory": "10E"}}}]}
    with pytest.raises(AllocationError, match="^claim ns/c, request big: checking capacity for device"):
        allocate([claim("c", sub)], [s])


def test_rounding_past_int64_and_negative_capacities_abort():
    huge = {"default": "4E", "validRange": {"min": "0", "step": "4E"}}
    s = node_slice("n1", [gpu("g0", allowMultipleAllocations=True,
                              capacity={"memory": {"value": "8E", "requestPolicy": huge}})])
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", wanting("r", memory="9E"))], [s])
    assert str(exc.value).endswith(f'capacity "memory": {UNREPRESENTABLE}: rounding request 9E up to the next '
                                   f'step passes MaxInt64')
    negative = node_slice("n1", [gpu("g0", allowMultipleAllocations=True, capacity={"memory": {"value": "-1"}})])
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", exactly("r"))], [negative])
    assert str(exc.value) == (f'claim ns/c, request r: checking capacity for device {DRIVER}/n1/g0: capacity '
                              f'"memory": capacity value is negative')


def test_a_milli_request_that_is_not_exact_aborts_with_the_fractional_gate():
    policy = {"default": "100m", "validRange": {"min": "100m", "step": "100m"}}
    s = node_slice("n1", [gpu("g0", allowMultipleAllocations=True,
                              capacity={"cores": {"value": "4", "requestPolicy": policy}})])
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", wanting("r", cores="1500500u"))], [s], features=GATES | {"DRAFractionalCapacityRange"})
    assert str(exc.value).endswith(f'capacity "cores": {UNREPRESENTABLE}: request 1500500u is not a representable '
                                   f'milli value')
    # below min it is min, whatever its precision
    [a] = allocate([claim("c", wanting("r", cores="1500u"))], [s], features=GATES | {"DRAFractionalCapacityRange"})
    assert results(a) == [share("g0", cores="100m")]


# -- distinctAttribute -----------------------------------------------------------------------------

def test_distinct_attribute_spreads_requests_over_devices_with_different_values():
    s = node_slice("n1", [shared("g0", numa=0), shared("g1", numa=0), shared("g2", numa=1)])
    c = claim("c", wanting("a", memory="1Gi"), wanting("b", memory="1Gi"),
              constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    [a] = allocate([c], [s])
    assert results(a) == [share("g0", "a", memory="1Gi"), share("g2", "b", memory="1Gi")]
    three = claim("c", *(exactly(n) for n in "abc"), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    assert allocate([three], [s]) is None       # two numa values for three requests
    with pytest.raises(AllocationError) as exc:
        allocate([three], [s], features=OFF)
    assert str(exc.value) == "claim ns/c, constraint #0: empty constraint (unsupported constraint type?)"


def test_distinct_attribute_only_on_its_requests_and_across_types():
    devs = [gpu("g0", numa=0), gpu("g1", numa=0), gpu("g2", attributes={"numa": {"string": "0"}})]
    s = node_slice("n1", devs)
    c = claim("c", exactly("a"), exactly("b"), exactly("c"),
              constraints=[{"requests": ["a", "c"], "distinctAttribute": f"{DRIVER}/numa"}])
    [a] = allocate([c], [s])
    # a and c need distinct numa values; an int 0 and a string "0" are distinct
    assert devices_of(a) == [("a", "g0"), ("b", "g1"), ("c", "g2")]


# -- the gate off ----------------------------------------------------------------------------------

def test_with_the_gate_off_capacity_requests_are_an_error():
    s = node_slice("n1", [shared("g0")])
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", exactly("a"), wanting("r", memory="1Gi"))], [s], features=OFF)
    assert str(exc.value) == ("claim ns/c, request r: has capacity requests, but the DRAConsumableCapacity "
                              "feature is disabled")
    sub = {"name": "r", "firstAvailable": [
        {"name": "plain", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        {"name": "small", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
         "capacity": {"requests": {"memory": "1Gi"}}}]}
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", sub)], [s], features=OFF)
    assert str(exc.value) == ("claim ns/c, subrequest small: has capacity requests, but the DRAConsumableCapacity "
                              "feature is disabled")


def test_with_the_gate_off_a_multi_allocatable_device_is_an_ordinary_one():
    s = node_slice("n1", [shared("g0")])
    [a] = allocate([claim("c", exactly("r"))], [s], features=OFF)
    assert a["devices"]["results"] == [whole("g0")]
    assert allocate([claim("x", exactly("r")), claim("y", exactly("r"))], [s], features=OFF) is None


# -- CEL -----------------------------------------------------------------------------------------

def test_cel_sees_allow_multiple_allocations_only_with_the_gate():
    s = node_slice("n1", [gpu("g0"), shared("g1")])
    multi = exactly("r", selectors=("device.allowMultipleAllocations",))
    [a] = allocate([claim("c", multi)], [s])
    assert devices_of(a) == [("r", "g1")]
    assert allocate([claim("c", multi)], [s], features=OFF) is None
    assert b'"allowMultipleAllocations":true' in CelDevice(DRIVER, shared("g1"), True).wire
    assert b"allowMultipleAllocations" not in CelDevice(DRIVER, shared("g1")).wire


def test_the_helper_gets_the_gate_as_kube_scheduler_gives_it_to_its_cel_cache(monkeypatch):
    monkeypatch.setenv("PYSCHED_CEL_ENGINE", "auto")
    monkeypatch.setenv("PYSCHED_CEL_HELPER", "/opt/pysched-cel")
    dracel.engine.cache_clear()
    try:
        on, off = dracel.engine(True), dracel.engine(False)
        assert on.args == ["/opt/pysched-cel", "--consumable-capacity"] and off.args == ["/opt/pysched-cel"]
    finally:
        dracel.engine.cache_clear()


# -- the cluster's shares (the plugin) -----------------------------------------------------------

def api_claim(name: str, *requests: dict, allocation: dict | None = None) -> dict:
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **claim(name, *requests)}
    c["metadata"].update(namespace="default", resourceVersion="1")
    if allocation is not None:
        c["status"] = {"allocation": allocation}
    return c


def shares_of(*results: dict) -> dict:
    return {"devices": {"results": list(results)}}


def test_allocated_devices_keep_shares_apart_with_the_gate_and_as_devices_without():
    persisted = api_claim("a", allocation=shares_of(
        {**whole("g0"), "shareID": "11111111-1111-4111-8111-111111111111", "consumedCapacity": {"memory": "30Gi"}},
        {**whole("g1"), "shareID": "22222222-2222-4222-8222-222222222222"},
        whole("g2")))
    g0, g1, g2 = ((DRIVER, "n1", d) for d in ("g0", "g1", "g2"))
    on = AllocatedDevices([persisted], consumable=True)
    assert g0 not in on and g1 not in on and g2 in on
    assert on.shared.capacity == {g0: {"memory": Fraction(30 * 2**30)}}
    assert on.shared.has_share(g0) and on.shared.has_share(g1) and not on.shared.has_share(g2)
    in_flight = api_claim("b", allocation=shares_of(
        {**whole("g0"), "shareID": "33333333-3333-4333-8333-333333333333", "consumedCapacity": {"memory": "5Gi"}}))
    both = Unavailable.of(on, [in_flight])
    assert both.shared.capacity[g0] == {"memory": Fraction(35 * 2**30)}
    assert on.shared.capacity[g0] == {"memory": Fraction(30 * 2**30)}     # the store's are not changed
    on.on_change("resourceclaims", "DELETED", None, persisted)
    assert on.shared.capacity == {} and not on.shared.has_share(g1) and g2 not in on
    off = AllocatedDevices([persisted])
    assert g0 in off and g1 in off and g2 in off and off.shared.capacity == {}


CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def dra_pod(name: str, claim_name: str) -> dict:
    p = pod(name)
    p["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": claim_name}]
    return p


def make_tester(*objects, gates=GATES) -> PluginTester:
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               **node_slice(n, [shared("g0")], name=f"{n}-gpus")} for n in ("n1", "n2")]
    return PluginTester(DynamicResources, nodes=[node("n1"), node("n2")], feature_gates=gates,
                        objects=[CLASS, *slices, *objects])


CANNOT = (UAU, ("cannot allocate all claims",))


def test_the_plugin_shares_devices_across_persisted_and_in_flight_claims():
    persisted = api_claim("held", wanting("r", memory="30Gi"), allocation=shares_of(
        {**whole("g0"), "shareID": "11111111-1111-4111-8111-111111111111", "consumedCapacity": {"memory": "30Gi"}}))
    hh = make_tester(persisted, api_claim("a", wanting("r", memory="10Gi")), api_claim("b", wanting("r", memory="5Gi")),
                     api_claim("big", wanting("r", memory="11Gi")))
    assert hh.filter(dra_pod("p", "big")) == {"n1": CANNOT, "n2": None}
    assert hh.filter(dra_pod("p", "a")) == {"n1": None, "n2": None}
    pl: DynamicResources = hh.plugin
    a = PodInfo.from_dict(dra_pod("pa", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, a, hh.nodes())
    pl.filter(state, a, hh.nodes())
    assert pl.reserve(state, a, "n1") is None
    [r] = pl.in_flight["uid-a"]["status"]["allocation"]["devices"]["results"]
    assert r["consumedCapacity"] == {"memory": "10Gi"} and uuid.UUID(r["shareID"]).version == 4
    assert hh.filter(dra_pod("p", "b")) == {"n1": CANNOT, "n2": None}       # 30Gi held, 10Gi in flight
    pl.unreserve(state, a, "n1")
    assert hh.filter(dra_pod("p", "b")) == {"n1": None, "n2": None}
    # with the gate off the share takes the whole device, and capacity requests are an error
    off = make_tester(persisted, api_claim("plain", exactly("r")), gates=OFF)
    assert off.filter(dra_pod("p", "plain")) == {"n1": CANNOT, "n2": None}


def test_parse_helpers():
    caps = parse_capacities({"memory": {"value": "40Gi", "requestPolicy": STEP}})
    assert caps["memory"].has_policy and str(caps["memory"].valid_range.step) == "1Gi"
    assert parse_requests({"capacity": {"requests": {}}}) is None
    assert parse_requests({"capacity": {"requests": {"memory": "1Gi"}}}) == {"memory": Quantity.parse("1Gi")}
