"""A failed bind never drops a pod that is still pending; the safety net finds pods held nowhere.

The binding cycles run for real (the live scheduling loop over the offline engine); the binder is a
plugin that fails the way kube-apiserver does (409 with an etcd ``Unavailable`` message, 404,
timeouts), so these tests pin the decision logic. The API-facing half - the GET that settles what
the informer does not know yet, a real etcd outage - is in ``tests/e2e/test_bind_faults.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from pysched.apis import config as configmod
from pysched.framework import BindPlugin, Code, PreBindPlugin, Status
from pysched.framework.api import ApiError
from pysched.metrics import METRICS
from pysched.podlocation import BOUND, GONE, UNKNOWN, locate
from pysched.podrecovery import ASSUMED_UNBOUND, NOT_QUEUED, ORPHANED_IN_FLIGHT, PodRecovery
from pysched.profile import default_registry
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod
from .livekit import run_live, until

ETCD_DOWN = ApiError(409, "Conflict", 'Operation cannot be fulfilled on pods/binding "p": rpc error: '
                                      "code = Unavailable desc = error reading from server: EOF")


class ScriptedBinder(BindPlugin):
    """Answers each pod's binds from a script (one entry per attempt; past its end: success)."""
    name = "ScriptedBinder"
    script: dict[str, list] = {}
    attempts: dict[str, list[str]] = {}
    bound: dict[str, str] = {}
    before_answer = None   # called with (pod, node) before a scripted failure is returned

    async def bind(self, state, pod, node_name):
        tries = ScriptedBinder.attempts.setdefault(pod.name, [])
        tries.append(node_name)
        steps = ScriptedBinder.script.get(pod.name, [])
        if len(tries) <= len(steps):
            err = steps[len(tries) - 1]
            if ScriptedBinder.before_answer is not None:
                ScriptedBinder.before_answer(pod, node_name)
            return Status(Code.ERROR, str(err), error=err)
        ScriptedBinder.bound[pod.name] = node_name
        return None


class FailingPreBind(PreBindPlugin):
    name = "FailingPreBind"
    failures = 0

    async def pre_bind(self, state, pod, node_name):
        if FailingPreBind.failures:
            FailingPreBind.failures -= 1
            err = ApiError(409, "Conflict", "the object has been modified; please apply your changes")
            return Status(Code.ERROR, str(err), error=err)
        return None


def sim_with_binder(**script):
    ScriptedBinder.script = dict(script)
    ScriptedBinder.attempts, ScriptedBinder.bound, ScriptedBinder.before_answer = {}, {}, None
    FailingPreBind.failures = 0
    registry = default_registry()
    registry["ScriptedBinder"] = ScriptedBinder
    registry["FailingPreBind"] = FailingPreBind
    cfg = configmod.parse({
        "apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
        "profiles": [{"schedulerName": "pysched", "plugins": {
            "preBind": {"enabled": [{"name": "FailingPreBind"}]},
            "bind": {"enabled": [{"name": "ScriptedBinder"}], "disabled": [{"name": "*"}]}}}]})
    sim = OfflineScheduler(cfg, registry=registry)
    sim.queue.initial_backoff = sim.queue.max_backoff = 0.05   # error backoff, shortened for the test
    for n in ("a", "b"):
        sim.add_node(node(n))
    return sim


@pytest.mark.parametrize("error", [
    ETCD_DOWN,
    ApiError(404, "NotFound", 'pods "p" not found'),
    ApiError(500, "InternalError", "etcdserver: request timed out"),
    ApiError(0, "", "connection reset by peer"),
], ids=["409-etcd-unavailable", "404", "500", "connection"])
def test_a_bind_error_requeues_a_pod_the_informer_still_shows_pending(error):
    """Whatever the answer's code, a pod still pending is retried until it binds."""
    sim = sim_with_binder(p=[error])
    before = METRICS.bind_conflicts.labels("pysched", "still_pending").value

    async def body():
        sim.add_pod(pod("p"))
        await until(lambda: "p" in ScriptedBinder.bound)
        assert len(ScriptedBinder.attempts["p"]) == 2
        assert sim.cache.is_assumed(next(iter(sim.cache.assumed)))   # bound: counted until the informer confirms
    run_live(sim, body)
    conflicts = METRICS.bind_conflicts.labels("pysched", "still_pending").value - before
    assert conflicts == (1 if error.status in (404, 409) else 0)


