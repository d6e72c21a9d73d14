"""client-go's ``rest_client_*`` metrics from our API client, and no ``*_created`` series on /metrics.

The client's metrics are read two ways: from a private registry while one KubeClient makes requests
with known outcomes (200, 201, 404, a watch's initial request, a refused connection, a rate-limiter
wait), and scraped from a running scheduler after it bound pods.
"""

from __future__ import annotations

import asyncio
import dataclasses
from urllib.parse import urlsplit

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from pysched.apis.core.errors import ApiError
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched.metrics import REST_CLIENT_BUCKETS, Metrics, RestClientMetrics
from pysched_dev.devcluster import free_port
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .conftest import wait_for

pytestmark = pytest.mark.e2e
CLIENT_GO_BUCKETS = ["0.005", "0.025", "0.1", "0.25", "0.5", "1.0", "2.0", "4.0", "8.0", "15.0", "30.0", "60.0",
                     "+Inf"]


def instrumented(creds, **kw) -> tuple[KubeClient, CollectorRegistry, str]:
    """A KubeClient whose rest_client_* metrics go to a registry of its own."""
    client = KubeClient(creds, **kw)
    registry = CollectorRegistry()
    host = urlsplit(creds.server).netloc
    assert client.rest_metrics.host == host
    client.rest_metrics = RestClientMetrics(Metrics(registry), host)
    return client, registry, host


