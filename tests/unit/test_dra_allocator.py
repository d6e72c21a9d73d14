"""The DRA allocator against hand-worked cases (upstream's incubating allocator semantics)."""

from __future__ import annotations

import pytest

from pysched.plugins.dynamic_resources.allocator import (
    AllocationError,
    Allocator,
    InvalidPools,
    SliceIndex,
)

DRIVER = "gpu.example.com"
GPU_CLASS = {"metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                      "config": [{"opaque": {"driver": DRIVER, "parameters": {"mode": "class"}}}]}}
CLASSES = {"gpu": GPU_CLASS}


def gpu(name: str, model: str = "a100", numa: int = 0, memory: str = "40Gi", **extra) -> dict:
    return {"name": name, "attributes": {"model": {"string": model}, "numa": {"int": numa}},
            "capacity": {"memory": {"value": memory}}, **extra}


def node_slice(node: str, devices: list[dict], *, pool: str | None = None, generation: int = 1, count: int = 1,
               name: str | None = None, driver: str = DRIVER) -> dict:
    return {"metadata": {"name": name or f"{node}-{driver}"},
            "spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count}}}


def claim(name: str, *requests: dict, constraints: list | None = None, config: list | None = None) -> dict:
    devices: dict = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def exactly(name: str, count: int = 1, *, selectors: tuple[str, ...] = (), mode: str = "ExactCount",
            admin: bool = False) -> dict:
    spec: dict = {"deviceClassName": "gpu", "allocationMode": mode,
                  "selectors": [{"cel": {"expression": e}} for e in selectors]}
    if mode == "ExactCount":
        spec["count"] = count
    if admin:
        spec["adminAccess"] = True
    return {"name": name, "exactly": spec}


def devices_of(allocation: dict) -> list[tuple[str, str]]:
    return [(r["request"], r["device"]) for r in allocation["devices"]["results"]]


def allocate(claims, slices, node="n1", labels=None, allocated=frozenset()):
    return Allocator(claims, CLASSES, set(allocated), SliceIndex(slices)).allocate(node, labels or {})


SLICE = node_slice("n1", [gpu("g0"), gpu("g1", model="h100", memory="80Gi", numa=1), gpu("g2", numa=1)])


def test_count_takes_the_first_free_devices_in_slice_order_and_writes_upstreams_result():
    [a] = allocate([claim("c", exactly("r", 2))], [SLICE])
    assert a == {
        "devices": {
            "results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"},
                        {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g1"}],
            "config": [{"source": "FromClass", "requests": ["r"],
                        "opaque": {"driver": DRIVER, "parameters": {"mode": "class"}}}],
        },
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
    }


def test_devices_allocated_elsewhere_are_skipped_and_too_few_free_is_no_answer():
    [a] = allocate([claim("c", exactly("r"))], [SLICE], allocated={(DRIVER, "n1", "g0")})
    assert devices_of(a) == [("r", "g1")]
    assert allocate([claim("c", exactly("r", 3))], [SLICE], allocated={(DRIVER, "n1", "g0")}) is None


def test_selectors_on_attributes_and_capacity():
    by_model = exactly("r", selectors=(f'device.attributes["{DRIVER}"].model == "h100"',))
    by_memory = exactly("r", selectors=(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0',))
    assert devices_of(allocate([claim("c", by_model)], [SLICE])[0]) == [("r", "g1")]
    assert devices_of(allocate([claim("c", by_memory)], [SLICE])[0]) == [("r", "g1")]


def test_two_claims_of_one_pod_never_share_a_device():
    a, b = allocate([claim("a", exactly("r", 2)), claim("b", exactly("r"))], [SLICE])
    assert devices_of(a) == [("r", "g0"), ("r", "g1")] and devices_of(b) == [("r", "g2")]
    assert allocate([claim("a", exactly("r", 2)), claim("b", exactly("r", 2))], [SLICE]) is None


def test_match_attribute_backtracks_over_earlier_choices():
    # b must be the h100 (numa 1); a and b must share numa: a cannot stay on g0 (numa 0).
    c = claim("c", exactly("a"), exactly("b", selectors=(f'device.attributes["{DRIVER}"].model == "h100"',)),
              constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert devices_of(allocate([c], [SLICE])[0]) == [("a", "g2"), ("b", "g1")]


def test_match_attribute_scoped_to_named_requests_and_devices_without_the_attribute_fail_it():
    c = claim("c", exactly("a"), exactly("b"), exactly("x"),
              constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}])
    got = devices_of(allocate([c], [SLICE])[0])
    assert got == [("a", "g1"), ("b", "g2"), ("x", "g0")]
    bare = node_slice("n1", [{"name": "plain"}, gpu("g1", numa=1)])
    c2 = claim("c", exactly("a", 2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert allocate([c2], [bare]) is None


def test_all_mode_takes_every_selectable_device_and_fails_on_one_in_use_or_none():
    h100 = f'device.attributes["{DRIVER}"].model == "a100"'
    [a] = allocate([claim("c", exactly("r", mode="All", selectors=(h100,)))], [SLICE])
    assert devices_of(a) == [("r", "g0"), ("r", "g2")]
    assert allocate([claim("c", exactly("r", mode="All"))], [SLICE], allocated={(DRIVER, "n1", "g2")}) is None
    none = f'device.attributes["{DRIVER}"].model == "b200"'
    assert allocate([claim("c", exactly("r", mode="All", selectors=(none,)))], [SLICE]) is None


def test_admin_access_may_take_devices_allocated_elsewhere_but_blocks_later_claims_in_the_same_call():
    admin = claim("adm", exactly("r", admin=True))
    [a] = allocate([admin], [SLICE], allocated={(DRIVER, "n1", "g0")})
    assert a["devices"]["results"][0] == {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0",
                                          "adminAccess": True}
    one = node_slice("n1", [gpu("g0")])
    assert allocate([admin, claim("c", exactly("r"))], [one]) is None          # admin first blocks
    normal, adm = allocate([claim("c", exactly("r")), admin], [one])           # normal first does not
    assert devices_of(normal) == devices_of(adm) == [("r", "g0")]


def test_first_available_picks_the_first_subrequest_the_whole_allocation_can_satisfy():
    req = {"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 5},
        {"name": "small", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}]}
    c = claim("c", req, config=[{"requests": ["r/small"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}},
                                {"requests": ["r/big"], "opaque": {"driver": DRIVER, "parameters": {"x": 2}}}])
    [a] = allocate([c], [SLICE])
    assert devices_of(a) == [("r/small", "g0"), ("r/small", "g1")]
    assert [(e["source"], e["requests"]) for e in a["devices"]["config"]] == [
        ("FromClass", ["r/small"]), ("FromClaim", ["r/small"])]


def test_claim_config_naming_two_requests_appears_twice_as_upstream_writes_it():
    c = claim("c", exactly("a"), exactly("b"), config=[{"requests": ["a", "b"], "opaque": {"driver": DRIVER}}])
    [a] = allocate([c], [SLICE])
    assert [(e["source"], e["requests"]) for e in a["devices"]["config"]] == [
        ("FromClass", ["a", "b"]), ("FromClaim", ["a", "b"]), ("FromClaim", ["a", "b"])]


def test_pools_keep_the_newest_generation_and_span_nodes():
    old = node_slice("n1", [gpu("old")], generation=1, name="s-old")
    new = node_slice("n1", [gpu("new")], generation=2, name="s-new")
    assert devices_of(allocate([claim("c", exactly("r"))], [old, new])[0]) == [("r", "new")]
    # a pool of two slices on two nodes is complete; one with a missing slice is not
    shared = [node_slice("n1", [gpu("a")], pool="p", count=2, name="p-1"),
              node_slice("n2", [gpu("b")], pool="p", count=2, name="p-2")]
    assert devices_of(allocate([claim("c", exactly("r"))], shared)[0]) == [("r", "a")]
    assert allocate([claim("c", exactly("r"))], shared[:1]) is None
    with pytest.raises(AllocationError, match="resource pool gpu.example.com/p is currently being updated"):
        allocate([claim("c", exactly("r", mode="All"))], shared[:1])
    # a newer generation elsewhere retires this node's older, short pool silently (not "being updated")
    moved = [node_slice("n1", [gpu("a")], pool="p", count=2, name="p-1"),
             node_slice("n2", [gpu("b")], pool="p", generation=2, count=2, name="p-2")]
    assert allocate([claim("c", exactly("r"))], moved) is None
    assert allocate([claim("c", exactly("r", mode="All"))], moved) is None


def test_all_nodes_and_node_selector_slices():
    pool = {"generation": 1, "resourceSliceCount": 1}
    everywhere = {"metadata": {"name": "net"}, "spec": {"driver": DRIVER, "allNodes": True, "devices": [gpu("nic")],
                                                        "pool": {"name": "net", **pool}}}
    [a] = allocate([claim("c", exactly("r"))], [everywhere])
    assert devices_of(a) == [("r", "nic")] and "nodeSelector" not in a
    term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
    racked = {"metadata": {"name": "rack"},
              "spec": {"driver": DRIVER, "nodeSelector": {"nodeSelectorTerms": [term]}, "devices": [gpu("fpga")],
                       "pool": {"name": "rack", **pool}}}
    assert allocate([claim("c", exactly("r"))], [racked], labels={"rack": "r2"}) is None
    [b] = allocate([claim("c", exactly("r"))], [racked], labels={"rack": "r1"})
    assert b["nodeSelector"] == {"nodeSelectorTerms": [term]}


def test_duplicate_device_names_make_the_pool_invalid():
    dup = node_slice("n1", [gpu("g0"), gpu("g0")])
    with pytest.raises(InvalidPools, match="invalid resource pools were encountered"):
        allocate([claim("c", exactly("r"))], [dup])


@pytest.mark.parametrize("request_, message", [
    (exactly("r", selectors=(f'device.attributes["{DRIVER}"].nosuch == 1',)),
     "claim ns/c: selector #0: CEL runtime error: no such key: nosuch"),
    ({"name": "r", "exactly": {"deviceClassName": "nope", "count": 1, "allocationMode": "ExactCount"}},
     'claim ns/c, request r: could not retrieve device class nope: deviceclasses.resource.k8s.io "nope" not found'),
    (exactly("r", 33), "claim ns/c, request r: exact count 33 is too large"),
    ({"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}},
     "claim ns/c, request r: unsupported count mode Some"),
])
def test_fatal_errors_carry_upstreams_text(request_, message):
    with pytest.raises(AllocationError) as exc:
        allocate([claim("c", request_)], [SLICE])
    assert str(exc.value) == message


def test_a_constraint_broken_in_all_mode_is_fatal():
    c = claim("c", exactly("a", mode="All"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    with pytest.raises(AllocationError, match=r"cannot add device gpu.example.com/n1/g1 because a claim "
                                              r"constraint would not be satisfied"):
        allocate([c], [SLICE])


def test_a_claim_never_gets_more_than_32_results_an_alternative_that_would_is_skipped():
    many = node_slice("n1", [gpu(f"g{i}") for i in range(40)])
    pick = {"name": "p", "firstAvailable": [
        {"name": "four", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 4},
        {"name": "two", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}]}
    [a] = allocate([claim("c", exactly("bulk", 30), pick)], [many])
    results = a["devices"]["results"]
    assert len(results) == 32 and {r["request"] for r in results[30:]} == {"p/two"}
    with pytest.raises(AllocationError, match="number of requested devices 33 exceeds the claim limit of 32"):
        allocate([claim("c", exactly("bulk", 31), exactly("x", 2))], [many])   # no alternative: fatal


def test_an_impossible_count_is_answered_without_visiting_every_subset():
    # 24 free devices, 25 wanted: without pruning the search would try every subset (2^24 steps).
    wide = node_slice("n1", [gpu(f"g{i}") for i in range(24)])
    alloc = Allocator([claim("c", exactly("r", 25))], CLASSES, set(), SliceIndex([wide]))
    assert alloc.allocate("n1", {}) is None
    assert alloc._steps < 100
