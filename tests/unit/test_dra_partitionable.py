"""Partitionable devices (DRAPartitionableDevices) in the DRA allocator: shared counters, devices
consuming them, per-device node selection, and the pool validation, as kube-scheduler 1.37.2's
incubating allocator does them."""

from __future__ import annotations

import pytest

from pysched.plugins.dynamic_resources.allocator import AllocationError, Allocator, InvalidPools, SliceIndex

from .test_dra_allocator import CLASSES, DRIVER, claim, devices_of, exactly, gpu

GATES = frozenset({"DRAPartitionableDevices"})


def allocate(claims, slices, *, features=GATES, allocated=frozenset(), node="n1", labels=None):
    index = SliceIndex(slices, features=features)
    return Allocator(claims, CLASSES, set(allocated), index, features=features).allocate(node, labels or {})


def counters_slice(name: str = "n1-counters", *sets: dict, node: str = "n1", count: int = 2) -> dict:
    return {"metadata": {"name": name},
            "spec": {"driver": DRIVER, "nodeName": node, "sharedCounters": list(sets),
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}}


def devices_slice(*devices: dict, name: str = "n1-devices", node: str = "n1", count: int = 2) -> dict:
    return {"metadata": {"name": name},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": list(devices),
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}}


def counter_set(name: str = "gpu-0", **counters: str) -> dict:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def consuming(name: str, set_name: str = "gpu-0", **counters: str) -> dict:
    return gpu(name, consumesCounters=[{"counterSet": set_name,
                                        "counters": {k: {"value": v} for k, v in counters.items()}}])


MEMORY = counters_slice("n1-counters", counter_set(memory="80Gi"))
PARTS = devices_slice(consuming("whole", memory="80Gi"), consuming("half-0", memory="40Gi"),
                      consuming("half-1", memory="40Gi"))


def test_devices_share_their_pools_counters_and_the_search_backtracks_over_them():
    [a] = allocate([claim("c", exactly("r"))], [MEMORY, PARTS])
    assert devices_of(a) == [("r", "whole")]
    # "whole" leaves nothing for a second device: the two halves are the answer
    [b] = allocate([claim("c", exactly("r", 2))], [MEMORY, PARTS])
    assert devices_of(b) == [("r", "half-0"), ("r", "half-1")]
    assert allocate([claim("c", exactly("r", 3))], [MEMORY, PARTS]) is None
    # two claims of one pod charge the same counters
    x, y = allocate([claim("x", exactly("r")), claim("y", exactly("r"))], [MEMORY, PARTS])
    assert devices_of(x) == [("r", "half-0")] and devices_of(y) == [("r", "half-1")]


def test_allocated_devices_consume_counters_too():
    assert allocate([claim("c", exactly("r"))], [MEMORY, PARTS], allocated={(DRIVER, "n1", "whole")}) is None
    [a] = allocate([claim("c", exactly("r"))], [MEMORY, PARTS], allocated={(DRIVER, "n1", "half-0")})
    assert devices_of(a) == [("r", "half-1")]


def test_a_pool_overdrawn_by_allocated_devices_takes_no_counter_consuming_device():
    # upstream checks every counter of the pool, not only the device's own
    two_sets = counters_slice("n1-counters", counter_set("a", memory="40Gi"), counter_set("b", memory="40Gi"))
    parts = devices_slice(consuming("a-big", "a", memory="40Gi"), consuming("a-big-too", "a", memory="40Gi"),
                          consuming("b-0", "b", memory="10Gi"))
    both = {(DRIVER, "n1", "a-big"), (DRIVER, "n1", "a-big-too")}   # set a is 40Gi overdrawn
    assert allocate([claim("c", exactly("r"))], [two_sets, parts], allocated=both) is None
    [a] = allocate([claim("c", exactly("r"))], [two_sets, parts], allocated={(DRIVER, "n1", "a-big")})
    assert devices_of(a) == [("r", "b-0")]


def test_all_mode_fails_quietly_when_the_counters_do_not_cover_every_device():
    assert allocate([claim("c", exactly("r", mode="All"))], [MEMORY, PARTS]) is None
    halves = devices_slice(consuming("half-0", memory="40Gi"), consuming("half-1", memory="40Gi"))
    [a] = allocate([claim("c", exactly("r", mode="All"))], [MEMORY, halves])
    assert devices_of(a) == [("r", "half-0"), ("r", "half-1")]


