"""The benchmark's separate watcher process: timestamps when each measured pod appears and is bound.

``python -m bench.watcher --kubeconfig K --namespace NS --selector L --expect N --out FILE``
lists the matching pods, prints ``READY`` once the list is done (the watch then resumes from the
list's resourceVersion, so nothing created after READY is missed), and follows the watch until
``N`` pods have ``spec.nodeName`` or ``--timeout`` passes. It writes
``{"pods": {name: {"seen": t, "bound": t|null, "node": name|null}}}`` with wall-clock
(``time.time()``) timestamps so the driver can line them up with its own clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from pysched.client.auth import load as load_credentials
from pysched.client.rest import ApiError, KubeClient


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
