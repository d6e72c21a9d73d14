"""Typed plugin arguments (``ScorePlugin[MyArgs]``) and NodeBatch's per-slot arrays, as the plugin API
documents them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from pysched.framework import CycleState, FilterPlugin, NodeBatch, PodInfo, ScorePlugin
from pysched.testing import PluginTester, make_node, make_pod


@dataclass
class PriceArgs:
    KIND: ClassVar[str] = "PriceArgs"
    label: str = "example.com/price"


class Price(ScorePlugin[PriceArgs]):
    name = "Price"

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        return np.nan_to_num(nodes.label(self.args.label).ints()).astype(np.int64)


class Gate(FilterPlugin):
    name = "Gate"


def test_the_type_parameter_is_the_args_and_the_framework_builds_the_defaults():
    assert Price.Args is PriceArgs and Gate.Args is None
    assert isinstance(Price(None, handle=None).args, PriceArgs)          # no pluginConfig entry
    given = PriceArgs(label="x")
    assert Price(given, handle=None).args is given
    assert Gate(None, handle=None).args is None
    nodes = [make_node("a", labels={"example.com/price": "7"}), make_node("b", labels={"p": "3"})]
    assert PluginTester(Price, nodes=nodes).score(make_pod("p"), normalize=False) == {"a": 7, "b": 0}
    assert PluginTester(Price, {"label": "p"}, nodes=nodes).score(make_pod("p"), normalize=False) == {"a": 0, "b": 3}


def test_args_named_twice_must_agree():
    @dataclass
    class Other:
        KIND: ClassVar[str] = "Other"

    with pytest.raises(TypeError, match=r"Confused: Args = \S*Other but the class is typed with \S*PriceArgs"):
        class Confused(ScorePlugin[PriceArgs]):
            name = "Confused"
            Args = Other

    class Explicit(ScorePlugin[PriceArgs]):       # naming the same class twice is allowed
        name = "Explicit"
        Args = PriceArgs
    assert Explicit.Args is PriceArgs


def test_per_slot_arrays_follow_the_node_table():
    t = PluginTester(Price, nodes=[make_node(n, cpu=c) for n, c in (("a", "2"), ("b", "4"), ("c", "8"))])
    nodes = t.nodes()
    index = dict(nodes.slot_index)
    assert sorted(index) == ["a", "b", "c"] and nodes.slot_count >= 3
    per_slot = np.full(nodes.slot_count, -1)
    for name, slot in index.items():
        per_slot[slot] = ord(name)
    assert nodes.take(per_slot).tolist() == [ord(n) for n in nodes.names]
    cpu = nodes.allocatable_by_slot("cpu")
    assert {n: int(cpu[s]) for n, s in index.items()} == {"a": 2000, "b": 4000, "c": 8000}
    assert nodes.allocatable_by_slot("example.com/none").shape == (nodes.slot_count,)
    version = nodes.nodes_version
    assert t.nodes().nodes_version == version                  # nothing changed: the array stays valid
    t.add_node(make_node("d"))
    after = t.nodes()
    assert after.nodes_version != version and "d" in after.slot_index   # a new node: rebuild
    changed = t.nodes().nodes_version
    t.add_node(make_node("d", cpu="16"))
    assert t.nodes().nodes_version != changed                   # a changed node: rebuild


def test_label_totals_and_lookup_are_a_per_domain_round_trip():
    zones = {"a1": "a", "a2": "a", "b1": "b", "none": None}
    t = PluginTester(Price, nodes=[make_node(n, labels={"zone": z} if z else {}) for n, z in zones.items()])
    nodes = t.nodes()
    values = nodes.label("zone")
    per_node = np.array([{"a1": 1, "a2": 2, "b1": 5, "none": 9}[n] for n in nodes.names])
    totals = values.totals(per_node)
    assert {z: int(totals[values.code(z)]) for z in "ab"} == {"a": 3, "b": 5}    # "none" counts nowhere
    back = values.lookup(totals, absent=-1)
    assert dict(zip(nodes.names, back.tolist())) == {"a1": 3, "a2": 3, "b1": 5, "none": -1}
    only_a1 = values.totals(per_node, mask=np.array([n == "a1" for n in nodes.names]))
    assert int(only_a1[values.code("a")]) == 1