async def test_every_request_is_counted_as_client_go_counts_it(control_plane):
    creds = load_kubeconfig(control_plane.kubeconfig)
    client, reg, host = instrumented(creds, qps=0, burst=1)

    def requests(code, method):
        return reg.get_sample_value("rest_client_requests_total", {"code": code, "method": method, "host": host})

    def duration(suffix, verb, **labels):
        return reg.get_sample_value(f"rest_client_request_duration_seconds{suffix}",
                                    {"verb": verb, "host": host, **labels})

    try:
        await client.get("/api/v1/namespaces/default")
        await client.get("/api/v1/namespaces/default")
        with pytest.raises(ApiError) as err:
            await client.get("/api/v1/namespaces/default/configmaps/missing")
        assert err.value.status == 404
        await client.request("POST", "/api/v1/namespaces/default/configmaps",
                             body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
        assert (requests("200", "GET"), requests("404", "GET"), requests("201", "POST")) == (2, 1, 1)
        # one latency observation per call, in client-go's buckets
        assert duration("_count", "GET") == 3 and duration("_count", "POST") == 1
        assert 0 < duration("_sum", "GET") < 60
        for le in CLIENT_GO_BUCKETS:
            assert duration("_bucket", "GET", le=le) is not None, le
        assert duration("_bucket", "GET", le="60.0") == 3

        # a watch's initial request counts (its stream's latency does not)
        async for _ in client.watch("/api/v1/namespaces/default/configmaps", {"timeoutSeconds": "1"}):
            pass
        with pytest.raises(ApiError) as err:
            async for _ in client.watch("/api/v1/namespaces/default/nosuchresource", {}):
                pass
        assert err.value.status == 404
        assert (requests("200", "GET"), requests("404", "GET")) == (3, 2)
        assert duration("_count", "GET") == 3
        # the admin client has no rate limiter (qps=0): nothing observed, as client-go with none
        assert reg.get_sample_value("rest_client_rate_limiter_duration_seconds_count",
                                    {"verb": "GET", "host": host}) is None
    finally:
        await client.close()

    # No HTTP response at all (nothing listens on the port): code "<error>", request and watch alike.
    dead = dataclasses.replace(creds, server=f"https://127.0.0.1:{free_port()}")
    client, reg, host = instrumented(dead, qps=0, burst=1, timeout=5)
    try:
        with pytest.raises(OSError):
            await client.get("/api/v1/namespaces/default")
        with pytest.raises(OSError):
            async for _ in client.watch("/api/v1/pods", {}):
                pass
        assert reg.get_sample_value("rest_client_requests_total",
                                    {"code": "<error>", "method": "GET", "host": host}) == 2
        assert reg.get_sample_value("rest_client_request_duration_seconds_count", {"verb": "GET", "host": host}) == 1
    finally:
        await client.close()

    # The rate limiter's wait: 5 qps, burst 1, three calls at once wait 0, 0.2 and 0.4 s for tokens
    # (0.6 s in all, less the moments between their reservations; the test asks for half).
    client, reg, host = instrumented(creds, qps=5, burst=1)
    try:
        await asyncio.gather(*(client.get("/api/v1/namespaces/default") for _ in range(3)))
        count = reg.get_sample_value("rest_client_rate_limiter_duration_seconds_count", {"verb": "GET", "host": host})
        waited = reg.get_sample_value("rest_client_rate_limiter_duration_seconds_sum", {"verb": "GET", "host": host})
        assert count == 3 and waited >= 0.3
        assert reg.get_sample_value("rest_client_rate_limiter_duration_seconds_bucket",
                                    {"verb": "GET", "host": host, "le": "0.005"}) >= 1
    finally:
        await client.close()


async def test_scheduler_metrics_have_rest_client_series_and_no_created(control_plane, admin, scheduler_factory):
    await create_nodes(admin, [make_node(f"n{i}", cpu="4") for i in range(3)])
    await create_pods(admin, [make_pod(f"p{i}", cpu="100m") for i in range(10)])
    sched = scheduler_factory().start()

    async def bound():
        pods = await list_pods(admin, "default")
        return all(p["spec"].get("nodeName") for p in pods)

    await wait_for(bound, 60, what="10 pods bound")
    status, text = await sched.get("/metrics")
    assert status == 200
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    assert samples and not [s.name for s in samples if s.name.endswith("_created")]
    assert "_created" not in text

    host = urlsplit(load_kubeconfig(control_plane.kubeconfig).server).netloc

    def value(name, **labels):
        found = [s.value for s in samples if s.name == name and s.labels == labels]
        return found[0] if found else None

    # 10 binds (201) at least; the informers' LISTs and watches' initial requests (200)
    assert value("rest_client_requests_total", code="201", method="POST", host=host) >= 10
    assert value("rest_client_requests_total", code="200", method="GET", host=host) >= 2
    assert {s.labels["host"] for s in samples if s.name.startswith("rest_client_")} == {host}
    assert not [s for s in samples if s.name == "rest_client_requests_total" and s.labels["code"] == "<error>"]
    posts = value("rest_client_request_duration_seconds_count", verb="POST", host=host)
    assert posts >= 10
    assert value("rest_client_request_duration_seconds_bucket", verb="POST", host=host, le="+Inf") == posts
    assert 0 < value("rest_client_request_duration_seconds_sum", verb="POST", host=host) < 60 * posts
    les = [s.labels["le"] for s in samples
           if s.name == "rest_client_request_duration_seconds_bucket" and s.labels["verb"] == "POST"]
    assert les == CLIENT_GO_BUCKETS
    assert value("rest_client_rate_limiter_duration_seconds_count", verb="POST", host=host) >= 10
    assert [str(b) for b in REST_CLIENT_BUCKETS] == CLIENT_GO_BUCKETS[:-1]
    sched.terminate()


async def test_a_write_whose_answer_is_not_read_still_raises_errors_with_the_servers_message(control_plane):
    client = KubeClient(load_kubeconfig(control_plane.kubeconfig), qps=0, burst=1)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "undecoded"}}
    try:
        assert await client.request("POST", "/api/v1/namespaces/default/configmaps", body=body, decode=False) is None
        got = await client.get("/api/v1/namespaces/default/configmaps/undecoded")
        assert got["metadata"]["name"] == "undecoded"
        with pytest.raises(ApiError) as err:
            await client.request("POST", "/api/v1/namespaces/default/configmaps", body=body, decode=False)
        assert err.value.status == 409
        assert "already exists" in err.value.message
    finally:
        await client.request("DELETE", "/api/v1/namespaces/default/configmaps/undecoded")
        await client.close()
