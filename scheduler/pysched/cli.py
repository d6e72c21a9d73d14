"""Command line: ``pysched [run] --config FILE --kubeconfig FILE`` and the other subcommands.

This module parses the flags and hands each command to what runs it: ``pysched.cmd.scheduler``
(``run``), ``pysched.cmd.extender`` (``extender``), or the tool's own module.

Exit codes: 0 after a clean shutdown, 1 when the scheduler stopped because of an error (lost
lease, fatal component failure), 2 for bad configuration or flags (the message names the field).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pysched import __version__
from pysched.apis import config as configmod
from pysched.util import logs

log = logging.getLogger("pysched.cli")
SUBCOMMANDS = ("run", "extender", "simulate", "snapshot", "plugin", "ui", "trace", "explain")
# The secure port of a process run by hand answers on this machine only (a laptop does not expose
# /metrics to its network); a pod's manifests pass --bind-address=0.0.0.0 for its probes and scrapes.
DEFAULT_BIND_ADDRESS = "127.0.0.1"


def _common(p: argparse.ArgumentParser, log_level: str = "info") -> None:
    """The flags every scheduling command shares; ``log_level``: the default of ``--log-level`` (a
    one-shot command a person reads, such as simulate, keeps its terminal to its report)."""
    p.add_argument("--config", help="KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1)")
    p.add_argument("--kubeconfig", help="kubeconfig file; default: in-cluster, then $KUBECONFIG")
    p.add_argument("--plugin-module", action="append", default=[], metavar="MODULE",
                   help="import MODULE to register out-of-tree plugins (repeatable)")
    p.add_argument("--log-level", default=log_level, choices=("debug", "info", "warning", "error"),
                   help=f"least severe log level written (default: {log_level})")
    p.add_argument("--log-format", default="logfmt", choices=("logfmt", "json"),
                   help="structured log lines as key=value (logfmt) or JSON objects (default: logfmt)")


def _bool(text: str) -> bool:
    """A pflag-style boolean value (``--flag``, ``--flag=true``, ``--flag=false``)."""
    t = text.strip().lower()
    if t in ("1", "t", "true", "yes"):
        return True
    if t in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _duration(text: str) -> float:
    try:
        return configmod.parse_duration(text, "value")
    except configmod.ConfigError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (use forms like 10s, 1m, 500ms)") from None


class _StringSlice(argparse.Action):
    """pflag's StringSlice: comma-separated; the first use replaces the default, later uses append."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = [v.strip() for v in values.split(",") if v.strip()]
        seen = getattr(namespace, f"_{self.dest}_set", False)
        setattr(namespace, self.dest, (getattr(namespace, self.dest) if seen else []) + items)
        setattr(namespace, f"_{self.dest}_set", True)


def _release_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--feature-gates", default="", metavar="NAME=BOOL,...",
                   help="kube-scheduler's feature gates, with kube's names and rules (defaults: those of the "
                        "release pysched follows), and pysched's own, off by default: "
                        "PyschedExistingAntiAffinityDeleteHint (docs/compatibility.md, docs/queueing-hints.md)")
    p.add_argument("--emulated-version", default=None, metavar="1.MINOR",
                   help="behave as this kube-scheduler release (1.35, 1.36 or 1.37) instead of the API "
                        "server's; needed against a server outside that window (docs/compatibility.md)")


def _delegation_kubeconfigs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--authentication-kubeconfig", default=None, metavar="FILE",
                   help="kubeconfig with rights to create tokenreviews.authentication.k8s.io "
                        "(default: the scheduler's own credentials)")
    p.add_argument("--authorization-kubeconfig", default=None, metavar="FILE",
                   help="kubeconfig with rights to create subjectaccessreviews.authorization.k8s.io "
                        "(default: the scheduler's own credentials)")


def _auth_flags(p: argparse.ArgumentParser) -> None:
    """kube-scheduler's delegated authentication/authorization flags for the secure port."""
    _delegation_kubeconfigs(p)
    p.add_argument("--authorization-always-allow-paths", action=_StringSlice, default=["/healthz", "/readyz", "/livez"],
                   metavar="PATHS", help="comma-separated paths (a trailing * matches a prefix) served without "
                                         "authorization (default: /healthz,/readyz,/livez)")
    p.add_argument("--client-ca-file", default=None, help="CA bundle: a client certificate it signed authenticates "
                   "as its CN (groups: O). Default: client-ca-file of configmap "
                   "kube-system/extension-apiserver-authentication")
    p.add_argument("--authentication-skip-lookup", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="do not look up the client CA in the cluster")
    p.add_argument("--authentication-tolerate-lookup-failure", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL", help="a failed client CA lookup only disables client certificates (default true)")
    p.add_argument("--authentication-token-webhook-cache-ttl", type=_duration, default=10.0, metavar="DURATION",
                   help="how long TokenReview answers are cached (default 10s)")
    p.add_argument("--authorization-webhook-cache-authorized-ttl", type=_duration, default=10.0, metavar="DURATION",
                   help="how long allowed SubjectAccessReview answers are cached (default 10s)")
    p.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=_duration, default=10.0, metavar="DURATION",
                   help="how long denied SubjectAccessReview answers are cached (default 10s)")
    p.add_argument("--insecure-disable-auth", action="store_true",
                   help="LAB ONLY: serve /metrics, /configz and /debug/explain to anyone, unauthenticated")


