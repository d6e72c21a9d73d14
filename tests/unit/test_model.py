"""Toleration, node-selector and label-selector matching (scalar forms)."""

import pytest

from pysched.apis.core.model import (
    LabelSelector,
    ObjectError,
    Taint,
    Toleration,
    find_untolerated_taint,
    parse_label_selector,
    parse_node_selector,
    parse_tolerations,
)

T = Taint("dedicated", "gpu", "NoSchedule")


@pytest.mark.parametrize("tol,ok", [
    (dict(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"), True),
    (dict(key="dedicated", value="gpu"), True),                       # empty operator means Equal
    (dict(key="dedicated", operator="Equal", value="cpu"), False),
    (dict(key="dedicated", operator="Exists"), True),
    (dict(key="dedicated", operator="Exists", effect="NoExecute"), False),
    (dict(operator="Exists"), True),                                 # empty key + Exists tolerates all
    (dict(key="other", operator="Exists"), False),
    (dict(key="dedicated", operator="Exists", tolerationSeconds=5), True),
    (dict(key="dedicated", operator="Bogus", value="gpu"), False),
])
def test_toleration(tol, ok):
    (t,) = parse_tolerations([tol])
    assert t.tolerates(T) is ok


def test_numeric_operators_only_when_enabled():
    taint = Taint("sla", "100", "NoSchedule")
    gt = Toleration("sla", "Gt", "50", "")
    lt = Toleration("sla", "Lt", "50", "")
    assert not gt.tolerates(taint)
    assert gt.tolerates(taint, comparison_operators=True)
    assert not lt.tolerates(taint, comparison_operators=True)
    assert not Toleration("sla", "Gt", "x", "").tolerates(taint, comparison_operators=True)


def test_find_untolerated_only_checks_given_effects():
    taints = (Taint("a", "", "PreferNoSchedule"), Taint("b", "1", "NoExecute"))
    assert find_untolerated_taint(taints, (), ("NoSchedule", "NoExecute")) == taints[1]
    assert find_untolerated_taint(taints, parse_tolerations([{"key": "b", "operator": "Exists"}]),
                                  ("NoSchedule", "NoExecute")) is None


def sel(*exprs, fields=()):
    return parse_node_selector({"nodeSelectorTerms": [{"matchExpressions": list(exprs),
                                                       "matchFields": list(fields)}]}, "x")


LABELS = {"zone": "a", "size": "8", "gpu": "true"}


@pytest.mark.parametrize("expr,ok", [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
    ({"key": "zone", "operator": "In", "values": ["b"]}, False),
    ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
    ({"key": "missing", "operator": "NotIn", "values": ["b"]}, True),   # absent label matches NotIn
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "missing", "operator": "Exists"}, False),
    ({"key": "missing", "operator": "DoesNotExist"}, True),
    ({"key": "zone", "operator": "DoesNotExist"}, False),
    ({"key": "size", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "size", "operator": "Gt", "values": ["8"]}, False),
    ({"key": "size", "operator": "Lt", "values": ["9"]}, True),
    ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),        # non-integer label
    ({"key": "missing", "operator": "Lt", "values": ["1"]}, False),
])
def test_node_selector_operators(expr, ok):
    assert sel(expr).matches(LABELS, "n1") is ok


def test_terms_are_ored_and_expressions_anded():
    s = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                              {"key": "gpu", "operator": "Exists"}]}]}, "x")
    assert s.matches(LABELS, "n1")
    s2 = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                              {"key": "gpu", "operator": "DoesNotExist"}]}]}, "x")
    assert not s2.matches(LABELS, "n1")


def test_match_fields_metadata_name():
    assert sel(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]).matches({}, "n1")
    assert not sel(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]).matches({}, "n2")
    assert sel(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]).matches({}, "n2")


def test_empty_term_and_invalid_term_match_nothing():
    assert not parse_node_selector({"nodeSelectorTerms": [{}]}, "x").matches(LABELS, "n1")
    bad = sel({"key": "size", "operator": "Gt", "values": ["a", "b"]})
    assert not bad.matches(LABELS, "n1")


def test_label_selector():
    s = parse_label_selector({"matchLabels": {"app": "web"},
                              "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}, "x")
    assert s.matches({"app": "web"})
    assert not s.matches({"app": "web", "tier": "db"})
    assert parse_label_selector({}, "x").matches({"any": "thing"})
    assert parse_label_selector(None, "x") is None
    with pytest.raises(ObjectError, match=r"x.matchExpressions\[0\].operator"):
        parse_label_selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "x")
    assert isinstance(s, LabelSelector)
