"""``pysched snapshot`` (pykube-ng) against the real API server, and simulate fed with its output.

* Token, client-certificate (files and inline ``-data``) and CA kubeconfigs work, and ``--context``
  picks a context; an unusable kubeconfig exits 2, an unreachable server 1.
* The export holds every kind simulate reads, paged, without managedFields; simulating from it
  gives the same placements as simulating from the objects listed directly with our own client.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
import yaml

from pysched.client.objectstore import api_path
from pysched_dev.testkit import create_nodes, make_node, make_pod

from .conftest import REPO

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"


def pysched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def kubeconfig(path, contexts: dict[str, tuple[str, dict]], current: str, ca: str) -> str:
    """contexts: name -> (server, user entry)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": n, "cluster": {"server": s, "certificate-authority": ca}}
                        for n, (s, _) in contexts.items()],
           "users": [{"name": n, "user": u} for n, (_, u) in contexts.items()],
           "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts]}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def populate(admin) -> None:
    nodes = [make_node(f"node-{i}", cpu="4", memory="8Gi", labels={ZONE: f"zone-{'abc'[i % 3]}"}) for i in range(6)]
    nodes.append(make_node("gpu-0", cpu="8", memory="32Gi", labels={ZONE: "zone-a"},
                           taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    await create_nodes(admin, nodes)
    await admin.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                        body={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": "high"}, "value": 1000})
    await admin.request("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "example.com/disk",
        "volumeBindingMode": "WaitForFirstConsumer",
        "metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}})
    await admin.request("POST", "/api/v1/namespaces/default/services", body={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    for i in range(12):   # more than a page at --page-size 5
        await admin.request("POST", "/api/v1/namespaces/default/pods", body=make_pod(
            f"bound-{i}", cpu="500m", memory="1Gi", node_name=f"node-{i % 6}", scheduler="default-scheduler",
            labels={"app": "web" if i % 2 else "db"}))
    # A Deployment (no controller runs: it has no pods), exported for simulate --scale.
    await admin.request("POST", "/apis/apps/v1/namespaces/default/deployments", body={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "idle"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "idle"}}, "template": {
            "metadata": {"labels": {"app": "idle"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    # Pending, for a profile of ours: simulate schedules it too (no scheduler runs here).
    await admin.request("POST", "/api/v1/namespaces/default/pods",
                        body=make_pod("pending", cpu="2", memory="1Gi", labels={"app": "web"}))


def workloads() -> list[dict]:
    tmpl = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}
    db = {"metadata": {"labels": {"app": "db"}}, "spec": {"priorityClassName": "high", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}}, "template": db,
                  "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                      "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
        make_pod("too-big", cpu="16", memory="1Gi"),
    ]


async def direct_snapshot(admin, path) -> None:
    """The same kinds, listed with our own client (the reference)."""
    items = []
    kinds = [("Node", "v1", "/api/v1/nodes"), ("Pod", "v1", "/api/v1/pods"),
             ("PriorityClass", "scheduling.k8s.io/v1", "/apis/scheduling.k8s.io/v1/priorityclasses"),
             ("Namespace", "v1", api_path("namespaces")), ("Service", "v1", api_path("services")),
             ("StorageClass", "storage.k8s.io/v1", api_path("storageclasses"))]
    for kind, version, url in kinds:
        listed, _ = await admin.list_all(url)
        items += [{"apiVersion": version, "kind": kind, **o} for o in listed]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


async def test_snapshot_export_feeds_simulate(control_plane, admin, tmp_path):
    await populate(admin)
    cp = control_plane
    ca = str(cp.ca_file)
    token_user = {"token": cp.admin_token}
    crt, key = cp.issue_cert("snapshot-user", client=True, groups=("system:masters",))
    cert_files = {"client-certificate": str(crt), "client-key": str(key)}
    cert_data = {"client-certificate-data": base64.b64encode(crt.read_bytes()).decode(),
                 "client-key-data": base64.b64encode(key.read_bytes()).decode()}
    dead = "https://127.0.0.1:1"
    kc = kubeconfig(tmp_path / "multi.kubeconfig", {"broken": (dead, token_user), "token": (cp.url, token_user),
                                                    "certs": (cp.url, cert_files), "inline": (cp.url, cert_data)},
                    current="broken", ca=ca)

    exports = {}
    for ctx in ("token", "certs", "inline"):
        out = tmp_path / f"export-{ctx}.yaml"
        proc = pysched("snapshot", "--kubeconfig", kc, "--context", ctx, "-o", str(out), "--page-size", "5")
        assert proc.returncode == 0, proc.stderr
        exports[ctx] = yaml.safe_load(out.read_text())
    out = tmp_path / "export.json"
    proc = pysched("snapshot", "--kubeconfig", kc, "--context", "token", "-o", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    exports["json"] = json.loads(out.read_text())
    items = exports["token"]["items"]
    assert exports["json"]["items"] == items
    assert exports["certs"]["items"] == exports["inline"]["items"] == items
    kinds = {}
    for o in items:
        kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
        assert "managedFields" not in o["metadata"] and o["apiVersion"]
    assert kinds["Node"] == 7 and kinds["Pod"] == 13 and kinds["StorageClass"] == 1 and kinds["Service"] >= 2
    assert kinds["PriorityClass"] >= 3 and kinds["Namespace"] >= 4 and kinds["Deployment"] == 1
    assert "PodGroup" not in kinds and "ElasticQuota" not in kinds   # no CRDs here

    # The current context points at nothing: the API server cannot be reached -> 1.
    proc = pysched("snapshot", "--kubeconfig", kc, "-o", str(tmp_path / "x.yaml"))
    assert proc.returncode == 1 and "list Node" in proc.stderr
    proc = pysched("snapshot", "--kubeconfig", kc, "--context", "nope")
    assert proc.returncode == 2 and "--context nope: no such context" in proc.stderr
    proc = pysched("snapshot", "--kubeconfig", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "not found" in proc.stderr

    direct = tmp_path / "direct.yaml"
    await direct_snapshot(admin, direct)
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all(workloads()))
    results = []
    for snap in (tmp_path / "export-token.yaml", direct):
        proc = pysched("simulate", "--cluster", str(snap), "--pods", str(pods), "--seed", "3", "--output", "json",
                       "--add-nodes", "node-0:1")
        assert proc.returncode == 1, proc.stderr      # too-big fits nowhere
        results.append(json.loads(proc.stdout))
    exported, reference = results
    placed = {p["pod"]: p["node"] for p in exported["placements"]}
    assert placed == {p["pod"]: p["node"] for p in reference["placements"]}
    assert placed["default/pending"] and placed["default/too-big"] is None
    assert sum(1 for k in placed if k.startswith("default/web-")) == 6 and placed["default/db-1"]
    assert exported["addedNodes"] == reference["addedNodes"]
