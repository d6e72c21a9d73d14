"""TopologyAwarePlacement: a pod group's placements, lowest topology level first, best fit first;
required and preferred (the PodGroup's TopologyConstraint, Kueue's TAS annotations), pinning by
scheduled members, pruning and the cap; its args; and the pod-group cycle keeping the first tier
the group fits in (the real engine, offline)."""

from __future__ import annotations

import pytest

from pysched.apis import config as configmod
from pysched.apis.config import ConfigError
from pysched.framework import FrameworkError, Placement, PodGroupCycleInfo, PodInfo
from pysched.framework.features import default_gates
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.plugins.topology_aware import TopologyAwarePlacement
from pysched.plugins.topology_aware.args import TopologyAwarePlacementArgs
from pysched.testing import PluginTester
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

ZONE, BLOCK, RACK = "topology.kubernetes.io/zone", "example.com/block", "example.com/rack"
HOST = "kubernetes.io/hostname"
LEVELS = [BLOCK, RACK, HOST]
GATES = default_gates((1, 37)) | {"GenericWorkload", "TopologyAwareWorkloadScheduling"}


def racked(name, block, rack, cpu="8", **kw):
    return node(name, cpu=cpu, memory="64Gi", labels={BLOCK: block, RACK: rack}, **kw)


def podgroup(name="g", min_count=4, key=None):
    spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return WorkloadPodGroup.from_dict({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def members(n, cpu="2", annotations=None, group="g"):
    out = []
    for i in range(n):
        p = pod(f"{group}-{i}", cpu=cpu, memory="1Gi", annotations=annotations)
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(PodInfo.from_dict(p))
    return out


def make_tester(nodes, pods=(), **args):
    return PluginTester(TopologyAwarePlacement, {"levels": LEVELS, **args}, nodes=nodes, pods=pods,
                        feature_gates=GATES)


def placements(t, pg, ms, scheduled=()):
    nodes = t.nodes()
    everything = Placement("", nodes.slots)
    out = t.plugin.generate_placements(PodGroupCycleInfo(pg, list(scheduled), ms), everything, nodes)
    names = t.nodes().names
    by_slot = dict(zip(nodes.slots.tolist(), names, strict=True))
    return [(p.name, p.tier, sorted(by_slot[s] for s in p.slots.tolist())) for p in out]


# Block b1: rack r1 (2 nodes, 8 cpu each: 16 free), rack r2 (3 nodes: 24 free); block b2: rack r1
# (4 nodes: 32 free). A node without topology labels.
CLUSTER = [racked("b1-r1-a", "b1", "r1"), racked("b1-r1-b", "b1", "r1"),
           racked("b1-r2-a", "b1", "r2"), racked("b1-r2-b", "b1", "r2"), racked("b1-r2-c", "b1", "r2"),
           racked("b2-r1-a", "b2", "r1"), racked("b2-r1-b", "b2", "r1"), racked("b2-r1-c", "b2", "r1"),
           racked("b2-r1-d", "b2", "r1"), node("loose", cpu="64", memory="64Gi")]


def test_lowest_level_first_best_fit_first_then_every_node():
    t = make_tester(CLUSTER)
    out = placements(t, podgroup(), members(4, cpu="4"))    # 16 cpu: no host holds it
    # Racks with 0, 2 and 4 member slots left over, then blocks b2 (4 left) and b1 (6), then every node.
    assert [n for n, _, _ in out] == ["b1/r1", "b1/r2", "b2/r1", "b2", "b1", ""]
    assert [tier for _, tier, _ in out] == list(range(6))
    assert out[0][2] == ["b1-r1-a", "b1-r1-b"]
    assert out[-1][2] == sorted(n["metadata"]["name"] for n in CLUSTER)   # every node, the unlabelled one too


def test_a_host_that_holds_the_group_comes_first():
    t = make_tester(CLUSTER)
    out = placements(t, podgroup(min_count=2), members(2, cpu="2"))
    # Every host holds 4 cpu: the hosts first (all equal: by name, capped at 4), then the racks.
    assert [n for n, _, _ in out][:5] == ["b1/r1/b1-r1-a", "b1/r1/b1-r1-b", "b1/r2/b1-r2-a", "b1/r2/b1-r2-b",
                                         "b1/r1"]


def test_best_fit_counts_member_slots_not_only_free_capacity():
    # Both racks have 12 free cpu; r1 on three nodes of 4, r2 on two of 6. Members of 3 cpu: r1 holds
    # 3 of them, r2 4 - only r2 can hold a group of 4, though the sums are equal.
    nodes = [racked(f"r1-{i}", "b", "r1", cpu="4") for i in range(3)] + [racked(f"r2-{i}", "b", "r2", cpu="6")
                                                                        for i in range(2)]
    t = make_tester(nodes)
    assert [n for n, _, _ in placements(t, podgroup(), members(4, cpu="3"))] == ["b/r2", "b", ""]


def test_pruning_leaves_out_domains_that_cannot_hold_the_group():
    used = [pod(f"busy-{i}", cpu="7", memory="1Gi", node_name=f"b2-r1-{c}") for i, c in enumerate("abc")]
    t = make_tester(CLUSTER, pods=used)
    # b2/r1 (and block b2) has 3 + 8 = 11 cpu free now, b1/r1 16: a group of 6 x 3 cpu fits in
    # b1/r2 (24) only among the racks, b1 only among the blocks.
    out = placements(t, podgroup(min_count=6), members(6, cpu="3"))
    assert [n for n, _, _ in out] == ["b1/r2", "b1", ""]


def test_cap_on_domains_per_level():
    t = make_tester(CLUSTER, maxDomainsPerLevel=1)
    assert [n for n, _, _ in placements(t, podgroup(), members(4, cpu="4"))] == ["b1/r1", "b2", ""]


def test_required_topology_constraint_stops_at_its_level():
    t = make_tester(CLUSTER)
    out = placements(t, podgroup(key=BLOCK), members(4, cpu="4"))
    assert [n for n, _, _ in out] == ["b1/r1", "b1/r2", "b2/r1", "b2", "b1"]   # no "every node"
    out = placements(t, podgroup(key=RACK), members(4, cpu="4"))
    assert [n for n, _, _ in out] == ["b1/r1", "b1/r2", "b2/r1"]


def test_required_group_that_fits_nowhere_is_tried_in_its_roomiest_domain():
    t = make_tester(CLUSTER)
    out = placements(t, podgroup(min_count=8, key=RACK), members(8, cpu="8"))   # 64 cpu: no rack
    assert [(n, tier) for n, tier, _ in out] == [("b2/r1", 0)]


def test_a_key_outside_the_levels_is_upstreams_one_level():
    nodes = [node(f"n{i}", cpu="8", memory="64Gi", labels={ZONE: f"z{i % 2}"}) for i in range(4)]
    t = make_tester(nodes)
    out = placements(t, podgroup(key=ZONE), members(2, cpu="4"))
    assert [(n, tier) for n, tier, _ in out] == [("z0", 0), ("z1", 1)]


def test_kueue_required_annotation():
    t = make_tester(CLUSTER)
    ms = members(4, cpu="4", annotations={"kueue.x-k8s.io/podset-required-topology": BLOCK})
    assert [n for n, _, _ in placements(t, podgroup(), ms)] == ["b1/r1", "b1/r2", "b2/r1", "b2", "b1"]


def test_kueue_preferred_spills_over_to_every_node_and_unconstrained_is_every_node():
    t = make_tester(CLUSTER)
    ms = members(8, cpu="5", annotations={"kueue.x-k8s.io/podset-preferred-topology": RACK})   # 40 cpu
    assert [n for n, _, _ in placements(t, podgroup(min_count=8), ms)] == [""]   # no rack, no block: all
    ms = members(4, cpu="4", annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"})
    assert [n for n, _, _ in placements(t, podgroup(), ms)] == [""]


def test_default_mode_unconstrained_leaves_groups_without_constraint_alone():
    t = make_tester(CLUSTER, defaultMode="Unconstrained")
    assert [n for n, _, _ in placements(t, podgroup(), members(4, cpu="4"))] == [""]
    assert [n for n, _, _ in placements(t, podgroup(key=RACK), members(4, cpu="4"))][0] == "b1/r1"


def test_scheduled_members_pin_the_domain():
    placed = [pod("g-x", cpu="4", memory="1Gi", node_name="b2-r1-a")]
    t = make_tester(CLUSTER, pods=placed)
    scheduled = [PodInfo.from_dict(placed[0])]
    out = placements(t, podgroup(min_count=4), members(3, cpu="4"), scheduled)
    # Its host has room for one more member only; its rack, its block, every node.
    assert [n for n, _, _ in out] == ["b2/r1", "b2", ""]


def test_scheduled_members_in_two_domains_rule_the_level_out_or_are_upstreams_error():
    placed = [pod("g-x", cpu="1", memory="1Gi", node_name="b1-r1-a"),
              pod("g-y", cpu="1", memory="1Gi", node_name="b1-r2-a")]
    t = make_tester(CLUSTER, pods=placed)
    scheduled = [PodInfo.from_dict(p) for p in placed]
    out = placements(t, podgroup(min_count=4), members(2, cpu="4"), scheduled)
    assert [n for n, _, _ in out] == ["b1", ""]          # two racks: only their block, then every node
    with pytest.raises(FrameworkError, match="more than 1 domain found for pod group: b1/r1, b1/r2"):
        placements(t, podgroup(min_count=4, key=RACK), members(2, cpu="4"), scheduled)


def test_kueue_topology_levels_from_the_object_store():
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}}
    t = PluginTester(TopologyAwarePlacement, {"kueueTopology": "default"}, nodes=CLUSTER, objects=[topo],
                     feature_gates=GATES)
    assert t.plugin.object_kinds == ("kueuetopologies",)
    assert [n for n, _, _ in placements(t, podgroup(), members(4, cpu="4"))] == ["b1/r1", "b1/r2", "b2/r1", "b2",
                                                                                 "b1", ""]
    missing = PluginTester(TopologyAwarePlacement, {"kueueTopology": "other"}, nodes=CLUSTER, feature_gates=GATES)
    assert [n for n, _, _ in placements(missing, podgroup(), members(4, cpu="4"))] == [""]


@pytest.mark.parametrize("args,error", [
    ({}, "args.levels: Required value"),
    ({"levels": [RACK], "kueueTopology": "t"}, "args.kueueTopology: set levels or kueueTopology, not both"),
    ({"levels": [RACK, RACK]}, "args.levels[1]: Duplicate value"),
    ({"levels": [""]}, "args.levels[0]: Required value"),
    ({"levels": [RACK], "maxDomainsPerLevel": 0}, "args.maxDomainsPerLevel: must be >= 1"),
    ({"levels": [RACK], "defaultMode": "Compact"}, "args.defaultMode: 'Compact' is not one of"),
])
def test_args_errors_name_the_field(args, error):
    from pysched.framework.args import load_args
    with pytest.raises(ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
        load_args(TopologyAwarePlacementArgs, args, "args")


# -- the pod-group cycle with the plugin (the engine offline) ---------------------------------------

PROFILE = {"schedulerName": "pysched",
           "plugins": {"placementGenerate": {"enabled": [{"name": "TopologyAwarePlacement"}],
                                             "disabled": [{"name": "TopologyPlacementGenerator"}]}},
           "pluginConfig": [{"name": "TopologyAwarePlacement", "args": {"levels": LEVELS}}]}


def offline(nodes, profile=PROFILE):
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [profile]})
    s = OfflineScheduler(cfg, kube_version=(1, 37), feature_gates=GATES)
    for n in nodes:
        s.add_node(n)
    return s


