"""CompositePodGroups (``scheduling.k8s.io/v1alpha3``, the CompositePodGroup gate): trees of
PodGroups scheduled whole from their root (``schedule_composite_podgroup``), GangScheduling's rules
for a tree (PreEnqueue readiness of the whole tree, PlacementFeasible with ``minGroupCount``,
Permit), the hierarchy as the scheduler reads it. The live tests run the real ``Scheduler``
with a test Bind plugin; the messages are kube-scheduler 1.37.2's
(``tests/e2e/test_composite_podgroup_differential.py``)."""

from __future__ import annotations

from pysched.framework.features import default_gates
from pysched.framework.podgroups import CompositePodGroup, PodGroupHierarchy, WorkloadPodGroup
from pysched.plugins.gang_scheduling import waiting_for_tree

from .conftest import node
from .livekit import run_live, until
from .test_coscheduling import FlakyBinder
from .test_podgroup_cycle import errors, sim_with, workload_group, workload_member

GATES = default_gates((1, 37)) | {"GenericWorkload", "TopologyAwareWorkloadScheduling", "CompositePodGroup"}
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


def cpg(name, min_group_count=None, *, parent=None, topology=None, ns="default"):
    spec = {"workloadRef": {"workloadName": "w", "templateName": name},
            "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}} if min_group_count else {"basic": {}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1", "generation": 1}, "spec": spec}


def child(name, parent, min_count=None, **kw):
    pg = workload_group(name, min_count, **kw)
    pg["spec"]["parentCompositePodGroupName"] = parent
    return pg


def part_member(name, group, part, **kw):
    p = workload_member(name, group, **kw)
    p["spec"]["nodeSelector"] = {"part": part}
    return p


def part_node(name, part, cpu, **labels):
    return node(name, cpu=cpu, labels={"part": part, **labels})


# -- the objects and the hierarchy --------------------------------------------------------------

def test_the_composite_podgroup_as_the_scheduler_reads_it():
    c = CompositePodGroup.from_dict(cpg("c", 2, parent="r", topology="rack"))
    assert (c.key, c.gang, c.min_group_count, c.min_count, c.parent, c.topology_keys) == \
        ("default/c", True, 2, 2, "r", ("rack",))
    assert CompositePodGroup.from_dict(cpg("b")).min_count == 1
    assert WorkloadPodGroup.from_dict(child("a", "c", 2)).parent == "c"


def test_the_hierarchy_finds_each_podgroups_root_and_the_tree_under_it():
    pgs = {f"default/{n}": WorkloadPodGroup.from_dict(o) for n, o in
           (("a", child("a", "m")), ("b", child("b", "m")), ("d", child("d", "r")), ("solo", workload_group("solo")),
            ("lost", child("lost", "nowhere")))}
    cpgs = {f"default/{n}": CompositePodGroup.from_dict(o) for n, o in
            (("r", cpg("r")), ("m", cpg("m", 2, parent="r")), ("x", cpg("x", parent="y")), ("y", cpg("y", parent="x")))}
    h = PodGroupHierarchy(pgs, cpgs)
    assert h.root_of("default/a") == (True, "default/r")
    assert h.root_of("default/solo") == (False, "default/solo")
    assert h.root_of("default/lost") is None                  # its parent does not exist
    assert h.root_of_composite("default/x") is None           # parents in a circle
    tree = h.tree("default/r")
    assert sorted(leaf.key for leaf in tree.leaves()) == ["default/a", "default/b", "default/d"]
    assert [n.key for n in tree.walk()][0] == "default/r"


# -- GangScheduling -----------------------------------------------------------------------------

def test_placement_feasible_counts_children_against_min_group_count():
    sim = sim_with(gates=GATES)
    gang = sim.frameworks["pysched"].plugins["GangScheduling"]
    c = CompositePodGroup.from_dict(cpg("c", 2))
    assert gang.placement_feasible(c, 1, 0).message() == "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    assert gang.placement_feasible(c, 1, 1).code.name == "WAIT"
    assert gang.placement_feasible(c, 2, 0) is None
    assert "compositepodgroups" in gang.object_kinds


def test_members_wait_until_the_whole_tree_meets_quorum():
    sim = sim_with(gates=GATES)
    for i, (part, cpu) in enumerate((("a", "4"), ("a", "5"), ("b", "6"))):
        sim.add_node(part_node(f"n{i}", part, cpu))
    sim.add_object(child("a", "c", 2))
    sim.add_object(child("b", "c", 1))

    async def body():
        sim.add_pod(part_member("a0", "a", "a", cpu="3"))
        sim.add_pod(part_member("b0", "b", "b", cpu="3"))
        gang = sim.frameworks["pysched"].plugins["GangScheduling"]
        q = {x.pod.name: x for x in sim.queue.pending()}
        assert gang.pre_enqueue(q["b0"].pod).message() == (
            "failed to build hierarchy snapshot: composite pod group object not found in state for default/c")
        sim.add_object(cpg("c", 2))          # a has one member of two: the tree is not ready
        await until(lambda: all(x.gated for x in sim.queue.pending()))
        assert gang.pre_enqueue(q["b0"].pod).message() == waiting_for_tree("c") == \
            'waiting for composite pod group "c" tree to meet quorum'
        assert not FlakyBinder.bound
        sim.add_pod(part_member("a1", "a", "a", cpu="3"))
        await until(lambda: len(FlakyBinder.bound) == 3)
        assert FlakyBinder.bound == {"a0": "n1", "a1": "n0", "b0": "n2"}
    run_live(sim, body)


