"""``make dev-cluster``: a living cluster a user can keep, until Ctrl-C.

Starts etcd, kube-apiserver, kube-controller-manager and KWOK on loopback (``livecluster``), creates
the sample nodes (three zones, on-demand and spot, one GPU node; ``--extra-nodes N`` adds plain
ones), installs the PodGroup CRD so the gang examples apply, and prints the KUBECONFIG to use. Run
pysched against it in another terminal, ``kubectl apply`` the examples and watch the pods go Running.
Ctrl-C (or SIGTERM) stops every process and removes the temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
from pathlib import Path

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev import devcluster_examples
from pysched_dev.demo import install_podgroup_crd
from pysched_dev.devcluster import binaries_dir
from pysched_dev.livecluster import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    ZONE,
    LivingCluster,
    kwok_node,
    sample_nodes,
    wait_nodes_ready,
)
from pysched_dev.testkit import create_nodes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="make dev-cluster", description=__doc__.splitlines()[0])
    p.add_argument("--extra-nodes", type=int, default=0, metavar="N",
                   help="more KWOK nodes (m5.xlarge on-demand: 4 CPU, 16Gi; zones a, b, c in turn) beside the "
                        "sample ones")
    p.add_argument("--node-monitor-grace-seconds", type=int, default=20,
                   help="seconds without a heartbeat before a node is unreachable (kube-controller-manager)")
    p.add_argument("--toleration-seconds", type=int, default=30,
                   help="default tolerationSeconds for the not-ready/unreachable taints (kube-apiserver)")
    devcluster_examples.add_arguments(p)
    args = p.parse_args(argv)
    if args.extra_nodes < 0:
        p.error("--extra-nodes: must be 0 or more")
    return args


async def populate(lc: LivingCluster, extra_nodes: int,
                   examples: devcluster_examples.ExamplesOptions | None = None) -> list[str]:
    admin = KubeClient(load_kubeconfig(lc.kubeconfig), qps=0, burst=1)
    try:
        # Labelled like the sample nodes (zones round-robin): AZSpread, in the shipped configuration,
        # refuses a cycle where a feasible node has no zone.
        nodes = sample_nodes() + [
            kwok_node(f"kwok-extra-{i}", cpu="4", memory="16Gi",
                      labels={ZONE: f"zone-{'abc'[i % 3]}", INSTANCE_TYPE: "m5.xlarge", CAPACITY_TYPE: "on-demand"})
            for i in range(extra_nodes)]
        await install_podgroup_crd(admin)
        await create_nodes(admin, nodes)
        names = [n["metadata"]["name"] for n in nodes]
        await wait_nodes_ready(admin, names)
        return names + await devcluster_examples.install(admin, lc, examples or devcluster_examples.ExamplesOptions())
    finally:
        await admin.close()


def path_line() -> str:
    """The ``export PATH=...`` line that puts ``pysched`` (this environment's), the control plane's
    ``kubectl`` and pysched's CEL helper (``PYSCHED_CEL_HELPER``, when ``make`` built it) first."""
    tools = [Path(sys.prefix) / "bin", binaries_dir()]
    if os.environ.get("PYSCHED_CEL_HELPER"):
        tools.append(Path(os.environ["PYSCHED_CEL_HELPER"]).parent)
    return f'export PATH={":".join(shlex.quote(str(t)) for t in tools)}:"$PATH"'


def paste_lines(kubeconfig: Path) -> list[str]:
    """The lines a user pastes into each terminal: PATH (``path_line``) and KUBECONFIG."""
    return [path_line(), f"export KUBECONFIG={shlex.quote(str(kubeconfig))}"]


def banner(lc: LivingCluster, names: list[str], args: argparse.Namespace) -> str:
    lines = "\n".join(f"  {line}" for line in paste_lines(lc.kubeconfig))
    return (f"living cluster up at {lc.cp.url} with {len(names)} KWOK nodes: {', '.join(names)}\n"
            f"\nPaste these lines into every terminal you use with it (pysched and kubectl on PATH, kubectl\n"
            f"and pysched pointed at this cluster as its admin):\n\n{lines}\n"
            "\nThen, from this checkout (examples/README.md has one example per feature to try):\n"
            "  pysched --config examples/scheduler-config-gang.yaml --kubeconfig $KUBECONFIG   # another terminal\n"
            "  kubectl apply -f examples/living-cluster/web.yaml -f examples/gang/podgroup-job.yaml\n"
            "  kubectl get pods -o wide -w\n"
            f"\nA node fails when KWOK lets go of it: kubectl label node kwok-a1 kwok.x-k8s.io/node=stopped "
            f"--overwrite\n(unreachable after {args.node_monitor_grace_seconds} s, its pods evicted "
            f"{args.toleration_seconds} s later); label it =fake again to bring it back.\n"
            "Ctrl-C stops everything and removes the cluster's files.")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print("starting etcd, kube-apiserver, kube-controller-manager and KWOK on loopback...", file=sys.stderr)
    with LivingCluster(node_monitor_grace_seconds=args.node_monitor_grace_seconds,
                       toleration_seconds=args.toleration_seconds) as lc:
        names = asyncio.run(populate(lc, args.extra_nodes, devcluster_examples.ExamplesOptions.from_args(args)))
        print(banner(lc, names, args), flush=True)

        async def wait() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
        asyncio.run(wait())
        print("stopping...", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
