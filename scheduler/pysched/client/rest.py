"""Async Kubernetes API client for the scheduler's own calls: binds, status patches, Events, Leases,
and the LIST/WATCH streams of the informers.

Requests go through ``httppool`` (a lean HTTP/1.1 keep-alive pool; aiohttp's per-request overhead
was a quarter of the scheduler's CPU in the 5,000-node benchmark), watches through its streams (a
connection each), and every body through orjson, because the generated client models cost far more than
the calls themselves on this path (and the official client cannot even decode a Binding response,
kubernetes-client/python#547). A client-go style token bucket enforces
``clientConnection.qps``/``burst``. Errors come back as ``ApiError`` carrying the HTTP status and
the API's ``Status.reason``/``message``; a 401 re-reads rotated credentials once. Every request,
watches' initial requests included, is counted in client-go's ``rest_client_*`` metrics
(``pysched.metrics.RestClientMetrics``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from pysched import __version__
from pysched.apis.core.errors import ApiError
from pysched.client.auth import Credentials
from pysched.client.httppool import HTTPPool
from pysched.metrics import METRICS, RestClientMetrics
from pysched.util import gctune

log = logging.getLogger("pysched.client.rest")
USER_AGENT = f"pysched/{__version__}"
LARGE_BODY = 256 * 1024   # responses at least this big are decoded with the cyclic GC paused


class TokenBucket:
    """client-go's flowcontrol token bucket: ``qps`` tokens per second, bursts up to ``burst``."""

    def __init__(self, qps: float, burst: int, clock=time.monotonic):
        self.rate = float(qps)
        self.capacity = float(max(1, burst))
        self.tokens = self.capacity
        self.clock = clock
        self.last = clock()

    def reserve(self) -> float:
        """Take a token; return how long the caller must wait before using it."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def available(self) -> float:
        """The tokens in the bucket now (negative: owed to callers already waiting), none taken."""
        if self.rate <= 0:
            return self.capacity
        return min(self.capacity, self.tokens + (self.clock() - self.last) * self.rate)

    def refund(self) -> None:
        """Give back a token taken by ``reserve`` that will not be used."""
        if self.rate > 0:
            self.tokens = min(self.capacity, self.tokens + 1.0)

    async def acquire(self, max_wait: float | None = None) -> bool:
        """Wait for a token; with ``max_wait``, fail at once (TimeoutError, token given back) when
        the wait would be longer, as client-go's limiter does for a request's context deadline.
        Returns whether it had to wait."""
        wait = self.reserve()
        if wait > 0:
            if max_wait is not None and wait > max_wait:
                self.refund()
                raise TimeoutError(f"client rate limiter: a token is {wait:.3g}s away, "
                                           f"beyond the request's {max(0.0, max_wait):.3g}s left")
            await asyncio.sleep(wait)
            return True
        return False


def retryable(exc: BaseException) -> bool:
    """Whether a failed write is worth sending again, as client-go retries: there was no answer from
    the server (a transport error, a timeout, a refusal of this client's own such as its rate
    limiter's), or the answer was 429 or a 5xx."""
    if not isinstance(exc, ApiError) or exc.status == 0:
        return True
    return exc.status == 429 or exc.status >= 500


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


WRITE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))


