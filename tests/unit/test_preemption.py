"""DefaultPreemption on the offline engine (the production cache, frameworks and cycle): victim
selection, PDB reprieve order, candidate choice, sampling, eligibility, the nominated-pods
two-pass filter and kube-scheduler's messages."""

import numpy as np
import pytest

from pysched.apis import config as configmod
from pysched.apis.config import ConfigError
from pysched.framework.cycle_state import CycleState
from pysched.framework.podinfo import PodInfo
from pysched.framework.preemption import PDB, Candidate, pick_one_node, split_by_pdb
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

HOST = "kubernetes.io/hostname"


def sim_with(nodes, pods, *, args=None, objects=()):
    raw = {"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
           "profiles": [{"schedulerName": "pysched"}]}
    if args is not None:
        raw["profiles"][0]["pluginConfig"] = [{"name": "DefaultPreemption", "args": args}]
    sim = OfflineScheduler(configmod.parse(raw))
    for o in objects:
        assert sim.add_object(o)
    for n in nodes:
        sim.add_node(n)
    for p in pods:
        sim.add_pod(p)
    return sim


def plugin_of(sim):
    return sim.frameworks["pysched"].plugins["DefaultPreemption"]


def running(name, node_name, cpu, priority, **kw):
    p = pod(name, cpu=cpu, node_name=node_name, priority=priority, **kw)
    p.setdefault("status", {})["phase"] = "Running"
    return p


def pdb(name, labels, allowed, namespace="default"):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


# -- victims ------------------------------------------------------------------------------------

def test_minimal_victims_on_the_best_node():
    sim = sim_with([node("n1", cpu="2"), node("n2", cpu="2")],
                   [running("low1", "n1", "1", 10), running("low2", "n1", "1", 5), running("mid", "n2", "1500m", 20)])
    before = sim.cache.dump()
    out = sim.schedule(pod("high", cpu="1", priority=100))
    # n1: both removed, low1 (more important) reprieved, low2 evicted; n2 would evict priority 20.
    assert (out.nominated_node, out.victims) == ("n1", ("default/low2",))
    assert out.message == ("0/2 nodes are available: 2 Insufficient cpu. "
                           "preemption: found a potential placement for pod on node n1, preempting 1 victims")
    assert sim.cache.dump() == before  # the dry runs left the cache as it was


