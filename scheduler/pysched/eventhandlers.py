"""Informer event handlers: route Pod and Node events into the cache and the scheduling queue.

* A pod with ``spec.nodeName`` (bound by us or by anyone else) is counted in the cache; if it was
  waiting in our queue it leaves it; if we had assumed it, the assumption is confirmed.
* A pod without ``spec.nodeName`` whose ``schedulerName`` is one of our profiles goes to the
  queue; other schedulers' pending pods are ignored. Updates of a pod we assumed but whose bind
  is still in flight are ignored (the binding cycle owns it).
* A pending pod of ours that gains the explain annotation (``pysched.io/explain: "true"``, newly
  set or changed to it) is re-evaluated at once: moved to activeQ past its backoff (an attempt
  in flight is followed by another), so its explanation does not wait for a cluster event or the
  5-minute flush. Only that change does it; other updates of the pod take the usual paths.
* Deletes (or pods turning Succeeded/Failed) free capacity and are cluster events.
* Cluster events (node added/changed, assigned pod added/changed/deleted) move unschedulable
  pods back to the active or backoff queue when a plugin that rejected them registered the event.

Handlers run on the event loop, between scheduling cycles; they do no I/O.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from pysched import explanation as explain
from pysched.backend.cache.cache import SchedulerCache
from pysched.backend.queue.scheduling_queue import IN_FLIGHT, QueuedPodInfo, SchedulingQueue
from pysched.client.objectstore import resource_version
from pysched.framework.interface import ClusterEvent, ClusterEventWithHint
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import EXTENDER_NAME
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.eventhandlers")

KUBELET_REJECTION_REASONS = ("OutOfcpu", "OutOfmemory", "OutOfpods", "OutOfephemeral-storage",
                             "UnexpectedAdmissionError", "NodeAffinity", "Evicted")


def explain_newly_requested(old: PodInfo, new: PodInfo) -> bool:
    """The update asks for an explanation the pod did not ask for before."""
    key = explain.REQUEST_ANNOTATION
    return explain.requested(new) and (old.annotations or {}).get(key) != (new.annotations or {}).get(key)


# kube-scheduler's feature gate under which a node's ``status.declaredFeatures`` is read, and its
# changes are the cluster event UpdateNodeDeclaredFeature (alpha and off in 1.35, on from 1.36).
NODE_DECLARED_FEATURES_GATE = "NodeDeclaredFeatures"


def node_update_actions(old: NodeSpec, new: NodeSpec, *, declared_features: bool = False) -> set[str]:
    """``NodeSchedulingPropertiesChange`` over what pysched keeps of a node: allocatable, labels,
    taints, and ``spec.unschedulable`` turning false (an UpdateNodeTaint, as upstream; a node being
    cordoned helps no pod), and - with ``declared_features``, the NodeDeclaredFeatures gate -
    ``status.declaredFeatures`` (UpdateNodeDeclaredFeature, the lists compared as sent). Conditions
    and annotations - upstream's other two - are not kept, and no in-tree plugin registers them."""
    actions = set()
    if old.raw_alloc != new.raw_alloc:
        actions.add("UpdateNodeAllocatable")
    if old.labels != new.labels:
        actions.add("UpdateNodeLabel")
    if old.taints != new.taints or (old.unschedulable and not new.unschedulable):
        actions.add("UpdateNodeTaint")
    if declared_features and old.declared_features != new.declared_features:
        actions.add("UpdateNodeDeclaredFeature")
    return actions


def pod_update_actions(old: PodInfo, new: PodInfo) -> set[str]:
    actions = set()
    if old.labels != new.labels:
        actions.add("UpdatePodLabel")
    for k, v in old.requests.items():
        if new.requests.get(k, 0) < v:
            actions.add("UpdatePodScaleDown")
            break
    if old.tolerations != new.tolerations:
        actions.add("UpdatePodToleration")
    return actions


