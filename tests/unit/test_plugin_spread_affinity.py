"""PodTopologySpread and InterPodAffinity: table-driven filters and scores, batch == per-node."""

import pytest

from pysched.apis.config import ConfigError
from pysched.framework import decode_args, encode_args
from pysched.plugins.inter_pod_affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI,
    InterPodAffinity,
)
from pysched.plugins.pod_topology_spread import REASON, REASON_MISSING_LABEL, PodTopologySpread
from pysched.testing import UAU, UNS, PluginTester

from .conftest import node, pod

Z = "topology.kubernetes.io/zone"
H = "kubernetes.io/hostname"


def zn(name, zone, **kw):
    labels = dict(kw.pop("labels", {}))
    if zone:
        labels[Z] = zone
    return node(name, labels=labels, **kw)


NODES = [zn("a1", "a"), zn("a2", "a"), zn("b1", "b"), zn("c1", "c"), zn("nozone", None)]


def existing(name, node_name, labels=None, ns="default", **kw):
    return pod(name, node_name=node_name, labels=labels or {"app": "web"}, namespace=ns, **kw)


def spread(max_skew=1, key=Z, when="DoNotSchedule", selector=None, **extra):
    c = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
         "labelSelector": selector if selector is not None else {"matchLabels": {"app": "web"}}}
    c.update(extra)
    return [c]


def feasible(result):
    return sorted(n for n, v in result.items() if v is None)


def test_hard_spread_max_skew():
    pods = [existing("w1", "a1"), existing("w2", "a2"), existing("w3", "b1")]
    hh = PluginTester(PodTopologySpread, nodes=NODES, pods=pods)
    r = hh.filter(pod("p", labels={"app": "web"}, spread=spread(1)))
    # counts a=2 b=1 c=0 -> min 0; a: 2+1-0 > 1, b: 1+1 > 1, c: 0+1 ok
    assert feasible(r) == ["c1"]
    assert r["a1"] == (UNS, (REASON,)) and r["nozone"] == (UAU, (REASON_MISSING_LABEL,))
    r2 = hh.filter(pod("q", labels={"app": "web"}, spread=spread(2)))
    assert feasible(r2) == ["b1", "c1"]


def test_self_match_and_terminating_pods_ignored():
    pods = [existing("w1", "a1"), existing("gone", "b1")]
    pods[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4], pods=pods)
    # the incoming pod does not match its own selector: selfMatch 0 -> skew a = 1 - 0 = 1 ok
    r = hh.filter(pod("other", labels={"app": "db"}, spread=spread(1)))
    assert feasible(r) == ["a1", "a2", "b1", "c1"]
    r = hh.filter(pod("web", labels={"app": "web"}, spread=spread(1)))
    assert feasible(r) == ["b1", "c1"]   # terminating pod on b1 is not counted


def test_min_domains():
    pods = [existing("w1", "a1"), existing("w2", "b1")]
    hh = PluginTester(PodTopologySpread, nodes=[zn("a1", "a"), zn("b1", "b")], pods=pods)
    r = hh.filter(pod("p", labels={"app": "web"}, spread=spread(1)))
    assert feasible(r) == ["a1", "b1"]
    # with minDomains 3 and only 2 domains the global minimum is treated as 0
    r = hh.filter(pod("q", labels={"app": "web"}, spread=spread(1, minDomains=3)))
    assert feasible(r) == []


def test_node_affinity_policy():
    pods = [existing("w1", "a1"), existing("w2", "a2")]
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4], pods=pods)
    sel = {Z: "a"}
    # Honor (default): only zone a is a domain -> min 2, a: 2+1-2=1 ok
    r = hh.filter(pod("p", labels={"app": "web"}, node_selector=sel, spread=spread(1)))
    assert feasible(r) == ["a1", "a2", "b1", "c1"]  # (NodeAffinity, not this plugin, removes b/c)
    # Ignore: b and c count as empty domains -> min 0 -> a fails
    r = hh.filter(pod("q", labels={"app": "web"}, node_selector=sel, spread=spread(1, nodeAffinityPolicy="Ignore")))
    assert feasible(r) == ["b1", "c1"]


def test_node_taints_policy():
    nodes = [zn("a1", "a"), zn("b1", "b", taints=[{"key": "x", "effect": "NoSchedule"}])]
    hh = PluginTester(PodTopologySpread, nodes=nodes, pods=[existing("w1", "a1")])
    r = hh.filter(pod("p", labels={"app": "web"}, spread=spread(1)))
    assert feasible(r) == ["b1"]   # Ignore (default): tainted b counts, min 0
    r = hh.filter(pod("q", labels={"app": "web"}, spread=spread(1, nodeTaintsPolicy="Honor")))
    assert feasible(r) == ["a1", "b1"]  # b excluded: only domain a, min 1


