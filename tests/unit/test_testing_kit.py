"""pysched.testing beyond Filter and Score: PluginTester on Reserve/Unreserve, Permit, PostFilter,
PreBind and Bind, and ProfileHarness running a whole profile with an author's plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from pysched.framework import (
    MAX_NODE_SCORE,
    BindPlugin,
    Code,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
)
from pysched.testing import PluginTester, ProfileHarness, make_node, make_pod


class Ledger(ReservePlugin, PermitPlugin, PostFilterPlugin, PreBindPlugin, BindPlugin):
    """Records what it was asked; holds pods labelled hold=yes at Permit for 5 s."""
    name = "Ledger"

    def __init__(self, args, handle):
        super().__init__(args, handle)
        self.reserved: set[tuple[str, str]] = set()

    def reserve(self, state, pod, node_name):
        if node_name == "full":
            return Status(Code.UNSCHEDULABLE, "node is full")
        self.reserved.add((pod.key, node_name))
        return None

    def unreserve(self, state, pod, node_name):
        self.reserved.discard((pod.key, node_name))

    def permit(self, state, pod, node_name):
        if pod.labels.get("hold") == "yes":
            return Status(Code.WAIT, "waiting for its group"), 5.0
        return None, 0.0

    def post_filter(self, state, pod, diagnosis):
        return PostFilterResult("spare"), Status(Code.SUCCESS)

    async def pre_bind(self, state, pod, node_name):
        return None if node_name != "broken" else Status(Code.ERROR, "volume not attached")

    async def bind(self, state, pod, node_name):
        return Status(Code.SKIP)


def test_plugin_tester_reaches_every_extension_point():
    t = PluginTester(Ledger, nodes=[make_node("n1"), make_node("full")])
    web = make_pod("web")
    assert t.reserve(web, "n1") is None and t.plugin.reserved == {("default/web", "n1")}
    t.unreserve(web, "n1")
    assert t.plugin.reserved == set()
    assert t.reserve(web, "full").message() == "node is full"
    status, timeout = t.permit(make_pod("member", labels={"hold": "yes"}), "n1")
    assert status.code == Code.WAIT and timeout == 5.0
    assert t.permit(web, "n1") == (None, 0.0)
    result, _ = t.post_filter(web)
    assert result.nominated_node_name == "spare"
    assert t.pre_bind(web, "n1") is None and t.pre_bind(web, "broken").message() == "volume not attached"
    assert t.bind(web, "n1").is_skip()


def test_plugin_tester_says_what_a_plugin_does_not_implement():
    class OnlyScore(ScorePlugin):
        name = "OnlyScore"

        def score(self, state, pod, nodes):
            return np.zeros(len(nodes), dtype=np.int64)
    with pytest.raises(TypeError, match="OnlyScore does not implement permit"):
        PluginTester(OnlyScore, nodes=[make_node("n1")]).permit(make_pod("p"), "n1")


@dataclass
class PreferArgs:
    KIND: ClassVar[str] = "PreferArgs"
    label: str = "tier"
    value: str = "fast"


class Prefer(ScorePlugin):
    """Scores 100 where the node's ``label`` is ``value``."""
    name = "Prefer"
    Args = PreferArgs

    def score(self, state, pod, nodes):
        return np.where(nodes.label(self.args.label).equals(self.args.value), MAX_NODE_SCORE, 0).astype(np.int64)


def test_profile_harness_runs_a_whole_profile_with_the_authors_plugin():
    nodes = [make_node("big-slow", cpu="16", labels={"tier": "slow"}),
             make_node("small-fast", cpu="4", labels={"tier": "fast"})]
    plain = ProfileHarness(nodes=nodes)
    assert plain.schedule(make_pod("web", cpu="1")).node == "big-slow"      # LeastAllocated alone
    profile = {"plugins": {"multiPoint": {"enabled": [{"name": "Prefer", "weight": 5}]}},
               "pluginConfig": [{"name": "Prefer", "args": {"value": "fast"}}]}
    harness = ProfileHarness(profile, plugins=[Prefer], nodes=nodes)
    out = harness.schedule(make_pod("web", cpu="1"))
    assert out.node == "small-fast" and out.code == "Scheduled"
    scores = ProfileHarness.scores(out)
    assert scores["Prefer"] == {"big-slow": 0, "small-fast": 500}          # weight 5 x 100
    assert "NodeResourcesFit" in scores
    too_big = harness.schedule(make_pod("huge", cpu="64"))
    assert too_big.node is None and too_big.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
