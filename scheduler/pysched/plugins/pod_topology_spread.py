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

Counts come from the cache's incremental pod counts (``Handle.pod_counts``) and the nodes' label
codes (``NodeBatch.label``), so a cycle costs a few vector operations, not a walk over every pod.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pysched.framework import (
    MAX_NODE_SCORE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    MatcherTerm,
    NodeBatch,
    PodInfo,
    PodMatcher,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
    encode_args,
)
from pysched.framework.api import (
    ConfigError,
    LabelSelector,
    ObjectError,
    Requirement,
    parse_label_selector,
    qualified_name_problem,
)
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.domains import domain_sums, per_node
from pysched.plugins.helper.nodeselect import has_labels_mask, pod_required_affinity_mask
from pysched.plugins.helper.taints import untolerated_mask

REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULTS: tuple[dict[str, Any], ...] = (
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


def parse_constraints(raw_list: Iterable[dict[str, Any]] | None, pod_labels: dict[str, str], action: str,
                      where: str = "spec.topologySpreadConstraints", selector_override: LabelSelector | None = None,
                      use_override: bool = False) -> list[Constraint]:
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


@dataclass
class DefaultConstraint:
    """One of ``defaultConstraints`` (a ``v1.TopologySpreadConstraint`` without a selector)."""
    max_skew: int = field(default=0, metadata=arg(bits=32))
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: dict[str, Any] | None = None   # forbidden: deduced for each pod
    min_domains: int | None = field(default=None, metadata=arg(bits=32))
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))

    def validate(self, path: str) -> None:
        if self.max_skew <= 0:
            raise ConfigError(f"{path}.maxSkew: must be greater than zero")
        if not self.topology_key:
            raise ConfigError(f"{path}.topologyKey: Required value")
        problem = qualified_name_problem(self.topology_key)
        if problem:
            raise ConfigError(f"{path}.topologyKey: Invalid value {self.topology_key!r}: {problem}")
        if self.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ConfigError(f"{path}.whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway")
        if self.label_selector is not None:
            raise ConfigError(f"{path}.labelSelector: constraint must not define a selector, "
                              "as they deduced for each pod")


@dataclass
class PodTopologySpreadArgs:
    KIND: ClassVar[str] = "PodTopologySpreadArgs"
    default_constraints: list[DefaultConstraint] = field(default_factory=list, metadata=arg(omit_empty=True))
    defaulting_type: str = field(default="System", metadata=arg(choices=("System", "List")))

    def validate(self, path: str) -> None:
        if self.defaulting_type == "System" and self.default_constraints:
            raise ConfigError(f"{path}.defaultConstraints: when .defaultingType is \"System\", "
                              "defaultConstraints must be empty")
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ConfigError(f"{path}.defaultConstraints[{i}]: Duplicate value: {pair}")
            seen.add(pair)


class _FilterState(NamedTuple):
    constraints: list[Constraint]
    dom_counts: list[np.ndarray]    # per constraint: matching pods per label code
    min_match: list[int]
    self_match: list[int]


class _ScoreConstraint(NamedTuple):
    constraint: Constraint
    matcher: PodMatcher | None      # None: the selector matches nothing
    weight: float                   # log(number of domains + 2)
    dom_counts: np.ndarray | None   # matching pods per label code; None: hostname, counted per node


class _ScoreState(NamedTuple):
    constraints: list[_ScoreConstraint]
    require_all: bool               # nodes lacking a key are ignored (score 0)


