"""OfflineScheduler: the real engine (cache, frameworks, scheduling cycle) without an API server.

Nodes and pods are fed as API dictionaries through the same event handlers the informers use;
``schedule()`` runs one scheduling cycle and, on success, assumes the pod exactly as the live
scheduler does before binding. Used by ``pysched simulate``, the unit tests and the differential
checks, so all of them exercise the production code path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.apis import config as configmod
from pysched.backend.cache.cache import SchedulerCache
from pysched.client.objectstore import ObjectStore
from pysched.eventhandlers import ClusterEvents, EventHandlers, EventRegistry
from pysched.framework.cycle_state import CycleState
from pysched.framework.podinfo import PodInfo
from pysched.framework.registry import Registry
from pysched.framework.runtime import TRACE_KEY, CycleTrace
from pysched.framework.status import Code, Status
from pysched.framework.types import FitError, FrameworkError, NoNodesAvailable
from pysched.profile import build_frameworks, build_queue, default_registry
from pysched.schedule_one import Scheduler


@dataclass
class Outcome:
    pod: str
    node: str | None
    message: str = ""
    code: str = "Scheduled"
    trace: dict | None = None
    nominated_node: str = ""             # preemption: the node the pod was nominated for
    victims: tuple[str, ...] = ()        # ... and the pods it would evict there (ns/name)


class OfflineScheduler:
    def __init__(self, cfg: configmod.SchedulerConfig | None = None, *, registry: Registry | None = None,
                 seed: int | None = 0, observer=None):
        self.cfg = cfg or configmod.default_config()
        self.registry = registry if registry is not None else default_registry()
        self.cache = SchedulerCache()
        self.objects = ObjectStore()
        self.frameworks = build_frameworks(self.cfg, self.registry, cache=self.cache, client=None, recorder=None,
                                           objects=self.objects)
        self.queue = build_queue(self.cfg, self.frameworks)
        self.events = ClusterEvents(self.queue, EventRegistry(self.frameworks.values()))
        self.objects.subscribe(self.events.object_event)
        self.handlers = EventHandlers(self.cache, self.queue, self.cfg.scheduler_names, self.events,
                                      observer=observer)
        self.scheduler = Scheduler(cache=self.cache, queue=self.queue, frameworks=self.frameworks,
                                   percentage_of_nodes_to_score=self.cfg.percentage_of_nodes_to_score, seed=seed,
                                   on_cluster_event=self.events.move)

    @property
    def profile(self) -> str:
        return self.cfg.profiles[0].scheduler_name

    def add_node(self, node: dict) -> None:
        self.handlers.node_upsert(node)

    def remove_node(self, name: str) -> None:
        self.handlers.node_delete(name, None)

    def add_pod(self, pod: dict) -> None:
        """An existing pod (bound ones are counted on their node)."""
        self.handlers.pod_upsert(pod)

    def add_object(self, obj: dict) -> bool:
        """A Namespace, Service, ReplicaSet, StatefulSet, ReplicationController, PVC, PV, StorageClass,
        CSINode, VolumeAttachment or ResourceClaim."""
        return self.objects.add(obj)

    def remove_pod(self, uid: str) -> None:
        self.handlers.pod_delete(uid, None)

    def schedule(self, pod: dict | PodInfo, *, assume: bool = True, explain: bool = False) -> Outcome:
        info = pod if isinstance(pod, PodInfo) else PodInfo.from_dict(pod, keep_raw=True)
        fwk = self.frameworks.get(info.scheduler_name) or self.frameworks[self.profile]
        state = CycleState()
        trace = CycleTrace() if explain else None
        if trace is not None:
            state.write(TRACE_KEY, trace)
        if info.parse_error:
            return Outcome(info.key, None, f"invalid pod: {info.parse_error}", "SchedulerError")
        try:
            result = self.scheduler.schedule_pod(fwk, state, info, trace)
        except FitError as fe:
            nominated, victims = "", ()
            if fwk.post_filter:
                # Preemption runs as in the live cycle; offline nothing is evicted, the outcome
                # reports the node it chose and the victims.
                res, st = fwk.run_post_filter(state, info, fe.diagnosis)
                if st is not None and st.message():
                    fe.diagnosis.post_filter_msg = st.message()
                if res is not None and res.nominated_node_name:
                    nominated, victims = res.nominated_node_name, tuple(res.victims)
                    if trace is not None:
                        trace.nominated = {"node": nominated, "victims": list(victims)}
            if trace is not None:
                trace.error = fe.message()
            return Outcome(info.key, None, fe.message(), "Unschedulable", trace.to_dict() if trace else None,
                           nominated, victims)
        except (NoNodesAvailable, FrameworkError) as exc:
            return Outcome(info.key, None, str(exc), "SchedulerError", trace.to_dict() if trace else None)
        if trace is not None:
            trace.selected = result.host
        if assume:
            assumed = self.cache.assume(info, result.host)
            st = fwk.run_reserve(state, assumed, result.host)
            if st is not None and not st.is_success():
                fwk.run_unreserve(state, assumed, result.host)
                self.cache.forget(assumed)
                return Outcome(info.key, None, st.message(),
                               "Unschedulable" if st.is_rejected() else "SchedulerError")
            # Offline there is no bind: the assumed pod stands for the bound one.
            self.cache.assumed.pop(info.uid, None)
        return Outcome(info.key, result.host, "", "Scheduled", trace.to_dict() if trace else None)

    def filter_status(self, pod: dict, node_name: str) -> Status | None:
        """Every filter on one node (scalar path), for checks and explanations."""
        info = PodInfo.from_dict(pod)
        fwk = self.frameworks.get(info.scheduler_name) or self.frameworks[self.profile]
        state = CycleState()
        from pysched.framework.interface import NodeBatch
        table = self.cache.table
        _, st, _ = fwk.run_pre_filter(state, info, NodeBatch(table, table.order()))
        if st is not None and not st.is_success():
            return st
        node = self.cache.nodes.get(node_name)
        if node is None:
            return Status(Code.ERROR, f"node {node_name} not found")
        return fwk.run_filters_on_node(state, info, NodeBatch(table, np.array([node.slot], dtype=np.int64)))
