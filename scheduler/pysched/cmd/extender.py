"""``pysched extender``: the extender process, from the parsed command line.

It builds the scheduler's parts (``SchedulerApp``: the profile's plugins, the informers and their
cache; never the secure port, never leader election, never a scheduling loop), serves the four
extender verbs on them (``pysched.extender.server``) and runs until SIGTERM or SIGINT. Bad
configuration, credentials, certificates or an address it cannot listen on: the message on stderr
and exit code 2.
"""

from __future__ import annotations

import asyncio
import ssl
import sys

from pysched import __version__
from pysched.extender.server import ExtenderServer, log, server_ssl
from pysched.util import eventloop


async def serve(args) -> int:
    from pysched.apis import config as configmod
    from pysched.apis.features import choose, parse_flag, resolve
    from pysched.app import Options, SchedulerApp
    from pysched.client.auth import load
    from pysched.client.discovery import server_version
    from pysched.profile import default_registry
    from pysched.server.delegated_auth import AuthOptions
    from pysched.server.delegated_auth import build as build_auth

    resolve(choose(None, args.emulated_version).version, parse_flag(args.feature_gates))   # the flags, before any call
    cfg = configmod.load_file(args.config) if args.config else configmod.default_config()
    registry = default_registry(args.plugin_module)
    creds = load(args.kubeconfig or cfg.client_connection.kubeconfig or None)
    # The release to behave as: the API server's (or --emulated-version), asked before anything is built.
    stop = asyncio.Event()
    eventloop.stop_on_signals(stop.set)
    server_git_version = await server_version(creds, user_agent=f"pysched/{__version__}", stop=stop)
    if server_git_version is None:
        return 0
    release = choose(server_git_version, args.emulated_version)
    gates = resolve(release.version, parse_flag(args.feature_gates))
    if release.warning:
        log.warning(release.warning)
    app = SchedulerApp(cfg, Options(kubeconfig=args.kubeconfig, serve=False, leader_elect=False,
                                    kube_version=release.version, feature_gates=gates.enabled), creds, registry)
    ctx = server_ssl(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    bind_auth = None
    if args.insecure_allow_unauthenticated_bind:
        log.warning("--insecure-allow-unauthenticated-bind: anyone who can reach the port can bind pods and "
                    "plan preemptions through this extender (lab use only)")
    else:
        bind_auth = await build_auth(AuthOptions(authentication_kubeconfig=args.authentication_kubeconfig,
                                                 authorization_kubeconfig=args.authorization_kubeconfig,
                                                 skip_lookup=True, always_allow_paths=[]), creds)
        if ctx is None:
            log.warning("bind and preempt accept bearer tokens over plain HTTP; serve HTTPS "
                        "(--tls-cert-file/--tls-private-key-file) so tokens are not sent in the clear")
    server = ExtenderServer(app, args.profile, max_body=args.max_body_bytes, header_timeout=args.header_timeout,
                            body_timeout=args.body_timeout, bind_scheduler_names=args.bind_scheduler_name or None,
                            bind_auth=bind_auth, max_connections=args.max_connections)
    eventloop.stop_on_signals(app.request_stop)
    try:
        # A signal while the informers still wait for a first LIST (API server unreachable) ends
        # the start-up too.
        if await app.until_stopped(app.start_informers()):
            await server.start(args.address, args.port, ctx)
            await app.stopping.wait()
    finally:
        await server.stop()
        await app.shutdown()
        if bind_auth is not None:
            await bind_auth.close()
    return 0


def main(args) -> int:
    from pysched.apis.config import ConfigError
    from pysched.client.auth import CredentialsError
    from pysched.runtime.registry import RegistryError
    try:
        return eventloop.run(serve(args))
    except (ConfigError, RegistryError, CredentialsError, ValueError, ssl.SSLError, OSError) as exc:
        print(f"pysched extender: {exc}", file=sys.stderr)
        return 2
