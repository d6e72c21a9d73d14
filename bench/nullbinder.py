"""The null binder: the control plane's own ceiling for create + bind.

``python -m bench.nullbinder --kubeconfig K --scheduler-name NAME [--qps Q --burst B]`` watches
pending pods with that ``schedulerName`` and binds each to the next node in round-robin order,
with no filtering or scoring, through the same client (pysched.client.rest: its keep-alive pool,
orjson, token bucket) and bind concurrency as pysched. Whatever rate it reaches is what the API
server and etcd on this machine allow; a real scheduler can only approach it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from pysched.client.auth import load as load_credentials
from pysched.client.rest import ApiError, KubeClient


async def run(args) -> None:
    client = KubeClient(load_credentials(args.kubeconfig), qps=args.qps, burst=args.burst,
                        max_connections=args.concurrency)
    nodes, _ = await client.list_all("/api/v1/nodes")
    names = [n["metadata"]["name"] for n in nodes]
    if not names:
        raise SystemExit("null binder: no nodes")
    selector = f"spec.schedulerName={args.scheduler_name},spec.nodeName="
    sem = asyncio.Semaphore(args.concurrency)
    seen: set[str] = set()
    tasks: set[asyncio.Task] = set()
    nxt = 0

    async def bind(ns: str, name: str, uid: str, node: str) -> None:
        async with sem:
            try:
                await client.bind_pod(ns, name, uid, node)
            except ApiError as exc:
                if exc.status not in (404, 409):
                    print(f"bind failed pod={ns}/{name} node={node} error={exc}", file=sys.stderr, flush=True)

    def enqueue(pod: dict) -> None:
        nonlocal nxt
        m = pod["metadata"]
        if m["uid"] in seen or (pod.get("spec") or {}).get("nodeName"):
            return
        seen.add(m["uid"])
        node = names[nxt % len(names)]
        nxt += 1
        t = asyncio.create_task(bind(m["namespace"], m["name"], m["uid"], node))
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    async def relist() -> str:
        items, rv = await client.list_all("/api/v1/pods", {"fieldSelector": selector})
        for pod in items:
            enqueue(pod)
        return rv

    rv = await relist()
    print("READY", flush=True)
    while True:
        try:
            async for ev in client.watch("/api/v1/pods", {"fieldSelector": selector, "resourceVersion": rv,
                                                          "allowWatchBookmarks": "true"}):
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if ev.get("type") == "ADDED":
                    enqueue(obj)
        except ApiError as exc:
            if exc.status == 410:
                rv = await relist()
            else:
                await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.nullbinder")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--scheduler-name", default="bench-null-binder")
    p.add_argument("--qps", type=float, default=5000.0)
    p.add_argument("--burst", type=int, default=5000)
    p.add_argument("--concurrency", type=int, default=64)
    args = p.parse_args(argv)
    loop = asyncio.new_event_loop()
    task = loop.create_task(run(args))
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
