"""pysched inside a living cluster: the real kube-controller-manager creates the pods, KWOK plays the
kubelets (pods go Running and Ready, nodes heartbeat and fail), pysched places them.

Each test asserts the outcome a user would check with kubectl - a Deployment Available after a
rolling update, a failed node's pods back on healthy nodes, a PodDisruptionBudget that held, a Job
Complete with its PodGroup Finished - and, from the API server's audit log, that no pod was ever
bound twice.
"""

from __future__ import annotations

import asyncio
import collections
import time

import pytest

from pysched.client.rest import ApiError
from pysched_dev.livecluster import (
    UNREACHABLE_TAINT,
    LivingCluster,
    kwok_node,
    wait_nodes_ready,
)
from pysched_dev.testkit import create_nodes, list_pods, make_pod, pod_scheduled_condition

from .auditkit import successful_binds
from .conftest import wait_for
from .living_kit import (
    create,
    deployment,
    get,
    node_of,
    patch,
    pdb,
    pods,
    priority_class,
    running,
    taint_keys,
    template,
    wait_available,
)
from .podgroup_kit import LABEL as PG_LABEL
from .podgroup_kit import get_podgroup, install_crd, podgroup
from .test_gang_samples import component_config

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"


async def start(live_admin, live_scheduler_factory, nodes: list[dict], config: dict | None = None):
    await create_nodes(live_admin, nodes)
    await wait_nodes_ready(live_admin, [n["metadata"]["name"] for n in nodes])
    sched = live_scheduler_factory(config).start()
    await sched.wait_log("caches synced", 60)
    return sched


def bound_once(lc: LivingCluster) -> collections.Counter:
    binds = successful_binds(lc.cp)
    assert binds, "the audit log recorded no binding"
    twice = {name: n for name, n in binds.items() if n > 1}
    assert not twice, f"pods bound more than once: {twice}"
    return binds


