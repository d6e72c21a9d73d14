"""Gangs as preemption victims: kube-scheduler 1.37's victims (a whole all-mode gang, PodGroup
priority and rank, reprieve order, PDBs) and pysched's rule that a preemption never leaves a gang
below its minimum - in the victim selection itself, in single-pod preemption (DefaultPreemption's
PostFilter) and in pod-group preemption (PodGroupPostFilter)."""

from pysched.apis import config as configmod
from pysched.framework.cycle_state import CycleState
from pysched.framework.features import parse_feature_gates
from pysched.framework.gang_victims import GangIndex, Victim, VictimSelection, more_important, split_by_pdb
from pysched.framework.podgroup_preemption import Assignment
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.podinfo import PodInfo
from pysched.framework.preemption import PDB
from pysched.framework.status import Code, Status
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

GATES = parse_feature_gates("GenericWorkload=true,TopologyAwareWorkloadScheduling=true", (1, 37))


class Objects:
    def __init__(self, *objs):
        self.by = {}
        for o in objs:
            kind = "workloadpodgroups" if o["apiVersion"].startswith("scheduling.k8s.io/") else "podgroups"
            self.by[(kind, f"{o['metadata']['namespace']}/{o['metadata']['name']}")] = o

    def get(self, kind, key):
        return self.by.get((kind, key))


def workload_pg(name, min_count, priority, *, mode="single"):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"pg-uid-{name}", "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "priority": priority,
                     "disruptionMode": {mode: {}}}}


def cosched_pg(name, min_member):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


def running(name, node_name, cpu, priority, *, group=None, label_group=None, labels=None, start=None):
    labels = dict(labels or {})
    if label_group:
        labels["scheduling.x-k8s.io/pod-group"] = label_group
    p = pod(name, cpu=cpu, node_name=node_name, priority=priority, labels=labels or None)
    if group:
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
    p.setdefault("status", {})["phase"] = "Running"
    if start:
        p["status"]["startTime"] = start
    return p


def infos(*pods):
    return [PodInfo.from_dict(p) for p in pods]


class Nodes:
    """A CPU-only cluster for the selection: pods move on and off, ``fits`` checks one node."""

    def __init__(self, pods, capacity, need):
        self.on = {p.uid: p for p in pods}
        self.capacity, self.need = capacity, need   # need: {node: cpu millis the preemptor wants there}
        self.log = []

    def used(self, node_name):
        return sum(p.requests.get("cpu", 0) for p in self.on.values() if p.node_name == node_name)

    def put_back(self, p):
        self.log.append(("back", p.name))
        self.on[p.uid] = p

    def take_out(self, p):
        self.on.pop(p.uid, None)

    def fits(self):
        return all(self.used(n) + cpu <= self.capacity for n, cpu in self.need.items())


def select(pods, victims, need, capacity=4000, pdbs=()):
    cluster = Nodes(pods, capacity, need)
    for v in victims:
        for p in v.pods:
            cluster.take_out(p)
    sel = VictimSelection(victims, list(pdbs), cluster.put_back, cluster.take_out, cluster.fits)
    chosen = sel.select()
    return sorted(p.name for v in chosen for p in v.pods), sel, cluster


# -- victims ------------------------------------------------------------------------------------

def test_an_all_mode_member_stands_for_its_whole_gang_on_every_node():
    pods = infos(*(running(f"l-{i}", f"n{i % 2 + 1}", "2", 100, group="l") for i in range(4)),
                 running("q", "n1", "1", 100))
    index = GangIndex(pods, Objects(workload_pg("l", 4, 100, mode="all")), workloads=True)
    victims = index.victims([p for p in pods if p.node_name == "n1"], 1000)
    whole = [v for v in victims if v.whole]
    assert len(whole) == 1 and sorted(p.name for p in whole[0].pods) == ["l-0", "l-1", "l-2", "l-3"]
    assert whole[0].rank == 2 and whole[0].priority == 100
    # Without GenericWorkload the members are plain pods.
    plain = GangIndex(pods, Objects(workload_pg("l", 4, 100, mode="all")), workloads=False)
    assert all(len(v.pods) == 1 for v in plain.victims(pods, 1000))


