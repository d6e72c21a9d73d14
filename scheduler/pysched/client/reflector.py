"""Reflector: LIST then WATCH one resource into handler callbacks, like client-go's reflector.

* LIST (paginated, each page handed to the handlers as it arrives, so only one page of decoded
  objects is held at a time), remember the list's resourceVersion, then WATCH from it with
  bookmarks; a watch that ends (server timeout, dropped connection) resumes from the last
  resourceVersion seen.
* "410 Gone" (the resourceVersion was compacted away) or any watch error: LIST again. Every LIST
  is diffed against what this reflector has delivered, so an object that vanished while we were
  not watching gets a synthetic delete - a missed DELETED can never leave a stale pod.
* No periodic re-list by default, like client-go's reflector: a watch resumed from the last
  resourceVersion (kept fresh by bookmarks) misses nothing, and a LIST of every pod decodes the
  whole cluster again - the hour-long soak showed each one raising the resident set to a new
  high-water mark. ``resync_period`` > 0 (``--resync-period``) re-lists on purpose every so many
  seconds (jittered), for a user who wants to bound how long any divergence could live.
* Events are decoded with orjson into plain dicts and handed to synchronous handlers on the
  event loop; objects whose resourceVersion did not change are not re-delivered on a relist.
* ``refused_retry`` (the low-volume kinds of ``client.objectstore``): a LIST or WATCH the API
  server refuses for good - 404 for a CustomResourceDefinition not installed (PodGroups), 403 when
  RBAC does not allow it, another client error that retrying at once will not change - is tried
  again every ``refused_retry`` seconds, so a CRD installed (or a permission granted) later is
  listed and watched from then on. A kind refused before it was ever listed counts as empty, and
  the informer is synced; one listed before keeps what it has through one refusal (a custom
  resource answers 404 for a moment while an API server starts) and is emptied on the second in a
  row (the CRD was removed). Without it (Pods, Nodes) every failure is retried with backoff and
  the informer is not synced until a LIST succeeds.

Why not kopf for these streams: measured on this machine against kube-apiserver 1.35, kopf's
``on.event`` path cost 1.03 ms CPU per pod event (it deep-copies every body to build a diff
base) against 0.055 ms for this reflector: 19x. The low-volume kinds moved here too: on a living
cluster the ReplicaSets' status changes with every pod that turns Ready, and kopf's thread was 45 %
of a standby replica's CPU in the soak (``bench/PROFILE.md``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable

import orjson

from pysched.client.prefetch import Prefetched, PrefetchError
from pysched.client.rest import ApiError, KubeClient
from pysched.metrics import METRICS
from pysched.util import gctune
from pysched.util.logs import kv, process_uptime

log = logging.getLogger("pysched.client.reflector")


class _Relist(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def refused_for_good(exc: ApiError) -> bool:
    """A client error that retrying at once will not change: the resource is not served (404: a
    CRD not installed), not allowed (403)... Not 401 (credentials are refreshed and the request
    retried), 408, 410 (a re-list) or 429."""
    return 400 <= exc.status < 500 and exc.status not in (401, 408, 410, 429)


def uid_key(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""


def name_key(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


class Reflector:
    def __init__(self, client: KubeClient, *, name: str, path: str,
                 on_upsert: Callable[[dict], None], on_delete: Callable[[str, dict | None], None],
                 key: Callable[[dict], str] = uid_key, params: dict | None = None,
                 resync_period: float = 0.0, page_size: int = 500, watch_timeout: int = 300,
                 prefetched: concurrent.futures.Future[Prefetched] | None = None,
                 batch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                 refused_retry: float | None = None, quiet_statuses: frozenset[int] = frozenset()):
        """``batch``: a context each LIST page is delivered inside (``ClusterEvents.batch``: the
        page's cluster events coalesced into one requeue). ``refused_retry``: see the module's
        docstring; a refusal with a status in ``quiet_statuses`` (404 for an optional CRD) is
        logged at info, any other at warning."""
        self.client = client
        self.name = name
        self.path = path
        self.params = dict(params or {})
        self.on_upsert = on_upsert
        self.on_delete = on_delete
        self.key = key
        self.resync_period = resync_period
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.prefetched = prefetched   # the first LIST, already under way (``client.prefetch``)
        self.batch = batch
        self.refused_retry = refused_retry
        self.quiet_statuses = quiet_statuses
        self.refused: int | None = None   # the status of the refusal in force, if any
        self.refusals = 0                  # refusals in a row
        self.known: dict[str, str] = {}  # key -> resourceVersion delivered
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.lists = 0
        self.events = 0
        self._counter = {t: METRICS.informer_events.labels(name, t) for t in ("ADDED", "MODIFIED", "DELETED")}
        self._handler_seconds = METRICS.informer_handler_seconds.labels(name)

    async def run(self) -> None:
        backoff = 0.5
        reason = "initial"
        while True:
            try:
                await self._list(reason)
                backoff = 0.5
                deadline = (time.monotonic() + self.resync_period * (1 + 0.2 * random.random())
                            if self.resync_period > 0 else float("inf"))
                await self._watch_loop(deadline)
            except asyncio.CancelledError:
                raise
            except _Relist as r:
                reason = r.reason
            except ApiError as exc:
                if self.refused_retry is not None and refused_for_good(exc):
                    self._refused(exc)
                    reason = "refused"
                    await asyncio.sleep(self.refused_retry)
                    continue
                reason = "error"
                log.warning("list failed; retrying", extra=kv(resource=self.name, error=str(exc) or repr(exc),
                                                               retry_in=f"{backoff:.1f}s"))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
            except (OSError, ValueError) as exc:
                reason = "error"
                log.warning("list failed; retrying", extra=kv(resource=self.name, error=str(exc) or repr(exc),
                                                               retry_in=f"{backoff:.1f}s"))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    def _refused(self, exc: ApiError) -> None:
        """A LIST or WATCH refused for good (``refused_retry``): empty unless listed before and
        refused only once in a row."""
        self.refusals += 1
        keep = self.lists > 0 and self.refusals < 2
        emptying = not keep and bool(self.known)
        if self.refused != exc.status or emptying:
            (log.info if exc.status in self.quiet_statuses else log.warning)(
                "refused; keeping what was listed and retrying" if keep else
                "list refused; treating the resource as empty and retrying", extra=kv(
                    resource=self.name, status=exc.status, error=exc.message, retry_in=f"{self.refused_retry:g}s",
                    objects=len(self.known)))
        self.refused = exc.status
        self.resource_version = ""
        if not keep:
            with self.batch():
                self._remove_unseen({})
        self.synced.set()

    async def _list(self, reason: str) -> None:
        got = await self._take_prefetched() if reason == "initial" else None
        if got is not None:
            seen, rv = await self._apply_pages(self._prefetched_pages(got))
        else:
            seen, rv = await self._list_from_server(reason)
        if self.refused is not None:
            log.info("list accepted; following the resource", extra=kv(resource=self.name, objects=len(seen)))
            self.refused = None
        self.refusals = 0
        self.lists += 1
        METRICS.informer_relists.labels(self.name, reason).inc()
        self._remove_unseen(seen)
        self.resource_version = rv
        if not self.synced.is_set():
            log.info("informer synced", extra=kv(resource=self.name, objects=len(seen),
                                                 since_start_s=round(process_uptime(), 2)))
        self.synced.set()

    async def _list_from_server(self, reason: str) -> tuple[dict[str, str], str]:
        params = dict(self.params)
        if self.resource_version and reason != "initial":
            # Served from the watch cache, at least as fresh as anything we have seen.
            params["resourceVersion"] = self.resource_version
            params["resourceVersionMatch"] = "NotOlderThan"
        try:
            return await self._apply_pages(self.client.list_pages(self.path, params, page_size=self.page_size))
        except ApiError as exc:
            if exc.status == 410 and "resourceVersion" in params:
                return await self._apply_pages(self.client.list_pages(self.path, dict(self.params),
                                                                      page_size=self.page_size))
            raise

    async def _take_prefetched(self) -> Prefetched | None:
        """The prefetched first LIST, or None (none was started, or it failed: LIST as usual)."""
        fut, self.prefetched = self.prefetched, None
        if fut is None:
            return None
        try:
            got = await asyncio.wrap_future(fut)
        except PrefetchError as exc:
            log.info("prefetched list failed; listing", extra=kv(resource=self.name, error=str(exc)))
            return None
        for status in got.statuses:
            self.client.rest_metrics.result(status, "GET")
        return got

    async def _prefetched_pages(self, got: Prefetched) -> AsyncIterator[tuple[list[dict], str]]:
        """The prefetched pages, decoded one at a time (each dropped once decoded), then the rest
        of the LIST from the prefetch's last continue token if it stopped at its byte budget."""
        while got.pages:
            raw = got.pages.pop(0)
            with gctune.paused():
                body = orjson.loads(raw)
            del raw
            yield body.get("items") or [], got.resource_version
        if got.next_continue:
            params = dict(self.params)
            params["continue"] = got.next_continue
            async for items, _ in self.client.list_pages(self.path, params, page_size=self.page_size):
                yield items, got.resource_version

    async def _apply_pages(self, pages: AsyncIterator[tuple[list[dict], str]]) -> tuple[dict[str, str], str]:
        """Deliver each page of the LIST as it arrives (objects whose resourceVersion we have not
        delivered yet); return every listed key with its resourceVersion, and the list's."""
        seen: dict[str, str] = {}
        known = self.known
        rv = ""
        async for items, page_rv in pages:
            rv = page_rv
            with self.batch():
                for obj in items:
                    k = self.key(obj)
                    orv = (obj.get("metadata") or {}).get("resourceVersion") or ""
                    seen[k] = orv
                    if known.get(k) != orv:
                        self._safe(self.on_upsert, obj)
                        # Known at once: should a later page fail, the next LIST still owes this
                        # object a delete if it is gone by then.
                        known[k] = orv
        return seen, rv

    def _remove_unseen(self, seen: dict[str, str]) -> None:
        """After a complete LIST: what we delivered but the list no longer has was deleted while we
        were not watching."""
        gone = [k for k in self.known if k not in seen]
        self.known = seen
        for k in gone:
            log.info("object disappeared while not watching; deleting", extra=kv(resource=self.name, key=k))
            self._safe_delete(k, None)

    async def _watch_loop(self, deadline: float) -> None:
        backoff = 0.2
        while True:
            if time.monotonic() > deadline:
                raise _Relist("resync")
            params = dict(self.params)
            params.update({"resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
                           "timeoutSeconds": str(int(self.watch_timeout * (1 + random.random())))})
            try:
                async for ev in self.client.watch(self.path, params):
                    self._dispatch(ev)
                    if time.monotonic() > deadline:
                        raise _Relist("resync")
                backoff = 0.2
            except ApiError as exc:
                if exc.status == 410:
                    raise _Relist("expired") from None
                if self.refused_retry is not None and refused_for_good(exc):
                    raise   # the refused path: tried again every refused_retry seconds, not at once
                log.warning("watch failed", extra=kv(resource=self.name, error=str(exc)))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                if exc.status >= 500 or exc.status == 429:
                    continue
                raise _Relist("error") from None
            except OSError as exc:
                log.info("watch interrupted; resuming", extra=kv(resource=self.name, error=str(exc) or repr(exc),
                                                                 resource_version=self.resource_version))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    def _dispatch(self, ev: dict) -> None:
        typ = ev.get("type") or ""
        obj = ev.get("object") or {}
        if typ == "BOOKMARK":
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = rv
            return
        if typ == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Relist("expired")
            log.warning("watch error event", extra=kv(resource=self.name, code=code, message=obj.get("message")))
            raise _Relist("error")
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion") or ""
        if rv:
            self.resource_version = rv
        k = self.key(obj)
        self.events += 1
        c = self._counter.get(typ)
        if c is not None:
            c.inc()
        started = time.perf_counter()
        if typ == "DELETED":
            self.known.pop(k, None)
            self._safe_delete(k, obj)
        elif typ in ("ADDED", "MODIFIED"):
            self.known[k] = rv
            self._safe(self.on_upsert, obj)
        self._handler_seconds.inc(time.perf_counter() - started)

    def _safe(self, fn, obj) -> None:
        try:
            fn(obj)
        except Exception:  # noqa: BLE001 - one bad object must not stop the informer
            meta = obj.get("metadata") or {}
            log.exception("handler failed", extra=kv(resource=self.name,
                                                     object=f"{meta.get('namespace', '')}/{meta.get('name', '')}"))

    def _safe_delete(self, key: str, obj) -> None:
        try:
            self.on_delete(key, obj)
        except Exception:  # noqa: BLE001
            log.exception("delete handler failed", extra=kv(resource=self.name, key=key))
