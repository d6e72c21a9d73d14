"""The ElasticQuota status controller: keeps ``status.used`` of ``scheduling.x-k8s.io/v1alpha1``
ElasticQuotas current, as scheduler-plugins' ElasticQuota controller does.

It runs in the scheduler process and only while this replica leads (``app`` starts it once the
Lease is held and cancels it when the Lease is lost), and only when a profile enables
CapacityScheduling (``--elasticquota-controller auto``; ``off`` leaves status to another
controller):

* **Watching** ElasticQuotas is kopf's job, embedded (``client.kopf_watch``: standalone, read-only
  ``on.event`` handlers, nothing patched or given a finalizer by kopf). Pods are not watched a
  second time: the usage comes from the CapacityScheduling plugin, which already follows every
  pod through the scheduler's informer and calls back with each namespace whose usage changed.
* **Reconciling** a namespace writes, for each of its quotas, ``status.used``: every resource its
  ``spec.min`` or ``spec.max`` names (0 when unused) and any other resource its pods use, summed
  over the namespace's pods on a node and not terminated (upstream counts Running pods only). A
  write is a JSON merge patch of the ``status`` subresource through our own ``KubeClient``, which
  carries the scheduler's write fence: a replica that cannot prove it leads writes nothing. A
  status that already says the same amounts (compared as quantities) is not written.
* **Absent CRD**: start-up never fails on it; API discovery is checked every ``retry_period``
  seconds and the controller starts watching when the CRD appears.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pysched.apis.core.errors import ApiError
from pysched.apis.core.quantity import format_resource, resource_value
from pysched.client.auth import Credentials
from pysched.client.kopf_watch import KopfWatch, WatchSpec
from pysched.client.rest import KubeClient
from pysched.controllers.base import LeaderController
from pysched.util.logs import kv

log = logging.getLogger("pysched.controllers.elasticquota")

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"
DISCOVERY_PATH = f"/apis/{GROUP}/{VERSION}"
MODES = ("auto", "off")


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _amounts(raw: object) -> dict[str, int]:
    out: dict[str, int] = {}
    if isinstance(raw, dict):
        for name, q in raw.items():
            try:
                out[str(name)] = resource_value(str(name), q)
            except (ValueError, TypeError):
                out[str(name)] = -1          # unreadable: differs from anything we would write
    return out


def desired_used(eq: dict, usage: dict[str, int]) -> dict[str, str]:
    """``status.used`` for quota ``eq`` given its namespace's usage (amounts as the scheduler counts)."""
    spec = eq.get("spec") or {}
    names: set[str] = set()
    for part in ("min", "max"):
        if isinstance(spec.get(part), dict):
            names.update(str(k) for k in spec[part])
    names.update(k for k, v in usage.items() if v)
    return {r: format_resource(r, usage.get(r, 0)) for r in sorted(names)}


def used_patch(eq: dict, used: dict[str, str]) -> dict | None:
    """The merge patch making ``status.used`` read ``used`` (None when it already does)."""
    current = (eq.get("status") or {}).get("used") or {}
    want = {r: resource_value(r, q) for r, q in used.items()}
    if _amounts(current) == want:
        return None
    patch: dict[str, str | None] = dict(used)
    if isinstance(current, dict):
        patch.update({k: None for k in current if k not in used})
    return {"status": {"used": patch}}


class ElasticQuotaIndex:
    """ElasticQuotas by namespace, fed by watch events; ``on_change(namespace)`` per touched one."""

    def __init__(self, on_change: Callable[[str], None]):
        self.quotas: dict[str, dict[str, dict]] = {}     # namespace -> key -> ElasticQuota
        self.on_change = on_change

    def event(self, typ: str | None, obj: dict) -> None:
        key = _key(obj)
        ns = key.split("/", 1)[0]
        if typ == "DELETED":
            self.quotas.get(ns, {}).pop(key, None)
            return
        obj.get("metadata", {}).pop("managedFields", None)
        self.quotas.setdefault(ns, {})[key] = obj
        self.on_change(ns)


class ElasticQuotaController(LeaderController):
    what = "elasticquota controller"
    key_name = "namespace"
    log = log

    def __init__(self, client: KubeClient, creds: Credentials, usage_of: Callable[[str], dict[str, int]], *,
                 retry_period: float = 10.0, workers: int = 2, qps: float = 20.0, burst: int = 50,
                 watch_factory: Callable[[Credentials, list[WatchSpec]], KopfWatch] = KopfWatch):
        super().__init__(client, creds, retry_period=retry_period, workers=workers, qps=qps, burst=burst,
                         watch_factory=watch_factory)
        self.usage_of = usage_of
        self.index = ElasticQuotaIndex(self.queue.add)

    def usage_changed(self, namespace: str) -> None:
        """The plugin's callback: a namespace's usage changed (only quota namespaces are queued)."""
        if namespace in self.index.quotas and self.started.is_set():
            self.queue.add(namespace)

    def started_fields(self) -> dict[str, object]:
        return {"quotas": sum(len(v) for v in self.index.quotas.values())}

    def watch_specs(self) -> list[WatchSpec]:
        return [WatchSpec(GROUP, VERSION, PLURAL, self.index.event)]

    def after_start(self) -> None:
        for ns in list(self.index.quotas):
            self.queue.add(ns)

    async def prime(self) -> str:
        """Empty when ready; else why not (the CRD is not served, listing is forbidden...)."""
        why = await self.discover(DISCOVERY_PATH, PLURAL, "ElasticQuota CRD (elasticquotas.scheduling.x-k8s.io)")
        if why:
            return why
        try:
            quotas, _ = await self.client.list_all(f"{DISCOVERY_PATH}/{PLURAL}")
        except ApiError as exc:
            return f"cannot list elasticquotas: {exc.status} {exc.reason} {exc.message}"
        except (TimeoutError, OSError) as exc:
            return f"cannot list elasticquotas: {exc!r}"
        for eq in quotas:
            self.index.event(None, eq)
        return ""

    # -- reconciling ---------------------------------------------------------------------------

    async def reconcile(self, namespace: str) -> int:
        """Write ``status.used`` of the namespace's quotas that changed; how many were written."""
        usage = self.usage_of(namespace)
        written = 0
        for key, eq in list(self.index.quotas.get(namespace, {}).items()):
            used = desired_used(eq, usage)
            patch = used_patch(eq, used)
            if patch is None:
                continue
            name = key.split("/", 1)[1]
            try:
                updated = await self.client.request(
                    "PATCH", f"{DISCOVERY_PATH}/namespaces/{namespace}/{PLURAL}/{name}/status", body=patch,
                    content_type="application/merge-patch+json")
            except ApiError as exc:
                if exc.status == 404:        # deleted before the watch saw it: forget it
                    self.index.quotas.get(namespace, {}).pop(key, None)
                    continue
                raise
            self.writes += 1
            written += 1
            if isinstance(updated, dict) and self.index.quotas.get(namespace, {}).get(key) is eq:
                updated.get("metadata", {}).pop("managedFields", None)
                self.index.quotas[namespace][key] = updated
            log.info("elasticquota status updated", extra=kv(elasticquota=key, used=used))
        return written
