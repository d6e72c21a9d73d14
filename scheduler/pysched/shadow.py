"""Shadow mode (``pysched run --shadow``): predict placements for another scheduler's pods, never bind.

The scheduler watches the pods of the shadowed schedulers (``--shadow-scheduler-name``, default
``default-scheduler``) instead of its own and runs each once through its first profile's PreFilter,
Filter, PreScore and Score over every node (no sampling), then assumes the pod on the predicted
node in its own cache - so a burst of predictions accounts for each other, as the real scheduler's
assumptions do - and never reserves, binds, patches or records Events. When the other scheduler's
bind arrives, the cache replaces the assumption with the real placement and the prediction is
compared with it:

* ``same_node``: we would have chosen that node;
* ``equivalent_node``: we would have chosen another node with the same, highest, score (a tie);
* ``feasible_node``: the node passes our filters but we score another higher;
* ``infeasible_node``: our filters reject the node it got (a constraint we see differently);
* ``unschedulable_here``: we found no feasible node at all.

``pysched_shadow_placements_total{result}`` counts them and ``pysched_shadow_agreement_ratio`` is
(same + equivalent) / compared. A prediction whose pod is not bound within ``ttl`` seconds has its
assumption forgotten (the other scheduler could not place it either, or has not yet) but is still
compared if the bind comes later. Each pod is predicted once, when the shadow's loop reaches it
or, if the other scheduler's bind arrives first (the informer can deliver the pending pod and its
bind in one read), just before the cache takes that bind - so every pod seen pending is compared.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from pysched.framework.cycle_state import CycleState
from pysched.framework.status import FitError, FrameworkError, NoNodesAvailable
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.tools.shadow")   # the name its log lines have always had
RESULTS = ("same_node", "equivalent_node", "feasible_node", "infeasible_node", "unschedulable_here")
AGREE = ("same_node", "equivalent_node")


@dataclass
class Prediction:
    node: str | None
    top: frozenset          # nodes sharing the highest score
    feasible: frozenset     # nodes that passed every filter
    message: str
    at: float
    assumed: bool


class ShadowRecorder:
    def __init__(self, scheduler, *, ttl: float = 60.0, limit: int = 50000, clock=time.monotonic):
        self.scheduler = scheduler
        self.cache = scheduler.cache
        self.ttl = ttl
        self.limit = limit
        self.clock = clock
        self.predictions: OrderedDict[str, Prediction] = OrderedDict()
        self.counts = {r: 0 for r in RESULTS}

    # -- the cycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """The shadow's loop, in place of the scheduler's: predict each queued pod, bind nothing."""
        queue = self.scheduler.queue
        while True:
            qpi = await queue.pop()
            if qpi is None:
                return
            try:
                self.predict(qpi)
            except Exception:  # noqa: BLE001 - never let one pod stop the loop
                log.exception("shadow: prediction crashed", extra=kv(pod=qpi.pod.key))
            await asyncio.sleep(0)

    def predict(self, qpi) -> None:
        sched = self.scheduler
        pod = qpi.pod
        sched.queue.done(pod.uid)
        if pod.uid in self.cache.pods or pod.uid in self.predictions or pod.deleting:
            return
        fwk = sched.frameworks.get(pod.scheduler_name)
        if fwk is None:
            return
        state = CycleState()
        try:
            feasible, diagnosis, n_all = sched.find_feasible(fwk, state, pod, None)
            settled = sched._settle(pod, feasible, diagnosis, n_all, None)
            names = feasible.names
            if settled is not None:
                host, top = settled.host, frozenset(names)
            else:
                total = sched.prioritize(fwk, state, pod, feasible, None)
                best = total.max()
                top = frozenset(names[i] for i in np.flatnonzero(total == best))
                host = sched._select(feasible, total, diagnosis).host
        except FitError as fe:
            self._remember(pod.uid, Prediction(None, frozenset(), frozenset(), fe.message(), self.clock(), False))
            log.info("shadow: no feasible node", extra=kv(pod=pod.key, err=fe.message()))
            return
        except (NoNodesAvailable, FrameworkError) as exc:
            log.warning("shadow: cycle error", extra=kv(pod=pod.key, err=str(exc)))
            return
        self.cache.assume(pod, host)
        self._remember(pod.uid, Prediction(host, top, frozenset(names), "", self.clock(), True))
        log.debug("shadow: predicted", extra=kv(pod=pod.key, node=host))

    def _remember(self, uid: str, p: Prediction) -> None:
        self.predictions[uid] = p
        while len(self.predictions) > self.limit:
            old_uid, old = self.predictions.popitem(last=False)
            self._forget(old_uid, old)

    def seen(self, uid: str) -> bool:
        return uid in self.predictions

    # -- outcomes ------------------------------------------------------------------------------

    def observe_binding(self, uid: str) -> None:
        """The other scheduler bound a pod still in our queue: predict it now, before the cache
        takes the bind, so it is compared like any other (the handler then drops it from the queue)."""
        qpi = self.scheduler.queue.get(uid)
        if qpi is not None and uid not in self.predictions:
            self.predict(qpi)

    def observe_bound(self, pod) -> None:
        """The other scheduler bound ``pod`` (the informer saw ``spec.nodeName``)."""
        pred = self.predictions.pop(pod.uid, None)
        if pred is None:
            return
        result = classify(pred, pod.node_name)
        self.counts[result] += 1
        METRICS.shadow_placements.labels(result).inc()
        compared = sum(self.counts.values())
        METRICS.shadow_agreement.set(sum(self.counts[r] for r in AGREE) / compared)
        if result not in AGREE:
            log.info("shadow: placement differs", extra=kv(pod=pod.key, node=pod.node_name, predicted=pred.node,
                                                           result=result))

    def observe_deleted(self, uid: str) -> None:
        pred = self.predictions.pop(uid, None)
        if pred is not None:
            self._forget(uid, pred)

    def _forget(self, uid: str, pred: Prediction) -> None:
        if pred.assumed and self.cache.is_assumed(uid):
            self.cache.forget(self.cache.assumed[uid])
        pred.assumed = False

    def expire(self) -> int:
        """Forget assumptions older than ``ttl`` whose pods were never bound; returns how many."""
        cutoff = self.clock() - self.ttl
        n = 0
        for uid, pred in self.predictions.items():
            if pred.at > cutoff:
                break
            if pred.assumed:
                self._forget(uid, pred)
                n += 1
        return n

    async def run_expiry(self, interval: float = 5.0) -> None:
        while True:
            await asyncio.sleep(interval)
            self.expire()


def classify(pred: Prediction, actual: str) -> str:
    if pred.node is None:
        return "unschedulable_here"
    if pred.node == actual:
        return "same_node"
    if actual in pred.top:
        return "equivalent_node"
    if actual in pred.feasible:
        return "feasible_node"
    return "infeasible_node"
