"""PodTopologySpread (PreFilter, Filter, PreScore, Score): spread matching pods across domains.

For each ``topologySpreadConstraint`` (the pod's own, or - when it has none - the default
constraints) pods matching ``labelSelector`` (plus ``matchLabelKeys`` taken from the pod's labels)
in the pod's namespace, not terminating, bound or assumed, are counted per topology domain over
the nodes that carry every constraint's key and pass the inclusion policies
(``nodeAffinityPolicy`` Honor by default: nodes matching the pod's nodeSelector/required
affinity; ``nodeTaintsPolicy`` Ignore by default, Honor: nodes whose taints the pod tolerates).

Filter (``whenUnsatisfiable: DoNotSchedule``): a node without the key fails with
``node(s) didn't match pod topology spread constraints (missing required label)``
(UnschedulableAndUnresolvable); otherwise ``count(domain) + self - min(domains) > maxSkew``
fails with ``node(s) didn't match pod topology spread constraints`` (Unschedulable), where the
minimum is 0 while fewer than ``minDomains`` domains exist.

Score (``ScheduleAnyway``, or kube-scheduler's system defaults - hostname maxSkew 3, zone
maxSkew 5 - over the pods of the same Service/ReplicaSet/StatefulSet/ReplicationController):
``sum(count * log(domains + 2) + maxSkew - 1)`` per node, normalised so fewer matching pods score
higher. Nodes lacking a key are ignored (score 0) unless only system defaults apply.

Counts come from the cache's incremental PodCountIndex and the NodeTable's label columns, so a
cycle costs a few vector operations, not a walk over every pod.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pysched.apis.core.names import qualified_name_problem
from pysched.apis.config import ConfigError
from pysched.framework.args import get_list, get_str, strict
from pysched.framework.interface import (MAX_NODE_SCORE, ClusterEvent, ClusterEventWithHint,
                                           EnqueueExtensions, FilterPlugin, FilterResult,
                                           PreFilterPlugin, PreScorePlugin, ScorePlugin)
from pysched.framework import NodeBatch
from pysched.framework.status import Code, Status
from pysched.apis.core.model import LabelSelector, ObjectError, Requirement, parse_label_selector
from pysched.plugins.helper.nodeselect import has_labels_mask, pod_required_affinity_mask
from pysched.framework.matchers import MatcherTerm, PodMatcher

from pysched.plugins.helper.taints import untolerated_mask

REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULTS = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)
PRE_FILTER_KEY = "PodTopologySpread/preFilter"
PRE_SCORE_KEY = "PodTopologySpread/preScore"


class Constraint(NamedTuple):
    max_skew: int
    key: str
    selector: LabelSelector | None   # None: matches nothing
    min_domains: int
    affinity_honor: bool
    taints_honor: bool


def parse_constraints(raw_list, pod_labels: dict, action: str, where: str = "spec.topologySpreadConstraints",
                      selector_override: LabelSelector | None = None, use_override: bool = False) -> list[Constraint]:
    out = []
    for i, c in enumerate(raw_list or ()):
        if c.get("whenUnsatisfiable") != action:
            continue
        if use_override:
            sel = selector_override
        else:
            sel = parse_label_selector(c.get("labelSelector"), f"{where}[{i}].labelSelector")
            keys = c.get("matchLabelKeys") or ()
            if keys and sel is not None:
                extra = tuple(Requirement(k, "In", frozenset((pod_labels[k],))) for k in keys if k in pod_labels)
                if extra:
                    sel = LabelSelector(extra + sel.requirements)
        out.append(Constraint(int(c.get("maxSkew") or 0), c.get("topologyKey") or "", sel,
                              int(c.get("minDomains") or 1),
                              (c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                              (c.get("nodeTaintsPolicy") or "Ignore") == "Honor"))
    return out


class PodTopologySpreadArgs:
    def __init__(self, defaulting_type: str = "System", default_constraints: list[dict] | None = None):
        self.defaulting_type = defaulting_type
        self.default_constraints = list(default_constraints or [])

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "PodTopologySpreadArgs":
        raw = strict(raw, path, ("defaultConstraints", "defaultingType"), kind="PodTopologySpreadArgs")
        dt = get_str(raw, "defaultingType", path, "System", ("System", "List"))
        dcs = get_list(raw, "defaultConstraints", path)
        if dt == "System" and dcs:
            raise ConfigError(f"{path}.defaultConstraints: when .defaultingType is \"System\", "
                              "defaultConstraints must be empty")
        seen = set()
        for i, c in enumerate(dcs):
            cp = f"{path}.defaultConstraints[{i}]"
            strict(c, cp, ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                           "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys"))
            if not isinstance(c.get("maxSkew"), int) or c["maxSkew"] <= 0:
                raise ConfigError(f"{cp}.maxSkew: must be greater than zero")
            if not c.get("topologyKey"):
                raise ConfigError(f"{cp}.topologyKey: Required value")
            problem = qualified_name_problem(c["topologyKey"]) if isinstance(c["topologyKey"], str) else "expected a string"
            if problem:
                raise ConfigError(f"{cp}.topologyKey: Invalid value {c['topologyKey']!r}: {problem}")
            if c.get("whenUnsatisfiable") not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise ConfigError(f"{cp}.whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway")
            if c.get("labelSelector") is not None:
                raise ConfigError(f"{cp}.labelSelector: constraint must not define a selector, "
                                  "as they deduced for each pod")
            pair = (c["topologyKey"], c["whenUnsatisfiable"])
            if pair in seen:
                raise ConfigError(f"{cp}: Duplicate value: {pair}")
            seen.add(pair)
        return cls(dt, dcs)

    def to_dict(self) -> dict:
        out = {"defaultingType": self.defaulting_type}
        if self.default_constraints:
            out["defaultConstraints"] = self.default_constraints
        return out


class _FilterState(NamedTuple):
    constraints: list[Constraint]
    dom_counts: list[np.ndarray]    # per constraint: matching pods per label code
    min_match: list[int]
    self_match: list[int]


class PodTopologySpread(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "PodTopologySpread"
    Args = PodTopologySpreadArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or PodTopologySpreadArgs(), handle)
        self.system_defaulted = self.args.defaulting_type == "System"
        self.defaults = list(SYSTEM_DEFAULTS) if self.system_defaulted else self.args.default_constraints

    # -- constraints ---------------------------------------------------------------------------

    def constraints(self, pod, action: str) -> list[Constraint]:
        if pod.spread_constraints:
            return parse_constraints(pod.spread_constraints, pod.labels, action)
        if not self.defaults:
            return []
        objects = getattr(self.handle, "objects", None)
        sel = objects.default_selector(pod) if objects is not None else None
        if sel is None or sel.empty:
            return []
        return parse_constraints(self.defaults, pod.labels, action, where="defaultConstraints",
                                 selector_override=sel, use_override=True)

    def _counts(self, pod, c: Constraint, slots: np.ndarray) -> np.ndarray:
        if c.selector is None or c.selector.empty:
            return np.zeros(len(slots), dtype=np.int64)
        m = PodMatcher((MatcherTerm(frozenset((pod.namespace,)), c.selector),), skip_deleting=True)
        return self.handle.cache.index.counts(m)[slots]

    def _included(self, pod, c: Constraint, table, slots, aff_mask, untol) -> np.ndarray:
        m = np.ones(len(slots), dtype=bool)
        if c.affinity_honor:
            m &= aff_mask
        if c.taints_honor:
            m &= ~untol
        return m

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state, pod, nodes):
        try:
            cons = self.constraints(pod, DO_NOT_SCHEDULE)
        except ObjectError as exc:
            return None, Status(Code.ERROR, f"get constraints from pod: {exc}")
        if not cons:
            return None, Status(Code.SKIP)
        table, slots = nodes.table, nodes.slots
        has_all = has_labels_mask(nodes, [c.key for c in cons])
        aff = pod_required_affinity_mask(nodes, pod)
        untol = untolerated_mask(nodes, pod.tolerations)
        dom_counts, mins, selfs = [], [], []
        for c in cons:
            col = table.label_column(c.key)
            codes = col.codes[slots]
            elig = has_all & self._included(pod, c, table, slots, aff, untol)
            counts = self._counts(pod, c, slots)
            size = len(col.values)
            dom = np.bincount(codes[elig], weights=counts[elig], minlength=size).astype(np.int64)
            present = np.bincount(codes[elig], minlength=size) > 0
            n_dom = int(np.count_nonzero(present))
            mn = int(dom[present].min()) if n_dom else 0
            if n_dom < c.min_domains:
                mn = 0
            dom_counts.append(dom)
            mins.append(mn)
            selfs.append(1 if (c.selector is not None and c.selector.matches(pod.labels)) else 0)
        state.write(PRE_FILTER_KEY, _FilterState(cons, dom_counts, mins, selfs))
        return None, None

    def filter(self, state, pod, node):
        s: _FilterState | None = state.get(PRE_FILTER_KEY)
        if s is None or not s.constraints:
            return None
        table = self.handle.cache.table
        for i, c in enumerate(s.constraints):
            val = node.labels.get(c.key)
            if val is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_MISSING_LABEL)
            code = table.label_column(c.key).vocab.get(val, -1)
            dom = s.dom_counts[i]
            match = int(dom[code]) if 0 <= code < len(dom) else 0
            if match + s.self_match[i] - s.min_match[i] > c.max_skew:
                return Status(Code.UNSCHEDULABLE, REASON)
        return None

    def filter_nodes(self, state, pod, nodes):
        s: _FilterState | None = state.get(PRE_FILTER_KEY)
        n = len(nodes)
        if s is None or not s.constraints:
            return FilterResult.all_pass(n)
        table, slots = nodes.table, nodes.slots
        decided = np.zeros(n, dtype=bool)
        missing_all = np.zeros(n, dtype=bool)
        skew_all = np.zeros(n, dtype=bool)
        for i, c in enumerate(s.constraints):
            codes = table.label_column(c.key).codes[slots]
            missing = ~decided & (codes < 0)
            dom = s.dom_counts[i]
            safe = np.clip(codes, 0, max(len(dom) - 1, 0))
            match = np.where((codes >= 0) & (codes < len(dom)), dom[safe] if len(dom) else 0, 0)
            skew = ~decided & ~missing & (match + s.self_match[i] - s.min_match[i] > c.max_skew)
            missing_all |= missing
            skew_all |= skew
            decided |= missing | skew
        failures = []
        if missing_all.any():
            failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_MISSING_LABEL, missing_all))
        if skew_all.any():
            failures.append((Code.UNSCHEDULABLE, REASON, skew_all))
        return FilterResult(~decided, failures)

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state, pod, nodes):
        table = self.handle.cache.table
        if not table.count:
            return Status(Code.SKIP)
        try:
            cons = self.constraints(pod, SCHEDULE_ANYWAY)
        except ObjectError as exc:
            return Status(Code.ERROR, f"obtaining pod's soft topology spread constraints: {exc}")
        if not cons:
            return Status(Code.SKIP)
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        filt = nodes.slots
        ignored = ~has_labels_mask(nodes, [c.key for c in cons]) if require_all else np.zeros(len(filt), bool)
        every = NodeBatch(table, table.order())
        all_slots = every.slots
        all_ok = has_labels_mask(every, [c.key for c in cons]) if require_all else np.ones(len(all_slots), bool)
        aff = pod_required_affinity_mask(every, pod)
        untol = untolerated_mask(every, pod.tolerations)
        score = np.zeros(len(filt), dtype=np.float64)
        for c in cons:
            col = table.label_column(c.key)
            buckets = len(col.values) + 1  # last bucket: label absent ("" value)
            codes_f = col.codes[filt]
            bf = np.where(codes_f < 0, buckets - 1, codes_f)
            has_key_f = codes_f >= 0
            if c.key == HOSTNAME:
                size = len(filt) - int(ignored.sum())
                cnt = self._counts(pod, c, filt)
            else:
                present = np.zeros(buckets, dtype=bool)
                present[bf[~ignored]] = True
                size = int(present.sum())
                codes_a = col.codes[all_slots]
                ba = np.where(codes_a < 0, buckets - 1, codes_a)
                elig = all_ok & self._included(pod, c, table, all_slots, aff, untol) & present[ba]
                counts_a = self._counts(pod, c, all_slots)
                dom = np.bincount(ba[elig], weights=counts_a[elig], minlength=buckets)
                cnt = dom[bf]
            w = math.log(size + 2)
            score += np.where(has_key_f, cnt * w + (c.max_skew - 1), 0.0)
        raw = np.where(ignored, 0, np.floor(score + 0.5)).astype(np.int64)
        state.write(PRE_SCORE_KEY, (filt, raw, ignored))
        return None

    def _pre(self, state, nodes):
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return None
        filt, raw, ignored = s
        if len(filt) == len(nodes.slots) and np.array_equal(filt, nodes.slots):
            return raw, ignored
        pos = {int(x): i for i, x in enumerate(filt.tolist())}
        idx = np.array([pos.get(int(x), -1) for x in nodes.slots.tolist()], dtype=np.int64)
        return np.where(idx >= 0, raw[idx], 0), np.where(idx >= 0, ignored[idx], True)

    def score_nodes(self, state, pod, nodes):
        got = self._pre(state, nodes)
        return np.zeros(len(nodes), dtype=np.int64) if got is None else got[0].copy()

    def score(self, state, pod, node):
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return 0
        filt, raw, _ = s
        hits = np.flatnonzero(filt == node.slot)
        return int(raw[hits[0]]) if len(hits) else 0

    def normalize_score(self, state, pod, nodes, scores):
        got = self._pre(state, nodes)
        if got is None:
            return None
        _, ignored = got
        valid = ~ignored
        if not valid.any():
            scores[:] = 0
            return None
        mn = int(scores[valid].min())
        mx = int(scores[valid].max())
        if mx == 0:
            scores[:] = np.where(valid, MAX_NODE_SCORE, 0)
            return None
        scores[:] = np.where(valid, MAX_NODE_SCORE * (mx + mn - scores) // mx, 0)
        return None

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Pod", "Add")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration")),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
                ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "Delete")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")))
