"""The API server's version (``GET /version``), read once at start-up to choose the release pysched follows.

``server_version`` asks until it gets an answer: an API server that is not up yet (a control plane
starting beside pysched) is waited for, one warning per attempt with a growing pause (up to 5 s),
as the informers wait for their first LIST. It returns the ``gitVersion`` (``v1.37.2``). A stop
requested meanwhile (SIGTERM) ends the wait at once, even with a request hanging: the caller gets
``None``.
"""

from __future__ import annotations

import asyncio
import logging

import orjson

from pysched.client.auth import Credentials
from pysched.client.httppool import HTTPPool

log = logging.getLogger("pysched.client.discovery")

REQUEST_TIMEOUT = 10.0
MAX_PAUSE = 5.0


class VersionUnavailable(Exception):
    """The answer to ``GET /version`` was not a version."""


async def read_version(pool: HTTPPool, headers: dict[str, str]) -> str:
    resp = await pool.request("GET", "/version", headers, timeout=REQUEST_TIMEOUT)
    if resp.status != 200:
        raise VersionUnavailable(f"GET /version: HTTP {resp.status}: {resp.body[:200]!r}")
    try:
        git_version = orjson.loads(resp.body)["gitVersion"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise VersionUnavailable(f"GET /version: no gitVersion in {resp.body[:200]!r}") from exc
    if not isinstance(git_version, str):
        raise VersionUnavailable(f"GET /version: gitVersion {git_version!r} is not a string")
    return git_version


async def server_version(creds: Credentials, *, user_agent: str, stop: asyncio.Event | None = None) -> str | None:
    """The API server's ``gitVersion``; retried until it answers, or None once ``stop`` is set."""
    token = creds.bearer()
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    pool = HTTPPool(creds.server.rstrip("/"), creds.ssl_context() or None, limit=1,
                    server_hostname=creds.tls_server_name, user_agent=user_agent)
    stop = stop or asyncio.Event()
    pause = 0.2
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            ask = asyncio.ensure_future(read_version(pool, headers))
            await asyncio.wait([ask, stopped], return_when=asyncio.FIRST_COMPLETED)
            if not ask.done():   # stopped while the request hangs (an API server that never answers)
                ask.cancel()
                await asyncio.gather(ask, return_exceptions=True)
                return None
            try:
                return ask.result()
            except Exception as exc:  # noqa: BLE001 - any failure: wait and ask again
                log.warning("reading the API server's version failed; retrying",
                            extra={"server": creds.server, "error": repr(exc), "retry_in_s": pause})
            try:
                await asyncio.wait_for(stop.wait(), pause)
            except TimeoutError:
                pass
            pause = min(pause * 2, MAX_PAUSE)
        return None
    finally:
        stopped.cancel()
        await pool.close()
