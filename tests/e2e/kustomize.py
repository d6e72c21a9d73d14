"""A minimal kustomize for the test: applies ``manifests/`` to the test API server.

Supports what our base uses - ``resources``, ``namespace`` and ``labels`` (metadata labels only)
- so the manifests users apply with ``kubectl apply -k manifests/`` are the ones tested.
``images`` only matters to a kubelet and is ignored here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "ServiceMonitor": "/apis/monitoring.coreos.com/v1/namespaces/{ns}/servicemonitors",
}


def build(directory: Path) -> list[dict]:
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    ns = k.get("namespace")
    extra_labels: dict = {}
    for entry in k.get("labels") or ():
        extra_labels.update(entry.get("pairs") or {})
    out = []
    for res in k["resources"]:
        for doc in yaml.safe_load_all((directory / res).read_text()):
            if not doc:
                continue
            meta = doc.setdefault("metadata", {})
            if ns and doc["kind"] not in CLUSTER_SCOPED:
                meta["namespace"] = ns
            meta.setdefault("labels", {}).update(extra_labels)
            for subj in doc.get("subjects") or ():
                if subj.get("kind") == "ServiceAccount" and ns:
                    subj["namespace"] = ns
            out.append(doc)
    return out


async def apply(client, directory: Path) -> list[dict]:
    objs = build(directory)
    order = list(PATHS)
    for obj in sorted(objs, key=lambda o: order.index(o["kind"])):
        path = PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace", ""))
        await client.request("POST", path, body=obj, rate_limit=False)
    return objs


SERVICEMONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}
