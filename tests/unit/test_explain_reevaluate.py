"""Explaining a pod that already failed: the explain annotation re-evaluates it at once, through
the informer's update path (``EventHandlers.pod_upsert``) and the real scheduling cycle; no other
update of the pod does, and ``/debug/explain`` says it is being re-evaluated until the cycle ends."""

import copy

from pysched.backend.queue.scheduling_queue import ACTIVE, UNSCHEDULABLE
from pysched.framework.nodeinfo import NodeSpec
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

EXPLAIN = "pysched.io/explain"


def annotated(raw: dict, **annotations) -> dict:
    out = copy.deepcopy(raw)
    out["metadata"]["resourceVersion"] = str(int(out["metadata"]["resourceVersion"]) + 1)
    out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


def failed_once(s: OfflineScheduler, raw: dict):
    s.add_pod(raw)
    qpi = s.queue.pop_nowait()
    s.scheduler.schedule_one(qpi)
    assert qpi.where == UNSCHEDULABLE and qpi.attempts == 1
    return qpi


def test_gaining_the_annotation_reevaluates_the_pod_with_the_trace_on():
    s = OfflineScheduler()
    s.add_node(node("small", cpu="1", memory="1Gi"))
    s.add_node(node("other", cpu="1", memory="1Gi"))
    raw = pod("big", cpu="4", scheduler=s.profile)
    qpi = failed_once(s, raw)
    assert s.scheduler.explanation("default/big") is None       # never traced, did not ask

    raw = annotated(raw, **{EXPLAIN: "true"})
    s.add_pod(raw)                                              # the informer's update
    assert qpi.where == ACTIVE                                  # no cluster event, no backoff wait
    waiting = s.scheduler.explanation("default/big")
    assert waiting["reevaluating"] is True and waiting["queue"] == ACTIVE

    assert s.queue.pop_nowait() is qpi
    s.scheduler.schedule_one(qpi)
    assert qpi.where == UNSCHEDULABLE and qpi.attempts == 2
    trace = s.scheduler.explanation("default/big")
    fit = next(f for f in trace["filter"] if f["plugin"] == "NodeResourcesFit")
    assert fit["nodes"] == {"small": "Insufficient cpu", "other": "Insufficient cpu"}
    assert trace["error"].startswith("0/2 nodes are available")


def test_other_updates_do_not_reactivate():
    s = OfflineScheduler()
    s.add_node(node("small", cpu="1", memory="1Gi"))
    raw = failed_once(s, pod("big", cpu="4", scheduler=s.profile, annotations={EXPLAIN: "true"})).pod.raw
    qpi = s.queue.get(raw["metadata"]["uid"])
    for change in ({"pysched.io/explanation": '{"error":"x"}'},   # our own write coming back
                   {"note": "unrelated"},
                   {EXPLAIN: "false"}):
        raw = annotated(raw, **change)
        s.add_pod(raw)
        assert qpi.where == UNSCHEDULABLE, change
    raw = annotated(raw, **{EXPLAIN: "true"})                    # asked again: re-evaluated once more
    s.add_pod(raw)
    assert qpi.where == ACTIVE


async def test_a_reevaluation_that_fits_binds_as_any_attempt():
    s = OfflineScheduler()
    s.add_node(node("small", cpu="1", memory="1Gi"))
    raw = pod("big", cpu="4", scheduler=s.profile)
    qpi = failed_once(s, raw)
    # Room the queue was not told about (straight into the cache: no cluster event moves the pod).
    s.cache.upsert_node(NodeSpec.from_dict(node("large", cpu="8", memory="8Gi")))
    assert qpi.where == UNSCHEDULABLE
    s.add_pod(annotated(raw, **{EXPLAIN: "true"}))
    assert s.queue.pop_nowait() is qpi
    s.scheduler.schedule_one(qpi)                                # assumes, starts the binding cycle
    try:
        assert s.cache.pods[qpi.pod.uid].node_name == "large"
        assert s.scheduler.traces["default/big"]["selectedNode"] == "large"
    finally:
        for t in s.scheduler.binding_tasks:
            t.cancel()
