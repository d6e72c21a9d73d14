"""Builders for Node and Pod API objects (plain dicts, as ``kubectl get -o json`` shows them),
for plugin tests with ``PluginTester`` and for the project's own tests.

Nodes are bare Node objects with ``status.allocatable``/``capacity`` and a Ready condition, as
scheduler_perf's ``node-default.yaml`` (4 CPU, 32Gi, 110 pods unless told otherwise). Pods have one
pause container with the requested resources, ``schedulerName: pysched`` unless told otherwise.
"""

from __future__ import annotations

from typing import Any

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def make_node(name: str, *, cpu: str = "4", memory: str = "32Gi", pods: str = "110",
              labels: dict[str, Any] | None = None, taints: list[dict[str, Any]] | None = None,
              unschedulable: bool = False, extended: dict[str, Any] | None = None,
              ephemeral_storage: str | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    if ephemeral_storage:
        alloc["ephemeral-storage"] = ephemeral_storage
    alloc.update(extended or {})
    lbl = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    lbl.update(labels or {})
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": lbl},
            "spec": {},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node"}],
                       "phase": "Running"}}
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def make_pod(name: str, *, namespace: str = "default", scheduler: str = "pysched", cpu: str | None = "100m",
             memory: str | None = "500Mi", labels: dict[str, Any] | None = None,
             node_selector: dict[str, Any] | None = None, tolerations: list[dict[str, Any]] | None = None,
             affinity: dict[str, Any] | None = None, extended: dict[str, Any] | None = None,
             limits_only: dict[str, Any] | None = None, node_name: str | None = None, priority: int | None = None,
             spread: list[dict[str, Any]] | None = None, gates: list[str] | None = None,
             owner: dict[str, Any] | None = None, annotations: dict[str, Any] | None = None,
             init_containers: list[dict[str, Any]] | None = None,
             overhead: dict[str, Any] | None = None, host_ports: list[int] | None = None) -> dict[str, Any]:
    requests = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    requests.update(extended or {})
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    limits = dict(extended or {})  # extended resources cannot be overcommitted: limit == request
    limits.update(limits_only or {})
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {"name": "c", "image": PAUSE_IMAGE, "resources": resources}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container],
                  "terminationGracePeriodSeconds": 0}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if spread:
        spec["topologySpreadConstraints"] = spread
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if init_containers:
        spec["initContainers"] = init_containers
    if overhead:
        spec["overhead"] = overhead
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner:
        meta["ownerReferences"] = [owner]
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
