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

from dataclasses import dataclass, field

import numpy as np

from pysched.framework import CycleState, Handle, NodeBatch, PodInfo, ScorePlugin, arg
from pysched.framework.api import ConfigError

LABEL = "node.kubernetes.io/instance-type"


@dataclass
class InstanceTypePreference:
    """One of ``exact`` (an instance type) or ``prefix`` (non-empty), and its ``score``."""
    exact: str | None = None
    prefix: str | None = None
    score: int = field(default=0, metadata=arg(required=True, ge=0, le=100))

    def validate(self, path: str) -> None:
        if (self.exact is None) == (self.prefix is None):
            raise ConfigError(f"{path}: exactly one of exact or prefix is required")
        if self.prefix is not None and not self.prefix:
            raise ConfigError(f"{path}.prefix: must not be empty")


@dataclass
class InstanceTypeArgs:
    """``label`` (empty: the default), ``preferences``, ``defaultScore`` (0..100)."""
    KIND = "InstanceTypeArgs"

    label: str = LABEL
    preferences: list[InstanceTypePreference] = field(default_factory=list)
    default_score: int = field(default=0, metadata=arg(ge=0, le=100))

    def __post_init__(self) -> None:
        self.label = self.label or LABEL


class InstanceType(ScorePlugin[InstanceTypeArgs]):
    name = "InstanceType"

    def __init__(self, args: InstanceTypeArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        prefs: list[InstanceTypePreference] = self.args.preferences
        self.exact = {p.exact: p.score for p in prefs if p.exact is not None}
        # longest first, so the longest matching prefix wins (ties: the first listed)
        self.prefixes = sorted(((p.prefix, p.score) for p in prefs if p.prefix is not None), key=lambda t: -len(t[0]))
        self.default_score: int = self.args.default_score

    def score_for(self, itype: str | None) -> int:
        if itype is None:
            return self.default_score
        if itype in self.exact:
            return self.exact[itype]
        for prefix, score in self.prefixes:
            if itype.startswith(prefix):
                return score
        return self.default_score

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        if not self.exact and not self.prefixes:
            return np.full(len(nodes), self.default_score, dtype=np.int64)
        values = nodes.label(self.args.label)
        vocabulary = values.vocabulary
        per_code = np.empty(len(vocabulary) + 1, dtype=np.int64)   # [-1]: label absent
        for code, value in enumerate(vocabulary):
            per_code[code] = self.score_for(value)
        per_code[-1] = self.default_score
        scores: np.ndarray = per_code[values.codes]
        return scores
