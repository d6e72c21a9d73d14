"""TaintToleration, NodeAffinity, NodeUnschedulable, NodeName, PrioritySort."""

import pytest

from pysched.apis.config import ConfigError
from pysched.framework.cycle_state import CycleState
from pysched.framework.podinfo import PodInfo
from pysched.plugins.node_affinity import ERR_REASON_CONFLICT, NodeAffinity
from pysched.plugins.node_name import NodeName
from pysched.plugins.node_unschedulable import NodeUnschedulable
from pysched.plugins.queue_sort import PrioritySort
from pysched.plugins.taint_toleration import TaintToleration
from pysched.testing import UAU, PluginTester

from .conftest import node, pod

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
NODES = [
    node("plain"),
    node("gpu", taints=[GPU_TAINT]),
    node("evict", taints=[{"key": "x", "effect": "NoExecute"}]),
    node("prefer", taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
    node("prefer2", taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
                            {"key": "old", "effect": "PreferNoSchedule"}]),
]


def test_taint_filter():
    hh = PluginTester(TaintToleration, nodes=NODES)
    r = hh.filter(pod("p"))
    assert r["plain"] is None and r["prefer"] is None
    assert r["gpu"] == (UAU, ("node(s) had untolerated taint(s)",))
    assert r["evict"] == (UAU, ("node(s) had untolerated taint(s)",))
    tol = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    assert hh.filter(pod("t", tolerations=tol))["gpu"] is None
    assert hh.filter(pod("all", tolerations=[{"operator": "Exists"}]))["evict"] is None


def test_taint_comparison_operators_arg():
    nodes = [node("sla", taints=[{"key": "sla", "value": "950", "effect": "NoSchedule"}])]
    gt = pod("gt", tolerations=[{"key": "sla", "operator": "Gt", "value": "900", "effect": "NoSchedule"}])
    assert PluginTester(TaintToleration, nodes=nodes).filter(gt)["sla"] == (UAU, ("node(s) had untolerated taint(s)",))
    assert PluginTester(TaintToleration, {"comparisonOperators": True}, nodes=nodes).filter(gt)["sla"] is None


def test_taint_score_prefers_fewer_untolerated_prefer_no_schedule():
    hh = PluginTester(TaintToleration, nodes=NODES)
    s = hh.score(pod("p"))
    assert s["plain"] == 100 and s["prefer2"] == 0 and s["prefer"] == 50
    tol = [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
    s2 = hh.score(pod("t", tolerations=tol))
    assert s2["prefer"] == 100 and s2["prefer2"] == 0
    # a NoSchedule-only toleration does not count for scoring
    s3 = hh.score(pod("u", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]))
    assert s3["prefer"] == 50


ZN = [node(f"n-{z}-{i}", labels={"zone": z, "cores": str(c)}) for z, i, c in
      [("a", 1, 4), ("a", 2, 16), ("b", 1, 8), ("c", 1, 32)]]


def aff(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def test_node_selector_and_affinity_filter():
    hh = PluginTester(NodeAffinity, nodes=ZN)
    r = hh.filter(pod("p", node_selector={"zone": "a"}))
    assert [n for n, v in r.items() if v is None] == ["n-a-1", "n-a-2"]
    assert r["n-b-1"] == (UAU, ("node(s) didn't match Pod's node affinity/selector",))
    r = hh.filter(pod("q", affinity=aff({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
                                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]})))
    assert sorted(n for n, v in r.items() if v is None) == ["n-a-2", "n-b-1", "n-c-1"]
    r = hh.filter(pod("s", node_selector={"zone": "a"},
                      affinity=aff({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]})))
    assert [n for n, v in r.items() if v is None] == ["n-a-1"]
    r = hh.filter(pod("nz", affinity=aff({"matchExpressions": [
        {"key": "zone", "operator": "NotIn", "values": ["a", "b"]},
        {"key": "gpu", "operator": "DoesNotExist"}]})))
    assert [n for n, v in r.items() if v is None] == ["n-c-1"]


def test_prefilter_match_fields_and_conflict():
    hh = PluginTester(NodeAffinity, nodes=ZN)
    p = PodInfo.from_dict(pod("p", affinity=aff({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n-b-1"]}]})))
    res, st = hh.plugin.pre_filter(CycleState(), p, hh.nodes())
    assert st is None and res.node_names == {"n-b-1"}
    conflict = PodInfo.from_dict(pod("c", affinity=aff({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n-b-1"]},
        {"key": "metadata.name", "operator": "In", "values": ["n-c-1"]}]})))
    res, st = hh.plugin.pre_filter(CycleState(), conflict, hh.nodes())
    assert st.code == UAU and st.reasons == (ERR_REASON_CONFLICT,)
    plain = PodInfo.from_dict(pod("x"))
    _, st = hh.plugin.pre_filter(CycleState(), plain, hh.nodes())
    assert st.is_skip()


def test_added_affinity_from_args():
    from pysched.framework.args import decode_args, encode_args

    args = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}]}}}
    hh = PluginTester(NodeAffinity, args=args, nodes=ZN)
    r = hh.filter(pod("p"))
    assert r["n-c-1"] is None
    assert r["n-a-1"] == (UAU, ("node(s) didn't match scheduler-enforced node affinity",))
    with pytest.raises(ConfigError, match=r"addedAffinity.*operator"):
        decode_args(NodeAffinity.Args, {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Bad"}]}]}}}, "args")
    with pytest.raises(ConfigError, match=r"args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                                          r".nodeSelectorTerms: must have at least one"):
        decode_args(NodeAffinity.Args, {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": []}}}, "args")
    # --write-config-to prints what was configured
    assert encode_args(hh.plugin.args) == args
    # added preferred terms score like the pod's own
    pref = {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
    assert PluginTester(NodeAffinity, pref, nodes=ZN).score(pod("p"))["n-b-1"] == 100


def test_preferred_affinity_score():
    hh = PluginTester(NodeAffinity, nodes=ZN)
    p = pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 30, "preference": {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["10"]}]}},
    ]}})
    s = hh.score(p)
    assert s == {"n-a-1": 25, "n-b-1": 0, "n-c-1": 75, "n-a-2": 100}