def test_a_single_mode_member_has_its_podgroup_priority_and_rank():
    pods = infos(running("l-0", "n1", "1", 7, group="l"), running("q", "n1", "1", 7))
    index = GangIndex(pods, Objects(workload_pg("l", 1, 7)), workloads=True)
    by = {v.pods[0].name: v for v in index.victims(pods, 1000)}
    assert (by["l-0"].rank, by["q"].rank) == (2, 1)
    # At equal priority the gang member is the more important one: the plain pod goes first.
    assert sorted(by.values(), key=more_important)[0] is by["l-0"]


def test_equal_priority_is_never_a_victim():
    pods = infos(running("b", "n1", "2", 500))
    assert GangIndex(pods, Objects(), workloads=True).victims(pods, 500) == []


# -- reprieve order -------------------------------------------------------------------------------

def test_the_more_important_victim_is_reprieved_first():
    pods = infos(running("a", "n1", "2", 100), running("b", "n1", "2", 500))
    victims = GangIndex(pods, Objects(), workloads=True).victims(pods, 1000)
    chosen, _, cluster = select(pods, victims, {"n1": 2000})
    assert chosen == ["a"]
    assert cluster.log[0] == ("back", "b")


def test_pdb_violating_victims_are_reprieved_first_and_still_evicted_when_needed():
    pods = infos(running("q1", "n1", "2", 100, labels={"app": "p"}), running("q2", "n1", "2", 100))
    pdb = PDB("default", configmod_selector({"app": "p"}), 0)
    victims = GangIndex(pods, Objects(), workloads=True).victims(pods, 1000)
    violating, ok = split_by_pdb(sorted(victims, key=more_important), [pdb])
    assert [(v.pods[0].name, n) for v, n in violating] == [("q1", 1)] and [v.pods[0].name for v in ok] == ["q2"]
    chosen, sel, _ = select(pods, victims, {"n1": 2000}, pdbs=[pdb])
    assert chosen == ["q2"] and sel.num_pdb_violations == 0
    chosen, sel, _ = select(pods, victims, {"n1": 4000}, pdbs=[pdb])
    assert chosen == ["q1", "q2"] and sel.num_pdb_violations == 1


def test_a_pod_stops_charging_budgets_at_the_first_pdb_it_violates():
    pods = infos(running("q", "n1", "1", 1, labels={"app": "p"}), running("r", "n1", "1", 1, labels={"app": "p"}))
    first = PDB("default", configmod_selector({"app": "p"}), 0)
    second = PDB("default", configmod_selector({"app": "p"}), 1)
    victims = [Victim([p], 1, 1) for p in pods]
    violating, ok = split_by_pdb(victims, [first, second])
    # q violates `first` and does not use `second`'s budget: r then only violates `first`.
    assert [n for _, n in violating] == [1, 1] and ok == []


def configmod_selector(labels):
    from pysched.apis.core.model import parse_label_selector
    return parse_label_selector({"matchLabels": labels}, "spec.selector")


# -- pysched's rule: never below the minimum -------------------------------------------------------

def test_taking_a_gang_below_its_minimum_takes_it_whole_and_gives_the_others_a_second_chance():
    # n1 (4 CPU): gang member g-0 (2 CPU, priority 5) and plain q (1 CPU, priority 50); g-1 on n2.
    # The gang needs both (minMember 2). The preemptor needs 2 CPU on n1: q is reprieved first, g-0
    # does not fit beside it - and takes g-1 with it.
    pods = infos(running("g-0", "n1", "2", 5, label_group="g"), running("g-1", "n2", "1", 5, label_group="g"),
                 running("q", "n1", "1", 50))
    index = GangIndex(pods, Objects(cosched_pg("g", 2)), workloads=True)
    victims = index.victims([p for p in pods if p.node_name == "n1"], 1000)
    chosen, sel, _ = select(pods, victims, {"n1": 2000})
    assert chosen == ["g-0", "g-1"] and [g.key for g in sel.expanded] == ["coscheduling:default/g"]
    # Without the gang (no PodGroup: plain pods), upstream's choice: g-0 alone.
    plain = GangIndex(pods, Objects(), workloads=True).victims([p for p in pods if p.node_name == "n1"], 1000)
    assert select(pods, plain, {"n1": 2000})[0] == ["g-0"]