class EventRegistry:
    """Which plugin wants which cluster events (from ``EnqueueExtensions.events_to_register``)."""

    def __init__(self, frameworks) -> None:
        self.by_plugin: dict[str, list] = {}
        self.wildcard_plugins: set[str] = set()
        # The kube feature gates on in any profile (they are the process's: every profile has the
        # same): the ones that decide which node changes are cluster events.
        self.feature_gates: frozenset[str] = frozenset()
        # Plugins that follow pods themselves (``PodWatcher``: Coscheduling's group members).
        self.pod_watchers: list = []
        for fwk in frameworks:
            self.feature_gates |= getattr(getattr(fwk, "handle", None), "feature_gates", frozenset())
            for pl in getattr(fwk, "pod_watchers", ()):
                if all(pl is not w for w in self.pod_watchers):
                    self.pod_watchers.append(pl)
            for name, pl in fwk.plugins.items():
                fn = getattr(pl, "events_to_register", None)
                if fn is None:
                    self.wildcard_plugins.add(name)
                    continue
                regs = list(fn())
                node_actions = {r.event.action for r in regs if r.event.resource == "Node"}
                release = getattr(getattr(fwk, "handle", None), "kube_version", (1, 37))
                if (release < (1, 37) and "Add" in node_actions
                        and not node_actions & {"UpdateNodeTaint", "Update", "*"}):
                    # As kube-scheduler 1.35/1.36's buildQueueingHintMap does for every plugin
                    # registering Node/Add: a node whose taints change may be one it skipped
                    # (UpdateNodeTaint, no hint; kubernetes#109437). 1.37 dropped it with preCheck.
                    regs.append(ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")))
                self.by_plugin[name] = regs

    def interested(self, qpi: QueuedPodInfo, resource: str, actions: set[str], old, new,
                   hints: bool = True) -> bool:
        """Whether the event may make ``qpi`` schedulable. ``hints=False`` (a batch of events whose
        objects are not kept, see ``ClusterEvents.batch``): a registration for it is enough."""
        if qpi.gated:
            # A pod held by a PreEnqueue plugin: only the events that plugin registered (and its
            # hints) can release it - every event if it registers none; the queue then runs
            # PreEnqueue again.
            if qpi.gating_plugin in self.wildcard_plugins:
                return True
            plugins = {qpi.gating_plugin}
            if not self.by_plugin.get(qpi.gating_plugin):
                return False
        else:
            plugins = qpi.unschedulable_plugins | qpi.pending_plugins
        if not plugins or EXTENDER_NAME in plugins:
            return True
        for p in plugins:
            regs = self.by_plugin.get(p)
            if regs is None:
                return True
            for reg in regs:
                ev = reg.event
                if ev.resource not in (resource, "*"):
                    continue
                if ev.action != "*" and ev.action not in actions and not (
                        ev.action == "Update" and any(a.startswith("Update") for a in actions)):
                    continue
                if reg.hint is None or not hints:
                    return True
                try:
                    if reg.hint(qpi.pod, old, new):
                        return True
                except Exception:  # noqa: BLE001 - a failing hint means "requeue", as upstream
                    log.exception("queueing hint failed", extra=kv(plugin=p, pod=qpi.pod.key))
                    return True
        return False


class PodObserver(Protocol):
    """Hooks for a mode that watches pods beside the cache (shadow mode): a queued pod about to be
    seen bound (before the cache takes the bind), a pod seen bound for the first time (by anyone),
    whether a pending pod must not be queued again, a pod deleted."""

    def observe_binding(self, uid: str) -> None: ...
    def observe_bound(self, pod: PodInfo) -> None: ...
    def seen(self, uid: str) -> bool: ...
    def observe_deleted(self, uid: str) -> None: ...


OBJECT_RESOURCES = {"persistentvolumeclaims": "PersistentVolumeClaim", "persistentvolumes": "PersistentVolume",
                    "storageclasses": "StorageClass", "namespaces": "Namespace", "services": "Service",
                    "replicasets": "ReplicaSet", "statefulsets": "StatefulSet",
                    "replicationcontrollers": "ReplicationController", "csinodes": "CSINode",
                    "volumeattachments": "VolumeAttachment",
                    "csidrivers": "CSIDriver", "csistoragecapacities": "CSIStorageCapacity",
                    "resourceclaims": "ResourceClaim", "deviceclasses": "DeviceClass",
                    "resourceslices": "ResourceSlice", "devicetaintrules": "DeviceTaintRule", "podgroups": "PodGroup",
                    "elasticquotas": "ElasticQuota", "workloadpodgroups": "WorkloadPodGroup",
                    "compositepodgroups": "CompositePodGroup"}


class ClusterEvents:
    """Cluster events -> requeue: moves unschedulable pods that a registered plugin cares about
    back to the active or backoff queue (QueueingHints when the plugin gave one)."""

    def __init__(self, queue: SchedulingQueue, registry: EventRegistry | None = None):
        self.queue = queue
        self.registry = registry
        # While a ``batch`` is open: the (resource, actions) of the events it coalesced, in order.
        self._batched: dict[tuple[str, frozenset[str]], None] | None = None
        if registry is not None:
            queue.event_filter = lambda qpi, ev: (ev[5] is None or ev[5](qpi)) and registry.interested(qpi, *ev[:5])

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Coalesce the events raised inside into one move per (resource, actions), run on exit
        without queueing hints. For a LIST applied at once (thousands of objects): hints per object
        would run every waiting pod through every object's hint - at 6,000 ResourceClaims and 5,000
        pods gated on them, 30 million calls before the first cycle. Without hints a pod whose plugin
        registered the event is moved (a gated one runs PreEnqueue again), which is what a hint that
        cannot tell would answer: more retries, never a pod left waiting."""
        if self._batched is not None:
            yield
            return
        self._batched = {}
        try:
            yield
        finally:
            batched, self._batched = self._batched, None
            for resource, actions in batched:
                self._move(resource, set(actions), None, None, hints=False)

    def move(self, resource: str, actions: set[str], old=None, new=None,
             precheck: Callable[[QueuedPodInfo], bool] | None = None) -> None:
        """``precheck``: only the waiting pods it accepts are considered (upstream's PreEnqueueCheck)."""
        if not actions:
            return
        if self._batched is not None:
            self._batched[(resource, frozenset(actions))] = None
            return
        self._move(resource, actions, old, new, hints=True, precheck=precheck)

    def _move(self, resource: str, actions: set[str], old, new, hints: bool,
              precheck: Callable[[QueuedPodInfo], bool] | None = None) -> None:
        queue = self.queue
        recording = bool(queue.counts[IN_FLIGHT])
        if not recording and not queue.has_unschedulable():
            return
        label = "AssignedPod" if resource == "Pod" else resource
        event = f"{label}{'|'.join(sorted(actions))}"
        if recording:
            queue.record_event(event, (resource, actions, old, new, hints, precheck))
        if not queue.has_unschedulable():
            return
        reg = self.registry
        if reg is None:
            queue.move_all(event, None if precheck is None else lambda qpi: precheck(qpi) and not qpi.gated)
        elif precheck is None:
            queue.move_all(event, lambda qpi: reg.interested(qpi, resource, actions, old, new, hints))
        else:
            queue.move_all(event, lambda qpi: precheck(qpi) and reg.interested(qpi, resource, actions, old, new, hints))

    def object_event(self, plural: str, typ: str | None, old: dict | None, obj: dict) -> None:
        """An ObjectStore change (namespaces, PVCs, PVs, StorageClasses, CSINodes, ResourceClaims,
        workloads). Hints get (None, new) for an add, (old, new) for an update, (deleted, None)
        for a delete, as upstream."""
        resource = OBJECT_RESOURCES.get(plural)
        if resource is None:
            return
        if typ is None and old is not None:
            # A listing (type None) re-reporting what the store holds: an update if it changed
            # meanwhile, else nothing happened - an "Add" here would send every waiting pod to
            # try again for nothing.
            if resource_version(old) == resource_version(obj):
                return
            typ = "MODIFIED"
        if typ == "DELETED":
            self.move(resource, {"Delete"}, obj, None)
        elif typ == "MODIFIED" and old is not None:
            self.move(resource, {"Update"}, old, obj)
        else:
            self.move(resource, {"Add"}, None, obj)


class EventHandlers:
    def __init__(self, cache: SchedulerCache, queue: SchedulingQueue, scheduler_names: set[str],
                 events: ClusterEvents, *, keep_node_raw: bool = False,
                 on_bound: Callable[[PodInfo], None] | None = None, observer: PodObserver | None = None,
                 waiting_pods: dict[str, Any] | None = None):
        """``keep_node_raw``: keep whole Node objects (extenders that are not nodeCacheCapable need
        them); ``on_bound``: a pod we assumed was confirmed bound; ``observer``: shadow mode's hooks;
        ``waiting_pods``: the frameworks' Permit waiting room (a deleted pod waiting there is rejected)."""
        self.waiting_pods = waiting_pods if waiting_pods is not None else {}
        self.cache = cache
        self.queue = queue
        self.scheduler_names = scheduler_names
        self.events = events
        self.on_bound = on_bound
        self.keep_node_raw = keep_node_raw
        self.observer = observer
        self.pod_watchers = list(events.registry.pod_watchers) if events.registry is not None else []
        # The informer's pending pods of our profiles (uid -> latest PodInfo): what the safety net
        # (``podrecovery``) checks the queue and the cache against.
        self.pending: dict[str, PodInfo] = {}

    def _seen(self, pod: PodInfo) -> None:
        for w in self.pod_watchers:
            try:
                w.pod_seen(pod)
            except Exception:  # noqa: BLE001 - a plugin bug must not stop the informer
                log.exception("pod watcher failed", extra=kv(plugin=w.name, pod=pod.key))

    def _gone(self, uid: str) -> None:
        for w in self.pod_watchers:
            try:
                w.pod_gone(uid)
            except Exception:  # noqa: BLE001
                log.exception("pod watcher failed", extra=kv(plugin=w.name, uid=uid))

    def _move(self, resource: str, actions: set[str], old=None, new=None) -> None:
        self.events.move(resource, actions, old, new)

    def _nomination_gone(self, pod: PodInfo) -> None:
        """A pending pod of ours lost its nominated node (deleted, or nominated elsewhere): to the
        pods of lower or equal priority, which counted it as already on that node, it is an
        assigned pod deleted (upstream's ``EventAssignedPodDelete`` with ``getLEPriorityPreCheck``)."""
        priority = pod.priority
        self.events.move("Pod", {"Delete"}, pod, None, precheck=lambda qpi: qpi.pod.priority <= priority)

    # -- pods ----------------------------------------------------------------------------------

    def pod_upsert(self, obj: dict) -> None:
        status = obj.get("status") or {}
        phase = status.get("phase")
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or ""
        if phase in ("Succeeded", "Failed"):
            self.pod_delete(uid, obj)
            return
        spec = obj.get("spec") or {}
        if spec.get("nodeName"):
            self.pending.pop(uid, None)
            pod = PodInfo.from_dict(obj)
            if self.observer is not None and uid in self.queue:
                # Bound by the other scheduler before the shadow's loop reached it (both events
                # in one read): predict it now, on the cluster as it was just before this bind.
                self.observer.observe_binding(uid)
            old, confirmed = self.cache.upsert_pod(pod)
            if self.observer is not None and (old is None or confirmed):
                self.observer.observe_bound(pod)
            if uid in self.queue:
                qpi = self.queue.get(uid)
                if qpi is not None and qpi.where != "inflight":
                    self.queue.delete(uid)
            if confirmed and self.on_bound is not None:
                self.on_bound(pod)
            if self.pod_watchers:
                self._seen(pod)
            if old is None or confirmed:
                # Bound now (by anyone, ourselves included - upstream's AssignedPodAdd comes from
                # the informer, not from the assumption).
                self._move("Pod", {"Add"}, None, pod)
            elif old.node_name == pod.node_name:
                self._move("Pod", pod_update_actions(old, pod), old, pod)
            else:
                self._move("Pod", {"Delete"}, old, None)
                self._move("Pod", {"Add"}, None, pod)
            return
        # Unbound pod.
        if self.cache.is_assumed(uid):
            return  # our bind is in flight; the binding cycle owns the pod
        if uid in self.cache.pods:
            # It was bound and is now reported unbound: impossible through the API (nodeName is
            # immutable once set), but a recreated object with a reused UID must not double count.
            self.cache.remove_pod(uid)
        sched_name = spec.get("schedulerName") or "default-scheduler"
        if sched_name not in self.scheduler_names:
            return
        if meta.get("deletionTimestamp"):
            self.pending.pop(uid, None)
            self.queue.delete(uid)
            if self.pod_watchers:
                self._gone(uid)
            return
        if self.observer is not None and self.observer.seen(uid):
            return
        pod = PodInfo.from_dict(obj, keep_raw=True)
        self.pending[uid] = pod
        queued = self.queue.get(uid)
        if queued is not None:
            old_pod = queued.pod
            self.queue.update(pod)
            if old_pod.nominated_node and old_pod.nominated_node != pod.nominated_node:
                self._nomination_gone(old_pod)
            if explain_newly_requested(old_pod, pod):
                where = self.queue.force_activate(uid)
                log.info("explanation requested; re-evaluating the pod", extra=kv(pod=pod.key, queue=where))
        else:
            self.queue.add(pod)
        if self.pod_watchers:
            self._seen(pod)

    def pod_delete(self, key: str, obj: dict | None) -> None:
        uid = key
        if self.observer is not None:
            self.observer.observe_deleted(uid)
        self.pending.pop(uid, None)
        waiting = self.waiting_pods.get(uid)
        if waiting is not None:
            # Deleted while held at Permit: end its wait now (kube-scheduler's RejectWaitingPod), so
            # its binding cycle unreserves at once instead of holding its node until the timeout.
            waiting.reject("", "removed")
        removed = self.cache.remove_pod(uid)
        qpi = self.queue.get(uid)
        if qpi is not None:
            self.queue.delete(uid)
        if self.pod_watchers:
            self._gone(uid)
        if removed is not None:
            self._move("Pod", {"Delete"}, removed, None)
        elif qpi is not None and qpi.pod.nominated_node:
            self._nomination_gone(qpi.pod)

    def note_kubelet_rejection(self, obj: dict) -> None:
        """A pod that failed (``app``'s informer of failed pods): counted and logged when a kubelet
        rejected a pod we bound."""
        status = obj.get("status") or {}
        if status.get("phase") != "Failed":
            return
        spec = obj.get("spec") or {}
        if (spec.get("schedulerName") or "default-scheduler") not in self.scheduler_names:
            return
        reason = status.get("reason") or ""
        if reason.startswith("OutOf") or reason in KUBELET_REJECTION_REASONS:
            METRICS.kubelet_rejections.labels(reason).inc()
            meta = obj.get("metadata") or {}
            log.warning("kubelet rejected a pod we bound", extra=kv(
                pod=f"{meta.get('namespace')}/{meta.get('name')}", node=spec.get("nodeName"), reason=reason,
                message=status.get("message", "")))

    # -- nodes ---------------------------------------------------------------------------------

    def node_upsert(self, obj: dict) -> None:
        spec = NodeSpec.from_dict(obj, keep_raw=self.keep_node_raw)
        if spec.parse_error:
            log.warning("node has invalid fields; unparsable resources are ignored",
                        extra=kv(node=spec.name, error=spec.parse_error))
        old = self.cache.nodes.get(spec.name)
        old_spec = old.spec if old is not None else None
        kind, info = self.cache.upsert_node(spec)
        if kind == "added":
            self._move("Node", {"Add"}, None, spec)
        elif kind == "updated" and old_spec is not None:
            reg = self.events.registry
            declared = reg is not None and NODE_DECLARED_FEATURES_GATE in reg.feature_gates
            self._move("Node", node_update_actions(old_spec, spec, declared_features=declared), old_spec, spec)

    def node_delete(self, key: str, obj: dict | None) -> None:
        old = self.cache.nodes.get(key)
        self.cache.remove_node(key)
        if old is not None:
            self._move("Node", {"Delete"}, old.spec, None)
