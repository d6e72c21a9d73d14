"""The scheduler process's secure port: /healthz, /readyz, /livez, /metrics, /configz and
/debug/explain, behind delegated authentication and authorization (``server.secure``).

The port is bound when the process starts (``bind``: a port in use fails at once) and served
later - the app decides when (``SchedulerApp._serve``) - so that importing and building the server
does not delay the first bind, while a client that connects meanwhile waits for its answer instead
of being refused. ``close`` stops the server, closes the sockets it never served and the
delegated authentication's clients.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from pysched.assembly.options import Options
from pysched.client.auth import Credentials
from pysched.server import listener
from pysched.server.delegated_auth import DelegatedAuth
from pysched.server.delegated_auth import build as build_auth

if TYPE_CHECKING:
    from pysched.server.secure import SecureServer


class SecureServing:
    def __init__(self, options: Options, creds: Credentials):
        self.options = options
        self.creds = creds
        self.server: SecureServer | None = None
        self.listeners: list[socket.socket] = []   # the secure port, bound at start (``server.listener``)
        self.auth: DelegatedAuth | None = None

    def bind(self) -> None:
        """Bind the secure port now (OSError: in use, or not allowed)."""
        self.listeners = listener.bind(self.options.bind_address, self.options.secure_port)

    async def start(self, *, ready: Callable[[], tuple[bool, str]], healthy: Callable[[], tuple[bool, str]],
                    configz: Callable[[], dict], explain: Callable[[str], dict | None],
                    stopping: asyncio.Event, about: Callable[[], dict[str, str]] | None = None) -> None:
        """Build the delegated authentication (ReviewError when it cannot be), then serve the port
        (OSError: the certificate, the socket) - unless ``stopping`` was set meanwhile."""
        from pysched.server.secure import SecureServer
        o = self.options
        self.auth = await build_auth(o.auth, self.creds)
        if stopping.is_set():
            return   # shutting down: the port must not open now
        self.server = SecureServer(address=o.bind_address, port=o.secure_port, cert_file=o.tls_cert_file,
                                   key_file=o.tls_private_key_file, cert_dir=o.cert_dir, ready=ready,
                                   healthy=healthy, configz=configz, explain=explain,
                                   auth=self.auth, sockets=self.listeners, about=about)
        await self.server.start()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.stop()
        for sock in self.listeners:
            sock.close()   # no-op once the server has served (and closed) them
        if self.auth is not None:
            await self.auth.close()