# -- the cycle ----------------------------------------------------------------------------------

def test_a_tree_that_fits_is_placed_whole_in_one_cycle():
    sim = sim_with(gates=GATES)
    for i, part in enumerate("abd"):
        sim.add_node(part_node(f"n{i}", part, "4"))
    for obj in (cpg("r"), cpg("m", 2, parent="r"), child("a", "m", 1), child("b", "m", 1), child("d", "r", 1)):
        sim.add_object(obj)

    async def body():
        for part in "abd":
            sim.add_pod(part_member(f"{part}0", part, part, cpu="3"))
        await until(lambda: len(FlakyBinder.bound) == 3)
        assert not sim.frameworks["pysched"].handle.waiting_pods
    run_live(sim, body)


def test_min_group_count_met_with_one_child_failing():
    """Upstream's cpg-min-met: gang a cannot complete (one node for two members), b is placed; a's
    member that fit is told the group's status, the other its own FitError."""
    sim = sim_with(gates=GATES)
    sim.add_node(part_node("n0", "a", "4"))
    sim.add_node(part_node("n1", "b", "5"))
    for obj in (child("a", "c", 2), child("b", "c", 1)):
        sim.add_object(obj)

    async def body():
        for name, part in (("a0", "a"), ("a1", "a"), ("b0", "b")):
            sim.add_pod(part_member(name, part, part, cpu="3"))
        sim.add_object(cpg("c", 1))
        await until(lambda: len(FlakyBinder.bound) == 1 and len(errors(sim)) == 2 and all(errors(sim).values()))
        assert list(FlakyBinder.bound.values()) == ["n1"]
        got = errors(sim)
        status = ("pod group is unschedulable, 0/1 placements are available, first placement status: "
                  "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining")
        assert got["a0"].startswith(f"pod group is unschedulable, {status}")
        assert got["a1"] == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node " \
                            "affinity/selector."
    run_live(sim, body)


def test_a_tree_below_min_group_count_gives_up_before_its_last_child():
    """Upstream's cpg-fails: the first child tried fails, the CompositePodGroup (minGroupCount 2)
    cannot be satisfied any more: the second child is never tried, its member is told the tree's
    status (before PodGroupPostFilter's verdict)."""
    sim = sim_with(gates=GATES)
    sim.add_node(part_node("n0", "a", "4"))
    sim.add_node(part_node("n1", "b", "5"))
    for obj in (cpg("c", 2), child("a", "c", 1), child("b", "c", 1)):
        sim.add_object(obj)

    async def body():
        sim.add_pod(part_member("a0", "a", "a", cpu="8"))
        sim.add_pod(part_member("b0", "b", "b", cpu="8"))
        await until(lambda: len(errors(sim)) == 2 and all(errors(sim).values()))
        got = sorted(errors(sim).values())
        untried = ("pod group is unschedulable, 0/1 placements are available, first placement status: "
                   "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining")
        assert got == ["0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node "
                       "affinity/selector.", untried]
        assert not sim.cache.assumed and not FlakyBinder.bound
    run_live(sim, body)


def test_a_composite_podgroups_topology_key_holds_its_children_in_one_rack():
    """Upstream's cpg-rack: a0 would rather have r2's bigger node, but b has no node in r2."""
    sim = sim_with(gates=GATES)
    sim.add_node(part_node("r1-n1", "a", "4", rack="r1"))
    sim.add_node(part_node("r1-n2", "b", "5", rack="r1"))
    sim.add_node(part_node("r2-n3", "a", "6", rack="r2"))
    for obj in (cpg("c", 2, topology="rack"), child("a", "c", 1), child("b", "c", 1)):
        sim.add_object(obj)

    async def body():
        sim.add_pod(part_member("a0", "a", "a", cpu="3"))
        sim.add_pod(part_member("b0", "b", "b", cpu="3"))
        await until(lambda: len(FlakyBinder.bound) == 2)
        assert sorted(FlakyBinder.bound.values()) == ["r1-n1", "r1-n2"]
    run_live(sim, body)


def test_without_the_gate_a_podgroup_with_a_parent_is_a_group_of_its_own():
    sim = sim_with(gates=GATES - {"CompositePodGroup"})
    sim.add_node(part_node("n0", "a", "4"))
    sim.add_object(child("a", "c", 1))      # its parent does not exist: no matter without the gate

    async def body():
        sim.add_pod(part_member("a0", "a", "a", cpu="3"))
        await until(lambda: len(FlakyBinder.bound) == 1)
    run_live(sim, body)
