"""Coscheduling (gang scheduling): Permit quorum, all-or-nothing release, PreFilter checks, the
queue order, the preemption gate, bind failures reaching the group, and simulate's verdicts.

Offline tests run the production cycle (``OfflineScheduler`` runs Permit); the live-loop tests run
the real ``Scheduler`` binding cycles with a test Bind plugin in place of the API."""

from __future__ import annotations

import asyncio

import pytest

from pysched.apis import config as configmod
from pysched.apis.config import ConfigError
from pysched.backend.queue.scheduling_queue import QueuedPodInfo
from pysched.framework import BindPlugin, Code, PreBindPlugin, Status
from pysched.framework.podinfo import PodInfo
from pysched.metrics import METRICS
from pysched.profile import default_registry
from pysched.tools.offline import OfflineScheduler
from pysched.tools.simulate import Simulation
from pysched.tools.snapshot import Snapshot

from .conftest import node, pod
from .livekit import run_live, until

LABEL = "scheduling.x-k8s.io/pod-group"
GPU = "nvidia.com/gpu"
GANG = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}}


def podgroup(name, min_member, *, timeout=None, min_resources=None, ns="default", created="2026-01-01T00:00:00Z"):
    spec = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources:
        spec["minResources"] = min_resources
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created, "resourceVersion": "1"},
            "spec": spec}


def member(name, group, gpus=1, **kw):
    return pod(name, labels={LABEL: group}, extended={GPU: str(gpus)}, **kw)


def config(plugins=None, args=None):
    prof = {"schedulerName": "pysched", "plugins": plugins or GANG}
    if args is not None:
        prof["pluginConfig"] = [{"name": "Coscheduling", "args": args}]
    return configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [prof]})


def gang_sim(gpu_nodes, groups=(), args=None, registry=None, plugins=None):
    sim = OfflineScheduler(config(plugins, args), registry=registry)
    for g in groups:
        assert sim.add_object(g)
    for i in range(gpu_nodes):
        sim.add_node(node(f"n{i}", extended={GPU: "1"}))
    return sim


def plugin(sim):
    return sim.frameworks["pysched"].plugins["Coscheduling"]


def assumed_or_bound(sim):
    return sorted(p.name for p in sim.cache.pods.values())


# -- configuration ---------------------------------------------------------------------------

