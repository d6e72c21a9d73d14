"""A minimal kustomize for the test: applies ``manifests/`` to the test API server.

Supports what our base, components and overlays use - ``resources`` (files and directories),
``namespace``, ``labels`` (metadata labels only), ``components`` (``kind: Component`` directories
with their own resources, labels, ``components`` and ``patches``: strategic-merge patches, applied
here as a recursive map merge, which is what they are for maps without lists), ``configMapGenerator``
(``files`` and ``literals``; ``behavior`` create, replace or merge; ``generatorOptions``'
``disableNameSuffixHash``) - so the manifests users apply with ``kubectl apply -k`` are the ones
tested. ``images`` only matters to a kubelet and is ignored here. Where kubectl is installed,
tests/e2e/test_manifests_metrics.py checks that ``kubectl kustomize`` renders the same objects.

As kustomize does, a kustomization's resources come first, then its generators, then its
components; once the whole tree is built, each generated ConfigMap gets the suffix ``-<hash of its
final content>`` (kustomize's ``api/hasher``: sha256 of ``{"data", "kind", "name"}`` as Go's
``json.Marshal`` writes it - its name is always empty there, a quirk of the path lookup it uses -,
the first 10 hex digits with 0, 1, 3, a, e written g, h, k, m, t), and the pod templates that name
it follow the new name: a configuration change changes the Deployment and rolls it.
"""

from __future__ import annotations

import hashlib
import json
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
NEEDS_HASH = "__kustomize_needs_hash__"      # a generated ConfigMap's mark until build() names it
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
            out.extend(_build(path))
            continue
        out.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return out


def build(directory: Path, components: list[Path] = ()) -> list[dict]:
    """The objects of the kustomization in ``directory``, plus ``components`` as an overlay adds them.

    As kustomize does (``KustTarget.accumulateTarget``): resources (files, or directories built
    recursively), then its ``configMapGenerator``, then the components (the kustomization's own,
    then ``components``: their patches see the generated ConfigMaps, and win over a ``replace`` of
    the same kustomization), then this kustomization's ``namespace`` and ``labels`` over all of them.
    ``namespace`` also renames the Namespace object and sets the namespace of ServiceAccount
    subjects of (Cluster)RoleBindings, as kustomize 5 does for a single-namespace base. Last, over
    the whole tree, the generated ConfigMaps get their content hash in their names, and the
    references to them follow.
    """
    return _name_generated(_build(directory, components))


def _build(directory: Path, components: list[Path] = ()) -> list[dict]:
    k = _load(directory)
    out = _resources(directory, k)
    _generate(out, directory, k)
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


def _generate(out: list[dict], directory: Path, k: dict) -> None:
    """``configMapGenerator`` over ``out``, in place: ``create`` (the default) adds a ConfigMap,
    ``replace`` and ``merge`` change the data of one generated before (same name and namespace)."""
    hashed = not (k.get("generatorOptions") or {}).get("disableNameSuffixHash")
    for gen in k.get("configMapGenerator") or ():
        data: dict[str, str] = {}
        for entry in gen.get("files") or ():
            key, _, rel = entry.rpartition("=") if "=" in entry else (Path(entry).name, "", entry)
            data[key] = (directory / rel).read_text()
        for literal in gen.get("literals") or ():
            key, _, value = literal.partition("=")
            data[key] = value
        ns = gen.get("namespace")
        behavior = gen.get("behavior") or "create"
        if behavior == "create":
            meta = {"name": gen["name"], **({"namespace": ns} if ns else {})}
            out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data, NEEDS_HASH: hashed})
            continue
        found = [o for o in out if o["kind"] == "ConfigMap" and o["metadata"]["name"] == gen["name"]
                 and o["metadata"].get("namespace") == ns and NEEDS_HASH in o]
        assert len(found) == 1, \
            f"{directory}: configMapGenerator {gen['name']}: behavior {behavior}: no such generated ConfigMap"
        found[0]["data"] = data if behavior == "replace" else {**found[0].get("data", {}), **data}
        found[0][NEEDS_HASH] = hashed


def config_map_hash(cm: dict) -> str:
    """kustomize's name suffix for a generated ConfigMap (``api/hasher``, see the module docstring)."""
    encoded = json.dumps({"data": cm.get("data") or {}, "kind": "ConfigMap", "name": ""}, sort_keys=True,
                         separators=(",", ":"), ensure_ascii=False)
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    encoded = encoded.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def _name_generated(objs: list[dict]) -> list[dict]:
    """The generated ConfigMaps named ``<name>-<hash>`` (unless their generator disabled it), and
    every pod template's reference to one (volumes, projected volumes, env, envFrom) renamed."""
    renamed: dict[tuple[str | None, str], str] = {}
    for o in objs:
        if o.pop(NEEDS_HASH, False):
            old = o["metadata"]["name"]
            o["metadata"]["name"] = f"{old}-{config_map_hash(o)}"
            renamed[o["metadata"].get("namespace"), old] = o["metadata"]["name"]
        o.pop(NEEDS_HASH, None)
    for o in objs:
        spec = ((o.get("spec") or {}).get("template") or {}).get("spec")
        if not renamed or not isinstance(spec, dict):
            continue
        ns = o["metadata"].get("namespace")
        refs = [v.get("configMap") for v in spec.get("volumes") or ()]
        refs += [src.get("configMap") for v in spec.get("volumes") or ()
                 for src in (v.get("projected") or {}).get("sources") or ()]
        for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
            refs += [(env.get("valueFrom") or {}).get("configMapKeyRef") for env in c.get("env") or ()]
            refs += [env_from.get("configMapRef") for env_from in c.get("envFrom") or ()]
        for ref in refs:
            if isinstance(ref, dict) and (ns, ref.get("name")) in renamed:
                ref["name"] = renamed[ns, ref["name"]]
    return objs


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
