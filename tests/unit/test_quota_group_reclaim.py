"""CapacityScheduling's reclaim for a whole pod group (``capacity_scheduling.group_reclaim``), the
rule that keeps two teams from reclaiming from each other forever, and the pod-group cycle running
the profile's PodGroupPostFilter plugins in order (``RunPodGroupPostFilterPlugins``).

The reclaim tests call the plugin's PodGroupPostFilter with the group's own placement run
(``feasibility``) as the cycle gives it; the loop test runs the live scheduling loop, with a test
task deleting each victim and submitting it again (a Job's controller)."""

from __future__ import annotations

import asyncio
import itertools

from pysched.apis import config as configmod
from pysched.framework import Code, CycleState, PostFilterPlugin, Status
from pysched.framework.podgroup_preemption import Assignment, PodGroupPostFilterResult
from pysched.framework.podgroups import WorkloadPodGroup
from pysched.framework.podinfo import PodInfo
from pysched.plugins.capacity_scheduling import group_reclaim
from pysched.profile import default_registry
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod
from .livekit import run_live, until
from .test_coscheduling import FlakyBinder, podgroup

LABEL = "scheduling.x-k8s.io/pod-group"
QUOTA_GANGS = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
               "multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]},
               "postFilter": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}],
                              "disabled": [{"name": "*"}]}}


def quota(ns, lo, hi):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": f"{ns}-quota", "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "resourceVersion": "1"},
            "spec": {"min": {"cpu": lo}, "max": {"cpu": hi}}}


def running(name, ns, cpu, *, group=None, priority=None, start="2026-01-01T00:00:00Z", node_name="n0"):
    p = pod(name, namespace=ns, cpu=cpu, node_name=node_name, priority=priority,
            labels={LABEL: group} if group else None)
    p["status"] = {"phase": "Running", "startTime": start}
    return p


def gang_member(name, ns, group, cpu, priority=None):
    return pod(name, namespace=ns, cpu=cpu, priority=priority, labels={LABEL: group})


def sim_with(nodes, quotas, pods=(), groups=(), plugins=None, registry=None):
    registry = registry or default_registry()
    registry["FlakyBinder"] = FlakyBinder
    FlakyBinder.fail, FlakyBinder.bound = set(), {}
    prof = {"schedulerName": "pysched",
            "plugins": {**(plugins or QUOTA_GANGS), "bind": {"enabled": [{"name": "FlakyBinder"}],
                                                             "disabled": [{"name": "*"}]}}}
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [prof]})
    sim = OfflineScheduler(cfg, registry=registry)
    for obj in [*quotas, *groups]:
        assert sim.add_object(obj)
    for n in nodes:
        sim.add_node(n)
    for p in pods:
        sim.add_pod(p)
    return sim


def capacity(sim):
    return sim.frameworks["pysched"].plugins["CapacityScheduling"]


def reclaim(sim, name, ns, members, placements):
    """CapacityScheduling's PodGroupPostFilter for the scheduler-plugins PodGroup ``ns/name``; the
    placement run puts the members on ``placements`` if they pass PreFilter and the filters on the
    snapshot as the reclaim left it (None: the group does not fit)."""
    cs = capacity(sim)
    fwk = sim.frameworks["pysched"]
    infos = [PodInfo.from_dict(m) for m in members]
    pg = WorkloadPodGroup(namespace=ns, name=name, generation=0, gang=True, min_count=len(members),
                          topology_keys=(), priority=None, preemption_policy=None, conditions=())
    before = sim.cache.dump()
    runs = []

    def feasibility():
        placed, reserved = [], []
        try:
            for p, host in zip(infos, placements or [None] * len(infos), strict=True):
                state = CycleState()
                state.write("pysched/pod-group-placement-trial", True)
                _, st = cs.pre_filter(state, p, None)
                if st is not None or host is None or fwk.filter_with_nominated(state, p, host, simulated=True):
                    runs.append(("unschedulable", p.name, st.message() if st else ""))
                    return Status(Code.UNSCHEDULABLE, "pod group is unschedulable"), []
                a = sim.cache.assume(p, host)
                fwk.run_reserve(state, a, host)
                reserved.append((state, a, host))
                placed.append(Assignment(p, host, state))
            runs.append(("fits",))
            return Status(Code.SUCCESS), placed
        finally:
            for state, a, host in reversed(reserved):
                fwk.run_unreserve(state, a, host)
                sim.cache.forget(a)

    result, st = cs.pod_group_post_filter(pg, f"uid-{name}", infos, feasibility)
    assert sim.cache.dump() == before                    # every what-if move undone
    assert cs._group is None                             # PreFilter reads the live usage again
    return result, st, runs