async def test_deployment_becomes_available_rolls_and_scales(living_cluster, live_admin, live_scheduler_factory):
    await start(live_admin, live_scheduler_factory, [kwok_node(f"n{i}", cpu="4") for i in range(3)])
    dep = await create(live_admin, deployment("web", 6, max_surge=2, max_unavailable=0))
    await wait_available(live_admin, dep, 6)
    first = await pods(live_admin, "web")
    assert len(first) == 6 and all(running(p) and node_of(p) for p in first)
    assert len({node_of(p) for p in first}) == 3, "LeastAllocated spreads six pods over three nodes"

    # A rolling update (a new template): surge pods are placed before the old ones go.
    await patch(live_admin, dep, {"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}})
    await wait_available(live_admin, dep, 6)
    old_uids = {p["metadata"]["uid"] for p in first}

    async def old_gone():
        now = await pods(live_admin, "web", live=False)
        return now if not old_uids & {p["metadata"]["uid"] for p in now} else None
    rolled = await wait_for(old_gone, 60, what="the old ReplicaSet's pods gone")
    assert len(rolled) == 6 and all(running(p) and p["spec"]["schedulerName"] == "pysched" for p in rolled)
    assert all(p["metadata"].get("annotations", {}).get("rev") == "2" for p in rolled)

    # Scale to 0 and back.
    await patch(live_admin, dep, {"spec": {"replicas": 0}})
    await wait_for(lambda: _none(pods(live_admin, "web", live=False)), 60, what="scaled to 0")
    await patch(live_admin, dep, {"spec": {"replicas": 3}})
    await wait_available(live_admin, dep, 3)
    binds = bound_once(living_cluster)
    assert len(binds) == 6 + 6 + 3


async def _none(found):
    return not await found


@pytest.mark.living(node_monitor_grace_seconds=5, toleration_seconds=2)
async def test_failed_node_is_tainted_its_pods_rescheduled_and_it_comes_back(
        living_cluster, live_admin, live_scheduler_factory):
    names = [f"n{i}" for i in range(3)]
    await start(live_admin, live_scheduler_factory, [kwok_node(n, cpu="4") for n in names])
    dep = await create(live_admin, deployment("web", 6))
    await wait_available(live_admin, dep, 6)
    before = await pods(live_admin, "web")
    failed = node_of(before[0])
    victims = {p["metadata"]["name"] for p in before if node_of(p) == failed}
    failed_at = time.monotonic()
    await LivingCluster.fail_node(live_admin, failed)

    async def tainted():
        node = await live_admin.get(f"/api/v1/nodes/{failed}")
        return node if {(UNREACHABLE_TAINT, "NoSchedule"), (UNREACHABLE_TAINT, "NoExecute")} <= taint_keys(node) \
            else None
    await wait_for(tainted, 60, what=f"{failed} tainted unreachable by the node lifecycle controller")

    # While it is down: a pod that may only run there waits, with kube-scheduler's reason.
    await create(live_admin, make_pod("pinned", node_selector={"kubernetes.io/hostname": failed}))

    async def replaced():
        now = await pods(live_admin, "web")
        return now if len(now) == 6 and all(running(p) and node_of(p) != failed for p in now) else None
    after = await wait_for(replaced, 90, what="the failed node's pods replaced on healthy nodes")
    assert not victims & {p["metadata"]["name"] for p in after}
    await wait_available(live_admin, dep, 6)

    pinned = await live_admin.get("/api/v1/namespaces/default/pods/pinned")
    assert not node_of(pinned)
    cond = pod_scheduled_condition(pinned)
    assert cond and cond["reason"] == "Unschedulable", pinned.get("status")
    assert cond["message"].startswith("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) "
                                      "didn't match Pod's node affinity/selector."), cond["message"]

    # Nothing was bound to the failed node after it failed.
    late = [p for p in await list_pods(live_admin, "default")
            if node_of(p) == failed and p["metadata"]["name"] not in victims]
    assert not late, f"bound to the failed node: {[p['metadata']['name'] for p in late]}"

    # The node comes back: its taints go, and the pod that waits for it is placed there.
    await LivingCluster.restore_node(live_admin, failed)
    await wait_nodes_ready(live_admin, [failed], 60)

    async def pinned_running():
        p = await live_admin.get("/api/v1/namespaces/default/pods/pinned")
        return p if node_of(p) == failed and running(p) else None
    await wait_for(pinned_running, 60, what="the waiting pod placed on the returned node")
    assert time.monotonic() - failed_at < 120
    bound_once(living_cluster)


async def test_drain_through_the_eviction_api_keeps_the_disruption_budget(
        living_cluster, live_admin, live_scheduler_factory):
    await start(live_admin, live_scheduler_factory, [kwok_node(f"n{i}", cpu="4") for i in range(3)])
    dep = await create(live_admin, deployment("db", 4))
    budget = await create(live_admin, pdb("db", "db", minAvailable=4))
    await wait_available(live_admin, dep, 4)
    drained = node_of((await pods(live_admin, "db"))[0])

    async def evict(pod: dict) -> int:
        name = pod["metadata"]["name"]
        try:
            await live_admin.request("POST", f"/api/v1/namespaces/default/pods/{name}/eviction", rate_limit=False,
                                     body={"apiVersion": "policy/v1", "kind": "Eviction",
                                           "metadata": {"name": name, "namespace": "default"}})
            return 201
        except ApiError as exc:
            return exc.status

    async def budget_synced():
        st = (await get(live_admin, budget)).get("status") or {}
        return st.get("observedGeneration") == 1 and st.get("currentHealthy") == 4
    await wait_for(budget_synced, 60, what="the disruption controller's PDB status")
    # kubectl drain: cordon, then evict every pod on the node, retrying while the budget says no.
    await live_admin.request("PATCH", f"/api/v1/nodes/{drained}", body={"spec": {"unschedulable": True}},
                             content_type="application/merge-patch+json", rate_limit=False)
    on_node = [p for p in await pods(live_admin, "db") if node_of(p) == drained]
    assert await evict(on_node[0]) == 429, "minAvailable 4 of 4: no eviction allowed"

    await patch(live_admin, budget, {"spec": {"minAvailable": 3}})
    await wait_for(lambda: _allowed(live_admin, budget, 1), 60, what="one disruption allowed")
    refused = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        on_node = [p for p in await pods(live_admin, "db") if node_of(p) == drained]
        if not on_node:
            break
        if await evict(on_node[0]) == 201:
            # The budget is spent until the replacement is Ready: evicting another healthy pod is
            # refused (a Pending one - a replacement KWOK has not started yet - may always go).
            others = [p for p in await pods(live_admin, "db") if node_of(p) != drained and ready(p)]
            assert await evict(others[0]) == 429
            refused += 1
        await asyncio.sleep(0.5)
    assert refused >= 1
    final = await wait_available(live_admin, dep, 4)
    placed = await pods(live_admin, "db")
    assert final and len(placed) == 4 and all(node_of(p) != drained for p in placed)
    st = (await get(live_admin, budget))["status"]
    assert st["currentHealthy"] >= st["desiredHealthy"] == 3
    bound_once(living_cluster)


def ready(pod: dict) -> bool:
    return running(pod) and any(c["type"] == "Ready" and c["status"] == "True"
                                for c in pod["status"].get("conditions") or ())


async def _allowed(client, budget, n):
    return ((await get(client, budget)).get("status") or {}).get("disruptionsAllowed") == n


async def test_preemption_of_controller_owned_victims_respects_the_budget_without_thrashing(
        living_cluster, live_admin, live_scheduler_factory):
    sched = await start(live_admin, live_scheduler_factory,
                        [kwok_node("a", cpu="2", labels={"pool": "a"}), kwok_node("b", cpu="2", labels={"pool": "b"})])
    await create(live_admin, priority_class("low", 10))
    await create(live_admin, priority_class("high", 1000))
    # Two 900m pods fill each node; pool a's are protected by a budget that allows no disruption.
    protected = await create(live_admin, deployment("protected", 2, cpu="900m", priorityClassName="low",
                                                    nodeSelector={"pool": "a"}))
    spare = await create(live_admin, deployment("spare", 2, cpu="900m", priorityClassName="low",
                                                nodeSelector={"pool": "b"}))
    await create(live_admin, pdb("protected", "protected", maxUnavailable=0))
    await wait_available(live_admin, protected, 2)
    await wait_available(live_admin, spare, 2)
    urgent = await create(live_admin, deployment("urgent", 1, cpu="800m", priorityClassName="high"))
    await wait_available(live_admin, urgent, 1)
    (placed,) = await pods(live_admin, "urgent")
    assert node_of(placed) == "b", "the victim must be the pod no budget protects"
    kept = await pods(live_admin, "protected")
    assert len(kept) == 2 and all(running(p) for p in kept)

    # The victim's ReplicaSet recreates it; it cannot fit and may not preempt its peers: it waits.
    async def replacement_waits():
        now = await pods(live_admin, "spare")
        waiting = [p for p in now if not node_of(p)]
        cond = pod_scheduled_condition(waiting[0]) if waiting else None
        return (now, cond) if len(now) == 2 and cond and cond.get("reason") == "Unschedulable" else None
    _, cond = await wait_for(replacement_waits, 60, what="the recreated victim pending")
    assert "preemption: 0/2 nodes are available" in cond["message"], cond["message"]
    await asyncio.sleep(4)      # time for any thrash to show
    assert await sched.metric("scheduler_preemption_victims_sum") == 1.0
    assert len(await pods(live_admin, "urgent")) == 1 and running((await pods(live_admin, "urgent"))[0])
    all_spare = await pods(live_admin, "spare", live=False)
    assert len(all_spare) == 2, "one victim, one replacement: nothing else was deleted"
    bound_once(living_cluster)


async def test_daemonset_one_pod_per_eligible_node(living_cluster, live_admin, live_scheduler_factory):
    nodes = [kwok_node("plain", cpu="2"), kwok_node("cordoned", cpu="2", unschedulable=True),
             kwok_node("gpu", cpu="2", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])]
    await start(live_admin, live_scheduler_factory, nodes)
    labels = {"app": "agent"}
    ds = await create(live_admin, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                   "metadata": {"name": "agent", "namespace": "default"},
                                   "spec": {"selector": {"matchLabels": labels},
                                            "template": template(labels, cpu="100m")}})

    async def settled(n):
        d = await get(live_admin, ds)
        st = d.get("status") or {}
        return d if st.get("desiredNumberScheduled") == n and st.get("numberReady") == n else None
    await wait_for(lambda: settled(2), 60, what="the DaemonSet ready on both eligible nodes")
    placed = sorted(node_of(p) for p in await pods(live_admin, "agent"))
    # The DaemonSet controller adds the unschedulable toleration; nothing tolerates dedicated=gpu.
    assert placed == ["cordoned", "plain"]

    await create_nodes(live_admin, [kwok_node("late", cpu="2")])
    await wait_for(lambda: settled(3), 60, what="the DaemonSet's pod on a new node")
    assert sorted(node_of(p) for p in await pods(live_admin, "agent")) == ["cordoned", "late", "plain"]
    bound_once(living_cluster)