def test_victims_are_seen_removed_by_affinity_plugins():
    """A victim that only blocks through pod anti-affinity: InterPodAffinity's PreFilter state
    must see it gone, so PreFilter runs again on the simulated node."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": HOST}]}}
    sim = sim_with([node("n1", cpu="4")],
                   [running("blocker", "n1", "100m", 1, labels={"app": "x"}), running("other", "n1", "100m", 1)])
    out = sim.schedule(pod("high", cpu="100m", priority=100, affinity=anti))
    assert (out.nominated_node, out.victims) == ("n1", ("default/blocker",))


def test_pdb_violating_victims_are_reprieved_first():
    pods = [running("a", "n1", "1", 10, labels={"app": "a"}), running("b", "n1", "1", 5, labels={"app": "b"})]
    high = pod("high", cpu="1", priority=100)
    # Without budgets the more important pod (a) is reprieved: b goes.
    assert sim_with([node("n1", cpu="2")], pods).schedule(high).victims == ("default/b",)
    # b is protected: it is reprieved first, so a goes instead (and no budget is violated).
    sim = sim_with([node("n1", cpu="2")], pods, objects=[pdb("pb", {"app": "b"}, 0)])
    assert sim.schedule(high).victims == ("default/a",)
    # Both protected: within the violating group the more important (a) is reprieved first; b
    # goes and counts as a violation.
    sim = sim_with([node("n1", cpu="2")], pods, objects=[pdb("pa", {"app": "a"}, 0), pdb("pb", {"app": "b"}, 0)])
    victims, n_pdb, st = plugin_of(sim).select_victims(CycleState(), PodInfo.from_dict(high), sim.cache.nodes["n1"],
                                                      plugin_of(sim).evaluator.pdbs())
    assert st is None and [v.name for v in victims] == ["b"] and n_pdb == 1


def test_split_by_pdb_uses_budgets_in_order_and_skips_disrupted_pods():
    pods = [PodInfo.from_dict(running(n, "n1", "1", 1, labels={"app": "x"})) for n in ("p1", "p2", "p3")]
    budget = PDB.from_dict({"metadata": {"namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "x"}}},
                            "status": {"disruptionsAllowed": 1, "disruptedPods": {"p1": "2026-01-01T00:00:00Z"}}})
    violating, ok = split_by_pdb(pods, [budget])
    assert [p.name for p in ok] == ["p1", "p2"] and [p.name for p in violating] == ["p3"]
    other_ns = PDB.from_dict({"metadata": {"namespace": "x"}, "spec": {"selector": {"matchLabels": {"app": "x"}}},
                              "status": {"disruptionsAllowed": 0}})
    empty = PDB.from_dict({"metadata": {"namespace": "default"}, "spec": {"selector": {}},
                           "status": {"disruptionsAllowed": 0}})
    assert split_by_pdb(pods, [other_ns, empty]) == ([], pods)


# -- choosing the node --------------------------------------------------------------------------

def cand(name, prios, n_pdb=0, starts=None):
    vs = []
    for i, p in enumerate(prios):
        raw = running(f"{name}-{i}", name, "1", p)
        if starts:
            raw["status"]["startTime"] = starts[i]
        vs.append(PodInfo.from_dict(raw))
    return Candidate(name, vs, n_pdb)


@pytest.mark.parametrize("cands,winner", [
    ([cand("a", [1], 1), cand("b", [50, 40], 0)], "b"),                    # fewest PDB violations
    ([cand("a", [10, 1]), cand("b", [5, 5, 5])], "b"),                     # lowest highest priority
    ([cand("a", [5, 5]), cand("b", [5, 1])], "b"),                         # smallest priority sum
    ([cand("a", [-5, -5]), cand("b", [-5])], "b"),                         # sum offset by 2^31: fewer wins
    ([cand("a", [5, 1, 1]), cand("b", [5, 2])], "b"),                      # same sum... fewer victims
    ([cand("a", [5], starts=["2026-01-01T00:00:00Z"]),
      cand("b", [5], starts=["2026-01-02T00:00:00Z"])], "b"),             # latest start of the top victims
    ([cand("a", [5], starts=["2026-01-02T00:00:00Z"]),
      cand("b", [5], starts=["2026-01-02T00:00:00Z"])], "a"),             # full tie: the first
])
def test_pick_one_node_order(cands, winner):
    assert pick_one_node(cands).name == winner


# -- sampling -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args,n,expected", [
    ({}, 50, 50), ({}, 5000, 500), ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 3}, 50, 3),
    ({"minCandidateNodesPercentage": 50, "minCandidateNodesAbsolute": 0}, 9, 4),
])
def test_number_of_candidates(args, n, expected):
    assert plugin_of(sim_with([], [], args=args)).num_candidates(n) == expected


@pytest.mark.parametrize("on_paper", [False, True], ids=["node-by-node", "on-paper"])
def test_dry_run_stops_at_enough_candidates_from_the_offset(on_paper):
    nodes = [node(f"n{i}", cpu="1") for i in range(6)]
    pods = [running(f"low{i}", f"n{i}", "1", 1) for i in range(6)]
    sim = sim_with(nodes, pods, args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 2})
    pl = plugin_of(sim)
    seen = []
    real, real_on_paper = pl.select_victims, pl.select_victims_on_paper

    def spy(state, p, info, pdbs):
        seen.append(info.name)
        return real(state, p, info, pdbs)

    def spy_on_paper(state, p, infos, pdbs):
        chunk = [i.name for i in infos]
        seen.append(chunk)
        return real_on_paper(state, p, infos, pdbs)
    pl.select_victims = spy
    pl.select_victims_on_paper = spy_on_paper if on_paper else None
    pl.offset_and_count = lambda n: (4, pl.num_candidates(n))
    names = [sim.cache.table.infos[s].spec.name for s in sim.cache.table.order().tolist()]
    out = sim.schedule(pod("high", cpu="1", priority=10))
    if on_paper:   # one chunk judged on paper from the offset, wrapping; the first two taken
        assert seen == [[names[(4 + j) % 6] for j in range(6)]]
        assert out.nominated_node in (names[4], names[5])
    else:
        assert seen == [names[4], names[5]]                 # two candidates from offset 4, then stop
        assert out.nominated_node in seen


# -- eligibility and messages -------------------------------------------------------------------

def test_preemption_policy_never():
    sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
    p = pod("high", cpu="1", priority=100)
    p["spec"]["preemptionPolicy"] = "Never"
    out = sim.schedule(p)
    assert not out.nominated_node
    assert out.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                           "preemption: not eligible due to preemptionPolicy=Never.")


def test_unresolvable_nodes_are_not_candidates():
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    sim = sim_with([node("n1", cpu="1", taints=taint), node("n2", cpu="1"), node("n3", cpu="1")],
                   [running("low1", "n1", "1", 1), running("high2", "n2", "1", 1000), running("low3", "n3", "1", 1)])
    out = sim.schedule(pod("high", cpu="1", priority=100))
    assert out.nominated_node == "n3"
    sim2 = sim_with([node("n1", cpu="1", taints=taint), node("n2", cpu="1")],
                    [running("low1", "n1", "1", 1), running("high2", "n2", "1", 1000)])
    out = sim2.schedule(pod("high", cpu="1", priority=100))
    assert not out.nominated_node
    assert out.message == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint"
                           "(s). "
                           "preemption: 0/2 nodes are available: 1 No preemption victims found "
                           "for incoming pod, 1 Preemption is not helpful for scheduling.")


def test_not_helpful_when_removing_every_lower_pod_is_not_enough():
    sim = sim_with([node("n1", cpu="2")], [running("low", "n1", "1", 1), running("peer", "n1", "1", 100)])
    out = sim.schedule(pod("high", cpu="2", priority=100))
    assert out.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                           "preemption: 0/1 nodes are available: 1 Insufficient cpu.")
    # More than any node's allocatable: NodeResourcesFit says UnschedulableAndUnresolvable.
    sim = sim_with([node(f"n{i}", cpu="1") for i in range(8)], [running("low", "n0", "1", 1)])
    out = sim.schedule(pod("big", cpu="2", priority=100))
    assert out.message == ("0/8 nodes are available: 8 Insufficient cpu. "
                           "preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.")


def test_terminating_victim_on_the_nominated_node_makes_the_pod_wait():
    victim = running("low", "n1", "1", 1)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]
    sim = sim_with([node("n1", cpu="1"), node("n2", cpu="1")], [victim, running("low2", "n2", "1", 1)])
    p = pod("high", cpu="1", priority=100)
    p["status"] = {"nominatedNodeName": "n1"}
    out = sim.schedule(p)
    assert not out.nominated_node
    assert out.message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    # Without the nomination the same pod preempts (the terminating pod is a victim again).
    assert sim.schedule(pod("high2", cpu="1", priority=100)).nominated_node


# -- nominated pods -----------------------------------------------------------------------------

def test_nominated_pods_are_counted_for_lower_and_equal_priority_pods_only():
    sim = sim_with([node("n1", cpu="2")], [])
    nominee = PodInfo.from_dict(pod("nominee", cpu="1500m", priority=100), keep_raw=True)
    sim.queue.nominator.add(nominee, "n1")
    lower = sim.schedule(pod("lower", cpu="1", priority=50), assume=False)
    assert lower.node is None and lower.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    equal = sim.schedule(pod("equal", cpu="1", priority=100), assume=False)
    assert equal.node is None
    higher = sim.schedule(pod("higher", cpu="1", priority=200), assume=False)
    assert higher.node == "n1"
    # The nominee itself is not counted against itself.
    assert sim.schedule(nominee, assume=False).node == "n1"
    sim.queue.nominator.delete(nominee.uid)
    assert sim.schedule(pod("lower2", cpu="1", priority=50), assume=False).node == "n1"


def test_second_preemptor_sees_the_first_nomination():
    """Two preemptors for one node's worth of room: the second does not count the same space."""
    sim = sim_with([node("n1", cpu="2"), node("n2", cpu="2")],
                   [running("a", "n1", "2", 1), running("b", "n2", "2", 2)])
    first = PodInfo.from_dict(pod("p1", cpu="2", priority=100), keep_raw=True)
    out1 = sim.schedule(first)
    assert out1.nominated_node == "n1"
    sim.queue.nominator.add(first, out1.nominated_node)     # what the live cycle records
    out2 = sim.schedule(pod("p2", cpu="2", priority=100))
    assert out2.nominated_node == "n2" and out2.victims == ("default/b",)


