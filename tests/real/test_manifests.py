"""`kubectl apply -k manifests/` as it ships, on a real node: two Ready replicas as uid 65532 with a
read-only root and the manifests' limits, one leader, pods placed on the real node and on KWOK
nodes; then the extender component's Deployment as a container under a header flood from a client
it trusts, which must stay under its memory limit (never OOMKilled) and keep answering."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import shutil
import ssl
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from pysched.apis.core.quantity import parse_quantity
from pysched_dev.testkit import list_pods

from .shipkit import (
    CGROUP_LIMIT,
    REPO,
    SHIPPED_IMAGE,
    MemoryWatch,
    exec_python,
    kubectl,
    lease_holder,
    on_kwok,
    oom_killed,
    ready_replicas,
    wait_for,
    workload_pod,
)

# the first test may wait for a cold image build (the session fixture)
pytestmark = [pytest.mark.real_node, pytest.mark.timeout(1800)]

NS = "pysched-system"
SCHEDULER = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
EXTENDER = yaml.safe_load((REPO / "manifests" / "components" / "extender" / "deployment.yaml").read_text())
FLOOD_SECONDS = 20


@pytest.fixture(scope="module")
def manifests(real_cluster, shipped_image, tmp_path_factory):
    """The stock base applied as a user would; at the end everything the module applied is deleted."""
    work = tmp_path_factory.mktemp("manifests")
    shutil.copytree(REPO / "manifests", work / "manifests")
    overlay = work / "with-extender"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["../manifests"], "components": ["../manifests/components/extender"]}))
    start = time.monotonic()
    kubectl(real_cluster, "apply", "-k", REPO / "manifests")
    print(f"kubectl apply -k manifests/: {time.monotonic() - start:.1f}s")
    yield overlay
    kubectl(real_cluster, "delete", "-k", overlay, "--ignore-not-found", "--wait", "--timeout=120s", check=False)


async def test_kubectl_apply_k_runs_two_ready_replicas_as_shipped(manifests, admin, real_cluster):
    pods = await wait_for(lambda: ready_replicas(admin, NS, "pysched", 2, image=SHIPPED_IMAGE), 180,
                          what="two Ready replicas")
    container = SCHEDULER["spec"]["template"]["spec"]["containers"][0]
    for pod in pods:
        assert pod["spec"]["nodeName"] == real_cluster.node_name
        (c,) = pod["spec"]["containers"]
        assert c["resources"] == container["resources"]
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        name = pod["metadata"]["name"]
        assert exec_python(real_cluster, NS, name, "import os; print(os.getuid())").stdout.strip() == "65532"
        ro = exec_python(real_cluster, NS, name, "open('/x', 'w')", check=False)
        assert ro.returncode != 0 and "Read-only file system" in ro.stderr
        limit = int(parse_quantity(container["resources"]["limits"]["memory"]))
        assert int(exec_python(real_cluster, NS, name, CGROUP_LIMIT).stdout.strip()) == limit   # the kernel's
    # One of the two leads. The Lease may still name a replica of an earlier install in the same
    # namespace (the chart's tests run first here): its holder is replaced once it expires.
    names = {p["metadata"]["name"] for p in pods}

    async def leader_among_replicas() -> str | None:
        holder = await lease_holder(admin, NS, "pysched")
        return holder if holder in names else None
    await wait_for(leader_among_replicas, 60, what="one of the two replicas holding the Lease")

    ns = "kustomize-placed"
    kubectl(real_cluster, "create", "namespace", ns)
    real = workload_pod("real", node=real_cluster.node_name, image=SHIPPED_IMAGE, memory="128Mi",
                        command=["python", "-c", "print('ok')"])
    fake = workload_pod("fake", kwok=real_cluster.kwok_taint)
    for p in (real, fake):
        await admin.request("POST", f"/api/v1/namespaces/{ns}/pods", body=p)

    async def done():
        phases = {p["metadata"]["name"]: (p["status"].get("phase"), p["spec"].get("nodeName"))
                  for p in await list_pods(admin, ns)}
        return phases if phases["real"][0] == "Succeeded" and phases["fake"][0] == "Running" else None
    phases = await wait_for(done, 120, what="the pods placed and run")
    assert phases["real"][1] == real_cluster.node_name
    assert await on_kwok(admin, phases["fake"][1], real_cluster.kwok_taint)
    await admin.request("DELETE", f"/api/v1/namespaces/{ns}")


def _tls_files(d: Path) -> dict[str, Path]:
    """A CA, the extender's serving certificate and a client certificate it trusts (what a
    kube-scheduler would present)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def pem_key(k) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def cert(cn: str, key, issuer_key, issuer_name, *, ca: bool = False, usage=None, sans=()):
        b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
             .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("pysched-extender-ca", ca_key, ca_key, None, ca=True)
    srv_key, cli_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    srv = cert("pysched-extender.pysched-system.svc", srv_key, ca_key, ca.subject,
               usage=ExtendedKeyUsageOID.SERVER_AUTH,
               sans=[x509.DNSName("pysched-extender.pysched-system.svc"),
                     x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cli = cert("kube-scheduler", cli_key, ca_key, ca.subject, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    files = {"ca.crt": ca.public_bytes(serialization.Encoding.PEM),
             "tls.crt": srv.public_bytes(serialization.Encoding.PEM), "tls.key": pem_key(srv_key),
             "client.crt": cli.public_bytes(serialization.Encoding.PEM), "client.key": pem_key(cli_key)}
    out = {}
    for name, data in files.items():
        (d / name).write_bytes(data)
        out[name] = d / name
    return out


async def test_extender_container_under_a_header_flood_stays_under_its_limit(manifests, admin, real_cluster,
                                                                             tmp_path):
    tls = _tls_files(tmp_path)
    kubectl(real_cluster, "-n", NS, "create", "secret", "generic", "pysched-extender-tls",
            f"--from-file=ca.crt={tls['ca.crt']}", f"--from-file=tls.crt={tls['tls.crt']}",
            f"--from-file=tls.key={tls['tls.key']}")
    kubectl(real_cluster, "apply", "-k", manifests)
    pods = await wait_for(lambda: ready_replicas(admin, NS, "pysched-extender", 2, image=SHIPPED_IMAGE), 180,
                          what="two Ready extender replicas")
    target = pods[0]
    ip, name = target["status"]["podIP"], target["metadata"]["name"]
    port = EXTENDER["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    limit = int(parse_quantity(EXTENDER["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]))

    ctx = ssl.create_default_context(cafile=str(tls["ca.crt"]))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(tls["client.crt"]), str(tls["client.key"]))
    node = real_cluster.kwok_node_names[0]
    pod = workload_pod("legit", kwok=real_cluster.kwok_taint)     # tolerates the KWOK nodes' taint
    pod["metadata"].update(namespace="default", uid="uid-legit")
    body = orjson.dumps({"Pod": pod, "NodeNames": [node]})
    answers = []
    async with aiohttp.ClientSession(base_url=f"https://{ip}:{port}",
                                     connector=aiohttp.TCPConnector(ssl=ctx)) as session, \
            MemoryWatch(admin, real_cluster.node_name, NS, interval=0.5) as mem:
        async def legit():
            async with session.post("/filter", data=body, timeout=aiohttp.ClientTimeout(total=10)) as r:
                return r.status, (await r.json())["NodeNames"] if r.status == 200 else await r.text()
        assert await legit() == (200, [node])
        flood = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pysched_dev.flood", "--host", ip, "--port", str(port), "--tls",
            "--cert", str(tls["client.crt"]), "--key", str(tls["client.key"]),
            "--connections", "300", "--headers", "100", "--size", "8192", "--seconds", str(FLOOD_SECONDS),
            # from another address than the legitimate caller's (the server's connection limits are per client)
            "--source", real_cluster.api_address, cwd=REPO, stdout=asyncio.subprocess.PIPE)
        start = time.monotonic()
        while flood.returncode is None and time.monotonic() - start < FLOOD_SECONDS + 60:
            if time.monotonic() - start > 3:       # the flood is at full strength by now
                answers.append(await legit())
            try:
                await asyncio.wait_for(flood.wait(), 0.5)
            except TimeoutError:
                pass
        out, _ = await flood.communicate()
    peak = mem.peak.get((name, "extender"), 0)
    print(f"flood: {out.decode().strip()}; peak working set {peak / 2**20:.0f} MiB of {limit / 2**20:.0f} MiB; "
          f"{mem.samples} samples")
    assert "opened=" in out.decode() and mem.samples > 5 and peak > 0
    assert answers and all(a == (200, [node]) for a in answers), answers[:5]
    assert peak < limit
    pod = await admin.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    assert not oom_killed(pod) and pod["status"]["containerStatuses"][0]["restartCount"] == 0
