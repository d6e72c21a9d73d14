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

import numpy as np

from pysched.apis.config import ConfigError
from pysched.framework.args import get_list, get_map, get_str, strict
from pysched.framework.interface import ScorePlugin

SPOT, ON_DEMAND = "spot", "on-demand"
MATCH, MISMATCH, NEUTRAL = 100, 0, 50
DEFAULT_NODE_LABELS = [
    ("karpenter.sh/capacity-type", {"spot": SPOT, "on-demand": ON_DEMAND, "reserved": ON_DEMAND}),
    ("eks.amazonaws.com/capacityType", {"SPOT": SPOT, "ON_DEMAND": ON_DEMAND}),
]


class CapacityTypeArgs:
    def __init__(self, pod_label="lifecycle-preference", node_labels=None):
        self.pod_label = pod_label
        self.node_labels = node_labels if node_labels is not None else [(k, dict(v)) for k, v in DEFAULT_NODE_LABELS]

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "CapacityTypeArgs":
        raw = strict(raw, path, ("podLabel", "nodeLabels"))
        pod_label = get_str(raw, "podLabel", path, "lifecycle-preference") or "lifecycle-preference"
        entries = get_list(raw, "nodeLabels", path)
        node_labels = None
        if entries:
            node_labels = []
            for i, e in enumerate(entries):
                ep = f"{path}.nodeLabels[{i}]"
                e = strict(e, ep, ("key", "values"))
                key = get_str(e, "key", ep, "")
                if not key:
                    raise ConfigError(f"{ep}.key: Required value")
                values = get_map(e, "values", ep)
                for v, t in values.items():
                    if t not in (SPOT, ON_DEMAND):
                        raise ConfigError(f"{ep}.values[{v}]: {t!r} must be \"spot\" or \"on-demand\"")
                node_labels.append((key, dict(values)))
        return cls(pod_label, node_labels)

    def to_dict(self) -> dict:
        return {"podLabel": self.pod_label,
                "nodeLabels": [{"key": k, "values": v} for k, v in self.node_labels]}


class CapacityType(ScorePlugin):
    name = "CapacityType"
    Args = CapacityTypeArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or CapacityTypeArgs(), handle)

    def node_type(self, labels: dict) -> str | None:
        for key, values in self.args.node_labels:
            v = labels.get(key)
            if v is not None:
                return values.get(v)
        return None

    def preference(self, pod) -> str | None:
        v = pod.labels.get(self.args.pod_label)
        return v if v in (SPOT, ON_DEMAND) else None

    def score(self, state, pod, node):
        pref = self.preference(pod)
        if pref is None:
            return NEUTRAL
        t = self.node_type(node.labels)
        if t is None:
            return NEUTRAL
        return MATCH if t == pref else MISMATCH

    def score_nodes(self, state, pod, nodes):
        n = len(nodes)
        pref = self.preference(pod)
        if pref is None:
            return np.full(n, NEUTRAL, dtype=np.int64)
        table, slots = nodes.table, nodes.slots
        out = np.full(n, NEUTRAL, dtype=np.int64)
        decided = np.zeros(n, dtype=bool)
        for key, values in self.args.node_labels:
            col = table.label_column(key)
            codes = col.codes[slots]
            present = (codes >= 0) & ~decided
            if not present.any():
                continue
            per_code = np.full(len(col.values) + 1, NEUTRAL, dtype=np.int64)
            for value, code in col.vocab.items():
                t = values.get(value)
                per_code[code] = NEUTRAL if t is None else (MATCH if t == pref else MISMATCH)
            out = np.where(present, per_code[codes], out)
            decided |= present
        return out
