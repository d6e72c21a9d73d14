"""Creating Node and Pod objects on a real API server, and waiting for what follows, shared by
the demo, tests and bench.

The builders themselves (``make_node``, ``make_pod``) are ``pysched.testing.objects``, shipped
for plugin authors; they are re-exported here. ``poll_until`` is the one waiter: the tests'
``wait_for``, the demo's and the bench's waits are it with their own messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from pysched.client.rest import ApiError, KubeClient
from pysched.testing.objects import PAUSE_IMAGE, make_node, make_pod

__all__ = ["CUSTOM_SCORES", "PAUSE_IMAGE", "create_node", "create_nodes", "create_pods", "custom_scores_profile",
           "ensure_namespace", "list_pods", "make_node", "make_pod", "node_ready", "pod_scheduled_condition",
           "poll_until"]

T = TypeVar("T")

# pysched's own scores are opt-in (the default profile is exactly kube-scheduler's): the demo,
# the bench and the tests that exercise them enable them as the shipped ConfigMap does.
CUSTOM_SCORES = ("GPU", "AZSpread", "CapacityType", "InstanceType")


def custom_scores_profile(scheduler_name: str = "pysched", **extra) -> dict:
    """A profile with kube-scheduler's default plugins plus GPU, AZSpread, CapacityType and
    InstanceType (weight 1 each) enabled through ``multiPoint``."""
    return {"schedulerName": scheduler_name, **extra,
            "plugins": {"multiPoint": {"enabled": [{"name": n, "weight": 1} for n in CUSTOM_SCORES]}}}


async def create_node(client: KubeClient, node: dict) -> dict:
    """Create a Node and set its status (the API ignores status on create)."""
    created = await client.request("POST", "/api/v1/nodes", body=node, rate_limit=False)
    status = node.get("status")
    if status:
        created = await client.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}/status",
                                       body={"status": status}, content_type="application/merge-patch+json",
                                       rate_limit=False)
    return created


async def create_nodes(client: KubeClient, nodes: Iterable[dict], concurrency: int = 32) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(n):
        async with sem:
            await create_node(client, n)

    await asyncio.gather(*(one(n) for n in nodes))


async def create_pods(client: KubeClient, pods: Iterable[dict], concurrency: int = 32) -> list[dict]:
    sem = asyncio.Semaphore(concurrency)

    async def one(p):
        async with sem:
            ns = p["metadata"].get("namespace", "default")
            return await client.request("POST", f"/api/v1/namespaces/{ns}/pods", body=p, rate_limit=False)

    return await asyncio.gather(*(one(p) for p in pods))


async def ensure_namespace(client: KubeClient, name: str) -> None:
    try:
        await client.request("POST", "/api/v1/namespaces",
                             body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                             rate_limit=False)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def list_pods(client: KubeClient, namespace: str | None = None, **params) -> list[dict]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    items, _ = await client.list_all(path, params or None)
    return items


def pod_scheduled_condition(pod: dict) -> dict | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return c
    return None


async def poll_until(check: Callable[[], Awaitable[T]], timeout: float, *, interval: float = 0.25,
                     fail: Callable[[T | None], BaseException]) -> T:
    """Await ``check()`` every ``interval`` seconds until it returns something truthy, and return
    that; after ``timeout`` seconds raise ``fail(last answer)``. A liveness bound, not a speed check."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise fail(last)


def node_ready(node: dict[str, Any]) -> bool:
    """The Node's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


async def install_crd(admin: KubeClient, path: Path) -> None:
    """Create the CRD in ``path`` (once) and wait until its group serves its resource."""
    crd = yaml.safe_load(path.read_text())
    try:
        await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd,
                            rate_limit=False)
    except ApiError as exc:
        if exc.status != 409:
            raise
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    for _ in range(100):
        try:
            found = await admin.get(f"/apis/{group}/{version}")
            if any(r["name"] == plural for r in found.get("resources") or ()):
                return
        except ApiError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the CRD {crd['metadata']['name']} was not served within 10 s")