def test_the_second_chance_reprieves_what_the_whole_gang_makes_unnecessary():
    # n1 (4 CPU): g-0 (2, priority 5), q (1, priority 1), r (1, priority 50); g-1 runs on n1 too.
    # The preemptor needs 3 CPU on n1. Reprieves: r back (fits with g-0, g-1, q gone: 1+3=4), g-0 no,
    # g-1 no, q no... g below min 2 -> whole; then q gets its second chance.
    pods = infos(running("g-0", "n1", "1", 5, group="g"), running("g-1", "n1", "1", 5, group="g"),
                 running("q", "n1", "1", 1), running("r", "n1", "1", 50))
    index = GangIndex(pods, Objects(workload_pg("g", 2, 5)), workloads=True)
    victims = index.victims(pods, 1000)
    chosen, _, _ = select(pods, victims, {"n1": 2000})
    # Upstream would take q and one gang member (leaving g at 1 < 2); pysched takes the gang whole
    # and q is reprieved.
    assert chosen == ["g-0", "g-1"]


def test_gangs_broken_by_the_member_by_member_reprieve_are_offered_back_whole():
    """Four gangs of 4 x 1 CPU, one member of each on each of 4 nodes of 4 CPU; the preemptor needs
    6 CPU (2, 1, 1, 2 on the nodes). The member-by-member reprieve (oldest first) keeps a and b on n0
    but c and d on n3, so every gang loses a member and all four go whole - 16 pods for 6 CPU. Offered
    back whole, a and b stay: two whole gangs are enough."""
    def started(g, i):     # c and d are the younger on every node but n3, where a and b are
        late = g in ("ab" if i == 3 else "cd")
        return f"2026-01-01T00:00:{10 + 5 * late + 'abcd'.index(g)}Z"
    pods = infos(*(running(f"{g}-{i}", f"n{i}", "1", 5, group=g, start=started(g, i))
                   for i in range(4) for g in "abcd"))
    index = GangIndex(pods, Objects(*(workload_pg(g, 4, 5) for g in "abcd")), workloads=True)
    chosen, sel, _ = select(pods, index.victims(pods, 1000), {"n0": 2000, "n1": 1000, "n2": 1000, "n3": 2000})
    assert len(chosen) == 8 and len(sel.expanded) == 2, chosen
    assert len({name.split("-")[0] for name in chosen}) == 2, chosen


def test_a_gang_with_a_surplus_loses_only_surplus_members():
    pods = infos(*(running(f"g-{i}", "n1", "1", 5, group="g") for i in range(4)))
    index = GangIndex(pods, Objects(workload_pg("g", 2, 5)), workloads=True)
    chosen, sel, _ = select(pods, index.victims(pods, 1000), {"n1": 2000})
    assert len(chosen) == 2 and sel.expanded == []
    chosen, sel, _ = select(pods, index.victims(pods, 1000), {"n1": 3000})
    assert len(chosen) == 4 and len(sel.expanded) == 1


def test_a_gang_that_cannot_go_whole_gives_up_no_more_than_its_surplus():
    # g-2 has the preemptor's priority: the gang cannot go whole, and it has no surplus (min 3).
    pods = infos(running("g-0", "n1", "1", 5, label_group="g"), running("g-1", "n1", "1", 5, label_group="g"),
                 running("g-2", "n2", "1", 1000, label_group="g"), running("q", "n1", "1", 5))
    index = GangIndex(pods, Objects(cosched_pg("g", 3)), workloads=True)
    assert [v.pods[0].name for v in index.victims(pods, 1000)] == ["q"]


