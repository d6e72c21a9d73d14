"""End-to-end fixtures: a real etcd + kube-apiserver per test, and the scheduler as a subprocess.

Every test gets its own control plane (random loopback ports, a temp dir, processes killed at
the end), so tests cannot see each other's nodes; ``cppool`` starts it while the test before runs
and stops it after. The scheduler runs as ``python -m pysched`` exactly as deployed, so killing it
with SIGKILL is a real crash. Under pytest-xdist each worker takes its ports from its own slice of
the range (``PYSCHED_PORT_SLICE``), so parallel workers never pick the same port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import PORT_SLICE_ENV, ControlPlane, free_port
from pysched_dev.testkit import poll_until

from . import durations
from .cppool import ControlPlanePool

REPO = Path(__file__).resolve().parents[2]
_POOL = ControlPlanePool()
_next_item: list[pytest.Item | None] = [None]


def pytest_configure(config):
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and count.isdigit():
        os.environ[PORT_SLICE_ENV] = f"{int(worker[2:])}/{int(count)}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _next_item[0] = nextitem


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """While this test runs, start the control plane the next one will ask for."""
    nxt = _next_item[0]
    if nxt is not None and "control_plane" in getattr(nxt, "fixturenames", ()):
        _POOL.warm()


def pytest_collection_modifyitems(session, config, items):
    """Longest end-to-end tests first (``durations``), the fast ones (unit tests, the policy
    plugins' own) last, where they fill the gaps a parallel run leaves. Under xdist's worksteal
    each worker starts with a contiguous slice of this order: the tests are dealt to the slices in
    turn, so each begins with its share of the long ones."""
    table = durations.load()

    def rank(item):
        if "e2e" not in Path(str(item.fspath)).parts:
            return 0.0
        return table.get(item.nodeid, durations.DEFAULT_S)
    ordered = sorted(items, key=rank, reverse=True)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    items[:] = durations.deal(ordered, workers)


def pytest_sessionfinish(session, exitstatus):
    _POOL.close()


@pytest.fixture
def control_plane():
    cp = _POOL.take()
    try:
        yield cp
    finally:
        _POOL.give_back(cp)


@pytest.fixture
def living_cluster(request):
    """etcd, kube-apiserver, kube-controller-manager and KWOK (``pysched_dev.livecluster``), with an
    audit log of every pod binding; ``@pytest.mark.living(...)`` passes ``LivingCluster`` arguments."""
    from pysched_dev.livecluster import LivingCluster

    from .auditkit import audit_policy

    marker = request.node.get_closest_marker("living")
    kwargs = dict(marker.kwargs) if marker else {}
    kwargs.setdefault("audit_policy", audit_policy(("", ["pods/binding"]), verbs=("create",)))
    lc = LivingCluster(**kwargs)
    lc.start()
    try:
        yield lc
    finally:
        lc.stop()


async def _admin_client(cp: ControlPlane):
    client = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def live_admin(living_cluster):
    async for client in _admin_client(living_cluster.cp):
        yield client


@pytest.fixture
def live_scheduler_factory(living_cluster, tmp_path):
    """``python -m pysched`` processes against the living cluster (``scheduler_factory``'s twin)."""
    yield from _scheduler_factory(living_cluster.cp, tmp_path)


@pytest_asyncio.fixture
async def admin(control_plane):
    async for client in _admin_client(control_plane):
        yield client


def scheduler_config(**overrides) -> dict:
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "profiles": [{"schedulerName": "pysched"}],
    }
    cfg.update(overrides)
    return cfg


ADMIN = object()   # SchedulerProcess.get's default credential: the control plane's admin token


async def https_get(url: str, *, token: str | None = None, cert: tuple | None = None) -> tuple[int, str]:
    """GET over HTTPS without verifying the server (self-signed), with a bearer token and/or client cert."""
    import ssl

    import aiohttp
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s:
        async with s.get(url, ssl=ctx, headers=headers, timeout=aiohttp.ClientTimeout(total=10)) as r:
            return r.status, await r.text()


class SchedulerProcess:
    """``python -m pysched`` against the test control plane; output captured to a file."""

    def __init__(self, cp: ControlPlane, tmp_path: Path, config: dict | None = None, name: str = "sched",
                 kubeconfig: Path | None = None, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None):
        self.cp = cp
        self.name = name
        self.config_path = tmp_path / f"{name}-config.yaml"
        self.config_path.write_text(yaml.safe_dump(config or scheduler_config()))
        self.log_path = tmp_path / f"{name}.log"
        self.kubeconfig = kubeconfig or cp.kubeconfig
        self.extra_args = extra_args or []
        self.env = env
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.port = free_port()
        self.cert_dir = tmp_path / f"{name}-certs"

    def start(self) -> SchedulerProcess:
        self._log = open(self.log_path, "ab")
        env = dict(self.env if self.env is not None else os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pysched", "--config", str(self.config_path),
             "--kubeconfig", str(self.kubeconfig), "--log-level", "info", "--bind-address", "127.0.0.1",
             "--secure-port", str(self.port), "--cert-dir", str(self.cert_dir), *self.extra_args],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def get(self, path: str, *, token: str | None = ADMIN, cert: tuple | None = None) -> tuple[int, str]:
        """GET on the scheduler's secure port (self-signed certificate).

        Authenticated by default as the control plane's admin (group system:masters), as a
        Prometheus would with its token; ``token=None`` sends no credentials, ``cert=(crt, key)``
        presents a client certificate.
        """
        return await https_get(self.url + path, token=self.cp.admin_token if token is ADMIN else token, cert=cert)

    async def metric(self, metric_name: str, **labels) -> float | None:
        from prometheus_client.parser import text_string_to_metric_families
        _, text = await self.get("/metrics")
        for fam in text_string_to_metric_families(text):
            for sample in fam.samples:
                if sample.name == metric_name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def wait_log(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"scheduler exited ({self.proc.returncode}):\n{self.log()[-4000:]}")
            await asyncio.sleep(0.1)
        raise AssertionError(f"{needle!r} not logged within {timeout}s:\n{self.log()[-4000:]}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode if self.proc else 0

    def close(self) -> None:
        self.kill()
        if self._log:
            self._log.close()


@pytest.fixture
def scheduler_factory(control_plane, tmp_path):
    yield from _scheduler_factory(control_plane, tmp_path)


def _scheduler_factory(cp: ControlPlane, tmp_path: Path):
    """Yields ``make(config, name, **kw)``, which creates SchedulerProcesses; closes them all after."""
    procs: list[SchedulerProcess] = []

    def make(config: dict | None = None, name: str | None = None, **kw) -> SchedulerProcess:
        p = SchedulerProcess(cp, tmp_path, config, name or f"sched{len(procs)}", **kw)
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.close()


async def wait_for(predicate, timeout: float = 60.0, interval: float = 0.25, what: str = "condition"):
    """Poll an async predicate until it returns a truthy value (a liveness timeout, not a speed check)."""
    return await poll_until(predicate, timeout, interval=interval, fail=lambda last: AssertionError(
        f"timed out after {timeout}s waiting for {what}; last={last!r}"))
