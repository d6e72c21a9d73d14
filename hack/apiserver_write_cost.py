"""kube-apiserver CPU per write: a pod binding and an Event create, JSON against protobuf bodies
(a measuring aid, not shipped).

``PYSCHED_BIN_DIR=$(./hack/control-plane.sh) .venv/bin/python hack/apiserver_write_cost.py [N]``
starts a throw-away etcd + kube-apiserver (this process and the control plane on all CPUs but the
last), creates one node and 4 N pods nobody schedules, then, in two rounds, binds N/2 pods and
creates N/2 Events with JSON bodies and as many with protobuf bodies (64 in flight, answers not
decoded), and prints the API server's CPU per write from /proc. This is how ``bench/PROFILE.md``
tells whether protobuf request bodies (kube-scheduler's encoding) would lift the API server ceiling
the drain benchmark hits: not reliably (one round 17-27 % less CPU per write, the next 0-7 % more).

The protobuf bodies are hand-encoded: the ``k8s\\x00`` magic and a ``runtime.Unknown`` around a
``Binding`` or ``events.k8s.io/v1`` ``Event`` (field numbers from upstream ``generated.proto``).
"""

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

from bench import procstat  # noqa: E402
from pysched.client.auth import load_kubeconfig  # noqa: E402
from pysched.client.rest import KubeClient  # noqa: E402
from pysched_dev.devcluster import ControlPlane  # noqa: E402
from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, make_node, make_pod  # noqa: E402

PROTOBUF = "application/vnd.kubernetes.protobuf"
NS = "writecost"


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def field_bytes(num: int, b: bytes) -> bytes:
    return varint((num << 3) | 2) + varint(len(b)) + b


def field_str(num: int, s: str) -> bytes:
    return field_bytes(num, s.encode()) if s else b""


def field_int(num: int, n: int) -> bytes:
    return varint(num << 3) + varint(n)


def unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field_bytes(1, field_str(1, api_version) + field_str(2, kind)) + field_bytes(2, raw)


def pod_ref(ns: str, name: str, uid: str) -> bytes:   # core/v1 ObjectReference
    return field_str(1, "Pod") + field_str(2, ns) + field_str(3, name) + field_str(4, uid) + field_str(5, "v1")


def binding_pb(ns: str, name: str, uid: str, node: str) -> bytes:
    meta = field_str(1, name) + field_str(3, ns) + field_str(5, uid)
    target = field_str(1, "Node") + field_str(3, node) + field_str(5, "v1")
    return unknown("v1", "Binding", field_bytes(1, meta) + field_bytes(2, target))


def event_pb(ns: str, name: str, pod: str, uid: str, t: float) -> bytes:
    micro_time = field_int(1, int(t)) + field_int(2, int((t % 1) * 1e9))
    raw = (field_bytes(1, field_str(1, name) + field_str(3, ns)) + field_bytes(2, micro_time)
           + field_str(4, "pysched") + field_str(5, "pysched-writecost") + field_str(6, "Binding")
           + field_str(7, "Scheduled") + field_bytes(8, pod_ref(ns, pod, uid))
           + field_str(10, f"Successfully assigned {ns}/{pod} to node-0") + field_str(11, "Normal"))
    return unknown("events.k8s.io/v1", "Event", raw)


def event_json(pod: str, uid: str, name: str) -> dict:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "pysched",
            "reportingInstance": "pysched-writecost", "action": "Binding", "reason": "Scheduled",
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": pod, "uid": uid},
            "note": f"Successfully assigned {NS}/{pod} to node-0", "type": "Normal"}


async def main(n: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, cpus[:-1])
    cp = ControlPlane()
    cp.start()
    try:
        c = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1, max_connections=64)
        await create_nodes(c, [make_node("node-0", cpu="10000", memory="10000Gi", pods="100000")])
        await ensure_namespace(c, NS)
        await create_pods(c, (make_pod(f"p-{i:05d}", namespace=NS, scheduler="nobody") for i in range(4 * n)),
                          concurrency=64)
        pods, _ = await c.list_all(f"/api/v1/namespaces/{NS}/pods")
        pods.sort(key=lambda p: p["metadata"]["name"])
        assert cp.apiserver_proc is not None
        api = cp.apiserver_proc.pid
        sem = asyncio.Semaphore(64)
        events = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"

        async def measure(label: str, batch: list[dict], write) -> None:
            async def one(p: dict) -> None:
                async with sem:
                    await write(p["metadata"]["name"], p["metadata"]["uid"])
            t, cpu0 = time.monotonic(), procstat.cpu_s(api)
            await asyncio.gather(*(one(p) for p in batch))
            dt, cpu = time.monotonic() - t, procstat.cpu_s(api) - cpu0
            print(f"{label:15s} {len(batch)} writes, {len(batch) / dt:4.0f}/s, "
                  f"kube-apiserver {cpu / len(batch) * 1e3:.3f} ms CPU per write", flush=True)

        def binding(name: str) -> str:
            return f"/api/v1/namespaces/{NS}/pods/{name}/binding"

        async def bind_json(name: str, uid: str) -> None:
            body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NS, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-0"}}
            await c.request("POST", binding(name), body=body, decode=False)

        async def bind_protobuf(name: str, uid: str) -> None:
            await c.request("POST", binding(name), body=binding_pb(NS, name, uid, "node-0"),
                            content_type=PROTOBUF, decode=False)

        async def create_event_json(name: str, uid: str) -> None:
            await c.request("POST", events, body=event_json(name, uid, f"{name}.json"), decode=False)

        async def create_event_protobuf(name: str, uid: str) -> None:
            await c.request("POST", events, body=event_pb(NS, f"{name}.pb", name, uid, time.time()),
                            content_type=PROTOBUF, decode=False)

        half = n // 2
        for r in range(2):
            batch = pods[2 * r * n:(2 * r + 1) * n]
            await measure("bind JSON", batch[:half], bind_json)
            await measure("bind protobuf", batch[half:], bind_protobuf)
            await measure("Event JSON", batch[:half], create_event_json)
            await measure("Event protobuf", batch[half:], create_event_protobuf)
        bound = await c.get(f"/api/v1/namespaces/{NS}/pods/{pods[n - 1]['metadata']['name']}")
        assert bound["spec"].get("nodeName") == "node-0", "the protobuf binding did not take"
        await c.close()
    finally:
        cp.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
