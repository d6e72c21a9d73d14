"""Which asyncio event loop the long-running commands use.

uvloop when it is installed (a default dependency on Linux and macOS): in the 5,000-node
benchmark it cut the scheduler's CPU per pod by about a tenth, mostly in TLS and socket reads of
the binds and watch streams. ``PYSCHED_EVENT_LOOP=asyncio`` forces the standard loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("pysched.util.eventloop")


def run(main: Coroutine[Any, Any, Any]) -> Any:
    if os.environ.get("PYSCHED_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            log.debug("uvloop not installed; using the asyncio event loop")
        else:
            return uvloop.run(main)
    return asyncio.run(main)
