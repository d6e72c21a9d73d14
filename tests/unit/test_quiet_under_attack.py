"""Logs stay quiet and useful under attack and faults; the connection guard evicts the right one.

The guard's effect on a real server (memory under a flood, legitimate requests served) is in
``tests/e2e/test_hostile_clients.py``; here are the decisions: which connection goes, what is
logged how often, which records are downgraded.
"""

from __future__ import annotations

import asyncio
import io
import logging
import ssl

from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from pysched.metrics import METRICS
from pysched.server.connguard import ConnectionGuard
from pysched.util.eventloop import quiet_transport_errors
from pysched.util.logs import LogfmtFormatter, TransientRetries


class Transport:
    def __init__(self, ip):
        self.ip = ip

    def get_extra_info(self, name):
        return (self.ip, 40000) if name == "peername" else None


class Conn:
    """Stands in for the guard's ``_Connection``: what the guard asks of a connection (is a request
    of it in hand? was it answered before? did it send anything?) and what it does to one."""

    def __init__(self, name):
        self.name = name
        self.handler = self
        self.client = ""
        self.since = self.queued_at = 0.0
        self.heard = False          # sent part of a request head
        self.request = False        # a complete request is queued, handled or being answered
        self.answered = False       # kept alive after an answer
        self.state = "new"

    def admit(self):
        self.state = "served"

    def hold(self):
        self.state = "waiting"

    def idle(self):
        return self.state == "served" and not self.request

    def served(self):
        return self.answered

    def evict(self):
        self.state = "evicted"

    def refuse(self, guard):
        self.state = "refused"

    def close(self):
        self.state = "closed"

    def __repr__(self):
        return f"{self.name}:{self.state}"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def guard_with(name, **kw):
    clock = Clock()
    return ConnectionGuard(name, clock=clock, **kw), clock


def connect(guard, name, ip):
    c = Conn(name)
    assert guard.accept()
    guard.created(c)
    guard.made(c, Transport(ip))
    return c


def shed(name, reason):
    return METRICS.http_connections_shed.labels(name, reason).value


def test_a_burst_from_one_client_waits_for_slots_and_is_served_in_turn():
    """Past its share a client's connections wait, unread; none that holds a request is closed,
    and a fresh one is not taken for idle before it could send: the waiting ones get slots as
    connections are answered, first come first served."""
    guard, clock = guard_with("t-burst", max_connections=8, max_per_client=2)
    c1, c2 = connect(guard, "c1", "10.0.0.9"), connect(guard, "c2", "10.0.0.9")
    waiting = [connect(guard, f"w{i}", "10.0.0.9") for i in range(4)]
    assert [c.state for c in (c1, c2)] == ["served", "served"]
    assert all(w.state == "waiting" for w in waiting) and guard.queued == 4
    clock.now = 0.5                     # c1 and c2 have not been read yet: within the grace
    guard.pump()
    assert guard.queued == 4 and c1.state == c2.state == "served"
    c1.request = c2.request = True      # their requests arrive, and take as long as they take
    clock.now = 60.0
    guard.pump()
    assert c1.state == c2.state == "served"
    assert guard.queued == 0 and all(w.state == "refused" for w in waiting)   # waited queue_timeout
    evicted = shed("t-burst", "evicted")
    more = [connect(guard, f"m{i}", "10.0.0.9") for i in range(3)]
    c2.request, c2.answered = False, True   # answered, kept alive: closed for the next in line
    guard.pump()
    assert c2.state == "evicted" and [m.state for m in more] == ["served", "waiting", "waiting"]
    assert shed("t-burst", "evicted") == evicted + 1
    guard.lost(c2)
    guard.lost(c1)                      # c1 answered with Connection: close
    guard.pump()
    assert [m.state for m in more] == ["served", "served", "waiting"]
    assert guard.connections == 2 and guard.queued == 1


