"""InstanceType (Score): rank nodes by instance type, from configuration.

Scores come only from ``pluginConfig``: ``preferences`` is a list of ``{exact: <type>, score}``
or ``{prefix: <text>, score}`` entries matched against the node's ``label``
(``node.kubernetes.io/instance-type`` by default); an exact match wins, then the longest
matching prefix; other nodes (and nodes without the label) get ``defaultScore`` (0). With no
preferences every node scores ``defaultScore`` and the plugin has no effect. Example::

    args:
      preferences: [{prefix: "c5.", score: 100}, {prefix: "m5.", score: 50}, {prefix: "r5.", score: 30}]
      defaultScore: 10

Reads: the node's instance-type label (one lookup per distinct label value per cycle).
"""

from __future__ import annotations

import numpy as np

from pysched.apis.config import ConfigError
from pysched.framework.args import get_int, get_list, get_str, strict
from pysched.framework.interface import ScorePlugin

LABEL = "node.kubernetes.io/instance-type"


class InstanceTypeArgs:
    def __init__(self, label=LABEL, exact=None, prefixes=None, default_score=0):
        self.label = label
        self.exact = exact or {}
        self.prefixes = prefixes or []   # (prefix, score), longest first
        self.default_score = default_score

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "InstanceTypeArgs":
        raw = strict(raw, path, ("label", "preferences", "defaultScore"))
        label = get_str(raw, "label", path, LABEL) or LABEL
        default = get_int(raw, "defaultScore", path, 0, lo=0, hi=100)
        exact: dict[str, int] = {}
        prefixes: list[tuple[str, int]] = []
        for i, p in enumerate(get_list(raw, "preferences", path)):
            pp = f"{path}.preferences[{i}]"
            p = strict(p, pp, ("exact", "prefix", "score"))
            if "score" not in p:
                raise ConfigError(f"{pp}.score: Required value")
            score = get_int(p, "score", pp, 0, lo=0, hi=100)
            if ("exact" in p) == ("prefix" in p):
                raise ConfigError(f"{pp}: exactly one of exact or prefix is required")
            if "exact" in p:
                exact[get_str(p, "exact", pp, "")] = score
            else:
                pref = get_str(p, "prefix", pp, "")
                if not pref:
                    raise ConfigError(f"{pp}.prefix: must not be empty")
                prefixes.append((pref, score))
        prefixes.sort(key=lambda t: -len(t[0]))
        return cls(label, exact, prefixes, default)

    def to_dict(self) -> dict:
        prefs = [{"exact": k, "score": v} for k, v in self.exact.items()]
        prefs += [{"prefix": k, "score": v} for k, v in self.prefixes]
        return {"label": self.label, "preferences": prefs, "defaultScore": self.default_score}


class InstanceType(ScorePlugin):
    name = "InstanceType"
    Args = InstanceTypeArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or InstanceTypeArgs(), handle)

    def score_for(self, itype: str | None) -> int:
        a = self.args
        if itype is None:
            return a.default_score
        if itype in a.exact:
            return a.exact[itype]
        for prefix, score in a.prefixes:
            if itype.startswith(prefix):
                return score
        return a.default_score

    def score(self, state, pod, node):
        return self.score_for(node.labels.get(self.args.label))

    def score_nodes(self, state, pod, nodes):
        a = self.args
        if not a.exact and not a.prefixes:
            return np.full(len(nodes), a.default_score, dtype=np.int64)
        col = nodes.table.label_column(a.label)
        per_code = np.empty(len(col.values) + 1, dtype=np.int64)
        for value, code in col.vocab.items():
            per_code[code] = self.score_for(value)
        per_code[-1] = a.default_score
        return per_code[col.codes[nodes.slots]]