async def test_job_gang_runs_together_completes_and_its_podgroup_finishes(
        living_cluster, live_admin, live_scheduler_factory):
    await install_crd(live_admin)
    await start(live_admin, live_scheduler_factory, [kwok_node(f"n{i}", cpu="2") for i in range(3)],
                config=component_config())
    await create(live_admin, podgroup("train", "default", 3))
    labels = {"app": "train", PG_LABEL: "train"}
    tpl = template(labels, cpu="500m", restartPolicy="Never")
    tpl["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "4s"}
    job = await create(live_admin, {"apiVersion": "batch/v1", "kind": "Job",
                                    "metadata": {"name": "train", "namespace": "default"},
                                    "spec": {"parallelism": 3, "completions": 3, "template": tpl}})
    seen: list[str] = []

    async def phase_is(want):
        phase = ((await get_podgroup(live_admin, "default", "train")).get("status") or {}).get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        return phase == want
    await wait_for(lambda: phase_is("Running"), 60, interval=0.1, what="the PodGroup Running")
    members = await pods(live_admin, "train")
    assert len(members) == 3 and all(running(p) for p in members), "all three Running together"

    async def complete():
        st = (await get(live_admin, job)).get("status") or {}
        return st if st.get("succeeded") == 3 and any(c["type"] == "Complete" and c["status"] == "True"
                                                      for c in st.get("conditions") or ()) else None
    await wait_for(complete, 60, what="the Job Complete")
    await wait_for(lambda: phase_is("Finished"), 60, interval=0.1, what="the PodGroup Finished")
    assert seen[-2:] == ["Running", "Finished"], seen
    bound_once(living_cluster)


async def test_parallel_statefulset_spreads_its_ordinals(living_cluster, live_admin, live_scheduler_factory):
    nodes = [kwok_node(f"{z}-{i}", cpu="4", labels={ZONE: z}) for z in ("a", "b", "c") for i in range(2)]
    await start(live_admin, live_scheduler_factory, nodes)
    labels = {"app": "kv"}
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": labels}}]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}]}}
    sts = await create(live_admin, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "kv", "namespace": "default"},
        "spec": {"replicas": 6, "serviceName": "kv", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels},
                 "template": template(labels, topologySpreadConstraints=spread, affinity=anti)}})

    async def ready():
        st = (await get(live_admin, sts)).get("status") or {}
        return st.get("readyReplicas") == 6
    await wait_for(ready, 90, what="the StatefulSet's six replicas Ready")
    placed = {p["metadata"]["name"]: node_of(p) for p in await pods(live_admin, "kv")}
    assert sorted(placed) == [f"kv-{i}" for i in range(6)]
    assert len(set(placed.values())) == 6, f"one per node (anti-affinity): {placed}"
    zones = collections.Counter(n.split("-")[0] for n in placed.values())
    assert zones == {"a": 2, "b": 2, "c": 2}
    bound_once(living_cluster)


