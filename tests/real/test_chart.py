"""The Helm chart as it ships, installed on a real node: the image `make image` builds, imported into
the node's containerd under the name the chart deploys, runs as two Ready replicas (probes,
uid 65532, read-only root, the chart's limits), one of which leads; pods that opt in are placed on
the KWOK nodes and on the real node, where they run. Then faults under bursts: the leader's
container killed, then the next leader's pod deleted (1,000 pods), and a `helm upgrade` to a new
image tag (2,000 pods), each with every pod bound exactly once by the API server's audit log; the
replicas stay under their memory limit; a real Prometheus scrapes both through the chart's scrape
annotations with the documented job, every query of the Grafana dashboard runs, and each has data
but those whose series exist only after a fault or in a mode this install leaves off (named)."""

from __future__ import annotations

import json
import re
import time

import pytest
import pytest_asyncio
import yaml

from pysched.apis.core.quantity import parse_quantity
from pysched_dev.promkit import PrometheusServer, prometheus_binary
from pysched_dev.testkit import ensure_namespace, list_pods
from tests.e2e.test_scheduling import assert_no_overcommit

from .shipkit import (
    CGROUP_LIMIT,
    NEXT_IMAGE,
    REPO,
    SHIPPED_IMAGE,
    LeaseWatch,
    MemoryWatch,
    add_kwok_nodes,
    assert_each_bound_once,
    at_least,
    bound,
    burst,
    ctr,
    delete_if_exists,
    delete_namespace,
    elapsed,
    exec_python,
    kubectl,
    lease_holder,
    on_kwok,
    oom_killed,
    ready_replicas,
    wait_for,
    workload_pod,
)

# the first test also waits for a cold image build (the session fixture): minutes, not the default 10
pytestmark = [pytest.mark.real_node, pytest.mark.timeout(1800)]

NS = "pysched-system"
RELEASE = "pysched"
VALUES = yaml.safe_load((REPO / "charts" / "pysched" / "values.yaml").read_text())
BURST = 1000
#: The upgrade's burst: long enough that the Lease changes hands (the old leader's pod goes last or
#: second to last in the rollout, some 10-20 s in) with pods still waiting.
UPGRADE_BURST = 2000
PROMETHEUS_SA = {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chart(real_cluster, shipped_image, helm, admin):
    """`helm install` of charts/pysched with gang scheduling and team quotas on (their CRDs come from
    the chart) and a Prometheus bound to the metrics reader; ten more KWOK nodes make room for the
    bursts."""
    await add_kwok_nodes(admin, [f"burst-{i}" for i in range(10)], real_cluster.kwok_taint)
    start = time.monotonic()
    helm("install", RELEASE, REPO / "charts" / "pysched", "--namespace", NS, "--create-namespace",
         "--set-json", f"metrics.reader.subjects={json.dumps([PROMETHEUS_SA])}",
         "--set", "gangScheduling.enabled=true", "--set", "capacityScheduling.enabled=true",
         "--wait", "--timeout", "5m", timeout=400)
    print(f"helm install --wait: {elapsed(start)}")
    yield RELEASE
    helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "2m", timeout=200, check=False)
    for i in range(10):
        for node in (f"burst-{i}", f"failover-{i}"):
            await delete_if_exists(admin, f"/api/v1/nodes/{node}")


async def test_helm_install_runs_two_ready_replicas_as_shipped(chart, admin, real_cluster):
    pods = await wait_for(lambda: ready_replicas(admin, NS, RELEASE, 2, image=SHIPPED_IMAGE), 180,
                          what="two Ready replicas")
    limit = VALUES["resources"]["limits"]["memory"]
    for pod in pods:
        assert pod["spec"]["nodeName"] == real_cluster.node_name
        (c,) = pod["spec"]["containers"]
        assert c["resources"] == VALUES["resources"]
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0 and status["imageID"]
        name = pod["metadata"]["name"]
        uid = exec_python(real_cluster, NS, name, "import os; print(os.getuid(), os.getgid())").stdout.split()
        assert uid == ["65532", "65532"]
        ro = exec_python(real_cluster, NS, name, "open('/pysched-write-test', 'w')", check=False)
        assert ro.returncode != 0 and "Read-only file system" in ro.stderr
        # the limit is the cgroup's, enforced by the kernel (cgroup v1 here; v2's file otherwise)
        cg = exec_python(real_cluster, NS, name, CGROUP_LIMIT).stdout.strip()
        assert int(cg) == int(parse_quantity(limit))
    holder = await wait_for(lambda: lease_holder(admin, NS, RELEASE), 60, what="a leader")
    assert holder in {p["metadata"]["name"] for p in pods}