def test_filter_cost_nothing_without_nominations(monkeypatch):
    sim = sim_with([node("n1", cpu="2")], [])
    fw = sim.frameworks["pysched"]
    monkeypatch.setattr(fw, "_nominated_positions", lambda *a: pytest.fail("nominations looked up"))
    assert sim.schedule(pod("p", cpu="1")).node == "n1"


# -- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize("args,msg", [
    ({"minCandidateNodesPercentage": 101},
     r"pluginConfig\[0\].args.minCandidateNodesPercentage: Invalid value: 101: not in valid range \[0, 100\]"),
    ({"minCandidateNodesAbsolute": -1},
     r"pluginConfig\[0\].args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range \[0, inf\)"),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     r"minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
])
def test_args_validation(args, msg):
    with pytest.raises(ConfigError, match=msg):
        sim_with([], [], args=args)


# -- the live cycle: nomination recorded, queue held while victims are evicted ------------------

def test_failed_cycle_records_the_nomination_for_the_next_cycle():
    sim = sim_with([node("n1", cpu="2"), node("n2", cpu="2")],
                   [running("a", "n1", "2", 1), running("b", "n2", "2", 2)])
    sim.add_pod(pod("p1", cpu="2", priority=100))
    sim.add_pod(pod("p2", cpu="2", priority=100))
    for _ in range(2):
        sim.scheduler.schedule_one(sim.queue.pop_nowait())
    nominated = {p.name: n for n in ("n1", "n2") for p in sim.queue.nominator.pods_for_node(n)}
    assert nominated == {"p1": "n1", "p2": "n2"}


