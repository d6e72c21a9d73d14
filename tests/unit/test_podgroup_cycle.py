"""The pod-group cycle (``schedule_one_podgroup``): a whole group placed from one snapshot, all or
nothing, for Kubernetes' own PodGroups (GangScheduling, GenericWorkload) and scheduler-plugins'
(Coscheduling's default). The live-loop tests run the real ``Scheduler`` with a test Bind plugin
in place of the API; every check would fail with members scheduled one by one (a member waiting
at Permit holds its node while its siblings are tried)."""

from __future__ import annotations

import asyncio

import numpy as np

from pysched.apis import config as configmod
from pysched.framework import Placement, PodGroupCycleInfo
from pysched.framework.features import default_gates
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.plugins.gang_scheduling import WAITING_FOR_GANG, feasibility, waiting_for_group
from pysched.profile import default_registry
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod
from .livekit import run_live, until
from .test_coscheduling import GPU, FlakyBinder, member, podgroup

GATES = default_gates((1, 37)) | {"GenericWorkload", "TopologyAwareWorkloadScheduling"}


def workload_group(name, min_count=None, *, topology=None, ns="default", priority=None):
    spec = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1", "generation": 1}, "spec": spec}


def workload_member(name, group, **kw):
    p = pod(name, **kw)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def sim_with(plugins=None, gates=GATES, coscheduling_args=None):
    registry = default_registry()
    registry["FlakyBinder"] = FlakyBinder
    FlakyBinder.fail, FlakyBinder.bound = set(), {}
    prof = {"schedulerName": "pysched",
            "plugins": {**(plugins or {}), "bind": {"enabled": [{"name": "FlakyBinder"}], "disabled": [{"name": "*"}]}}}
    if coscheduling_args is not None:
        prof["pluginConfig"] = [{"name": "Coscheduling", "args": coscheduling_args}]
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [prof]})
    return OfflineScheduler(cfg, registry=registry, feature_gates=gates)


def errors(sim):
    return {q.pod.name: sim.scheduler.last_results.get(q.pod.uid, {}).get("error") for q in sim.queue.pending()}


# -- GangScheduling's rules ---------------------------------------------------------------------

def test_placement_feasible_speaks_upstreams_words():
    assert feasibility(3, 0, 3).code.name == "WAIT"
    assert feasibility(3, 1, 1).message() == "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"
    assert feasibility(3, 1, 2).message() == "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining"
    assert feasibility(3, 3, 0) is None
    assert waiting_for_group("g") == 'waiting for pods\'s pod group "g" to appear in scheduling queue'


def test_the_podgroup_as_the_scheduler_reads_it():
    pg = WorkloadPodGroup.from_dict(workload_group("g", 4, topology="rack", priority=7))
    assert (pg.key, pg.gang, pg.min_count, pg.topology_keys, pg.priority) == ("default/g", True, 4, ("rack",), 7)
    basic = WorkloadPodGroup.from_dict(workload_group("b"))
    assert (basic.gang, basic.min_count, basic.topology_keys) == (False, 1, ())


def test_members_wait_for_their_podgroup_and_for_min_count_pods():
    sim = sim_with()
    sim.add_node(node("n0", cpu="8"))

    async def body():
        sim.add_pod(workload_member("a0", "g", cpu="1"))
        sim.add_pod(workload_member("a1", "g", cpu="1"))
        q = {x.pod.name: x for x in sim.queue.pending()}
        assert q["a0"].gated and q["a0"].gating_plugin == "GangScheduling"
        assert sim.add_object(workload_group("g", 3))            # the PodGroup: still one pod short
        await until(lambda: all(x.gated for x in sim.queue.pending()))
        gang = sim.frameworks["pysched"].plugins["GangScheduling"]
        assert gang.pre_enqueue(q["a0"].pod).message() == WAITING_FOR_GANG
        assert not FlakyBinder.bound
        sim.add_pod(workload_member("a2", "g", cpu="1"))          # the third: all three bind
        await until(lambda: len(FlakyBinder.bound) == 3)
    run_live(sim, body)


def test_a_gang_that_cannot_complete_holds_nothing_and_fails_with_upstreams_messages():
    sim = sim_with()
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu="2"))
    sim.add_object(workload_group("g", 3))

    async def body():
        for name, cpu in (("m0", "1"), ("m1", "1"), ("m2", "5")):
            sim.add_pod(workload_member(name, "g", cpu=cpu))
        await until(lambda: len(errors(sim)) == 3 and all(errors(sim).values()))
        assert not sim.cache.assumed and not FlakyBinder.bound
        assert not sim.frameworks["pysched"].handle.waiting_pods
        got = errors(sim)
        group = ("0/1 placements are available, first placement status: "
                 "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
                 "pod group preemption: No preemption victims found for incoming preemptor")
        assert got["m2"] == "0/2 nodes are available: 2 Insufficient cpu."
        assert got["m0"] == got["m1"] == f"pod group is unschedulable, pod group is unschedulable, {group}"
    run_live(sim, body)


