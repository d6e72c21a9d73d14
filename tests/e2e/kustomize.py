"""A minimal kustomize for the test: applies ``manifests/`` to the test API server.

Supports what our base and components use - ``resources``, ``namespace``, ``labels`` (metadata
labels only), ``components`` (``kind: Component`` directories with their own resources, labels and
``patches``: strategic-merge patches, applied here as a recursive map merge, which is what they are
for maps without lists) - so the manifests users apply with ``kubectl apply -k`` are the ones
tested. ``images`` only matters to a kubelet and is ignored here.
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
# Created first, so the kinds they define can be created after them.
CRDS = {"CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"}


def _merge(base: dict, patch: dict) -> dict:
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _ident(obj: dict) -> tuple:
    return obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", "")


def build(directory: Path, components: list[Path] = ()) -> list[dict]:
    """The objects of the kustomization in ``directory``, plus ``components`` as an overlay adds them."""
    out = _build(directory)
    for comp in components:
        k = yaml.safe_load((comp / "kustomization.yaml").read_text())
        assert k["kind"] == "Component", f"{comp}: not a kustomize Component"
        out.extend(_build(comp))
        for entry in k.get("patches") or ():
            patch = yaml.safe_load((comp / entry["path"]).read_text())
            matches = [i for i, o in enumerate(out) if _ident(o) == _ident(patch)]
            assert len(matches) == 1, f"{comp}/{entry['path']}: patch target {_ident(patch)} not found once"
            out[matches[0]] = _merge(out[matches[0]], patch)
    return out


def _build(directory: Path) -> list[dict]:
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    ns = k.get("namespace")
    extra_labels: dict = {}
    for entry in k.get("labels") or ():
        extra_labels.update(entry.get("pairs") or {})
    out = []
    for res in k.get("resources") or ():
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


async def apply(client, directory: Path, components: list[Path] = ()) -> list[dict]:
    objs = build(directory, components)
    paths = {**CRDS, **PATHS}
    order = list(paths)
    for obj in sorted(objs, key=lambda o: order.index(o["kind"])):
        path = paths[obj["kind"]].format(ns=obj["metadata"].get("namespace", ""))
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
