"""``make real-cluster``: start a RealCluster, print its timings and KUBECONFIG, wait for Ctrl-C.

Ctrl-C (SIGINT) or SIGTERM tears it down and prints how long that took. ``--clean-up`` tears down
instead the clusters whose process died without doing so (SIGKILL), from their work directories.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from pysched_dev.realcluster import RealCluster, RealClusterError, unavailable_reason


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="make real-cluster", description=__doc__.splitlines()[0])
    p.add_argument("--kwok-nodes", type=int, default=3, metavar="N", help="fake nodes beside the real one")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs) after teardown")
    p.add_argument("--image", action="append", default=[], metavar="ARCHIVE",
                   help="import this image archive (docker-archive or oci-archive) into the node; repeatable")
    p.add_argument("--clean-up", action="store_true",
                   help="tear down the clusters left behind by a process that was killed, then exit")
    args = p.parse_args(argv)
    if args.kwok_nodes < 0:
        p.error("--kwok-nodes: must be 0 or more")
    return args


def format_timings(timings: dict[str, float]) -> str:
    return "\n".join(f"  {piece:<24} {seconds:7.2f} s" for piece, seconds in timings.items())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"real-cluster: cannot run here: {reason}", file=sys.stderr)
        return 2
    if args.clean_up:
        return clean_up_orphans()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = RealCluster(kwok_nodes=args.kwok_nodes, keep_dir=args.keep)
    print("real-cluster: starting (packages, binaries, PKI, network, containerd, control plane, kubelet, "
          "KWOK)...", file=sys.stderr)
    try:
        cluster.start()
        images = [name for archive in args.image for name in cluster.import_image(archive)]
    except RealClusterError as exc:
        print(f"real-cluster: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"real cluster up in {cluster.timings['total']:.1f} s:\n{format_timings(cluster.timings)}\n\n"
              f"  API server      {cluster.server} (the kubernetes Service's ClusterIP)\n"
              f"  real node       {cluster.node_name} ({cluster.node_ip}), pods in {cluster.pod_cidr}\n"
              f"  KWOK nodes      {', '.join(cluster.kwok_node_names) or '-'} (taint "
              f"{cluster.kwok_taint['key']}={cluster.kwok_taint['value']}:{cluster.kwok_taint['effect']})\n"
              f"  work dir        {cluster.workdir}\n"
              + (f"  images          {', '.join(images)}\n" if images else "")
              + f"\n  export KUBECONFIG={cluster.kubeconfig}\n\n"
              "Ctrl-C stops everything and removes what the cluster made.", flush=True)
        stop.wait()
        print("real-cluster: stopping...", file=sys.stderr)
    finally:
        try:
            cluster.stop()
        except RealClusterError as exc:
            print(f"real-cluster: teardown: {exc}", file=sys.stderr)
            return 1
    print(f"torn down in {cluster.stop_timings['total']:.1f} s:\n{format_timings(cluster.stop_timings)}", flush=True)
    return 0


def clean_up_orphans() -> int:
    from pysched_dev.realcluster.cluster import clean_up, orphaned

    failed = 0
    for workdir in orphaned():
        try:
            clean_up(workdir)
            print(f"cleaned up {workdir}")
        except RealClusterError as exc:
            failed += 1
            print(f"real-cluster: {workdir}: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