# -- reclaim for a whole group -----------------------------------------------------------------------

def test_a_gang_within_its_min_reclaims_only_what_another_team_borrows():
    """The e2e's cluster: f (min = max = 6) submits 3 x 2 CPU while g (min 2) holds 4 on 8 CPU.
    The group's 6 CPU keep f within its min: g's borrowed pod goes (g stays at its min), the other
    is not a victim - and the placement run saw the quotas with the victim gone."""
    sim = sim_with([node("n0", cpu="4"), node("n1", cpu="4")],
                   [quota("f", "6", "6"), quota("g", "2", "8")],
                   [running("g0", "g", "2", node_name="n0", start="2026-01-01T00:00:00Z"),
                    running("g1", "g", "2", node_name="n1", start="2026-01-01T00:01:00Z")])
    members = [gang_member(f"m{i}", "f", "job", "2") for i in range(3)]
    result, st, runs = reclaim(sim, "job", "f", members, ["n0", "n1", "n1"])
    assert st == Status(Code.SUCCESS, "pod group preemption: found a placement for podgroup, preempting 1 victims")
    assert isinstance(result, PodGroupPostFilterResult) and result.victims == ("g/g1",)
    assert runs[0] == ("fits",)


def test_a_gang_over_its_min_takes_only_lower_priority_pods_of_its_own_quota():
    """f's group of 3 x 1 CPU beside its 2-CPU pod is over f's min of 4 (its whole request counts, not
    one member's): g's pods are no victims, f's own lower-priority pod is."""
    sim = sim_with([node("n0", cpu="4"), node("n1", cpu="4")],
                   [quota("f", "4", "8"), quota("g", "4", "8")],
                   [running("g0", "g", "2", node_name="n0"), running("g1", "g", "2", node_name="n0"),
                    running("low", "f", "2", node_name="n1", priority=1)])
    members = [gang_member(f"m{i}", "f", "job", "1", priority=100) for i in range(3)]
    result, st, _ = reclaim(sim, "job", "f", members, ["n1", "n1", "n1"])
    assert st.code == Code.SUCCESS and result.victims == ("f/low",)
    # Without a lower-priority pod of its own there is nothing it may take.
    sim = sim_with([node("n0", cpu="4"), node("n1", cpu="4")],
                   [quota("f", "4", "8"), quota("g", "4", "8")],
                   [running("g0", "g", "2", node_name="n0"), running("g1", "g", "2", node_name="n0"),
                    running("f0", "f", "2", node_name="n1", priority=100)])
    result, st, runs = reclaim(sim, "job", "f", members, ["n1", "n1", "n1"])
    assert (result, st, runs) == (None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod group preemption: No "
                                              "preemption victims found for incoming preemptor"), [])


def test_a_victim_is_taken_only_while_its_quota_is_over_its_min_with_it_counted():
    """g holds 6 with a min of 4: only one of its 2-CPU pods may go (then g is at its min), which
    leaves f's 6-CPU group (f's min is 6) no room - the placement run says so and nothing is
    preempted, where taking all of g's pods would have made room."""
    sim = sim_with([node("n0", cpu="8")], [quota("f", "6", "8"), quota("g", "4", "8")],
                   [running(f"g{i}", "g", "2", start=f"2026-01-01T00:0{i}:00Z") for i in range(3)])
    members = [gang_member(f"m{i}", "f", "job", "2") for i in range(3)]
    result, st, runs = reclaim(sim, "job", "f", members, ["n0", "n0", "n0"])
    assert result is None and st.code == Code.UNSCHEDULABLE
    assert runs == [("unschedulable", "m2", "")]         # g's two other pods stayed: no room for m2


