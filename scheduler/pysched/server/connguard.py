"""Bounded memory and quiet logs for an aiohttp server facing hostile clients.

Each connection that trickles request headers holds them in memory until the header timeout: 300
slow connections each sending 100 x 8 KiB headers took ``pysched extender`` from 112 to 557 MiB,
past its Deployment's 512Mi limit. ``ConnectionGuard`` bounds that product:

* **connections** - at most ``max_connections`` at once, and at most ``max_per_client`` from one
  client address. A connection past a cap evicts the oldest one that has no request being handled
  (a slow sender still delivering headers, or an idle kept-alive connection) - of the same client
  when that client is over its share, else of anyone - so a flood of slow clients cannot keep a
  legitimate caller out: a flood from one address only ever evicts its own connections, and a
  request that arrives in milliseconds is handled before it becomes the oldest. Only when every
  connection is busy in a handler is a newcomer turned away (503). Evictions and refusals are
  counted in ``pysched_http_connections_shed_total{server,reason}``.
* **headers per connection** - at most ``max_headers`` fields of at most ``max_field_size``
  bytes (aiohttp's parser refuses more with 431/400), so one connection holds at most
  ``max_headers * max_field_size`` bytes of headers.
* **request bodies** - at most ``body_budget`` bytes of bodies being read at once across all
  connections (``take_body``); a request that would exceed it is answered 503.

Malformed requests (too many or too long headers, bad request lines) are logged once per client
per ``log_interval`` at warning level, with no traceback - the volume is the attacker's to choose -
and counted in ``pysched_http_requests_rejected_total{server,reason}``. A traceback is logged only
for an error that is ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from pysched.metrics import METRICS
from pysched.util.logs import kv

DEFAULT_MAX_CONNECTIONS = 128
DEFAULT_MAX_HEADERS = 64          # fields per request (aiohttp's default: 128)
DEFAULT_MAX_FIELD_SIZE = 8190     # bytes per header line (aiohttp's and Go's default)
LOG_INTERVAL = 60.0
MIN_PENDING = 512
HANDSHAKE_GRACE = 120.0           # longer than asyncio's TLS handshake timeout (60 s)
# Header budget per connection: DEFAULT_MAX_HEADERS * DEFAULT_MAX_FIELD_SIZE = 512 KiB; with the
# default cap of 128 connections, 64 MiB of headers at most.
_MAX_TRACKED_CLIENTS = 10_000

BUSY_REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                b"Retry-After: 1\r\nContent-Length: 44\r\n\r\ntoo many connections in use; try again soon\n")


class ConnectionGuard:
    def __init__(self, name: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_per_client: int | None = None, max_headers: int = DEFAULT_MAX_HEADERS,
                 max_field_size: int = DEFAULT_MAX_FIELD_SIZE, body_budget: int = 0,
                 log_interval: float = LOG_INTERVAL, logger: logging.Logger | None = None):
        if max_connections <= 0:
            raise ValueError(f"max connections must be greater than zero, got {max_connections}")
        self.name = name
        self.max_connections = max_connections
        self.max_per_client = max_per_client or max(4, max_connections // 4)
        # TLS handshakes under way (the client is not known until one completes): each holds tens of
        # KiB, and asyncio gives up on one after 60 s.
        self.max_pending = max(MIN_PENDING, 4 * max_connections)
        self.max_headers = max_headers
        self.max_field_size = max_field_size
        self.body_budget = body_budget          # 0: no budget
        self.body_in_use = 0
        self.log = logger or logging.getLogger(f"pysched.server.{name}")
        self.quiet = QuietServerLog(self, log_interval)
        self._pending: dict[Any, float] = {}               # accepted, not handed over yet (TLS handshake)
        self._live: dict[Any, str] = {}                    # handler -> client address, oldest first
        self._per_client: dict[str, int] = {}
        self._busy: set[Any] = set()                       # handlers running a request handler now
        for reason in ("evicted", "refused"):
            METRICS.http_connections_shed.labels(name, reason)

    # -- wiring ---------------------------------------------------------------------------------

    def runner_kwargs(self) -> dict:
        """Keyword arguments for ``web.AppRunner``: the header limits and the quiet logger."""
        return {"max_headers": self.max_headers, "max_field_size": self.max_field_size,
                "max_line_size": self.max_field_size, "logger": self.quiet}

    def install(self, runner: web.BaseRunner) -> None:
        """After ``runner.setup()``, before any site starts: every new connection passes the gate."""
        server = runner.server
        assert server is not None, "install() goes after runner.setup()"
        # The protocol factory TCPSite uses; aiohttp types it as its Server class, which _GatedServer
        # stands in for by delegation (it is not a subclass).
        runner._server = _GatedServer(server, self)  # type: ignore[assignment]  # noqa: SLF001

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        """Marks the connection busy while its request is handled (it must not be evicted then)."""
        proto = request.protocol
        self._busy.add(proto)
        try:
            return await handler(request)
        finally:
            self._busy.discard(proto)

    @property
    def connections(self) -> int:
        return len(self._live)

    # -- the gate ---------------------------------------------------------------------------------

    def accept(self) -> bool:
        """A connection is being accepted (its client is not known yet). False: turn it away -
        every connection is busy in a handler, or ``max_pending`` TLS handshakes are under way."""
        if len(self._pending) >= self.max_pending:
            cutoff = time.monotonic() - HANDSHAKE_GRACE
            for h in [h for h, t in self._pending.items() if t < cutoff]:
                del self._pending[h]   # a handshake that failed: asyncio never says so
        if len(self._pending) >= self.max_pending or (
                len(self._live) >= self.max_connections and all(h in self._busy for h in self._live)):
            METRICS.http_connections_shed.labels(self.name, "refused").inc()
            self.quiet.note("", "connection refused: every connection is busy", "busy")
            return False
        return True

    def created(self, handler) -> None:
        self._pending[handler] = time.monotonic()

    def made(self, handler, transport) -> None:
        """The connection is handed to the HTTP server: make room for it if a cap is passed - the
        oldest idle connection of the same client first, then the oldest idle one of anyone."""
        self._pending.pop(handler, None)
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self._live[handler] = client
        count = self._per_client.get(client, 0) + 1
        self._per_client[client] = count
        if count > self.max_per_client:
            self._evict(handler, client)
        elif len(self._live) > self.max_connections:
            self._evict(handler, None)

    def lost(self, handler) -> None:
        self._pending.pop(handler, None)
        self._busy.discard(handler)
        client = self._live.pop(handler, None)
        if client is not None:
            self._forget_client(client)

    def _evict(self, newcomer, client: str | None) -> None:
        for h, c in self._live.items():   # oldest first
            if h is not newcomer and h not in self._busy and (client is None or c == client):
                del self._live[h]
                self._forget_client(c)
                METRICS.http_connections_shed.labels(self.name, "evicted").inc()
                self.quiet.note(c, "connection closed to make room: it sent no complete request", "evicted")
                h.force_close()
                return

    def _forget_client(self, client: str) -> None:
        n = self._per_client.get(client, 0) - 1
        if n > 0:
            self._per_client[client] = n
        else:
            self._per_client.pop(client, None)

    # -- request bodies ---------------------------------------------------------------------------

    def take_body(self, size: int) -> bool:
        """Hold ``size`` bytes of the body budget while a body is read and decoded (``give_body``
        after). False when that would pass the budget - unless nothing is held: one request up to
        the body size limit always gets through."""
        if self.body_budget and self.body_in_use and self.body_in_use + size > self.body_budget:
            return False
        self.body_in_use += size
        return True

    def give_body(self, size: int) -> None:
        self.body_in_use -= size


class _GatedServer:
    """The aiohttp ``Server`` behind the guard: it creates each connection's protocol (refusing
    when the guard says so), and hears of each connection made and lost before the server does.
    Everything else passes through."""

    def __init__(self, server: web.Server, guard: ConnectionGuard):
        self._server = server
        self._guard = guard

    def __call__(self):
        if not self._guard.accept():
            return _Refuse()
        handler = self._server()
        handler._manager = self   # noqa: SLF001 - so connection_made/lost come here first
        self._guard.created(handler)
        return handler

    def connection_made(self, handler, transport) -> None:
        self._server.connection_made(handler, transport)
        self._guard.made(handler, transport)

    def connection_lost(self, handler, exc) -> None:
        self._guard.lost(handler)
        self._server.connection_lost(handler, exc)

    def __getattr__(self, name: str):
        return getattr(self._server, name)


class _Refuse(asyncio.Protocol):
    """Answers 503 and closes: the connection never reaches the HTTP server."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        with contextlib.suppress(Exception):
            transport.write(BUSY_REFUSAL)   # type: ignore[attr-defined]
        transport.close()

    def data_received(self, data: bytes) -> None:
        pass