def test_with_the_gate_off_counter_slices_are_skipped_and_consuming_devices_never_taken():
    plain = devices_slice(consuming("part", memory="40Gi"), gpu("plain"))
    [a] = allocate([claim("c", exactly("r"))], [MEMORY, plain], features=frozenset())
    assert devices_of(a) == [("r", "plain")]
    assert allocate([claim("c", exactly("r", 2))], [MEMORY, plain], features=frozenset()) is None


@pytest.mark.parametrize("slices", [
    [MEMORY, devices_slice(consuming("d", "nosuch", memory="1"))],                     # counter set X not found
    [MEMORY, devices_slice(consuming("d", memory="1", cores="1"))],                    # counter Y not found in set
    [counters_slice("n1-counters", counter_set(memory="1"), counter_set(memory="2"), count=2),
     devices_slice(gpu("d"))],                                                          # duplicate counter set name
    [counters_slice("n1-c0", counter_set(memory="1"), count=3),
     counters_slice("n1-c1", counter_set(memory="1"), count=3),
     devices_slice(gpu("d"), count=3)],                                                 # ... across slices
])
def test_invalid_pools(slices):
    with pytest.raises(InvalidPools, match="invalid resource pools were encountered"):
        allocate([claim("c", exactly("r"))], slices)
    with pytest.raises(AllocationError, match="asks for all devices, but resource pool gpu.example.com/n1 is "
                                              "currently invalid"):
        allocate([claim("c", exactly("r", mode="All"))], slices)


def test_slices_of_a_pool_are_taken_in_name_order():
    s1 = devices_slice(gpu("b-dev"), name="b", count=2)
    s0 = devices_slice(gpu("a-dev"), name="a", count=2)
    [a] = allocate([claim("c", exactly("r"))], [s1, s0])
    assert devices_of(a) == [("r", "a-dev")]


def per_device_slice(*devices: dict) -> dict:
    return {"metadata": {"name": "shared"},
            "spec": {"driver": DRIVER, "perDeviceNodeSelection": True, "devices": list(devices),
                     "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1}}}


ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}


def test_per_device_node_selection():
    s = per_device_slice(gpu("on-n2", nodeName="n2"), gpu("on-n1", nodeName="n1"), gpu("zone-a", nodeSelector=ZONE_A),
                         gpu("anywhere", allNodes=True))
    [a] = allocate([claim("c", exactly("r"))], [s])
    assert devices_of(a) == [("r", "on-n1")]
    assert a["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    [b] = allocate([claim("c", exactly("r", 2))], [s], allocated={(DRIVER, "shared", "on-n1")},
                   labels={"zone": "a"})
    assert devices_of(b) == [("r", "zone-a"), ("r", "anywhere")]
    assert b["nodeSelector"] == ZONE_A   # the device's selector; allNodes adds nothing
    [c] = allocate([claim("c", exactly("r"))], [s], node="n3")
    assert devices_of(c) == [("r", "anywhere")] and "nodeSelector" not in c
    # "All" takes only the devices for this node
    [d] = allocate([claim("c", exactly("r", mode="All"))], [s], node="n3", labels={"zone": "a"})
    assert devices_of(d) == [("r", "zone-a"), ("r", "anywhere")]
    # a slice with no device for the node is not part of its pools; with the gate off it is ignored
    assert allocate([claim("c", exactly("r"))], [per_device_slice(gpu("x", nodeName="n2"))]) is None
    assert allocate([claim("c", exactly("r"))], [s], features=frozenset()) is None


def test_counters_of_a_pool_spread_over_slices_for_other_nodes():
    # the counter slice serves every node; n1 sees its device slice and the counters
    counters = {"metadata": {"name": "pool-counters"},
                "spec": {"driver": DRIVER, "allNodes": True, "sharedCounters": [counter_set(memory="40Gi")],
                         "pool": {"name": "p", "generation": 1, "resourceSliceCount": 3}}}
    n1 = {"metadata": {"name": "pool-n1"},
          "spec": {"driver": DRIVER, "nodeName": "n1", "devices": [consuming("n1-part", memory="40Gi")],
                   "pool": {"name": "p", "generation": 1, "resourceSliceCount": 3}}}
    n2 = {"metadata": {"name": "pool-n2"},
          "spec": {"driver": DRIVER, "nodeName": "n2", "devices": [consuming("n2-part", memory="40Gi")],
                   "pool": {"name": "p", "generation": 1, "resourceSliceCount": 3}}}
    [a] = allocate([claim("c", exactly("r"))], [counters, n1, n2])
    assert devices_of(a) == [("r", "n1-part")]
    # n2's allocated device consumed the shared counter: nothing left for n1's
    assert allocate([claim("c", exactly("r"))], [counters, n1, n2], allocated={(DRIVER, "p", "n2-part")}) is None