async def test_pods_that_opt_in_are_placed_on_kwok_and_on_the_real_node(chart, admin, real_cluster):
    ns = "workload-placed"
    await ensure_namespace(admin, ns)
    fake = [workload_pod(f"fake-{i}", kwok=real_cluster.kwok_taint) for i in range(4)]
    real = workload_pod("real", node=real_cluster.node_name, image=SHIPPED_IMAGE, memory="128Mi",
                        command=["python", "-c", "print('ran on the real node')"])
    for p in [*fake, real]:
        await admin.request("POST", f"/api/v1/namespaces/{ns}/pods", body=p)

    async def done():
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, ns)}
        if pods["real"]["status"].get("phase") != "Succeeded":
            return None
        if any(pods[f"fake-{i}"]["status"].get("phase") != "Running" for i in range(4)):
            return None
        return pods
    pods = await wait_for(done, 120, what="the real pod Succeeded and the KWOK pods Running")
    for i in range(4):
        assert await on_kwok(admin, pods[f"fake-{i}"]["spec"]["nodeName"], real_cluster.kwok_taint)
    assert pods["real"]["spec"]["nodeName"] == real_cluster.node_name
    log = kubectl(real_cluster, "-n", ns, "logs", "real").stdout
    assert "ran on the real node" in log
    for p in pods.values():
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
        assert cond["status"] == "True"
    events = await admin.get(f"/api/v1/namespaces/{ns}/events")
    scheduled = [e for e in events["items"] if e["reason"] == "Scheduled"]
    assert {e["reportingComponent"] for e in scheduled} == {"pysched"}


async def _container_id(admin, pod_name: str) -> str:
    pod = await admin.get(f"/api/v1/namespaces/{NS}/pods/{pod_name}")
    return pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]


@pytest_asyncio.fixture(loop_scope="session")
async def burst_ns(request, admin):
    """The test's burst namespace, deleted (with its pods) whatever the test's outcome, so a failure
    does not fill the KWOK nodes under the next test."""
    name = request.node.name.replace("_", "-")[len("test-"):][:30].strip("-")
    yield f"b-{name}"
    await delete_namespace(admin, f"b-{name}")


async def test_leader_killed_then_deleted_during_a_burst_loses_and_doubles_nothing(chart, admin, real_cluster,
                                                                                   burst_ns):
    ns = burst_ns
    await wait_for(lambda: ready_replicas(admin, NS, RELEASE, 2), 180, what="two Ready replicas")
    first = await wait_for(lambda: lease_holder(admin, NS, RELEASE), 60, what="a leader")
    start = time.monotonic()
    async with MemoryWatch(admin, real_cluster.node_name, NS) as mem:
        # 1,000 pods of 320m fill ten nodes of 32 CPUs reserved for them exactly: a replica that counted
        # a pod twice (or lost one it had assumed) leaves a pod unplaceable, or a node overcommitted
        await add_kwok_nodes(admin, [f"failover-{i}" for i in range(10)], real_cluster.kwok_taint,
                             reserved_for="failover")
        await burst(admin, ns, BURST, real_cluster.kwok_taint, cpu="320m", reserved_for="failover")
        await wait_for(at_least(100, lambda: bound(admin, ns)), 120, interval=0.1, what="the burst under way")

        # 1. the leader's container dies (SIGKILL: no handover); the kubelet restarts it, the other
        #    replica takes the Lease once it expires
        ctr(real_cluster, "tasks", "kill", "--signal", "SIGKILL", await _container_id(admin, first))
        at_kill = await bound(admin, ns)
        assert at_kill < BURST, "the burst finished before the kill: the test proves nothing"
        second = await wait_for(lambda: _other_than(admin, first), 60, interval=0.2, what="the other replica leads")
        print(f"container killed at {at_kill} bound; {second} leads after {elapsed(start)}")

        # 2. the new leader's pod is deleted (SIGTERM through the kubelet: a handover); the Deployment
        #    replaces it
        at_delete = await bound(admin, ns)
        assert at_delete < BURST, "the burst finished before the pod deletion: the second fault proves nothing"
        await admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{second}")
        third = await wait_for(lambda: _other_than(admin, second), 60, interval=0.2, what="a third leader")
        print(f"pod {second} deleted at {at_delete} bound; {third} leads after {elapsed(start)}")
        await wait_for(at_least(BURST, lambda: bound(admin, ns)), 300, what="every pod bound")
    print(f"{BURST} pods bound in {elapsed(start)}; peak working sets {mem.peak}")
    await assert_each_bound_once(admin, real_cluster.audit_events, ns, BURST)
    await assert_no_overcommit(admin)

    pods = await wait_for(lambda: ready_replicas(admin, NS, RELEASE, 2), 180, what="two Ready replicas again")
    restarted = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in pods}
    assert restarted.get(first, 1) == 1, restarted        # the killed container came back (unless its pod went)
    _assert_under_limit(mem, pods)


