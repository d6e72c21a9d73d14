"""Framework behaviour: FitError messages, score checks, per-node plugins, PreFilter results."""

import re

import pytest

from pysched.apis import config as configmod
from pysched.apis.core.errors import ApiError
from pysched.framework import CycleState, PodInfo
from pysched.framework.interface import (
    BindPlugin,
    FilterPlugin,
    FilterResult,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ScorePlugin,
    scores_each,
)
from pysched.framework.status import Code, Diagnosis, FitError, Status, truncate_message
from pysched.profile import default_registry
from pysched.runtime.registry import Registry
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod


def test_fit_error_message_format():
    d = Diagnosis()
    d.reason_counts.update({"Insufficient cpu": 2, "node(s) had untolerated taint {dedicated: gpu}": 3})
    d.num_failed = 5
    assert FitError("ns/p", 5, d).message() == (
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint {dedicated: gpu}.")
    d.post_filter_msg = "preemption: not eligible due to preemptionPolicy=Never."
    assert FitError("ns/p", 5, d).message().endswith("gpu}. preemption: not eligible due to preemptionPolicy=Never.")
    d2 = Diagnosis()
    d2.pre_filter_msg = "pod affinity terms conflict"
    assert FitError("ns/p", 3, d2).message() == "0/3 nodes are available: pod affinity terms conflict."


def test_truncate_message():
    assert truncate_message("x" * 1024) == "x" * 1024
    t = truncate_message("y" * 2000)
    assert len(t.encode()) == 1024 and t.endswith(" ...")


def test_reasons_counted_from_first_failing_plugin_end_to_end():
    s = OfflineScheduler()
    s.add_node(node("t1", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], cpu="1"))
    s.add_node(node("c1", unschedulable=True, cpu="1"))
    s.add_node(node("s1", cpu="1"))
    s.add_node(node("s2", cpu="1", memory="1Gi"))
    out = s.schedule(pod("p", cpu="2", memory="2Gi"))
    assert out.node is None
    assert out.message == ("0/4 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s), "
                           "1 node(s) were unschedulable, 2 Insufficient cpu. "
                           # DynamicResources' PostFilter (no claims) says nothing at 1.37; DefaultPreemption:
                           # taints and unschedulable are unresolvable, so is a request above allocatable
                           "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


class PerNodeLabel(FilterPlugin, ScorePlugin):
    """A user plugin with per-node logic, through FilterResult.each and scores_each."""
    name = "PerNodeLabel"

    def filter(self, state, pod, nodes):
        def check(node):
            if node.labels.get("team") != "blue":
                return Status(Code.UNSCHEDULABLE, "node(s) not blue")
            return None
        return FilterResult.each(nodes, check)

    def score(self, state, pod, nodes):
        return scores_each(nodes, lambda node: int(node.labels.get("rank", "0")))


class BadScore(ScorePlugin):
    name = "BadScore"

    def score(self, state, pod, nodes):
        return [101] * len(nodes)


class OnlyNode(PreFilterPlugin):
    name = "OnlyNode"

    def pre_filter(self, state, pod, nodes):
        return PreFilterResult({"b2"}), None


def offline(plugins, extra_registry):
    reg = default_registry()
    for cls in extra_registry:
        reg.register(cls)
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": "pysched", "plugins": plugins}]})
    return OfflineScheduler(cfg, registry=reg)


def test_out_of_tree_per_node_plugin():
    s = offline({"multiPoint": {"enabled": [{"name": "PerNodeLabel", "weight": 10}]}}, [PerNodeLabel])
    s.add_node(node("r1", labels={"team": "red"}))
    s.add_node(node("b1", labels={"team": "blue", "rank": "10"}))
    s.add_node(node("b2", labels={"team": "blue", "rank": "90"}))
    out = s.schedule(pod("p"))
    assert out.node == "b2"
    s.remove_node("b1")
    s.remove_node("b2")
    out = s.schedule(pod("q"))
    assert out.message == ("0/1 nodes are available: 1 node(s) not blue. "
                           "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_score_out_of_range_is_an_error():
    s = offline({"score": {"enabled": [{"name": "BadScore"}]}}, [BadScore])
    s.add_node(node("a"))
    s.add_node(node("b"))
    out = s.schedule(pod("p"))
    assert out.code == "SchedulerError" and "invalid score 101" in out.message


def _fixed_scores(plugin_name, by_node):
    """A Score plugin giving each node the score ``by_node`` names (a list: that many scores)."""
    class Fixed(ScorePlugin):
        name = plugin_name

        def score(self, state, pod, nodes):
            if isinstance(by_node, list):
                return by_node
            return [by_node[n] for n in nodes.names]
    return Fixed


@pytest.mark.parametrize("low, high, named, bad", [
    ({"a": -1, "b": 0}, {"a": 50, "b": 50}, "Low", -1),
    ({"a": 0, "b": 0}, {"a": 50, "b": 102}, "High", 102),
    ({"a": -3, "b": 0}, {"a": 101, "b": 50}, "Low", -3),    # both out of range: the first in score order
])
def test_score_range_checked_for_every_plugin(low, high, named, bad):
    s = offline({"score": {"enabled": [{"name": "Low"}, {"name": "High"}]}},
                [_fixed_scores("Low", low), _fixed_scores("High", high)])
    s.add_node(node("a"))
    s.add_node(node("b"))
    out = s.schedule(pod("p"))
    assert out.code == "SchedulerError"
    assert out.message.startswith(f'applying score defaultWeights on Score plugins: plugin "{named}" '
                                  f"returns an invalid score {bad},")


def test_score_of_the_wrong_length_is_an_error_naming_the_plugin():
    s = offline({"score": {"enabled": [{"name": "Short"}]}}, [_fixed_scores("Short", [10])])
    s.add_node(node("a"))
    s.add_node(node("b"))
    out = s.schedule(pod("p"))
    assert out.code == "SchedulerError" and "plugin 'Short' returns 1 scores for 2 nodes" in out.message


@pytest.mark.parametrize("weight, winner", [(3, "a"), (2, "b")])
def test_score_weights_apply_per_plugin(weight, winner):
    # a: 10 * weight + 0; b: 0 + 25
    s = offline({"score": {"enabled": [{"name": "Packed", "weight": weight}, {"name": "Spread", "weight": 1}],
                           "disabled": [{"name": "*"}]}},
                [_fixed_scores("Packed", {"a": 10, "b": 0}), _fixed_scores("Spread", {"a": 0, "b": 25})])
    s.add_node(node("a"))
    s.add_node(node("b"))
    assert s.schedule(pod("p")).node == winner


def test_prefilter_result_restricts_nodes_and_absent_reason():
    s = offline({"preFilter": {"enabled": [{"name": "OnlyNode"}]}}, [OnlyNode])
    for n in ("b1", "b2", "b3"):
        s.add_node(node(n, cpu="1"))
    assert s.schedule(pod("p", cpu="500m")).node == "b2"
    out = s.schedule(pod("q", cpu="800m"))
    assert out.message == ("0/3 nodes are available: 1 Insufficient cpu, "
                           "2 node(s) didn't satisfy plugin(s) [OnlyNode]. "
                           "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                           "2 Preemption is not helpful for scheduling.")


def test_registry_rejects_duplicates_and_non_plugins():
    r = Registry()
    r.register(PerNodeLabel)
    with pytest.raises(ValueError):
        r.register(type("PerNodeLabel", (FilterPlugin,), {"name": "PerNodeLabel"}))
    with pytest.raises(ValueError):
        r.register(int, "x")


def test_registry_requires_declarative_args():
    class HandWritten:
        @classmethod
        def from_dict(cls, raw, path):
            return cls()

    bad = type("HandArgs", (FilterPlugin,), {"name": "HandArgs", "Args": HandWritten})
    with pytest.raises(ValueError, match="HandArgs: Args must be a dataclass"):
        Registry().register(bad)


def test_a_broken_entry_point_fails_only_the_profiles_that_use_it(monkeypatch, caplog):
    """An installed plugin package whose import fails (removed, half-upgraded) is reported by the
    profile that enables it, naming the entry point; profiles without it still build."""
    from importlib.metadata import EntryPoint

    from pysched.runtime import registry as regmod
    broken = EntryPoint("Gone", "no_such_pysched_plugin_pkg.mod:Gone", regmod.ENTRY_POINT_GROUP)
    monkeypatch.setattr(regmod, "entry_points", lambda group: [broken] if group == regmod.ENTRY_POINT_GROUP else [])
    with caplog.at_level("WARNING", logger="pysched.registry"):
        reg = default_registry()
    assert "Gone" not in reg and "no_such_pysched_plugin_pkg" in reg.unloadable["Gone"]
    assert "entry_point=no_such_pysched_plugin_pkg.mod:Gone" in caplog.text
    head = {"apiVersion": configmod.API_VERSION, "kind": configmod.KIND}
    offline = OfflineScheduler(configmod.parse({**head, "profiles": [{"schedulerName": "plain"}]}), registry=reg)
    assert set(offline.frameworks) == {"plain"}
    for profile, where in (({"plugins": {"filter": {"enabled": [{"name": "Gone"}]}}}, "plugins.filter.enabled[0]"),
                           ({"pluginConfig": [{"name": "Gone", "args": {}}]}, "pluginConfig[0].name")):
        with pytest.raises(configmod.ConfigError, match=rf"profiles\[0\]\.{re.escape(where)}: plugin 'Gone' could "
                                                        r"not be loaded: entry point Gone \(no_such_pysched_plugin"):
            OfflineScheduler(configmod.parse({**head, "profiles": [{"schedulerName": "x", **profile}]}), registry=reg)


class _RaisingBinder(BindPlugin):
    name = "RaisingBinder"
    raises: BaseException = RuntimeError("boom")

    async def bind(self, state, pod, node_name):
        raise type(self).raises


class _RaisingPreBind(PreBindPlugin):
    name = "RaisingPreBind"

    async def pre_bind(self, state, pod, node_name):
        raise ApiError(409, "Conflict", "the claim changed")


@pytest.mark.parametrize("raises,warned", [(RuntimeError("boom"), False), (ApiError(500, "InternalError"), True)])
async def test_a_bind_plugin_that_raises_is_an_error_status_naming_it(raises, warned, monkeypatch, caplog):
    monkeypatch.setattr(_RaisingBinder, "raises", raises)
    s = offline({"bind": {"enabled": [{"name": "RaisingBinder"}], "disabled": [{"name": "*"}]}}, [_RaisingBinder])
    fw = s.frameworks["pysched"]
    with caplog.at_level("WARNING", logger="pysched.framework.runtime"):
        st = await fw.run_bind(CycleState(), PodInfo.from_dict(pod("p")), "n1")
    assert st is not None and st.code == Code.ERROR and st.plugin == "RaisingBinder"
    assert st.error is raises
    records = [r for r in caplog.records if r.name == "pysched.framework.runtime"]
    if warned:   # an API answer: one warning line, no traceback
        assert [r.getMessage() for r in records] == ["API request failed"] and records[0].exc_info is None
    else:        # a bug in the plugin: logged with its traceback
        assert records[0].getMessage() == "bind plugin failed plugin=RaisingBinder pod=default/p node=n1"
        assert records[0].exc_info is not None


async def test_a_prebind_plugin_that_raises_stops_the_binding_cycle_with_its_error():
    s = offline({"preBind": {"enabled": [{"name": "RaisingPreBind"}]}}, [_RaisingPreBind])
    st = await s.frameworks["pysched"].run_pre_bind(CycleState(), PodInfo.from_dict(pod("p")), "n1")
    assert st is not None and st.code == Code.ERROR and st.plugin == "RaisingPreBind"
    assert "the claim changed" in st.message()
