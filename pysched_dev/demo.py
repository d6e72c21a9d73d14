"""``make demo``: a local etcd + kube-apiserver, a handful of nodes and pods, and the scheduler.

Creates five nodes in three zones (one tainted for GPUs, one cordoned), a set of sample pods with
``schedulerName: pysched`` (plain, selector-bound, tolerating the GPU taint, one too large to fit
anywhere) and one pod for another scheduler, runs the scheduler until every one of its pods is
either bound or marked unschedulable, and prints where each went and why.
"""

from __future__ import annotations

import asyncio
import sys
import time

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane
from pysched_dev.testkit import (
    create_nodes,
    create_pods,
    custom_scores_profile,
    list_pods,
    make_node,
    make_pod,
    pod_scheduled_condition,
)

ZONE = "topology.kubernetes.io/zone"
ITYPE = "node.kubernetes.io/instance-type"


def sample_nodes() -> list[dict]:
    return [
        make_node("node-a1", cpu="4", memory="16Gi", labels={ZONE: "zone-a", ITYPE: "m5.xlarge"}),
        make_node("node-a2", cpu="2", memory="8Gi", labels={ZONE: "zone-a", ITYPE: "c5.large"}),
        make_node("node-b1", cpu="8", memory="32Gi", labels={ZONE: "zone-b", ITYPE: "r5.2xlarge", "disk": "ssd"}),
        make_node("node-c1", cpu="8", memory="32Gi", labels={ZONE: "zone-c", ITYPE: "p3.2xlarge"},
                  taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                  extended={"nvidia.com/gpu": "1"}),
        make_node("node-c2", cpu="4", memory="16Gi", labels={ZONE: "zone-c", ITYPE: "m5.xlarge"},
                  unschedulable=True),
    ]


def sample_pods() -> list[dict]:
    pods = [make_pod(f"web-{i}", cpu="500m", memory="1Gi", labels={"app": "web"}) for i in range(4)]
    pods.append(make_pod("cache-ssd", cpu="1", memory="4Gi", node_selector={"disk": "ssd"}))
    pods.append(make_pod("trainer", cpu="2", memory="8Gi", extended={"nvidia.com/gpu": "1"},
                         tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                       "effect": "NoSchedule"}]))
    pods.append(make_pod("zone-b-only", cpu="250m", memory="256Mi",
                         affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchExpressions": [
                                 {"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]}}}))
    pods.append(make_pod("too-big", cpu="64", memory="1Gi"))
    pods.append(make_pod("other-scheduler", scheduler="some-other-scheduler"))
    return pods


async def run_demo(cp: ControlPlane) -> int:
    creds = load_kubeconfig(cp.kubeconfig)
    admin = KubeClient(creds, qps=0, burst=1)
    try:
        return await _demo(cp, creds, admin)
    finally:
        await admin.close()


async def _demo(cp: ControlPlane, creds, admin: KubeClient) -> int:
    await create_nodes(admin, sample_nodes())
    await create_pods(admin, sample_pods())

    # The shipped ConfigMap's profile: kube-scheduler's defaults plus pysched's own scores.
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "leaderElection": {"leaderElect": False}, "profiles": [custom_scores_profile()]})
    app = SchedulerApp(cfg, Options(kubeconfig=str(cp.kubeconfig), serve=False, seed=1), creds)
    task = asyncio.create_task(app.run())
    ours = {p["metadata"]["name"] for p in sample_pods() if p["spec"]["schedulerName"] == "pysched"}
    deadline = time.monotonic() + 60
    pods = []
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        pods = await list_pods(admin, "default")
        settled = 0
        for p in pods:
            if p["metadata"]["name"] not in ours:
                continue
            cond = pod_scheduled_condition(p)
            if p["spec"].get("nodeName") or (cond and cond.get("status") == "False"):
                settled += 1
        if settled == len(ours):
            break
    app.request_stop()
    await task

    print(f"{'POD':<18} {'SCHEDULER':<22} {'NODE / REASON'}")
    for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name = p["metadata"]["name"]
        node = p["spec"].get("nodeName")
        cond = pod_scheduled_condition(p)
        if node:
            where = node
        elif cond and cond.get("status") == "False":
            where = f"Pending ({cond.get('reason')}): {cond.get('message')}"
        else:
            where = "Pending (not ours, untouched)" if p["spec"]["schedulerName"] != "pysched" else "Pending"
        print(f"{name:<18} {p['spec']['schedulerName']:<22} {where}")
    return 0


def main() -> int:
    print("starting a local etcd + kube-apiserver (first run builds them; later runs reuse the cache)...",
          file=sys.stderr)
    with ControlPlane() as cp:
        print(f"control plane up at {cp.url}", file=sys.stderr)
        return asyncio.run(run_demo(cp))


if __name__ == "__main__":
    from pysched.util import logs

    logs.setup("warning", "logfmt")
    sys.exit(main())
