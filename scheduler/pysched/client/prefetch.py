"""The informers' first LISTs, sent before the scheduler has finished importing itself.

A cold ``pysched run`` spends about 0.3 s of CPU importing its modules (numpy, the plugins,
prometheus-client, aiohttp) before its informers can ask for anything, and then waits while the
API server encodes every node and pod. The two can overlap: right after the configuration and the
kubeconfig are read, ``ListPrefetch.start`` sends the node and pod LISTs from a thread of its own
(its own event loop, pysched's ``HTTPPool``: the same TLS and headers as every other request)
and keeps each page's raw bytes; the thread waits on sockets and holds the interpreter lock only
to copy what arrived. When the informers start, each takes its resource's pages
(``Reflector(prefetched=...)``), decodes them and carries on from the last continue token if the
prefetch stopped at its byte budget.

What it does not change: the LISTs are the very requests the reflector would have sent (same
path, field selector and page size), so the cache built from them is the same; a failure of any
kind (an error status, a refused connection, an unexpected body) only means the reflector LISTs
by itself, as without a prefetch. It bypasses the client's rate limiter (a handful of page
requests, once per process) and its request metrics count the pages when a reflector takes them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from dataclasses import dataclass, field
from urllib.parse import urlencode

import orjson

from pysched.client.auth import Credentials
from pysched.client.httppool import HTTPPool

log = logging.getLogger("pysched.client.prefetch")

# Raw bytes kept per resource before the prefetch stops and leaves the rest of the LIST to the
# reflector (from the last continue token): bounds the start-up memory on very large clusters.
BYTE_BUDGET = 64 * 1024 * 1024
REQUEST_TIMEOUT = 60.0

# The informers' LISTs (``app.SchedulerApp``'s reflectors): path and parameters by name. Pods that
# finished are never the scheduler's concern (kube-scheduler's informer filters them the same way).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# Objects per page of the informers' LISTs (client-go's pager's 500). Pages of 5,000 bound the first
# pod at 5,000 nodes and 21,000 listed pods 0.13 s sooner (1.27 -> 1.14 s, ``bench.startup``), but a
# decoded page is held whole while it is applied, and what it leaves behind stays in the resident
# set: peak RSS 181 -> 221 MiB there, and +20-30 MiB for the life of every replica started in the
# hour-long soak. A long-running process keeps the smaller pages.
INFORMER_PAGE_SIZE = 500
INFORMER_LISTS: dict[str, tuple[str, dict]] = {
    "nodes": ("/api/v1/nodes", {}),
    "pods": ("/api/v1/pods", {"fieldSelector": POD_FIELD_SELECTOR}),
}


@dataclass
class Prefetched:
    """One resource's LIST as far as the prefetch got: raw pages in order, the list's
    resourceVersion, and the continue token for the rest ("" when the LIST is complete)."""
    pages: list[bytes] = field(default_factory=list)
    resource_version: str = ""
    next_continue: str = ""
    statuses: list[int] = field(default_factory=list)   # one per request, for the client's metrics


class PrefetchError(RuntimeError):
    """The prefetch could not LIST a resource; the reflector LISTs it itself."""


def list_meta(raw: bytes) -> dict:
    """The ``metadata`` of a LIST response without decoding its items: the API server writes
    ``kind``, ``apiVersion`` and ``metadata`` before ``items``. Falls back to decoding it all."""
    cut = raw.find(b',"items":')
    if cut > 0 and raw[cut + 9:cut + 10] == b"[":
        try:
            head = orjson.loads(raw[:cut] + b"}")
            if isinstance(head, dict):
                return head.get("metadata") or {}
        except orjson.JSONDecodeError:
            pass
    body = orjson.loads(raw)
    if not isinstance(body, dict) or not isinstance(body.get("items", []), list):
        raise PrefetchError("the response is not a list")
    return body.get("metadata") or {}


class ListPrefetch:
    """Start with ``start``; each informer then calls ``take(name)`` once."""

    def __init__(self, creds: Credentials, lists: dict[str, tuple[str, dict]], *, page_size: int = INFORMER_PAGE_SIZE,
                 user_agent: str = "pysched", byte_budget: int = BYTE_BUDGET):
        self.base = creds.server.rstrip("/")
        ctx = creds.ssl_context()
        self.ssl = ctx or None
        self.server_name = creds.tls_server_name
        token = creds.bearer()   # read here, on the caller's thread: Credentials is not thread-safe
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.lists = lists
        self.page_size = page_size
        self.user_agent = user_agent
        self.byte_budget = byte_budget
        self.results: dict[str, concurrent.futures.Future[Prefetched]] = {
            name: concurrent.futures.Future() for name in lists}
        self._taken: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> ListPrefetch:
        self._thread = threading.Thread(target=self._run, name="list-prefetch", daemon=True)
        self._thread.start()
        return self

    def take(self, name: str) -> concurrent.futures.Future[Prefetched] | None:
        """The future of ``name``'s prefetched LIST (once; None after that or when not prefetched)."""
        if name in self._taken:
            return None
        self._taken.add(name)
        return self.results.get(name)

    def _run(self) -> None:
        try:
            asyncio.run(self._fetch_all())
        except BaseException as exc:  # noqa: BLE001 - reported through every unfinished future
            for fut in self.results.values():
                if not fut.done():
                    fut.set_exception(PrefetchError(f"prefetch failed: {exc!r}"))

    async def _fetch_all(self) -> None:
        pool = HTTPPool(self.base, self.ssl, limit=len(self.lists), server_hostname=self.server_name,
                        user_agent=self.user_agent)
        try:
            await asyncio.gather(*(self._fetch(name, path, params, pool)
                                   for name, (path, params) in self.lists.items()))
        finally:
            await pool.close()

    async def _fetch(self, name: str, path: str, params: dict, pool: HTTPPool) -> None:
        fut = self.results[name]
        out = Prefetched()
        query = dict(params)
        query["limit"] = str(self.page_size)
        held = 0
        try:
            while True:
                resp = await pool.request("GET", f"{path}?{urlencode(query)}", self.headers, timeout=REQUEST_TIMEOUT)
                out.statuses.append(resp.status)
                if resp.status != 200:
                    raise PrefetchError(f"LIST {path}: HTTP {resp.status}")
                meta = list_meta(resp.body)
                out.pages.append(resp.body)
                held += len(resp.body)
                out.resource_version = meta.get("resourceVersion") or out.resource_version
                cont = meta.get("continue") or ""
                if not cont:
                    break
                if held >= self.byte_budget:
                    out.next_continue = cont
                    break
                query = {k: v for k, v in query.items() if k not in ("resourceVersion", "resourceVersionMatch")}
                query["continue"] = cont
        except Exception as exc:  # noqa: BLE001 - any failure: the reflector lists by itself
            fut.set_exception(exc if isinstance(exc, PrefetchError) else PrefetchError(f"LIST {path}: {exc!r}"))
            return
        fut.set_result(out)
