"""CapacityType (Score): spot or on-demand, as the pod asks.

The pod states a preference with the label ``lifecycle-preference: spot|on-demand`` (key
configurable as ``podLabel``); any other value, or none, is neutral: 50 everywhere. The node's
capacity type comes from the first of ``nodeLabels`` it carries - by default Karpenter's
``karpenter.sh/capacity-type`` (``spot``, ``on-demand``, ``reserved``, which counts as on-demand)
then EKS's ``eks.amazonaws.com/capacityType`` (``SPOT``, ``ON_DEMAND``). A match scores 100, a
mismatch 0, an unknown node type 50. ``node.kubernetes.io/lifecycle`` is not a standard label
and is not read unless configured. Reads: pod labels, node labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pysched.framework import CycleState, Handle, NodeBatch, PodInfo, ScorePlugin, arg
from pysched.framework.api import ConfigError

SPOT, ON_DEMAND = "spot", "on-demand"
MATCH, MISMATCH, NEUTRAL = 100, 0, 50
POD_LABEL = "lifecycle-preference"
DEFAULT_NODE_LABELS = [
    ("karpenter.sh/capacity-type", {"spot": SPOT, "on-demand": ON_DEMAND, "reserved": ON_DEMAND}),
    ("eks.amazonaws.com/capacityType", {"SPOT": SPOT, "ON_DEMAND": ON_DEMAND}),
]


@dataclass
class CapacityTypeNodeLabel:
    """A node label naming the capacity type: ``values`` maps its values to spot / on-demand."""
    key: str = field(default="", metadata=arg(required=True))
    values: dict[str, str] = field(default_factory=dict)

    def validate(self, path: str) -> None:
        for v, t in self.values.items():
            if t not in (SPOT, ON_DEMAND):
                raise ConfigError(f"{path}.values[{v}]: {t!r} must be \"spot\" or \"on-demand\"")


def _default_node_labels() -> list[CapacityTypeNodeLabel]:
    return [CapacityTypeNodeLabel(k, dict(v)) for k, v in DEFAULT_NODE_LABELS]


@dataclass
class CapacityTypeArgs:
    """``podLabel`` (empty: the default) and ``nodeLabels`` (empty: Karpenter's, then EKS's)."""
    KIND = "CapacityTypeArgs"

    pod_label: str = POD_LABEL
    node_labels: list[CapacityTypeNodeLabel] = field(default_factory=_default_node_labels)

    def __post_init__(self) -> None:
        self.pod_label = self.pod_label or POD_LABEL
        if not self.node_labels:
            self.node_labels = _default_node_labels()


class CapacityType(ScorePlugin[CapacityTypeArgs]):
    name = "CapacityType"

    def __init__(self, args: CapacityTypeArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)

    def preference(self, pod: PodInfo) -> str | None:
        v = pod.labels.get(self.args.pod_label)
        return v if v in (SPOT, ON_DEMAND) else None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        n = len(nodes)
        out = np.full(n, NEUTRAL, dtype=np.int64)
        pref = self.preference(pod)
        if pref is None:
            return out
        # The first configured label a node carries decides its type; an unknown value is neutral.
        decided = np.zeros(n, dtype=bool)
        for label in self.args.node_labels:
            values = nodes.label(label.key)
            present = values.exists() & ~decided
            if not present.any():
                continue
            per_code = np.full(len(values.vocabulary) + 1, NEUTRAL, dtype=np.int64)  # [-1]: absent
            for value, kind in label.values.items():
                code = values.code(value)
                if code >= 0:
                    per_code[code] = MATCH if kind == pref else MISMATCH
            out = np.where(present, per_code[values.codes], out)
            decided |= present
        return out
