"""Shadow mode's bookkeeping: one prediction per pod, assumed until the real bind, then compared."""

from pysched.backend.queue.scheduling_queue import QueuedPodInfo
from pysched.framework.podinfo import PodInfo
from pysched.metrics import METRICS
from pysched.shadow import Prediction, ShadowRecorder, classify
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod


def test_classify_every_outcome():
    p = Prediction("a", frozenset({"a", "b"}), frozenset({"a", "b", "c"}), "", 0.0, True)
    assert classify(p, "a") == "same_node"
    assert classify(p, "b") == "equivalent_node"
    assert classify(p, "c") == "feasible_node"
    assert classify(p, "d") == "infeasible_node"
    assert classify(Prediction(None, frozenset(), frozenset(), "0/3 nodes", 0.0, False), "a") == "unschedulable_here"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def setup(nodes):
    s = OfflineScheduler(seed=0)
    for n in nodes:
        s.add_node(n)
    clock = Clock()
    shadow = ShadowRecorder(s.scheduler, ttl=30.0, clock=clock)
    return s, shadow, clock


def predict(shadow, raw):
    info = PodInfo.from_dict(raw, keep_raw=True)
    shadow.predict(QueuedPodInfo(info, 0.0))
    return info


def bound(raw, node_name):
    b = dict(raw, spec=dict(raw["spec"], nodeName=node_name))
    return b


def test_prediction_is_assumed_then_replaced_by_the_real_bind():
    s, shadow, _ = setup([node("small", cpu="1"), node("big", cpu="8")])
    raw = pod("web", cpu="900m", scheduler="default-scheduler")
    # A shadow profile stands in for default-scheduler (as app.py routes it).
    s.scheduler.frameworks = {"default-scheduler": s.frameworks[s.profile]}
    info = predict(shadow, raw)
    pred = shadow.predictions[info.uid]
    assert pred.node == "big" and pred.feasible == {"small", "big"} and pred.top == {"big"}
    assert s.cache.is_assumed(info.uid) and s.cache.nodes["big"].requested["cpu"] == 900
    assert shadow.seen(info.uid)
    before = METRICS.shadow_placements.labels("feasible_node").value
    s.handlers.observer = shadow
    s.add_pod(bound(raw, "small"))  # the other scheduler chose differently
    assert METRICS.shadow_placements.labels("feasible_node").value == before + 1
    assert shadow.counts["feasible_node"] == 1 and not shadow.seen(info.uid)
    assert s.cache.nodes["small"].requested["cpu"] == 900 and "cpu" not in s.cache.nodes["big"].requested
    assert METRICS.shadow_agreement._value.get() == 0.0


def test_agreement_ratio_and_unschedulable_predictions():
    s, shadow, _ = setup([node("a", cpu="2"), node("b", cpu="2")])
    s.scheduler.frameworks = {"default-scheduler": s.frameworks[s.profile]}
    s.handlers.observer = shadow
    raws = [pod(f"p{i}", cpu="100m", scheduler="default-scheduler") for i in range(3)]
    for raw in raws:
        info = predict(shadow, raw)
        s.add_pod(bound(raw, shadow.predictions[info.uid].node))
    huge = pod("huge", cpu="16", scheduler="default-scheduler")
    info = predict(shadow, huge)
    assert shadow.predictions[info.uid].node is None and not s.cache.is_assumed(info.uid)
    s.add_pod(bound(huge, "a"))  # e.g. a scheduler that ignores requests
    assert shadow.counts["same_node"] == 3 and shadow.counts["unschedulable_here"] == 1
    assert METRICS.shadow_agreement._value.get() == 0.75


def test_expired_assumption_is_forgotten_but_still_compared():
    s, shadow, clock = setup([node("a", cpu="1")])
    s.scheduler.frameworks = {"default-scheduler": s.frameworks[s.profile]}
    s.handlers.observer = shadow
    raw = pod("slow", cpu="600m", scheduler="default-scheduler")
    info = predict(shadow, raw)
    clock.t += 10
    assert shadow.expire() == 0 and s.cache.is_assumed(info.uid)
    clock.t += 30
    assert shadow.expire() == 1 and not s.cache.is_assumed(info.uid)
    assert "cpu" not in s.cache.nodes["a"].requested  # the capacity is free again
    s.add_pod(bound(raw, "a"))
    assert shadow.counts["same_node"] == 1
    assert s.cache.nodes["a"].requested["cpu"] == 600


def test_deleted_pod_drops_its_prediction_and_assumption():
    s, shadow, _ = setup([node("a")])
    s.scheduler.frameworks = {"default-scheduler": s.frameworks[s.profile]}
    info = predict(shadow, pod("gone", scheduler="default-scheduler"))
    shadow.observe_deleted(info.uid)
    assert not shadow.seen(info.uid) and not s.cache.is_assumed(info.uid)


def test_a_pod_bound_before_the_loop_reaches_it_is_still_compared():
    # The informer can hand over a pending pod and the other scheduler's bind in one read: the
    # pod is queued, then seen bound before the shadow's loop pops it. It is predicted at the
    # bind, on the cluster as it was just before, and compared; the queue no longer holds it.
    s, shadow, _ = setup([node("small", cpu="1"), node("big", cpu="8")])
    s.scheduler.frameworks = {"default-scheduler": s.frameworks[s.profile]}
    s.handlers.scheduler_names = {"default-scheduler"}
    s.handlers.observer = shadow
    raw = pod("quick", cpu="900m", scheduler="default-scheduler")
    s.add_pod(raw)
    uid = raw["metadata"]["uid"]
    assert uid in s.queue and not shadow.seen(uid)
    s.add_pod(bound(raw, "big"))
    assert shadow.counts["same_node"] == 1 and sum(shadow.counts.values()) == 1
    assert uid not in s.queue and not s.cache.is_assumed(uid)
    assert s.cache.nodes["big"].requested["cpu"] == 900 and "cpu" not in s.cache.nodes["small"].requested