def test_match_label_keys():
    pods = [existing("v1a", "a1", {"app": "web", "rev": "1"}), existing("v1b", "a2", {"app": "web", "rev": "1"}),
            existing("v2", "b1", {"app": "web", "rev": "2"})]
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4], pods=pods)
    r = hh.filter(pod("p", labels={"app": "web", "rev": "2"}, spread=spread(1, matchLabelKeys=["rev"])))
    # only rev=2 pods counted: a=0, b=1, c=0 -> b fails
    assert feasible(r) == ["a1", "a2", "c1"]


def test_assumed_pods_are_counted():
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4])
    from pysched.framework.podinfo import PodInfo
    hh.cache.assume(PodInfo.from_dict(pod("x", labels={"app": "web"})), "c1")
    r = hh.filter(pod("p", labels={"app": "web"}, spread=spread(1)))
    assert "c1" not in feasible(r) and feasible(r) == ["a1", "a2", "b1"]


def test_hostname_spread_and_soft_scores():
    pods = [existing("w1", "a1"), existing("w2", "a1"), existing("w3", "b1")]
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4], pods=pods)
    s = hh.score(pod("p", labels={"app": "web"}, spread=spread(1, key=H, when="ScheduleAnyway")))
    assert s["a2"] == 100 and s["c1"] == 100 and s["a1"] < s["b1"] < 100
    z = hh.score(pod("q", labels={"app": "web"}, spread=spread(1, when="ScheduleAnyway")))
    assert z["c1"] == 100 and z["a1"] == z["a2"] < z["b1"]


def test_system_default_spreading_uses_the_workload():
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-rs", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "rs-uid", "controller": True}
    pods = [existing("w1", "a1", owner=owner), existing("w2", "a2", owner=owner)]
    hh = PluginTester(PodTopologySpread, nodes=NODES[:4], pods=pods, objects=[rs])
    s = hh.score(pod("p", labels={"app": "web"}, owner=owner))
    assert s["b1"] == s["c1"] == 100 and s["a1"] < 100
    # without a controller or a Service, no default constraints apply
    assert hh.score(pod("lonely", labels={"app": "web"})) == {n: 0 for n in ["a1", "b1", "c1", "a2"]}


def term(key=Z, selector=None, **kw):
    t = {"topologyKey": key, "labelSelector": selector if selector is not None else {"matchLabels": {"app": "db"}}}
    t.update(kw)
    return t


