"""GPU sharing in a living cluster (issue 55): a small openb-like trace (``gpushare_kit``, generated
from a seed) placed by pysched with GPUShare against KWOK nodes of the trace's GPU models, one pod at
a time as the replay does (each pod bound or reported unschedulable before the next is created; an
unschedulable pod is deleted, never retried), and the answer compared with the offline replay of the
same pods through the same framework with the same configuration and tie-break seed: every pod on
the same node, every GPU pod's ``alibabacloud.com/gpu-index`` the GPUs the offline GPUShare chose,
the same pods unschedulable with the same message.

The scheduler runs with the manifests' ServiceAccount and RBAC (PreBind patches the pod). GPUShare
breaks ties at the top score itself (a fixed node order), so both sides pick the same node without a
draw; with ``tieBreak: Scheduler`` the scheduler's seeded draw decides, and both sides make the same
draws in the same order (the nodes are listed by name live and added in that order offline).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import numpy as np
import pytest

from pysched.client.rest import ApiError
from pysched_dev.livecluster import wait_nodes_ready
from pysched_dev.testkit import create_nodes, pod_scheduled_condition

from . import gpushare_kit as kit
from . import kustomize
from .conftest import REPO
from .test_manifests_metrics import sa_kubeconfig

pytestmark = pytest.mark.e2e

TRACE_SEED, NODES, TIE_SEED = 4, 32, 7
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
POD_TIMEOUT = 30.0      # a liveness bound per pod


async def install_rbac(admin) -> None:
    """The manifests' Namespace, ServiceAccount and RBAC, as ``kubectl apply -k manifests`` creates them."""
    order = list(kustomize.PATHS)
    for obj in sorted((o for o in kustomize.build(REPO / "manifests") if o["kind"] in RBAC_KINDS),
                      key=lambda o: order.index(o["kind"])):
        path = kustomize.PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace", ""))
        await admin.request("POST", path, body=obj, rate_limit=False)


async def place(admin, sched, pod: dict) -> kit.Placement:
    """Create ``pod`` and wait until it is bound or reported unschedulable (then delete it: one attempt)."""
    name = pod["metadata"]["name"]
    path = f"/api/v1/namespaces/default/pods/{name}"
    await admin.request("POST", "/api/v1/namespaces/default/pods", body=pod, rate_limit=False)
    deadline = time.monotonic() + POD_TIMEOUT
    while time.monotonic() < deadline:
        got = await admin.request("GET", path, rate_limit=False)
        node = got["spec"].get("nodeName")
        if node:
            index = (got["metadata"].get("annotations") or {}).get(kit.INDEX)
            gpus = tuple(int(i) for i in index.split(",")) if index else None
            return kit.Placement(node, gpus)
        cond = pod_scheduled_condition(got)
        if cond and cond.get("status") == "False":
            try:
                await admin.request("DELETE", path, body={"gracePeriodSeconds": 0}, rate_limit=False)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            return kit.Placement(None, None, cond.get("message", ""))
        if sched.proc.poll() is not None:
            raise AssertionError(f"scheduler exited ({sched.proc.returncode}):\n{sched.log()[-4000:]}")
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} neither bound nor unschedulable within {POD_TIMEOUT}s:\n{sched.log()[-4000:]}")


@pytest.mark.parametrize("policy,scheduler_ties", [("FGD", False), ("BestFit", False), ("pysched", False),
                                                    ("pysched", True)])
async def test_living_cluster_places_a_gpu_trace_as_the_offline_replay(
        policy, scheduler_ties, living_cluster, live_admin, live_scheduler_factory):
    rng = np.random.default_rng(TRACE_SEED)
    nodes = kit.cluster(rng, NODES)
    pods = kit.trace(rng, nodes)
    kinds = Counter("cpu" if not p.gpu_count else "share" if p.gpu_milli < 1000 else f"{p.gpu_count}-gpu"
                    for p in pods)
    assert set(kinds) == {"cpu", "share", "1-gpu", "2-gpu", "4-gpu", "8-gpu"} and len(pods) >= 200, kinds
    assert any(p.models for p in pods) and len({n.model for n in nodes}) >= 4
    cfg = kit.live_config(policy, pods)
    if scheduler_ties:
        for pc in cfg["profiles"][0]["pluginConfig"]:
            if pc["name"] == "GPUShare":
                pc["args"]["tieBreak"] = "Scheduler"
    node_objs = kit.nodes_in_order(nodes)
    want = kit.offline_replay(cfg, node_objs, pods, TIE_SEED)

    await install_rbac(live_admin)
    kubeconfig = await sa_kubeconfig(living_cluster.cp, live_admin, "pysched-system")
    await create_nodes(live_admin, node_objs)
    await wait_nodes_ready(live_admin, [o["metadata"]["name"] for o in node_objs])
    sched = live_scheduler_factory(cfg, kubeconfig=kubeconfig, extra_args=["--seed", str(TIE_SEED)]).start()
    await sched.wait_log("caches synced", 60)

    got: dict[str, kit.Placement] = {}
    t0 = time.monotonic()
    for p in pods:
        got[p.name] = live = await place(live_admin, sched, kit.live_pod(p))
        w = want[p.name]
        assert (live.node, live.gpus) == (w.node, w.gpus), (
            f"{policy}: first diverging pod {p.name} ({p}, #{len(got) - 1}): live {live}, offline {w}; "
            f"{sum(1 for n in pods[:len(got) - 1] if want[n.name].tied > 1)} tie-breaks before it")
        assert live.message == w.message, f"{p.name}: live {live.message!r}, offline {w.message!r}"
    elapsed = time.monotonic() - t0

    failed = [n for n, pl in want.items() if pl.node is None]
    shared = [p for p in pods if 0 < p.gpu_milli < 1000 and want[p.name].node]
    # The run means something: pods failed, sharing pods were placed; ties at the top score were left
    # to the seeded draw only when GPUShare was told to (otherwise it breaks them itself).
    assert failed and shared, (len(failed), len(shared))
    assert any(pl.tied > 1 for pl in want.values()) == scheduler_ties
    assert all(pl.gpus for p in pods if p.gpu_count and (pl := got[p.name]).node)
    assert "Forbidden" not in sched.log(), sched.log()[-3000:]
    print(f"{policy}: {len(pods)} pods, {len(failed)} unschedulable, "
          f"{sum(1 for pl in want.values() if pl.tied > 1)} ties, {elapsed:.1f}s live")
