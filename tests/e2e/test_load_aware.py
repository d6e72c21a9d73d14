"""Load-aware scoring against a real Prometheus scraping per-node exporters served by the test.

The scheduler runs as deployed with TargetLoadPacking as its only score, reading
``pysched_test_node_cpu_utilisation`` through Prometheus's HTTP API. Pods land where the policy
says, a burst spreads, a stopped Prometheus only changes scores (the fallback is used and counted,
nothing fails), and a Prometheus slower than the timeout never holds a scheduling cycle.
"""

from __future__ import annotations

import pytest

from pysched_dev.promkit import CPU_METRIC, NodeExporters, PrometheusServer, SlowProxy, prometheus_binary
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .conftest import scheduler_config, wait_for

pytestmark = pytest.mark.e2e


def load_config(address: str, *, timeout: float = 0.5, fallback: str = "Neutral", pending: float = 60) -> dict:
    tlp = {"name": "TargetLoadPacking"}
    return scheduler_config(profiles=[{
        "schedulerName": "pysched",
        "plugins": {"preScore": {"enabled": [tlp]}, "reserve": {"enabled": [tlp]},
                    "score": {"disabled": [{"name": "*"}], "enabled": [tlp]}},
        "pluginConfig": [{"name": "TargetLoadPacking", "args": {
            "metricProvider": {"type": "Prometheus", "address": address, "intervalSeconds": 1,
                               "timeoutSeconds": timeout},
            "query": CPU_METRIC, "fallback": fallback, "maxStalenessSeconds": 10,
            "pendingLoadSeconds": pending}}],
    }])


def one_cpu(name: str) -> dict:
    return make_pod(name, cpu=None, memory=None, limits_only={"cpu": "1"})


async def bound(admin, names) -> dict[str, str] | None:
    pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, "default")}
    return pods if all(pods.get(n) for n in names) else None


async def failed_scheduling(admin) -> list[dict]:
    evs = (await admin.get("/apis/events.k8s.io/v1/namespaces/default/events"))["items"]
    return [e for e in evs if e["reason"] == "FailedScheduling"]


@pytest.fixture
async def exporters():
    ex = await NodeExporters().start()
    try:
        yield ex
    finally:
        await ex.close()


async def start_prometheus(exporters, tmp_path, nodes: dict[str, float]) -> PrometheusServer:
    for node, cpu in nodes.items():
        exporters.set(node, cpu=cpu, memory=10)
    prom = PrometheusServer(prometheus_binary(), exporters.scrape_configs(1.0), scrape_interval_s=1.0,
                            workdir=tmp_path / "prometheus").start()
    await prom.wait_for_series(CPU_METRIC, len(nodes), timeout=60)
    return prom


async def test_pods_follow_target_packing_and_a_burst_spreads(admin, scheduler_factory, exporters, tmp_path):
    figures = {"packed": 15, "idle": 0, "b": 20, "c": 20, "hot": 90}
    prom = await start_prometheus(exporters, tmp_path, figures)
    try:
        await create_nodes(admin, [make_node(n, cpu="4", memory="16Gi") for n in figures])
        sched = scheduler_factory(load_config(prom.address)).start()
        await wait_for(lambda: sched_metric_is(sched, "pysched_metrics_source_up", 1), 60, what="source up")
        # One 1-CPU pod: "packed" reaches the 40 % target exactly (100); the idle node only 25 % (78).
        await create_pods(admin, [one_cpu("first")])
        placed = await wait_for(lambda: bound(admin, ["first"]), 60, what="first pod bound")
        assert placed["first"] == "packed"
        # A burst of three more: each placement counts on its node until a sample has it, so they
        # spread (idle 78, then b/c 37 each) instead of piling onto one node. Without that
        # accounting every pod would read the same samples and all go to "packed" again.
        await create_pods(admin, [one_cpu(f"burst-{i}") for i in range(3)])
        placed = await wait_for(lambda: bound(admin, [f"burst-{i}" for i in range(3)]), 60, what="burst bound")
        assert sorted(placed[f"burst-{i}"] for i in range(3)) == ["b", "c", "idle"]
        assert await sched.metric("pysched_metrics_fallbacks_total") is None     # never needed
    finally:
        prom.stop()