def test_opt_in_and_replaces_priority_sort():
    assert "Coscheduling" not in OfflineScheduler().frameworks["pysched"].plugins
    fwk = gang_sim(0).frameworks["pysched"]
    assert [p.name for p in fwk.queue_sort] == ["Coscheduling"]
    assert {"Coscheduling"} <= {p.name for p in fwk.permit} & {p.name for p in fwk.reserve}
    # multiPoint alone keeps PrioritySort too: two queue sorts, as upstream refuses
    with pytest.raises(ConfigError, match="only one queue sort"):
        OfflineScheduler(config({"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}))


def test_args_defaults_and_validation():
    a = plugin(gang_sim(0)).args
    assert (a.permit_waiting_time_seconds, a.pod_group_backoff_seconds, a.pod_group_reject_percentage) == (60, 0, 10)
    with pytest.raises(ConfigError, match="podGroupRejectPercentage"):
        gang_sim(0, args={"podGroupRejectPercentage": 101})
    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds"):
        gang_sim(0, args={"permitWaitingTimeSeconds": -1})
    with pytest.raises(ConfigError, match="kind"):
        gang_sim(0, args={"kind": "Other"})
    assert plugin(gang_sim(0, args={"kind": "CoschedulingArgs", "podGroupBackoffSeconds": 5})).args \
        .pod_group_backoff_seconds == 5
    # As upstream, a wait beyond 15 minutes is accepted and the framework caps it.
    assert plugin(gang_sim(0, args={"permitWaitingTimeSeconds": 3600})).args.permit_waiting_time_seconds == 3600


# -- Permit quorum, all or nothing -----------------------------------------------------------

def test_permit_waits_for_quorum_then_allows_every_member():
    sim = gang_sim(3, [podgroup("g", 3)])
    pods = [member(f"m{i}", "g") for i in range(3)]
    for p in pods:
        sim.observe_pending(p)
    before = METRICS.podgroups_admitted.labels("pysched").value
    outs = [sim.schedule(p) for p in pods]
    assert [o.code for o in outs] == ["Waiting", "Waiting", "Scheduled"]
    assert "waiting for 2 more member(s) of PodGroup default/g" in outs[0].message
    assert {v[0] for v in sim.settled.values()} == {outs[0].node, outs[1].node}
    assert not sim.waiting and not sim.frameworks["pysched"].handle.waiting_pods
    assert assumed_or_bound(sim) == ["m0", "m1", "m2"]
    assert METRICS.podgroups_admitted.labels("pysched").value == before + 1


def test_no_partial_group_when_a_member_cannot_fit():
    sim = gang_sim(2, [podgroup("g", 3)])
    pods = [member(f"m{i}", "g") for i in range(3)]
    for p in pods:
        sim.observe_pending(p)
    outs = [sim.schedule(p) for p in pods]
    assert [o.code for o in outs] == ["Waiting", "Waiting", "Unschedulable"]
    assert "PodGroup default/g gets rejected due to Pod m2 is unschedulable even after PostFilter" in outs[2].message
    # Rejected waiters read as kube-scheduler words a rejection at Permit: a FitError over one node.
    rejected = "0/1 nodes are available: 1 optimistic rejection in PostFilter."
    assert {v for v in sim.settled.values()} == {(None, rejected)}
    assert assumed_or_bound(sim) == []                      # the GPUs the waiters held are free again
    assert plugin(sim).groups["default/g"].placed() == 0


def test_small_gap_keeps_waiters_by_reject_percentage():
    # 1 missing of 10 = 10 % <= podGroupRejectPercentage (10): the waiters stay (until the timeout)
    sim = gang_sim(9, [podgroup("g", 10)])
    pods = [member(f"m{i}", "g") for i in range(10)]
    for p in pods:
        sim.observe_pending(p)
    outs = [sim.schedule(p) for p in pods]
    assert [o.code for o in outs].count("Waiting") == 9 and outs[9].code == "Unschedulable"
    assert len(sim.waiting) == 9
    sim.expire_waiting()
    assert assumed_or_bound(sim) == [] and not sim.waiting


def test_non_members_skip_and_are_not_held():
    sim = gang_sim(1)
    out = sim.schedule(pod("plain", extended={GPU: "1"}), explain=True)
    assert out.code == "Scheduled"
    assert {"plugin": "Coscheduling", "status": "Skip"} in out.trace["preFilter"]


# -- PreFilter -------------------------------------------------------------------------------

def test_prefilter_rejections_with_upstream_messages():
    sim = gang_sim(4, [podgroup("g", 3), podgroup("big", 2, min_resources={GPU: "8"})])
    out = sim.schedule(member("orphan", "missing"), explain=True)
    # As upstream: PreFilter lets it through, Permit rejects it on the node chosen.
    assert out.code == "Unschedulable" and out.message == "0/1 nodes are available: 1 PodGroup not found."
    assert [e["status"] for e in out.trace["preFilter"] if e["plugin"] == "Coscheduling"] == ["passed"]
    assert assumed_or_bound(sim) == []
    sim.observe_pending(member("a0", "g"))
    out = sim.schedule(member("a1", "g"))
    assert ("pre-filter pod a1 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"
            in out.message)
    for name in ("b0", "b1"):
        sim.observe_pending(member(name, "big"))
    out = sim.schedule(member("b0", "big"))
    assert out.message.startswith("0/4 nodes are available: resource gap: map[nvidia.com/gpu:4]. "), out.message
    assert assumed_or_bound(sim) == []


def test_gated_siblings_do_not_count():
    sim = gang_sim(3, [podgroup("g", 2)])
    m0 = member("m0", "g")
    sim.observe_pending(m0)
    sim.observe_pending(member("m1", "g", gates=["wait"]))
    assert ("0/3 nodes are available: pre-filter pod m0 cannot proceed due to gated pods in the same PodGroup."
            in sim.schedule(m0).message)
    sim.observe_pending(member("m1", "g"))                     # the gate removed: the group may proceed
    plugin(sim).groups["default/g"].backoff_until = 0.0        # (its backoff from the failure above over)
    assert sim.schedule(m0).code == "Waiting"


def test_backoff_after_group_rejection():
    sim = gang_sim(1, [podgroup("g", 2)], args={"podGroupBackoffSeconds": 30})
    pods = [member(f"m{i}", "g") for i in range(2)]
    for p in pods:
        sim.observe_pending(p)
    assert [sim.schedule(p).code for p in pods] == ["Waiting", "Unschedulable"]
    assert "podGroup default/g failed recently" in sim.schedule(pods[0]).message



def test_group_backs_off_by_default_doubling_to_ten_seconds():
    """podGroupBackoffSeconds 0 does not mean "retry at once": a group that cannot complete would
    grab and release its partial capacity in a tight loop. It backs off 1, 2, 4, 8, 10, 10 s."""
    sim = gang_sim(1, [podgroup("g", 2)])
    pl = plugin(sim)
    now = [1000.0]
    pl.clock = lambda: now[0]
    pods = [member(f"m{i}", "g") for i in range(2)]
    for p in pods:
        sim.observe_pending(p)
    waits = []
    for _ in range(6):
        assert [sim.schedule(p).code for p in pods] == ["Waiting", "Unschedulable"]
        until = pl.groups["default/g"].backoff_until
        out = sim.schedule(pods[0])                  # rejected while it backs off...
        assert "podGroup default/g failed recently" in out.message
        assert pl.groups["default/g"].backoff_until == until   # ... which does not extend it
        waits.append(until - now[0])
        now[0] += waits[-1]                      # the backoff has passed: the next attempt runs
    assert waits == [1, 2, 4, 8, 10, 10]
    assert assumed_or_bound(sim) == []          # nothing held between attempts


def test_scheduler_plugins_backoff_rules_one_setting_away():
    """schedulerPluginsCompatible: podGroupBackoffSeconds 0 means no group backoff; with one set,
    only a group PostFilter rejected that has all its pods backs off, and a rejection while it
    does never extends it. A group still missing pods never backs off, in either mode."""
    compatible = {"schedulerPluginsCompatible": True}
    sim = gang_sim(1, [podgroup("g", 2)], args=compatible)
    pods = [member(f"m{i}", "g") for i in range(2)]
    for p in pods:
        sim.observe_pending(p)
    assert [sim.schedule(p).code for p in pods] == ["Waiting", "Unschedulable"]
    assert plugin(sim).groups["default/g"].backoff_until == 0.0
    assert sim.schedule(pods[0]).code == "Waiting"                 # tried again at once

    for args in ({"podGroupBackoffSeconds": 30, **compatible}, {"podGroupBackoffSeconds": 30}):
        sim = gang_sim(1, [podgroup("g", 3)], args=args)
        pl = plugin(sim)
        now = [1000.0]
        pl.clock = lambda now=now: now[0]
        pods = [member(f"m{i}", "g") for i in range(2)]                # 2 of minMember 3
        for p in pods:
            sim.observe_pending(p)
        out = sim.schedule(pods[0])
        assert "cannot find enough sibling pods" in out.message
        assert "PodGroup default/g gets rejected due to Pod m0 is unschedulable even after PostFilter" in out.message
        assert pl.groups["default/g"].backoff_until == 0.0              # missing pods: no backoff
        third = member("m2", "g")
        sim.observe_pending(third)
        assert [sim.schedule(p).code for p in (*pods, third)] == ["Waiting", "Unschedulable", "Unschedulable"]
        until = pl.groups["default/g"].backoff_until
        assert until == now[0] + 30
        now[0] += 10
        assert "podGroup default/g failed recently" in sim.schedule(pods[0]).message
        assert pl.groups["default/g"].backoff_until == until            # not extended
        assert assumed_or_bound(sim) == []


def test_scheduler_plugins_queue_ties_break_on_the_pod_name():
    created = "2026-01-01T00:00:00Z"
    groups = {"p1": "ga", "p3": "ga", "p2": "gb", "p4": "gb"}    # two groups created in the same second
    for args, order in (({}, ["p1", "p3", "p2", "p4"]),                            # a group at a time
                        ({"schedulerPluginsCompatible": True}, ["p1", "p2", "p3", "p4"])):   # interleaved
        sim = gang_sim(0, [podgroup("ga", 2, created=created), podgroup("gb", 2, created=created)], args=args)
        qpis = [QueuedPodInfo(PodInfo.from_dict(member(n, g)), 0.0) for n, g in groups.items()]
        assert [q.pod.name for q in sorted(qpis, key=plugin(sim).sort_key)] == order


def test_a_sibling_assumed_on_a_deleted_node_releases_the_group_at_permit():
    """m0 waits at Permit on a node that is then deleted; when the last member arrives the group
    must not count m0's reservation (it can never bind): the group is released, nobody binds."""
    sim = gang_sim(2, [podgroup("g", 2, timeout=60)])
    m0, m1 = member("m0", "g"), member("m1", "g")
    for p in (m0, m1):
        sim.observe_pending(p)
    assert sim.schedule(m0).code == "Waiting"
    doomed = next(p.node_name for p in sim.cache.pods.values() if p.name == "m0")
    sim.remove_node(doomed)
    out = sim.schedule(m1)
    assert out.code == "Unschedulable" and f"node {doomed}, which was deleted" in out.message
    assert assumed_or_bound(sim) == []


# -- queue order -----------------------------------------------------------------------------

def test_queue_sort_keeps_group_members_together():
    sim = gang_sim(0, [podgroup("old", 2, created="2026-01-01T00:00:00Z"),
                       podgroup("new", 2, created="2026-01-02T00:00:00Z")])
    for name, g in (("n0", "new"), ("o0", "old"), ("n1", "new"), ("o1", "old")):
        sim.add_pod(member(name, g))
    sim.add_pod(pod("high", priority=10))
    order = []
    while (qpi := sim.queue.pop_nowait()) is not None:
        order.append(qpi.pod.name)
    assert order == ["high", "o0", "o1", "n0", "n1"]


def test_a_group_leaves_the_queue_largest_member_first():
    """A 3-CPU driver whose name sorts last goes before its 1-CPU workers (first-fit decreasing);
    scheduler-plugins' order (the pod's name) is one setting away."""
    for args, order in (({}, ["z-driver", "a-w0", "a-w1", "a-w2"]),
                        ({"schedulerPluginsCompatible": True}, ["a-w0", "a-w1", "a-w2", "z-driver"])):
        sim = gang_sim(0, [podgroup("g", 4)], args=args)
        pods = [pod(f"a-w{i}", labels={LABEL: "g"}, cpu="1") for i in range(3)]
        pods.append(pod("z-driver", labels={LABEL: "g"}, cpu="3"))
        qpis = [QueuedPodInfo(PodInfo.from_dict(p), 0.0) for p in pods]
        assert [q.pod.name for q in sorted(qpis, key=plugin(sim).sort_key)] == order


def test_a_gang_with_one_large_member_is_placed_whole():
    """Two 3-CPU nodes, one 3-CPU driver and three 1-CPU workers: only the driver alone on a node
    fits. Workers first spread over both nodes and leave the driver nowhere, on every retry."""
    registry = default_registry()
    registry["FlakyBinder"] = FlakyBinder
    plugins = {"queueSort": GANG["queueSort"], "multiPoint": GANG["multiPoint"],
               "bind": {"enabled": [{"name": "FlakyBinder"}], "disabled": [{"name": "*"}]}}
    FlakyBinder.fail, FlakyBinder.bound = set(), {}
    sim = OfflineScheduler(config(plugins), registry=registry)
    assert sim.add_object(podgroup("g", 4, timeout=2))
    for i in range(2):
        sim.add_node(node(f"n{i}", cpu="3", memory="16Gi"))

    async def body():
        for i in range(3):
            sim.add_pod(pod(f"a-w{i}", labels={LABEL: "g"}, cpu="1", memory="1Gi"))
        sim.add_pod(pod("z-driver", labels={LABEL: "g"}, cpu="3", memory="1Gi"))
        await until(lambda: len(FlakyBinder.bound) == 4, 15)
        workers = {FlakyBinder.bound[f"a-w{i}"] for i in range(3)}
        assert len(workers) == 1 and FlakyBinder.bound["z-driver"] not in workers
    run_live(sim, body)


# -- preemption gate -------------------------------------------------------------------------

def test_member_preempts_only_to_complete_its_group():
    sim = gang_sim(2, [podgroup("g", 2)])
    for i in range(2):
        sim.add_pod(pod(f"low{i}", extended={GPU: "1"}, node_name=f"n{i}", priority=0))
    pods = [member(f"m{i}", "g", priority=100) for i in range(2)]
    for p in pods:
        sim.observe_pending(p)
    out = sim.schedule(pods[0])
    assert out.code == "Unschedulable" and not out.victims
    assert ("preemption: not eligible: PodGroup default/g has 0 of minMember 2 members assumed or bound"
            in out.message)


@pytest.mark.parametrize("post_filter", [None, ["Coscheduling", "DefaultPreemption"]],
                         ids=["default order", "Coscheduling listed first"])
def test_member_completing_its_group_may_preempt(post_filter):
    """Whatever the order at postFilter, DefaultPreemption asks the gate before Coscheduling's
    PostFilter releases the waiting member: m1 completes its group, so it preempts (issue 50: with
    Coscheduling listed first, m0 was released first and the gate saw 0 of 2)."""
    plugins = None
    if post_filter is not None:
        plugins = {"queueSort": GANG["queueSort"], "multiPoint": GANG["multiPoint"],
                   "postFilter": {"enabled": [{"name": n} for n in post_filter], "disabled": [{"name": "*"}]}}
    sim = gang_sim(2, [podgroup("g", 2)], plugins=plugins)
    sim.add_pod(pod("low", extended={GPU: "1"}, node_name="n1", priority=0))
    pods = [member(f"m{i}", "g", priority=100) for i in range(2)]
    for p in pods:
        sim.observe_pending(p)
    assert sim.schedule(pods[0]).code == "Waiting"
    out = sim.schedule(pods[1])
    assert out.nominated_node == "n1" and out.victims == ("default/low",), out.message
    assert [p.name for p in sim.frameworks["pysched"].post_filter][-2:] == ["DefaultPreemption", "Coscheduling"]


# -- live binding cycles: timeout, bind failure ----------------------------------------------

class FlakyBinder(BindPlugin):
    name = "FlakyBinder"
    fail: set[str] = set()
    bound: dict[str, str] = {}

    async def bind(self, state, pod, node_name):
        if pod.name in self.fail:
            return Status(Code.ERROR, f"bind of {pod.name} failed")
        FlakyBinder.bound[pod.name] = node_name
        return None


class SlowPreBind(PreBindPlugin):
    """Holds every member but the failing one a moment, so the failure happens first."""
    name = "SlowPreBind"

    quick: set[str] = set()

    async def pre_bind(self, state, pod, node_name):
        if pod.name not in FlakyBinder.fail:
            await asyncio.sleep(0.3 if pod.name in self.quick else 0.6)
        return None


def live_sim(gpus, groups, args=None):
    registry = default_registry()
    registry["FlakyBinder"] = FlakyBinder
    registry["SlowPreBind"] = SlowPreBind
    plugins = {"queueSort": GANG["queueSort"],
               "multiPoint": {"enabled": [{"name": "SlowPreBind"}, {"name": "Coscheduling"}]},
               "bind": {"enabled": [{"name": "FlakyBinder"}], "disabled": [{"name": "*"}]}}
    FlakyBinder.fail, FlakyBinder.bound, SlowPreBind.quick = set(), {}, set()
    return gang_sim(gpus, groups, args=args, registry=registry, plugins=plugins)


def test_timeout_releases_every_waiting_member_together():
    # PostFilter never rejects (100 %): only the group's deadline can end the wait
    # (members wait at Permit only when scheduled one by one, as scheduler-plugins does)
    sim = live_sim(2, [podgroup("g", 3, timeout=1)], args={"podGroupRejectPercentage": 100,
                                                          "schedulerPluginsCompatible": True})
    before = METRICS.podgroups_timed_out.labels("pysched").value
    waits = METRICS.permit_wait_duration.labels("Unschedulable")
    waits_before = sum(waits.counts)

    async def body():
        sim.add_pod(member("m0", "g"))
        sim.add_pod(member("m1", "g"))
        sim.add_pod(member("m2", "g", node_selector={"zone": "nowhere"}))   # never fits
        await until(lambda: len(sim.frameworks["pysched"].handle.waiting_pods) == 2)
        assert METRICS.podgroups_waiting.labels("pysched")._value.get() == 1
        await until(lambda: not sim.frameworks["pysched"].handle.waiting_pods and not sim.cache.assumed, 5)
        assert FlakyBinder.bound == {}
        assert METRICS.podgroups_timed_out.labels("pysched").value >= before + 1
        assert METRICS.podgroups_waiting.labels("pysched")._value.get() == 0
        # As kube-scheduler words them: the first waiter timed out after the wait it was given
        # (Go's duration), its Unreserve rejected the other.
        errors = {p.pod.name: sim.scheduler.last_results[p.pod.uid]["error"] for p in sim.queue.pending()}
        timed_out = "0/1 nodes are available: 1 rejected due to timeout after waiting 1s at plugin Coscheduling."
        assert timed_out in (errors["m0"], errors["m1"])     # the first waiter's wait ran out...
        assert {errors["m0"], errors["m1"]} <= {timed_out, "0/1 nodes are available: 1 rejection in Unreserve."}
        assert sum(waits.counts) == waits_before + 2   # both waits observed
    run_live(sim, body)


def test_members_deleted_while_waiting_at_permit_are_released_at_once_and_their_group_forgotten():
    # Permit would hold them 30 s; PostFilter never rejects (100 %)
    sim = live_sim(2, [podgroup("g", 3, timeout=30)], args={"podGroupRejectPercentage": 100,
                                                           "schedulerPluginsCompatible": True})
    waiting_room = sim.frameworks["pysched"].handle.waiting_pods

    async def body():
        pods = [member("m0", "g"), member("m1", "g"), member("m2", "g", node_selector={"zone": "nowhere"})]
        for p in pods:
            sim.add_pod(p)
        await until(lambda: len(waiting_room) == 2)
        held = dict(waiting_room)
        for p in pods:
            sim.remove_pod(p["metadata"]["uid"])
        # kube-scheduler's RejectWaitingPod: each wait ends on the delete, not at the deadline
        assert all(wp.future is not None and wp.future.done() and wp.future.result().message() == "removed"
                   for wp in held.values())
        await until(lambda: not waiting_room and not sim.cache.assumed and not sim.scheduler.binding_tasks)
        assert "default/g" not in plugin(sim).groups     # nothing of the group outlives its members
        assert FlakyBinder.bound == {}
    run_live(sim, body)


def test_a_member_whose_bind_fails_is_bound_again_until_its_group_is_whole():
    """m2 is the last member: its Permit reaches quorum and its bind fails (a 5xx, a 409 during an
    etcd outage, the rate limiter...) while m0/m1 are in PreBind. The group was admitted: m2 keeps
    its reservation and binds again until it is bound, and m0/m1 bind - never half a group bound
    and the rest released."""
    sim = live_sim(3, [podgroup("g", 3, timeout=30)])
    retries = METRICS.bind_retries.labels("pysched")
    before = retries.value

    async def body():
        FlakyBinder.fail = {"m2"}
        for i in range(3):
            sim.add_pod(member(f"m{i}", "g"))
        await until(lambda: sorted(FlakyBinder.bound) == ["m0", "m1"] and retries.value >= before + 2)
        m2 = [p for p in sim.cache.assumed.values() if p.name == "m2"]
        assert len(m2) == 1, "m2 lost its reservation"
        assert sim.scheduler.binding_pods, "m2's binding cycle ended"
        assert not any("error" in sim.scheduler.last_results.get(p.uid, {}) for p in m2)
        FlakyBinder.fail = set()
        await until(lambda: len(FlakyBinder.bound) == 3, 15)
        assert sorted(FlakyBinder.bound.values()) == ["n0", "n1", "n2"]
        assert FlakyBinder.bound["m2"] == m2[0].node_name      # bound where it was reserved
    run_live(sim, body)


def test_deleted_node_between_permit_and_bind_releases_the_group():
    sim = live_sim(3, [podgroup("g", 2, timeout=30)])

    pl = plugin(sim)
    outcomes = []
    pre_bind = pl.pre_bind

    async def recording(state, pod, node):
        st = await pre_bind(state, pod, node)
        outcomes.append((pod.name, st.message() if st is not None else "ok"))
        return st
    pl.pre_bind = recording

    async def body():
        SlowPreBind.quick = {"m0"}       # m0 leaves PreBind first and finds its node gone
        sim.add_pod(member("m0", "g"))
        sim.add_pod(member("m1", "g"))
        # both allowed, both held in PreBind: delete m0's node meanwhile
        await until(lambda: len(sim.cache.assumed) == 2 and not sim.frameworks["pysched"].handle.waiting_pods)
        doomed = sim.cache.assumed[next(u for u, p in sim.cache.assumed.items() if p.name == "m0")].node_name
        sim.remove_node(doomed)
        # the group is released, and retried at once as a unit on the nodes left
        await until(lambda: len(FlakyBinder.bound) == 2, 15)
        assert doomed not in FlakyBinder.bound.values()
        first_m0, first_m1 = (next(msg for name, msg in outcomes if name == n) for n in ("m0", "m1"))
        assert f"a member was assumed on node {doomed}, which was deleted" in first_m0
        assert "rejected before this member was bound" in first_m1    # m1 did not bind without m0
    run_live(sim, body)


# -- simulate --------------------------------------------------------------------------------

def test_simulate_places_groups_all_or_nothing_and_names_the_blocker():
    snap = Snapshot(nodes=[node(f"n{i}", extended={GPU: "1"}) for i in range(6)],
                    objects=[podgroup("a", 4), podgroup("b", 4)])
    pods = [member(f"a{i}", "a") for i in range(4)] + [member(f"b{i}", "b") for i in range(4)]
    for p in pods:
        del p["metadata"]["uid"]
    res = Simulation(config()).run(snap, pods)
    placed = {p.pod.split("/")[1]: p.node for p in res.placements}
    assert all(placed[f"a{i}"] for i in range(4)) and not any(placed[f"b{i}"] for i in range(4))
    verdicts = {g["group"]: g for g in res.groups}
    assert verdicts["default/a"]["verdict"] == "placed"
    b = verdicts["default/b"]
    assert b["verdict"] == "not placed" and b["blockedBy"] == "default/b2"
    assert "Insufficient nvidia.com/gpu" in b["reason"]
    assert sum(n["requested"][GPU] for n in res.after["nodes"]) == 4       # nothing held by b


def test_podgroups_are_listed_and_watched_only_when_a_profile_reads_them():
    """The base manifests grant no access to PodGroups: a scheduler without Coscheduling must not
    ask for them (a 403 in its log, an informer that cannot list)."""
    from pysched.app import Options, SchedulerApp
    from pysched.client.auth import Credentials
    creds = Credentials(server="https://127.0.0.1:1", insecure=True)   # never contacted

    def kinds(cfg):
        app = SchedulerApp(cfg, Options(serve=False, kopf=False), creds)
        return app.profiles.object_kinds, [r.name for r in app.informers.object_reflectors]

    plain, plain_watches = kinds(configmod.default_config())
    gang, gang_watches = kinds(config())
    assert "podgroups" not in plain and "podgroups" not in plain_watches
    assert "podgroups" in gang and "podgroups" in gang_watches
    assert set(gang) - set(plain) == {"podgroups"}
    # --podgroup-controller=auto (the default) runs the status controller beside Coscheduling only
    assert SchedulerApp(configmod.default_config(), Options(serve=False), creds).controllers.podgroups is None
    assert SchedulerApp(config(), Options(serve=False), creds).controllers.podgroups is not None
    assert SchedulerApp(configmod.default_config(), Options(serve=False, podgroup_controller="on"),
                        creds).controllers.podgroups is not None