def aff(required=(), anti=(), pref=(), pref_anti=()):
    out = {}
    if required or pref:
        out["podAffinity"] = {}
        if required:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
        if pref:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = list(pref)
    if anti or pref_anti:
        out["podAntiAffinity"] = {}
        if anti:
            out["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(anti)
        if pref_anti:
            out["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = list(pref_anti)
    return out


def test_required_affinity():
    pods = [existing("db", "a1", {"app": "db"})]
    hh = PluginTester(InterPodAffinity, nodes=NODES, pods=pods)
    r = hh.filter(pod("p", affinity=aff(required=[term()])))
    assert feasible(r) == ["a1", "a2"]
    assert r["b1"] == (UAU, (REASON_AFFINITY,)) and r["nozone"] == (UAU, (REASON_AFFINITY,))
    # matching itself only helps when no matching pod exists anywhere
    r = hh.filter(pod("self", labels={"app": "db"}, affinity=aff(required=[term()])))
    assert feasible(r) == ["a1", "a2"]


def test_first_pod_of_a_group_may_match_itself():
    hh = PluginTester(InterPodAffinity, nodes=NODES)
    r = hh.filter(pod("first", labels={"app": "db"}, affinity=aff(required=[term()])))
    assert feasible(r) == ["a1", "a2", "b1", "c1"]   # nozone still fails: the key is missing
    r = hh.filter(pod("other", labels={"app": "x"}, affinity=aff(required=[term()])))
    assert feasible(r) == []


def test_required_anti_affinity_and_namespaces():
    pods = [existing("db", "a1", {"app": "db"}), existing("db-other-ns", "b1", {"app": "db"}, ns="prod")]
    hh = PluginTester(InterPodAffinity, nodes=NODES, pods=pods,
                       objects=[{"kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}},
                                {"kind": "Namespace", "metadata": {"name": "default"}}])
    r = hh.filter(pod("p", affinity=aff(anti=[term()])))
    assert feasible(r) == ["b1", "c1", "nozone"] and r["a1"] == (UNS, (REASON_ANTI_AFFINITY,))
    r = hh.filter(pod("q", affinity=aff(anti=[term(namespaces=["prod"])])))
    assert feasible(r) == ["a1", "a2", "c1", "nozone"]
    r = hh.filter(pod("s", affinity=aff(anti=[term(namespaceSelector={"matchLabels": {"env": "prod"}})])))
    assert feasible(r) == ["a1", "a2", "c1", "nozone"]
    r = hh.filter(pod("all", affinity=aff(anti=[term(namespaceSelector={})])))
    assert feasible(r) == ["c1", "nozone"]


def test_existing_pods_anti_affinity():
    guard = existing("guard", "b1", {"app": "guard"},
                     affinity=aff(anti=[term(key=H, selector={"matchLabels": {"app": "web"}})]))
    hh = PluginTester(InterPodAffinity, nodes=NODES, pods=[guard])
    r = hh.filter(pod("web", labels={"app": "web"}))
    assert r["b1"] == (UNS, (REASON_EXISTING_ANTI,)) and feasible(r) == ["a1", "a2", "c1", "nozone"]
    assert feasible(hh.filter(pod("db", labels={"app": "db"}))) == ["a1", "a2", "b1", "c1", "nozone"]


def test_preferred_affinity_scores():
    pods = [existing("db1", "a1", {"app": "db"}), existing("db2", "a2", {"app": "db"}),
            existing("db3", "b1", {"app": "db"})]
    hh = PluginTester(InterPodAffinity, nodes=NODES[:4], pods=pods)
    s = hh.score(pod("p", affinity=aff(pref=[{"weight": 10, "podAffinityTerm": term()}])))
    assert s == {"a1": 100, "b1": 50, "c1": 0, "a2": 100}
    s = hh.score(pod("q", affinity=aff(pref_anti=[{"weight": 5, "podAffinityTerm": term()}])))
    assert s == {"a1": 0, "b1": 50, "c1": 100, "a2": 0}


def test_existing_required_affinity_counts_with_hard_weight():
    e = existing("e", "c1", {"app": "x"}, affinity=aff(required=[term(selector={"matchLabels": {"app": "web"}})]))
    hh = PluginTester(InterPodAffinity, nodes=NODES[:4], pods=[e])
    s = hh.score(pod("web", labels={"app": "web"}))
    assert s["c1"] == 100 and s["a1"] == 0


def test_existing_anti_affinity_follows_pod_and_node_lifecycle():
    """The per-term index behind existing pods' anti-affinity is kept exact as pods and nodes go."""
    guard_term = aff(anti=[term(key=Z, selector={"matchLabels": {"app": "web"}})])
    guards = [existing(f"g{i}", n, {"app": "guard"}, affinity=guard_term) for i, n in enumerate(("a1", "a2", "b1"))]
    hh = PluginTester(InterPodAffinity, nodes=NODES, pods=guards)
    web = pod("web", labels={"app": "web"})
    assert feasible(hh.filter(web)) == ["c1", "nozone"]
    assert len(hh.cache.terms.required_anti) == 1  # three pods, one distinct term
    hh.cache.remove_pod(hh.cache.pods[guards[2]["metadata"]["uid"]].uid)
    assert feasible(hh.filter(web)) == ["b1", "c1", "nozone"]
    hh.cache.remove_pod(guards[0]["metadata"]["uid"])
    assert feasible(hh.filter(web)) == ["b1", "c1", "nozone"]  # g1 still holds zone a
    hh.cache.remove_node("a2")
    assert feasible(hh.filter(web)) == ["a1", "b1", "c1", "nozone"]
    assert len(hh.cache.terms.required_anti) == 0


def test_existing_pods_preferred_terms_score_the_incoming_pod():
    avoid = existing("avoid", "a1", {"app": "cache"},
                     affinity=aff(pref_anti=[{"weight": 7,
                                              "podAffinityTerm": term(selector={"matchLabels": {"app": "web"}})}]))
    near = [existing(f"near{i}", "b1", {"app": "cache"},
                     affinity=aff(pref=[{"weight": 3,
                                         "podAffinityTerm": term(selector={"matchLabels": {"app": "web"}})}]))
            for i in range(2)]
    hh = PluginTester(InterPodAffinity, nodes=NODES[:4], pods=[avoid, *near])
    s = hh.score(pod("web", labels={"app": "web"}))
    # zone a: -7, zone b: +6 (two pods x 3), zone c: 0 -> normalised between -7 and 6.
    assert s == {"a1": 0, "a2": 0, "b1": 100, "c1": 53}
    hh2 = PluginTester(InterPodAffinity, args={"ignorePreferredTermsOfExistingPods": True},
                        nodes=NODES[:4], pods=[avoid, *near])
    assert hh2.score(pod("web2", labels={"app": "web"})) == {"a1": 0, "a2": 0, "b1": 0, "c1": 0}


@pytest.mark.parametrize("args,error", [
    ({"defaultingType": "System", "defaultConstraints": [{"maxSkew": 1, "topologyKey": Z,
                                                          "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints: when .defaultingType is \"System\", defaultConstraints must be empty"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": Z,
                                                        "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints[0].maxSkew: must be greater than zero"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints[0].topologyKey: Required value"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "topology zone",
                                                        "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints[0].topologyKey: Invalid value 'topology zone': name part must consist of"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "a/b/c",
                                                        "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints[0].topologyKey: Invalid value 'a/b/c': a valid label key"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "Maybe"}]},
     "args.defaultConstraints[0].whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": Z, "whenUnsatisfiable": "ScheduleAnyway"}]},
     "args.defaultConstraints[1]: Duplicate value"),
])
def test_spread_args_errors_name_the_field(args, error):
    with pytest.raises(ConfigError) as err:
        decode_args(PodTopologySpread.Args, args, "args")
    assert str(err.value).startswith(error)