def test_queue_holds_a_pod_while_its_preemption_runs():
    from pysched.backend.queue.scheduling_queue import UNSCHEDULABLE, SchedulingQueue

    held = {"yes"}
    q = SchedulingQueue(sort_key=lambda q: (-q.pod.priority,), hold=lambda p: bool(held))
    q.add(PodInfo.from_dict(pod("p"), keep_raw=True))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable_if_not_present(qpi)
    q.move_all("AssignedPodDelete")
    assert qpi.where == UNSCHEDULABLE and q.pop_nowait() is None
    held.clear()
    q.move_all("AssignedPodDelete")
    assert q.pop_nowait() is qpi


def test_nominator_keeps_our_nomination_until_the_update_names_one():
    from pysched.backend.queue.nominator import Nominator

    nom = Nominator()
    p = PodInfo.from_dict(pod("p", priority=5), keep_raw=True)
    nom.add(p, "n1")
    nom.update(p, p)                           # an unrelated update before our patch came back
    assert nom.nominated_node(p.uid) == "n1"
    raw = pod("p", priority=5)
    raw["metadata"]["uid"] = p.uid
    raw["status"] = {"nominatedNodeName": "n2"}
    moved = PodInfo.from_dict(raw, keep_raw=True)
    nom.update(p, moved)
    assert nom.nominated_node(p.uid) == "n2" and not nom.pods_for_node("n1")
    raw["status"] = {}
    nom.update(moved, PodInfo.from_dict(raw, keep_raw=True))   # cleared by someone: gone
    assert not nom and nom.nominated_node(p.uid) == ""