def auth_options(args):
    from pysched.server.delegated_auth import AuthOptions
    return AuthOptions(authentication_kubeconfig=args.authentication_kubeconfig,
                       authorization_kubeconfig=args.authorization_kubeconfig,
                       always_allow_paths=list(args.authorization_always_allow_paths),
                       client_ca_file=args.client_ca_file, skip_lookup=args.authentication_skip_lookup,
                       tolerate_lookup_failure=args.authentication_tolerate_lookup_failure,
                       token_cache_ttl=args.authentication_token_webhook_cache_ttl,
                       authorized_ttl=args.authorization_webhook_cache_authorized_ttl,
                       unauthorized_ttl=args.authorization_webhook_cache_unauthorized_ttl,
                       insecure_disable=args.insecure_disable_auth)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pysched", description="A secondary Kubernetes scheduler in Python.")
    parser.add_argument("--version", action="version", version=f"pysched {__version__}")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run the scheduler (default)")
    _common(run)
    run.add_argument("--write-config-to", metavar="FILE",
                     help="write the effective configuration (defaults applied) to FILE ('-' for stdout) and exit")
    run.add_argument("--secure-port", type=int, default=10259, help="HTTPS port for /healthz, /readyz, /metrics")
    run.add_argument("--bind-address", default=DEFAULT_BIND_ADDRESS,
                     help="address the secure port (/healthz, /readyz, /metrics) listens on (default: 127.0.0.1, "
                          "this machine only; in a pod pass 0.0.0.0 so that the kubelet's probes and Prometheus "
                          "reach the pod IP, as manifests/ and the Helm chart do)")
    run.add_argument("--cert-dir", default=None, help="where the self-signed serving certificate is written")
    run.add_argument("--tls-cert-file", default=None,
                     help="serving certificate for the secure port (default: self-signed, written to --cert-dir)")
    run.add_argument("--tls-private-key-file", default=None, help="private key of --tls-cert-file")
    run.add_argument("--identity", default=None,
                     help="leader election identity (default: $POD_NAME or hostname + uuid)")
    run.add_argument("--no-serve", action="store_true", help="do not open the secure port")
    run.add_argument("--leader-elect", dest="leader_elect", default=None,
                     type=lambda s: s.lower() in ("1", "true", "yes"), help="override leaderElection.leaderElect")
    run.add_argument("--resync-period", type=float, default=0.0,
                     help="seconds between deliberate informer re-lists (0, the default: re-list only when a "
                          "watch cannot resume, like client-go)")
    _release_flags(run)
    run.add_argument("--pod-recovery-interval", type=_positive_float, default=30.0, metavar="SECONDS",
                     help="seconds between checks that every pending pod of ours is queued or being bound; one "
                          "held nowhere for two checks in a row is put back (pysched_pods_recovered_total)")
    run.add_argument("--seed", type=int, default=None, help="tie-break random seed (reproducible placements)")
    run.add_argument("--explain-all", action="store_true", help="keep a per-plugin trace of every cycle")
    run.add_argument("--shadow", action="store_true",
                     help="never bind: compute placements for pods of other schedulers and report agreement")
    run.add_argument("--event-backlog-limit", type=_positive_int, default=None, metavar="N",
                     help="distinct Events the recorder may hold unwritten or for series aggregation before it "
                          "drops the least valuable (default: 100000)")
    run.add_argument("--shadow-scheduler-name", action="append", default=[], metavar="NAME",
                     help="schedulerName whose pods --shadow predicts (repeatable; default: default-scheduler)")
    run.add_argument("--podgroup-controller", default="auto", choices=("auto", "on", "off"),
                     help="keep the status of scheduling.x-k8s.io PodGroups current (phase, running/succeeded/"
                          "failed, occupiedBy, scheduleStartTime) while this replica leads: auto (default) runs it "
                          "when a profile enables Coscheduling, once the PodGroup CRD is served, checking every "
                          "10s; on runs it whatever the profiles and warns while the CRD is absent; off never runs "
                          "it (another controller owns PodGroup status)")
    run.add_argument("--elasticquota-controller", default="auto", choices=("auto", "off"),
                     help="keep status.used of scheduling.x-k8s.io ElasticQuotas current while this replica "
                          "leads: auto (default) runs it when a profile enables CapacityScheduling, once the "
                          "ElasticQuota CRD is served; off never runs it (another controller owns their status)")
    _auth_flags(run)

    ext = sub.add_parser("extender", help="serve the plugins as a kube-scheduler extender")
    _common(ext)
    ext.add_argument("--port", type=int, default=8888, help="port the extender verbs are served on (default: 8888)")
    ext.add_argument("--address", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    ext.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (default: plain HTTP)")
    ext.add_argument("--tls-private-key-file", help="private key of --tls-cert-file")
    ext.add_argument("--client-ca-file", help="require a client certificate from this CA (mTLS) on every verb; "
                                              "its holders may bind and preempt")
    _delegation_kubeconfigs(ext)
    _release_flags(ext)
    ext.add_argument("--insecure-allow-unauthenticated-bind", action="store_true",
                     help="LAB ONLY: let anyone who reaches the port call bind and preempt")
    ext.add_argument("--profile", default=None, help="schedulerName of the profile to serve (default: the first)")
    ext.add_argument("--bind-scheduler-name", action="append", default=[], metavar="NAME",
                     help="bind only pods whose spec.schedulerName is NAME (repeatable; default: default-scheduler "
                          "and the served profile's name - kube-scheduler calls bind for pods of its own profiles)")
    ext.add_argument("--max-body-bytes", type=_positive_int, default=10 * 1024 * 1024,
                     help="larger request bodies get 413 (default: 10 MiB)")
    ext.add_argument("--header-timeout", type=_positive_float, default=10.0, metavar="SECONDS",
                     help="close a connection that has not sent a request's headers within this time of opening "
                          "or of the previous response (default: 10)")
    ext.add_argument("--body-timeout", type=_positive_float, default=30.0, metavar="SECONDS",
                     help="answer 408 and close when a request body takes longer than this (default: 30)")
    ext.add_argument("--max-connections", type=_positive_int, default=128, metavar="N",
                     help="connections served at once, a quarter of them at most from one client address "
                          "(default: 128); past that a connection waits, unread, for a slot (at most "
                          "--header-timeout, then 503): an idle or slow one is closed to make room, one "
                          "that has sent a complete request never")

    from pysched.tools.exitcodes import SIMULATE_EXIT_HELP
    sim = sub.add_parser("simulate", help="schedule pods onto a cluster snapshot without an API server",
                         epilog=SIMULATE_EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(sim, log_level="warning")
    sim.add_argument("--cluster", required=True,
                     help="snapshot (pysched snapshot, or kubectl get nodes,pods,... -A -o yaml); its pending pods "
                          "whose schedulerName is a profile's are scheduled too")
    sim.add_argument("--pods",
                     help="pods to schedule (YAML, one or many documents): Pods, Deployments, ReplicaSets, "
                          "ReplicationControllers, StatefulSets, Jobs, DaemonSets, and what they need: PodGroups, "
                          "PriorityClasses, PodDisruptionBudgets, ElasticQuotas, PVCs... A pod the snapshot "
                          "already holds (same namespace/name) replaces it. Required unless --scale is given")
    sim.add_argument("--add-nodes", action="append", default=[], metavar="TEMPLATE:N",
                     help="what-if: add N copies of TEMPLATE (a node in the snapshot, or a Node YAML file), "
                          "named <template>-sim-<i> (repeatable)")
    sim.add_argument("--scale", action="append", default=[], metavar="KIND/NS/NAME=N",
                     help="what-if: the workload (deployment, statefulset, replicaset, replicationcontroller; in "
                          "--pods or the snapshot) has N replicas in total, counting the pods of it the snapshot "
                          "already runs: the missing ones are created as its controller would (from the --pods "
                          "template when the file holds it), a surplus removed (not yet on a node first, then the "
                          "newest; a StatefulSet's highest ordinals) (repeatable)")
    sim.add_argument("--explain", action="append", default=[], metavar="POD|GLOB|KIND/NS/NAME",
                     help="print the per-plugin trace of these pods' cycles: a pod (ns/name), a glob over them "
                          "(ns/web-*), or every pod of a workload (deployment/ns/name; also statefulset, "
                          "replicaset, job, daemonset) among those scheduled (repeatable)")
    sim.add_argument("--explain-nodes", default="summary", choices=("summary", "all"),
                     help="text --explain: nodes grouped by verdict with the best-scored ones (summary, the "
                          "default), or every node's verdicts and scores (all)")
    sim.add_argument("--metrics-file", metavar="FILE",
                     help="node load for load-aware plugins (YAML/JSON: nodes: {NODE: {cpu: 35, memory: 60, ...}}); "
                          "their metricProvider needs no address then; without it they use their fallback")
    sim.add_argument("--report", metavar="OUT.html",
                     help="write a self-contained HTML report with utilisation charts, the configuration and the "
                          "inputs (files with sha256, flags) that reproduce it")
    sim.add_argument("--feature-gates", default="", metavar="NAME=BOOL,...",
                     help="kube-scheduler's feature gates, as pysched run takes them (default: those of the newest "
                          "release pysched follows); e.g. GenericWorkload=true,TopologyAwareWorkloadScheduling=true "
                          "places Kubernetes' own PodGroups per topology domain")
    sim.add_argument("--seed", type=int, default=0,
                     help="tie-break random seed (default: 0; the live scheduler with the same seed agrees)")
    sim.add_argument("--output", default="text", choices=("text", "json"),
                     help="result format on stdout (default: text)")

    from pysched.ui.command import add_parser as add_ui_parser
    add_ui_parser(sub)

    from pysched.tools.trace.cli import add_parser as add_trace_parser
    add_trace_parser(sub)

    from pysched.tools.explain_cmd import add_parser as add_explain_parser
    add_explain_parser(sub)

    plug = sub.add_parser("plugin", help="plugin authoring: `plugin new NAME` writes a plugin package to start from")
    plug_sub = plug.add_subparsers(dest="plugin_command", required=True, metavar="COMMAND",
                                   help="new: write a plugin package")
    new = plug_sub.add_parser("new", help="write a plugin package: pyproject with the entry point, the plugin with "
                                          "typed args, passing tests, a README")
    new.add_argument("name", metavar="NAME", help="the plugin's name, CamelCase (e.g. TeamNodes)")
    new.add_argument("--points", default="filter,score",
                     help="extension points to implement, comma-separated: filter, score (default: both)")
    new.add_argument("--dir", default=".", help="directory to create the package in (default: the current one)")

    snap = sub.add_parser("snapshot", help="export the cluster objects simulate reads, as one YAML List",
                          epilog="exit status:\n  0  written\n  1  the API server could not be reached or "
                                 "refused a list\n  2  bad flags or kubeconfig",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    snap.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    snap.add_argument("--context", help="kubeconfig context (default: its current-context)")
    snap.add_argument("-o", "--output", default="-", metavar="FILE", help="where to write (default: stdout)")
    snap.add_argument("--format", default="yaml", choices=("yaml", "json"),
                      help="yaml (default), or json: the same List, much faster to write and read on large clusters")
    snap.add_argument("--page-size", type=_positive_int, default=500, metavar="N",
                      help="objects per LIST page (limit/continue, as kubectl; default: 500)")
    snap.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                      help="least severe log level written (default: info)")
    snap.add_argument("--log-format", default="logfmt", choices=("logfmt", "json"),
                      help="structured log lines as key=value (logfmt) or JSON objects (default: logfmt)")

    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    if not argv or argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv = ["run", *argv]
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    logs.setup(getattr(args, "log_level", "info"), getattr(args, "log_format", "logfmt"))
    cmd = args.command or "run"
    if cmd == "run":
        from pysched.cmd.scheduler import run
        return run(args)
    if cmd == "extender":
        from pysched.cmd.extender import main as ext_main
        return ext_main(args)
    if cmd == "simulate":
        from pysched.tools.simulate import main as sim_main
        return sim_main(args)
    if cmd == "snapshot":
        from pysched.tools.export import main as snapshot_main
        return snapshot_main(args)
    if cmd == "plugin":
        return cmd_plugin(args)
    if cmd == "ui":
        from pysched.ui.command import main as ui_main
        return ui_main(args)
    if cmd == "trace":
        from pysched.tools.trace.cli import main as trace_main
        return trace_main(args)
    if cmd == "explain":
        from pysched.tools.explain_cmd import main as explain_main
        return explain_main(args)
    return 2


def cmd_plugin(args: argparse.Namespace) -> int:
    from pysched.tools.scaffold import ScaffoldError, new_plugin, parse_points

    try:
        root = new_plugin(args.name, parse_points(args.points), Path(args.dir))
    except ScaffoldError as exc:
        print(f"pysched plugin new: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {root}: pip install -e '{root}[test]' && (cd {root} && pytest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