async def _other_than(admin, name: str) -> str | None:
    holder = await lease_holder(admin, NS, RELEASE)
    return holder if holder and holder != name else None


def _assert_under_limit(mem: MemoryWatch, pods: list[dict]) -> None:
    limit = int(parse_quantity(VALUES["resources"]["limits"]["memory"]))
    assert mem.samples > 3
    for (pod, container), peak in mem.peak.items():
        assert peak < limit, f"{pod}/{container} peaked at {peak / 2**20:.0f} MiB (limit {limit / 2**20:.0f} MiB)"
    for p in pods:
        assert not oom_killed(p), p["metadata"]["name"]


async def test_helm_upgrade_to_a_new_tag_during_a_burst_loses_and_doubles_nothing(chart, admin, real_cluster, helm,
                                                                                  burst_ns):
    ns = burst_ns
    await wait_for(lambda: ready_replicas(admin, NS, RELEASE, 2), 180, what="two Ready replicas")
    before = {p["metadata"]["name"] for p in await ready_replicas(admin, NS, RELEASE, 2)}
    start = time.monotonic()
    async with MemoryWatch(admin, real_cluster.node_name, NS) as mem, LeaseWatch(admin, NS, RELEASE, ns) as lease:
        await burst(admin, ns, UPGRADE_BURST, real_cluster.kwok_taint)
        await wait_for(at_least(100, lambda: bound(admin, ns)), 120, interval=0.1, what="the burst under way")
        at_upgrade = await bound(admin, ns)
        assert at_upgrade < UPGRADE_BURST, "the burst finished before the upgrade: the test proves nothing"
        helm("upgrade", RELEASE, REPO / "charts" / "pysched", "--namespace", NS, "--reuse-values",
            "--set", f"image.tag={NEXT_IMAGE.rsplit(':', 1)[1]}", "--wait", "--timeout", "5m", timeout=400)
        print(f"helm upgrade at {at_upgrade} bound, rolled out after {elapsed(start)}")
        await wait_for(at_least(UPGRADE_BURST, lambda: bound(admin, ns)), 300, what="every pod bound")
    # the Lease changed hands (the leader's pod was replaced) while pods were still waiting
    print(f"lease holders (holder, pods bound then): {lease.changes}")
    assert len(lease.changes) >= 2 and lease.changes[1][1] < UPGRADE_BURST, lease.changes
    await assert_each_bound_once(admin, real_cluster.audit_events, ns, UPGRADE_BURST)
    pods = await wait_for(lambda: ready_replicas(admin, NS, RELEASE, 2, image=NEXT_IMAGE), 180,
                          what="two Ready replicas of the new tag")
    assert not before & {p["metadata"]["name"] for p in pods}, "every replica was replaced"
    holder = await wait_for(lambda: lease_holder(admin, NS, RELEASE), 60, what="a leader")
    assert holder in {p["metadata"]["name"] for p in pods}
    _assert_under_limit(mem, pods)


#: The dashboard's series that exist only once something happened that a healthy install does not do
#: on its own (a fault), or with a mode this install leaves off; every other query must have data.
ONLY_AFTER = {
    'code=~"3.."': "an API answer 3xx (none is ever expected)",
    'code=~"4.."': "an API answer 4xx (a conflict, a lost race)",
    'code=~"5.."': "an API answer 5xx",
    'code="<error>"': "an API request without an answer (a cut connection)",
    "pysched_fenced_writes_total": "a write withheld because this replica could not prove it leads",
    "pysched_bind_conflicts_total": "a bind answered 409/404",
    "pysched_kubelet_rejections_total": "a kubelet rejecting a pod at admission",
    "pysched_events_aggregated_total": "the same Event again within six minutes",
    "pysched_events_dropped_total": "an Event given up",
    "pysched_events_post_errors_total": "an Event write failing",
    "pysched_quota_preemption_victims_total": "a team-quota preemption",
    "pysched_podgroups_timed_out_total": "a gang whose Permit wait timed out",
    "pysched_extender_requests_total": "extenders configured (pysched calling one)",
    "pysched_extender_request_duration_seconds": "extenders configured (pysched calling one)",
    "pysched_extender_server_requests_total": "`pysched extender` (another Deployment, not scraped here)",
    "pysched_extender_server_request_duration_seconds": "`pysched extender` (another Deployment)",
    "pysched_shadow_placements_total": "shadow mode (--shadow)",
}