def test_a_member_that_fits_nowhere_stops_the_attempt_before_the_rest_are_tried():
    sim = sim_with()
    sim.add_node(node("n0", cpu="4"))
    sim.add_object(workload_group("g", 3))

    async def body():
        sim.add_pod(workload_member("m0", "g", cpu="9"))       # tried first (queue time): fits nowhere
        sim.add_pod(workload_member("m1", "g", cpu="1"))
        sim.add_pod(workload_member("m2", "g", cpu="1"))
        await until(lambda: len(errors(sim)) == 3 and all(errors(sim).values()))
        got = errors(sim)
        untried = ("pod group is unschedulable, 0/1 placements are available, first placement status: "
                   "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining")
        assert got["m1"] == got["m2"] == untried
        assert got["m0"] == "0/1 nodes are available: 1 Insufficient cpu."
    run_live(sim, body)


def test_a_gang_goes_whole_into_the_one_rack_that_holds_it():
    sim = sim_with()
    for rack, cpus in (("r1", ("2", "2")), ("r2", ("4", "4"))):
        for i, cpu in enumerate(cpus):
            sim.add_node(node(f"{rack}-n{i}", cpu=cpu, labels={"rack": rack}))
    sim.add_object(workload_group("g", 4, topology="rack"))

    async def body():
        for i in range(4):
            sim.add_pod(workload_member(f"m{i}", "g", cpu="1500m"))
        await until(lambda: len(FlakyBinder.bound) == 4)
        assert {n.split("-")[0] for n in FlakyBinder.bound.values()} == {"r2"}
    run_live(sim, body)


def test_of_two_racks_that_hold_the_gang_the_fuller_one_wins():
    """PodGroupPodsCount ties (the whole gang either way); NodeResourcesFit's placement score
    (MostAllocated over the rack, the gang added) prefers the rack left fuller."""
    sim = sim_with()
    for rack in ("r1", "r2"):
        for i in range(2):
            sim.add_node(node(f"{rack}-n{i}", cpu="4", labels={"rack": rack}))
    sim.add_pod(pod("busy", cpu="2", node_name="r2-n0"))
    sim.add_object(workload_group("g", 2, topology="rack"))

    async def body():
        for i in range(2):
            sim.add_pod(workload_member(f"m{i}", "g", cpu="1"))
        await until(lambda: len(FlakyBinder.bound) == 2)
        assert {n.split("-")[0] for n in FlakyBinder.bound.values()} == {"r2"}
    run_live(sim, body)


def test_members_with_different_priorities_are_a_scheduler_error():
    sim = sim_with()
    sim.add_node(node("n0", cpu="8"))
    sim.add_object(workload_group("g", 2))

    async def body():
        sim.add_pod(workload_member("m0", "g", cpu="1"))
        sim.add_pod(workload_member("m1", "g", cpu="1", priority=5))
        await until(lambda: len(errors(sim)) == 2 and all(errors(sim).values()))
        assert set(errors(sim).values()) == {
            "all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0"}
        assert not FlakyBinder.bound
    run_live(sim, body)


def test_without_the_gate_a_member_is_scheduled_on_its_own():
    sim = sim_with(gates=default_gates((1, 37)))
    sim.add_node(node("n0", cpu="8"))
    sim.add_object(workload_group("g", 3))

    async def body():
        sim.add_pod(workload_member("m0", "g", cpu="1"))
        await until(lambda: len(FlakyBinder.bound) == 1)
    run_live(sim, body)


def test_topology_placements_are_one_per_rack_and_pinned_by_scheduled_members():
    sim = sim_with()
    for rack in ("r1", "r2"):
        for i in range(2):
            sim.add_node(node(f"{rack}-n{i}", cpu="4", labels={"rack": rack}))
    sim.add_node(node("loose", cpu="4"))
    fwk = sim.frameworks["pysched"]
    gen = fwk.plugins["TopologyPlacementGenerator"]
    table = sim.cache.table
    parent = Placement("", table.order())
    pg = WorkloadPodGroup.from_dict(workload_group("g", 2, topology="rack"))
    from pysched.framework import NodeBatch
    from pysched.framework.podinfo import PodInfo
    got = gen.generate_placements(PodGroupCycleInfo(pg, [], []), parent, NodeBatch(table, parent.slots))
    names = {p.name: sorted(table.infos[int(s)].name for s in p.slots) for p in got}
    assert names == {"r1": ["r1-n0", "r1-n1"], "r2": ["r2-n0", "r2-n1"]}
    placed = PodInfo.from_dict(workload_member("done", "g", node_name="r2-n1"))
    got = gen.generate_placements(PodGroupCycleInfo(pg, [placed], []), parent, NodeBatch(table, parent.slots))
    assert [p.name for p in got] == ["r2"]
    assert isinstance(got[0].slots, np.ndarray)


