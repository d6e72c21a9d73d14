"""Bounded memory and quiet logs for an aiohttp server facing hostile clients - and busy ones.

Each connection that trickles request headers holds them in memory until the header timeout: 300
slow connections each sending 100 x 8 KiB headers took ``pysched extender`` from 112 to 557 MiB,
past its Deployment's 512Mi limit. ``ConnectionGuard`` bounds that product without turning away a
client that simply sends many requests at once:

* **connections** - at most ``max_connections`` served at once, and at most ``max_per_client``
  from one client address. A connection past a cap **waits**: it is accepted but not read (its
  request stays in the kernel's socket buffer, costing this process no header memory) until a
  slot frees, and is then served in turn, first come first served within a client and round-robin
  across clients. A slot frees when a connection closes, or is made by closing a connection that
  holds no request: one kept alive idle after its answers, one that has sent part of a request head
  for ``stall_grace`` (a slow sender), or one that has sent nothing for ``silent_grace`` - of the
  same client when that client is at its share, else of anyone. A connection that has sent a
  complete request - queued in aiohttp, in a handler, or being answered - is never closed to make
  room. So a burst of 1,000 requests from one client is answered in full, while a flood of slow or
  idle connections from one address only ever displaces its own connections and from many
  addresses cannot keep a newcomer out for longer than ``silent_grace``. A connection that waits
  ``queue_timeout`` without a slot, or arrives when ``max_queued`` connections already wait (a TLS
  one counts ``TLS_WEIGHT``: it holds its TLS buffers; the newest waiting connection of the client
  with the most waiting is shed first), gets 503 with ``Retry-After`` and is closed after what it
  sent is drained, so the client reads the answer rather than a reset. Closures (``evicted``) and
  503s (``refused``) are counted in ``pysched_http_connections_shed_total{server,reason}``.
* **headers per connection** - at most ``max_headers`` fields of at most ``max_field_size``
  bytes (aiohttp's parser refuses more with 431/400), so one connection holds at most
  ``max_headers * max_field_size`` bytes of headers.
* **request bodies** - at most ``body_budget`` bytes of bodies being read at once across all
  connections (``take_body``); a request that would exceed it is answered 503.

Malformed requests (too many or too long headers, bad request lines), connections closed to make
room or refused, and connections closed while a body is read or an answer written (``closed_under``)
are logged once per client and kind per ``log_interval`` at warning level, with no traceback - the
volume is the attacker's to choose - and malformed requests are counted in
``pysched_http_requests_rejected_total{server,reason}``. A traceback is logged only for an error
that is ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from pysched.metrics import METRICS
from pysched.util.logs import kv

DEFAULT_MAX_CONNECTIONS = 128
DEFAULT_MAX_HEADERS = 64          # fields per request (aiohttp's default: 128)
DEFAULT_MAX_FIELD_SIZE = 8190     # bytes per header line (aiohttp's and Go's default)
DEFAULT_QUEUE_TIMEOUT = 10.0      # longest wait for a free slot (the servers pass their header timeout)
LOG_INTERVAL = 60.0
MIN_PENDING = 512
MIN_QUEUED = 1024                 # connections waiting for a slot: a socket each, no header memory...
TLS_WEIGHT = 16                   # ...but a TLS one holds its TLS buffers (~1 MiB RSS): it counts 16 times
STALL_GRACE = 0.25                # a connection with part of a request head this long may be closed to make room
SILENT_GRACE = 1.0                # one that has sent nothing this long too (its request may be unread before)
TICK = 0.1                        # how often waiting connections are reconsidered
LINGER = 2.0                      # a refused connection is drained this long, so its client reads the 503
MAX_LINGERING = 256               # beyond this many draining at once, a refused connection is closed at once
HELD_BUDGET = 16 * 1024 * 1024    # bytes read from waiting connections before they could be held (uvloop)
HANDSHAKE_GRACE = 120.0           # longer than asyncio's TLS handshake timeout (60 s)
# Header budget per connection: DEFAULT_MAX_HEADERS * DEFAULT_MAX_FIELD_SIZE = 512 KiB; with the
# default cap of 128 connections, 64 MiB of headers at most.
_MAX_TRACKED_CLIENTS = 10_000
_CLOSED_NOTED = web.RequestKey("pysched_connguard_closed_noted", bool)

BUSY_REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                b"Retry-After: 1\r\nContent-Length: 44\r\n\r\ntoo many connections in use; try again soon\n")


class ConnectionGuard:
    def __init__(self, name: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_per_client: int | None = None, max_headers: int = DEFAULT_MAX_HEADERS,
                 max_field_size: int = DEFAULT_MAX_FIELD_SIZE, body_budget: int = 0,
                 queue_timeout: float = DEFAULT_QUEUE_TIMEOUT, max_queued: int | None = None,
                 stall_grace: float = STALL_GRACE, silent_grace: float = SILENT_GRACE,
                 held_budget: int = HELD_BUDGET,
                 log_interval: float = LOG_INTERVAL, logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if max_connections <= 0:
            raise ValueError(f"max connections must be greater than zero, got {max_connections}")
        self.name = name
        self.max_connections = max_connections
        self.max_per_client = max_per_client or max(4, max_connections // 4)
        # TLS handshakes under way (the client is not known until one completes): each holds tens of
        # KiB, and asyncio gives up on one after 60 s.
        self.max_pending = max(MIN_PENDING, 4 * max_connections)
        self.max_queued = max_queued or max(MIN_QUEUED, 8 * max_connections)
        self.queue_timeout = queue_timeout
        self.stall_grace = stall_grace
        self.silent_grace = silent_grace
        self.max_headers = max_headers
        self.max_field_size = max_field_size
        self.body_budget = body_budget          # 0: no budget
        self.body_in_use = 0
        self.log = logger or logging.getLogger(f"pysched.server.{name}")
        self.quiet = QuietServerLog(self, log_interval)
        self.clock = clock
        self._pending: dict[Any, float] = {}               # accepted, not handed over yet (TLS handshake)
        self._live: dict[Any, None] = {}                   # connections being served, oldest first
        self._live_of: dict[str, dict[Any, None]] = {}     # the same, by client address
        self._queued: dict[str, deque[Any]] = {}           # connections waiting for a slot, by client
        self._n_queued = 0
        self._queued_weight = 0                            # plain connections 1, TLS ones TLS_WEIGHT
        self._busy: set[Any] = set()                       # handlers running a request handler now
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.lingering = 0                                 # refused connections being drained (weighted)
        # uvloop reads a connection once after connection_made whatever that did: what a waiting
        # connection sent in that read is kept until it is served, within this budget.
        self.held_budget = held_budget
        self.held_bytes = 0
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
        """Marks the connection busy while its request is handled, and writes the answer here, so
        that a connection closed under it is one quiet warning line."""
        proto = request.protocol
        self._busy.add(proto)
        try:
            resp = await handler(request)
            if not resp.prepared and _CLOSED_NOTED not in request:
                if proto.transport is None:
                    self.closed_under(request, "writing the response")
                else:
                    try:
                        await resp.prepare(request)
                        await resp.write_eof()
                    except ConnectionError as exc:
                        self.closed_under(request, "writing the response", exc)
            return resp
        finally:
            self._busy.discard(proto)
            self._wake()

    def closed_under(self, request: web.BaseRequest, what: str, exc: BaseException | None = None) -> None:
        """The connection closed (the client hung up, or this server closed it) while ``what``: one
        warning line per client per log interval, no traceback."""
        detail = f"{type(exc).__name__}: {exc}" if exc is not None else ""
        if isinstance(request, web.Request):
            request[_CLOSED_NOTED] = True   # once per request: its answer cannot be written either
        self.quiet.note(request.remote or "", f"connection closed while {what}", "closed", detail, kind="closed")

    @property
    def connections(self) -> int:
        """Connections being served (not counting those waiting for a slot)."""
        return len(self._live)

    @property
    def queued(self) -> int:
        """Connections waiting for a slot."""
        return self._n_queued

    # -- the gate ---------------------------------------------------------------------------------

    def accept(self) -> bool:
        """A connection is being accepted (its client is not known yet). False: turn it away -
        ``max_pending`` TLS handshakes are under way."""
        if len(self._pending) >= self.max_pending:
            cutoff = self.clock() - HANDSHAKE_GRACE
            for h in [h for h, t in self._pending.items() if t < cutoff]:
                del self._pending[h]   # a handshake that failed: asyncio never says so
        if len(self._pending) >= self.max_pending:
            METRICS.http_connections_shed.labels(self.name, "refused").inc()
            self.quiet.note("", "connection refused: too many TLS handshakes under way", "busy", kind="refused")
            return False
        return True

    def created(self, conn) -> None:
        self._pending[conn] = self.clock()

    def made(self, conn, transport) -> None:
        """The connection is established (TLS handshake done): serve it now if its client is within
        its share and a slot is free or can be made, else hold it unread until one is."""
        self._pending.pop(conn, None)
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        conn.client = client
        conn.weight = TLS_WEIGHT if transport.get_extra_info("ssl_object") is not None else 1
        now = self.clock()
        # Ahead of those already waiting only when its client has none waiting, and - to make room
        # among other clients' connections - when nobody waits at all.
        if client not in self._queued and (
                self._has_room(client) or ((self._at_share(client) or not self._queued)
                                           and self._make_room(client, now))):
            self._admit(conn, now)
            return
        while self._queued_weight + conn.weight > self.max_queued:
            if not self._shed_for(client):
                self._refuse(conn, "connection refused: too many connections are waiting for a slot", "queue_full")
                return
        conn.queued_at = now
        self._queued.setdefault(client, deque()).append(conn)
        self._n_queued += 1
        self._queued_weight += conn.weight
        conn.hold()
        self._wake(TICK)

    def lost(self, conn) -> None:
        self._pending.pop(conn, None)
        if conn in self._live:
            self._drop(conn)
            self._wake()
            return
        self._unqueue(conn)

    def held_data(self, conn) -> None:
        """A waiting connection was read (uvloop) and keeps what it sent: past ``held_budget``
        altogether, it is refused instead."""
        if self.held_bytes <= self.held_budget:
            return
        self._unqueue(conn)
        self._refuse(conn, "connection refused: too much data from connections waiting for a slot", "queue_full")

    def pump(self) -> None:
        """Serve waiting connections while slots are free or can be made; refuse those that waited
        ``queue_timeout``."""
        if not self._n_queued:
            return
        now = self.clock()
        for client in list(self._queued):
            q = self._queued[client]
            while q and now - q[0].queued_at >= self.queue_timeout:
                self._refuse(self._left(q.popleft()), "connection refused: no connection slot came free in time",
                             "waited")
            if not q:
                del self._queued[client]
        anyone = True   # False once no connection of anyone can be closed to make room
        progress = True
        while progress and self._queued:
            progress = False
            for client in list(self._queued):   # one per client and round: round-robin
                if self._at_share(client):
                    ok = self._make_room(client, now)          # one of its own, or none
                elif len(self._live) < self.max_connections:
                    ok = True
                else:
                    ok = anyone and self._make_room(client, now)
                    anyone = ok
                if ok:
                    q = self._queued[client]
                    self._admit(self._left(q.popleft()), now)
                    if not q:
                        del self._queued[client]
                    progress = True

    def close_queued(self) -> None:
        """Shutting down: close every connection still waiting for a slot."""
        for q in self._queued.values():
            for conn in q:
                conn.close()
        self._queued.clear()
        self._n_queued = self._queued_weight = 0

    # -- decisions --------------------------------------------------------------------------------

    def _has_room(self, client: str) -> bool:
        return len(self._live) < self.max_connections and not self._at_share(client)

    def _at_share(self, client: str) -> bool:
        return len(self._live_of.get(client, ())) >= self.max_per_client

    def _make_room(self, client: str, now: float) -> bool:
        """Close one connection that holds no request - the client's own when it is at its share,
        else anyone's, oldest first - so that one of ``client`` fits. False: none can go now."""
        pool = self._live_of[client] if self._at_share(client) else self._live
        for conn in pool:
            if self._evictable(conn, now):
                self._evict(conn)
                return self._has_room(client)
        return False

    def _evictable(self, conn, now: float) -> bool:
        if conn.handler in self._busy or not conn.idle():
            return False   # a request of it is queued, being handled or answered: never
        if conn.served():
            return True    # kept alive idle after its answers
        return now - conn.since >= (self.stall_grace if conn.heard else self.silent_grace)

    def _evict(self, conn) -> None:
        self._drop(conn)
        METRICS.http_connections_shed.labels(self.name, "evicted").inc()
        if conn.served():
            self.log.debug("closed an idle kept-alive connection to make room", extra=kv(
                server=self.name, client=conn.client or None))
        else:
            self.quiet.note(conn.client, "connection closed to make room: it sent no complete request", "evicted",
                            kind="evicted")
        conn.evict()

    def _admit(self, conn, now: float) -> None:
        conn.since = now
        self._live[conn] = None
        self._live_of.setdefault(conn.client, {})[conn] = None
        conn.admit()

    def _drop(self, conn) -> None:
        del self._live[conn]
        own = self._live_of[conn.client]
        del own[conn]
        if not own:
            del self._live_of[conn.client]

    def _shed_for(self, client: str) -> bool:
        """The queue is full: shed the newest waiting connection of the client with the most
        waiting, unless that is ``client`` itself (False: refuse the newcomer)."""
        top = max(self._queued, key=lambda c: len(self._queued[c]))
        if top == client or len(self._queued[top]) <= len(self._queued.get(client, ())):
            return False
        self._refuse(self._left(self._queued[top].pop()), "connection refused: too many connections are waiting "
                     "for a slot", "queue_full")
        if not self._queued[top]:
            del self._queued[top]
        return True

    def _unqueue(self, conn) -> None:
        q = self._queued.get(conn.client)
        if q is not None and conn in q:
            q.remove(conn)
            self._left(conn)
            if not q:
                del self._queued[conn.client]

    def _left(self, conn):
        """``conn`` was taken out of its waiting line: count it out."""
        self._n_queued -= 1
        self._queued_weight -= conn.weight
        return conn

    def _refuse(self, conn, what: str, reason: str) -> None:
        METRICS.http_connections_shed.labels(self.name, "refused").inc()
        self.quiet.note(conn.client, what, reason, kind="refused")
        conn.refuse(self)

    def _wake(self, delay: float = 0.0) -> None:
        """Reconsider the waiting connections after ``delay`` (and every ``TICK`` while any wait)."""
        if not self._n_queued:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return   # not in the loop (unit tests call pump() themselves)
        when = loop.time() + delay
        if self._timer is not None:
            if self._timer_at <= when:
                return
            self._timer.cancel()
        self._timer, self._timer_at = loop.call_at(when, self._tick), when

    def _tick(self) -> None:
        self._timer = None
        self.pump()
        self._wake(TICK)

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
    """The aiohttp ``Server`` behind the guard: each accepted connection gets a ``_Connection``
    protocol that the guard admits or holds; an admitted one gets aiohttp's request handler. The
    handler tells this object of its connection made and lost, as it would the server. Everything
    else passes through."""

    def __init__(self, server: web.Server, guard: ConnectionGuard):
        self._server = server
        self._guard = guard

    def __call__(self) -> asyncio.Protocol:
        if not self._guard.accept():
            return _Refuse()
        conn = _Connection(self)
        self._guard.created(conn)
        return conn

    def handler(self):
        handler = self._server()
        handler._manager = self  # type: ignore[assignment]  # noqa: SLF001 - so connection_made/lost come here first
        return handler

    def connection_made(self, handler, transport) -> None:
        self._server.connection_made(handler, transport)

    def connection_lost(self, handler, exc) -> None:
        self._server.connection_lost(handler, exc)

    def pre_shutdown(self) -> None:
        self._guard.close_queued()
        self._server.pre_shutdown()

    def __getattr__(self, name: str):
        return getattr(self._server, name)


