"""The benchmark's living-cluster mode (``--cluster living``): the workload as a real cluster runs it.

A bare run (``bench.runner``) measures pods nobody owns on nodes nothing manages: once bound, a pod
never changes again. In a living run the control plane is ``pysched_dev.livecluster.LivingCluster``
- kube-controller-manager and KWOK beside etcd and kube-apiserver - and:

* the workload's nodes are KWOK's (``kwok_nodes``): Ready only once KWOK reports them, renewing
  their Leases every 10 s as kubelets do (``LEASE_SECONDS``), their status refreshed;
* the workload's pods belong to Deployments (``deployments``): pods with the same spec are one
  Deployment's replicas (the ReplicaSet controller creates them, with the phase label the watcher
  and the verifier select on), so every pod a scheduler binds then goes ContainerCreating, Running
  and Ready through KWOK, and the ReplicaSet and Deployment controllers follow it - the pod status
  updates every scheduler's informer has to take, which ``status_updates`` counts from the API
  server's own ``apiserver_request_total``.

Workloads whose pods are evicted by design (preemption) are bare-only: a Deployment would replace
its victims, and the run would no longer be the workload it names.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from pysched.client.rest import KubeClient
from pysched_dev.livecluster import KWOK_LABEL, KWOK_MANAGED
from pysched_dev.testkit import node_ready, poll_until

from . import prom
from .process import BenchError
from .workloads import NAMESPACE, PHASE_LABEL, Workload

#: KWOK's node Lease duration: renewed every quarter of it (10 s), as a kubelet's default.
LEASE_SECONDS = 40
#: The node lifecycle controller's grace before a node without renewals is unreachable (> the Lease).
NODE_GRACE_SECONDS = 50
GROUP_LABEL = "bench-group"
SUFFIX = "+living"


def supported(workload: Workload) -> str:
    """Why a workload cannot run living ("" when it can)."""
    if workload.preemption_victims:
        return "its init pods are evicted by design, and a Deployment would replace them"
    if workload.pod_objects is not None:
        return "each pod uses an object made for it (a ResourceClaim), which a Deployment's replicas cannot"
    return ""


def kwok_nodes(workload: Workload) -> list[dict[str, Any]]:
    """The workload's nodes, for KWOK to manage: its label on, conditions left to KWOK."""
    out = []
    for i in range(workload.nodes):
        node = copy.deepcopy(workload.node(i))
        node["metadata"].setdefault("labels", {})[KWOK_LABEL] = KWOK_MANAGED
        node["status"].pop("conditions", None)
        node["status"].pop("phase", None)
        out.append(node)
    return out


def deployments(pods: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    """One Deployment per distinct pod spec (name aside), its replicas the pods with that spec.

    The template keeps each pod's labels (the phase label among them) and adds ``bench-group``, the
    Deployment's selector: the ReplicaSet controller then creates exactly the workload's pods."""
    groups: dict[str, tuple[dict[str, Any], int]] = {}
    for p in pods:
        tpl = {"metadata": {k: v for k, v in p["metadata"].items() if k not in ("name", "namespace")},
               "spec": p["spec"]}
        key = json.dumps(tpl, sort_keys=True)
        first, n = groups.get(key, (tpl, 0))
        groups[key] = (first, n + 1)
    out = []
    for k, (tpl, n) in enumerate(groups.values()):
        group = f"{phase}-{k}"
        tpl = copy.deepcopy(tpl)
        tpl["metadata"].setdefault("labels", {})[GROUP_LABEL] = group
        tpl["metadata"]["labels"][PHASE_LABEL] = phase
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": group, "namespace": NAMESPACE},
                    "spec": {"replicas": n, "selector": {"matchLabels": {GROUP_LABEL: group}},
                             "template": tpl}})
    return out


async def create_owned(client: KubeClient, pods: list[dict[str, Any]], phase: str, timeout: float) -> float:
    """Create the Deployments for ``pods`` and wait until their controllers created every pod;
    returns pods created per second (the controllers' pace, not the driver's)."""
    t = time.monotonic()
    for d in deployments(pods, phase):
        await client.request("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", body=d, rate_limit=False)
    await wait_pods(client, phase, len(pods), timeout)
    return len(pods) / max(time.monotonic() - t, 1e-9)


async def wait_pods(client: KubeClient, phase: str, n: int, timeout: float) -> None:
    created = 0

    async def all_created() -> bool:
        nonlocal created
        items, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                         {"labelSelector": f"{PHASE_LABEL}={phase}"})
        created = len(items)
        return created >= n

    await poll_until(all_created, timeout, interval=0.5, fail=lambda _: BenchError(
        f"the controllers created {created}/{n} {phase} pods within {timeout:.0f} s"))


async def wait_running(client: KubeClient, phase: str, n: int, timeout: float) -> None:
    """Until ``n`` pods of ``phase`` are Running and Ready (KWOK has taken them through their stages):
    a living run's end sample then includes every status update that brought."""
    ready = 0

    async def all_ready() -> bool:
        nonlocal ready
        items, _ = await client.list_all(f"/api/v1/namespaces/{NAMESPACE}/pods",
                                         {"labelSelector": f"{PHASE_LABEL}={phase}"})
        ready = sum(1 for p in items if any(c.get("type") == "Ready" and c.get("status") == "True"
                                             for c in (p.get("status") or {}).get("conditions") or ()))
        return ready >= n

    await poll_until(all_ready, timeout, interval=0.5, fail=lambda _: BenchError(
        f"{ready}/{n} {phase} pods Running and Ready within {timeout:.0f} s"))


async def wait_nodes_ready(client: KubeClient, n: int, timeout: float = 300.0) -> None:
    """Until ``n`` nodes are Ready without the not-ready taint (KWOK + the node lifecycle controller)."""
    ready = 0

    async def all_ready() -> bool:
        nonlocal ready
        items, _ = await client.list_all("/api/v1/nodes")
        ready = sum(1 for x in items if node_ready(x) and not any(
            t.get("key") == "node.kubernetes.io/not-ready" for t in x["spec"].get("taints") or ()))
        return ready >= n

    await poll_until(all_ready, timeout, interval=1.0, fail=lambda _: BenchError(
        f"{ready}/{n} KWOK nodes Ready within {timeout:.0f} s"))


def status_updates(samples: prom.Samples) -> float:
    """Pod status writes the API server answered (``apiserver_request_total`` for pods/status)."""
    return sum(v for d, v in prom.select(samples, "apiserver_request_total", resource="pods", subresource="status")
               if d.get("verb") in ("PATCH", "PUT", "UPDATE", "APPLY"))


async def apiserver_metrics(client: KubeClient) -> prom.Samples:
    """The API server's /metrics (text: the client hands back what is not JSON as a string)."""
    text = await client.request("GET", "/metrics", rate_limit=False)
    return prom.parse(text if isinstance(text, str) else "")
