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
from the cache's incremental PodCountIndex and the NodeTable's zone column.
"""

from __future__ import annotations

import numpy as np

from pysched.apis.config import ConfigError
from pysched.framework.args import get_str, get_str_list, strict
from pysched.framework.interface import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from pysched.framework.status import Code, Status
from pysched.apis.core.model import LabelSelector, ObjectError, Requirement, parse_label_selector
from pysched.framework.matchers import MatcherTerm, PodMatcher

ZONE = "topology.kubernetes.io/zone"
KEY = "AZSpread/preScore"


class AZSpreadArgs:
    def __init__(self, zone_label=ZONE, selector: LabelSelector | None = None, raw_selector=None,
                 label_keys=(), nodes_without_zone="Error"):
        self.zone_label = zone_label
        self.selector = selector
        self.raw_selector = raw_selector
        self.label_keys = list(label_keys)
        self.nodes_without_zone = nodes_without_zone

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "AZSpreadArgs":
        raw = strict(raw, path, ("zoneLabel", "labelSelector", "workloadLabelKeys", "nodesWithoutZone"))
        zone = get_str(raw, "zoneLabel", path, ZONE) or ZONE
        sel = None
        if raw.get("labelSelector") is not None:
            try:
                sel = parse_label_selector(raw["labelSelector"], f"{path}.labelSelector")
            except ObjectError as exc:
                raise ConfigError(str(exc)) from None
        keys = get_str_list(raw, "workloadLabelKeys", path)
        mode = get_str(raw, "nodesWithoutZone", path, "Error", ("Error",))
        return cls(zone, sel, raw.get("labelSelector"), keys, mode)

    def to_dict(self) -> dict:
        out = {"zoneLabel": self.zone_label, "nodesWithoutZone": self.nodes_without_zone}
        if self.raw_selector is not None:
            out["labelSelector"] = self.raw_selector
        if self.label_keys:
            out["workloadLabelKeys"] = self.label_keys
        return out


class AZSpread(PreScorePlugin, ScorePlugin):
    name = "AZSpread"
    Args = AZSpreadArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or AZSpreadArgs(), handle)

    def workload(self, pod) -> PodMatcher | None:
        a = self.args
        ns = frozenset((pod.namespace,))
        if a.selector is not None:
            return PodMatcher((MatcherTerm(ns, a.selector),))
        if a.label_keys and all(k in pod.labels for k in a.label_keys):
            sel = LabelSelector(tuple(Requirement(k, "In", frozenset((pod.labels[k],))) for k in a.label_keys))
            return PodMatcher((MatcherTerm(ns, sel),))
        if pod.owner_uid:
            return PodMatcher((), owner_uid=pod.owner_uid)
        return None

    def pre_score(self, state, pod, nodes):
        table = nodes.table
        col = table.label_column(self.args.zone_label)
        feasible_codes = col.codes[nodes.slots]
        if not (feasible_codes >= 0).any():
            return Status(Code.SKIP)  # no zones among the candidates: nothing to spread
        missing = np.flatnonzero(feasible_codes < 0)
        if len(missing):
            name = table.infos[int(nodes.slots[missing[0]])].spec.name
            return Status(Code.ERROR, f"node {name!r} has no {self.args.zone_label} label; it cannot be placed in "
                                      f"the zone snapshot (label it, or keep it out of this profile)")
        eligible = np.zeros(len(col.values), dtype=bool)
        eligible[feasible_codes] = True
        matcher = self.workload(pod)
        if matcher is None:
            counts = np.zeros(len(col.values), dtype=np.int64)
        else:
            all_slots = table.order()
            per_node = self.handle.cache.index.counts(matcher)[all_slots]
            codes = col.codes[all_slots]
            has = codes >= 0
            counts = np.bincount(codes[has], weights=per_node[has], minlength=len(col.values)).astype(np.int64)
        counts = np.where(eligible, counts, 0)
        mx = int(counts[eligible].max()) if eligible.any() else 0
        snapshot = {col.values[i]: int(counts[i]) for i in np.flatnonzero(eligible).tolist()}
        state.write(KEY, (snapshot, mx))
        return None

    def _score_count(self, count: int, mx: int) -> int:
        return MAX_NODE_SCORE if mx == 0 else MAX_NODE_SCORE * (mx - count) // mx

    def score(self, state, pod, node):
        snap = state.get(KEY)
        if snap is None:
            return MAX_NODE_SCORE
        snapshot, mx = snap
        zone = node.labels.get(self.args.zone_label)
        if zone not in snapshot:
            return 0, Status(Code.ERROR, f"node {node.name!r} is in zone {zone!r}, which is not in this cycle's "
                                         f"zone snapshot")
        return self._score_count(snapshot[zone], mx)

    def score_nodes(self, state, pod, nodes):
        snap = state.get(KEY)
        if snap is None:
            return np.full(len(nodes), MAX_NODE_SCORE, dtype=np.int64)
        snapshot, mx = snap
        col = nodes.table.label_column(self.args.zone_label)
        per_code = np.full(len(col.values) + 1, -1, dtype=np.int64)
        for zone, cnt in snapshot.items():
            per_code[col.vocab[zone]] = self._score_count(cnt, mx)
        out = per_code[col.codes[nodes.slots]]
        if (out < 0).any():
            bad = nodes.table.infos[int(nodes.slots[np.flatnonzero(out < 0)[0]])].spec.name
            from pysched.framework.types import FrameworkError
            raise FrameworkError(Status(Code.ERROR, f"node {bad!r} is not in this cycle's zone snapshot", plugin=self.name))
        return out