def test_evaluator_holds_until_the_last_victim_is_gone():
    sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
    ev = plugin_of(sim).evaluator
    victim = sim.cache.nodes["n1"].pods.copy().popitem()[1]
    ev.preempting.add("preemptor")
    assert ev.is_running_preemption("preemptor")          # last victim not yet sent
    ev.last_victim["preemptor"] = victim
    assert ev.is_running_preemption("preemptor")          # sent, the informer still shows it
    sim.remove_pod(victim.uid)
    assert not ev.is_running_preemption("preemptor")


def test_extended_resource_victims_and_the_pod_count_limit():
    """Extended resources and the node's pod-count limit are read from the node table: the
    simulated removal must reach it."""
    gpu = {"nvidia.com/gpu": "1"}
    sim = sim_with([node("g1", cpu="8", extended=gpu), node("g2", cpu="8", extended=gpu)],
                   [running("trainer", "g1", "100m", 1, extended=gpu), running("infer", "g2", "100m", 3, extended=gpu)])
    out = sim.schedule(pod("urgent", cpu="100m", priority=100, extended=gpu))
    assert (out.nominated_node, out.victims) == ("g1", ("default/trainer",))
    sim = sim_with([node("tiny", cpu="8", pods="2")],
                   [running("x", "tiny", "100m", 1), running("y", "tiny", "100m", 2)])
    out = sim.schedule(pod("urgent", cpu="100m", priority=100))
    assert (out.nominated_node, out.victims) == ("tiny", ("default/x",))


def test_simulate_reports_the_preemption(tmp_path):
    import yaml

    from pysched.tools.simulate import Simulation, format_text
    from pysched.tools.snapshot import load_pods, load_snapshot

    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all([node("n1", cpu="1"), running("low", "n1", "1", 1)]))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([pod("high", cpu="1", priority=100)]))
    res = Simulation().run(load_snapshot(snap), load_pods(pods))
    (placement,) = res.as_dict()["placements"]
    assert placement["node"] is None
    assert placement["preemption"] == {"nominatedNode": "n1", "victims": ["default/low"]}
    assert "(would preempt default/low on n1)" in format_text(res)


async def test_preemption_writes_pass_the_fence():
    """Evictions go through the scheduler's client: a replica that does not lead sends nothing
    (the refusal comes before any connection: the server address is unreachable anyway)."""
    from pysched.client.auth import Credentials
    from pysched.client.fence import NotLeaderError, WriteFence
    from pysched.client.rest import KubeClient
    from pysched.framework.preemption import Candidate

    sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
    client = KubeClient(Credentials(server="https://127.0.0.1:9"), fence=WriteFence(lambda: False))
    activated = []
    handle = plugin_of(sim).handle
    handle.client, handle.activate = client, activated.extend
    handle.spawn = None
    ev = plugin_of(sim).evaluator
    victim = next(iter(sim.cache.nodes["n1"].pods.values()))
    preemptor = PodInfo.from_dict(pod("high", cpu="1", priority=100), keep_raw=True)
    try:
        with pytest.raises(NotLeaderError):
            await ev.preempt_pod(Candidate("n1", [victim]), preemptor, victim)
        ev.preempting.add(preemptor.uid)
        await ev._preempt_in_background(Candidate("n1", [victim]), preemptor, [victim])
        assert not ev.is_running_preemption(preemptor.uid) and activated == [preemptor.uid]
        assert client.requests_total == 0
    finally:
        await client.close()