async def _gangs_quotas_and_an_unschedulable_pod(admin, real_cluster) -> None:
    """A gang that is admitted, a team quota with pods inside it, and a pod no node can take."""
    ns = "scraped-teams"
    await ensure_namespace(admin, ns)
    api = "/apis/scheduling.x-k8s.io/v1alpha1"
    for name, members, timeout in (("gang-ok", 2, 30),):
        await admin.request("POST", f"{api}/namespaces/{ns}/podgroups", body={
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": members, "scheduleTimeoutSeconds": timeout}})
    await admin.request("POST", f"{api}/namespaces/{ns}/elasticquotas", body={
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "team"},
        "spec": {"min": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "4", "memory": "8Gi"}}})
    pods = [workload_pod("ok-0", kwok=real_cluster.kwok_taint), workload_pod("ok-1", kwok=real_cluster.kwok_taint),
            workload_pod("too-big", kwok=real_cluster.kwok_taint, cpu="1000")]
    for p in pods:
        name = p["metadata"]["name"]
        if not name.startswith("too"):
            p["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "gang-ok"}
        await admin.request("POST", f"/api/v1/namespaces/{ns}/pods", body=p)


def dashboard_queries() -> list[str]:
    out: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            if isinstance(o.get("expr"), str):
                out.append(o["expr"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(json.loads((REPO / "dashboards" / "pysched.json").read_text()))
    return out


def docs_scrape_job() -> dict:
    """The scrape job docs/operations.md gives (the first ```yaml block holding `kubernetes_sd_configs`)."""
    text = (REPO / "docs" / "operations.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        if "kubernetes_sd_configs" in block:
            (job,) = yaml.safe_load(block)["scrape_configs"]
            return job
    raise AssertionError("docs/operations.md has no kubernetes_sd_configs scrape job")


async def test_prometheus_scrapes_both_replicas_and_the_dashboard_has_data(chart, admin, real_cluster,
                                                                    tmp_path):
    await ensure_namespace(admin, "monitoring")
    await admin.request("POST", "/api/v1/namespaces/monitoring/serviceaccounts",
                        body={"metadata": {"name": "prometheus"}})
    token = (await admin.request("POST", "/api/v1/namespaces/monitoring/serviceaccounts/prometheus/token",
                                 body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                       "spec": {"expirationSeconds": 3600}}))["status"]["token"]
    (tmp_path / "token").write_text(token)
    job = docs_scrape_job()
    # outside the cluster: where the API server is and who Prometheus is; the rest as documented
    job["authorization"] = {"credentials_file": str(tmp_path / "token")}
    job["kubernetes_sd_configs"][0].update(api_server=real_cluster.server, authorization={
        "credentials_file": str(tmp_path / "token")}, tls_config={"ca_file": str(real_cluster.ca_file)})
    await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "metadata": {"name": "prometheus-discovery"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]})
    # a little work for the scheduler between scrapes
    ns = "scraped"
    prom = PrometheusServer(prometheus_binary(), [job], scrape_interval_s=2.0, workdir=tmp_path / "prom").start()
    try:
        up = await prom.wait_for_series('up{job="pysched"} == 1', 2, timeout=120)
        assert {s["metric"]["pod"] for s in up} == {p["metadata"]["name"]
                                                    for p in await ready_replicas(admin, NS, RELEASE, 2)}
        await burst(admin, ns, 200, real_cluster.kwok_taint)
        await wait_for(at_least(200, lambda: bound(admin, ns)), 120, what="the pods bound")
        await _gangs_quotas_and_an_unschedulable_pod(admin, real_cluster)
        await prom.wait_for_series('pysched_podgroups_admitted_total{job="pysched"} > 0', 1, timeout=120)
        await prom.wait_for_series('pysched_quota_used{job="pysched"}', 1, timeout=60)
        queries = dashboard_queries()

        async def answered() -> tuple[list[str], list[str]]:
            """(the queries without data, those of them no ONLY_AFTER entry explains)"""
            empty = []
            for q in queries:
                promql = q.replace("$__rate_interval", "5m").replace("$job", "pysched") \
                          .replace("$instance", ".*").replace("$resource", ".*")
                if not await prom.query(promql):
                    empty.append(q)
            return empty, [q for q in empty if not any(metric in q for metric in ONLY_AFTER)]

        async def explained():
            empty, unexplained = await answered()
            return empty if not unexplained else None
        try:   # a rate() needs two scrapes of a series that just appeared
            empty = await wait_for(explained, 60, interval=2, what="every dashboard query with data")
        except AssertionError:
            raise AssertionError("queries without data:\n" + "\n".join((await answered())[1])) from None
        print(f"{len(queries) - len(empty)} of {len(queries)} dashboard queries have data; without: {empty}")
        assert len(queries) - len(empty) >= 47
    finally:
        prom.stop()
        for name in (ns, "scraped-teams"):
            await delete_namespace(admin, name)

