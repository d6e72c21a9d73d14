"""``make demo``: pysched at work in a living cluster, told in a few lines.

Starts etcd, kube-apiserver, kube-controller-manager and KWOK (``livecluster``) with six nodes in
three zones (on-demand and spot, one GPU node), runs pysched with the shipped configuration plus gang
scheduling (``manifests/components/coscheduling``), and applies what a team would: a Deployment, a
batch Job and a gang (a PodGroup of three and the Job whose pods belong to it). The controllers
create the pods, pysched places them, KWOK runs them. Then one node's kubelet dies: the node
lifecycle controller marks it unreachable and taints it, its pods are evicted, their controllers
create replacements and pysched places those on the healthy nodes. Every step is printed with the
seconds since the start; the run takes about a minute once the binaries are cached.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import time
from typing import Any

import yaml

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched.framework.features import default_gates
from pysched_dev.devcluster import REPO_ROOT, binaries_version
from pysched_dev.livecluster import UNREACHABLE_TAINT, LivingCluster, sample_nodes, wait_nodes_ready
from pysched_dev.testkit import PAUSE_IMAGE, create_nodes, install_crd, list_pods, poll_until

COSCHEDULING = REPO_ROOT / "manifests" / "components" / "coscheduling"
PG_LABEL = "scheduling.x-k8s.io/pod-group"
T0 = time.monotonic()


def say(text: str) -> None:
    print(f"{time.monotonic() - T0:5.1f}s  {text}", flush=True)


def scheduler_config() -> dict[str, Any]:
    """The shipped configuration with gang scheduling (the coscheduling component's ConfigMap)."""
    cm = yaml.safe_load((COSCHEDULING / "configmap-patch.yaml").read_text())
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg["leaderElection"] = {"leaderElect": False}
    return cfg


def pod_template(labels: dict[str, str], cpu: str, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", {})
    return {"metadata": {"labels": labels, "annotations": annotations},
            "spec": {"schedulerName": "pysched", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": PAUSE_IMAGE,
                                     "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **extra}}


def workloads() -> list[tuple[str, dict[str, Any]]]:
    """(API path, object): what the demo applies, in order."""
    ns = "/apis/{}/namespaces/default/{}"
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                    "template": pod_template({"app": "web"}, "500m")}}
    report = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "report"},
              "spec": {"parallelism": 2, "completions": 4,
                       "template": pod_template({"app": "report"}, "250m", restartPolicy="Never",
                                                annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "5s"})}}
    gang = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "train"},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 60}}
    train = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
             "spec": {"parallelism": 3, "completions": 3,
                      "template": pod_template({"app": "train", PG_LABEL: "train"}, "1", restartPolicy="Never",
                                               annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "600s"})}}
    return [(ns.format("apps/v1", "deployments"), web), (ns.format("batch/v1", "jobs"), report),
            (ns.format("scheduling.x-k8s.io/v1alpha1", "podgroups"), gang), (ns.format("batch/v1", "jobs"), train)]


async def install_podgroup_crd(admin: KubeClient) -> None:
    await install_crd(admin, COSCHEDULING / "crd.yaml")


def owner(pod: dict[str, Any]) -> str:
    refs = pod["metadata"].get("ownerReferences") or [{}]
    kind, name = refs[0].get("kind", "-"), refs[0].get("name", "-")
    return f"{kind}/{name.rsplit('-', 1)[0] if kind == 'ReplicaSet' else name}"


def placement(pods: list[dict[str, Any]]) -> str:
    """``web 2, train 1`` per node: the Running pods of each workload on each node."""
    by_node: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for p in pods:
        if (p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                and p["status"].get("phase") == "Running"):
            by_node[p["spec"]["nodeName"]][p["metadata"]["labels"].get("app", "?")] += 1
    return "\n".join(f"         {node:<8} {', '.join(f'{app} {n}' for app, n in sorted(c.items()))}"
                     for node, c in sorted(by_node.items()))


async def wait_until(check, timeout: float, what: str):
    return await poll_until(check, timeout, fail=lambda _: RuntimeError(
        f"demo: {what} did not happen within {timeout:.0f} s"))


async def run_demo(lc: LivingCluster) -> int:
    creds = load_kubeconfig(lc.kubeconfig)
    admin = KubeClient(creds, qps=0, burst=1)
    try:
        return await _demo(lc, creds, admin)
    finally:
        await admin.close()