class KubeClient:
    """``fence`` (a ``scheduler.fence.WriteFence``), when set, is checked before every write goes out."""

    def __init__(self, creds: Credentials, *, qps: float = 50.0, burst: int = 100,
                 timeout: float = 30.0, max_connections: int = 64, user_agent: str = USER_AGENT,
                 fence=None):
        self.creds = creds
        self.fence = fence
        self.base = creds.server.rstrip("/")
        self.limiter = TokenBucket(qps, burst)
        self.timeout = timeout
        self.max_connections = max_connections
        self.user_agent = user_agent
        self._pool: HTTPPool | None = None
        self.requests_total = 0
        # client-go's host label: the server URL's host[:port]
        self.rest_metrics = RestClientMetrics(METRICS, urlsplit(self.base).netloc.rpartition("@")[2] or "none")
        self.closed = False

    @property
    def pool(self) -> HTTPPool:
        if self.closed:
            raise ApiError(0, "ClientClosed", "the client was closed (shutting down)")
        if self._pool is None:
            ctx = self.creds.ssl_context()
            self._pool = HTTPPool(self.base, ctx or None, limit=self.max_connections,
                                  server_hostname=self.creds.tls_server_name, user_agent=self.user_agent)
        return self._pool

    async def close(self) -> None:
        self.closed = True
        if self._pool is not None:
            await self._pool.close()
        self._pool = None

    def _headers(self, content_type: str | None = None) -> dict:
        h = {"Accept": "application/json"}
        tok = self.creds.bearer()
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        if content_type:
            h["Content-Type"] = content_type
        return h

    async def request(self, method: str, path: str, *, params: dict | None = None, body: Any = None,
                      content_type: str = "application/json", timeout: float | None = None,
                      rate_limit: bool = True, decode: bool = True) -> Any:
        """One API request. ``timeout`` bounds all of it - the rate limiter, a free connection,
        the response - and a write is checked against the fence after each of those waits.
        ``decode=False``: the caller ignores a successful answer (a bind's Status, the created
        Event), which is then not parsed; errors are decoded as always."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + (timeout or self.timeout)
        fence = self.fence if method in WRITE_METHODS else None
        if fence is not None:
            fence.check()  # fail fast: no token spent for a write that cannot go out
        metrics = self.rest_metrics
        if rate_limit and self.limiter.rate > 0:
            waited = await self.limiter.acquire(deadline - start)
            metrics.rate_limiter_wait(method, loop.time() - start if waited else 0.0)
        if body is None or isinstance(body, bytes):
            data = body
        else:
            data = body.encode() if isinstance(body, str) else _dumps(body)
        target = f"{path}?{urlencode(params)}" if params else path
        pool = self.pool
        guard = on_sent = None
        if fence is not None:
            guard, on_sent = fence.check, fence.sent
        try:
            for attempt in (0, 1):
                self.requests_total += 1
                try:
                    resp = await pool.request(method, target,
                                              self._headers(content_type if data is not None else None), data,
                                              deadline=deadline, guard=guard, on_sent=on_sent)
                except OSError:  # connection failure, timeout, TLS (not the fence: nothing was sent)
                    metrics.result(None, method)
                    raise
                metrics.result(resp.status, method)
                raw = resp.body
                if resp.status == 401 and attempt == 0:
                    self.creds.invalidate()
                    continue
                if resp.status >= 400:
                    raise _api_error(resp.status, raw)
                if not raw or not decode:
                    return None
                try:
                    if len(raw) < LARGE_BODY:
                        return orjson.loads(raw)
                    with gctune.paused():   # a LIST page: many acyclic objects, no collections
                        return orjson.loads(raw)
                except orjson.JSONDecodeError:
                    return raw.decode(errors="replace")
        finally:
            if fence is not None:
                fence.finished()
            metrics.duration(method, loop.time() - start)
        raise ApiError(401, "Unauthorized", "credentials rejected twice")

    # -- verbs the scheduler uses ----------------------------------------------------------------

    async def get(self, path: str, params: dict | None = None, timeout: float | None = None) -> Any:
        return await self.request("GET", path, params=params, timeout=timeout)

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None,
                       annotations: Mapping[str, str] | None = None) -> None:
        """POST the Binding; ``annotations`` are copied onto the pod by the API server as it binds."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding",
                           body=body, timeout=timeout, decode=False)

    async def patch_pod_status(self, namespace: str, name: str, patch: dict, *, rate_limit: bool = True) -> Any:
        """``rate_limit=False``: the caller took the limiter's token itself (``statuswriter``)."""
        return await self.request("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status",
                                  body=patch, content_type="application/strategic-merge-patch+json",
                                  rate_limit=rate_limit)

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> Any:
        """A graceful delete with the pod's own grace period. With ``uid``, only that pod: a pod
        recreated under the same name (a StatefulSet's) answers 409 Conflict instead of going."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}} if uid else None
        return await self.request("DELETE", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", body=body)

    async def create_event(self, namespace: str, event: dict, decode: bool = True) -> Any:
        return await self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events",
                                  body=event, decode=decode)

    async def patch_event(self, namespace: str, name: str, patch: dict) -> Any:
        return await self.request("PATCH", f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events/{quote(name)}",
                                  body=patch, content_type="application/merge-patch+json")

    # -- list / watch ----------------------------------------------------------------------------

    async def list_all(self, path: str, params: dict | None = None, page_size: int = 500,
                       timeout: float = 120.0) -> tuple[list[dict], str]:
        """Paginated LIST; returns (items, resourceVersion of the list)."""
        items: list[dict] = []
        rv = ""
        async for page, page_rv in self.list_pages(path, params, page_size=page_size, timeout=timeout):
            rv = page_rv
            items.extend(page)
        return items, rv

    async def list_pages(self, path: str, params: dict | None = None, page_size: int = 500,
                         timeout: float = 120.0) -> AsyncIterator[tuple[list[dict], str]]:
        """Paginated LIST, one page at a time: yields (items of the page, resourceVersion of the
        list). A caller that handles each page before asking for the next holds one page of decoded
        objects at a time, not the whole list (at 10,000 pods that is tens of MiB of peak memory).
        The next page is requested before this one is yielded, so the API server prepares it while
        the caller handles this one (at most two pages are in memory)."""
        p = dict(params or {})
        if page_size:
            p["limit"] = str(page_size)
        rv = ""
        pending = asyncio.ensure_future(self.request("GET", path, params=p, timeout=timeout))
        try:
            while True:
                data = await pending
                meta = data.get("metadata") or {}
                rv = meta.get("resourceVersion") or rv
                cont = meta.get("continue")
                if cont:
                    p = {k: v for k, v in p.items() if k not in ("resourceVersion", "resourceVersionMatch")}
                    p["continue"] = cont
                    pending = asyncio.ensure_future(self.request("GET", path, params=p, timeout=timeout))
                yield data.get("items") or [], rv
                if not cont:
                    return
        finally:
            if not pending.done():   # the caller stopped early: the prefetched page is not wanted
                pending.cancel()
            pending.add_done_callback(_consume)

    async def watch(self, path: str, params: dict, *, idle_timeout: float = 90.0) -> AsyncIterator[dict]:
        """Yield decoded watch events until the server closes the stream."""
        metrics = self.rest_metrics
        if self.limiter.rate > 0:
            start = time.monotonic()
            waited = await self.limiter.acquire()
            metrics.rate_limiter_wait("GET", time.monotonic() - start if waited else 0.0)
        q = dict(params)
        q["watch"] = "true"
        try:
            stream = await self.pool.open_stream("GET", f"{path}?{urlencode(q)}", self._headers(),
                                                 idle_timeout=idle_timeout)
        except OSError:  # no response (TimeoutError is an OSError)
            metrics.result(None, "GET")
            raise
        metrics.result(stream.status, "GET")
        try:
            if stream.status == 401:
                self.creds.invalidate()
            if stream.status >= 400:
                raise _api_error(stream.status, await stream.read_all())
            buf = b""
            async for chunk in stream.chunks():
                if b"\n" not in chunk:
                    buf += chunk
                    continue
                *lines, rest = (buf + chunk).split(b"\n")
                buf = rest
                for line in lines:
                    if line:
                        yield orjson.loads(line)
            if buf.strip():
                yield orjson.loads(buf)
        finally:
            stream.close()


def _consume(fut: asyncio.Future) -> None:
    """Retrieve an abandoned request's outcome, so asyncio does not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()


def _api_error(status: int, raw: bytes) -> ApiError:
    reason, message, body = "", "", None
    try:
        body = orjson.loads(raw)
        if isinstance(body, dict):
            reason = body.get("reason") or ""
            message = body.get("message") or ""
    except orjson.JSONDecodeError:
        message = raw.decode(errors="replace")[:500]
    return ApiError(status, reason, message, body)