def test_a_gang_victim_goes_whole_in_a_reclaim():
    """g borrows with a gang of 2 (minMember 2) beside a plain pod: taking one member would leave the
    gang below its minimum, so both go, and the plain pod is then not needed (its second chance)."""
    sim = sim_with([node("n0", cpu="8")], [quota("f", "4", "8"), quota("g", "2", "8")],
                   [running("solo", "g", "2", start="2026-01-01T00:00:00Z"),
                    running("w0", "g", "2", group="gg", start="2026-01-01T00:01:00Z"),
                    running("w1", "g", "2", group="gg", start="2026-01-01T00:02:00Z")],
                   groups=[podgroup("gg", 2, ns="g")])
    members = [gang_member(f"m{i}", "f", "job", "2") for i in range(2)]
    result, st, _ = reclaim(sim, "job", "f", members, ["n0", "n0"])
    assert st.code == Code.SUCCESS and sorted(result.victims) == ["g/w0", "g/w1"]


def test_a_reclaim_never_takes_a_quota_below_its_min_to_keep_a_gang_whole():
    """g (min 4) runs a 1-CPU pod and a gang of 4 x 1 CPU (minMember 4): 5, one over its min. f (min 2)
    needs 2 x 1 CPU on a 6-CPU node (1 free). GroupReclaim.victims lists only the least important
    unit while g is over its min (a gang member, w3); the gang rule then expands it to the whole gang,
    so g loses 4 CPU and ends at 1, below the min ElasticQuota guarantees it - where evicting the plain
    pod 'solo' alone leaves g at its min and its gang whole."""
    sim = sim_with([node("n0", cpu="6")], [quota("f", "2", "6"), quota("g", "4", "6")],
                   [running("solo", "g", "1", start="2026-01-01T00:00:00Z"),
                    *[running(f"w{i}", "g", "1", group="gg", start=f"2026-01-01T00:0{i + 1}:00Z")
                      for i in range(4)]],
                   groups=[podgroup("gg", 4, ns="g")])
    members = [gang_member(f"m{i}", "f", "job", "1") for i in range(2)]
    result, st, _ = reclaim(sim, "job", "f", members, ["n0", "n0"])
    taken = sorted(result.victims) if result is not None else []
    # g must keep its min of 4 CPU: at most 1 CPU of it may go.
    assert st.code != Code.SUCCESS or len(taken) <= 1, f"g loses {taken}: 5 -> {5 - len(taken)} CPU, min 4"


# -- never a loop between two teams ----------------------------------------------------------------

def two_teams():
    """8 CPU, teams a and b guaranteed 4 each. a runs a 1-CPU pod and a gang of 2 x 2 CPU (5: it
    borrows 1), b a 1-CPU pod; b submits a gang of 2 x 2 CPU. The gang is 1 + 4 = 5 over b's min;
    judged by one member (1 + 2 <= 4) it would reclaim a's gang - whole, since a member alone would
    break it - and a's gang, submitted again, then reclaims b's the same way, forever."""
    sim = sim_with([node("n0", cpu="8")], [quota("a", "4", "8"), quota("b", "4", "8")],
                   [running("a-solo", "a", "1"), running("b-solo", "b", "1"),
                    running("ga-0", "a", "2", group="ga", start="2026-01-01T00:01:00Z"),
                    running("ga-1", "a", "2", group="ga", start="2026-01-01T00:01:00Z")],
                   groups=[podgroup("ga", 2, ns="a"), podgroup("gb", 2, ns="b")])
    evicted: list[str] = []
    attempts: list[str] = []
    cs = capacity(sim)
    names = itertools.count()

    def prepare_candidate_async(candidate, preemptor):
        """The victims go as the API's DELETE would make them go, and come back as new pods."""
        victims = list(candidate.victims)
        evicted.extend(v.key for v in victims)

        def go():
            for v in victims:
                sim.remove_pod(v.uid)
            for v in victims:
                group = v.labels[LABEL]
                sim.add_pod(gang_member(f"{group}-{next(names)}", v.namespace, group, "2"))
        asyncio.get_running_loop().call_soon(go)

    cs.evaluator.prepare_candidate_async = prepare_candidate_async
    group_post_filter = cs.pod_group_post_filter

    def counted(pg, *args):
        attempts.append(pg.key)
        return group_post_filter(pg, *args)

    cs.pod_group_post_filter = counted
    return sim, evicted, attempts


def test_two_teams_never_reclaim_from_each_other_in_a_loop():
    sim, evicted, attempts = two_teams()

    async def body():
        for i in range(2):
            sim.add_pod(gang_member(f"gb-{i}", "b", "gb", "2"))
        await until(lambda: attempts.count("b/gb") >= 2, timeout=30)
        assert evicted == []                     # b's gang waits for room of its own
        assert not FlakyBinder.bound
    run_live(sim, body)