async def sched_metric_is(sched, name: str, value: float, **labels) -> bool:
    """Whether the scheduler serves ``name`` at ``value`` (False while its port is not up yet)."""
    if sched.proc.poll() is not None:
        raise AssertionError(f"scheduler exited:\n{sched.log()[-4000:]}")
    try:
        return await sched.metric(name, **labels) == value
    except OSError:
        return False


async def test_prometheus_outage_falls_back_and_recovers(admin, scheduler_factory, exporters, tmp_path):
    figures = {"n1": 15, "n2": 20}
    prom = await start_prometheus(exporters, tmp_path, figures)
    try:
        await create_nodes(admin, [make_node(n, cpu="4", memory="16Gi") for n in figures])
        # pendingLoadSeconds 0: placements count only until the next sample (none during the outage)
        sched = scheduler_factory(load_config(prom.address, pending=0)).start()
        await wait_for(lambda: sched_metric_is(sched, "pysched_metrics_source_up", 1), 60, what="source up")
        prom.stop()
        await wait_for(lambda: sched_metric_is(sched, "pysched_metrics_source_up", 0), 30, what="source down")
        source = f"prometheus:{prom.address}"

        async def stale() -> bool:      # the samples from before the outage served until now
            age = await sched.metric("pysched_metrics_sample_age_seconds", source=source)
            return age is not None and age > 11
        await wait_for(stale, 30, what="samples older than maxStalenessSeconds")
        # Scheduling goes on with the configured fallback (Neutral), counted by reason.
        await create_pods(admin, [make_pod(f"during-{i}", cpu="100m") for i in range(3)])
        await wait_for(lambda: bound(admin, [f"during-{i}" for i in range(3)]), 60, what="pods bound during the outage")
        down = await sched.metric("pysched_metrics_fallbacks_total", plugin="TargetLoadPacking", reason="source_down")
        assert down is not None and down >= 3
        assert not await failed_scheduling(admin)
        # Back: the next cycles read fresh samples and take no fallback.
        prom.start()
        await wait_for(lambda: sched_metric_is(sched, "pysched_metrics_source_up", 1), 60, what="source up again")

        async def fresh() -> bool:      # the age gauge is refreshed once a second
            age = await sched.metric("pysched_metrics_sample_age_seconds", source=source)
            return age is not None and age < 10
        await wait_for(fresh, 10, what="sample age back under maxStalenessSeconds")
        before = await sched.metric("pysched_metrics_fallbacks_total", plugin="TargetLoadPacking", reason="source_down")
        await create_pods(admin, [one_cpu("after")])
        placed = await wait_for(lambda: bound(admin, ["after"]), 60, what="pod bound after the outage")
        assert placed["after"] == "n1"         # 15 % + 1 core = 40 %: the target, from fresh data
        assert await sched.metric("pysched_metrics_fallbacks_total", plugin="TargetLoadPacking",
                                  reason="source_down") == before
    finally:
        prom.stop()


async def test_a_slow_prometheus_never_holds_a_cycle(admin, scheduler_factory, exporters, tmp_path):
    figures = {"n1": 15, "n2": 20}
    prom = await start_prometheus(exporters, tmp_path, figures)
    proxy = await SlowProxy(prom.address, delay_s=30.0).start()
    try:
        await create_nodes(admin, [make_node(n, cpu="4", memory="16Gi") for n in figures])
        sched = scheduler_factory(load_config(proxy.address, timeout=0.5)).start()
        await wait_for(lambda: sched_metric_is(sched, "pysched_metrics_source_up", 0), 60, what="first fetch timed out")
        await create_pods(admin, [make_pod(f"p{i}", cpu="100m") for i in range(5)])
        await wait_for(lambda: bound(admin, [f"p{i}" for i in range(5)]), 60, what="pods bound")
        source = f"prometheus:{proxy.address}"
        timeouts = await sched.metric("pysched_metrics_fetch_duration_seconds_count", source=source, result="timeout")
        assert timeouts and timeouts >= 1
        # Each fetch waited up to its 0.5 s bound on a proxy that answers after 30 s; no cycle
        # waited for any of them (one that did would take up to 30 s, or up to the 0.5 s bound).
        cycles = await sched.metric("scheduler_scheduling_algorithm_duration_seconds_count")
        fast = await sched.metric("scheduler_scheduling_algorithm_duration_seconds_bucket", le="0.256")
        assert cycles and cycles >= 5 and fast == cycles, (cycles, fast)
        assert not await failed_scheduling(admin)
    finally:
        await proxy.close()
        prom.stop()