async def test_a_preemptor_whose_victims_are_already_gone_is_activated_when_it_finishes(monkeypatch):
    """Another preemption deleted the victims first: their Delete events came while this preemptor
    was held back, so no event will move it - the evaluator activates it itself. A victim whose
    deletion is still to be seen will move it with its own event: no activation then."""
    from pysched.framework.preemption import Candidate

    for gone in (True, False):
        sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
        activated = []
        handle = plugin_of(sim).handle
        handle.activate = activated.extend
        ev = plugin_of(sim).evaluator
        victim = next(iter(sim.cache.nodes["n1"].pods.values()))
        preemptor = PodInfo.from_dict(pod("high", cpu="1", priority=100), keep_raw=True)

        async def deleted_elsewhere(c, preemptor, v, gone=gone, sim=sim):
            if gone:
                sim.remove_pod(v.uid)          # the informer saw it go before this DELETE (a 404)
        monkeypatch.setattr(ev, "preempt_pod", deleted_elsewhere)
        monkeypatch.setattr(ev, "clear_lower_nominations", lambda *a: _true())
        ev.preempting.add(preemptor.uid)
        await ev._preempt_in_background(Candidate("n1", [victim]), preemptor, [victim])
        assert activated == ([preemptor.uid] if gone else [])


async def _true():
    return True