def test_node_unschedulable():
    hh = PluginTester(NodeUnschedulable, nodes=[node("ok"), node("cordoned", unschedulable=True)])
    r = hh.filter(pod("p"))
    assert r == {"ok": None, "cordoned": (UAU, ("node(s) were unschedulable",))}
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert hh.filter(pod("t", tolerations=tol))["cordoned"] is None


def test_node_name():
    hh = PluginTester(NodeName, nodes=[node("a"), node("b")])
    r = hh.filter(pod("p", node_name="a"))
    assert r["a"] is None and r["b"] == (UAU, ("node(s) didn't match the requested node name",))
    assert hh.filter(pod("q"))["b"] is None


def test_priority_sort_key():
    ps = PluginTester(PrioritySort).plugin
    def mk(prio, ts):
        return type("Q", (), {"pod": PodInfo.from_dict(pod("x", priority=prio)), "timestamp": ts})()
    assert sorted([mk(1, 1.0), mk(5, 2.0), mk(1, 0.5)], key=ps.sort_key)[0].pod.priority == 5
    assert ps.sort_key(mk(1, 0.5)) < ps.sort_key(mk(1, 1.0))


def _preferred(*terms):
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [e]}} for w, e in terms]}}


@pytest.mark.parametrize("value", ["5_0", "0x3", "1e2", " 5", "5\n", "", "99999999999999999999"])
def test_non_integer_gt_lt_in_a_preferred_term_fails_pre_score_as_upstream(value):
    """NewPreferredSchedulingTerms refuses what strconv.ParseInt(v, 10, 64) refuses; PreScore errors."""
    hh = PluginTester(NodeAffinity, nodes=ZN)
    p = pod("p", affinity=_preferred((10, {"key": "zone", "operator": "In", "values": ["a"]}),
                                     (30, {"key": "cores", "operator": "Gt", "values": [value]})))
    state = CycleState()
    st = hh.plugin.pre_score(state, PodInfo.from_dict(p), hh.nodes())
    quoted = '"' + value.replace("\n", "\\n") + '"'
    assert st is not None and st.code.name == "ERROR"
    assert st.message() == (f"[1].matchExpressions[0].values[0]: Invalid value: {quoted}: "
                            "for 'Gt', 'Lt' operators, the value must be an integer")


def test_preferred_term_errors_are_aggregated_and_valid_integers_pass():
    hh = PluginTester(NodeAffinity, nodes=ZN)
    p = pod("p", affinity=_preferred((0, {"key": "cores", "operator": "Lt", "values": ["x"]}),   # weight 0: skipped
                                     (5, {"key": "cores", "operator": "Lt", "values": ["0x3"]}),
                                     (5, {"key": "cores", "operator": "Gt", "values": ["1e2"]})))
    st = hh.plugin.pre_score(CycleState(), PodInfo.from_dict(p), hh.nodes())
    assert st.message() == ('[[1].matchExpressions[0].values[0]: Invalid value: "0x3": for \'Gt\', \'Lt\' operators, '
                            'the value must be an integer, [2].matchExpressions[0].values[0]: Invalid value: "1e2": '
                            "for 'Gt', 'Lt' operators, the value must be an integer]")
    ok = pod("q", affinity=_preferred((5, {"key": "cores", "operator": "Lt", "values": ["+8"]}),
                                      (5, {"key": "cores", "operator": "Gt", "values": ["-3"]})))
    assert hh.plugin.pre_score(CycleState(), PodInfo.from_dict(ok), hh.nodes()) is None


def test_non_integer_gt_in_a_required_term_matches_no_node_without_an_error():
    """LazyErrorNodeSelector: the term that cannot be parsed matches nothing; the other terms count."""
    hh = PluginTester(NodeAffinity, nodes=ZN)
    bad = {"key": "cores", "operator": "Gt", "values": ["5_0"]}
    zone_a = {"key": "zone", "operator": "In", "values": ["a"]}
    p = pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [bad]}, {"matchExpressions": [zone_a]}]}}})
    r = hh.filter(p)
    assert {n for n, v in r.items() if v is None} == {"n-a-1", "n-a-2"}
    only_bad = pod("q", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [bad]}]}}})
    assert all(v == (UAU, ("node(s) didn't match Pod's node affinity/selector",)) for v in hh.filter(only_bad).values())


def test_the_cycle_fails_with_kube_schedulers_message_and_the_pod_is_not_placed():
    from pysched.tools.offline import OfflineScheduler
    off = OfflineScheduler()
    for n in ZN:
        off.add_node(n)
    p = pod("p", affinity=_preferred((30, {"key": "cores", "operator": "Gt", "values": ["5_0"]})))
    out = off.schedule(p)
    assert out.node is None and out.code == "SchedulerError"
    assert out.message == ('running PreScore plugin "NodeAffinity": [0].matchExpressions[0].values[0]: '
                           "Invalid value: \"5_0\": for 'Gt', 'Lt' operators, the value must be an integer")
