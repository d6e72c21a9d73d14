"""Cache accounting: assume/forget, informer confirmation, pods on unknown nodes, node removal."""

import numpy as np
import pytest

from pysched.apis.core.quantity import MAX_AMOUNT
from pysched.backend.cache.cache import SchedulerCache
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo

from .conftest import node, pod


def test_assume_counts_immediately_and_forget_undoes():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1", cpu="4")))
    p = PodInfo.from_dict(pod("a", cpu="1"))
    c.assume(p, "n1")
    info = c.nodes["n1"]
    assert info.requested["cpu"] == 1000 and len(info.pods) == 1
    assert c.table.req[info.slot, c.table.res_index["cpu"]] == 1000
    assert c.table.npods[info.slot] == 1
    assert c.forget(p)
    assert info.requested.get("cpu", 0) == 0 and not info.pods
    assert c.table.req[info.slot, c.table.res_index["cpu"]] == 0
    assert not c.forget(p)  # forgetting twice is a no-op


def test_informer_confirms_assumed_pod_without_double_counting():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1")))
    raw = pod("a", cpu="1")
    p = PodInfo.from_dict(raw)
    c.assume(p, "n1")
    raw["spec"]["nodeName"] = "n1"
    old, confirmed = c.upsert_pod(PodInfo.from_dict(raw))
    assert confirmed and old is not None
    assert c.nodes["n1"].requested["cpu"] == 1000
    assert not c.is_assumed(p.uid)
    assert not c.forget(p)  # a late bind failure must not remove a confirmed pod


def test_pod_bound_elsewhere_moves_accounting():
    c = SchedulerCache()
    for n in ("n1", "n2"):
        c.upsert_node(NodeSpec.from_dict(node(n)))
    raw = pod("a", cpu="1")
    c.assume(PodInfo.from_dict(raw), "n1")
    raw["spec"]["nodeName"] = "n2"
    c.upsert_pod(PodInfo.from_dict(raw))
    assert c.nodes["n1"].requested.get("cpu", 0) == 0
    assert c.nodes["n2"].requested["cpu"] == 1000


def test_pods_on_unknown_node_are_counted_when_node_appears():
    c = SchedulerCache()
    c.upsert_pod(PodInfo.from_dict(pod("a", cpu="1", node_name="late")))
    c.upsert_node(NodeSpec.from_dict(node("late")))
    info = c.nodes["late"]
    assert info.requested["cpu"] == 1000
    assert c.table.npods[info.slot] == 1


def test_remove_node_keeps_pods_for_return():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1")))
    c.upsert_pod(PodInfo.from_dict(pod("a", cpu="1", node_name="n1")))
    c.remove_node("n1")
    assert "n1" not in c.nodes and len(c.table.order()) == 0
    c.upsert_node(NodeSpec.from_dict(node("n1")))
    assert c.nodes["n1"].requested["cpu"] == 1000


def test_delete_and_update_change_totals():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1")))
    raw = pod("a", cpu="1", node_name="n1")
    p = PodInfo.from_dict(raw)
    c.upsert_pod(p)
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    c.upsert_pod(PodInfo.from_dict(raw))
    assert c.nodes["n1"].requested["cpu"] == 500
    c.remove_pod(p.uid)
    assert c.nodes["n1"].requested.get("cpu", 0) == 0 and not c.nodes["n1"].pods


def test_node_heartbeat_does_not_touch_table():
    c = SchedulerCache()
    raw = node("n1")
    c.upsert_node(NodeSpec.from_dict(raw))
    v = c.table.version
    raw["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    kind, _ = c.upsert_node(NodeSpec.from_dict(raw))
    assert kind == "unchanged" and c.table.version == v


def test_extended_resource_columns_and_slot_reuse():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1", extended={"nvidia.com/gpu": "4"})))
    c.upsert_node(NodeSpec.from_dict(node("n2")))
    t = c.table
    col = t.res_index["nvidia.com/gpu"]
    assert t.alloc[c.nodes["n1"].slot, col] == 4 and t.alloc[c.nodes["n2"].slot, col] == 0
    slot = c.nodes["n1"].slot
    c.remove_node("n1")
    c.upsert_node(NodeSpec.from_dict(node("n3")))
    assert c.nodes["n3"].slot == slot and t.alloc[slot, col] == 0


def test_zone_interleaved_order():
    c = SchedulerCache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("b2", "b")]:
        c.upsert_node(NodeSpec.from_dict(node(name, labels={"topology.kubernetes.io/zone": zone})))
    names = c.table.names(c.table.order())
    assert names == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_table_grows_beyond_initial_capacity():
    c = SchedulerCache()
    for i in range(200):
        c.upsert_node(NodeSpec.from_dict(node(f"n{i}", cpu="2")))
    assert c.table.capacity >= 200
    assert int(np.sum(c.table.alloc[c.table.order(), 0])) == 200 * 2000