class _Connection(asyncio.Protocol):
    """One accepted connection, as the guard sees it. Until admitted it is held unread; admitted,
    every event goes to aiohttp's request handler (created then). Refused, it answers 503, drains
    what the client sent and closes."""

    def __init__(self, gated: _GatedServer):
        self.gated = gated
        self.transport: asyncio.Transport | None = None
        self.handler: Any = None
        self.client = ""
        self.weight = 1
        self.since = 0.0          # admitted at (guard clock)
        self.queued_at = 0.0
        self.heard = False        # the handler has received bytes
        self.refused = False
        self.held = False
        self._linger: asyncio.TimerHandle | None = None
        self._early: list[bytes] = []   # read while waiting (uvloop), for the handler
        self._early_size = 0

    # -- what the guard calls -------------------------------------------------------------------

    def admit(self) -> None:
        assert self.transport is not None, "admitted after connection_made"
        self.handler = self.gated.handler()
        self.handler.connection_made(self.transport)
        if self._early:
            data = b"".join(self._early)
            self._drop_early()
            self.heard = True
            self.handler.data_received(data)
        self._read_again()

    def hold(self) -> None:
        assert self.transport is not None, "held after connection_made"
        self.held = True
        self.transport.pause_reading()
        # TLS: pausing the application side leaves the socket read into the TLS buffer up to its
        # high-water mark (256 KiB, and more as it grows): stop at the first read instead.
        limits = getattr(self.transport, "set_read_buffer_limits", None)
        if limits is not None:
            limits(high=0)

    def _read_again(self) -> None:
        if self.held and self.transport is not None:
            self.held = False
            limits = getattr(self.transport, "set_read_buffer_limits", None)
            if limits is not None:
                limits()   # the defaults again
            self.transport.resume_reading()

    def idle(self) -> bool:
        """aiohttp's handler waits for a request: none is queued, being handled or answered."""
        h = self.handler
        if h is None:
            return False
        waiter = h._waiter   # noqa: SLF001 - aiohttp's own idleness test (_process_keepalive)
        return (waiter is not None and not waiter.done() and not h._messages   # noqa: SLF001
                and not h._request_in_progress)   # noqa: SLF001

    def served(self) -> bool:
        return self.handler is not None and self.handler._request_count > 0   # noqa: SLF001

    def evict(self) -> None:
        self.handler.force_close()

    def refuse(self, guard: ConnectionGuard) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self.refused = True
        self._drop_early()
        with contextlib.suppress(Exception):
            transport.write(BUSY_REFUSAL)
        if guard.lingering + self.weight > MAX_LINGERING:
            transport.close()
            return
        # Closing with the request unread would reset the connection, and the client could lose
        # the answer: half-close, read and drop what it sends until it hangs up, for LINGER at most.
        with contextlib.suppress(Exception):
            if transport.can_write_eof():
                transport.write_eof()
        guard.lingering += self.weight
        self._linger = asyncio.get_running_loop().call_later(LINGER, self._end_linger, True)
        self._read_again()

    def _end_linger(self, close: bool = False) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
            self.gated._guard.lingering -= self.weight   # noqa: SLF001
        if close and self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        self._drop_early()
        if self.transport is not None:
            self.transport.close()

    def _drop_early(self) -> None:
        if self._early_size:
            self.gated._guard.held_bytes -= self._early_size   # noqa: SLF001
            self._early_size = 0
        self._early = []

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport   # type: ignore[assignment]
        self.gated._guard.made(self, transport)   # noqa: SLF001

    def data_received(self, data: bytes) -> None:
        if self.handler is not None:
            self.heard = True
            self.handler.data_received(data)
        elif not self.refused and self.transport is not None:
            # Waiting, and read all the same: uvloop starts reading after connection_made whatever
            # that did. Keep what came for the handler, and read no more until served.
            self.transport.pause_reading()
            self._early.append(data)
            self._early_size += len(data)
            guard = self.gated._guard   # noqa: SLF001
            guard.held_bytes += len(data)
            guard.held_data(self)

    def eof_received(self) -> bool | None:
        if self.handler is not None:
            return self.handler.eof_received()
        return None   # held or refused: close

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_linger()
        self._drop_early()
        self.gated._guard.lost(self)   # noqa: SLF001
        if self.handler is not None:
            self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()


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
    traceback; errors that are not the client's keep their traceback. The guard's own notes
    (connections closed to make room, refused, closed under a request) go through ``note`` too."""

    def __init__(self, guard: ConnectionGuard, interval: float):
        self.guard = guard
        self.interval = interval
        self._last: dict[tuple[str, str], tuple[float, int]] = {}   # (client, kind) -> (logged at, suppressed since)

    def note(self, client: str, what: str, reason: str, detail: str = "", kind: str = "") -> None:
        """One warning line per client and ``kind`` of trouble (malformed, evicted, refused, closed)
        per interval; the lines held back are counted in the next one's ``suppressed``."""
        now = time.monotonic()
        key = (client, kind or reason)
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
            self.note(client, "rejected a malformed request", reason, _first_line(exc), kind="malformed")
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
