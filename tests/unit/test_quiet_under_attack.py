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


class Handler:
    """Stands in for aiohttp's RequestHandler: the guard only calls force_close on it."""

    def __init__(self, name):
        self.name = name
        self.closed = False

    def force_close(self):
        self.closed = True

    def __repr__(self):
        return self.name


def connect(guard, name, ip):
    h = Handler(name)
    assert guard.accept()
    guard.created(h)
    guard.made(h, Transport(ip))
    return h


def test_a_client_over_its_share_evicts_its_own_oldest_idle_connection():
    guard = ConnectionGuard("t-share", max_connections=8, max_per_client=2)
    legit = connect(guard, "legit", "10.0.0.1")
    a1, a2 = connect(guard, "a1", "10.0.0.9"), connect(guard, "a2", "10.0.0.9")
    guard._busy.add(a1)   # noqa: SLF001 - a1 is in a handler: it must not be evicted
    a3 = connect(guard, "a3", "10.0.0.9")
    assert a2.closed and not a1.closed and not legit.closed and not a3.closed
    assert guard.connections == 3


def test_at_the_global_cap_the_oldest_idle_connection_of_anyone_goes():
    guard = ConnectionGuard("t-cap", max_connections=3, max_per_client=3)
    old = connect(guard, "old", "10.0.0.1")
    busy = connect(guard, "busy", "10.0.0.2")
    guard._busy.add(busy)   # noqa: SLF001
    young = connect(guard, "young", "10.0.0.3")
    before = METRICS.http_connections_shed.labels("t-cap", "evicted").value
    new = connect(guard, "new", "10.0.0.4")
    assert old.closed and not busy.closed and not young.closed and not new.closed
    assert METRICS.http_connections_shed.labels("t-cap", "evicted").value == before + 1
    guard.lost(old)   # the eviction's connection_lost arrives later: nothing is counted twice
    assert guard.connections == 3


def test_a_newcomer_is_refused_only_when_every_connection_is_busy():
    guard = ConnectionGuard("t-busy", max_connections=2)
    for h in (connect(guard, "x", "10.0.0.1"), connect(guard, "y", "10.0.0.2")):
        guard._busy.add(h)   # noqa: SLF001
    assert not guard.accept()
    guard._busy.clear()   # noqa: SLF001
    assert guard.accept()


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
