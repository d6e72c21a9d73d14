"""The real kube-scheduler 1.35 using `pysched extender` as its extender (both node modes, HTTP/HTTPS)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import yaml

from pysched_dev.devcluster import KubeSchedulerProcess, free_port
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import REPO, wait_for

pytestmark = pytest.mark.e2e
IT = "node.kubernetes.io/instance-type"
CT = "karpenter.sh/capacity-type"

EXTENDER_PROFILE = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": False},
    "profiles": [{
        "schedulerName": "pysched",
        "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}]},
            "queueSort": {"enabled": [{"name": "PrioritySort"}]},
            "preFilter": {"enabled": [{"name": "NodeResourcesFit"}]},
            "filter": {"enabled": [{"name": "TaintToleration"}, {"name": "NodeResourcesFit"}]},
            "score": {"enabled": [{"name": "InstanceType", "weight": 1}, {"name": "CapacityType", "weight": 1}]},
            "bind": {"enabled": [{"name": "DefaultBinder"}]},
        },
        "pluginConfig": [{"name": "InstanceType", "args": {
            "preferences": [{"prefix": "c5.", "score": 100}, {"prefix": "m5.", "score": 50},
                            {"prefix": "r5.", "score": 30}],
            "defaultScore": 10}}],
    }],
}


class ExtenderProcess:
    def __init__(self, cp, tmp_path, config: dict, https: bool = False, client_ca=None, insecure_bind: bool = False,
                 extra_args=()):
        self.cp = cp
        self.port = free_port()
        self.cfg_path = tmp_path / "extender-config.yaml"
        self.cfg_path.write_text(yaml.safe_dump(config))
        self.log_path = tmp_path / "extender.log"
        self.https = https
        self.args = [sys.executable, "-m", "pysched", "extender", "--config", str(self.cfg_path),
                     "--kubeconfig", str(cp.kubeconfig), "--address", "127.0.0.1", "--port", str(self.port),
                     *extra_args]
        if https:
            cert, key = cp.issue_cert("extender")
            self.args += ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key)]
            if client_ca:
                self.args += ["--client-ca-file", str(client_ca)]
        self.client_cert = cp.issue_cert("extender-test-client", client=True) if client_ca else None
        if insecure_bind:
            self.args += ["--insecure-allow-unauthenticated-bind"]
        self.proc = None

    @property
    def url(self) -> str:
        return f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen(self.args, cwd=REPO, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait_ready(self):
        async def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"extender exited:\n{self.log()[-3000:]}")
            return "serving extender verbs" in self.log()
        await wait_for(up, 60, what="extender serving")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)

    def served(self, verb: str) -> int:
        import re
        import ssl
        import urllib.request
        ctx = ssl.create_default_context(cafile=str(self.cp.ca_file)) if self.https else None
        if self.client_cert:
            ctx.load_cert_chain(*map(str, self.client_cert))
        text = urllib.request.urlopen(f"{self.url}/metrics", context=ctx, timeout=10).read().decode()
        m = re.search(rf'pysched_extender_server_requests_total{{code="200",verb="{verb}"}} ([0-9.e+]+)', text)
        return int(float(m.group(1))) if m else 0


@pytest.mark.parametrize("node_cache_capable,https", [(True, False), (False, True)])
async def test_kube_scheduler_follows_our_scores_and_binds_through_us(control_plane, admin, tmp_path,
                                                                      node_cache_capable, https):
    await create_nodes(admin, [
        make_node("n-c5", cpu="4", labels={IT: "c5.xlarge", CT: "on-demand"}),
        make_node("n-m5", cpu="4", labels={IT: "m5.xlarge", CT: "spot"}),
        make_node("n-r5", cpu="4", labels={IT: "r5.xlarge", CT: "on-demand"}),
    ])
    # bind needs an authorized caller: over HTTPS kube-scheduler presents a client certificate from
    # --client-ca-file (mTLS); over plain HTTP it cannot authenticate, so that lab setup needs the flag.
    # kube-scheduler's profile is kube-ext: the extender must be told to bind its pods.
    ext = ExtenderProcess(control_plane, tmp_path, EXTENDER_PROFILE, https=https,
                          client_ca=control_plane.ca_file if https else None, insecure_bind=not https,
                          extra_args=["--bind-scheduler-name", "kube-ext"]).start()
    await ext.wait_ready()
    extender = {"urlPrefix": ext.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
                "weight": 5, "nodeCacheCapable": node_cache_capable, "enableHTTPS": https}
    if https:
        cert, key = control_plane.issue_cert("kube-scheduler", client=True)
        extender["tlsConfig"] = {"caFile": str(control_plane.ca_file), "certFile": str(cert), "keyFile": str(key)}
    else:
        assert any("level=warning" in line and "--insecure-allow-unauthenticated-bind" in line
                   for line in ext.log().splitlines()), "the lab flag must be loud"
    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": "kube-ext"}],
                                                "extenders": [extender]}).start()
    try:
        await create_pods(admin, [make_pod("plain", scheduler="kube-ext", cpu="100m"),
                                  make_pod("spot", scheduler="kube-ext", cpu="100m",
                                           labels={"lifecycle-preference": "spot"}),
                                  make_pod("too-big", scheduler="kube-ext", cpu="8")])

        async def placed():
            pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
            ok = pods["plain"]["spec"].get("nodeName") and pods["spot"]["spec"].get("nodeName") \
                and pod_scheduled_condition(pods["too-big"])
            return pods if ok else None

        pods = await wait_for(placed, 60, what="kube-scheduler placed the pods via the extender")
        assert pods["plain"]["spec"]["nodeName"] == "n-c5"      # instance-type preference
        assert pods["spot"]["spec"]["nodeName"] == "n-m5"       # capacity-type preference beats instance type
        assert ext.served("bind") == 2                          # our bind verb bound both
        assert ext.served("filter") >= 2 and ext.served("prioritize") >= 2
    finally:
        kube.stop()
        ext.stop()


async def test_hami_style_managed_gpu_resources_route_only_gpu_pods(control_plane, admin, tmp_path):
    await create_nodes(admin, [make_node("gpu-node", extended={"nvidia.com/gpu": "1"}), make_node("cpu-node")])
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": "pysched"}]}
    ext = ExtenderProcess(control_plane, tmp_path, cfg, insecure_bind=True,
                          extra_args=["--bind-scheduler-name", "hami"]).start()
    await ext.wait_ready()
    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": "hami"}], "extenders": [{
        "urlPrefix": ext.url, "filterVerb": "filter", "bindVerb": "bind", "nodeCacheCapable": True, "weight": 1,
        "httpTimeout": "30s", "managedResources": [{"name": "nvidia.com/gpu", "ignoredByScheduler": True}]}]}).start()
    try:
        await create_pods(admin, [make_pod("cpu-only", scheduler="hami"),
                                  make_pod("trainer", scheduler="hami", extended={"nvidia.com/gpu": "1"})])

        async def both():
            pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, "default")}
            return pods if all(pods.values()) else None

        placed = await wait_for(both, 60, what="both pods bound")
        assert placed["trainer"] == "gpu-node"
        assert ext.served("filter") == 1 and ext.served("bind") == 1, "only the GPU pod goes to the extender"
        await create_pods(admin, [make_pod("trainer-2", scheduler="hami", extended={"nvidia.com/gpu": "1"})])

        async def rejected():
            for p in await list_pods(admin, "default"):
                if p["metadata"]["name"] == "trainer-2":
                    return pod_scheduled_condition(p)
            return None

        cond = await wait_for(rejected, 60, what="second GPU pod rejected by our filter")
        assert "Insufficient nvidia.com/gpu" in cond["message"]   # kube-scheduler ignores the resource; we do not
    finally:
        kube.stop()
        ext.stop()