def _table_state(c):
    t = c.table
    return (sorted(c.nodes), dict(t.slot_by_name), t.count, t.alive.copy(), t.alloc.copy(), t.req.copy(),
            t.npods.copy(), list(t._free), c.dump(), {n: sorted(p) for n, p in c.parked.items()},
            sorted(c.pods), sorted(c.with_affinity), list(t.res_names), list(t.taint_sets),
            {k: list(col.values) for k, col in t.columns.items()}, t.taint_class.copy())


def _same(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


def test_huge_allocatable_saturates_and_the_node_registers():
    c = SchedulerCache()
    kind, info = c.upsert_node(NodeSpec.from_dict(node("big", cpu="1E", memory="10E")))
    assert kind == "added" and info.allocatable["cpu"] == MAX_AMOUNT
    cpu = c.table.res_index["cpu"]
    assert c.table.alloc[info.slot, cpu] == MAX_AMOUNT and c.table.alive[info.slot]
    c.upsert_pod(PodInfo.from_dict(pod("p", cpu="1E", node_name="big")))
    assert c.table.req[info.slot, cpu] == MAX_AMOUNT


def test_a_node_the_table_cannot_hold_leaves_no_half_registered_slot():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("gone", cpu="8")))
    c.remove_node("gone")                       # its slot, with values written, goes to the free list
    c.upsert_pod(PodInfo.from_dict(pod("parked", cpu="1", node_name="bad")))
    before = _table_state(c)
    bad = NodeSpec.from_dict(node("bad", cpu="2"))
    bad.allocatable["cpu"] = 2**70              # beyond int64: only a hand-built spec can carry it
    with pytest.raises(OverflowError):
        c.upsert_node(bad)
    _same(before, _table_state(c))              # nothing registered, the reused slot untouched
    assert "bad" in c.parked
    kind, info = c.upsert_node(NodeSpec.from_dict(node("bad", cpu="2")))
    assert kind == "added" and c.table.alloc[info.slot, c.table.res_index["cpu"]] == 2000
    assert c.nodes["bad"].requested["cpu"] == 1000 and c.table.npods[info.slot] == 1
    before = _table_state(c)
    with pytest.raises(OverflowError):          # an update is all or nothing too
        c.upsert_node(bad)
    _same(before, _table_state(c))
    assert c.nodes["bad"].allocatable["cpu"] == 2000


def test_nodes_as_sent_are_used_then_gone():
    c = SchedulerCache()
    c.upsert_node(NodeSpec.from_dict(node("n1", cpu="2")))
    c.upsert_node(NodeSpec.from_dict(node("n2", cpu="2")))
    c.upsert_pod(PodInfo.from_dict(pod("on-n1", cpu="1", node_name="n1", affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}]}})))
    c.upsert_pod(PodInfo.from_dict(pod("on-ghost", cpu="1", node_name="ghost")))   # parked
    c.remove_node("n2")
    c.table.label_column("fake")
    before = _table_state(c)
    sent = [NodeSpec.from_dict(node("n1", cpu="64", labels={"fake": "yes", "fake2": "x"})),
            NodeSpec.from_dict(node("ghost", cpu="4", extended={"example.com/gpu": "1"},
                                    taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))]
    with c.nodes_as_sent(sent):
        c.table.label_column("fake2")  # a plugin's first use of a label key, during the request
        assert c.nodes["n1"].allocatable["cpu"] == 64000 and c.nodes["n1"].requested["cpu"] == 1000
        ghost = c.nodes["ghost"]
        assert ghost.requested["cpu"] == 1000 and c.table.npods[ghost.slot] == 1   # the parked pod counts
        assert c.table.alloc[c.nodes["n1"].slot, c.table.res_index["cpu"]] == 64000
    _same(before, _table_state(c))   # no resource column, taint list or label value left behind
    assert c.nodes["n1"].labels.get("fake") is None and "example.com/gpu" not in c.table.res_index
    with pytest.raises(RuntimeError):
        with c.nodes_as_sent(sent):
            raise RuntimeError("evaluation failed")
    _same(before, _table_state(c))
    with c.nodes_as_sent([NodeSpec.from_dict(node("n1", cpu="2"))]):
        c.table.label_column("kubernetes.io/hostname")   # only values of nodes that stay: kept
    assert c.table.columns["kubernetes.io/hostname"].values == ["n1"]
