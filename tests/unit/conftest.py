"""Shared builders for unit tests: API-shaped dicts with unique UIDs."""

import itertools

import pytest

from pysched_dev import testkit

_uid = itertools.count(1)


def node(name, **kw):
    n = testkit.make_node(name, **kw)
    n["metadata"]["uid"] = f"node-uid-{name}"
    n["metadata"]["resourceVersion"] = str(next(_uid))
    return n


def pod(name, **kw):
    p = testkit.make_pod(name, **kw)
    p["metadata"]["uid"] = f"uid-{name}-{next(_uid)}"
    p["metadata"]["resourceVersion"] = str(next(_uid))
    p["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    return p


@pytest.fixture
def make_node():
    return node


@pytest.fixture
def make_pod():
    return pod
