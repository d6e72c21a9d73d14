"""The secure port's listening sockets, bound before the server that will serve them exists.

The scheduler binds its port at start-up, as kube-scheduler does (a port in use fails at once),
but imports and builds the HTTPS server only once it is under way (``SchedulerApp._serve``): a
client that connects meanwhile waits in the listen backlog for its TLS handshake instead of being
refused. Only the standard library is imported here.
"""

from __future__ import annotations

import socket

BACKLOG = 128


def bind(address: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets for ``address``:``port`` (one per address it resolves to, as
    ``loop.create_server`` binds them); OSError naming nothing else when one cannot be bound."""
    infos = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    seen: set[tuple] = set()
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            s = socket.socket(family, kind, proto)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)   # its IPv4 twin binds 0.0.0.0
            s.bind(addr)
            s.listen(BACKLOG)
            s.setblocking(False)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks
