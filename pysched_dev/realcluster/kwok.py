"""The real cluster's fake nodes: KWOK (hack/kwok.sh) playing the kubelet of N tainted Nodes.

As in the living cluster (pysched_dev.livecluster, whose stages and label it shares), KWOK manages
only Nodes labelled ``kwok.x-k8s.io/node=fake`` and the pods bound to them. Each fake node also
carries the taint ``kwok.x-k8s.io/node=fake:NoSchedule``, so kube-scheduler never places the
cluster's own pods (pysched's Deployment...) there: a workload pod opts in with ``KWOK_TOLERATION``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pysched_dev.devcluster import free_port
from pysched_dev.livecluster import KWOK_LABEL, KWOK_MANAGED, KWOK_STAGES, kwok_node

KWOK_TAINT: dict[str, str] = {"key": KWOK_LABEL, "value": KWOK_MANAGED, "effect": "NoSchedule"}
KWOK_TOLERATION: dict[str, str] = {"key": KWOK_LABEL, "operator": "Equal", "value": KWOK_MANAGED,
                                   "effect": "NoSchedule"}


def nodes(names: list[str], cpu: str = "8", memory: str = "32Gi", pods: str = "110") -> list[dict[str, Any]]:
    return [kwok_node(n, cpu=cpu, memory=memory, pods=pods, taints=[dict(KWOK_TAINT)]) for n in names]


def argv(binary: Path, *, kubeconfig: Path, node_ip: str, cidr: str) -> tuple[list[str], int]:
    port = free_port()
    return [
        str(binary), f"--kubeconfig={kubeconfig}", f"--config={KWOK_STAGES}",
        f"--manage-nodes-with-label-selector={KWOK_LABEL}={KWOK_MANAGED}",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{port}",
        f"--node-ip={node_ip}", f"--cidr={cidr}",
    ], port
