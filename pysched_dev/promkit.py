"""A real Prometheus server, fake node exporters and a slow proxy, for tests and benchmarks.

The scheduler's load-aware scoring reads node utilisation from Prometheus. To test it against the
real thing, this module runs the upstream ``prometheus`` binary (``hack/prometheus.sh``:
``PROMETHEUS`` when set, otherwise built once from the Go module proxy into a cache outside the
repository) scraping fake exporters that serve figures the test chooses:

* ``NodeExporters``: one endpoint per node, ``/nodes/<node>/metrics``, scraped by one job per
  node whose ``instance`` label is relabelled to the node name; figures change with ``set()``.
* ``BulkExporter``: one endpoint for thousands of nodes (benchmarks), each sample carrying its own
  ``instance="<node>"`` label, kept by ``honor_labels``.
* ``PrometheusServer``: the binary on a free loopback port with its own TSDB directory; it can be
  stopped and started again on the same port with the same data (an outage in the middle of a test).
* ``SlowProxy``: a reverse proxy that delays every request, to make Prometheus slow on demand.

Both exporters serve gauges without labels of their own (``NodeExporters``) or with ``instance``
only (``BulkExporter``): ``pysched_test_node_cpu_utilisation`` and
``pysched_test_node_memory_utilisation``, in percent (0..100). Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from pysched_dev.devcluster import PORT_ATTEMPTS, free_port, hack_output, on_fresh_ports, terminate_process, wait_http

__all__ = ["CPU_METRIC", "MEMORY_METRIC", "BulkExporter", "NodeExporters", "PrometheusError",
           "PrometheusServer", "SlowProxy", "prometheus_binary"]

REPO_ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS_SCRIPT = REPO_ROOT / "hack" / "prometheus.sh"

CPU_METRIC = "pysched_test_node_cpu_utilisation"
MEMORY_METRIC = "pysched_test_node_memory_utilisation"

#: The text exposition format every Prometheus version parses (3.x refuses a missing Content-Type).
_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class PrometheusError(RuntimeError):
    """Prometheus could not be obtained, started or queried."""


def prometheus_binary() -> Path:
    """The prometheus binary: ``PYSCHED_PROMETHEUS``, else ``hack/prometheus.sh`` (built on first use)."""
    return hack_output("PYSCHED_PROMETHEUS", PROMETHEUS_SCRIPT)


def _duration(seconds: float) -> str:
    """A Prometheus duration (no fractions: ``1.5s`` is invalid, ``1500ms`` is not)."""
    return f"{max(1, round(seconds * 1000))}ms"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def node_figures(node: str) -> tuple[float, float]:
    """Deterministic (cpu, memory) percentages for a node name, the same in every run (the bulk
    exporter serves them; the cycle-only benchmark reads them from a StaticLoad)."""
    digest = hashlib.sha256(node.encode()).digest()
    return (int.from_bytes(digest[:4]) % 10001 / 100, int.from_bytes(digest[4:8]) % 10001 / 100)


def _header(metric: str, what: str) -> str:
    return f"# HELP {metric} {what} utilisation of the node in percent (pysched test exporter).\n" \
           f"# TYPE {metric} gauge\n"


async def _start_site(app: web.Application, port: int | None) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on 127.0.0.1: on ``port``, or on a free port (fresh ones while taken)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    for attempt in range(1, PORT_ATTEMPTS + 1):
        chosen = port or free_port()
        site = web.TCPSite(runner, "127.0.0.1", chosen, shutdown_timeout=1.0)
        try:
            await site.start()
            return runner, chosen
        except OSError:
            if port or attempt == PORT_ATTEMPTS:
                await runner.cleanup()
                raise
    raise AssertionError("unreachable")


class _Exporter:
    """An aiohttp app on a loopback port serving ``ROUTE`` with ``_metrics``; ``start()``, ``close()``."""

    ROUTE = "/metrics"

    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_get(self.ROUTE, self._metrics)
        self._runner, self.port = await _start_site(app, self.port or None)
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        raise NotImplementedError


class NodeExporters(_Exporter):
    """One node_exporter-like endpoint per fake node, ``/nodes/<node>/metrics``, on one port.

    ``scrape_configs()`` gives Prometheus one job per node (``node-<node>``) whose ``instance``
    label is the node name, so ``pysched_test_node_cpu_utilisation{instance="<node>"}`` is the
    node's figure. Nodes set after Prometheus was configured are served but not scraped.
    """

    ROUTE = "/nodes/{node}/metrics"

    def __init__(self, nodes: Iterable[str] = (), *, cpu: float = 0.0, memory: float = 0.0) -> None:
        super().__init__()
        self.figures: dict[str, tuple[float, float]] = {n: (cpu, memory) for n in nodes}

    def set(self, node: str, *, cpu: float | None = None, memory: float | None = None) -> None:
        """Change a node's figures (percent); the next scrape sees them. Unset figures are kept."""
        old_cpu, old_memory = self.figures.get(node, (0.0, 0.0))
        self.figures[node] = (old_cpu if cpu is None else cpu, old_memory if memory is None else memory)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def targets(self) -> dict[str, str]:
        """Node name -> the ``host:port`` Prometheus scrapes it at (one port, per-node paths)."""
        return {node: self.address for node in self.figures}

    def metrics_path(self, node: str) -> str:
        return f"/nodes/{urllib.parse.quote(node, safe='')}/metrics"

    def scrape_configs(self, interval_s: float | None = None) -> list[dict[str, Any]]:
        """One scrape job per node, its ``instance`` label set to the node name."""
        if not self.port:
            raise PrometheusError("NodeExporters.start() first: the scrape configs name its port")
        jobs = []
        for node, target in self.targets().items():
            job: dict[str, Any] = {
                "job_name": f"node-{node}",
                "metrics_path": self.metrics_path(node),
                "static_configs": [{"targets": [target]}],
                "relabel_configs": [{"target_label": "instance", "replacement": node}],
            }
            if interval_s is not None:
                job["scrape_interval"] = job["scrape_timeout"] = _duration(interval_s)
            jobs.append(job)
        return jobs

    async def _metrics(self, request: web.Request) -> web.Response:
        figures = self.figures.get(request.match_info["node"])
        if figures is None:
            raise web.HTTPNotFound()
        cpu, memory = figures
        body = (f"{_header(CPU_METRIC, 'CPU')}{CPU_METRIC} {cpu}\n"
                f"{_header(MEMORY_METRIC, 'Memory')}{MEMORY_METRIC} {memory}\n")
        return web.Response(body=body.encode(), headers={"Content-Type": _CONTENT_TYPE})


