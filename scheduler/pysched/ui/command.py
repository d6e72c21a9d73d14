"""``pysched ui``: load the scenario (a snapshot file, or a read-only import of a live cluster),
then serve the what-if web UI on loopback until SIGINT/SIGTERM.

The line ``pysched ui: serving http://127.0.0.1:<port>/?token=<token>`` on stdout is the address
that logs a browser in (the token is the session secret; the page sets it as a cookie). Logs go to
stderr. A non-loopback ``--address`` needs ``--insecure-bind-any`` and logs a warning. With
``--kubeconfig`` the cluster is listed once, as ``pysched snapshot`` lists it, and nothing is ever
written to it. Exit status: 0 stopped by a signal, 1 the cluster could not be read, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import signal
import sys
import tempfile
from pathlib import Path

from pysched.tools.snapshot import Snapshot, SnapshotError, load_snapshot, read_objects


def add_parser(sub: argparse._SubParsersAction) -> None:
    ui = sub.add_parser("ui", help="serve a live what-if web UI over a cluster snapshot (loopback)",
                        epilog="exit status:\n  0  stopped (SIGINT/SIGTERM)\n  1  the cluster could not be read\n"
                               "  2  bad flags or input",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ui.add_mutually_exclusive_group()
    src.add_argument("--cluster", metavar="SNAPSHOT",
                     help="snapshot (pysched snapshot, or kubectl get nodes,pods,... -A -o yaml)")
    src.add_argument("--kubeconfig", help="import a live cluster once, read-only (as pysched snapshot does)")
    ui.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    ui.add_argument("--pods", metavar="FILE", help="pods, workloads and supporting objects to add (YAML)")
    ui.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's plugins)")
    ui.add_argument("--address", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    ui.add_argument("--port", type=int, default=0, help="port (default: 0, any free one)")
    ui.add_argument("--insecure-bind-any", action="store_true",
                    help="allow a non-loopback --address (lab only: anyone who reaches the port and learns the "
                         "token can use the UI)")
    ui.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                    help="least severe log level written (default: info)")
    ui.add_argument("--log-format", default="logfmt", choices=("logfmt", "json"),
                    help="structured log lines as key=value (logfmt) or JSON objects (default: logfmt)")


def _loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _snapshot(args: argparse.Namespace) -> Snapshot:
    if args.cluster:
        return load_snapshot(args.cluster)
    if args.kubeconfig:
        from pysched.tools.export import connect, dump, export
        api = connect(args.kubeconfig, args.context)
        listed = export(api)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            dump(listed, f, "json")
        try:
            return load_snapshot(f.name)
        finally:
            Path(f.name).unlink(missing_ok=True)
    return Snapshot()


def main(args: argparse.Namespace) -> int:
    from pysched.ui.scenario import Scenario, ScenarioError
    from pysched.ui.server import serve

    if not _loopback(args.address) and not args.insecure_bind_any:
        print(f"pysched ui: --address {args.address} is not a loopback address; add --insecure-bind-any to serve "
              "beyond this machine", file=sys.stderr)
        return 2
    try:
        snapshot = _snapshot(args)
    except (SnapshotError, ValueError) as exc:
        print(f"pysched ui: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the export's client errors: the cluster could not be read
        print(f"pysched ui: cannot read the cluster: {exc}", file=sys.stderr)
        return 1
    try:
        pods = [obj for obj, _ in read_objects(args.pods)] if args.pods else None
        config = Path(args.config).read_text() if args.config else None
        scenario = Scenario.from_snapshot(snapshot, pods, config)
        scenario.sources = {k: v for k, v in (("cluster", args.cluster), ("kubeconfig", args.kubeconfig),
                                                ("pods", args.pods), ("config", args.config)) if v}
    except (SnapshotError, ScenarioError) as exc:
        print(f"pysched ui: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"pysched ui: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(scenario, host=args.address, port=args.port, stop=stop,
                    on_ready=lambda url: print(f"pysched ui: serving {url}", flush=True))

    try:
        asyncio.run(run())
    except OSError as exc:
        print(f"pysched ui: cannot listen on {args.address}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
