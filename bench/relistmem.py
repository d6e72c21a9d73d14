"""``python -m bench.relistmem``: pysched's resident memory across many re-lists at a constant cluster size.

The soak showed each pysched process's RSS rising in steps at its periodic re-lists. This tells a
leak (it keeps rising) from a high-water mark (it levels off): etcd + kube-apiserver on loopback,
``--nodes`` nodes and ``--pods`` pods already bound (by another scheduler's name: pysched only
keeps them in its cache), then pysched with ``--resync-period`` seconds between re-lists, its RSS
printed after each. ``--no-trim`` runs it without the ``malloc_trim`` that follows each re-list
(``pysched.util.memtrim``), for the comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, free_port
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod

from . import procstat
from .process import REPO

NO_TRIM = ("import sys, pysched.util.memtrim as m; m.trim = lambda: False; "
           "from pysched.cli import main; sys.exit(main(sys.argv[1:]))")


async def measure(nodes: int, pods: int, resync: float, rounds: int, trim: bool) -> list[tuple[float, float]]:
    cp = ControlPlane()
    cp.start()
    client = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
    work = Path(tempfile.mkdtemp(prefix="relistmem-"))
    try:
        await create_nodes(client, [make_node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"})
                                    for i in range(nodes)])
        await create_pods(client, [make_pod(f"p{i}", labels={"app": f"a{i % 40}"}, node_name=f"n{i % nodes}",
                                            scheduler="other") for i in range(pods)], concurrency=64)
        cfg = work / "config.yaml"
        cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                       "leaderElection: {leaderElect: false}\nprofiles: [{schedulerName: pysched}]\n")
        head = [sys.executable, "-m", "pysched"] if trim else [sys.executable, "-c", NO_TRIM]
        proc = subprocess.Popen([*head, "--config", str(cfg), "--kubeconfig", str(cp.kubeconfig),
                                 "--log-level", "warning", "--secure-port", str(free_port()),
                                 "--bind-address", "127.0.0.1", "--cert-dir", str(work / "certs"),
                                 "--resync-period", str(resync)], cwd=REPO)
        out = []
        t0 = time.monotonic()
        try:
            for _ in range(rounds):
                await asyncio.sleep(resync * 1.1)
                if proc.poll() is not None:
                    raise RuntimeError(f"pysched exited with {proc.returncode}")
                out.append((round(time.monotonic() - t0, 1), round(procstat.sample(proc.pid).rss_mib, 1)))
                print(f"{out[-1][0]:7.1f} s  rss {out[-1][1]:.1f} MiB", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
        return out
    finally:
        await client.close()
        cp.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.relistmem", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--resync-period", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-trim", action="store_true", help="without malloc_trim after each re-list")
    args = ap.parse_args(argv)
    asyncio.run(measure(args.nodes, args.pods, args.resync_period, args.rounds, not args.no_trim))
    return 0


if __name__ == "__main__":
    sys.exit(main())