def test_living_cluster_stops_without_leftovers():
    lc = LivingCluster().start()
    procs = [lc.kcm_proc, lc.kwok_proc, lc.cp.apiserver_proc, lc.cp.etcd_proc]
    workdir = lc.workdir
    lc.stop()
    assert all(p.poll() is not None for p in procs)
    assert not workdir.exists()



async def test_make_dev_cluster_serves_until_interrupted(tmp_path):
    """``make dev-cluster``: prints a KUBECONFIG whose nodes are Ready; Ctrl-C removes everything."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from pysched.client.auth import load_kubeconfig
    from pysched.client.rest import KubeClient
    from pysched_dev.devcluster import binaries_dir

    from .conftest import REPO

    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        # Kueue and Prometheus off: Prometheus's port would be a fixed one (tests/e2e/test_docs_pages.py
        # runs both, on free ports).
        proc = subprocess.Popen([sys.executable, "-m", "pysched_dev.devcluster_cli", "--extra-nodes", "2",
                                 "--kueue=off", "--prometheus=off"],
                                cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        async def kubeconfig():
            for line in out.read_text().splitlines():
                if line.strip().startswith("export KUBECONFIG="):
                    return Path(line.split("=", 1)[1])
            assert proc.poll() is None, out.read_text()
            return None
        path = await wait_for(kubeconfig, 120, what="the KUBECONFIG line")
        client = KubeClient(load_kubeconfig(path), qps=0, burst=1)
        sched = None
        try:
            nodes, _ = await client.list_all("/api/v1/nodes")
            assert len(nodes) == 6 + 2 + 2   # sample, extra, the GPU-sharing example's
            await wait_nodes_ready(client, [n["metadata"]["name"] for n in nodes])
            await client.get("/apis/scheduling.x-k8s.io/v1alpha1")
            # The steps it prints (docs/getting-started.md): pysched with the gang configuration, then
            # kubectl apply of the two examples; the Deployment's and the Job's pods go Running.
            with open(tmp_path / "pysched.log", "wb") as log:
                sched = subprocess.Popen([sys.executable, "-m", "pysched", "--config",
                                          "examples/scheduler-config-gang.yaml", "--kubeconfig", str(path),
                                          "--secure-port", "0"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            kubectl = str(binaries_dir() / "kubectl")
            applied = subprocess.run([kubectl, "--kubeconfig", str(path), "apply", "-f",
                                      "examples/living-cluster/web.yaml", "-f", "examples/gang/podgroup-job.yaml"],
                                     cwd=REPO, capture_output=True, text=True, timeout=60)
            assert applied.returncode == 0, applied.stderr

            async def running_pods():
                pods = await list_pods(client, "default")
                up = [p for p in pods if p["status"].get("phase") == "Running"]
                return up if len(up) == 6 + 4 else None
            up = await wait_for(running_pods, 90, what="the examples' pods Running")
            zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
            web_zones = collections.Counter(zone[p["spec"]["nodeName"]] for p in up
                                            if p["metadata"]["labels"].get("app") == "web")
            assert web_zones == {"zone-a": 2, "zone-b": 2, "zone-c": 2}, web_zones
        finally:
            if sched is not None:
                os.killpg(sched.pid, signal.SIGTERM)
                sched.wait(30)
            await client.close()
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 0, out.read_text()
        assert not path.parent.exists(), "the cluster's directory is removed"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_make_demo_tells_the_node_failure_story():
    """``make demo`` (its module) runs in the living cluster and ends with every pod back on healthy nodes."""
    import subprocess
    import sys

    from .conftest import REPO

    proc = subprocess.run([sys.executable, "-m", "pysched_dev.demo"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    story = [line.split("s  ", 1)[1] for line in lines if "s  " in line[:8]]
    assert story[0].startswith("living cluster up at https://127.0.0.1:")
    assert any(s.startswith("controllers created the pods, pysched placed them") for s in story)
    failed = next(s for s in story if s.startswith("node ")).split()[1]
    assert any(f"{failed} Ready=Unknown, tainted node.kubernetes.io/unreachable" in s for s in story), story
    assert any(s.startswith("taint eviction: ") for s in story)
    assert story[-1].startswith("Job report Complete (4/4 Succeeded), the train gang 3/3 Running again")
    assert story[-1].endswith(f"since {failed} failed, none of them on it")
    after = lines[lines.index(next(x for x in lines if "placed them on healthy nodes" in x)) + 1:-1]
    assert after and not any(failed in x for x in after), after
    # docs/getting-started.md shows this output: it must tell the same story, line for line.
    from tests.unit.test_docs_samples import code_block_after
    sample = code_block_after("getting-started.md", "It prints something like:")
    assert _shape(sample) == _shape(lines), "docs/getting-started.md's demo sample has drifted"


def _shape(lines: list[str]) -> list[str]:
    """The demo's story with what changes from run to run masked: times, ports, names, counts."""
    import re

    out = []
    for line in lines:
        if re.match(r"\s+kwok-", line):          # a placement row: which node got what varies
            continue
        line = re.sub(r"kwok-[a-z]\d", "NODE", line)
        line = re.sub(r"\b[a-z]+-[0-9a-f]{8,10}-[a-z0-9]{5}\b|\b(report|train)-[a-z0-9]{5}\b", "POD", line)
        line = re.sub(r"POD(, POD)*", "PODS", line)
        out.append(re.sub(r"\d+(\.\d+)?", "N", line).strip())
    return out
