"""Which asyncio event loop the long-running commands use, and how they end their tasks.

uvloop when it is installed (a default dependency on Linux and macOS): in the 5,000-node
benchmark it cut the scheduler's CPU per pod by about a tenth, mostly in TLS and socket reads of
the binds and watch streams. ``PYSCHED_EVENT_LOOP=asyncio`` forces the standard loop.

``cancel_and_wait`` ends background tasks at shutdown without trusting each to honour one
cancel: a task that swallowed it (Python 3.11's ``wait_for`` does so when the awaited thing
finishes in the same step) is cancelled again, and the wait is bounded either way.

``stop_on_signals``: SIGTERM and SIGINT call a process's stop (where the loop can take signal
handlers).

``quiet_transport_errors``: the loop reports a connection that failed under a transport - a TLS
stream cut as a peer or this process hangs up, typical when a replica exits after losing its lease -
as one warning line, not an error with a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import ssl
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from pysched.util.logs import kv

log = logging.getLogger("pysched.util.eventloop")
TRANSPORT_ERRORS = (ssl.SSLError, ConnectionError, TimeoutError)


def run(main: Coroutine[Any, Any, Any]) -> Any:
    main = _with_quiet_transport_errors(main)
    if os.environ.get("PYSCHED_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            log.debug("uvloop not installed; using the asyncio event loop")
        else:
            return uvloop.run(main)
    return asyncio.run(main)


async def _with_quiet_transport_errors(main: Coroutine[Any, Any, Any]) -> Any:
    asyncio.get_running_loop().set_exception_handler(quiet_transport_errors)
    return await main


def quiet_transport_errors(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The loop's exception handler: a connection that failed under a transport (a TLS stream cut
    when a peer or this process hangs up - typically at exit, with connections still open) is one
    warning line without a traceback; anything else goes to the default handler, traceback and all."""
    exc = context.get("exception")
    if isinstance(exc, TRANSPORT_ERRORS) and ("transport" in context or "protocol" in context):
        log.warning("connection closed with an error", extra=kv(
            error=f"{type(exc).__name__}: {exc}", what=context.get("message") or None))
        return
    loop.default_exception_handler(context)


async def cancel_and_wait(tasks: Iterable[asyncio.Task], grace: float = 10.0,
                          recancel: float = 0.5) -> list[asyncio.Task]:
    """Cancel ``tasks`` and wait for them to end, cancelling again every ``recancel`` seconds
    those still running; after ``grace`` seconds stop waiting. Returns (and logs) the tasks
    that never ended. Their exceptions are consumed: this is for shutdown."""
    loop = asyncio.get_running_loop()
    tasks = list(tasks)
    pending = {t for t in tasks if not t.done()}
    deadline = loop.time() + grace
    while pending:
        for t in pending:
            t.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(recancel, left))
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()   # retrieved: no "exception was never retrieved" at exit
    if pending:
        log.error("tasks did not end after being cancelled; leaving them",
                  extra=kv(tasks=",".join(sorted(t.get_name() for t in pending)), grace=grace))
    return sorted(pending, key=lambda t: t.get_name())


def stop_on_signals(stop: Callable[[], None]) -> None:
    """Call ``stop`` on SIGTERM and SIGINT (the running loop's handlers; nothing where the loop
    cannot take them: another thread's loop, or a platform without them)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop)
        except (NotImplementedError, RuntimeError):
            pass
