"""The session's RealCluster works as a cluster: nodes, scheduling, in-cluster API access without
kube-proxy, the kubelet's API through the API server, and image imports (docker and OCI archives)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pysched_dev.realcluster import RealCluster
from tests.real import realkit

pytestmark = pytest.mark.real_node

SA_DIR = "var/run/secrets/kubernetes.io/serviceaccount"


def test_nodes(real_cluster: RealCluster):
    items = json.loads(real_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    nodes = {n["metadata"]["name"]: n for n in items}
    assert {real_cluster.node_name, *real_cluster.kwok_node_names} <= set(nodes)    # other tests add KWOK nodes
    real = nodes[real_cluster.node_name]
    assert real["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.")
    assert {"type": "InternalIP", "address": real_cluster.node_ip} in real["status"]["addresses"]
    assert not real["spec"].get("taints")
    for name in real_cluster.kwok_node_names:
        assert real_cluster.kwok_taint in nodes[name]["spec"]["taints"]
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in nodes[name]["status"]["conditions"])


def test_pod_reaches_the_api_server_as_shipped(real_cluster: RealCluster, real_namespace: str):
    """A pod placed by kube-scheduler (on the real node: the KWOK nodes are tainted) gets the stock
    in-cluster environment, KUBERNETES_SERVICE_HOST being the kubernetes Service's ClusterIP, port
    443, and from its own network namespace reaches the API server there, verified with the CA and
    authenticated with the token the kubelet mounted, with no kube-proxy."""
    realkit.apply(real_cluster, realkit.pause_pod(real_cluster, "probe", real_namespace))
    pod = realkit.wait_running(real_cluster, "probe", real_namespace)
    assert pod["spec"]["nodeName"] == real_cluster.node_name
    assert pod["status"]["podIP"].rsplit(".", 1)[0] == real_cluster.pod_cidr.rsplit(".", 1)[0]
    pid = realkit.container_pid(real_cluster, pod)
    env = realkit.environ(pid)
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == (real_cluster.api_address, "443")
    root = Path(f"/proc/{pid}/root")
    token = (root / SA_DIR / "token").read_text()
    ca = root / SA_DIR / "ca.crt"
    client = (
        "import json, ssl, sys, urllib.request\n"
        "ctx = ssl.create_default_context(cafile=sys.argv[2])\n"
        "req = urllib.request.Request(sys.argv[1], headers={'Authorization': 'Bearer ' + sys.argv[3]})\n"
        "print(json.load(urllib.request.urlopen(req, timeout=10, context=ctx))['kind'])\n")
    url = f"https://{env['KUBERNETES_SERVICE_HOST']}:{env['KUBERNETES_SERVICE_PORT']}/api"
    out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", client, url, str(ca), token],
                         capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stdout.strip()) == (0, "APIVersions"), out.stderr
    # and only through its own route: the pod has no default route
    routes = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-4", "route"], capture_output=True,
                            text=True, check=True).stdout
    assert f"{real_cluster.service_cidr} via {real_cluster.node_ip}" in routes
    assert "default" not in routes


def test_kubelet_api_through_the_api_server(real_cluster: RealCluster):
    """kube-apiserver reaches the kubelet at the node address with its kubelet client certificate,
    and the kubelet authorizes it through the API server (webhook): the node's stats."""
    summary = json.loads(real_cluster.kubectl("get", "--raw",
                                              f"/api/v1/nodes/{real_cluster.node_name}/proxy/stats/summary").stdout)
    assert summary["node"]["nodeName"] == real_cluster.node_name


def test_import_docker_and_oci_archives(real_cluster: RealCluster, real_namespace: str, tmp_path: Path):
    """import_image takes both archive formats and returns the names the kubelet then runs."""
    from pysched_dev.realcluster import prereq

    docker = prereq.binaries().pause_archive
    assert real_cluster.import_image(docker) == [real_cluster.pause_image]
    oci = tmp_path / "pause-oci.tar"
    name = f"localhost/pysched-test/oci-pause:{realkit.fresh_name('v')}"
    subprocess.run(["skopeo", "copy", "--quiet", f"docker-archive:{docker}", f"oci-archive:{oci}:{name}"], check=True)
    assert real_cluster.import_image(oci) == [name]
    pod = realkit.pause_pod(real_cluster, "oci", real_namespace)
    pod["spec"]["containers"][0]["image"] = name
    realkit.apply(real_cluster, pod)
    assert realkit.wait_running(real_cluster, "oci", real_namespace)["status"]["containerStatuses"][0]["image"] == name


def test_kwok_pods_opt_in(real_cluster: RealCluster, real_namespace: str):
    """A pod tolerating the KWOK taint and selecting a KWOK node runs there (KWOK plays its kubelet)."""
    target = real_cluster.kwok_node_names[0]
    pod = realkit.pause_pod(real_cluster, "fake", real_namespace, tolerate_kwok=True)
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": target}
    realkit.apply(real_cluster, pod)
    assert realkit.wait_running(real_cluster, "fake", real_namespace)["spec"]["nodeName"] == target
