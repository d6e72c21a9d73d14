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

Reads: the cache's PodCountIndex (matching pods per node, incremental), its TermIndex (existing
pods per node by the distinct terms they declare), the NodeTable label columns, namespace labels
from the ObjectStore.
"""

from __future__ import annotations

import numpy as np

from pysched.framework.args import get_bool, get_int, strict
from pysched.framework.interface import (MAX_NODE_SCORE, ClusterEvent, ClusterEventWithHint,
                                           EnqueueExtensions, FilterPlugin, FilterResult,
                                           PreFilterPlugin, PreScorePlugin, ScorePlugin)
from pysched.framework.status import Code, Status
from pysched.framework.affinity import AffinityTerm
from pysched.framework.matchers import MatcherTerm, PodMatcher
from pysched.backend.cache.termindex import domain_counts

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
PRE_FILTER_KEY = "InterPodAffinity/preFilter"
PRE_SCORE_KEY = "InterPodAffinity/preScore"


class InterPodAffinityArgs:
    def __init__(self, hard_pod_affinity_weight: int = 1, ignore_preferred_terms_of_existing_pods: bool = False):
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "InterPodAffinityArgs":
        raw = strict(raw, path, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"),
                     kind="InterPodAffinityArgs")
        return cls(get_int(raw, "hardPodAffinityWeight", path, 1, lo=0, hi=100),
                   get_bool(raw, "ignorePreferredTermsOfExistingPods", path, False))

    def to_dict(self) -> dict:
        return {"hardPodAffinityWeight": self.hard_pod_affinity_weight,
                "ignorePreferredTermsOfExistingPods": self.ignore_preferred_terms_of_existing_pods}


class _State:
    __slots__ = ("aff_terms", "aff_dom", "any_match", "self_ok", "anti_terms", "anti_dom", "blocked")


class InterPodAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "InterPodAffinity"
    Args = InterPodAffinityArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or InterPodAffinityArgs(), handle)

    # -- helpers -------------------------------------------------------------------------------

    def _ns_labels(self, ns: str) -> dict:
        objects = getattr(self.handle, "objects", None)
        return objects.namespace_labels(ns) if objects is not None else {}

    def _resolve(self, t: AffinityTerm) -> frozenset | None:
        objects = getattr(self.handle, "objects", None)
        return t.resolved_namespaces(objects.namespaces_matching if objects is not None else (lambda s: []))

    def _counts(self, terms: list[AffinityTerm], slots: np.ndarray) -> np.ndarray:
        if any(t.selector is None for t in terms):
            return np.zeros(len(slots), dtype=np.int64)
        m = PodMatcher(tuple(MatcherTerm(self._resolve(t), t.selector) for t in terms))
        return self.handle.cache.index.counts(m)[slots]

    @staticmethod
    def _domain_counts(table, key: str, slots: np.ndarray, counts: np.ndarray) -> np.ndarray:
        col = table.label_column(key)
        codes = col.codes[slots]
        has = codes >= 0
        return np.bincount(codes[has], weights=counts[has], minlength=len(col.values)).astype(np.int64)

    @staticmethod
    def _lookup(dom: np.ndarray, codes: np.ndarray) -> np.ndarray:
        if not len(dom):
            return np.zeros(len(codes), dtype=np.int64)
        ok = (codes >= 0) & (codes < len(dom))
        return np.where(ok, dom[np.clip(codes, 0, len(dom) - 1)], 0)

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state, pod, nodes):
        terms = pod.affinity_terms
        cache = self.handle.cache
        table = nodes.table
        ns_labels = self._ns_labels(pod.namespace)
        # Existing pods' required anti-affinity: each distinct term is matched once against this
        # pod; the domains holding a pod that declares a matching term are blocked.
        blocked: dict[str, np.ndarray] = {}
        for t, per_slot in cache.terms.required_anti.items():
            if not t.matches(pod, ns_labels):
                continue
            dom = domain_counts(table, t, per_slot)
            if dom is None:
                continue
            b = blocked.get(t.topology_key)
            if b is None or len(b) < len(dom):
                grown = np.zeros(len(dom), dtype=bool)
                if b is not None:
                    grown[: len(b)] = b
                blocked[t.topology_key] = b = grown
            b[: len(dom)] |= dom > 0
        req, anti = terms.required_affinity, terms.required_anti_affinity
        if not blocked and not req and not anti:
            return None, Status(Code.SKIP)
        slots = nodes.slots
        s = _State()
        s.blocked = blocked
        s.aff_terms = list(req)
        s.aff_dom = []
        s.any_match = False
        if req:
            counts = self._counts(list(req), slots)
            for t in req:
                dom = self._domain_counts(table, t.topology_key, slots, counts)
                s.aff_dom.append(dom)
                if dom.sum() > 0:
                    s.any_match = True
        s.self_ok = bool(req) and all(
            (ns is None or pod.namespace in ns) and t.selector is not None and t.selector.matches(pod.labels)
            for t, ns in ((t, self._resolve(t)) for t in req))
        s.anti_terms = list(anti)
        s.anti_dom = [self._domain_counts(table, t.topology_key, slots, self._counts([t], slots)) for t in anti]
        state.write(PRE_FILTER_KEY, s)
        return None, None

    def filter_nodes(self, state, pod, nodes):
        s: _State | None = state.get(PRE_FILTER_KEY)
        n = len(nodes)
        if s is None:
            return FilterResult.all_pass(n)
        table, slots = nodes.table, nodes.slots
        aff_fail = np.zeros(n, dtype=bool)
        if s.aff_terms:
            all_has = np.ones(n, dtype=bool)
            exist = np.ones(n, dtype=bool)
            for t, dom in zip(s.aff_terms, s.aff_dom):
                codes = table.label_column(t.topology_key).codes[slots]
                all_has &= codes >= 0
                exist &= self._lookup(dom, codes) > 0
            ok = all_has & (exist | (not s.any_match and s.self_ok))
            aff_fail = ~ok
        anti_fail = np.zeros(n, dtype=bool)
        for t, dom in zip(s.anti_terms, s.anti_dom):
            codes = table.label_column(t.topology_key).codes[slots]
            anti_fail |= self._lookup(dom, codes) > 0
        anti_fail &= ~aff_fail
        ex_fail = np.zeros(n, dtype=bool)
        for key, b in s.blocked.items():
            codes = table.label_column(key).codes[slots]
            ok = (codes >= 0) & (codes < len(b))
            ex_fail |= ok & b[np.where(ok, codes, 0)]
        ex_fail &= ~aff_fail & ~anti_fail
        failures = []
        if aff_fail.any():
            failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_AFFINITY, aff_fail))
        if anti_fail.any():
            failures.append((Code.UNSCHEDULABLE, REASON_ANTI_AFFINITY, anti_fail))
        if ex_fail.any():
            failures.append((Code.UNSCHEDULABLE, REASON_EXISTING_ANTI, ex_fail))
        return FilterResult(~(aff_fail | anti_fail | ex_fail), failures)

    def filter(self, state, pod, node):
        s: _State | None = state.get(PRE_FILTER_KEY)
        if s is None:
            return None
        table = self.handle.cache.table
        labels = node.labels
        if s.aff_terms:
            exist = True
            for t, dom in zip(s.aff_terms, s.aff_dom):
                v = labels.get(t.topology_key)
                if v is None:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_AFFINITY)
                code = table.label_column(t.topology_key).vocab.get(v, -1)
                if not (0 <= code < len(dom) and dom[code] > 0):
                    exist = False
            if not exist and not (not s.any_match and s.self_ok):
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_AFFINITY)
        for t, dom in zip(s.anti_terms, s.anti_dom):
            v = labels.get(t.topology_key)
            if v is not None:
                code = table.label_column(t.topology_key).vocab.get(v, -1)
                if 0 <= code < len(dom) and dom[code] > 0:
                    return Status(Code.UNSCHEDULABLE, REASON_ANTI_AFFINITY)
        for key, b in s.blocked.items():
            v = labels.get(key)
            if v is not None:
                code = table.label_column(key).vocab.get(v, -1)
                if 0 <= code < len(b) and b[code]:
                    return Status(Code.UNSCHEDULABLE, REASON_EXISTING_ANTI)
        return None

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state, pod, nodes):
        terms = pod.affinity_terms
        has_pref = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_pref:
            return Status(Code.SKIP)
        cache = self.handle.cache
        table = cache.table
        all_slots = table.order()
        topo: dict[str, np.ndarray] = {}
        touched = False

        def add(key: str, code: int, value: int):
            arr = topo.get(key)
            size = len(table.label_column(key).values)
            if arr is None or len(arr) < size:
                new = np.zeros(size, dtype=np.int64)
                if arr is not None:
                    new[: len(arr)] = arr
                topo[key] = arr = new
            arr[code] += value

        for sign, wterms in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for wt in wterms:
                counts = self._counts([wt.term], all_slots)
                dom = self._domain_counts(table, wt.term.topology_key, all_slots, counts)
                if dom.sum() > 0:
                    touched = True
                    for code in np.flatnonzero(dom).tolist():
                        add(wt.term.topology_key, code, sign * wt.weight * int(dom[code]))
        ns_labels = self._ns_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        # Existing pods' terms, one evaluation per distinct term (see scheduler/termindex.py).
        contributions = []
        if hard > 0:
            contributions.extend((t, hard, per_slot) for t, per_slot in cache.terms.required_affinity.items())
        if not self.args.ignore_preferred_terms_of_existing_pods:
            contributions.extend((t, w, per_slot) for (t, w), per_slot in cache.terms.preferred.items())
        for t, w, per_slot in contributions:
            if not t.matches(pod, ns_labels):
                continue
            dom = domain_counts(table, t, per_slot)
            if dom is None:
                continue
            touched = True
            for code in np.flatnonzero(dom).tolist():
                add(t.topology_key, code, w * int(dom[code]))
        if not touched:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, topo)
        return None

    def score(self, state, pod, node):
        topo = state.get(PRE_SCORE_KEY) or {}
        total = 0
        table = self.handle.cache.table
        for key, arr in topo.items():
            v = node.labels.get(key)
            if v is not None:
                code = table.label_column(key).vocab.get(v, -1)
                if 0 <= code < len(arr):
                    total += int(arr[code])
        return total

    def score_nodes(self, state, pod, nodes):
        topo = state.get(PRE_SCORE_KEY) or {}
        out = np.zeros(len(nodes), dtype=np.int64)
        for key, arr in topo.items():
            codes = nodes.table.label_column(key).codes[nodes.slots]
            out += self._lookup(arr, codes)
        return out

    def normalize_score(self, state, pod, nodes, scores):
        if not state.get(PRE_SCORE_KEY) or not len(scores):
            return None
        mn, mx = int(scores.min()), int(scores.max())
        diff = mx - mn
        if diff > 0:
            scores[:] = (MAX_NODE_SCORE * ((scores - mn) / diff)).astype(np.int64)
        else:
            scores[:] = 0
        return None

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Pod", "Add")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel")),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
                ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")))