def test_a_slow_or_silent_connection_makes_room_for_its_own_client_after_a_grace():
    guard, clock = guard_with("t-share", max_connections=8, max_per_client=2)
    legit = connect(guard, "legit", "10.0.0.1")
    slow, silent = connect(guard, "slow", "10.0.0.9"), connect(guard, "silent", "10.0.0.9")
    slow.heard = True                   # part of a request head, never the rest
    a, b = connect(guard, "a", "10.0.0.9"), connect(guard, "b", "10.0.0.9")
    assert a.state == b.state == "waiting"
    clock.now = guard.stall_grace
    guard.pump()
    assert slow.state == "evicted" and a.state == "served" and b.state == "waiting"
    clock.now = guard.silent_grace
    guard.pump()
    assert silent.state == "evicted" and b.state == "served"
    assert legit.state == "served" and guard.connections == 3


def test_at_the_global_cap_the_oldest_idle_connection_of_anyone_goes():
    guard, clock = guard_with("t-cap", max_connections=3, max_per_client=3)
    old = connect(guard, "old", "10.0.0.1")
    busy = connect(guard, "busy", "10.0.0.2")
    busy.request = True
    clock.now = 1.5
    young = connect(guard, "young", "10.0.0.3")
    clock.now = 2.0
    before = shed("t-cap", "evicted")
    new = connect(guard, "new", "10.0.0.4")
    assert old.state == "evicted" and new.state == "served"
    assert busy.state == young.state == "served"
    assert shed("t-cap", "evicted") == before + 1
    guard.lost(old)   # the eviction's connection_lost arrives later: nothing is counted twice
    assert guard.connections == 3


def test_a_newcomer_waits_when_every_connection_is_busy():
    """Not refused: it is served when a slot frees. Refused at accept only past the TLS handshakes."""
    guard, clock = guard_with("t-busy", max_connections=2)
    for c in (connect(guard, "x", "10.0.0.1"), connect(guard, "y", "10.0.0.2")):
        c.request = True
    clock.now = 5.0
    z = connect(guard, "z", "10.0.0.3")
    assert z.state == "waiting"
    guard.lost(next(iter(guard._live)))   # noqa: SLF001
    guard.pump()
    assert z.state == "served"
    for i in range(guard.max_pending):
        guard.created(Conn(f"tls{i}"))
    assert not guard.accept()


def test_a_flood_from_one_address_waits_behind_its_own_connections():
    guard, _ = guard_with("t-flood", max_connections=8, max_per_client=2)
    flood = [connect(guard, f"f{i}", "10.0.0.9") for i in range(6)]
    legit = connect(guard, "legit", "10.0.0.1")
    assert legit.state == "served"
    assert [f.state for f in flood] == ["served"] * 2 + ["waiting"] * 4


def test_the_waiting_line_is_bounded_and_the_longest_client_line_is_shed():
    guard, _ = guard_with("t-queue", max_connections=2, max_per_client=1, max_queued=3)
    connect(guard, "a0", "10.0.0.1").request = True
    connect(guard, "b0", "10.0.0.2").request = True
    a = [connect(guard, f"a{i}", "10.0.0.1") for i in range(1, 4)]
    assert [x.state for x in a] == ["waiting"] * 3
    before = shed("t-queue", "refused")
    a4 = connect(guard, "a4", "10.0.0.1")           # its own line is the longest: refused
    b1 = connect(guard, "b1", "10.0.0.2")           # another client: the newest of the longest line goes
    assert a4.state == "refused" and b1.state == "waiting" and a[2].state == "refused"
    assert guard.queued == 3 and shed("t-queue", "refused") == before + 2


def test_the_body_budget_lets_one_request_through_and_holds_the_rest():
    guard = ConnectionGuard("t-body", body_budget=100)
    assert guard.take_body(150)          # alone: always allowed, even past the budget
    assert not guard.take_body(1)
    guard.give_body(150)
    assert guard.take_body(60) and guard.take_body(40) and not guard.take_body(1)


