"""A RealCluster leaves nothing behind: no process, mount, network namespace, link, address, iptables
rule, cgroup or sysctl change, and no file at the paths a kubelet or containerd writes by default.

The test starts a cluster of its own (not the session's), runs a real pod on the real node (a
configMap volume and a projected service-account token, so the kubelet mounts things, and CNI gives
it a network namespace) and one bound to a KWOK node, checks that the leftover probe does see all of
that while the cluster runs (so an empty answer afterwards means something), stops the cluster, and
checks again.

What is compared is either the cluster's own (processes and mounts naming its work directory, its
bridge, its address block, its cgroup root) or host-wide state no RealCluster ever changes (iptables,
sysctls, /run/netns, default paths): both stay meaningful while the session's cluster is up too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pysched_dev.realcluster import RealCluster, cgroups, unavailable_reason
from pysched_dev.realcluster.cluster import clean_up, orphaned
from pysched_dev.realcluster.hoststate import HostState, leftovers
from tests.real import realkit

pytestmark = pytest.mark.real_node
REPO = Path(__file__).resolve().parents[2]


def test_stop_leaves_nothing_behind():
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no real node here: {reason}")
    before = HostState.capture()
    cluster = RealCluster(kwok_nodes=1)
    pids: list[int] = []
    try:
        cluster.start()
        ns = "default"
        real_pod = realkit.pause_pod(cluster, "real", ns, configmap="conf")
        # a host port: with CNI's portmap plugin it would leave nat chains in the host's iptables
        real_pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 18080}]
        realkit.apply(cluster,
                      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": ns},
                       "data": {"a": "1"}},
                      real_pod,
                      realkit.pause_pod(cluster, "fake", ns, node=cluster.kwok_node_names[0], tolerate_kwok=True))
        real = realkit.wait_running(cluster, "real", ns)
        fake = realkit.wait_running(cluster, "fake", ns)
        assert real["spec"]["nodeName"] == cluster.node_name   # placed by kube-scheduler
        assert fake["spec"]["nodeName"] == cluster.kwok_node_names[0]
        pids = sorted(set(cluster.pids().values()) | cgroups.pids_in(cluster.cgroup_root))
        assert cluster.subnets is not None
        block = str(cluster.subnets.block)
        running = leftovers(workdir=cluster.workdir, bridge=cluster.bridge, block=block,
                            cgroup_root=cluster.cgroup_root, pids=pids)
        # the probe sees the running cluster: each kind of thing it looks for is there
        for what in ("process", "mount", "link", "address", "cgroup", "work directory"):
            assert any(line.startswith(what) for line in running), (what, running)
        for fs in ("tmpfs", "nsfs", "overlay"):   # volumes, the pod's network namespace, its root fs
            assert any(f"({fs} " in line for line in running), (fs, running)
    finally:
        cluster.stop()
        print(f"\nstart {cluster.timings}\nstop with two pods {cluster.stop_timings}")
    assert leftovers(workdir=cluster.workdir, bridge=cluster.bridge, block=block, cgroup_root=cluster.cgroup_root,
                     pids=pids) == []
    assert before.diff(HostState.capture()) == []


CHILD = """
import json, sys, time
from pysched_dev.realcluster import RealCluster
from tests.real import realkit
c = RealCluster(kwok_nodes=0).start()
realkit.apply(c, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": "default"},
                  "data": {"a": "1"}}, realkit.pause_pod(c, "real", "default", configmap="conf"))
realkit.wait_running(c, "real", "default")
print(json.dumps({"workdir": str(c.workdir), "bridge": c.bridge, "block": str(c.subnets.block),
                  "cgroup_root": c.cgroup_root, "pids": list(c.pids().values())}), flush=True)
time.sleep(600)
"""


def test_clean_up_after_a_killed_owner():
    """A cluster whose process is SIGKILLed (no stop()) is found by ``orphaned()`` and torn down by
    ``clean_up()`` (``make real-cluster REAL_CLUSTER_ARGS=--clean-up``) from its work directory alone."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no real node here: {reason}")
    before = HostState.capture()
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line, f"the child cluster did not start (exit code {child.poll()})"
        info = json.loads(line)
    finally:
        child.kill()
        child.wait()
    workdir = Path(info["workdir"])
    assert workdir in orphaned()
    assert leftovers(workdir=workdir, bridge=info["bridge"], block=info["block"], cgroup_root=info["cgroup_root"],
                     pids=info["pids"])   # the daemons outlive their owner
    clean_up(workdir)
    assert leftovers(workdir=workdir, bridge=info["bridge"], block=info["block"], cgroup_root=info["cgroup_root"],
                     pids=info["pids"]) == []
    assert before.diff(HostState.capture()) == []


KEPT = """
from pysched_dev.realcluster import RealCluster
c = RealCluster(kwok_nodes=0, keep_dir=True).start()
c.stop()
print(c.workdir, flush=True)
"""


def test_a_kept_work_directory_is_not_an_orphan():
    """A cluster stopped with its directory kept (``--keep``, PYSCHED_REAL_KEEP=1: the logs), by a
    process that has exited since: the next session's orphan clean-up must not take it for a killed
    cluster's, tear it down and delete the logs."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no real node here: {reason}")
    out = subprocess.run([sys.executable, "-c", KEPT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    workdir = Path(out.stdout.strip().splitlines()[-1])
    try:
        assert (workdir / "logs" / "kubelet.log").is_file()
        assert workdir not in orphaned()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
