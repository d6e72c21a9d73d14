"""Scheduling queue: ordering, backoff, unschedulable pool, gating, flushes."""

import pytest

from pysched.backend.queue.scheduling_queue import ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue
from pysched.framework.podinfo import PodInfo

from .conftest import pod


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def mkq(clock, **kw):
    return SchedulingQueue(sort_key=lambda q: (-q.pod.priority, q.timestamp), clock=clock, **kw)


def P(name, **kw):
    return PodInfo.from_dict(pod(name, **kw), keep_raw=True)


def test_priority_then_age():
    clk = Clock()
    q = mkq(clk)
    q.add(P("low", priority=1))
    clk.t += 1
    q.add(P("high", priority=10))
    clk.t += 1
    q.add(P("low2", priority=1))
    order = [q.pop_nowait().pod.name for _ in range(3)]
    assert order == ["high", "low", "low2"]
    assert q.pop_nowait() is None


@pytest.mark.parametrize("n,expected", [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (9, 10), (1100, 10), (10**6, 10)])
def test_backoff_doubles_to_max(n, expected):
    q = mkq(Clock(), initial_backoff=1, max_backoff=10)
    qpi = type("Q", (), {"consecutive_errors": 0, "unschedulable_count": n})()
    assert q.backoff_duration(qpi) == expected


