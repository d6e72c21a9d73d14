"""``pysched ui``: load the scenario (a snapshot file, or a read-only import of a live cluster),
then serve the what-if web UI on loopback until SIGINT/SIGTERM.

The line ``pysched ui: serving http://127.0.0.1:<port>/?token=<token>`` on stdout is the address
that logs a browser in (the token is the session secret; the page sets it as a cookie). Logs go to
stderr. A non-loopback ``--address`` needs ``--insecure-bind-any`` and logs a warning. With
``--kubeconfig`` the cluster is listed once, as ``pysched snapshot`` lists it, and nothing is ever
written to it. ``--max-pods``, ``--max-nodes``, ``--max-scenario-bytes``, ``--max-request-bytes``
and ``--max-runs`` bound what the UI holds (``ui.limits.Limits``): a snapshot or ``--pods`` beyond
them is refused at start (exit 2), an edit beyond them by the API. Only requests whose ``Host``
names this server are answered (``--allow-host`` adds names). Exit status: 0 stopped by a signal,
1 the cluster could not be read, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
from pathlib import Path

from pysched.apis.core.quantity import QuantityError, value
from pysched.tools.snapshot import Snapshot, SnapshotError, load_snapshot, read_objects
from pysched.ui.limits import Limits
from pysched.util.netaddr import is_loopback_host

DEFAULTS = Limits()


def _count(text: str) -> int:
    try:
        n = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _size(text: str) -> int:
    try:
        n = value(text)
    except (QuantityError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a size in bytes (such as 536870912, 512Mi or 1Gi), "
                                         f"got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive size, got {text!r}")
    return n


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
    ui.add_argument("--feature-gates", default="", metavar="NAME=BOOL,...",
                    help="kube-scheduler's feature gates for every run, as pysched simulate takes them (e.g. "
                         "GenericWorkload=true,TopologyAwareWorkloadScheduling=true)")
    ui.add_argument("--address", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    ui.add_argument("--port", type=int, default=0, help="port (default: 0, any free one)")
    ui.add_argument("--insecure-bind-any", action="store_true",
                    help="allow a non-loopback --address (lab only: anyone who reaches the port and learns the "
                         "token can use the UI)")
    ui.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="a name the Host header may carry besides 127.0.0.1, localhost, [::1] and --address "
                         "(repeatable; e.g. this machine's name with --insecure-bind-any)")
    lim = ui.add_argument_group("limits", "a scenario beyond these is refused (at start, or the edit that would pass "
                                          "one); they bound the memory the UI takes")
    lim.add_argument("--max-pods", type=_count, default=DEFAULTS.max_pods, metavar="N",
                     help=f"pods in the scenario, workloads expanded (default: {DEFAULTS.max_pods})")
    lim.add_argument("--max-nodes", type=_count, default=DEFAULTS.max_nodes, metavar="N",
                     help=f"nodes in the scenario (default: {DEFAULTS.max_nodes})")
    lim.add_argument("--max-scenario-bytes", type=_size, default=DEFAULTS.max_scenario_bytes, metavar="SIZE",
                     help="the scenario's objects as JSON, e.g. 512Mi; in memory they take a few times that, and "
                          "kept runs are dropped beyond it (default: 512Mi)")
    lim.add_argument("--max-request-bytes", type=_size, default=DEFAULTS.max_request_bytes, metavar="SIZE",
                     help="an API request's body (default: 16Mi)")
    lim.add_argument("--max-runs", type=_count, default=DEFAULTS.max_runs, metavar="N",
                     help=f"runs kept to look at and compare, oldest dropped first (default: {DEFAULTS.max_runs})")
    ui.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                    help="least severe log level written (default: info)")
    ui.add_argument("--log-format", default="logfmt", choices=("logfmt", "json"),
                    help="structured log lines as key=value (logfmt) or JSON objects (default: logfmt)")


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
    from pysched.ui.scenario import FieldError, Scenario, ScenarioError
    from pysched.ui.server import serve

    if not is_loopback_host(args.address) and not args.insecure_bind_any:
        print(f"pysched ui: --address {args.address} is not a loopback address; add --insecure-bind-any to serve "
              "beyond this machine", file=sys.stderr)
        return 2
    limits = Limits(max_pods=args.max_pods, max_nodes=args.max_nodes, max_scenario_bytes=args.max_scenario_bytes,
                    max_request_bytes=args.max_request_bytes, max_runs=args.max_runs)
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
        scenario = Scenario.from_snapshot(snapshot, pods, config, limits)
        if args.feature_gates:
            from pysched.apis.features import NEWEST, FeatureGateError, parse_flag, resolve
            try:
                scenario.feature_gates = resolve(NEWEST, parse_flag(args.feature_gates)).enabled
            except FeatureGateError as exc:
                raise ScenarioError([FieldError("feature-gates", str(exc))]) from None
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
        await serve(scenario, host=args.address, port=args.port, stop=stop, allow_hosts=args.allow_host,
                    on_ready=lambda url: print(f"pysched ui: serving {url}", flush=True))

    try:
        asyncio.run(run())
    except OSError as exc:
        print(f"pysched ui: cannot listen on {args.address}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
