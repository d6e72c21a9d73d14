"""Helpers for the real-node tests: manifests applied with kubectl, waits, a pod's processes."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from pysched_dev.realcluster import RealCluster, cgroups


def fresh_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def apply(cluster: RealCluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def get(cluster: RealCluster, kind: str, name: str, namespace: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)


def wait_running(cluster: RealCluster, name: str, namespace: str, timeout: float = 90.0) -> dict[str, Any]:
    """The pod once it is Running with every container ready; fails quoting its status and events."""
    deadline = time.monotonic() + timeout
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        pod = get(cluster, "pod", name, namespace)
        st = pod.get("status", {})
        if st.get("phase") == "Running" and all(c.get("ready") for c in st.get("containerStatuses") or [{}]):
            return pod
        time.sleep(0.3)
    events = cluster.kubectl("get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}",
                             check=False).stdout
    raise AssertionError(f"pod {namespace}/{name} not Running after {timeout} s: {json.dumps(pod.get('status'))}\n"
                         f"{events}")


def pause_pod(cluster: RealCluster, name: str, namespace: str, *, node: str | None = None,
              tolerate_kwok: bool = False, configmap: str | None = None) -> dict[str, Any]:
    """A pod running the node's pause image (the only image the node has without an import), with a
    configMap volume and a projected service-account token when ``configmap`` is given."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": cluster.pause_image, "imagePullPolicy": "Never",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
        "terminationGracePeriodSeconds": 1,
    }
    if node:
        spec["nodeName"] = node
    if tolerate_kwok:
        spec["tolerations"] = [cluster.kwok_toleration]
    if configmap:
        spec["volumes"] = [
            {"name": "config", "configMap": {"name": configmap}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token",
                                                                                  "expirationSeconds": 3600}}]}},
        ]
        spec["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/config"},
                                                 {"name": "token", "mountPath": "/token"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def container_pid(cluster: RealCluster, pod: dict[str, Any]) -> int:
    """The PID of the pod's first container's process (found in the pod's cgroup)."""
    uid = pod["metadata"]["uid"]
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[-1]
    for root in cgroups.roots(cluster.cgroup_root):
        for d in root.rglob(cid):
            if f"pod{uid}" in str(d):
                pids = (d / "cgroup.procs").read_text().split()
                if pids:
                    return int(pids[0])
    raise AssertionError(f"no process for container {cid} of pod {uid} under {cluster.cgroup_root}")


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)
