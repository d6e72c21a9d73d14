"""The lean HTTP/1.1 pool against small real servers on loopback (plain TCP and TLS)."""

import asyncio
import ssl

import pytest

from pysched.client.httppool import ConnectionClosed, HTTPError, HTTPPool
from pysched_dev.devcluster import _write_pki


class Server:
    """An asyncio TCP server whose per-request behaviour is a coroutine ``handler(reader, writer)``."""

    def __init__(self, handler, ssl_context=None):
        self.handler = handler
        self.ssl = ssl_context
        self.connections = 0
        self.requests: list[bytes] = []

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                if await self.handler(reader, writer, head, body) == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionResetError):
            pass
        finally:
            writer.close()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    def url(self, scheme="http"):
        return f"{scheme}://127.0.0.1:{self.port}"


def reply(body: bytes, status="200 OK", extra=b""):
    async def handler(reader, writer, head, req_body):
        writer.write(b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n" + extra +
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
    return handler


async def test_keep_alive_reuses_one_connection_and_sends_body():
    async with Server(reply(b'{"ok":true}')) as srv:
        pool = HTTPPool(srv.url(), None, limit=4)
        for i in range(10):
            r = await pool.request("POST", f"/api/x?i={i}", {"Content-Type": "application/json"}, b'{"a":1}')
            assert (r.status, r.body) == (200, b'{"ok":true}')
        await pool.close()
    assert srv.connections == 1 and pool.connections_opened == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /api/x?i=0 HTTP/1.1\r\n")
    assert b"Host: 127.0.0.1:" in first and b"Content-Length: 7\r\n" in first and first.endswith(b'{"a":1}')


async def test_chunked_body_split_across_writes_and_trailers():
    async def handler(reader, writer, head, body):
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"5\r\nhel", b"lo\r\n", b"6;ext=1\r\n world\r\n", b"0\r\n", b"X-Trailer: 1\r\n", b"\r\n"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
    async with Server(handler) as srv:
        pool = HTTPPool(srv.url(), None)
        r = await pool.request("GET", "/", {})
        assert r.body == b"hello world"
        r = await pool.request("GET", "/", {})  # the connection is still usable after the trailer
        assert r.body == b"hello world"
        await pool.close()
    assert srv.connections == 1


async def test_connection_close_header_and_read_to_close_body():
    async def handler(reader, writer, head, body):
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-eof")
        await writer.drain()
        return "close"
    async with Server(handler) as srv:
        pool = HTTPPool(srv.url(), None)
        for _ in range(3):
            assert (await pool.request("GET", "/", {})).body == b"until-eof"
        await pool.close()
    assert srv.connections == 3


def drop_second_request(calls: dict):
    """Answers "fine", except the second request: read it, answer nothing, hang up."""
    async def handler(reader, writer, head, body):
        calls["n"] = calls.get("n", 0) + 1
        if calls["n"] == 2:
            return "close"
        await reply(b"fine")(reader, writer, head, body)
    return handler


async def test_idempotent_request_retried_once_on_a_reused_connection_the_server_dropped():
    async with Server(drop_second_request({})) as srv:
        pool = HTTPPool(srv.url(), None)
        assert (await pool.request("GET", "/", {})).body == b"fine"
        assert (await pool.request("GET", "/", {})).body == b"fine"  # retried on a new connection
        await pool.close()
    assert srv.connections == 2


async def test_post_is_not_retried_when_the_server_drops_it():
    calls: dict = {}
    async with Server(drop_second_request(calls)) as srv:
        pool = HTTPPool(srv.url(), None)
        await pool.request("POST", "/bind", {}, b"{}")
        with pytest.raises(ConnectionClosed):
            await pool.request("POST", "/bind", {}, b"{}")
        assert calls["n"] == 2  # sent exactly once: a bind must never be replayed blindly
        assert (await pool.request("POST", "/bind", {}, b"{}")).body == b"fine"
        await pool.close()


async def test_timeout_closes_the_connection():
    async def handler(reader, writer, head, body):
        await asyncio.sleep(5)
    async with Server(handler) as srv:
        pool = HTTPPool(srv.url(), None)
        with pytest.raises(asyncio.TimeoutError):
            await pool.request("GET", "/", {}, timeout=0.2)
        assert not pool._idle
        await pool.close()


async def test_garbage_response_is_an_error_and_an_oserror():
    async def handler(reader, writer, head, body):
        writer.write(b"SPDY/9 what\r\n\r\n")
        await writer.drain()
    async with Server(handler) as srv:
        pool = HTTPPool(srv.url(), None)
        with pytest.raises(HTTPError, match="not an HTTP/1.x response") as info:
            await pool.request("GET", "/", {})
        assert isinstance(info.value, OSError)
        await pool.close()


async def test_no_body_statuses_and_head():
    async def handler(reader, writer, head, body):
        status = b"204 No Content" if head.startswith(b"DELETE") else b"200 OK"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 4\r\n\r\n" if status == b"200 OK"
                     else b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
    async with Server(handler) as srv:
        pool = HTTPPool(srv.url(), None)
        assert (await pool.request("DELETE", "/x", {})).status == 204
        r = await pool.request("HEAD", "/x", {})
        assert (r.status, r.body) == (200, b"")
        await pool.close()


async def test_tls_with_ca_verification_and_path_prefix(tmp_path):
    pki = _write_pki(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(pki["apiserver.crt"], pki["apiserver.key"])
    async with Server(reply(b"secure"), ssl_context=server_ctx) as srv:
        client_ctx = ssl.create_default_context(cafile=str(pki["ca.crt"]))
        pool = HTTPPool(srv.url("https") + "/prefix/", client_ctx)
        assert (await pool.request("GET", "/api", {})).body == b"secure"
        await pool.close()
        assert srv.requests[0].startswith(b"GET /prefix/api HTTP/1.1")
        untrusted = HTTPPool(srv.url("https"), ssl.create_default_context())
        with pytest.raises(ssl.SSLCertVerificationError):
            await untrusted.request("GET", "/", {})
        await untrusted.close()


class Refused(Exception):
    pass


def held_until(release: asyncio.Event):
    """Answers each request once ``release`` is set (the connection slot stays busy until then)."""
    async def handler(reader, writer, head, body):
        await release.wait()
        await reply(b"done")(reader, writer, head, body)
    return handler


async def test_guard_runs_after_waiting_for_a_connection_slot_and_can_stop_the_write():
    release = asyncio.Event()
    allowed = {"ok": True}

    def guard():
        if not allowed["ok"]:
            raise Refused("fence closed")

    async with Server(held_until(release)) as srv:
        pool = HTTPPool(srv.url(), None, limit=1)
        first = asyncio.create_task(pool.request("POST", "/bind/1", {}, b"{}", guard=guard))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(pool.request("POST", "/bind/2", {}, b"{}", guard=guard))
        await asyncio.sleep(0.05)
        allowed["ok"] = False  # the fence closes while the second request waits for the only slot
        release.set()
        assert (await first).body == b"done"
        with pytest.raises(Refused):
            await second
        await asyncio.sleep(0.05)
        assert [r.split(b" ")[1] for r in srv.requests] == [b"/bind/1"]  # the second was never written
        allowed["ok"] = True
        assert (await pool.request("POST", "/bind/3", {}, b"{}", guard=guard)).body == b"done"
        await pool.close()
    assert srv.connections == 1  # the refused request gave its (idle) connection back


async def test_waiting_for_a_connection_slot_counts_against_the_deadline():
    release = asyncio.Event()
    sent = []
    async with Server(held_until(release)) as srv:
        pool = HTTPPool(srv.url(), None, limit=1)
        first = asyncio.create_task(pool.request("POST", "/a", {}, b"{}"))
        await asyncio.sleep(0.05)
        with pytest.raises(asyncio.TimeoutError):
            await pool.request("POST", "/b", {}, b"{}", timeout=0.2, on_sent=lambda: sent.append("b"))
        release.set()
        await first
        await pool.close()
    assert sent == [] and len(srv.requests) == 1


async def test_connections_left_idle_after_a_burst_are_closed_not_kept_for_ever():
    """After a burst, the extra connections sit at the cold end of the idle list (it is used
    newest first): each is closed once idle past ``idle_timeout`` - by the next release - and a
    connection the server closed lets go of its transport (a TLS one holds 256 KiB of buffers)."""
    gate = asyncio.Event()

    async def slow(reader, writer, head, body):
        await gate.wait()
        await reply(b"{}")(reader, writer, head, body)

    async with Server(slow) as srv:
        pool = HTTPPool(srv.url(), None, limit=8, idle_timeout=60.0)
        burst = [asyncio.create_task(pool.request("GET", f"/x?i={i}", {})) for i in range(8)]
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(*burst)
        assert pool.connections_opened == 8 and len(pool._idle) == 8
        cold = list(pool._idle)
        for conn in cold[:-1]:
            conn.last_used -= 61.0              # a minute passed, one request at a time on the newest
        await pool.request("GET", "/after", {})  # takes the newest; its release sweeps the rest
        assert len(pool._idle) == 1 and pool._idle[0] is cold[-1]
        assert all(c.closed for c in cold[:-1])
        await pool.close()
    await asyncio.sleep(0.05)
    assert all(c.transport is None for c in cold[:-1])


# -- streamed responses (watches) ------------------------------------------------------------------

def streamed(pieces: list[bytes], *, end: bool = True, hold: asyncio.Event | None = None):
    """A chunked 200 response written piece by piece (each piece raw bytes on the wire, so a
    chunk's framing can be cut anywhere); ``end``: the last chunk follows, else the connection
    closes mid-body; ``hold``: wait for it before closing."""
    async def handler(reader, writer, head, body):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        if end:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        if hold is not None:
            await hold.wait()
        return "close"
    return handler


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


async def read_stream(stream) -> bytes:
    out = b""
    async for data in stream.chunks():
        out += data
    return out


async def test_stream_hands_over_a_chunked_body_cut_anywhere_and_ends_with_the_last_chunk():
    wire = chunk(b'{"type":"ADDED"}\n') + chunk(b'{"type":"MOD') + chunk(b'IFIED"}\n')
    pieces = [wire[i:i + 5] for i in range(0, len(wire), 5)]   # sizes, data and CRLFs split
    async with Server(streamed(pieces)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/api/v1/pods?watch=true", {"Accept": "application/json"})
        assert stream.status == 200 and stream.headers["transfer-encoding"] == "chunked"
        assert await read_stream(stream) == b'{"type":"ADDED"}\n{"type":"MODIFIED"}\n'
        assert stream.complete
        stream.close()
        await pool.close()
        assert srv.requests[0].startswith(b"GET /api/v1/pods?watch=true HTTP/1.1\r\n")


async def test_stream_cut_before_its_last_chunk_is_an_error_after_the_data_that_came():
    async with Server(streamed([chunk(b"line\n")], end=False)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {})
        got = []
        with pytest.raises(ConnectionClosed, match="before its end"):
            async for data in stream.chunks():
                got.append(data)
        assert got == [b"line\n"]
        await pool.close()


async def test_stream_with_no_data_for_the_idle_timeout_fails_and_closes():
    hold = asyncio.Event()
    async with Server(streamed([chunk(b"first\n")], end=False, hold=hold)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {}, idle_timeout=0.2)
        with pytest.raises(TimeoutError, match="no data on the stream"):
            await read_stream(stream)
        assert stream.transport is None or stream.transport.is_closing()
        hold.set()
        await pool.close()


async def test_stream_error_status_body_is_read_whole_from_its_content_length():
    status = b'{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}'
    async with Server(reply(status, status="410 Gone")) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {})
        assert stream.status == 410
        assert await stream.read_all() == status
        stream.close()
        await pool.close()


async def test_stream_bad_chunk_framing_is_an_http_error():
    async with Server(streamed([b"zz\r\nnot hex\r\n"], end=False)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {})
        with pytest.raises(HTTPError, match="bad chunk size"):
            await read_stream(stream)
        await pool.close()


async def test_stream_pauses_reading_for_a_slow_consumer_and_loses_nothing(monkeypatch):
    from pysched.client.httppool import Stream
    monkeypatch.setattr(Stream, "HIGH_WATER", 64 * 1024)
    pieces = [chunk(bytes([65 + i % 26]) * 32 * 1024) for i in range(40)]   # 1.25 MiB
    async with Server(streamed(pieces)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {})
        async with asyncio.timeout(10):   # the server writes on while nobody reads
            while not stream._paused:
                await asyncio.sleep(0.01)
        body = await read_stream(stream)
        assert body == b"".join(bytes([65 + i % 26]) * 32 * 1024 for i in range(40))
        await pool.close()


async def test_closing_the_pool_closes_its_open_streams():
    hold = asyncio.Event()
    async with Server(streamed([chunk(b"x\n")], end=False, hold=hold)) as srv:
        pool = HTTPPool(srv.url(), None)
        stream = await pool.open_stream("GET", "/", {})
        await pool.close()
        with pytest.raises(ConnectionClosed):
            await read_stream(stream)
        hold.set()
        with pytest.raises(HTTPError, match="pool is closed"):
            await pool.open_stream("GET", "/", {})
