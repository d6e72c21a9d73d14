"""The benchmark's separate watcher process: timestamps when each measured pod appears and is bound.

``python -m bench.watcher --kubeconfig K --namespace NS --selector L --expect N --out FILE``
lists the matching pods, prints ``READY`` once the list is done (the watch then resumes from the
list's resourceVersion, so nothing created after READY is missed), and follows the watch until
``N`` pods have ``spec.nodeName`` or ``--timeout`` passes. With ``--events-controller NAME`` it also
watches that scheduler's ``Scheduled`` Events (``bench.events``) and, after the last bind, goes on
until every bound pod has one (or they stop coming). It writes
``{"pods": {name: {"seen": t, "bound": t|null, "node": name|null, "event": t|null}}}`` with
wall-clock (``time.time()``) timestamps so the driver can line them up with its own clock.

The driver side is ``spawn``: it starts this module as a child process (which inherits the
driver's CPU affinity), waits for ``READY`` and returns a handle whose ``records()`` waits for the
process to finish and reads its output.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from pysched.client.auth import load as load_credentials
from pysched.client.rest import ApiError, KubeClient

from .events import EventClock
from .process import BenchError


async def _follow(client: KubeClient, path: str, params: dict, rv: str, observe, relist) -> None:
    """Watch ``path`` from ``rv`` for ever (the caller cancels), re-listing after 410 Gone."""
    while True:
        p = dict(params, resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds="300")
        try:
            async for ev in client.watch(path, p):
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""))
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if ev.get("type") in ("ADDED", "MODIFIED"):
                    observe(obj, time.time())
        except ApiError as exc:
            if exc.status == 410:
                rv = await relist()
            else:
                print(f"watch error: {path}: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.2)
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            # A quiet stream (no event and no bookmark for the client's read timeout, e.g. while a
            # scheduler is slow to bind anything) is resumed from the last resourceVersion.
            print(f"watch interrupted: {path}: {exc!r}; resuming", file=sys.stderr, flush=True)
            await asyncio.sleep(0.2)


async def watch(args) -> dict:
    client = KubeClient(load_credentials(args.kubeconfig), qps=1000, burst=1000, max_connections=4)
    pods_path = f"/api/v1/namespaces/{args.namespace}/pods"
    pod_params = {"labelSelector": args.selector}
    events_path = f"/apis/events.k8s.io/v1/namespaces/{args.namespace}/events"
    event_params = {"fieldSelector": f"reason=Scheduled,reportingController={args.events_controller}"}
    records: dict[str, dict] = {}
    bound = 0
    clock = EventClock(args.events_controller) if args.events_controller else None
    changed = asyncio.Event()

    def observe_pod(pod: dict, now: float) -> None:
        nonlocal bound
        name = pod["metadata"]["name"]
        rec = records.get(name)
        if rec is None:
            rec = records[name] = {"seen": now, "bound": None, "node": None, "event": None}
        node = (pod.get("spec") or {}).get("nodeName")
        if node and rec["bound"] is None:
            rec["bound"], rec["node"] = now, node
            bound += 1
            if clock is not None:
                clock.bound_pod(name)
            changed.set()

    def observe_event(ev: dict, now: float) -> None:
        assert clock is not None
        clock.observe(ev, now)
        changed.set()

    async def relist(path: str, params: dict, observe) -> str:
        items, rv = await client.list_all(path, params)
        now = time.time()
        for obj in items:
            observe(obj, now)
        return rv

    async def relist_pods() -> str:
        return await relist(pods_path, pod_params, observe_pod)

    async def relist_events() -> str:
        return await relist(events_path, event_params, observe_event)

    tasks: list[asyncio.Task] = []
    try:
        rv = await relist_pods()
        tasks.append(asyncio.create_task(_follow(client, pods_path, pod_params, rv, observe_pod, relist_pods)))
        if clock is not None:
            erv = await relist_events()
            tasks.append(asyncio.create_task(
                _follow(client, events_path, event_params, erv, observe_event, relist_events)))
        print("READY", flush=True)
        deadline = time.monotonic() + args.timeout
        all_bound_at: float | None = None
        while time.monotonic() < deadline:
            changed.clear()
            for t in tasks:
                if t.done():
                    t.result()   # a watch loop only ends by raising
            if all_bound_at is None and bound >= args.expect:
                all_bound_at = time.time()
            if all_bound_at is not None and (clock is None or clock.done(all_bound_at, time.time())):
                break
            try:
                await asyncio.wait_for(changed.wait(), 0.5)
            except TimeoutError:
                pass
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
    if clock is not None:
        for name, rec in records.items():
            rec["event"] = clock.first.get(name)
    return {"pods": records}


class Spawned:
    """A running watcher process (driver side)."""

    def __init__(self, proc: asyncio.subprocess.Process, out: Path):
        self.proc, self.out = proc, out

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def records(self, alive: Callable[[], None]) -> dict[str, dict]:
        """Wait until the watcher has seen every pod bound (or timed out); ``alive()`` is called every
        second and may raise to abort the wait. Returns ``{pod name: {"seen", "bound", "node"}}``."""
        while self.proc.returncode is None:
            alive()
            try:
                await asyncio.wait_for(self.proc.wait(), 1.0)
            except TimeoutError:
                pass
        if self.proc.returncode != 0 or not self.out.exists():
            raise BenchError(f"watcher exited with {self.proc.returncode}")
        return json.loads(self.out.read_text())["pods"]

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


async def spawn(kubeconfig: Path, namespace: str, selector: str, expect: int, timeout: float,
                rundir: Path, cwd: Path, events_controller: str = "") -> Spawned:
    """Start ``python -m bench.watcher`` and return once it printed READY (its list is done)."""
    out = rundir / "watcher.json"
    out.unlink(missing_ok=True)
    with open(rundir / "watcher.log", "ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.watcher", "--kubeconfig", str(kubeconfig), "--namespace", namespace,
            "--selector", selector, "--expect", str(expect), "--timeout", str(timeout), "--out", str(out),
            *(["--events-controller", events_controller] if events_controller else []),
            cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=log)
    spawned = Spawned(proc, out)
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
    except TimeoutError:
        line = b""
    if line.strip() != b"READY":
        spawned.kill()
        raise BenchError(f"watcher did not start: {line!r}")
    return spawned


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.watcher")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--selector", required=True)
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", required=True)
    p.add_argument("--events-controller", default="",
                   help="also time this scheduler's Scheduled Events (reportingController)")
    args = p.parse_args(argv)
    result = asyncio.run(watch(args))
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