class QuietServerLog:
    """The logger aiohttp's request handler writes to, made safe to expose to attackers: a client's
    malformed requests give one warning line per ``interval`` (with how many were suppressed), no
    traceback; errors that are not the client's keep their traceback."""

    def __init__(self, guard: ConnectionGuard, interval: float):
        self.guard = guard
        self.interval = interval
        self._last: dict[str, tuple[float, int]] = {}   # client -> (logged at, lines suppressed since)

    def note(self, client: str, what: str, reason: str, detail: str = "") -> None:
        now = time.monotonic()
        key = client
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return
        if len(self._last) >= _MAX_TRACKED_CLIENTS:
            self._last.clear()
        self._last[key] = (now, 0)
        self.guard.log.warning(what, extra=kv(server=self.guard.name, client=client or None, reason=reason,
                                              error=detail or None,
                                              suppressed=last[1] if last is not None and last[1] else None))

    # the subset of logging.Logger that aiohttp's RequestHandler calls
    def exception(self, msg: str, *args, exc_info=None, **kw) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        if isinstance(exc, HttpProcessingError):
            reason = _reason(exc)
            METRICS.http_requests_rejected.labels(self.guard.name, reason).inc()
            client = str(args[0]) if args else ""
            self.note(client, "rejected a malformed request", reason, _first_line(exc))
            return
        self.guard.log.error(msg, *args, exc_info=exc_info if exc_info is not None else True)

    def debug(self, msg: str, *args, exc_info=None, **kw) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        if isinstance(exc, HttpProcessingError):
            METRICS.http_requests_rejected.labels(self.guard.name, _reason(exc)).inc()
        self.guard.log.debug(msg, *args)

    def info(self, msg: str, *args, **kw) -> None:
        self.guard.log.info(msg, *args)

    def warning(self, msg: str, *args, **kw) -> None:
        self.guard.log.warning(msg, *args)

    def error(self, msg: str, *args, exc_info=None, **kw) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self.exception(msg, *args, exc_info=exc_info)
            return
        self.guard.log.error(msg, *args, exc_info=exc_info)

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging.Logger's name
        return self.guard.log.isEnabledFor(level)


def _reason(exc: HttpProcessingError) -> str:
    name = type(exc).__name__
    return {"LineTooLong": "header_too_long", "BadHttpMethod": "bad_method", "BadStatusLine": "bad_request_line",
            "InvalidHeader": "invalid_header", "BadHttpMessage": "bad_message"}.get(name, name)


def _first_line(exc: HttpProcessingError) -> str:
    text = (getattr(exc, "message", "") or str(exc)).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
