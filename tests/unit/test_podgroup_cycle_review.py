"""The pod-group cycle under faults and in scheduler-plugins' setups (issue 54's review): a crash
strands no member, extenders still judge gang members, a scheduler-plugins gang may mix
priorities, a member whose PodGroup is missing waits (Unschedulable, or held at PreEnqueue) instead
of looping through the error backoff. Each failed before its fix."""

from __future__ import annotations

import asyncio

from .conftest import node
from .livekit import run_live, until
from .test_coscheduling import GPU, FlakyBinder, member, podgroup
from .test_podgroup_cycle import COSCHED, errors, sim_with, workload_group, workload_member


def where(sim, name):
    for q in sim.queue.pending():
        if q.pod.name == name:
            return q.where
    return None


# -- 1. an exception in the group cycle strands every member but the first ------------------------

def test_a_crash_in_the_group_cycle_does_not_strand_the_other_members():
    """run()'s crash handler fails only the popped pod; the members ``take`` pulled out of the
    queue stay IN_FLIGHT forever, so the gang can never be placed again (each later cycle finds
    only the first member: minCount out of reach). Any exception the cycle does not wrap does this:
    a PlacementGenerate/PlacementScore plugin, a PodGroupPostFilter (preemption, quota reclaim),
    PodGroupSource.placement_feasible, _submit's bookkeeping."""
    sim = sim_with()
    sim.add_node(node("n0", cpu="8"))
    sim.add_object(workload_group("g", 3))
    gang = sim.frameworks["pysched"].plugins["GangScheduling"]
    real = gang.placement_feasible
    calls = {"n": 0}

    def flaky(pg, scheduled, remaining):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a plugin bug, once")
        return real(pg, scheduled, remaining)

    gang.placement_feasible = flaky

    async def body():
        for i in range(3):
            sim.add_pod(workload_member(f"m{i}", "g", cpu="1"))
        await until(lambda: calls["n"] >= 1)
        await until(lambda: any(v for v in errors(sim).values()))
        # Correct: after the one-off crash every member is back in the queue (and the gang binds).
        stranded = [q.pod.name for q in sim.queue.pending() if q.where == "inflight"]
        assert not stranded, f"members taken by the crashed cycle and never returned: {stranded}"
        await until(lambda: len(FlakyBinder.bound) == 3, timeout=15)
    run_live(sim, body)


# -- 2. filter extenders are skipped for gang members -------------------------------------------

class _Extender:
    """A filter extender that accepts node 'ok' only."""
    name = "fake"
    filter_verb = "filter"
    prioritize_verb = ""
    preempt_verb = ""
    bind_verb = ""
    ignorable = False
    calls = 0

    def is_interested(self, pod):
        return True

    def is_binder(self):
        return False

    async def filter(self, pod, names, nodes_raw):
        _Extender.calls += 1
        passed = [n for n in names if n == "ok"]
        return passed, {n: "extender says no" for n in names if n != "ok"}, {}


def _extender_case(args):
    _Extender.calls = 0
    sim = sim_with(COSCHED, coscheduling_args=args)
    sim.scheduler.extenders = [_Extender()]
    for name in ("bad", "ok"):
        sim.add_node(node(name, extended={GPU: "2"}))
    sim.add_object(podgroup("g", 2))

    async def body():
        for i in range(2):
            sim.add_pod(member(f"m{i}", "g"))
        await until(lambda: len(FlakyBinder.bound) == 2 or any(errors(sim).values()))
        assert set(FlakyBinder.bound.values()) == {"ok"}, FlakyBinder.bound
        assert _Extender.calls > 0, "the filter extender was never asked"
    run_live(sim, body)


def test_control_member_by_member_the_extender_is_asked():
    _extender_case({"schedulerPluginsCompatible": True})     # passes


def test_gang_members_go_through_the_filter_extenders():
    _extender_case(None)                                      # fails: members land on 'bad'


# -- 3. a scheduler-plugins member whose PodGroup is missing: an Error, retried forever ---------

