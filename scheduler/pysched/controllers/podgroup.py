"""The PodGroup status controller: keeps ``scheduling.x-k8s.io/v1alpha1`` PodGroup status current.

It runs in the scheduler process and only while this replica leads (``app`` starts it once the
Lease is held and stops it when it is lost or on shutdown):

* **Watching** is kopf's job, embedded (``client.kopf_watch``: its own
  thread, standalone, read-only ``on.event`` handlers - nothing is patched, annotated or given a
  finalizer by kopf). Two streams: PodGroups, and only the pods that carry the
  ``scheduling.x-k8s.io/pod-group`` label (a label-selector watch, not every pod). The handlers
  update an in-memory index - group ``namespace/name`` -> PodGroup, member pods - and enqueue the
  affected group keys. Membership is by label within the pod's own namespace: same-named groups
  in two namespaces are separate groups (upstream lists pods cluster-wide and merges them).
* **Reconciling** is ours: a coalescing, rate-limited ``WorkQueue``; a worker computes the status
  (``podgroup_status.next_status``) from the index and, only if it differs, writes it as a JSON
  merge patch to the ``status`` subresource with our own ``KubeClient`` - which carries the
  scheduler's write fence, so a replica that cannot prove it leads writes nothing.
* **Absent CRD**: start-up never fails on it. The controller checks API discovery for
  ``podgroups`` every ``retry_period`` seconds, logs the absence once, and starts watching when
  it appears. The same holds when listing PodGroups is forbidden (RBAC of the component missing).

``--podgroup-controller``: ``auto`` (default) runs it when a profile enables Coscheduling (the
app decides), once the CRD is served, logging its absence at info level; ``on`` runs it whatever
the profiles and logs the absence as a warning; ``off`` never starts it.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable

from pysched.apis.core.errors import ApiError
from pysched.client.auth import Credentials
from pysched.client.kopf_watch import KopfWatch, WatchSpec
from pysched.client.rest import KubeClient
from pysched.controllers.base import LeaderController
from pysched.controllers.podgroup_status import POD_GROUP_LABEL, next_status, status_patch
from pysched.util.logs import kv

log = logging.getLogger("pysched.controllers.podgroup")

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
DISCOVERY_PATH = f"/apis/{GROUP}/{VERSION}"
MODES = ("auto", "on", "off")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _trim_pod(pod: dict) -> dict:
    """What the status needs: identity, owners, creation time, the group label, the phase."""
    meta = pod.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp", "ownerReferences",
                                               "labels") if k in meta},
            "status": {"phase": (pod.get("status") or {}).get("phase")}}


class PodGroupIndex:
    """PodGroups and their member pods, fed by watch events; ``on_change(key)`` per touched group."""

    def __init__(self, on_change: Callable[[str], None]):
        self.groups: dict[str, dict] = {}
        self.members: dict[str, dict[str, dict]] = {}   # group key -> pod uid -> trimmed pod
        self.pod_group: dict[str, str] = {}             # pod uid -> group key
        self.on_change = on_change

    def podgroup_event(self, typ: str | None, obj: dict) -> None:
        key = _key(obj)
        if typ == "DELETED":
            self.groups.pop(key, None)
            return
        obj.get("metadata", {}).pop("managedFields", None)
        self.groups[key] = obj
        self.on_change(key)

    def pod_event(self, typ: str | None, pod: dict) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or _key(pod)
        old = self.pod_group.pop(uid, None)
        if old is not None:
            self.members.get(old, {}).pop(uid, None)
            if not self.members.get(old, True):
                self.members.pop(old, None)
        new = None
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if typ != "DELETED" and group:
            new = f"{meta.get('namespace') or 'default'}/{group}"
            self.pod_group[uid] = new
            self.members.setdefault(new, {})[uid] = _trim_pod(pod)
        for key in {old, new} - {None}:
            if key in self.groups:
                self.on_change(key)

    def pods_of(self, key: str) -> list[dict]:
        return list(self.members.get(key, {}).values())


class PodGroupController(LeaderController):
    what = "podgroup controller"
    key_name = "podgroup"
    log = log

    def __init__(self, client: KubeClient, creds: Credentials, *, mode: str = "auto", retry_period: float = 10.0,
                 workers: int = 2, qps: float = 20.0, burst: int = 50,
                 watch_factory: Callable[[Credentials, list[WatchSpec]], KopfWatch] = KopfWatch):
        if mode not in MODES:
            raise ValueError(f"--podgroup-controller: {mode!r} is not one of {', '.join(MODES)}")
        super().__init__(client, creds, retry_period=retry_period, workers=workers, qps=qps, burst=burst,
                         watch_factory=watch_factory)
        self.mode = mode
        self.index = PodGroupIndex(self.queue.add)

    def start(self) -> None:
        if self.mode != "off":
            super().start()

    def waiting_is_a_warning(self) -> bool:
        return self.mode == "on"

    def started_fields(self) -> dict[str, object]:
        return {"groups": len(self.index.groups)}

    def watch_specs(self) -> list[WatchSpec]:
        return [WatchSpec(GROUP, VERSION, PLURAL, self.index.podgroup_event),
                WatchSpec("", "v1", "pods", self.index.pod_event, label_selector=POD_GROUP_LABEL)]

    async def prime(self) -> str:
        """Empty when ready; else why not (the CRD is not served, listing is forbidden...)."""
        why = await self.discover(DISCOVERY_PATH, PLURAL, "PodGroup CRD (podgroups.scheduling.x-k8s.io)")
        if why:
            return why
        try:
            groups, _ = await self.client.list_all(f"{DISCOVERY_PATH}/{PLURAL}")
            pods, _ = await self.client.list_all("/api/v1/pods", {"labelSelector": POD_GROUP_LABEL})
        except ApiError as exc:
            return f"cannot list podgroups and member pods: {exc.status} {exc.reason} {exc.message}"
        except (TimeoutError, OSError) as exc:
            return f"cannot list podgroups and member pods: {exc!r}"
        for pod in pods:
            self.index.pod_event(None, pod)
        for pg in groups:
            self.index.podgroup_event(None, pg)
        return ""

    # -- reconciling ---------------------------------------------------------------------------

    async def reconcile(self, key: str) -> bool:
        """Write the group's status if it changed; True if a write was made."""
        pg = self.index.groups.get(key)
        if pg is None:
            return False
        old = pg.get("status") or {}
        patch = status_patch(old, next_status(pg, self.index.pods_of(key), _now()))
        if not patch:
            return False
        ns, name = key.split("/", 1)
        try:
            updated = await self.client.request(
                "PATCH", f"{DISCOVERY_PATH}/namespaces/{ns}/{PLURAL}/{name}/status", body={"status": patch},
                content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status == 404:          # deleted meanwhile; its DELETED event drops it
                return False
            raise
        self.writes += 1
        if isinstance(updated, dict) and self.index.groups.get(key) is pg:
            updated.get("metadata", {}).pop("managedFields", None)
            self.index.groups[key] = updated
        log.info("podgroup status updated", extra=kv(podgroup=key, phase=(updated or {}).get("status", {}).get(
            "phase") if isinstance(updated, dict) else None, patch=patch))
        return True
