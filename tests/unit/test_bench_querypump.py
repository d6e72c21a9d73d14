"""QueryPump: the loadaware profile's Prometheus queries, sent during the other profiles' runs so
every run puts the same load on Prometheus (and on the CPU it shares with the API server)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from bench.querypump import QueryPump
from bench.schedulers import load_aware_pump, pysched_profile
from pysched.apis.config import decode
from pysched.loadmetrics.collector import LoadCollector
from pysched.tools.offline import OfflineScheduler


async def prometheus(status: int = 200):
    seen: list[str] = []

    async def query(request: web.Request) -> web.Response:
        seen.append(request.query["query"])
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}},
                                 status=status)
    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}", seen


async def until(predicate) -> None:
    for _ in range(2000):            # a liveness bound, not a speed check
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


async def test_every_round_sends_every_query_and_reads_the_answers():
    runner, address, seen = await prometheus()
    pump = QueryPump(address, ["q1", "q2"], interval=0.01, timeout=5).start()
    await until(lambda: pump.rounds >= 3)
    await pump.stop()
    await runner.cleanup()
    assert pump.failures == 0
    assert seen[:6].count("q1") == 3 and seen[:6].count("q2") == 3


async def test_a_round_with_an_error_answer_is_counted_as_failed_and_the_pump_goes_on():
    runner, address, _ = await prometheus(status=503)
    pump = QueryPump(address, ["q"], interval=0.01, timeout=5).start()
    await until(lambda: pump.failures >= 2)
    await pump.stop()
    await runner.cleanup()
    assert pump.rounds == 0


async def test_started_again_it_runs_one_loop_from_the_new_start():
    runner, address, seen = await prometheus()
    pump = QueryPump(address, ["q"], interval=3600, timeout=5).start()
    await until(lambda: pump.rounds == 1)
    pump.start()                                 # a second scheduler process in the same run
    await until(lambda: pump.rounds == 2)        # its first round at once, not after the interval
    await pump.stop()
    await runner.cleanup()
    assert seen == ["q", "q"]


def test_the_pump_sends_exactly_what_the_loadaware_scheduler_sends():
    address = "http://127.0.0.1:9"
    cfg = decode.parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [pysched_profile("pysched", "loadaware", metrics_address=address)]})
    collector = LoadCollector()
    OfflineScheduler(cfg, load=collector)        # the plugins subscribe their queries
    (provider,) = collector.providers.values()
    sent = sorted(provider.source.wrap(query) for query, _ in provider.series)
    pump = load_aware_pump(address)
    assert sorted(pump.queries) == sent and len(sent) == 5
    assert (pump.interval, pump.timeout) == (provider.provider.interval_seconds, provider.provider.timeout_seconds)
