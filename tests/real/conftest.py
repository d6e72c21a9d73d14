"""Fixtures of the real-node tier (``make test-real``): a RealCluster per test session.

The cluster needs root and Debian's containerd, runc and CNI plugins (installed by
hack/real-node-deps.sh when missing). The tests skip, saying why, only where that is impossible
(not root, no apt-get to install the packages); anything else that breaks is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pysched_dev.realcluster import RealCluster, unavailable_reason
from pysched_dev.realcluster.cluster import clean_up, orphaned
from tests.real import realkit


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """One RealCluster for the session: ``real-node`` (containerd + runc + kubelet 1.35.4) and three
    KWOK nodes (``kwok-0``.. ``kwok-2``, tainted ``real_cluster.kwok_taint``) under a 1.37.2 control
    plane; kube-scheduler places the pods that name no scheduler (only on the real node)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no real node here: {reason}")
    for workdir in orphaned():   # a killed earlier run's cluster still holds its processes
        clean_up(workdir)
    cluster = RealCluster(kwok_nodes=3)
    cluster.start()
    print(f"\nreal cluster up in {cluster.timings['total']:.1f} s: {json.dumps(cluster.timings)}")
    try:
        yield cluster
    finally:
        cluster.stop()
        print(f"\nreal cluster torn down in {cluster.stop_timings['total']:.1f} s: {json.dumps(cluster.stop_timings)}")


@pytest.fixture
def real_namespace(real_cluster: RealCluster) -> Iterator[str]:
    """A fresh namespace in the session's real cluster, deleted (with its pods) after the test."""
    name = realkit.fresh_name("t")
    real_cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        real_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
