"""Fixtures of the real-node tier (``make test-real``): a RealCluster per test session.

The cluster needs root and Debian's containerd, runc and CNI plugins (installed by
hack/real-node-deps.sh when missing). The tests skip, saying why, only where that is impossible
(not root, no apt-get to install the packages); anything else that breaks is a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import pytest_asyncio

from pysched_dev.audit import BINDINGS_POLICY
from pysched_dev.realcluster import RealCluster, unavailable_reason
from pysched_dev.realcluster.cluster import clean_up, orphaned
from tests.e2e.conftest import _admin_client as admin_client
from tests.real import realkit
from tests.real.shipkit import NEXT_IMAGE, SHIPPED_IMAGE, build_image, ctr, helm_binary, run


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
    # every binding audited: the fault tests judge "none lost, none twice" by the API server's record
    cluster = RealCluster(kwok_nodes=3, audit_policy=BINDINGS_POLICY)
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


@pytest.fixture(scope="session")
def shipped_image(real_cluster: RealCluster):
    """The image `make image` builds (hack/image.sh), under the name the chart and manifests deploy,
    imported into the real node's containerd; also tagged as the next version, for the upgrade."""
    out = build_image()
    start = time.monotonic()
    names = real_cluster.import_image(out / "image.oci.tar")
    assert SHIPPED_IMAGE in names, names
    digest = (out / "image.digest").read_text().strip()
    listed = ctr(real_cluster, "images", "ls").stdout
    assert any(row.split()[:1] == [SHIPPED_IMAGE] and digest in row for row in listed.splitlines()), listed
    ctr(real_cluster, "images", "tag", "--force", SHIPPED_IMAGE, NEXT_IMAGE)
    print(f"\nimage {SHIPPED_IMAGE} ({digest}) imported in {time.monotonic() - start:.1f} s")
    return out


@pytest.fixture(scope="session")
def helm(real_cluster: RealCluster):
    """``helm(*args, timeout=..., check=...)`` as the cluster's admin."""
    binary = helm_binary()

    def call(*args, timeout: float = 300, check: bool = True):
        return run(binary, *args, "--kubeconfig", real_cluster.kubeconfig, timeout=timeout, check=check)
    return call


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def admin(real_cluster: RealCluster):
    async for client in admin_client(real_cluster):     # the e2e tier's, on this cluster's kubeconfig
        yield client
