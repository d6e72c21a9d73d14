"""A lean HTTP/1.1 keep-alive connection pool for the scheduler's small API requests.

The bind POST is the hot request: one per scheduled pod. Profiling the 5,000-node benchmark showed
aiohttp's request machinery (URL objects, tracing hooks, cookie jar, timer contexts, stream
readers) costing about a quarter of the scheduler's CPU, several times the cost of the TLS and the
JSON. This pool writes the request bytes directly on an ``asyncio.Protocol`` transport and parses
the response in ``data_received`` (status line, headers, then ``Content-Length``, chunked, or
read-to-close bodies). A watch gets a connection of its own (``HTTPPool.open_stream``): its body
is handed over as it arrives, with the same parser, so the scheduler needs no other HTTP client
(importing aiohttp's client cost about 0.1 s of CPU before the first bind, two TLS contexts built
from the system CA store among it).

Connections are reused while the server keeps them alive, dropped after ``idle_timeout`` seconds
idle (before the API server's own idle close), and never reused after an error. A request that
finds its pooled connection closed by the server before any response byte arrived is retried once
on a fresh connection if it is idempotent (GET, HEAD, PUT, DELETE, OPTIONS; never POST or PATCH).

Each request has one deadline for everything (a free connection slot, connecting, the response),
and an optional ``guard`` that runs synchronously after the last wait, immediately before the
bytes are written: the scheduler's write fence (``scheduler.fence``) uses it, so a request that
waited is only sent if this replica still leads at the moment it goes out.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

IDEMPOTENT = frozenset(("GET", "HEAD", "PUT", "DELETE", "OPTIONS"))
MAX_HEADER_BYTES = 64 * 1024


class HTTPError(ConnectionError):
    """The connection failed or the response was not valid HTTP/1.1 (an OSError, as socket errors are)."""


class ConnectionClosed(HTTPError):
    def __init__(self, message: str, *, got_bytes: bool):
        super().__init__(message)
        self.got_bytes = got_bytes


class Response:
    __slots__ = ("status", "reason", "headers", "body")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.last_used = time.monotonic()
        self._buf = bytearray()
        self._waiter: asyncio.Future | None = None
        self._head: tuple[int, str, dict[str, str], int] | None = None  # status, reason, headers, body start
        self._chunk_pos = 0
        self._chunks: list[bytes] = []
        self._method = "GET"

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._waiter is None:
            self._fail(HTTPError("unsolicited data from the server"))
            return
        self._deliver(eof=False)

    def eof_received(self):
        return False  # let the transport close; connection_lost follows

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.transport = None   # the TLS transport holds 256 KiB of buffers: let it go now
        if self._waiter is None or self._waiter.done():
            return
        if self._head is not None and self._read_to_close() and self._deliver(eof=True):
            return
        got = bool(self._buf) or self._head is not None
        self._fail(ConnectionClosed(f"connection closed by the server{': ' + str(exc) if exc else ''}", got_bytes=got))

    # -- request/response ----------------------------------------------------------------------

    def send(self, method: str, data: bytes) -> asyncio.Future:
        self._method = method
        self._buf.clear()
        self._head = None
        self._chunk_pos = 0
        self._chunks = []
        self._waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None, "send() on a connection that was never made"
        self.transport.write(data)
        return self._waiter

    def _deliver(self, eof: bool) -> bool:
        """Parse what has arrived; settle the waiter if the response is complete (or broken)."""
        try:
            resp = self._parse(eof)
        except HTTPError as exc:
            self._fail(exc)
            return True
        if resp is None:
            return False
        self._finish(resp)
        return True

    def _finish(self, resp: Response) -> None:
        waiter, self._waiter = self._waiter, None
        self.last_used = time.monotonic()
        if resp.headers.get("connection", "").lower() == "close":
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(resp)

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _read_to_close(self) -> bool:
        assert self._head is not None, "called once the response head is parsed"
        _, _, headers, _ = self._head
        return "content-length" not in headers and not _chunked(headers)

    def _parse(self, eof: bool) -> Response | None:
        buf = self._buf
        if self._head is None:
            head = _parse_head(buf)
            if head is None:
                return None
            self._head = head
            self._chunk_pos = head[3]
        status, reason, headers, start = self._head
        if self._method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return Response(status, reason, headers, b"")
        if _chunked(headers):
            return self._parse_chunked(status, reason, headers)
        length = _content_length(headers)
        if length is not None:
            if len(buf) - start < length:
                return None
            return Response(status, reason, headers, bytes(buf[start:start + length]))
        if eof:
            return Response(status, reason, headers, bytes(buf[start:]))
        return None

    def _parse_chunked(self, status, reason, headers) -> Response | None:
        buf = self._buf
        pos = self._chunk_pos
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = _chunk_size(buf, pos, eol)
            if size == 0:
                # Last chunk; skip optional trailers up to the blank line.
                if buf.find(b"\r\n\r\n", eol) < 0:
                    return None
                return Response(status, reason, headers, b"".join(self._chunks))
            if len(buf) < eol + 2 + size + 2:
                return None
            self._chunks.append(bytes(buf[eol + 2:eol + 2 + size]))
            pos = eol + 2 + size + 2
            self._chunk_pos = pos


class Stream(asyncio.Protocol):
    """One connection carrying one streamed response (a watch): ``status``/``headers`` once the
    head is in, then ``chunks()`` hands over the body (de-chunked) as it arrives.

    The connection is never reused. Reading pauses while more than ``HIGH_WATER`` bytes wait for
    the consumer. No byte for ``idle_timeout`` seconds (head included) fails the stream with
    TimeoutError; a connection that ends before the body is complete fails it with
    ``ConnectionClosed``; a body that is not valid HTTP/1.1 framing with ``HTTPError``.
    """

    # Unread bytes at which reading pauses (a scheduler busy with a backlog falls behind its pod
    # watch; aiohttp's reader paused at 128 KiB). 4 MiB and 256 KiB measured alike in the drain.
    HIGH_WATER = 256 * 1024

    def __init__(self, loop: asyncio.AbstractEventLoop, idle_timeout: float,
                 on_lost: Callable[[Stream], None] | None = None) -> None:
        self.loop = loop
        self.idle_timeout = idle_timeout
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.complete = False
        self.error: Exception | None = None
        self._head = False
        self._raw = bytearray()    # received, not yet parsed
        self._body = bytearray()   # parsed body bytes the consumer has not taken
        self._mode = ""            # "chunked", "length" or "close"
        self._left = 0             # length: body bytes to come; chunked: data bytes left in this chunk
        self._crlf = False         # chunked: a chunk's data is in, its CRLF is next
        self._paused = False
        self._waiter: asyncio.Future | None = None
        self._last = loop.time()
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._last = self.loop.time()
        self._timer = self.loop.call_at(self._last + self.idle_timeout, self._check_idle)

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        self._raw += data
        try:
            self._parse()
        except HTTPError as exc:
            self._stop(exc)
            return
        if len(self._body) > self.HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self):
        return False

    def connection_lost(self, exc) -> None:
        self.transport = None
        if self._timer is not None:
            self._timer.cancel()
        if not self.complete and self.error is None:
            if self._head and self._mode == "close":
                self.complete = True
            else:
                reason = f": {exc}" if exc else ""
                self.error = ConnectionClosed(f"stream closed before its end{reason}",
                                              got_bytes=self._head or bool(self._raw))
        if self.on_lost is not None:
            self.on_lost(self)
        self._wake()

    # -- consumer ------------------------------------------------------------------------------

    async def wait_head(self) -> None:
        """Wait for the status line and headers (or raise the stream's error)."""
        while not self._head:
            if self.error is not None:
                raise self.error
            await self._wait()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; ends when it is complete, raises if the stream fails."""
        while True:
            if self._body:
                data = bytes(self._body)
                self._body.clear()
                self._resume()
                yield data
                continue
            if self.error is not None:
                raise self.error
            if self.complete:
                return
            await self._wait()

    async def read_all(self, limit: int = 1024 * 1024) -> bytes:
        """The whole body (an error response's Status), at most ``limit`` bytes of it."""
        out = bytearray()
        while len(out) < limit:
            if self._body:
                out += self._body
                self._body.clear()
                self._resume()
            elif self.error is not None:
                raise self.error
            elif self.complete:
                break
            else:
                await self._wait()
        return bytes(out[:limit])

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- internals -----------------------------------------------------------------------------

    async def _wait(self) -> None:
        self._waiter = self.loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _stop(self, exc: Exception) -> None:
        if self.error is None and not self.complete:
            self.error = exc
        self.close()
        self._wake()

    def _check_idle(self) -> None:
        now = self.loop.time()
        if self._paused or now - self._last < self.idle_timeout:   # busy consumer, or data came
            base = now if self._paused else self._last
            self._timer = self.loop.call_at(base + self.idle_timeout, self._check_idle)
            return
        self._stop(TimeoutError(f"no data on the stream for {self.idle_timeout:g}s"))

    def _parse(self) -> None:
        raw = self._raw
        if not self._head:
            head = _parse_head(raw)
            if head is None:
                return
            self.status, self.reason, self.headers, start = head
            del raw[:start]
            self._head = True
            if _chunked(self.headers):
                self._mode = "chunked"
            elif (length := _content_length(self.headers)) is not None:
                self._mode = "length"
                self._left = length
                self.complete = length == 0
            else:
                self._mode = "close"
        if self.complete:
            raw.clear()
        elif self._mode == "chunked":
            self._dechunk()
        elif self._mode == "length":
            take = raw[:self._left]
            self._body += take
            self._left -= len(take)
            del raw[:len(take)]
            self.complete = self._left == 0
        else:
            self._body += raw
            raw.clear()

    def _dechunk(self) -> None:
        raw, pos = self._raw, 0
        while not self.complete:
            if self._left:
                take = min(self._left, len(raw) - pos)
                if not take:
                    break
                self._body += raw[pos:pos + take]
                pos += take
                self._left -= take
                if self._left:
                    break
                self._crlf = True
            if self._crlf:
                if len(raw) - pos < 2:
                    break
                if raw[pos:pos + 2] != b"\r\n":
                    raise HTTPError("chunk data not followed by CRLF")
                pos += 2
                self._crlf = False
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                if len(raw) - pos > 1024:
                    raise HTTPError("chunk size line too long")
                break
            size = _chunk_size(raw, pos, eol)
            pos = eol + 2
            if size == 0:
                self.complete = True   # trailers, if any, are not read: the connection is not reused
                break
            self._left = size
        del raw[:pos]


class HTTPPool:
    """Keep-alive connections to one server (``https://host:port[/prefix]``)."""

    def __init__(self, base_url: str, ssl_context: _ssl.SSLContext | None, *, limit: int = 64,
                 server_hostname: str | None = None, user_agent: str = "pysched", idle_timeout: float = 60.0):
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {base_url!r}")
        self.host = u.hostname or "localhost"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.ssl = ssl_context if u.scheme == "https" else None
        self.server_hostname = (server_hostname or self.host) if self.ssl else None
        host_header = self.host if ":" not in self.host else f"[{self.host}]"
        default_port = 443 if u.scheme == "https" else 80
        self.host_header = host_header if self.port == default_port else f"{host_header}:{self.port}"
        self.user_agent = user_agent
        self.idle_timeout = idle_timeout
        self._idle: deque[_Connection] = deque()
        self._sem = asyncio.Semaphore(limit)
        self._streams: set[Stream] = set()
        self.connections_opened = 0
        self.closed = False

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl,
                                               server_hostname=self.server_hostname)
        self.connections_opened += 1
        return conn

    def _stale(self, conn: _Connection, now: float) -> bool:
        """Not to be reused: the server closed it, or it idled past ``idle_timeout``."""
        return conn.closed or now - conn.last_used >= self.idle_timeout

    def _pooled(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not self._stale(conn, now):
                return conn
            conn.close()
        return None

    def _encode(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> bytes:
        head = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}", f"User-Agent: {self.user_agent}"]
        head.extend(f"{k}: {v}" for k, v in headers.items())
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        return data + body if body else data

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None = None,
                      timeout: float = 30.0, *, deadline: float | None = None,
                      guard: Callable[[], None] | None = None,
                      on_sent: Callable[[], None] | None = None) -> Response:
        """Send one request; ``path`` is absolute (with any query string), below the URL prefix.

        ``deadline`` (event-loop time; default now + ``timeout``) bounds everything: waiting for a
        free connection slot, connecting and the response. ``guard`` runs synchronously right
        before the request bytes are written, after every wait, and may raise to stop the request
        (the write fence); ``on_sent`` runs right after they were handed to the transport.
        """
        if self.closed:
            raise HTTPError("pool is closed")
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + timeout
        data = self._encode(method, path, headers, body)
        # asyncio.timeout, not wait_for: on 3.11 wait_for returns the result when the awaited
        # thing finishes in the same loop step the task is cancelled, and the cancel is lost
        # (a cancelled informer would keep listing and watching, and shutdown would wait forever).
        if self._sem.locked():
            async with asyncio.timeout(_left(loop, deadline, "a free connection")):
                await self._sem.acquire()
        else:
            await self._sem.acquire()  # free slot: no suspension, no wait_for task
        try:
            for attempt in (0, 1):
                conn = self._pooled()
                reused = conn is not None
                if conn is None:
                    async with asyncio.timeout(_left(loop, deadline, "a connection")):
                        conn = await self._connect()
                try:
                    left = _left(loop, deadline, "a connection")
                    if guard is not None:
                        guard()
                except BaseException:
                    self._release(conn)
                    raise
                fut = conn.send(method, data)
                if on_sent is not None:
                    on_sent()
                timer = loop.call_later(left, _expire, conn, fut, left)
                try:
                    resp = await fut
                except ConnectionClosed as exc:
                    if attempt == 0 and reused and not exc.got_bytes and method in IDEMPOTENT:
                        continue
                    raise
                except BaseException:
                    conn.close()
                    raise
                finally:
                    timer.cancel()
                self._release(conn)
                return resp
        finally:
            self._sem.release()
        raise HTTPError("unreachable")

    def _release(self, conn: _Connection) -> None:
        """Return a connection with no request in flight to the idle list, and close the ones at
        its cold end that idled past ``idle_timeout`` or that the server closed. The list is used
        newest first, so after a burst (a leader binding 64 pods at once) the extra connections
        sit at that end: without the sweep they were kept - each with its TLS buffers - until a
        burst as large reached them again."""
        if not conn.closed and not self.closed:
            self._idle.append(conn)
        else:
            conn.close()
        idle, now = self._idle, time.monotonic()
        while idle and self._stale(idle[0], now):
            idle.popleft().close()

    async def open_stream(self, method: str, path: str, headers: dict[str, str], *,
                          connect_timeout: float = 30.0, idle_timeout: float = 90.0) -> Stream:
        """Send a request on a connection of its own and return once the response head is in
        (a watch). The caller reads ``Stream.chunks()`` and must ``close()`` it; ``close()`` of
        the pool closes every stream still open. ``idle_timeout`` bounds every wait for data."""
        if self.closed:
            raise HTTPError("pool is closed")
        loop = asyncio.get_running_loop()
        data = self._encode(method, path, headers, None)
        async with asyncio.timeout(connect_timeout):
            _, stream = await loop.create_connection(
                lambda: Stream(loop, idle_timeout, self._streams.discard), self.host, self.port, ssl=self.ssl,
                server_hostname=self.server_hostname)
        self.connections_opened += 1
        try:
            if self.closed:
                raise HTTPError("pool is closed")
            if stream.transport is None:
                raise stream.error or HTTPError("stream closed while connecting")
            self._streams.add(stream)
            stream.transport.write(data)
            await stream.wait_head()
        except BaseException:
            stream.close()
            raise
        return stream

    async def close(self) -> None:
        self.closed = True
        while self._idle:
            self._idle.pop().close()
        for stream in list(self._streams):
            stream.close()


def _parse_head(buf: bytearray) -> tuple[int, str, dict[str, str], int] | None:
    """The status line and headers at the start of ``buf``: (status, reason, headers with lower-case
    names, where the body starts), or None while they are incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEADER_BYTES:
            raise HTTPError("response headers too large")
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise HTTPError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise HTTPError(f"bad status line {lines[0][:80]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HTTPError(f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return status, parts[2] if len(parts) > 2 else "", headers, end + 4


def _content_length(headers: dict[str, str]) -> int | None:
    """The body length a ``Content-Length`` header gives, None without one."""
    cl = headers.get("content-length")
    if cl is None:
        return None
    try:
        return int(cl)
    except ValueError:
        raise HTTPError(f"bad Content-Length {cl!r}") from None


def _chunk_size(buf: bytearray, pos: int, eol: int) -> int:
    """The size on the chunk-size line ``buf[pos:eol]`` (chunk extensions ignored)."""
    size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
    try:
        return int(size_text, 16)
    except ValueError:
        raise HTTPError(f"bad chunk size {size_text[:20]!r}") from None


def _left(loop: asyncio.AbstractEventLoop, deadline: float, what: str) -> float:
    left = deadline - loop.time()
    if left <= 0:
        raise TimeoutError(f"request deadline passed while waiting for {what}")
    return left


def _chunked(headers: dict[str, str]) -> bool:
    return "chunked" in headers.get("transfer-encoding", "").lower()


def _expire(conn: _Connection, fut: asyncio.Future, timeout: float) -> None:
    if not fut.done():
        conn.close()
        fut.set_exception(TimeoutError(f"no response within {timeout}s"))
