"""CPU of one load-collector round: five Prometheus answers of N series fetched, decoded, parsed and
stored (a measuring aid, not shipped).

``.venv/bin/python hack/collector_round_cost.py [N] [ROUNDS]`` serves a canned instant-vector
answer of N series (default 5,000, one per node, as ``max by (instance)`` returns them) from a
child process on loopback, subscribes five queries to one Prometheus provider of a real
``LoadCollector`` (the loadaware profile's count: TargetLoadPacking's and LoadVariationRiskBalancing's
four window queries), runs one round to warm up, then ROUNDS rounds (default 40), and prints this
process's CPU per round. ``bench/PROFILE.md`` quotes it for the series' storage (22-24 ms with a
``(value, time)`` tuple per node, at 4b8964e; 19 ms with flat maps).
"""

import asyncio
import json
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

from pysched.framework.loadmetrics import MetricProviderArgs  # noqa: E402
from pysched.loadmetrics.collector import LoadCollector  # noqa: E402
from pysched_dev.devcluster import free_port  # noqa: E402


def serve(port: int, n: int) -> None:
    now = time.time()
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": f"node-{i}"}, "value": [now, f"{(i * 7) % 100 + 0.5}"]} for i in range(n)]}}).encode()

    class Answer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Answer).serve_forever()


async def measure(port: int, rounds: int) -> float:
    collector = LoadCollector()
    provider = MetricProviderArgs(address=f"http://127.0.0.1:{port}")
    for q in ("cpu", "cpu_avg", "cpu_stddev", "memory_avg", "memory_stddev"):
        collector.subscribe(provider, q, q)
    (p,) = collector.providers.values()
    for _ in range(300):              # until the child serves
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    await collector.fetch_round(p)    # warm: connections open, label memo filled
    assert p.up, "the canned Prometheus did not answer"
    t0 = time.process_time()
    for _ in range(rounds):
        await collector.fetch_round(p)
    cpu = (time.process_time() - t0) / rounds
    await p.source.close()
    return cpu


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    port = free_port()
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(n)])
    try:
        cpu = asyncio.run(measure(port, rounds))
    finally:
        child.kill()
        child.wait()
    print(f"{n} series x 5 queries: {cpu * 1000:.1f} ms CPU per round (mean of {rounds})")


if __name__ == "__main__":
    main()