def test_unschedulable_pod_moves_on_event_to_backoff_then_active():
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    q.add(P("a"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == UNSCHEDULABLE
    assert q.pop_nowait() is None
    assert q.move_all("NodeAdd") == 1
    assert qpi.where == BACKOFF          # still inside its 1s backoff
    assert q.pop_nowait() is None
    clk.t += 1.01
    assert q.flush_backoff_completed() == 1
    assert q.pop_nowait() is qpi


def test_event_filter_skips_uninterested_pods():
    q = mkq(Clock())
    q.add(P("a"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"TaintToleration"}
    q.add_unschedulable_if_not_present(qpi)
    assert q.move_all("NodeAdd", lambda x: "NodeResourcesFit" in x.unschedulable_plugins) == 0
    assert qpi.where == UNSCHEDULABLE


def test_error_goes_to_backoff_not_unschedulable():
    clk = Clock()
    q = mkq(clk)
    q.add(P("a"))
    qpi = q.pop_nowait()
    assert q.add_unschedulable_if_not_present(qpi) == BACKOFF
    assert qpi.consecutive_errors == 1
    # error backoff is never cut short by popping from backoffQ
    assert q.pop_nowait() is None
    clk.t += 1.01
    q.flush_backoff_completed()
    assert q.pop_nowait() is qpi


def test_pop_from_backoff_when_active_empty():
    clk = Clock()
    q = mkq(clk)
    q.add(P("a"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable_if_not_present(qpi)
    q.move_all("NodeAdd")
    assert qpi.where == BACKOFF
    assert q.pop_nowait() is qpi  # activeQ empty: take it early


def test_leftover_flush_after_five_minutes():
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    q.add(P("a"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"X"}
    q.add_unschedulable_if_not_present(qpi)
    clk.t += 299
    assert q.flush_unschedulable_leftover() == 0
    clk.t += 2
    assert q.flush_unschedulable_leftover() == 1
    assert qpi.where == ACTIVE
    # scheduler_pod_scheduled_after_flush_total counts the bind of a flushed pod, until it fails again
    assert qpi.was_flushed
    assert q.pop_nowait() is qpi
    q.add_unschedulable_if_not_present(qpi)
    assert not qpi.was_flushed


def test_the_entity_metrics_mirror_the_pod_metrics():
    """kube-scheduler 1.37's queued_entities / queue_incoming_entities_total, type "pod"."""
    from pysched.metrics import METRICS

    def incoming(queue, event):
        return (METRICS.queue_incoming.labels(queue, event).value,
                METRICS.queue_incoming_entities.labels(queue, event, "pod").value)
    q = mkq(Clock())
    before = incoming("active", "PodAdd")
    q.add(P("entity-a"))
    after = incoming("active", "PodAdd")
    assert after[0] - before[0] == after[1] - before[1] == 1
    q.update_metrics()
    assert METRICS.queued_entities.labels("active", "pod")._value.get() == \
        METRICS.pending_pods.labels("active")._value.get() == 1


def test_gated_pod_waits_until_gate_removed():
    from pysched.framework.status import Code, Status
    def gate(p):
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated") if p.gates else None
    q = mkq(Clock(), pre_enqueue=gate)
    raw = pod("g", gates=["example.com/wait"])
    q.add(PodInfo.from_dict(raw, keep_raw=True))
    assert q.pop_nowait() is None
    assert q.counts["gated"] == 1
    assert q.move_all("NodeAdd") == 0  # cluster events do not release gated pods
    del raw["spec"]["schedulingGates"]
    q.update(PodInfo.from_dict(raw, keep_raw=True))
    assert q.counts["gated"] == 0
    assert q.pop_nowait().pod.name == "g"


def test_delete_removes_from_every_structure():
    q = mkq(Clock())
    a, b = P("a"), P("b")
    q.add(a)
    q.add(b)
    q.delete(a.uid)
    assert q.pop_nowait().pod.name == "b"
    assert q.pop_nowait() is None
    assert len(q) == 1  # b is in flight
    q.done(b.uid)
    assert len(q) == 0


def test_pending_pod_update_requeues_unschedulable():
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    raw = pod("a", cpu="64")
    q.add(PodInfo.from_dict(raw, keep_raw=True))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable_if_not_present(qpi)
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    q.update(PodInfo.from_dict(raw, keep_raw=True))
    assert qpi.where in (ACTIVE, BACKOFF)


async def test_pop_waits_for_add():
    import asyncio
    q = mkq(Clock())
    task = asyncio.create_task(q.pop())
    await asyncio.sleep(0.01)
    assert not task.done()
    q.add(P("a"))
    got = await asyncio.wait_for(task, 1)
    assert got.pod.name == "a"


def _failed(q, name="a", **kw):
    q.add(P(name, **kw))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == UNSCHEDULABLE
    return qpi


def test_force_activate_moves_an_unschedulable_pod_to_active_at_once():
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    qpi = _failed(q)
    assert qpi.backoff_expiry > clk.t       # inside its backoff: an event would send it to backoffQ
    assert q.force_activate(qpi.pod.uid) == ACTIVE
    assert q.pop_nowait() is qpi
    assert q.force_activate("no-such-uid") == ""


def test_force_activate_cuts_backoff_short():
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    qpi = _failed(q)
    q.move_all("NodeAdd")
    assert qpi.where == BACKOFF and q.pop_nowait() is None
    assert q.force_activate(qpi.pod.uid) == ACTIVE
    assert q.pop_nowait() is qpi
    clk.t += 20
    assert q.flush_backoff_completed() == 0   # its stale backoffQ entry is dropped, not popped twice
    assert q.pop_nowait() is None


def test_force_activate_in_flight_reruns_once_after_the_failed_attempt():
    q = mkq(Clock(), pop_from_backoff=False)
    q.add(P("a"))
    qpi = q.pop_nowait()
    assert q.force_activate(qpi.pod.uid) == IN_FLIGHT
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == ACTIVE
    assert q.pop_nowait() is qpi
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == UNSCHEDULABLE   # only once
    assert q.pop_nowait() is None


def test_force_activate_leaves_gated_and_held_pods():
    from pysched.framework.status import Code, Status
    q = mkq(Clock(), pre_enqueue=lambda p: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin="Gate")
            if p.gates else None)
    g = PodInfo.from_dict(pod("g", gates=["example.com/wait"]), keep_raw=True)
    q.add(g)
    assert q.force_activate(g.uid) == UNSCHEDULABLE and q.pop_nowait() is None
    held: set[str] = set()
    q2 = mkq(Clock(), hold=lambda p: p.uid in held)
    qpi = _failed(q2)
    held.add(qpi.pod.uid)
    assert q2.force_activate(qpi.pod.uid) == UNSCHEDULABLE and q2.pop_nowait() is None


def test_a_relist_of_unchanged_objects_moves_no_pod():
    """A listing that reports every object again (type None): only a changed one is an event (an
    Update), so waiting pods are not sent to try again for nothing."""
    from pysched.eventhandlers import ClusterEvents

    class Recorder:
        counts = {"inflight": 0}

        def __init__(self):
            self.events = []

        def has_unschedulable(self):
            return True

        def move_all(self, event, interested=None):
            self.events.append(event)
            return 0

    q = Recorder()
    ev = ClusterEvents(q)  # type: ignore[arg-type]
    obj = {"metadata": {"name": "s", "resourceVersion": "7"}}
    ev.object_event("resourceslices", None, None, obj)                      # first seen
    ev.object_event("resourceslices", None, obj, dict(obj))                 # listed again, unchanged
    newer = {"metadata": {"name": "s", "resourceVersion": "8"}}
    ev.object_event("resourceslices", None, obj, newer)                     # listed again, changed
    ev.object_event("deviceclasses", "ADDED", None, obj)
    assert q.events == ["ResourceSliceAdd", "ResourceSliceUpdate", "DeviceClassAdd"]


def test_a_queue_that_is_never_popped_does_not_keep_deleted_pods():
    # A standby replica queues every pending pod and never pops: the leader binds them, and the
    # standby deletes them from its queue. Dead heap entries must not pile up (each holds its pod).
    from pysched.backend.queue.scheduling_queue import COMPACT_MARGIN
    clk = Clock()
    q = mkq(clk)
    uids = []
    for i in range(20 * COMPACT_MARGIN):
        p = P(f"p{i}", priority=i % 7)
        uids.append(p.uid)
        q.add(p)
        clk.t += 0.001
        if i >= 10:
            q.delete(uids[i - 10])
    assert len(q) == 10
    assert len(q._active) <= 2 * 10 + COMPACT_MARGIN + 1
    # ...and what is left still pops in order.
    order = [q.pop_nowait().pod.name for _ in range(10)]
    assert sorted(order, key=lambda n: (-(int(n[1:]) % 7), int(n[1:]))) == order
    assert len(order) == 10 and q.pop_nowait() is None


def test_pods_requeued_between_backoff_and_active_do_not_pile_up_in_the_backoff_heap():
    from pysched.backend.queue.scheduling_queue import COMPACT_MARGIN
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    qpi = _failed(q)
    for _ in range(4 * COMPACT_MARGIN):
        q.move_all("NodeAdd")                  # to backoffQ (inside its backoff)
        assert qpi.where == BACKOFF
        assert q.force_activate(qpi.pod.uid) == ACTIVE
        got = q.pop_nowait()
        got.unschedulable_plugins = {"NodeResourcesFit"}
        q.add_unschedulable_if_not_present(got)
    assert len(q._backoff) <= COMPACT_MARGIN + 1 and len(q._active) <= COMPACT_MARGIN + 1


def _unschedulable_gauge(plugin, profile):
    from pysched.metrics import METRICS
    return METRICS.unschedulable_pods.labels(plugin, profile)._value.get()


def test_the_unschedulable_pods_gauge_counts_pods_parked_now_not_every_failure_ever():
    """scheduler_unschedulable_pods is a gauge of pods parked now: counted when a failed attempt
    parks the pod, uncounted when it is popped for the next attempt or deleted (it only grew)."""
    clk = Clock()
    q = mkq(clk, pop_from_backoff=False)
    a, b = P("gauge-a"), P("gauge-b")
    prof = a.scheduler_name
    base = _unschedulable_gauge("GaugeTestFit", prof)
    for p in (a, b):
        q.add(p)
        qpi = q.pop_nowait()
        qpi.unschedulable_plugins = {"GaugeTestFit"}
        q.add_unschedulable_if_not_present(qpi)
    assert _unschedulable_gauge("GaugeTestFit", prof) == base + 2
    q.move_all("NodeAdd")
    clk.t += 11
    q.flush_backoff_completed()
    again = q.pop_nowait()                       # the next attempt begins: no longer counted
    assert _unschedulable_gauge("GaugeTestFit", prof) == base + 1
    again.unschedulable_plugins = {"GaugeTestFit"}
    q.add_unschedulable_if_not_present(again)    # fails again: counted once more
    assert _unschedulable_gauge("GaugeTestFit", prof) == base + 2
    q.delete(a.uid)
    q.delete(b.uid)
    assert _unschedulable_gauge("GaugeTestFit", prof) == base


def test_a_gated_pod_counts_for_its_gating_plugin_until_it_is_deleted():
    from pysched.framework.status import Code, Status
    q = mkq(Clock(), pre_enqueue=lambda p: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin="GaugeTestGate"))
    p = P("gauge-gated")
    base = _unschedulable_gauge("GaugeTestGate", p.scheduler_name)
    q.add(p)
    q.update(PodInfo.from_dict({**p.raw, "metadata": {**p.raw["metadata"], "resourceVersion": "2"}},
                               keep_raw=True))   # still gated: counted once, not twice
    assert _unschedulable_gauge("GaugeTestGate", p.scheduler_name) == base + 1
    q.delete(p.uid)
    assert _unschedulable_gauge("GaugeTestGate", p.scheduler_name) == base


def test_plugin_activate_of_a_pod_in_flight_requeues_it_when_its_attempt_fails():
    # upstream's Activate registers a ForceActivate event for an in-flight pod (a gang released
    # while its members are still in their binding cycles)
    q = mkq(Clock(), pop_from_backoff=False)
    q.add(P("a"))
    qpi = q.pop_nowait()
    q.activate([qpi.pod.uid])
    qpi.unschedulable_plugins = {"Coscheduling"}
    assert q.add_unschedulable_if_not_present(qpi) == ACTIVE
    assert q.pop_nowait() is qpi


def test_resort_orders_active_pods_by_what_the_queue_sort_reads_now():
    """Pods queued before the objects their order depends on (a PodGroup listed after its members):
    ``resort`` applies the order they have now."""
    clk = Clock()
    group_time = {}                                      # what a QueueSort reads besides the pod
    q = SchedulingQueue(sort_key=lambda qi: (group_time.get(qi.pod.labels.get("g"), qi.timestamp), qi.pod.name),
                        clock=clk)
    q.add(P("young-0", labels={"g": "young"}))
    clk.t += 1
    q.add(P("old-0", labels={"g": "old"}))
    group_time.update(old=1.0, young=2.0)                # the groups are known now
    assert q.resort() == 2
    assert [q.pop_nowait().pod.name for _ in range(2)] == ["old-0", "young-0"]