def test_a_prebind_write_conflict_requeues_the_pod():
    sim = sim_with_binder()
    FailingPreBind.failures = 1

    async def body():
        sim.add_pod(pod("p"))
        await until(lambda: "p" in ScriptedBinder.bound)
        assert len(ScriptedBinder.attempts["p"]) == 1   # the failed attempt never reached Bind
        assert FailingPreBind.failures == 0
    run_live(sim, body)


def test_a_409_for_a_pod_the_informer_shows_bound_elsewhere_is_not_retried():
    """Another binder won: the informer's copy says where the pod is; nothing is retried and no
    capacity stays reserved on the node we picked."""
    sim = sim_with_binder(p=[ApiError(409, "Conflict", 'pod p is already assigned to node "x"')])
    p = pod("p")
    before = METRICS.bind_conflicts.labels("pysched", "already_bound").value

    def informer_sees_it_bound(info, chosen):
        other = "b" if chosen == "a" else "a"
        sim.add_pod(dict(p, spec=dict(p["spec"], nodeName=other)))

    async def body():
        ScriptedBinder.before_answer = informer_sees_it_bound
        sim.add_pod(p)
        await until(lambda: "p" in ScriptedBinder.attempts and p["metadata"]["uid"] not in sim.queue)
        await asyncio.sleep(0.2)   # several backoffs long: a retry would show as a second attempt
        assert len(ScriptedBinder.attempts["p"]) == 1
        chosen = ScriptedBinder.attempts["p"][0]
        assert not sim.cache.assumed
        assert sim.cache.pods[p["metadata"]["uid"]].node_name != chosen
        assert p["metadata"]["uid"] not in sim.cache.nodes[chosen].pods
    run_live(sim, body)
    assert METRICS.bind_conflicts.labels("pysched", "already_bound").value == before + 1


def test_a_pod_deleted_while_its_bind_failed_is_dropped():
    sim = sim_with_binder(p=[ApiError(404, "NotFound", 'pods "p" not found')])
    p = pod("p")

    async def body():
        ScriptedBinder.before_answer = lambda info, chosen: sim.remove_pod(info.uid)
        sim.add_pod(p)
        await until(lambda: "p" in ScriptedBinder.attempts and not sim.scheduler.binding_tasks)
        await asyncio.sleep(0.2)
        assert len(ScriptedBinder.attempts["p"]) == 1
        assert not sim.cache.assumed and p["metadata"]["uid"] not in sim.queue
    run_live(sim, body)


def test_locate_trusts_the_informer_and_never_guesses_without_an_api():
    sim = sim_with_binder()
    p = pod("p")
    sim.add_pod(p)
    info = sim.queue.get(p["metadata"]["uid"]).pod

    async def where():
        return await locate(info, cache=sim.cache, queue=sim.queue, client=None)

    assert asyncio.run(where()).state == UNKNOWN                    # pending per the informer: ask the API
    assumed = sim.cache.assume(info, "a")
    assert asyncio.run(where()).state == UNKNOWN                    # our own assumption proves nothing
    sim.cache.forget(assumed)
    sim.add_pod(dict(p, spec=dict(p["spec"], nodeName="b")))
    got = asyncio.run(where())
    assert (got.state, got.node, got.source) == (BOUND, "b", "informer")
    sim.remove_pod(info.uid)
    assert asyncio.run(where()).state == GONE


# -- the safety net -------------------------------------------------------------------------------

def recovery_for(sim, client=None):
    return PodRecovery(pending=sim.handlers.pending, cache=sim.cache, queue=sim.queue,
                       working=sim.scheduler.working, client=client, interval=3600)


def counted(reason):
    return METRICS.pods_recovered.labels(reason).value


