"""A header flood: many slow clients that each hold a server connection with large request headers.

What an attacker on the Service network can do to ``pysched extender`` or the scheduler's secure
port without credentials: open ``connections`` connections (TLS or not) and trickle
``headers`` header fields of ``size`` bytes each into every one, never finishing the request
head, reconnecting whenever the server closes one. Used by ``tests/e2e/test_hostile_clients.py``;
by hand::

    python -m pysched_dev.flood --host 127.0.0.1 --port 8888 --connections 300 --seconds 20 --source 127.0.0.2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass, field


@dataclass
class FloodStats:
    opened: int = 0
    closed_by_server: int = 0
    answers: dict[str, int] = field(default_factory=dict)   # first line of what the server said -> count


async def flood(host: str, port: int, *, tls: bool, connections: int, headers: int, size: int,
                seconds: float, pace: float = 0.01, source: str | None = None,
                client_cert: tuple[str, str] | None = None, stats: FloodStats | None = None) -> FloodStats:
    """Keep ``connections`` slow clients going for ``seconds``; returns what happened.

    ``client_cert`` (certificate and key files) is presented in the TLS handshake: a client the
    server trusts (``--client-ca-file``) that misbehaves, past the handshake a stranger fails."""
    stats = stats or FloodStats()
    ctx = None
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if client_cert:
            ctx.load_cert_chain(*client_cert)
    end = time.monotonic() + seconds
    value = b"x" * max(1, size - 16)

    async def one_client() -> None:
        while time.monotonic() < end:
            try:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ctx, local_addr=(source, 0) if source else None)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            stats.opened += 1
            try:
                writer.write(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
                for i in range(headers):
                    if time.monotonic() >= end or reader.at_eof():
                        break
                    writer.write(b"X-F-%05d: %s\r\n" % (i, value))
                    await writer.drain()
                    await asyncio.sleep(pace)
                # Never finish the request head: hold the connection until the server gives up.
                line = await asyncio.wait_for(reader.readline(), max(0.1, end - time.monotonic()))
                stats.closed_by_server += 1
                key = line.decode(errors="replace").strip() or "(closed)"
                stats.answers[key] = stats.answers.get(key, 0) + 1
            except (TimeoutError, OSError, ssl.SSLError):
                stats.closed_by_server += 1
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    await asyncio.gather(*(one_client() for _ in range(connections)))
    return stats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--connections", type=int, default=300)
    p.add_argument("--headers", type=int, default=100)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--source", default=None, help="local address to connect from (e.g. 127.0.0.2)")
    p.add_argument("--cert", default=None, help="client certificate for the TLS handshake (with --key)")
    p.add_argument("--key", default=None, help="the client certificate's key")
    a = p.parse_args()
    if bool(a.cert) != bool(a.key):
        p.error("--cert and --key go together")
    s = asyncio.run(flood(a.host, a.port, tls=a.tls, connections=a.connections, headers=a.headers, size=a.size,
                          seconds=a.seconds, source=a.source, client_cert=(a.cert, a.key) if a.cert else None))
    print(f"opened={s.opened} closed_by_server={s.closed_by_server} answers={s.answers}")


if __name__ == "__main__":
    main()
