"""Measure the client-side CPU cost per API request: aiohttp vs pysched.client.httppool.

Usage: PYSCHED_BIN_DIR=$(./hack/control-plane.sh) .venv/bin/python hack/http_client_cost.py [N]
Starts a throwaway control plane, then issues N small GETs with 32 in flight through each client
and prints CPU microseconds per request of this process (time.process_time), i.e. what the
scheduler pays per bind on top of the API server's own work.
"""

import asyncio
import sys
import time

import aiohttp

from pysched.client.auth import load_kubeconfig
from pysched.client.httppool import HTTPPool
from pysched_dev.devcluster import ControlPlane


async def main(n: int) -> None:
    with ControlPlane() as cp:
        creds = load_kubeconfig(cp.kubeconfig)
        headers = {"Accept": "application/json", "Authorization": f"Bearer {creds.bearer()}"}
        path = "/api/v1/namespaces/default"
        sem = asyncio.Semaphore(32)

        async def run(one):
            async def task():
                async with sem:
                    await one()
            await asyncio.gather(*(task() for _ in range(200)))  # warm up connections
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(task() for _ in range(n)))
            return (time.process_time() - c0) / n * 1e6, n / (time.perf_counter() - t0)

        conn = aiohttp.TCPConnector(ssl=creds.ssl_context(), limit=32)
        async with aiohttp.ClientSession(connector=conn) as session:
            async def aio():
                async with session.get(creds.server + path, headers=headers) as r:
                    await r.read()
            cpu_a, rate_a = await run(aio)
        pool = HTTPPool(creds.server, creds.ssl_context(), limit=32)

        async def lean():
            await pool.request("GET", path, headers)
        cpu_l, rate_l = await run(lean)
        await pool.close()
        print(f"aiohttp       {cpu_a:7.0f} us CPU/request  {rate_a:7.0f} req/s")
        print(f"httppool      {cpu_l:7.0f} us CPU/request  {rate_l:7.0f} req/s")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    print("asyncio event loop:")
    asyncio.run(main(n))
    try:
        import uvloop
    except ImportError:
        sys.exit(0)
    print("uvloop event loop:")
    uvloop.run(main(n))