class PodTopologySpread(PreFilterPlugin[PodTopologySpreadArgs], FilterPlugin[PodTopologySpreadArgs],
                        PreScorePlugin[PodTopologySpreadArgs], ScorePlugin[PodTopologySpreadArgs], EnqueueExtensions):
    name = "PodTopologySpread"
    args: PodTopologySpreadArgs
    handle: Handle

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.system_defaulted = self.args.defaulting_type == "System"
        self.defaults: list[dict[str, Any]] = (list(SYSTEM_DEFAULTS) if self.system_defaulted else
                                               [encode_args(c) for c in self.args.default_constraints])

    # -- constraints ---------------------------------------------------------------------------

    def constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        if pod.spread_constraints:
            return parse_constraints(pod.spread_constraints, pod.labels, action)
        if not self.defaults:
            return []
        sel = self.handle.objects.default_selector(pod)
        if sel is None or sel.empty:
            return []
        return parse_constraints(self.defaults, pod.labels, action, where="defaultConstraints",
                                 selector_override=sel, use_override=True)

    @staticmethod
    def _matcher(pod: PodInfo, c: Constraint) -> PodMatcher | None:
        """Pods the constraint counts: not terminating, in the pod's namespace, matching the selector
        (an empty selector counts nothing, as upstream's ``countPodsMatchSelector``)."""
        if c.selector is None or c.selector.empty:
            return None
        return PodMatcher((MatcherTerm(frozenset((pod.namespace,)), c.selector),), skip_deleting=True)

    def _counts(self, matcher: PodMatcher | None, nodes: NodeBatch) -> np.ndarray:
        if matcher is None:
            return np.zeros(len(nodes), dtype=np.int64)
        return self.handle.pod_counts(matcher, nodes)

    @staticmethod
    def _inclusion(pod: PodInfo, cons: list[Constraint], nodes: NodeBatch) -> list[np.ndarray]:
        """Per constraint, the nodes its inclusion policies admit (nodeAffinityPolicy: Honor -> the
        pod's nodeSelector/required affinity match; nodeTaintsPolicy: Honor -> taints tolerated)."""
        aff = pod_required_affinity_mask(nodes, pod) if any(c.affinity_honor for c in cons) else None
        tol = ~untolerated_mask(nodes, pod.tolerations) if any(c.taints_honor for c in cons) else None
        out = []
        for c in cons:
            m = np.ones(len(nodes), dtype=bool)
            if c.affinity_honor and aff is not None:
                m &= aff
            if c.taints_honor and tol is not None:
                m &= tol
            out.append(m)
        return out

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        try:
            cons = self.constraints(pod, DO_NOT_SCHEDULE)
        except ObjectError as exc:
            return None, Status(Code.ERROR, f"get constraints from pod: {exc}")
        if not cons:
            return None, Status(Code.SKIP)
        has_all = has_labels_mask(nodes, [c.key for c in cons])
        dom_counts: list[np.ndarray] = []
        mins: list[int] = []
        selfs: list[int] = []
        for c, included in zip(cons, self._inclusion(pod, cons, nodes)):
            values = nodes.label(c.key)
            size = len(values.vocabulary)
            elig = has_all & included
            dom = domain_sums(values.codes, self._counts(self._matcher(pod, c), nodes), size, elig)
            present = np.bincount(values.codes[elig], minlength=size) > 0
            n_dom = int(np.count_nonzero(present))
            mn = int(dom[present].min()) if n_dom else 0
            if n_dom < c.min_domains:
                mn = 0
            dom_counts.append(dom)
            mins.append(mn)
            selfs.append(1 if (c.selector is not None and c.selector.matches(pod.labels)) else 0)
        state.write(PRE_FILTER_KEY, _FilterState(cons, dom_counts, mins, selfs))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        s: _FilterState | None = state.get(PRE_FILTER_KEY)
        n = len(nodes)
        if s is None or not s.constraints:
            return FilterResult.all_pass(n)
        decided = np.zeros(n, dtype=bool)
        missing_all = np.zeros(n, dtype=bool)
        skew_all = np.zeros(n, dtype=bool)
        for i, c in enumerate(s.constraints):
            values = nodes.label(c.key)
            missing = ~decided & (values.codes < 0)
            match = per_node(s.dom_counts[i], values)
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

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        every = self.handle.all_nodes()
        if not len(every):
            return Status(Code.SKIP)
        try:
            cons = self.constraints(pod, SCHEDULE_ANYWAY)
        except ObjectError as exc:
            return Status(Code.ERROR, f"obtaining pod's soft topology spread constraints: {exc}")
        if not cons:
            return Status(Code.SKIP)
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        keys = [c.key for c in cons]
        ignored = ~has_labels_mask(nodes, keys) if require_all else np.zeros(len(nodes), dtype=bool)
        all_ok = has_labels_mask(every, keys) if require_all else np.ones(len(every), dtype=bool)
        out = []
        for c, included in zip(cons, self._inclusion(pod, cons, every)):
            matcher = self._matcher(pod, c)
            dom: np.ndarray | None = None
            if c.key == HOSTNAME:
                size = len(nodes) - int(ignored.sum())     # pods are counted per node in Score
            else:
                # Domains: the key's values among the scored nodes ("" - no label - is one when
                # nodes lacking keys are not ignored); pods counted over every node in them.
                values = nodes.label(c.key)
                codes_f = values.codes
                absent = len(values.vocabulary)
                present = np.zeros(absent + 1, dtype=bool)
                present[np.where(codes_f < 0, absent, codes_f)[~ignored]] = True
                size = int(present.sum())
                codes_a = every.label(c.key).codes
                elig = all_ok & included & present[np.where(codes_a < 0, absent, codes_a)]
                dom = domain_sums(codes_a, self._counts(matcher, every), absent, elig)
            out.append(_ScoreConstraint(c, matcher, math.log(size + 2), dom))
        state.write(PRE_SCORE_KEY, _ScoreState(out, require_all))
        return None

    def _ignored(self, s: _ScoreState, nodes: NodeBatch) -> np.ndarray:
        if not s.require_all:
            return np.zeros(len(nodes), dtype=bool)
        return ~has_labels_mask(nodes, [sc.constraint.key for sc in s.constraints])

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        """``sum(count * log(domains + 2) + maxSkew - 1)`` over the constraints whose key the node
        has (0 for ignored nodes); NormalizeScore turns it around."""
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            return np.zeros(len(nodes), dtype=np.int64)
        total = np.zeros(len(nodes), dtype=np.float64)
        for sc in s.constraints:
            values = nodes.label(sc.constraint.key)
            if sc.dom_counts is None:
                cnt = self._counts(sc.matcher, nodes)
            else:
                cnt = per_node(sc.dom_counts, values)
            total += np.where(values.exists(), cnt * sc.weight + (sc.constraint.max_skew - 1), 0.0)
        return np.where(self._ignored(s, nodes), 0, np.floor(total + 0.5)).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> Status | None:
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            return None
        valid = ~self._ignored(s, nodes)
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

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        pod_hint, node_hint = self.schedulable_after_pod_change, self.schedulable_after_node_change
        return (ClusterEventWithHint(ClusterEvent("Pod", "Add"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Node", "Add"), node_hint),
                ClusterEventWithHint(ClusterEvent("Node", "Delete"), node_hint),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel"), node_hint),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint"), node_hint))

    # -- queueing hints (upstream's isSchedulableAfterPodChange / ...NodeChange) ---------------

    def schedulable_after_pod_change(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """A pod counts for the waiting pod's hard constraints only when bound in its namespace (1.37:
        or nominated to a node; or when it is the pod itself): added or deleted matching a
        selector, or relabelled so that a selector's verdict flips; the pod's own new tolerations
        matter with ``nodeTaintsPolicy: Honor``."""
        involved = _involved_1_37 if self.handle.kube_version >= (1, 37) else _involved
        if (new is not None and not involved(new, pod)) or (old is not None and not involved(old, pod)):
            return False
        cons = self.constraints(pod, DO_NOT_SCHEDULE)
        if new is not None and old is not None:
            if (pod.uid == new.uid and new.tolerations != old.tolerations
                    and any(c.taints_honor for c in cons)):
                return True
            if new.labels == old.labels:
                return False
            return any(_selects(c, old.labels) != _selects(c, new.labels) for c in cons)
        changed = new if new is not None else old
        return changed is not None and any(_selects(c, changed.labels) for c in cons)

    def schedulable_after_node_change(self, pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
        """A node "matches" when it has every constraint's topology key: added matching, deleted
        matching, updated so that it starts or stops matching, or - matching - with a topology
        key's value or its taints changed."""
        cons = self.constraints(pod, DO_NOT_SCHEDULE)
        was = old is not None and all(c.key in old.labels for c in cons)
        now = new is not None and all(c.key in new.labels for c in cons)
        if old is not None and new is not None:
            if was != now:
                return True
            return now and (any(old.labels.get(c.key) != new.labels.get(c.key) for c in cons)
                            or old.taints != new.taints)
        return now if new is not None else was


def _involved(other: PodInfo, pod: PodInfo) -> bool:
    """involvedInTopologySpreading, 1.35/1.36: the pod itself, or a bound pod of its namespace."""
    return other.uid == pod.uid or (bool(other.node_name) and other.namespace == pod.namespace)


def _involved_1_37(other: PodInfo, pod: PodInfo) -> bool:
    """1.37: a pod bound or nominated to a node, in the waiting pod's namespace (the waiting pod's own
    changes come through the queue's update path, upstream's TargetPod events)."""
    return other.uid == pod.uid or (bool(other.node_name or other.nominated_node) and other.namespace == pod.namespace)


def _selects(c: Constraint, labels: dict[str, str]) -> bool:
    return c.selector is not None and c.selector.matches(labels)
