"""AZSpread (PreScore, Score): spread a workload's pods evenly over the eligible zones.

Once per scheduling cycle (PreScore) one snapshot is taken: the zones of the nodes that passed
the filters (``topology.kubernetes.io/zone``; ``zoneLabel`` to change) are the eligible zones,
empty ones included, and for each the number of the workload's pods on nodes in that zone -
bound and assumed (chosen but not yet bound) alike, not only Running ones. A node then scores
``100 * (max - count(zone)) / max``, or 100 when ``max`` is 0.

The workload is, in order: the pods matching ``labelSelector`` (pluginConfig) in the pod's
namespace; else the pods sharing the values of ``workloadLabelKeys``; else the pods of the same
controller (owner UID). A pod that belongs to none is alone: every node scores 100.

A feasible node with no zone label is an error, not a guess: the cycle fails with a message that
names the node (``nodesWithoutZone: Error``, default) - unless no feasible node has a zone at
all, where there is nothing to spread and the plugin skips. No API calls are made: counts come
from the cache's incremental pod counts (``Handle.pod_counts``) and the nodes' zone label codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pysched.framework import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    FrameworkError,
    Handle,
    MatcherTerm,
    NodeBatch,
    PodInfo,
    PodMatcher,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import ConfigError, LabelSelector, ObjectError, Requirement, parse_label_selector

ZONE = "topology.kubernetes.io/zone"
KEY = "AZSpread/preScore"


@dataclass
class AZSpreadArgs:
    KIND: ClassVar[str] = "AZSpreadArgs"
    zone_label: str = ZONE                          # "" means the default
    label_selector: dict[str, Any] | None = None    # a metav1.LabelSelector
    workload_label_keys: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    nodes_without_zone: str = field(default="Error", metadata=arg(choices=("Error",)))

    def __post_init__(self) -> None:
        self.zone_label = self.zone_label or ZONE

    def validate(self, path: str) -> None:
        try:
            parse_label_selector(self.label_selector, f"{path}.labelSelector")
        except ObjectError as exc:
            raise ConfigError(str(exc)) from None


class _Snapshot(NamedTuple):
    scores: np.ndarray   # per zone code: 100 * (max - count) / max; -1: not an eligible zone


class AZSpread(PreScorePlugin[AZSpreadArgs], ScorePlugin[AZSpreadArgs]):
    name = "AZSpread"
    args: AZSpreadArgs
    handle: Handle

    def __init__(self, args: AZSpreadArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.selector = parse_label_selector(self.args.label_selector, "labelSelector")

    def workload(self, pod: PodInfo) -> PodMatcher | None:
        a = self.args
        ns = frozenset((pod.namespace,))
        if self.selector is not None:
            return PodMatcher((MatcherTerm(ns, self.selector),))
        if a.workload_label_keys and all(k in pod.labels for k in a.workload_label_keys):
            sel = LabelSelector(tuple(Requirement(k, "In", frozenset((pod.labels[k],)))
                                      for k in a.workload_label_keys))
            return PodMatcher((MatcherTerm(ns, sel),))
        if pod.owner_uid:
            return PodMatcher((), owner_uid=pod.owner_uid)
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        zones = nodes.label(self.args.zone_label)
        feasible_codes = zones.codes
        if not (feasible_codes >= 0).any():
            return Status(Code.SKIP)  # no zones among the candidates: nothing to spread
        if (feasible_codes < 0).any():
            name = nodes.subset(feasible_codes < 0).names[0]
            return Status(Code.ERROR, f"node {name!r} has no {self.args.zone_label} label; it cannot be placed in "
                                      f"the zone snapshot (label it, or keep it out of this profile)")
        size = len(zones.vocabulary)
        eligible = np.zeros(size, dtype=bool)
        eligible[feasible_codes] = True
        matcher = self.workload(pod)
        if matcher is None:
            counts = np.zeros(size, dtype=np.int64)
        else:
            every = self.handle.all_nodes()
            counts = every.label(self.args.zone_label).totals(self.handle.pod_counts(matcher, every))
        counts = np.where(eligible, counts[:size], -1)
        mx = int(counts.max())
        scores = np.full(size, MAX_NODE_SCORE, dtype=np.int64) if mx == 0 else MAX_NODE_SCORE * (mx - counts) // mx
        state.write(KEY, _Snapshot(np.where(eligible, scores, -1)))
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        """``100 * (max - count(zone)) / max`` (100 when max is 0) from PreScore's zone snapshot."""
        snap: _Snapshot | None = state.get(KEY)
        if snap is None:
            return np.full(len(nodes), MAX_NODE_SCORE, dtype=np.int64)
        scores = nodes.label(self.args.zone_label).lookup(snap.scores, absent=-1)
        if (scores < 0).any():
            bad = nodes.subset(scores < 0).names[0]
            raise FrameworkError(Status(Code.ERROR, f"node {bad!r} is not in this cycle's zone snapshot",
                                        plugin=self.name))
        return scores