def test_judged_by_one_members_request_the_two_teams_reclaim_forever(monkeypatch):
    """The loop the rules prevent: with the group's request read as one member's, and a victim gang
    taken whole even when that leaves its quota below its min, each gang takes the other's, again and
    again (the test stops it after three rounds each). Either rule alone stops it: the whole request
    keeps b from reclaiming at all; the min guarantee keeps a's gang (a would fall to 1 of its 4)."""
    monkeypatch.setattr(group_reclaim, "group_request",
                        lambda members: max((group_reclaim.countable_requests(p.requests) for p in members),
                                            key=lambda r: r.get("cpu", 0)))
    monkeypatch.setattr(group_reclaim, "below_min", lambda used, minimum: False)
    sim, evicted, _ = two_teams()

    async def body():
        for i in range(2):
            sim.add_pod(gang_member(f"gb-{i}", "b", "gb", "2"))
        await until(lambda: len(evicted) >= 12, timeout=30)
    run_live(sim, body)
    teams = [key.split("/")[0] for key in evicted[:12]]
    assert teams == ["a", "a", "b", "b"] * 3, evicted


# -- RunPodGroupPostFilterPlugins ------------------------------------------------------------------

class Stub(PostFilterPlugin):
    """A PodGroupPostFilter plugin answering as the test says, noting each call."""
    answers: dict[str, Status] = {}
    calls: list[str] = []

    def post_filter(self, state, pod, diagnosis):
        return None, Status(Code.UNSCHEDULABLE)

    def pod_group_post_filter(self, pg, pg_uid, members, feasibility):
        Stub.calls.append(self.name)
        return PodGroupPostFilterResult(), Stub.answers[self.name]


class StubA(Stub):
    name = "StubA"


class StubB(Stub):
    name = "StubB"


def group_post_filter_outcome(answers):
    """A minMember-2 group of 3-CPU pods on a 4-CPU node with ``postFilter: [StubA, StubB]``: which
    stubs ran, and the members' error."""
    Stub.answers, Stub.calls = answers, []
    registry = default_registry()
    registry["StubA"], registry["StubB"] = StubA, StubB
    plugins = {"queueSort": QUOTA_GANGS["queueSort"], "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
               "postFilter": {"enabled": [{"name": "StubA"}, {"name": "StubB"}], "disabled": [{"name": "*"}]}}
    sim = sim_with([node("n0", cpu="4")], [], groups=[podgroup("g", 2)], plugins=plugins, registry=registry)
    sim.add_object(podgroup("g", 2))
    out = {}

    async def body():
        for i in range(2):
            sim.add_pod(gang_member(f"m{i}", "default", "g", "3"))
        await until(lambda: Stub.calls and all(sim.scheduler.last_results.get(q.pod.uid, {}).get("error")
                                               for q in sim.queue.pending()) and len(sim.queue.pending()) == 2)
        out.update({q.pod.name: sim.scheduler.last_results[q.pod.uid]["error"] for q in sim.queue.pending()})
    run_live(sim, body)
    first = Stub.calls[:2] if Stub.calls[1:2] == ["StubB"] else Stub.calls[:1]   # the first attempt's
    return first, out["m0"]


def test_the_group_cycle_runs_the_pod_group_post_filter_plugins_in_order():
    unsched, uau = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    calls, err = group_post_filter_outcome({"StubA": Status(unsched, "a says no"), "StubB": Status(unsched, "b too")})
    assert calls == ["StubA", "StubB"] and err.endswith("a says no, b too"), err
    calls, err = group_post_filter_outcome({"StubA": Status(uau, "a stops it"), "StubB": Status(unsched, "b")})
    assert calls == ["StubA"] and err.endswith(", a stops it"), err
    calls, err = group_post_filter_outcome({"StubA": Status(Code.SUCCESS, "a preempts"), "StubB": Status(uau, "b")})
    assert calls == ["StubA"] and err.endswith(", a preempts"), err
    calls, err = group_post_filter_outcome({"StubA": Status(unsched, "a says no"), "StubB": Status(Code.ERROR, "boom")})
    assert calls == ["StubA", "StubB"] and err == 'error in "StubB" PodGroupPostFilter plugins: boom', err
