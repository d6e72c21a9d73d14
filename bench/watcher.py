"""The benchmark's separate watcher process: timestamps when each measured pod appears and is bound.

``python -m bench.watcher --kubeconfig K --namespace NS --selector L --expect N --out FILE``
lists the matching pods, prints ``READY`` once the list is done (the watch then resumes from the
list's resourceVersion, so nothing created after READY is missed), and follows the watch until
``N`` pods have ``spec.nodeName`` or ``--timeout`` passes. It writes
``{"pods": {name: {"seen": t, "bound": t|null, "node": name|null}}}`` with wall-clock
(``time.time()``) timestamps so the driver can line them up with its own clock.

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

from pysched.client.auth import load as load_credentials
from pysched.client.rest import ApiError, KubeClient

from .process import BenchError


async def watch(args) -> dict:
    client = KubeClient(load_credentials(args.kubeconfig), qps=1000, burst=1000, max_connections=4)
    path = f"/api/v1/namespaces/{args.namespace}/pods"
    records: dict[str, dict] = {}
    bound = 0

    def observe(pod: dict, now: float) -> None:
        nonlocal bound
        name = pod["metadata"]["name"]
        rec = records.get(name)
        if rec is None:
            rec = records[name] = {"seen": now, "bound": None, "node": None}
        node = (pod.get("spec") or {}).get("nodeName")
        if node and rec["bound"] is None:
            rec["bound"], rec["node"] = now, node
            bound += 1

    async def relist() -> str:
        items, rv = await client.list_all(path, {"labelSelector": args.selector})
        now = time.time()
        for pod in items:
            observe(pod, now)
        return rv

    try:
        rv = await relist()
        print("READY", flush=True)
        deadline = time.monotonic() + args.timeout
        while bound < args.expect and time.monotonic() < deadline:
            params = {"labelSelector": args.selector, "resourceVersion": rv, "allowWatchBookmarks": "true",
                      "timeoutSeconds": str(max(1, int(deadline - time.monotonic())))}
            try:
                async for ev in client.watch(path, params):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""))
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        observe(obj, time.time())
                        if bound >= args.expect:
                            break
            except ApiError as exc:
                if exc.status == 410:
                    rv = await relist()
                else:
                    print(f"watch error: {exc}", file=sys.stderr, flush=True)
                    await asyncio.sleep(0.2)
    finally:
        await client.close()
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
                rundir: Path, cwd: Path) -> Spawned:
    """Start ``python -m bench.watcher`` and return once it printed READY (its list is done)."""
    out = rundir / "watcher.json"
    out.unlink(missing_ok=True)
    with open(rundir / "watcher.log", "ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.watcher", "--kubeconfig", str(kubeconfig), "--namespace", namespace,
            "--selector", selector, "--expect", str(expect), "--timeout", str(timeout), "--out", str(out),
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
    args = p.parse_args(argv)
    result = asyncio.run(watch(args))
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
