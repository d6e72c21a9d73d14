"""Where is this pod really? Asked after a write of the binding cycle failed.

A failed bind (or PreBind write, or a binder extender's answer) says little about the pod: a 409
can mean "already bound" or "etcd was unavailable" (kube-apiserver answers ``409 Operation cannot
be fulfilled on pods/binding ...: rpc error: code = Unavailable`` during an etcd outage), a
timeout or a dropped connection can hide a bind that took effect, a 404 a pod deleted meanwhile.
kube-scheduler decides from its informer whether the pod is assigned, deleted or still pending,
and requeues it in the last case. ``locate`` does the same, and when the informer has not caught
up (it still shows the pod pending) asks the API server once, with a bounded timeout: a pod we
did bind must not be forgotten (its node would look free until the watch catches up), and a pod
still pending must go back to the queue whatever the error said.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote

from pysched.util.logs import kv

log = logging.getLogger("pysched.podlocation")

BOUND, GONE, PENDING, UNKNOWN = "bound", "gone", "pending", "unknown"
LOOKUP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Location:
    """``state``: BOUND (to ``node``), GONE (deleted, or replaced by a pod of another UID), PENDING
    (no node yet) or UNKNOWN (the API server could not be asked); ``source``: "informer" or "api"."""
    state: str
    node: str = ""
    source: str = "informer"


async def locate(pod, *, cache, queue, client, timeout: float = LOOKUP_TIMEOUT) -> Location:
    """Where ``pod`` (a PodInfo whose bind we attempted) is now: the informer's view first (a pod
    it shows bound - not merely assumed by us - or deleted), else one GET of the pod."""
    cached = cache.pods.get(pod.uid)
    if cached is not None and not cache.is_assumed(pod.uid):
        return Location(BOUND, cached.node_name)
    if pod.uid not in queue:
        return Location(GONE)
    return await lookup(client, pod.namespace, pod.name, pod.uid, timeout=timeout, what=pod.key)


async def lookup(client, namespace: str, name: str, uid: str, *, timeout: float = LOOKUP_TIMEOUT,
                 what: str = "") -> Location:
    """One GET of the pod: BOUND/PENDING from its ``spec.nodeName``, GONE when it is not there (or
    another UID has its name, or it has terminated), UNKNOWN when the API server did not answer."""
    if client is None:
        return Location(UNKNOWN)
    path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
    try:
        obj = await client.get(path, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any failure: we do not know, and must not guess
        if getattr(exc, "status", None) == 404:
            return Location(GONE, source="api")
        log.info("cannot look the pod up after a failed bind",
                 extra=kv(pod=what or f"{namespace}/{name}", error=str(exc) or type(exc).__name__))
        return Location(UNKNOWN, source="api")
    if not isinstance(obj, dict):
        return Location(UNKNOWN, source="api")
    meta = obj.get("metadata") or {}
    if uid and meta.get("uid") != uid:
        return Location(GONE, source="api")   # deleted and recreated under the same name
    status = obj.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return Location(GONE, source="api")
    node = (obj.get("spec") or {}).get("nodeName") or ""
    return Location(BOUND, node, source="api") if node else Location(PENDING, source="api")