async def _demo(lc: LivingCluster, creds, admin: KubeClient) -> int:
    nodes = sample_nodes()
    await install_podgroup_crd(admin)
    await create_nodes(admin, nodes)
    await wait_nodes_ready(admin, [n["metadata"]["name"] for n in nodes])
    say(f"{len(nodes)} KWOK nodes Ready in zones a, b, c (on-demand and spot; kwok-c1 has a GPU and its taint)")

    cfg = configmod.parse(scheduler_config())
    release = binaries_version()
    app = SchedulerApp(cfg, Options(kubeconfig=str(lc.kubeconfig), serve=False, seed=1, kube_version=release,
                                    feature_gates=default_gates(release)), creds)
    task = asyncio.create_task(app.run())
    try:
        for path, obj in workloads():
            await admin.request("POST", path, body=obj, rate_limit=False)
        say("applied Deployment web (6 x 500m), Job report (4 x 250m, 2 at a time), "
            "PodGroup train (minMember 3) + Job train (3 x 1 CPU)")

        async def all_running():
            pods = await list_pods(admin, "default")
            live = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded")]
            web = [p for p in live if p["metadata"]["labels"].get("app") == "web"]
            train = [p for p in live if p["metadata"]["labels"].get("app") == "train"]
            return pods if len(web) == 6 and len(train) == 3 else None
        pods = await wait_until(all_running, 60, "web and the train gang Running")
        say("controllers created the pods, pysched placed them (the gang's three together), KWOK runs "
            "them:\n" + placement(pods))

        counts = collections.Counter(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")
                                     and p["metadata"]["labels"].get("app") == "web")
        failed = counts.most_common(1)[0][0]
        doomed = {p["metadata"]["name"]: owner(p) for p in pods if p["spec"].get("nodeName") == failed
                  and p["status"].get("phase") == "Running"}
        before = {p["metadata"]["name"] for p in await list_pods(admin, "default")}
        await LivingCluster.fail_node(admin, failed)
        say(f"node {failed} stops heartbeating (its kubelet is gone); it runs {len(doomed)} pods")

        async def tainted():
            node = await admin.get(f"/api/v1/nodes/{failed}")
            keys = {t["key"] for t in node["spec"].get("taints") or ()}
            return node if UNREACHABLE_TAINT in keys else None
        await wait_until(tainted, 60, "the unreachable taint")
        say(f"node lifecycle controller: {failed} Ready=Unknown, tainted {UNREACHABLE_TAINT} NoSchedule+NoExecute")

        async def evicted():
            pods = await list_pods(admin, "default")
            left = {p["metadata"]["name"]: p for p in pods if p["metadata"]["name"] in doomed}
            gone = [n for n in doomed if n not in left or left[n]["metadata"].get("deletionTimestamp")]
            return pods if len(gone) == len(doomed) else None
        await wait_until(evicted, 60, "the eviction")
        say(f"taint eviction: {', '.join(sorted(doomed))} deleted ({lc.toleration_seconds} s toleration over)")

        async def replaced():
            pods = await list_pods(admin, "default")
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")
                    and p["status"].get("phase") == "Running"]
            web = [p for p in live if p["metadata"]["labels"].get("app") == "web"]
            train = [p for p in live if p["metadata"]["labels"].get("app") == "train"]
            return pods if len(web) == 6 and len(train) == 3 else None
        pods = await wait_until(replaced, 60, "the replacements Running")
        new = [p for p in pods if p["metadata"]["name"] not in before and p["spec"].get("nodeName")]
        on_failed = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == failed
                     and p["metadata"]["name"] not in doomed]
        say("their controllers recreated them (the Job after its failure backoff) and pysched placed them on "
            f"healthy nodes:\n{placement(pods)}")
        if on_failed:
            say(f"UNEXPECTED: pods bound to the failed node: {on_failed}")
            return 1

        async def report_done():
            job = await admin.get("/apis/batch/v1/namespaces/default/jobs/report")
            return job if (job.get("status") or {}).get("succeeded") == 4 else None
        await wait_until(report_done, 60, "Job report complete")
        say(f"Job report Complete (4/4 Succeeded), the train gang 3/3 Running again; {len(new)} pods placed "
            f"since {failed} failed, none of them on it")
        return 0
    finally:
        app.request_stop()
        await task


def main() -> int:
    print("starting etcd, kube-apiserver, kube-controller-manager and KWOK on loopback "
          "(first run builds them; later runs reuse the cache)...", file=sys.stderr)
    global T0
    with LivingCluster(node_monitor_grace_seconds=5, toleration_seconds=2) as lc:
        T0 = time.monotonic()
        say(f"living cluster up at {lc.cp.url}")
        return asyncio.run(run_demo(lc))


if __name__ == "__main__":
    from pysched.util import logs

    logs.setup("warning", "logfmt")
    sys.exit(main())