def test_no_lower_priority_pod_anywhere_skips_the_dry_runs(monkeypatch):
    """The cache's priority census answers "no victims" for every candidate without a dry run,
    with the message the dry runs would give; one lower-priority pod brings the dry runs back."""
    nodes = [node(f"n{i}", cpu="1") for i in range(3)]
    peers = [running(f"peer{i}", f"n{i}", "1", 100) for i in range(3)]
    sim = sim_with(nodes, peers)
    calls = []
    policy = plugin_of(sim)
    real, real_on_paper = policy.select_victims, policy.select_victims_on_paper
    monkeypatch.setattr(policy, "select_victims", lambda *a: calls.append(a[2].name) or real(*a))
    monkeypatch.setattr(policy, "select_victims_on_paper",
                        lambda *a: calls.extend(i.name for i in a[2]) or real_on_paper(*a))
    out = sim.schedule(pod("high", cpu="1", priority=100))
    assert out.message == ("0/3 nodes are available: 3 Insufficient cpu. "
                           "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    assert calls == [] and sim.cache.priority_counts == {100: 3}
    sim.add_pod(running("low", "n0", "0", 1))     # a lower-priority pod, though evicting it frees nothing
    out = sim.schedule(pod("high2", cpu="1", priority=100))
    assert sorted(calls) == ["n0", "n1", "n2"] and sim.cache.priority_counts == {100: 3, 1: 1}
    assert out.message == ("0/3 nodes are available: 3 Insufficient cpu. preemption: "
                           "0/3 nodes are available: 1 Insufficient cpu, "
                           "2 No preemption victims found for incoming pod.")
    sim.remove_pod(next(uid for uid, p in sim.cache.pods.items() if p.name == "low"))
    assert sim.cache.priority_counts == {100: 3}


# -- dry runs on paper ----------------------------------------------------------------------------

def _random_preemption_case(rng):
    nodes, pods, objects = [], [], []
    for i in range(rng.randint(3, 9)):
        taints = [{"key": "t", "effect": "NoSchedule"}] if rng.random() < 0.15 else None
        nodes.append(node(f"n{i}", cpu=str(rng.choice([1, 2])), memory=f"{rng.choice([2, 4])}Gi",
                          pods=str(rng.choice([3, 5, 110])), taints=taints))
        for j in range(rng.randint(1, 5)):
            labels = {"app": rng.choice(["a", "b", "c"])}
            p = running(f"p{i}-{j}", f"n{i}", rng.choice(["200m", "300m", "500m"]), rng.choice([1, 5, 50, 500]),
                        memory=rng.choice(["256Mi", "512Mi", "1Gi"]), labels=labels)
            # distinct start times: victims of equal priority are ordered by them, never by chance
            p["status"]["startTime"] = f"2026-01-01T{i:02d}:{j:02d}:{rng.randint(0, 59):02d}Z"
            pods.append(p)
    for k, app in enumerate(rng.sample(["a", "b", "c"], rng.randint(0, 2))):
        objects.append(pdb(f"pdb{k}", {"app": app}, rng.choice([0, 1])))
    return nodes, pods, objects


def _both_ways(seed):
    """The outcomes of a random case's preemptions node by node, then on paper."""
    import random as _random
    outcomes = []
    for on_paper in (False, True):
        rng = _random.Random(seed)
        nodes, pods, objects = _random_preemption_case(rng)
        sim = sim_with(nodes, pods, objects=objects,
                       args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": rng.randint(1, 4)})
        pl = plugin_of(sim)
        pl.offset_and_count = lambda n, pl=pl: (0, pl.num_candidates(n))
        if not on_paper:   # as before on-paper evaluation: node by node, PreFilter run again each time
            fwk = sim.frameworks["pysched"]
            fwk.on_paper = lambda state, p: False
            fwk.pre_filter_state_stable = lambda state: False
        seen = []
        for k in range(rng.randint(1, 4)):
            out = sim.schedule(pod(f"high{k}", cpu=rng.choice(["800m", "1", "1500m"]),
                                   memory=rng.choice(["512Mi", "1Gi"]), priority=rng.choice([10, 100, 1000])),
                               assume=False)
            seen.append((out.node, out.nominated_node, out.victims, out.message))
            if out.nominated_node:   # the next pod sees this one nominated there
                nominee = PodInfo.from_dict(pod(f"nom{k}", cpu="500m", priority=1000))
                sim.queue.nominator.add(nominee, out.nominated_node)
        outcomes.append(seen)
    return outcomes


@pytest.mark.parametrize("seed", range(40))
def test_dry_runs_on_paper_choose_what_node_by_node_does(seed):
    """The same candidates, victims, nominated node and message with the pods moved on paper as
    with the pods moved in the cache, node by node - over random clusters with PDBs and nominated
    pods."""
    by_node, on_paper = _both_ways(seed)
    assert on_paper == by_node


def test_the_random_cases_preempt_often_enough_to_mean_something():
    assert sum(1 for seed in range(40) for o in _both_ways(seed)[0] if o[1]) >= 20


def test_a_pod_with_host_ports_is_judged_node_by_node():
    sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
    fwk = sim.frameworks["pysched"]
    from pysched.framework.cycle_state import CycleState
    plain, ported = (PodInfo.from_dict(pod("a", priority=5)),
                     PodInfo.from_dict(pod("b", priority=5, host_ports=[8080])))
    for p, want in ((plain, True), (ported, False)):
        state = CycleState()
        fwk.run_pre_filter(state, p, fwk.handle.all_nodes())
        assert fwk.on_paper(state, p) is want


def test_an_overlay_batch_counts_pods_on_paper():
    from pysched.framework.interface import OverlayBatch
    sim = sim_with([node("a", cpu="4"), node("b", cpu="2")], [running("x", "a", "1", 1)])
    table = sim.cache.table
    slots = np.array([sim.cache.nodes["a"].slot, sim.cache.nodes["b"].slot], dtype=np.int64)
    d_req = np.zeros((2, table.req.shape[1]), dtype=np.int64)
    d_req[0, table.res_index["cpu"]] = -1000       # x removed from a
    d_req[1, table.res_index["cpu"]] = 500         # a 500m pod added to b
    batch = OverlayBatch(table, slots, d_req, np.array([-1, 1], dtype=np.int64))
    assert batch.requested("cpu").tolist() == [0, 500]
    assert batch.pod_count().tolist() == [0, 1]
    assert batch.allocatable("cpu").tolist() == [4000, 2000]
    sub = batch.subset(np.array([False, True]))
    assert sub.requested("cpu").tolist() == [500] and sub.pod_count().tolist() == [1]
    assert table.req[slots, table.res_index["cpu"]].tolist() == [1000, 0]   # the cache is untouched
    with pytest.raises(NotImplementedError):
        batch.non_zero_requested("cpu")


def test_a_filter_plugin_that_does_not_say_keeps_preemption_node_by_node():
    from pysched.framework import FilterPlugin, FilterResult
    from pysched.profile import default_registry

    class Custom(FilterPlugin):
        name = "Custom"

        def filter(self, state, pod, nodes):
            return FilterResult.all_pass(len(nodes))

    registry = default_registry()
    registry["Custom"] = Custom
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": "pysched",
                                         "plugins": {"filter": {"enabled": [{"name": "Custom"}]}}}]})
    sim = OfflineScheduler(cfg, registry=registry)
    sim.add_node(node("n1", cpu="1"))
    fwk = sim.frameworks["pysched"]
    state = CycleState()
    p = PodInfo.from_dict(pod("a", priority=5))
    fwk.run_pre_filter(state, p, fwk.handle.all_nodes())
    assert fwk.pre_filter_state_stable(state) and not fwk.on_paper(state, p)