class BulkExporter(_Exporter):
    """One ``/metrics`` endpoint with both gauges for every node, labelled ``instance="<node>"``.

    For benchmarks with thousands of nodes, where a scrape job per node would be too many. Nodes
    given to the constructor get deterministic pseudo-random figures.
    """

    job_name = "pysched-test-nodes"

    def __init__(self, nodes: Iterable[str] = ()) -> None:
        super().__init__()
        self.figures: dict[str, tuple[float, float]] = {n: node_figures(n) for n in nodes}
        self._body: bytes | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def scrape_configs(self, interval_s: float | None = None) -> list[dict[str, Any]]:
        """One job; ``honor_labels`` keeps the exported ``instance`` labels (the node names)."""
        if not self.port:
            raise PrometheusError("BulkExporter.start() first: the scrape config names its port")
        job: dict[str, Any] = {"job_name": self.job_name, "honor_labels": True, "metrics_path": "/metrics",
                               "static_configs": [{"targets": [self.address]}]}
        if interval_s is not None:
            job["scrape_interval"] = job["scrape_timeout"] = _duration(interval_s)
        return [job]

    def _render(self) -> bytes:
        if self._body is None:
            lines = [_header(CPU_METRIC, "CPU")]
            lines += [f'{CPU_METRIC}{{instance="{_label_value(n)}"}} {c}\n' for n, (c, _) in self.figures.items()]
            lines.append(_header(MEMORY_METRIC, "Memory"))
            lines += [f'{MEMORY_METRIC}{{instance="{_label_value(n)}"}} {m}\n' for n, (_, m) in self.figures.items()]
            self._body = "".join(lines).encode()
        return self._body

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._render(), headers={"Content-Type": _CONTENT_TYPE})