# -- Coscheduling through the same cycle --------------------------------------------------------

COSCHED = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
           "multiPoint": {"enabled": [{"name": "Coscheduling"}]}}


def test_a_scheduler_plugins_gang_that_cannot_complete_holds_nothing():
    """Two GPUs, a minMember-3 group: scheduled one by one, two members would hold both GPUs at
    Permit; in the group cycle nobody does, and the group backs off as a unit."""
    sim = sim_with(COSCHED, coscheduling_args={"podGroupRejectPercentage": 100})
    for i in range(2):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
    sim.add_object(podgroup("g", 3))
    cos = sim.frameworks["pysched"].plugins["Coscheduling"]

    async def body():
        for i in range(3):
            sim.add_pod(member(f"m{i}", "g"))
        await until(lambda: len(errors(sim)) == 3 and all(errors(sim).values()))
        assert not sim.cache.assumed and not sim.frameworks["pysched"].handle.waiting_pods
        assert cos.groups["default/g"].failures >= 1          # backed off as a unit
        assert "minMember (3) cannot be satisfied: 2 scheduled, 0 remaining" in errors(sim)["m0"]
        assert errors(sim)["m2"].startswith("0/2 nodes are available")
    run_live(sim, body)


def test_a_scheduler_plugins_gang_that_fits_binds_whole():
    sim = sim_with(COSCHED)
    for i in range(3):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
    sim.add_object(podgroup("g", 3))

    async def body():
        for i in range(3):
            sim.add_pod(member(f"m{i}", "g"))
        await until(lambda: len(FlakyBinder.bound) == 3)
        assert len(set(FlakyBinder.bound.values())) == 3
    run_live(sim, body)


def test_a_groups_attempt_is_explained_placement_by_placement():
    from pysched.schedule_one_podgroup import GROUP_PREFIX
    from pysched.server import secure
    assert secure.GROUP_PREFIX == GROUP_PREFIX     # /debug/explain?podgroup= asks the engine this way
    sim = sim_with()
    for rack, cpus in (("r1", ("2", "2")), ("r2", ("4", "4"))):
        for i, cpu in enumerate(cpus):
            sim.add_node(node(f"{rack}-n{i}", cpu=cpu, labels={"rack": rack}))
    sim.add_object(workload_group("g", 4, topology="rack"))

    async def body():
        for i in range(4):
            sim.add_pod(workload_member(f"m{i}", "g", cpu="1500m"))
        await until(lambda: len(FlakyBinder.bound) == 4)
        got = sim.scheduler.explanation(GROUP_PREFIX + "default/g")
        assert got["placement"] == "r2"
        by = {p["placement"]: p for p in got["placements"]}
        assert by["r2"]["fits"] and sorted(by["r2"]["placed"]) == ["m0", "m1", "m2", "m3"]
        assert not by["r1"]["fits"]
        assert by["r1"]["message"] == "minCount (4) cannot be satisfied: 2 scheduled, 1 remaining"
        assert "Insufficient cpu" in next(iter(by["r1"]["unplaced"].values()))
    run_live(sim, body)


def test_a_scheduler_plugins_gang_preempts_at_its_members_priority():
    """scheduler-plugins' PodGroups have no priority of their own: the group's preemption judges
    victims by its members' (the group cycle validated they agree), not by 0."""
    sim = sim_with(COSCHED)
    for i in range(2):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
        sim.add_pod(pod(f"low{i}", extended={GPU: "1"}, node_name=f"n{i}", priority=5))
    sim.add_object(podgroup("g", 2))

    async def body():
        for i in range(2):
            sim.add_pod(member(f"m{i}", "g", priority=100))
        await until(lambda: sim.scheduler.group_explanation("default/g") is not None)
        got = sim.scheduler.group_explanation("default/g")["status"]
        assert got.endswith("pod group preemption: found a placement for podgroup, preempting 2 victims"), got
    run_live(sim, body)


def test_a_scheduler_plugins_gang_short_of_members_waits_out_of_the_queue():
    """In the group cycle, Coscheduling holds members at PreEnqueue until minMember pods exist: no
    group attempt (and no group preemption) on a gang that could only fail."""
    sim = sim_with(COSCHED)
    for i in range(3):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
    sim.add_object(podgroup("g", 3))
    attempts = []
    real = sim.scheduler.attempt_group
    sim.scheduler.attempt_group = lambda *a, **kw: attempts.append(1) or real(*a, **kw)

    async def body():
        sim.add_pod(member("m0", "g"))
        sim.add_pod(member("m1", "g"))
        await asyncio.sleep(0.2)
        pending = {q.pod.name: q for q in sim.queue.pending()}
        assert all(q.gated and q.gating_plugin == "Coscheduling" for q in pending.values())
        assert attempts == []
        sim.add_pod(member("m2", "g"))
        await until(lambda: len(FlakyBinder.bound) == 3)
        assert len(attempts) == 1
    run_live(sim, body)
