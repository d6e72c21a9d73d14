"""A header flood cannot push `pysched extender` or the scheduler's secure port past its memory limit,
keep legitimate callers out, or flood the log. The servers run as deployed (``python -m pysched``);
the flood is another process, connecting from 127.0.0.2: 300 slow clients, each trickling 100
header fields of 8 KiB and never finishing its request."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from pysched.apis.core.quantity import parse_quantity
from pysched_dev.devcluster import free_port
from pysched_dev.testkit import create_nodes, make_node, make_pod

from .conftest import REPO, SchedulerProcess, https_get, scheduler_config

pytestmark = pytest.mark.e2e

FLOOD_SECONDS = 15.0


def manifest_memory_limit(path: str) -> int:
    """resources.limits.memory of the first container in a Deployment manifest, in bytes."""
    dep = yaml.safe_load((REPO / path).read_text())
    limit = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    return int(parse_quantity(limit))


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def under_flood(pid: int, port: int, *, tls: bool, legit) -> tuple[int, int, list]:
    """Run the flood beside ``legit()`` calls every 0.2 s; returns (RSS before, peak RSS, answers)."""
    before = rss(pid)
    flood = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pysched_dev.flood", "--host", "127.0.0.1", "--port", str(port),
        "--connections", "300", "--headers", "100", "--size", "8192", "--seconds", str(FLOOD_SECONDS),
        "--source", "127.0.0.2", *(["--tls"] if tls else []), cwd=REPO, stdout=subprocess.PIPE)
    peak, answers = before, []
    start = time.monotonic()
    while flood.returncode is None and time.monotonic() - start < FLOOD_SECONDS + 30:
        peak = max(peak, rss(pid))
        if time.monotonic() - start > 2:   # the flood is at full strength by now
            answers.append(await legit())
        try:
            await asyncio.wait_for(flood.wait(), 0.2)
        except TimeoutError:
            pass
    out, _ = await flood.communicate()
    print(f"flood: {out.decode().strip()}; RSS before {before / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB")
    return before, peak, answers


def assert_quiet(log: str, max_lines: int = 6) -> None:
    """Rate-limited: a couple of lines per client for the whole flood, and no traceback."""
    assert "Traceback" not in log and "exc_info" not in log
    noisy = [ln for ln in log.splitlines() if "rejected a malformed request" in ln or "to make room" in ln]
    assert 0 < len(noisy) <= max_lines, "\n".join(noisy[:20])


async def test_extender_under_a_header_flood(control_plane, admin, tmp_path):
    limit = manifest_memory_limit("manifests/components/extender/deployment.yaml")
    await create_nodes(admin, [make_node("n1")])
    port = free_port()
    log_path = tmp_path / "extender.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pysched", "extender", "--kubeconfig", str(control_plane.kubeconfig),
             "--port", str(port), "--insecure-allow-unauthenticated-bind"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as session:
            for _ in range(300):
                try:
                    async with session.get("/readyz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            pod = make_pod("legit")
            pod["metadata"]["uid"] = "uid-legit"
            body = orjson.dumps({"Pod": pod, "NodeNames": ["n1"]})

            async def legit():
                async with session.post("/filter", data=body, timeout=aiohttp.ClientTimeout(total=10)) as r:
                    return r.status, (await r.json())["NodeNames"] if r.status == 200 else await r.text()

            _, peak, answers = await under_flood(proc.pid, port, tls=False, legit=legit)
            assert answers and all(a == (200, ["n1"]) for a in answers), answers[:5]
            async with session.get("/metrics") as r:
                metrics = await r.text()
        assert peak < limit, f"peak RSS {peak / 2**20:.0f} MiB is over the manifest's limit {limit / 2**20:.0f} MiB"
        evicted = re.search(r'pysched_http_connections_shed_total\{reason="evicted",server="extender"\} (\S+)',
                            metrics)
        assert evicted and float(evicted.group(1)) > 0
    finally:
        proc.terminate()
        proc.wait(30)
    assert_quiet(log_path.read_text())


async def test_secure_port_under_a_header_flood(control_plane, tmp_path):
    limit = manifest_memory_limit("manifests/deployment.yaml")
    sched = SchedulerProcess(control_plane, tmp_path, scheduler_config())
    sched.start()
    try:
        await sched.wait_log("serving securely", 60)
        await sched.wait_log("caches synced", 60)

        async def legit():
            return await https_get(sched.url + "/healthz")

        _, peak, answers = await under_flood(sched.proc.pid, sched.port, tls=True, legit=legit)
        assert answers and all(a == (200, "ok") for a in answers), [a for a in answers if a != (200, "ok")][:5]
        assert await sched.metric("pysched_http_connections_shed_total", server="secure", reason="evicted") > 0
        assert peak < limit, f"peak RSS {peak / 2**20:.0f} MiB is over the manifest's limit {limit / 2**20:.0f} MiB"
    finally:
        sched.terminate()
        sched.close()
    assert_quiet(sched.log())
