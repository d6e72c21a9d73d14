"""Tests of TeamNodes with ``pysched.testing.PluginTester``: the plugin over a real scheduler
snapshot built from Node and Pod objects, its Args through pysched's strict decoder, its
queueing hints, and its registration through the ``pysched.plugins`` entry point.

Run from this directory, with the package installed: ``pip install -e . && pytest``.
"""

from __future__ import annotations

import pytest
from pysched_example_plugins import TeamNodes, TeamNodesArgs
from pysched_example_plugins.team_nodes import REASON

from pysched.framework import (
    ClusterEvent,
    Code,
    FilterResult,
    NodeInfo,
    PodInfo,
    Status,
    decode_args,
    encode_args,
    scores_each,
)
from pysched.framework.api import ConfigError
from pysched.framework.nodeinfo import NodeSpec
from pysched.testing import UAU, PluginTester

REJECTED = (UAU, (REASON,))


def node(name: str, **labels: str) -> dict:
    """A Node as the API returns it (what ``kubectl get node -o yaml`` prints, trimmed)."""
    alloc = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {}, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
            "spec": {"schedulerName": "pysched",
                     "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "100m"}}}]}}


CLUSTER = [node("red-1", team="red"), node("blue-1", team="blue"), node("shared-1"), node("shared-2")]


# -- Filter -------------------------------------------------------------------------------------


def test_a_team_pod_runs_on_its_team_nodes_and_shared_ones():
    t = PluginTester(TeamNodes, nodes=CLUSTER)
    assert t.filter(pod("web", team="red")) == {"red-1": None, "blue-1": REJECTED, "shared-1": None, "shared-2": None}
    assert t.filter(pod("api", team="blue")) == {"red-1": REJECTED, "blue-1": None, "shared-1": None, "shared-2": None}


def test_a_pod_without_a_team_runs_on_shared_nodes_only():
    t = PluginTester(TeamNodes, nodes=CLUSTER)
    assert t.filter(pod("batch")) == {"red-1": REJECTED, "blue-1": REJECTED, "shared-1": None, "shared-2": None}
    # a team no node belongs to: shared nodes only, too
    assert t.filter(pod("ml", team="green")) == {"red-1": REJECTED, "blue-1": REJECTED, "shared-1": None,
                                                 "shared-2": None}


def test_the_readme_example():
    t = PluginTester(TeamNodes, {"labelKey": "team"},
                     nodes=[node("red-1", team="red"), node("blue-1", team="blue"), node("shared-1")])
    assert t.filter(pod("web", team="red")) == {
        "red-1": None, "blue-1": (UAU, ("node(s) belong to another team",)), "shared-1": None}


def test_the_label_key_is_configurable():
    key = "example.com/team"
    t = PluginTester(TeamNodes, {"labelKey": key},
                     nodes=[node("red-1", **{key: "red"}), node("old-style", team="blue")])
    # ``team`` is just another label now: the node that has only it is shared
    assert t.filter(pod("web", **{key: "red"})) == {"red-1": None, "old-style": None}
    assert t.filter(pod("api", **{key: "blue"})) == {"red-1": REJECTED, "old-style": None}
    assert t.filter(pod("batch", team="red")) == {"red-1": REJECTED, "old-style": None}


# -- Score ---------------------------------------------------------------------------------------


def test_own_nodes_score_higher_normalised_to_100():
    feasible = [node("red-1", team="red"), node("red-2", team="red"), node("shared-1")]
    t = PluginTester(TeamNodes, nodes=feasible)
    assert t.score(pod("web", team="red"), normalize=False) == {"red-1": 3, "red-2": 3, "shared-1": 1}
    assert t.score(pod("web", team="red")) == {"red-1": 100, "red-2": 100, "shared-1": 33}
    t = PluginTester(TeamNodes, {"ownNodeWeight": 4, "sharedNodeWeight": 1}, nodes=feasible)
    assert t.score(pod("web", team="red")) == {"red-1": 100, "red-2": 100, "shared-1": 25}


def test_only_shared_candidates_score_equally():
    t = PluginTester(TeamNodes, nodes=[node("shared-1"), node("shared-2")])
    assert t.score(pod("web", team="red")) == {"shared-1": 100, "shared-2": 100}
    t = PluginTester(TeamNodes, {"ownNodeWeight": 0, "sharedNodeWeight": 0}, nodes=[node("shared-1")])
    assert t.score(pod("web", team="red")) == {"shared-1": 0}


def test_prescore_skips_pods_without_a_team():
    t = PluginTester(TeamNodes, nodes=CLUSTER)
    t.score(pod("batch"))
    assert t.status is not None and t.status.is_skip()
    t.score(pod("web", team="red"))
    assert t.status is None


def test_the_vectorised_plugin_agrees_with_the_rule_written_per_node():
    # The same rule node by node, through FilterResult.each / scores_each: simpler to read, slower
    # on thousands of nodes. Writing both and comparing them is a cheap check of the vector code.
    t = PluginTester(TeamNodes, nodes=CLUSTER)
    nodes = t.nodes()
    for raw in (pod("web", team="red"), pod("batch"), pod("ml", team="green")):
        p = PodInfo.from_dict(raw)
        team = p.labels.get("team")

        def check(n: NodeInfo, team: str | None = team) -> Status | None:
            owner = n.labels.get("team")
            return None if owner is None or owner == team else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

        per_node = FilterResult.each(nodes, check)
        assert t.filter(raw) == {name: None if per_node.passed[i] else REJECTED for i, name in enumerate(nodes.names)}
        expected = scores_each(nodes,
                               lambda n, team=team: 3 if team is not None and n.labels.get("team") == team else 1)
        assert t.score(raw, normalize=False) == dict(zip(nodes.names, expected.tolist()))


# -- Args ----------------------------------------------------------------------------------------


def test_args_defaults_and_wire_names():
    assert decode_args(TeamNodesArgs, None, "args") == TeamNodesArgs("team", 3, 1)
    a = decode_args(TeamNodesArgs, {"kind": "TeamNodesArgs", "labelKey": "example.com/team",
                                    "ownNodeWeight": 10, "sharedNodeWeight": 0}, "args")
    assert a == TeamNodesArgs(label_key="example.com/team", own_node_weight=10, shared_node_weight=0)
    assert encode_args(a) == {"labelKey": "example.com/team", "ownNodeWeight": 10, "sharedNodeWeight": 0}


@pytest.mark.parametrize("raw, message", [
    ({"labelkey": "team"}, "args.labelkey: unknown field"),
    ({"kind": "NodeAffinityArgs"}, "args.kind: expected TeamNodesArgs, got 'NodeAffinityArgs'"),
    ({"ownNodeWeight": "high"}, "args.ownNodeWeight: expected an integer, got 'high'"),
    ({"ownNodeWeight": 101}, "args.ownNodeWeight: must be <= 100, got 101"),
    ({"sharedNodeWeight": -1}, "args.sharedNodeWeight: must be >= 0, got -1"),
    ({"labelKey": 7}, "args.labelKey: expected a string, got 7"),
    ({"labelKey": "team name"}, "args.labelKey: Invalid value 'team name': name part must consist of"),
    ({"labelKey": ""}, "args.labelKey: Invalid value '': name part must be non-empty"),
    ({"ownNodeWeight": 1, "sharedNodeWeight": 2}, "args.ownNodeWeight: must be >= sharedNodeWeight (2), got 1"),
])
def test_bad_args_are_rejected_naming_the_field(raw, message):
    with pytest.raises(ConfigError) as err:
        decode_args(TeamNodesArgs, raw, "args")
    assert str(err.value).startswith(message)


# -- EnqueueExtensions ---------------------------------------------------------------------------


def hint_for(plugin: TeamNodes, resource: str, action: str):
    (reg,) = [r for r in plugin.events_to_register() if r.event == ClusterEvent(resource, action)]
    return reg.hint


def test_a_rejected_pod_is_requeued_only_by_a_node_it_may_use():
    plugin = PluginTester(TeamNodes).plugin      # built as the framework builds it
    added = hint_for(plugin, "Node", "Add")
    web, batch = PodInfo.from_dict(pod("web", team="red")), PodInfo.from_dict(pod("batch"))
    red, blue, shared = (NodeSpec.from_dict(n) for n in (node("r", team="red"), node("b", team="blue"), node("s")))
    assert added(web, None, red) and added(web, None, shared) and not added(web, None, blue)
    assert added(batch, None, shared) and not added(batch, None, red)

    relabelled = hint_for(plugin, "Node", "UpdateNodeLabel")
    assert relabelled(web, blue, red)          # now the pod's team's node
    assert relabelled(web, blue, shared)       # the team label was removed
    assert not relabelled(web, shared, red)    # it took the pod before: not what rejected it
    assert not relabelled(web, red, blue)
    assert {(r.event.resource, r.event.action) for r in plugin.events_to_register()} == {
        ("Node", "Add"), ("Node", "UpdateNodeLabel")}


# -- registration --------------------------------------------------------------------------------


def test_installed_package_registers_the_plugin_through_its_entry_point():
    from pysched.runtime.registry import build_registry

    assert build_registry()["TeamNodes"] is TeamNodes
