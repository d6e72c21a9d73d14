"""The vectorised selector evaluation agrees with the scalar one on random nodes and selectors."""

import random

from pysched.apis.core.model import parse_label_selector, parse_node_selector
from pysched.backend.cache.cache import SchedulerCache
from pysched.framework.interface import NodeBatch
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.nodeselect import label_selector_mask, labels_mask, node_selector_mask

from .conftest import node

KEYS = ["zone", "size", "gpu", "tier"]
VALUES = ["a", "b", "c", "1", "5", "10", "x"]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


def rand_req(rng):
    op = rng.choice(OPS)
    key = rng.choice(KEYS)
    if op in ("In", "NotIn"):
        return {"key": key, "operator": op, "values": rng.sample(VALUES, rng.randint(1, 3))}
    if op in ("Gt", "Lt"):
        return {"key": key, "operator": op, "values": [str(rng.randint(0, 12))]}
    return {"key": key, "operator": op}


def test_random_agreement():
    rng = random.Random(7)
    cache = SchedulerCache()
    for i in range(60):
        labels = {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.7}
        cache.upsert_node(NodeSpec.from_dict(node(f"n{i}", labels=labels)))
    nodes = NodeBatch(cache.table, cache.table.order())
    infos = nodes.infos
    for _ in range(300):
        terms = []
        for _ in range(rng.randint(1, 3)):
            t = {"matchExpressions": [rand_req(rng) for _ in range(rng.randint(0, 3))]}
            if rng.random() < 0.2:
                t["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(["In", "NotIn"]),
                                     "values": [f"n{rng.randint(0, 70)}"]}]
            terms.append(t)
        sel = parse_node_selector({"nodeSelectorTerms": terms}, "x")
        vec = node_selector_mask(nodes, sel).tolist()
        scal = [sel.matches(i.labels, i.name) for i in infos]
        assert vec == scal, terms
        ns = {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(1, 2))}
        assert labels_mask(nodes, ns).tolist() == [all(i.labels.get(k) == v for k, v in ns.items()) for i in infos]
        ls = parse_label_selector({"matchExpressions": [r for r in (rand_req(rng) for _ in range(2))
                                                        if r["operator"] not in ("Gt", "Lt")]}, "y")
        assert label_selector_mask(nodes, ls).tolist() == [ls.matches(i.labels) for i in infos]


def test_label_update_keeps_columns_current():
    cache = SchedulerCache()
    raw = node("n1", labels={"zone": "a"})
    cache.upsert_node(NodeSpec.from_dict(raw))
    t = cache.table
    sel = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}, "x")
    assert not node_selector_mask(NodeBatch(t, t.order()), sel).any()
    raw["metadata"]["labels"]["zone"] = "b"
    cache.upsert_node(NodeSpec.from_dict(raw))
    assert node_selector_mask(NodeBatch(t, t.order()), sel).all()