# -- single-pod preemption ------------------------------------------------------------------------

def sim_with(nodes, pods, objects=(), gates=GATES):
    raw = {"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [{"schedulerName": "pysched"}]}
    sim = OfflineScheduler(configmod.parse(raw), kube_version=(1, 37), feature_gates=gates)
    for o in objects:
        assert sim.add_object(o)
    for n in nodes:
        sim.add_node(n)
    for p in pods:
        sim.add_pod(p)
    return sim


def test_single_pod_preemption_takes_an_all_mode_gang_whole_across_nodes():
    # S9's variant: n3 is full of high pods, L (all mode) has a pod on n1 and on n2.
    sim = sim_with([node(f"n{i}", cpu="4") for i in (1, 2, 3)],
                   [running("l-0", "n1", "3", 100, group="l"), running("l-1", "n2", "3", 100, group="l"),
                    running("h", "n3", "3", 2000)],
                   objects=[workload_pg("l", 2, 100, mode="all")])
    out = sim.schedule(pod("p", cpu="2", priority=1000))
    assert out.nominated_node in ("n1", "n2") and sorted(out.victims) == ["default/l-0", "default/l-1"]


def test_single_pod_preemption_prefers_a_plain_pod_to_a_whole_gang():
    sim = sim_with([node(f"n{i}", cpu="4") for i in (1, 2, 3)],
                   [running("l-0", "n1", "3", 100, group="l"), running("l-1", "n2", "3", 100, group="l"),
                    running("q", "n3", "3", 100)],
                   objects=[workload_pg("l", 2, 100, mode="all")])
    out = sim.schedule(pod("p", cpu="2", priority=1000))
    assert (out.nominated_node, out.victims) == ("n3", ("default/q",))


def test_single_pod_preemption_never_leaves_a_scheduler_plugins_gang_below_min_member():
    sim = sim_with([node("n1", cpu="4"), node("n2", cpu="4")],
                   [running("g-0", "n1", "3", 100, label_group="g"), running("g-1", "n2", "3", 100, label_group="g"),
                    running("big", "n2", "1", 2000)],
                   objects=[cosched_pg("g", 2)])
    out = sim.schedule(pod("p", cpu="2", priority=1000))
    # n1: g-0 must go, and with it g-1 (the gang has no surplus); n2 needs g-1 as well, and again g-0.
    assert sorted(out.victims) == ["default/g-0", "default/g-1"]
    # With a surplus (minMember 1) a single member is enough.
    sim = sim_with([node("n1", cpu="4"), node("n2", cpu="4")],
                   [running("g-0", "n1", "3", 100, label_group="g"), running("g-1", "n2", "3", 100, label_group="g"),
                    running("big", "n2", "1", 2000)],
                   objects=[cosched_pg("g", 1)])
    out = sim.schedule(pod("p", cpu="2", priority=1000))
    assert len(out.victims) == 1


# -- pod-group preemption -------------------------------------------------------------------------

def group_preempt(sim, pg_obj, members, placements):
    """DefaultPreemption's PodGroupPostFilter with a feasibility run that places ``members`` on
    ``placements`` (or fails when that is None)."""
    plugin = sim.frameworks["pysched"].plugins["DefaultPreemption"]
    pg = WorkloadPodGroup.from_dict(pg_obj)
    infos_ = [PodInfo.from_dict(m) for m in members]
    before = sim.cache.dump()
    calls = []

    def feasibility():
        calls.append(sim.cache.dump())
        if placements is None:
            return Status(Code.UNSCHEDULABLE, "pod group is unschedulable, minCount (3) cannot be satisfied"), []
        return Status(Code.SUCCESS), [Assignment(p, n, CycleState()) for p, n in zip(infos_, placements, strict=True)]

    result, st = plugin.pod_group_post_filter(pg, pg_obj["metadata"]["uid"], infos_, feasibility)
    assert sim.cache.dump() == before          # every what-if move undone
    return result, st, calls


def member(name, group, cpu, priority):
    p = pod(name, cpu=cpu, priority=priority)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def test_group_preemption_evicts_an_all_mode_gang_whole():
    # S1: L (all, 4x2) fills n1 and n2; H (2x3) needs 3 on each node.
    low = workload_pg("l", 4, 100, mode="all")
    high = workload_pg("h", 2, 1000)
    sim = sim_with([node("n1", cpu="4"), node("n2", cpu="4")],
                   [running(f"l-{i}", f"n{i % 2 + 1}", "2", 100, group="l") for i in range(4)], objects=[low, high])
    h = [member(f"h-{i}", "h", "3", 1000) for i in range(2)]
    result, st, calls = group_preempt(sim, high, h, ["n1", "n2"])
    assert st == Status(Code.SUCCESS, "pod group preemption: found a placement for podgroup, preempting 4 victims")
    assert sorted(result.victims) == [f"default/l-{i}" for i in range(4)]
    assert sorted(result.nominating.values()) == ["n1", "n2"]
    # The feasibility run saw every lower-priority pod gone.
    assert all(not v["pods"] for v in calls[0].values())


def test_group_preemption_reprieves_the_more_important_pod():
    # S4: A (plain low) and B (plain mid) on n1; H (1x2) pinned to n1: B reprieved, A goes.
    sim = sim_with([node("n1", cpu="4")], [running("a", "n1", "2", 100), running("b", "n1", "2", 500)],
                   objects=[workload_pg("h", 1, 1000)])
    result, st, _ = group_preempt(sim, workload_pg("h", 1, 1000), [member("h-0", "h", "2", 1000)], ["n1"])
    assert result.victims == ("default/a",) and st.message().endswith("preempting 1 victims")


def test_group_preemption_takes_a_single_mode_gang_whole_rather_than_below_min():
    # S2's cluster: L single-mode (4x2, min 4) on two 5-CPU nodes; upstream takes one L pod per node.
    low = workload_pg("l", 4, 100)
    sim = sim_with([node("n1", cpu="5"), node("n2", cpu="5")],
                   [running(f"l-{i}", f"n{i % 2 + 1}", "2", 100, group="l") for i in range(4)],
                   objects=[low, workload_pg("h", 2, 1000)])
    result, st, _ = group_preempt(sim, workload_pg("h", 2, 1000), [member(f"h-{i}", "h", "3", 1000) for i in range(2)],
                                  ["n1", "n2"])
    assert sorted(result.victims) == [f"default/l-{i}" for i in range(4)]
    assert st.message().endswith("preempting 4 victims")


def test_group_preemption_without_victims_and_when_it_cannot_help():
    sim = sim_with([node("n1", cpu="4")], [running("b", "n1", "4", 1000)], objects=[workload_pg("h", 1, 1000)])
    result, st, calls = group_preempt(sim, workload_pg("h", 1, 1000), [member("h-0", "h", "2", 1000)], ["n1"])
    assert (result, st, calls) == (None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod group preemption: No "
                                                "preemption victims found for incoming preemptor"), [])
    sim = sim_with([node("n1", cpu="4")], [running("q", "n1", "1", 1)], objects=[workload_pg("h", 3, 1000)])
    result, st, _ = group_preempt(sim, workload_pg("h", 3, 1000), [member("h-0", "h", "4", 1000)], None)
    assert result is None and st == Status(Code.UNSCHEDULABLE, "pod group preemption: pod group is unschedulable, "
                                                               "minCount (3) cannot be satisfied")


def test_group_preemption_policy_never():
    sim = sim_with([node("n1", cpu="4")], [running("q", "n1", "4", 1)], objects=[workload_pg("h", 1, 1000)])
    m = member("h-0", "h", "2", 1000)
    m["spec"]["preemptionPolicy"] = "Never"
    result, st, _ = group_preempt(sim, workload_pg("h", 1, 1000), [m], ["n1"])
    assert st == Status(Code.UNSCHEDULABLE, "pod group preemption: not eligible due to preemptionPolicy=Never.")