def test_spread_args_accept_prefixed_keys():
    args = decode_args(PodTopologySpread.Args, {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "example.com/Rack_1", "whenUnsatisfiable": "DoNotSchedule"}]}, "args")
    assert encode_args(args)["defaultConstraints"][0]["topologyKey"] == "example.com/Rack_1"


def test_spread_args_encode_what_was_given():
    listed = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": Z, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
         "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["rev"]}]}
    assert encode_args(decode_args(PodTopologySpread.Args, listed, "args")) == listed
    assert encode_args(decode_args(PodTopologySpread.Args, None, "args")) == {"defaultingType": "System"}
    with pytest.raises(ConfigError, match=r"^args\.defaultConstraints\[0\]\.maxSkeew: unknown field"):
        decode_args(PodTopologySpread.Args, {"defaultingType": "List", "defaultConstraints": [
            {"maxSkeew": 1, "topologyKey": Z, "whenUnsatisfiable": "DoNotSchedule"}]}, "args")
    with pytest.raises(ConfigError, match=r"^args\.defaultingType: 'Sometimes' is not one of System, List"):
        decode_args(PodTopologySpread.Args, {"defaultingType": "Sometimes"}, "args")


def test_listed_default_constraints_apply_to_pods_of_a_workload():
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-rs", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "rs-uid", "controller": True}
    args = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "DoNotSchedule"}]}
    pods = [existing("w1", "a1", owner=owner), existing("w2", "b1", owner=owner)]
    hh = PluginTester(PodTopologySpread, args, nodes=NODES[:4], pods=pods, objects=[rs])
    # the ReplicaSet's selector counts a=1 b=1 c=0: only zone c keeps the skew within 1
    assert feasible(hh.filter(pod("p", labels={"app": "web"}, owner=owner))) == ["c1"]
    # the pod's own constraints replace the defaults; a pod of no workload gets none
    assert feasible(hh.filter(pod("q", labels={"app": "web"}, owner=owner,
                                  spread=spread(2)))) == ["a1", "a2", "b1", "c1"]
    assert feasible(hh.filter(pod("lonely", labels={"app": "web"}))) == ["a1", "a2", "b1", "c1"]


def test_inter_pod_affinity_args():
    assert encode_args(decode_args(InterPodAffinity.Args, None, "args")) == {
        "hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}
    with pytest.raises(ConfigError, match=r"^args\.hardPodAffinityWeight: must be <= 100, got 500"):
        decode_args(InterPodAffinity.Args, {"hardPodAffinityWeight": 500}, "args")
    with pytest.raises(ConfigError, match=r"^args\.kind: expected InterPodAffinityArgs"):
        decode_args(InterPodAffinity.Args, {"kind": "NodeAffinityArgs"}, "args")
    # the weight scales existing pods' required affinity terms in Score
    e = existing("e", "c1", {"app": "x"}, affinity=aff(required=[term(selector={"matchLabels": {"app": "web"}})]))
    off = PluginTester(InterPodAffinity, {"hardPodAffinityWeight": 0}, nodes=NODES[:4], pods=[e])
    assert set(off.score(pod("web", labels={"app": "web"})).values()) == {0}