def run_group(s, pg_obj, pods):
    """The pod-group cycle's placement step for ``pods`` (the members of ``pg_obj``): the result
    (placement, each member's node), the snapshot left as before."""
    from pysched.backend.queue.scheduling_queue import QueuedPodInfo

    s.add_object(pg_obj)
    infos = [PodInfo.from_dict(p, keep_raw=True) for p in pods]
    for i in infos:
        s.observe_pending(i)
    fwk = s.frameworks["pysched"]
    gang = fwk.plugins["GangScheduling"]
    pg = gang.podgroup(f"default/{pg_obj['metadata']['name']}")
    qs = [QueuedPodInfo(i, float(n)) for n, i in enumerate(infos)]
    return s.scheduler._group_algorithm(fwk, gang, pg, PodGroupCycleInfo(pg, [], infos), qs)


def pg_obj(name, min_count, key=None):
    spec = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"}, "spec": spec}


def gang_pods(group, n, cpu):
    out = []
    for i in range(n):
        p = pod(f"{group}-{i}", cpu=cpu, memory="1Gi")
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(p)
    return out


def test_the_cycle_keeps_the_best_fit_rack():
    s = offline(CLUSTER)
    result = run_group(s, pg_obj("g", 4), gang_pods("g", 4, "4"))
    assert result.status.is_success(), result.status.message()
    assert result.placement.name == "b1/r1"
    assert sorted(m.host for m in result.members) == ["b1-r1-a", "b1-r1-a", "b1-r1-b", "b1-r1-b"]


def test_the_cycle_goes_up_a_level_when_no_rack_holds_the_group():
    s = offline(CLUSTER)
    result = run_group(s, pg_obj("g", 5), gang_pods("g", 5, "8"))   # 40 cpu: no rack, block b1 does
    assert result.status.is_success(), result.status.message()
    assert result.placement.name == "b1"
    assert {m.host[:2] for m in result.members} == {"b1"}


def test_the_cycle_tries_the_next_domain_when_a_filter_turns_the_best_fit_down():
    tainted = [racked("b1-r1-a", "b1", "r1", taints=[{"key": "x", "effect": "NoSchedule"}]),
               *CLUSTER[1:]]
    s = offline(tainted)
    result = run_group(s, pg_obj("g", 4), gang_pods("g", 4, "4"))
    assert result.status.is_success(), result.status.message()
    assert result.placement.name == "b1/r2"
