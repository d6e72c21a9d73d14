"""The cache's PodCountIndex and TermIndex against a brute-force count, through random churn.

Both file matchers and terms by the label pairs their selectors require (``selector_anchors``) so
that a cycle and a pod add look only at what could match; these tests hold the results to what a
scan of every pod gives, for anchored and unanchored selectors, across assume, forget, confirm,
delete, node removal and return, and LRU eviction.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from pysched.apis.core.model import LabelSelector, Requirement
from pysched.backend.cache.cache import SchedulerCache
from pysched.backend.cache.termindex import selector_anchors
from pysched.framework.matchers import MatcherTerm, PodMatcher
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo

from .conftest import node, pod

GROUPS = [f"g{i}" for i in range(6)]


def selectors() -> list[LabelSelector]:
    return [
        LabelSelector((Requirement("group", "In", frozenset({"g1"})),)),
        LabelSelector((Requirement("group", "In", frozenset({"g2", "g3"})),
                       Requirement("tier", "In", frozenset({"web"})))),
        LabelSelector((Requirement("group", "NotIn", frozenset({"g0"})),)),
        LabelSelector((Requirement("tier", "Exists", frozenset()),)),
        LabelSelector(()),                                                   # matches every pod
    ]


def test_anchors_are_the_narrowest_in_requirement():
    sel = selectors()
    assert selector_anchors(sel[0]) == {("group", "g1")}
    assert selector_anchors(sel[1]) == {("tier", "web")}
    assert selector_anchors(sel[2]) is None and selector_anchors(sel[4]) is None and selector_anchors(None) is None


def random_pod(rng: random.Random, i: int) -> PodInfo:
    labels = {"group": rng.choice(GROUPS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["web", "db"])
    terms = []
    if rng.random() < 0.6:
        sel = rng.choice(selectors())
        raw = {"matchExpressions": [{"key": r.key, "operator": r.operator, "values": sorted(r.values)}
                                    if r.values else {"key": r.key, "operator": r.operator}
                                    for r in sel.requirements]}
        terms.append({"labelSelector": raw, "topologyKey": "kubernetes.io/hostname"})
    p = pod(f"p{i}", labels=labels)
    if terms:
        p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms},
                                 "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                     {"weight": 5, "podAffinityTerm": terms[0]}]}}
    return PodInfo.from_dict(p)


def brute_counts(cache: SchedulerCache, matcher: PodMatcher) -> np.ndarray:
    arr = np.zeros(cache.table.capacity, dtype=np.int64)
    for p in cache.pods.values():
        info = cache.nodes.get(p.node_name)
        if info is not None and matcher.matches(p):
            arr[info.slot] += 1
    return arr


def brute_terms(cache: SchedulerCache, kind: str, labels: dict) -> dict:
    """term -> total declaring pods on known nodes, for the terms whose selector matches ``labels``."""
    out: dict = {}
    for p in cache.pods.values():
        if cache.nodes.get(p.node_name) is None:
            continue
        t = p.affinity_terms
        items = ([(x, 1) for x in t.required_anti_affinity] if kind == "requiredAntiAffinity"
                 else [(w.term, w.weight) for w in t.preferred_affinity])
        for term, weight in items:
            if term.selector is not None and term.selector.matches(labels):
                out[(term, weight)] = out.get((term, weight), 0) + 1
    return out


@pytest.mark.parametrize("seed", range(6))
def test_indices_agree_with_a_scan_through_churn(seed):
    rng = random.Random(seed)
    cache = SchedulerCache()
    cache.index.limit = 3   # LRU eviction happens constantly
    names = [f"n{i}" for i in range(5)]
    for n in names:
        cache.upsert_node(NodeSpec.from_dict(node(n, cpu="100", pods=500)))
    matchers = [PodMatcher((MatcherTerm(frozenset({"default"}), s),)) for s in selectors()]
    matchers.append(PodMatcher((MatcherTerm(None, selectors()[0]), MatcherTerm(None, selectors()[3]))))
    live: list[PodInfo] = []
    for step in range(400):
        r = rng.random()
        if r < 0.45 or not live:
            p = random_pod(rng, step)
            cache.assume(p, rng.choice(names))
            live.append(p)
        elif r < 0.65:
            p = live.pop(rng.randrange(len(live)))
            cache.forget(p) if cache.is_assumed(p.uid) else cache.remove_pod(p.uid)
        elif r < 0.75:
            name = rng.choice(names)
            spec = cache.nodes[name].spec if name in cache.nodes else None
            if spec is not None:
                cache.remove_node(name)
                if rng.random() < 0.7:
                    cache.upsert_node(spec)
            else:
                cache.upsert_node(NodeSpec.from_dict(node(name, cpu="100", pods=500)))
        m = rng.choice(matchers)
        got = cache.index.counts(m)
        want = brute_counts(cache, m)
        n = len(want)
        assert np.array_equal(got[:n], want), (seed, step, m)
        probe = random_pod(rng, 10_000 + step).labels
        for kind in ("requiredAntiAffinity", "preferred"):
            got_terms = {(t, w): int(dom.sum()) for t, w, dom in cache.terms.term_domains(
                kind, lambda t, probe=probe: t.selector is not None and t.selector.matches(probe), probe)}
            assert got_terms == brute_terms(cache, kind, probe), (seed, step, kind)


def test_a_status_update_then_a_delete_leaves_nothing_of_the_pod_behind():
    """A bound pod's status updates keep its accounting (the cache swaps the object); the pod-count
    index must swap it too. It kept the first version, which the delete - handed the latest - never
    dropped: one PodInfo per updated pod, kept forever (the soak's memory drift)."""
    cache = SchedulerCache()
    cache.upsert_node(NodeSpec.from_dict(node("n1")))
    raw = pod("p", labels={"job-name": "j-1"})
    raw["spec"]["nodeName"] = "n1"
    first = PodInfo.from_dict(raw)
    cache.upsert_pod(first)
    running = dict(raw, status={"phase": "Running"}, metadata=dict(raw["metadata"], resourceVersion="2"))
    latest = PodInfo.from_dict(running)
    cache.upsert_pod(latest)
    filed = cache.index._by_label[("job-name", "j-1")]
    assert filed[latest.uid] is latest           # the replaced version is not kept
    cache.remove_pod(latest.uid)
    assert cache.index._by_label == {}



def _bound_pod_on_a_deleted_node(job):
    """A cache with node n1 deleted after pod p (labelled job-name=``job``) was bound to it."""
    cache = SchedulerCache()
    cache.upsert_node(NodeSpec.from_dict(node("n1")))
    raw = pod("p", labels={"job-name": job})
    raw["spec"]["nodeName"] = "n1"
    p = PodInfo.from_dict(raw)
    cache.upsert_pod(p)
    cache.remove_node("n1")
    return cache, p


def test_a_node_deleted_then_its_pods_deleted_leaves_nothing_of_them_behind():
    """A deleted node's pods are parked (counted again if it returns); the label index let go of
    them only lazily, so a pod parked there and deleted later stayed filed for ever."""
    cache, p = _bound_pod_on_a_deleted_node("j-2")
    cache.remove_pod(p.uid)
    assert cache.index._by_label == {} and cache.parked == {} and not cache.with_affinity


def test_a_node_that_returns_counts_its_parked_pods_again():
    cache, p = _bound_pod_on_a_deleted_node("j-3")
    assert ("job-name", "j-3") not in cache.index._by_label
    cache.upsert_node(NodeSpec.from_dict(node("n1")))
    assert cache.index._by_label[("job-name", "j-3")] == {p.uid: p}
    assert p.uid in cache.nodes["n1"].pods
