"""The process's informers: each LISTs, then WATCHes, into the cache and the queue or the object store.

Nodes and pods feed the event handlers (``Profiles.handlers``) on the main client; the API server
may have answered their first LISTs already (``client.prefetch``: sent while the process was
imported and built). Each low-volume kind the plugins read (``Profiles.object_kinds``) feeds the
object store, and the failed pods are watched for a kubelet's rejection of a pod we bound (the pod
informer cannot tell: a pod leaving its field selector arrives as a DELETED carrying its state
before), both on the informers' own client. ``synced`` is set once nodes and pods have listed;
start-up waits for the object kinds too (``wait_synced``).
"""

from __future__ import annotations

import asyncio
import functools

from pysched.assembly.clients import Clients
from pysched.assembly.options import Options
from pysched.assembly.profiles import Profiles
from pysched.client.objectstore import OPTIONAL, api_path, store_key
from pysched.client.prefetch import INFORMER_LISTS, INFORMER_PAGE_SIZE, ListPrefetch
from pysched.client.reflector import Reflector, name_key, uid_key


class Informers:
    def __init__(self, options: Options, clients: Clients, profiles: Profiles, prefetch: ListPrefetch | None):
        handlers = profiles.handlers

        def informer(kind: str, on_upsert, on_delete, key) -> Reflector:
            """The node or pod informer, on the main client; its first LIST may have been answered."""
            path, params = INFORMER_LISTS[kind]
            return Reflector(clients.client, name=kind, path=path, params=params, on_upsert=on_upsert,
                             on_delete=on_delete, key=key, resync_period=options.resync_period,
                             prefetched=prefetch.take(kind) if prefetch is not None else None,
                             batch=profiles.cluster_events.batch, page_size=INFORMER_PAGE_SIZE)

        self.node_reflector = informer("nodes", handlers.node_upsert, handlers.node_delete, name_key)
        self.pod_reflector = informer("pods", handlers.pod_upsert, handlers.pod_delete, uid_key)
        self.object_reflectors = [self._object_reflector(plural, options, clients, profiles)
                                  for plural in profiles.object_kinds]
        self.failed_reflector = Reflector(clients.informer_client, name="failed-pods", path=INFORMER_LISTS["pods"][0],
                                          params={"fieldSelector": "status.phase=Failed"},
                                          on_upsert=self.on_failed_pod, on_delete=lambda key, obj: None,
                                          key=uid_key, page_size=INFORMER_PAGE_SIZE)
        self.handlers = handlers
        self._failed_seen: set[str] = set()
        self.synced = asyncio.Event()

    @staticmethod
    def _object_reflector(plural: str, options: Options, clients: Clients, profiles: Profiles) -> Reflector:
        on_upsert, on_delete = profiles.objects.informer_handlers(plural)
        return Reflector(clients.informer_client, name=plural, path=api_path(plural), on_upsert=on_upsert,
                         on_delete=on_delete,
                         key=functools.partial(store_key, plural), resync_period=options.resync_period,
                         batch=profiles.cluster_events.batch, page_size=INFORMER_PAGE_SIZE,
                         refused_retry=max(0.1, options.optional_crd_poll_seconds),
                         quiet_statuses=frozenset({404}) if plural in OPTIONAL else frozenset())

    @property
    def reflectors(self) -> list[Reflector]:
        """Every informer, in the order they start."""
        return [self.node_reflector, self.pod_reflector, *self.object_reflectors, self.failed_reflector]

    def on_failed_pod(self, obj: dict) -> None:
        """A pod that failed after our LIST of failed pods (those before are not news), once."""
        if not self.failed_reflector.synced.is_set():
            return
        uid = (obj.get("metadata") or {}).get("uid") or ""
        if uid in self._failed_seen:
            return
        if len(self._failed_seen) > 50000:
            self._failed_seen.clear()
        self._failed_seen.add(uid)
        self.handlers.note_kubelet_rejection(obj)

    async def wait_synced(self) -> None:
        """Until every informer but the failed pods' has listed once; ``synced`` is set as soon as
        nodes and pods have."""
        await asyncio.gather(self._nodes_and_pods_synced(), *(r.synced.wait() for r in self.object_reflectors))

    async def _nodes_and_pods_synced(self) -> None:
        await self.node_reflector.synced.wait()
        await self.pod_reflector.synced.wait()
        self.synced.set()