def test_a_pod_dropped_from_the_queue_is_put_back_after_two_checks():
    sim = sim_with_binder()
    p = pod("p")
    sim.add_pod(p)
    uid = p["metadata"]["uid"]
    sim.queue.delete(uid)          # what the old 409 path did: the pod is held nowhere now
    net = recovery_for(sim)
    before = counted(NOT_QUEUED)
    assert asyncio.run(net.check()) == 0 and uid not in sim.queue   # one sighting is not enough
    assert asyncio.run(net.check()) == 1
    assert sim.queue.get(uid).where == "active"
    assert counted(NOT_QUEUED) == before + 1
    assert asyncio.run(net.check()) == 0 and asyncio.run(net.check()) == 0   # queued now: left alone


def test_queued_waiting_and_bound_pods_are_left_alone():
    sim = sim_with_binder()
    waiting, bound, gated = pod("waiting"), pod("bound"), pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    for p in (waiting, bound, gated):
        sim.add_pod(p)
    sim.add_pod(dict(bound, spec=dict(bound["spec"], nodeName="a")))
    net = recovery_for(sim)
    before = sum(counted(r) for r in (NOT_QUEUED, ORPHANED_IN_FLIGHT, ASSUMED_UNBOUND))
    for _ in range(3):
        assert asyncio.run(net.check()) == 0
    assert set(sim.handlers.pending) == {waiting["metadata"]["uid"], gated["metadata"]["uid"]}
    assert sum(counted(r) for r in (NOT_QUEUED, ORPHANED_IN_FLIGHT, ASSUMED_UNBOUND)) == before


def test_a_pod_in_flight_with_no_cycle_is_put_back_but_a_binding_one_is_not():
    sim = sim_with_binder()
    p = pod("p")
    sim.add_pod(p)
    uid = p["metadata"]["uid"]
    qpi = sim.queue.pop_nowait()
    assert qpi.pod.uid == uid and qpi.where == "inflight"
    net = recovery_for(sim)
    sim.scheduler.binding_pods[uid] = object()   # a binding cycle holds it
    assert asyncio.run(net.check()) == 0 and asyncio.run(net.check()) == 0
    del sim.scheduler.binding_pods[uid]          # ... and ended without settling it
    before = counted(ORPHANED_IN_FLIGHT)
    asyncio.run(net.check())
    assert asyncio.run(net.check()) == 1
    assert qpi.where == "active" and counted(ORPHANED_IN_FLIGHT) == before + 1


def test_an_assumed_pod_is_only_forgotten_when_the_api_says_it_is_pending():
    """Assumed, no bind under way, the informer shows it pending: the watch may lag behind a bind
    that took effect, so without an answer from the API server nothing is touched (the answers
themselves: ``tests/e2e/test_bind_faults.py``)."""
    sim = sim_with_binder()
    p = pod("p")
    sim.add_pod(p)
    uid = p["metadata"]["uid"]
    qpi = sim.queue.pop_nowait()
    sim.cache.assume(qpi.pod, "a")
    sim.queue.done(uid)            # the binding cycle finished (as a success) ...
    net = recovery_for(sim)        # ... but no client to ask
    for _ in range(3):
        assert asyncio.run(net.check()) == 0
    assert sim.cache.is_assumed(uid)



def test_a_prebind_error_names_its_plugin_as_run_pre_bind_plugins_does():
    """kube-scheduler wraps a PreBind plugin's error ('running PreBind plugin "X": ...'): that is
    the pod's FailedScheduling message; the API error stays attached for the conflict handling."""
    from pysched.framework import CycleState, PodInfo

    sim = sim_with_binder()
    FailingPreBind.failures = 1
    fw = sim.frameworks["pysched"]
    st = asyncio.run(fw.run_pre_bind(CycleState(), PodInfo.from_dict(pod("p")), "a"))
    assert st.code == Code.ERROR and st.plugin == "FailingPreBind"
    assert st.message() == ('running PreBind plugin "FailingPreBind": 409 Conflict: the object has been modified; '
                            "please apply your changes")
    assert isinstance(st.error, ApiError) and st.error.status == 409
