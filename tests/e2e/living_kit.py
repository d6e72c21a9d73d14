"""Helpers for the living-cluster e2e tests: workload objects as users write them, creating any kind
on the API server, and waits on what the controllers report (Deployment available, Job complete)."""

from __future__ import annotations

from typing import Any

from pysched_dev.testkit import PAUSE_IMAGE, list_pods

from .conftest import wait_for

PATHS = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "PodGroup": "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
    "WorkloadPodGroup": "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
}


def path_of(obj: dict[str, Any], name: str | None = None) -> str:
    kind = obj["kind"]
    if kind == "PodGroup" and str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
        kind = "WorkloadPodGroup"      # Kubernetes' own, not scheduler-plugins'
    base = PATHS[kind].format(ns=obj["metadata"].get("namespace", "default"))
    return f"{base}/{name}" if name else base


async def create(client, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.request("POST", path_of(obj), body=obj, rate_limit=False)


async def get(client, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.request("GET", path_of(obj, obj["metadata"]["name"]), rate_limit=False)


async def patch(client, obj: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return await client.request("PATCH", path_of(obj, obj["metadata"]["name"]), body=body,
                                content_type="application/merge-patch+json", rate_limit=False)


def template(labels: dict[str, str], *, cpu: str = "200m", memory: str = "128Mi", scheduler: str = "pysched",
             grace: int = 1, **spec: Any) -> dict[str, Any]:
    """A pod template: one pause container with requests, a short grace period, ``spec`` merged in."""
    return {"metadata": {"labels": dict(labels)},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "app", "image": PAUSE_IMAGE,
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}


def deployment(name: str, replicas: int, *, namespace: str = "default", max_surge: int | str = 1,
               max_unavailable: int | str = 0, **tpl: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}},
                     "template": template(labels, **tpl)}}


def pdb(name: str, app: str, *, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


async def wait_available(client, dep: dict[str, Any], replicas: int, timeout: float = 90.0) -> dict[str, Any]:
    """Until the Deployment controller reports ``replicas`` updated, ready and available, and no more."""
    async def done():
        d = await get(client, dep)
        st = d.get("status") or {}
        if (st.get("observedGeneration", 0) >= d["metadata"]["generation"]
                and st.get("updatedReplicas", 0) == replicas and st.get("availableReplicas", 0) == replicas
                and st.get("readyReplicas", 0) == replicas and st.get("replicas", 0) == replicas):
            return d
        return None
    return await wait_for(done, timeout, what=f"deployment {dep['metadata']['name']} available with {replicas}")


async def pods(client, app: str, namespace: str = "default", *, live: bool = True) -> list[dict[str, Any]]:
    """The pods labelled ``app``; ``live``: without those being deleted (Terminating)."""
    found = await list_pods(client, namespace, labelSelector=f"app={app}")
    return [p for p in found if not (live and p["metadata"].get("deletionTimestamp"))]


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def node_of(pod: dict[str, Any]) -> str | None:
    return pod["spec"].get("nodeName")


def taint_keys(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or ()}
