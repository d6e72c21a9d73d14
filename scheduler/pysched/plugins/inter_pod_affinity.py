"""InterPodAffinity (PreFilter, Filter, PreScore, Score): pod affinity and anti-affinity.

Filter, as upstream, in this order:

1. required **affinity**: for every term the node must carry the term's topology key and its
   domain must hold at least one existing pod matching *all* the pod's required affinity terms -
   unless no such pod exists anywhere and the pod matches its own terms (the first pod of a
   group). Failure: ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable).
2. required **anti-affinity**: no pod matching a term in the node's domain for that term's key.
   Failure: ``node(s) didn't match pod anti-affinity rules`` (Unschedulable).
3. **existing pods' anti-affinity**: no existing pod whose required anti-affinity term matches
   this pod (namespaceSelector evaluated against this pod's namespace labels) may sit in the same
   domain. Failure: ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable).

A term covers the pods in its ``namespaces`` (default: the declaring pod's namespace) plus the
namespaces its ``namespaceSelector`` selects (``{}`` = all). Score: per topology domain, the
weights of the pod's preferred terms times the matching pods there (anti-affinity negative), plus
``hardPodAffinityWeight`` for existing pods' required affinity terms and their preferred terms
that match this pod; normalised to 0-100 between the lowest and highest node.

Reads, through the Handle: matching pods per node (``pod_counts``, the cache's incremental
PodCountIndex), existing pods per topology domain by the distinct terms they declare
(``existing_term_domains``, the cache's TermIndex), node label codes (``NodeBatch.label``) and
namespace labels (``objects``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

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
)
from pysched.framework.affinity import AffinityTerm
from pysched.framework.features import EXISTING_ANTI_AFFINITY_DELETE_HINT
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.domains import domain_sums, per_node

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
PRE_FILTER_KEY = "InterPodAffinity/preFilter"
PRE_SCORE_KEY = "InterPodAffinity/preScore"


@dataclass
class InterPodAffinityArgs:
    KIND: ClassVar[str] = "InterPodAffinityArgs"
    hard_pod_affinity_weight: int = field(default=1, metadata=arg(ge=0, le=100, bits=32))
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass
class _State:
    aff_terms: list[AffinityTerm]       # the pod's required affinity terms
    aff_dom: list[np.ndarray]           # per term: pods matching all of them, per domain code
    any_match: bool                     # some pod matches all the terms somewhere
    self_ok: bool                       # the pod matches its own terms (first pod of a group)
    anti_terms: list[AffinityTerm]      # the pod's required anti-affinity terms
    anti_dom: list[np.ndarray]          # per term: matching pods per domain code
    blocked: dict[str, np.ndarray]      # topology key -> domain codes where an existing pod's
                                        # required anti-affinity term matches this pod


class InterPodAffinity(PreFilterPlugin[InterPodAffinityArgs], FilterPlugin[InterPodAffinityArgs],
                       PreScorePlugin[InterPodAffinityArgs], ScorePlugin[InterPodAffinityArgs], EnqueueExtensions):
    name = "InterPodAffinity"
    args: InterPodAffinityArgs
    handle: Handle

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        # 1.37's hint (any-term matching, nominated pods count as placed, the deleted pod's own
        # anti-affinity, the waiting pod's own label change); 1.35/1.36's otherwise.
        self.hints_1_37 = handle.kube_version >= (1, 37)
        self.existing_anti_affinity_delete_hint = EXISTING_ANTI_AFFINITY_DELETE_HINT in handle.feature_gates

    # -- helpers -------------------------------------------------------------------------------

    def _resolve(self, t: AffinityTerm) -> frozenset[str] | None:
        return t.resolved_namespaces(self.handle.objects.namespaces_matching)

    def _counts(self, terms: list[AffinityTerm], nodes: NodeBatch) -> np.ndarray:
        """Pods matching every one of ``terms`` on each node of ``nodes``."""
        matcher_terms = []
        for t in terms:
            if t.selector is None:   # a nil selector matches no pod
                return np.zeros(len(nodes), dtype=np.int64)
            matcher_terms.append(MatcherTerm(self._resolve(t), t.selector))
        return self.handle.pod_counts(PodMatcher(tuple(matcher_terms)), nodes)

    @staticmethod
    def _domain_counts(nodes: NodeBatch, key: str, counts: np.ndarray) -> np.ndarray:
        values = nodes.label(key)
        return domain_sums(values.codes, counts, len(values.vocabulary))

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        terms = pod.affinity_terms
        ns_labels = self.handle.objects.namespace_labels(pod.namespace)
        # Existing pods' required anti-affinity: each distinct term is matched once against this
        # pod; the domains holding a pod that declares a matching term are blocked.
        blocked: dict[str, np.ndarray] = {}
        for t, _, dom in self.handle.existing_term_domains("requiredAntiAffinity",
                                                           lambda t: t.matches(pod, ns_labels), pod.labels):
            b = blocked.get(t.topology_key)
            if b is None or len(b) < len(dom):
                grown = np.zeros(len(dom), dtype=bool)
                if b is not None:
                    grown[: len(b)] = b
                blocked[t.topology_key] = b = grown
            b[: len(dom)] |= dom > 0
        req, anti = list(terms.required_affinity), list(terms.required_anti_affinity)
        if not blocked and not req and not anti:
            return None, Status(Code.SKIP)
        aff_dom = []
        any_match = False
        if req:
            counts = self._counts(req, nodes)
            for t in req:
                dom = self._domain_counts(nodes, t.topology_key, counts)
                aff_dom.append(dom)
                if dom.sum() > 0:
                    any_match = True
        self_ok = bool(req) and all(
            (ns is None or pod.namespace in ns) and t.selector is not None and t.selector.matches(pod.labels)
            for t, ns in ((t, self._resolve(t)) for t in req))
        anti_dom = [self._domain_counts(nodes, t.topology_key, self._counts([t], nodes)) for t in anti]
        state.write(PRE_FILTER_KEY, _State(req, aff_dom, any_match, self_ok, anti, anti_dom, blocked))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        s: _State | None = state.get(PRE_FILTER_KEY)
        n = len(nodes)
        if s is None:
            return FilterResult.all_pass(n)
        aff_fail = np.zeros(n, dtype=bool)
        if s.aff_terms:
            all_has = np.ones(n, dtype=bool)
            exist = np.ones(n, dtype=bool)
            for t, dom in zip(s.aff_terms, s.aff_dom):
                values = nodes.label(t.topology_key)
                all_has &= values.exists()
                exist &= per_node(dom, values) > 0
            ok = all_has & (exist | (not s.any_match and s.self_ok))
            aff_fail = ~ok
        anti_fail = np.zeros(n, dtype=bool)
        for t, dom in zip(s.anti_terms, s.anti_dom):
            anti_fail |= per_node(dom, nodes.label(t.topology_key)) > 0
        anti_fail &= ~aff_fail
        ex_fail = np.zeros(n, dtype=bool)
        for key, b in s.blocked.items():
            ex_fail |= per_node(b, nodes.label(key), absent=False)
        ex_fail &= ~aff_fail & ~anti_fail
        failures = []
        if aff_fail.any():
            failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_AFFINITY, aff_fail))
        if anti_fail.any():
            failures.append((Code.UNSCHEDULABLE, REASON_ANTI_AFFINITY, anti_fail))
        if ex_fail.any():
            failures.append((Code.UNSCHEDULABLE, REASON_EXISTING_ANTI, ex_fail))
        return FilterResult(~(aff_fail | anti_fail | ex_fail), failures)

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        terms = pod.affinity_terms
        has_pref = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_pref:
            return Status(Code.SKIP)
        every = self.handle.all_nodes()
        topo: dict[str, np.ndarray] = {}   # topology key -> score per domain code

        def add(key: str, weight: int, dom: np.ndarray) -> None:
            arr = topo.get(key)
            if arr is None or len(arr) < len(dom):
                grown = np.zeros(len(dom), dtype=np.int64)
                if arr is not None:
                    grown[: len(arr)] = arr
                topo[key] = arr = grown
            arr[: len(dom)] += weight * dom

        touched = False
        for sign, wterms in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for wt in wterms:
                dom = self._domain_counts(every, wt.term.topology_key, self._counts([wt.term], every))
                if dom.sum() > 0:
                    touched = True
                    add(wt.term.topology_key, sign * wt.weight, dom)
        # Existing pods' terms that match this pod, each distinct term evaluated once.
        ns_labels = self.handle.objects.namespace_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        existing: list[tuple[AffinityTerm, int, np.ndarray]] = []
        if hard > 0:
            existing += [(t, hard, dom) for t, _, dom in self.handle.existing_term_domains(
                "requiredAffinity", lambda t: t.matches(pod, ns_labels), pod.labels)]
        if not self.args.ignore_preferred_terms_of_existing_pods:
            existing += self.handle.existing_term_domains("preferred", lambda t: t.matches(pod, ns_labels),
                                                          pod.labels)
        for t, w, dom in existing:
            touched = True
            add(t.topology_key, w, dom)
        if not touched:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, topo)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        topo: dict[str, np.ndarray] = state.get(PRE_SCORE_KEY) or {}
        out = np.zeros(len(nodes), dtype=np.int64)
        for key, arr in topo.items():
            out += per_node(arr, nodes.label(key))
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> Status | None:
        if not state.get(PRE_SCORE_KEY) or not len(scores):
            return None
        mn, mx = int(scores.min()), int(scores.max())
        diff = mx - mn
        if diff > 0:
            scores[:] = (MAX_NODE_SCORE * ((scores - mn) / diff)).astype(np.int64)
        else:
            scores[:] = 0
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        pod_hint = self.schedulable_after_pod_change
        node_hint = _schedulable_after_node_change
        return (ClusterEventWithHint(ClusterEvent("Pod", "Add"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete"), pod_hint),
                ClusterEventWithHint(ClusterEvent("Node", "Add"), node_hint),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel"), node_hint))
        # 1.37's TargetPod/UpdatePodLabel (the waiting pod's own labels changed: Queue) needs no
        # registration here: the queue requeues a waiting pod on any change of its own spec or
        # labels (``SchedulingQueue.update``).

    # -- queueing hints ------------------------------------------------------------------------

    def schedulable_after_pod_change(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """Upstream's hint over the waiting pod's own required terms: a placed pod added that
        matches all its affinity terms, updated to start matching them or to stop matching its
        anti-affinity terms, or deleted while matching them. 1.35/1.36 (isSchedulableAfterPodChange):
        only bound pods count, and "matching the anti-affinity terms" means all of them. 1.37
        (isSchedulableAfterAssignedPodChange): pods nominated to a node count as placed, matching
        *any* anti-affinity term is enough, and a deleted pod whose own required anti-affinity
        matches the waiting pod requeues it too. Before 1.37 that last case is pysched's
        ``PyschedExistingAntiAffinityDeleteHint`` feature gate (docs/queueing-hints.md)."""
        if self.hints_1_37:
            if (new is not None and not new.node_name and not new.nominated_node) or (
                    old is not None and not old.node_name and not old.nominated_node):
                return False
            anti_matches = _matches_any
        else:
            if (new is not None and not new.node_name) or (old is not None and not old.node_name):
                return False
            anti_matches = _matches_all
        terms = pod.affinity_terms
        if new is not None and old is not None:
            return ((not _matches_all(terms.required_affinity, old) and _matches_all(terms.required_affinity, new))
                    or (anti_matches(terms.required_anti_affinity, old)
                        and not anti_matches(terms.required_anti_affinity, new)))
        if new is not None:
            return _matches_all(terms.required_affinity, new)
        if old is None:
            return False
        if anti_matches(terms.required_anti_affinity, old):
            return True
        if self.hints_1_37:   # upstream passes no namespace labels here
            return any(t.matches(pod, None) for t in old.affinity_terms.required_anti_affinity)
        if self.existing_anti_affinity_delete_hint and old.affinity_terms.required_anti_affinity:
            ns_labels = self.handle.objects.namespace_labels(pod.namespace)
            return any(t.matches(pod, ns_labels) for t in old.affinity_terms.required_anti_affinity)
        return False


def _matches_any(terms: tuple[AffinityTerm, ...], pod: PodInfo) -> bool:
    """podMatchesAnyAffinityTerms (1.37): false without terms."""
    return any(t.matches(pod, None) for t in terms)


def _matches_all(terms: tuple[AffinityTerm, ...], pod: PodInfo) -> bool:
    """podMatchesAllAffinityTerms: false without terms; namespace selectors see no labels (upstream
    merged the incoming pod's selector into its namespaces and passes none)."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def _schedulable_after_node_change(pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
    """Upstream's isSchedulableAfterNodeChange: for an affinity term, a node added with its
    topology key, or updated to gain the key or change its value; for an anti-affinity term, any
    node added, or one updated to lose the key or change its value."""
    if new is None:
        return False
    terms = pod.affinity_terms
    for t in terms.required_affinity:
        key = t.topology_key
        if old is None:
            if key in new.labels:
                return True
            continue
        if key in new.labels and (key not in old.labels or old.labels[key] != new.labels[key]):
            return True
    for t in terms.required_anti_affinity:
        key = t.topology_key
        if old is None:
            return True
        if key in old.labels and (key not in new.labels or old.labels[key] != new.labels[key]):
            return True
    return False