def test_a_coscheduling_member_without_its_podgroup_is_unschedulable_not_an_error():
    """Before the group cycle (and with schedulerPluginsCompatible) Permit says ``PodGroup not
    found`` (Unschedulable: the pod waits for the PodGroup's Add). In the group cycle
    ``cycle_podgroup`` is None, attempt_group returns an Error naming ``podgroup.scheduling.k8s.io``
    (the wrong API group), and the pod goes to the error backoff and is retried every <=10 s for as
    long as the PodGroup does not exist (a Warning Event each time)."""
    sim = sim_with(COSCHED)
    sim.add_node(node("n0", extended={GPU: "1"}))

    async def body():
        sim.add_pod(member("orphan", "missing"))
        await until(lambda: errors(sim).get("orphan"))
        msg = errors(sim)["orphan"]
        assert "scheduling.k8s.io" not in msg, msg
        q = next(q for q in sim.queue.pending() if q.pod.name == "orphan")
        assert q.consecutive_errors == 0 and q.where == "unschedulable", (q.where, q.consecutive_errors)
    run_live(sim, body)


# -- 4. a PodGroup deleted while its members wait: an Error loop, never gated again ----------------

def test_members_of_a_deleted_podgroup_wait_gated_instead_of_erroring_in_a_loop():
    """GangScheduling's PreEnqueue holds a member until its PodGroup exists, but only when the pod
    enters the queue. Delete the PodGroup of a gang that waits (unschedulable): the next attempt
    finds no PodGroup, every member fails with an Error (podgroup ... not found) into the error
    backoff, comes back, fails again - a Warning Event and a status patch per member every <=10 s
    for as long as the PodGroup is gone. Upstream moves such pods back to its incomplete-group pool
    (gated: AddAttemptedPodGroupIfNeeded / incompletePodGroupPods); nothing is retried until the
    PodGroup comes back."""
    sim = sim_with()
    sim.queue.initial_backoff, sim.queue.max_backoff = 0.01, 0.02   # fast, so the loop shows quickly
    sim.add_node(node("n0", cpu="2"))
    pg = workload_group("g", 2)
    sim.add_object(pg)

    async def body():
        for i in range(2):
            sim.add_pod(workload_member(f"m{i}", "g", cpu="2"))    # 2 x 2 CPU on 2 CPU: never fits
        await until(lambda: len(errors(sim)) == 2 and all(errors(sim).values()))
        sim.objects.apply("workloadpodgroups", "DELETED", pg)
        attempts = {q.pod.name: q.attempts for q in sim.queue.pending()}
        sim.add_node(node("n1", cpu="4"))      # room: they are requeued, and the attempt finds no PodGroup
        await until(lambda: all(q.gated for q in sim.queue.pending()))
        await asyncio.sleep(0.3)
        again = {q.pod.name: q.attempts - attempts[q.pod.name] for q in sim.queue.pending()}
        assert max(again.values()) <= 1, f"attempts since the PodGroup went: {again}"
        assert not any("not found" in (e or "") for e in errors(sim).values()), errors(sim)
        sim.add_object(pg)                     # back: its Add releases them, and they bind on n1
        await until(lambda: len(FlakyBinder.bound) == 2)
    run_live(sim, body)


# -- 5. scheduler-plugins gangs with members of different priorities now never schedule ----------

def test_a_scheduler_plugins_gang_with_mixed_priorities_still_schedules():
    """validate_group applies upstream's workload rule (one priority, one preemption policy) to
    scheduler-plugins' PodGroups too: their members never had to agree (scheduler-plugins sorts them
    by priority), so such a gang that scheduled before 19a92d7 (and with schedulerPluginsCompatible)
    is now a SchedulerError on every attempt, retried in the error backoff forever."""
    sim = sim_with(COSCHED)
    for i in range(2):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
    sim.add_object(podgroup("g", 2))

    async def body():
        sim.add_pod(member("m0", "g", priority=10))
        sim.add_pod(member("m1", "g", priority=20))
        await until(lambda: len(FlakyBinder.bound) == 2 or any(errors(sim).values()))
        assert len(FlakyBinder.bound) == 2, errors(sim)
    run_live(sim, body)