def test_a_victim_chosen_counts_as_terminating_until_it_is_gone():
    """A preemptor retried after its preemption was decided but before the victim's deletion shows
    in the informer must wait - not preempt again elsewhere (upstream's "terminating pod on the
    nominated node", known here from the decision itself)."""
    sim = sim_with([node("n1", cpu="1")], [running("low", "n1", "1", 1)])
    pl = plugin_of(sim)
    ev = pl.evaluator
    victim = next(p for p in sim.cache.pods.values() if p.name == "low")
    preemptor = PodInfo.from_dict(pod("high", cpu="1", priority=100))
    sim.queue.nominator.add(preemptor, "n1")      # nominated by the cycle, not back from the API yet
    assert pl.pod_eligible(preemptor, None) == (True, "")
    ev.note_doomed(victim.uid)
    assert pl.pod_eligible(preemptor, None) == (False, "not eligible due to a terminating pod on the nominated node.")
    sim.remove_pod(victim.uid)                    # gone: nothing on the node to wait for
    assert pl.pod_eligible(preemptor, None) == (True, "")


@pytest.mark.parametrize("release,tail", [
    ((1, 37), "preemption: found a potential placement for pod on node n1, preempting 1 victims"),
    ((1, 35), "1 Insufficient cpu."),
])
def test_a_successful_preemption_says_so_from_1_37(release, tail):
    """1.37's Evaluator.Preempt returns a Success that names the node and the number of victims;
    DefaultPreemption prefixes it and it ends the FailedScheduling message. 1.35 said nothing."""
    raw = {"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [{"schedulerName": "pysched"}]}
    sim = OfflineScheduler(configmod.parse(raw), kube_version=release)
    sim.add_node(node("n1", cpu="1"))
    sim.add_pod(running("low", "n1", "1", 1))
    out = sim.schedule(pod("high", cpu="1", priority=100))
    assert out.nominated_node == "n1" and out.victims == ("default/low",)
    assert out.message.endswith(tail), out.message


@pytest.mark.parametrize("release,code", [((1, 37), "Error"), ((1, 35), "Unschedulable")])
def test_a_victim_waiting_at_permit_is_preempted_in_memory(release, code):
    """1.37's WaitingPod.Preempt ends the victim's wait with an Error (it goes through the error
    backoff, not the unschedulable pool), and the Preempted Event says it happened in memory."""
    import asyncio

    from pysched.framework import Handle
    from pysched.framework.interface import WaitingPod
    from pysched.framework.preemption import Evaluator

    class Recorder:
        notes: list[str] = []

        def record(self, obj, **kw):
            self.notes.append(kw["note"])

    victim = PodInfo.from_dict(running("low", "n1", "1", 1))
    waiting = WaitingPod(victim, pending={"Coscheduling"})
    rec = Recorder()
    handle = Handle(snapshot=None, objects=None, kube_version=release,  # type: ignore[arg-type]
                    waiting_pods={victim.uid: waiting}, recorder=rec)  # type: ignore[arg-type]
    ev = Evaluator.__new__(Evaluator)
    ev.handle, ev.plugin_name = handle, "DefaultPreemption"
    asyncio.run(ev.preempt_pod(Candidate("n1", [victim], 0), PodInfo.from_dict(pod("high")), victim))
    assert waiting.rejection is not None and waiting.rejection.code.upstream == code
    assert waiting.rejection.message() == "preempted"
    assert rec.notes[-1].endswith(" (in kube-scheduler memory).") is (release >= (1, 37))