def records_of(logger_name):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogfmtFormatter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger, handler, stream


def test_malformed_requests_log_one_line_per_client_per_interval_without_a_traceback():
    logger, handler, stream = records_of("pysched.test.quiet")
    try:
        guard = ConnectionGuard("t-log", logger=logger, log_interval=3600)
        before = METRICS.http_requests_rejected.labels("t-log", "header_too_long").value
        for _ in range(50):
            guard.quiet.exception("Error handling request from %s", "10.0.0.9",
                                  exc_info=LineTooLong("X-F: xxxx", "8190", "9000"))
        guard.quiet.exception("Error handling request from %s", "10.0.0.7", exc_info=BadHttpMessage("Too many headers"))
        lines = stream.getvalue().splitlines()
        assert len(lines) == 2, lines
        assert all("level=warning" in ln and "rejected a malformed request" in ln for ln in lines)
        assert "client=10.0.0.9" in lines[0] and "reason=header_too_long" in lines[0]
        assert "Traceback" not in stream.getvalue()
        assert METRICS.http_requests_rejected.labels("t-log", "header_too_long").value == before + 50
        # a bug of ours keeps its traceback
        try:
            raise RuntimeError("ours")
        except RuntimeError as exc:
            guard.quiet.exception("Error handling request", exc_info=exc)
        assert "level=error" in stream.getvalue().splitlines()[-1] and "Traceback" in stream.getvalue()
    finally:
        logger.removeHandler(handler)


class Request:
    def __init__(self, remote):
        self.remote = remote


def test_connections_closed_under_a_request_log_one_line_per_client_per_interval():
    logger, handler, stream = records_of("pysched.test.closed")
    try:
        guard = ConnectionGuard("t-closed", logger=logger, log_interval=3600)
        for _ in range(50):
            guard.closed_under(Request("10.0.0.9"), "reading the request body", RuntimeError("Connection closed."))
        guard.closed_under(Request("10.0.0.7"), "writing the response", ConnectionResetError("Connection lost"))
        lines = stream.getvalue().splitlines()
        assert len(lines) == 2, lines
        assert all("level=warning" in ln and "connection closed while" in ln for ln in lines)
        assert "client=10.0.0.9" in lines[0] and "Traceback" not in stream.getvalue()
    finally:
        logger.removeHandler(handler)


def test_kopf_transient_retries_are_not_errors():
    def level_after(name, msg, level=logging.ERROR):
        record = logging.LogRecord(name, level, __file__, 1, msg, None, None)
        TransientRetries().filter(record)
        return record.levelname

    assert level_after("kopf._cogs.clients.watching",
                       "Request attempt #1/9 failed; will retry: GET https://x/api/v1/pods -> Refused") == "INFO"
    assert level_after("kopf._cogs.clients.watching",
                       "Request attempt #4/9 failed; will retry: GET https://x/api/v1/pods -> X") == "WARNING"
    assert level_after("kopf._cogs.clients.api", "Request attempt #9/9 failed; escalating: GET x -> X") == "ERROR"
    assert level_after("pysched.app", "Request attempt #1/9 failed; will retry: ours") == "ERROR"


def test_a_tls_stream_cut_at_exit_is_a_warning_line_not_a_traceback():
    logger, handler, stream = records_of("pysched.util.eventloop")
    loop = asyncio.new_event_loop()
    default = []
    loop.default_exception_handler = default.append
    try:
        quiet_transport_errors(loop, {"message": "Fatal error on SSL transport", "transport": object(),
                                      "exception": ssl.SSLError(1, "[SSL: APPLICATION_DATA_AFTER_CLOSE_NOTIFY]")})
        quiet_transport_errors(loop, {"message": "Task exception was never retrieved",
                                      "exception": ValueError("a bug")})
    finally:
        loop.close()
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "level=warning" in out and "connection closed with an error" in out and "Traceback" not in out
    assert [c["message"] for c in default] == ["Task exception was never retrieved"]
