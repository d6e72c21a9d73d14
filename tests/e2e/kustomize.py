"""A minimal kustomize for the test: applies ``manifests/`` to the test API server.

Supports what our base, components and overlays use - ``resources`` (files and directories),
``namespace``, ``labels`` (metadata labels only), ``components`` (``kind: Component`` directories
with their own resources, labels, ``components`` and ``patches``: strategic-merge patches, applied
here as a recursive map merge, which is what they are for maps without lists) - so the manifests users apply
with ``kubectl apply -k`` are the ones tested. ``images`` only matters to a kubelet and is ignored
here. Where kubectl is installed, tests/e2e/test_manifests_metrics.py checks that ``kubectl
kustomize`` renders the same objects.
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


def _load(directory: Path) -> dict:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def _resources(directory: Path, k: dict) -> list[dict]:
    out = []
    for res in k.get("resources") or ():
        path = (directory / res).resolve()
        if path.is_dir():
            out.extend(build(path))
            continue
        out.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


def build(directory: Path, components: list[Path] = ()) -> list[dict]:
    """The objects of the kustomization in ``directory``, plus ``components`` as an overlay adds them.

    As kustomize does: resources (files, or directories built recursively), then the components
    (the kustomization's own, then ``components``), then this kustomization's ``namespace`` and
    ``labels`` over all of them. ``namespace`` also renames the Namespace object and sets the
    namespace of ServiceAccount subjects of (Cluster)RoleBindings, as kustomize 5 does for a
    single-namespace base.
    """
    k = _load(directory)
    out = _resources(directory, k)
    for comp in [directory / c for c in k.get("components") or ()] + list(components):
        _add_component(out, comp)
    idents = [_ident(o) for o in out]
    duplicated = {i for i in idents if idents.count(i) > 1}
    assert not duplicated, f"{directory}: objects added twice (as kustomize refuses): {sorted(duplicated)}"
    ns = k.get("namespace")
    for doc in out:
        meta = doc.setdefault("metadata", {})
        if ns and doc["kind"] == "Namespace":
            meta["name"] = ns
        elif ns and doc["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = ns
        for subj in doc.get("subjects") or ():
            if subj.get("kind") == "ServiceAccount" and ns:
                subj["namespace"] = ns
    return _labelled(out, k)


def _add_component(out: list[dict], comp: Path) -> None:
    """Component ``comp`` over ``out``, in place: its resources (with its labels), then its own
    components, then its patches, which see everything added so far."""
    comp = comp.resolve()
    ck = _load(comp)
    assert ck["kind"] == "Component", f"{comp}: not a kustomize Component"
    out.extend(_labelled(_resources(comp, ck), ck))
    for nested in ck.get("components") or ():
        _add_component(out, comp / nested)
    for entry in ck.get("patches") or ():
        patch = yaml.safe_load((comp / entry["path"]).read_text())
        matches = [i for i, o in enumerate(out) if _ident(o) == _ident(patch)]
        assert len(matches) == 1, f"{comp}/{entry['path']}: patch target {_ident(patch)} not found once"
        out[matches[0]] = _merge(out[matches[0]], patch)


def _labelled(objs: list[dict], k: dict) -> list[dict]:
    extra: dict = {}
    for entry in k.get("labels") or ():
        extra.update(entry.get("pairs") or {})
    for doc in objs:
        if extra:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(extra)
    return objs


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
