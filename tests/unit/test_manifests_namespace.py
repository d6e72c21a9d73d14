"""One namespace for pysched everywhere (issue 56): ``manifests/`` and its components put every
namespaced object in ``pysched-system``, the namespace the Helm chart's docs install to, and no
file of the repository still names the old one (``OLD``)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
NS = "pysched-system"
OLD = "scheduler-" + "lab"      # spelled apart so this file does not match its own search
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
# Where the namespace may be named: everything but generated output and environments.
SKIP_DIRS = {".git", ".venv", "build", "site", "dist", "node_modules", "__pycache__"}


def manifest_objects() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted((REPO / "manifests").rglob("*.yaml")):
        out.extend((path, d) for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind"))
    return out


def test_every_namespaced_manifest_object_is_in_pysched_system():
    objs = manifest_objects()
    namespaces = [d["metadata"]["name"] for _, d in objs if d["kind"] == "Namespace"]
    assert namespaces == [NS]
    for path, d in objs:
        if d["kind"] in ("Kustomization", "Component", "KubeSchedulerConfiguration") or d["kind"] in CLUSTER_SCOPED:
            continue
        meta = d.get("metadata") or {}
        assert meta.get("namespace") == NS, f"{path.relative_to(REPO)}: {d['kind']} {meta.get('name')}"
    for path, d in objs:     # the bindings' subjects, cluster-scoped ones too
        for s in d.get("subjects") or ():
            if s.get("kind") == "ServiceAccount" and s.get("name") == "pysched":
                assert s.get("namespace") == NS, f"{path.relative_to(REPO)}: {d['kind']} {d['metadata']['name']}"
    extender = (REPO / "manifests" / "components" / "extender" / "kube-scheduler-extender.yaml").read_text()
    assert f"https://pysched-extender.{NS}.svc:" in extender


def test_the_docs_install_the_chart_where_the_manifests_go():
    helm = re.compile(r"helm install \S+ \S+ (?:-n|--namespace) (\S+)")
    found = [m.group(1) for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
             for m in helm.finditer(p.read_text())]
    assert found and set(found) == {NS}


def test_no_file_names_the_old_namespace():
    hits = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(part in SKIP_DIRS for part in rel.parts) or not path.is_file() or path.suffix in (".pyc", ".png"):
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if OLD in text and rel != Path("CHANGELOG.md"):     # the history says what it was
            hits.append(str(rel))
    assert hits == []