class PrometheusServer:
    """The real ``prometheus`` binary on a free loopback port, scraping ``scrape_configs``.

    ``rule_files``: recording (or alerting) rule files it evaluates, by absolute path.
    ``stop()`` then ``start()`` brings it back on the same port with the same TSDB directory
    (``workdir/data``), as a restarted Prometheus would. ``workdir`` is the caller's and is kept.
    """

    def __init__(self, binary: Path, scrape_configs: Sequence[Mapping[str, Any]], *,
                 scrape_interval_s: float = 1.0, workdir: Path, extra_args: Sequence[str] = (),
                 rule_files: Sequence[Path] = ()) -> None:
        self.binary = Path(binary)
        self.rule_files = [Path(f).resolve() for f in rule_files]
        self.scrape_configs = [dict(c) for c in scrape_configs]
        self.scrape_interval_s = scrape_interval_s
        self.workdir = Path(workdir)
        self.extra_args = list(extra_args)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        if not self.port:
            raise PrometheusError("PrometheusServer.start() first: it has no port yet")
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.workdir / "prometheus.yml"

    @property
    def log_file(self) -> Path:
        return self.workdir / "prometheus.log"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        """Start (or start again, on the same port) and wait until ``/-/ready`` answers 200."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        if self.port:
            self._start(self.port, timeout)
        else:
            on_fresh_ports(lambda t: self._start(free_port(), t), timeout)
        return self

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; the port and the data are kept for ``start()``."""
        proc, self.proc = self.proc, None
        terminate_process(proc, grace)

    def _write_config(self) -> None:
        interval = _duration(self.scrape_interval_s)
        config = {"global": {"scrape_interval": interval, "scrape_timeout": interval,
                             "evaluation_interval": interval},
                  "scrape_configs": self.scrape_configs}
        if self.rule_files:  # recording rules, evaluated every scrape interval
            config["rule_files"] = [str(f) for f in self.rule_files]
        self.config_file.write_text(json.dumps(config, indent=1))  # JSON is YAML

    def _start(self, port: int, timeout: float) -> None:
        args = [str(self.binary), f"--config.file={self.config_file}",
                f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                # targets reach the scrape manager at most this often (default 5 s: a slow first scrape)
                "--scrape.discovery-reload-interval=100ms", *self.extra_args]
        log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, cwd=self.workdir)
        self.port = port
        try:
            wait_http(f"{self.address}/-/ready", timeout, self.proc, "prometheus", self.log_file,
                      log_start=log_start)
        except BaseException:
            self.stop()
            raise

    # -- queries -----------------------------------------------------------------------------

    async def query(self, promql: str, *, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The instant-query result (``data.result``: ``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
                session.get(f"{self.address}/api/v1/query", params={"query": promql}) as resp:
            payload = await resp.json(content_type=None)
        if resp.status != 200 or payload.get("status") != "success":
            raise PrometheusError(f"query {promql!r} failed ({resp.status}): {payload}")
        result: list[dict[str, Any]] = payload["data"]["result"]
        return result

    async def wait_for_series(self, query: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll the instant query until its vector has at least ``count`` series; returns them."""
        deadline = time.monotonic() + timeout
        last: list[dict[str, Any]] | str = []
        while True:
            try:
                last = await self.query(query)
                if len(last) >= count:
                    return last
            except (aiohttp.ClientError, TimeoutError, PrometheusError) as exc:
                last = repr(exc)
            if time.monotonic() >= deadline:
                got = f"{len(last)} series" if isinstance(last, list) else last
                raise PrometheusError(f"{query!r}: wanted {count} series within {timeout}s, last got {got}")
            await asyncio.sleep(0.2)


_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"})


class SlowProxy:
    """An HTTP reverse proxy on a free loopback port that waits ``delay_s`` before each request.

    Put it between the scheduler and a ``PrometheusServer`` (``SlowProxy(prom.address)``) and
    raise ``delay_s`` at any time to make queries slow or time out. Bodies are passed through
    as they are (compressed ones stay compressed).
    """

    def __init__(self, upstream: str, *, delay_s: float = 0.0) -> None:
        self.upstream = upstream.rstrip("/")
        if "://" not in self.upstream:
            self.upstream = f"http://{self.upstream}"
        self.delay_s = delay_s
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> str:
        if not self.port:
            raise PrometheusError("SlowProxy.start() first: it has no port yet")
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> SlowProxy:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=120))
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        try:
            self._runner, self.port = await _start_site(app, self.port or None)
        except BaseException:
            await self._session.close()
            raise
        return self

    async def close(self) -> None:
        for task in list(self._in_flight):  # requests still waiting out the delay are abandoned
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _forward(self, request: web.Request) -> web.Response:
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        try:
            return await self._forward_after_delay(request)
        finally:
            self._in_flight.discard(task)

    async def _forward_after_delay(self, request: web.Request) -> web.Response:
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        if self._session is None:
            return web.Response(status=503, text="slow proxy: closed\n")
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP)
        body = await request.read()
        try:
            url = URL(f"{self.upstream}{request.raw_path}", encoded=True)
            async with self._session.request(request.method, url, headers=headers, data=body or None,
                                             allow_redirects=False) as resp:
                payload = await resp.read()
                out_headers = CIMultiDict((k, v) for k, v in resp.headers.items() if k.lower() not in _HOP_BY_HOP)
                return web.Response(status=resp.status, body=payload, headers=out_headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.Response(status=502, text=f"slow proxy: upstream {self.upstream}: {exc!r}\n")
