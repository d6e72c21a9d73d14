"""kube-scheduler 1.37.2 and pysched agree on NodeDeclaredFeatures: where pods that need node features
go, the FailedScheduling words when no node declares them, and the requeue when a node starts to.

One API server (kube-apiserver 1.37, with the alpha gates UserNamespacesHostNetworkSupport and
VolumeBindMountOptions on so that it accepts ``hostNetwork`` with ``hostUsers: false`` and keeps
``bindMountOptions``; ``status.declaredFeatures`` is GA). Both schedulers run at once, each with
its own copy of every pod (``k-*`` for kube-scheduler's default profile, which in 1.37 ends with
NodeDeclaredFeatures; ``p-*`` for pysched, run in-process with the NodeDeclaredFeatures gate on
and a profile that enables the plugin the same way: appended to the default multiPoint list).

Nodes and what they declare (set through the status subresource, as a kubelet does):

==============  ==========================================================================
``bare``        nothing
``restart``     RestartAllContainersOnContainerExits
``userns-bind`` UserNamespacesHostNetworkSupport, VolumeBindMountOptions
``unknown``     SomeFutureFeature (no scheduler knows it: ignored)
``late``        nothing at first; RestartAllContainersOnContainerExits and
                VolumeBindMountOptions once both schedulers have given up on ``restart-bind``
==============  ==========================================================================

Each pod has one feasible node or none, so both must pick the same one. ``on-bare-restart`` (a
restart rule, and a nodeSelector for ``bare``) shows the filter order: NodeAffinity turns down four
nodes before NodeDeclaredFeatures looks at them, which rejects only ``bare``.

Skipped when the API server is older than 1.37 (1.35 does not serve the fields).
"""

from __future__ import annotations

import asyncio
import re
import subprocess

import pytest

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.framework.features import default_gates
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess, binaries_dir
from pysched_dev.testkit import create_node, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import scheduler_config, wait_for

pytestmark = pytest.mark.e2e

RESTART = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND = "VolumeBindMountOptions"
APISERVER_GATES = f"{USERNS}=true,{BIND}=true"
KUBE, OURS = "kube-ndf", "pysched"
H = "kubernetes.io/hostname"
NODES = {"bare": [], "restart": [RESTART], "userns-bind": [USERNS, BIND], "unknown": ["SomeFutureFeature"],
         "late": []}
LATE = sorted([RESTART, BIND])
REQUIRED = "node(s) didn't match Pod's required features"


def apiserver_version() -> tuple[int, int]:
    out = subprocess.run([str(binaries_dir() / "kube-apiserver"), "--version"], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"v(\d+)\.(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@pytest.fixture
def control_plane():
    version = apiserver_version()
    if version < (1, 37):
        pytest.skip(f"kube-apiserver {version[0]}.{version[1]} does not serve status.declaredFeatures and the "
                    "pod fields that need node features (1.37 does)")
    cp = ControlPlane(extra_apiserver_args=[f"--feature-gates={APISERVER_GATES}"])
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def _pod(name: str, scheduler: str, *features: str, on: str | None = None) -> dict:
    p = make_pod(name, scheduler=scheduler, cpu="10m", memory="10Mi", node_selector={H: on} if on else None)
    spec, c = p["spec"], p["spec"]["containers"][0]
    if RESTART in features:
        c["restartPolicy"] = "Never"
        c["restartPolicyRules"] = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]
    if USERNS in features:
        spec["hostNetwork"], spec["hostUsers"] = True, False
    if BIND in features:
        spec["volumes"] = [{"name": "data", "emptyDir": {}}]
        c["volumeMounts"] = [{"name": "data", "mountPath": "/data", "bindMountOptions": ["noexec"]}]
    return p


# pod -> (features, nodeSelector's node)
PODS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "plain": ((), "bare"),
    "restart": ((RESTART,), None),
    "userns": ((USERNS,), None),
    "bind": ((BIND,), None),
    "userns-bind": ((USERNS, BIND), None),
    "restart-bind": ((RESTART, BIND), None),
    "on-bare-restart": ((RESTART,), "bare"),
}


async def _declare(admin, node: str, features: list[str]) -> None:
    await admin.request("PATCH", f"/api/v1/nodes/{node}/status", body={"status": {"declaredFeatures": features}},
                        content_type="application/merge-patch+json", rate_limit=False)


async def _outcomes(admin) -> dict[str, tuple[str, str]]:
    """Per pod: ("bound", node) or ("unschedulable", message), for the pods judged so far."""
    out = {}
    for p in await list_pods(admin, "default"):
        name = p["metadata"]["name"]
        if p["spec"].get("nodeName"):
            out[name] = ("bound", p["spec"]["nodeName"])
            continue
        cond = pod_scheduled_condition(p)
        if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            out[name] = ("unschedulable", cond.get("message", ""))
    return out


def _ours(control_plane) -> SchedulerApp:
    cfg = configmod.parse(scheduler_config(profiles=[{"schedulerName": OURS, "plugins": {"multiPoint": {
        "enabled": [{"name": "NodeDeclaredFeatures"}]}}}]))
    options = Options(kubeconfig=str(control_plane.kubeconfig), serve=False, kopf=False, seed=1,
                      kube_version=(1, 37), feature_gates=default_gates((1, 37)))
    return SchedulerApp(cfg, options, load_kubeconfig(control_plane.kubeconfig), None)


async def test_node_declared_features_match_kube_scheduler(control_plane, admin):
    for name, features in NODES.items():
        node = make_node(name)
        if features:
            node["status"]["declaredFeatures"] = features
        await create_node(admin, node)
    seen = {n["metadata"]["name"]: (n.get("status") or {}).get("declaredFeatures")
            for n in (await admin.list_all("/api/v1/nodes"))[0]}
    assert seen == {n: f or None for n, f in NODES.items()}, "the API server keeps status.declaredFeatures"

    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": KUBE}]}).start()
    app = _ours(control_plane)
    task = asyncio.create_task(app.run())
    try:
        pods = [_pod(f"{prefix}-{name}", scheduler, *features, on=on)
                for prefix, scheduler in (("k", KUBE), ("p", OURS)) for name, (features, on) in PODS.items()]
        created = await create_pods(admin, pods)
        kept = {p["metadata"]["name"]: p["spec"] for p in created}
        assert kept["k-userns-bind"]["hostUsers"] is False and kept["k-userns-bind"]["hostNetwork"] is True
        assert kept["k-bind"]["containers"][0]["volumeMounts"][0]["bindMountOptions"] == ["noexec"]

        async def judged():
            seen = await _outcomes(admin)
            return seen if len(seen) == len(pods) else None
        seen = await wait_for(judged, 60, what="both schedulers judging every pod")
        for name in PODS:                         # shown on a failure
            print(f"{name}:\n  kube-scheduler: {seen[f'k-{name}']}\n  pysched:        {seen[f'p-{name}']}")
        assert {n: seen[f"p-{n}"] for n in PODS} == {n: seen[f"k-{n}"] for n in PODS}

        # kube-scheduler's own verdicts: the scenario does what the docstring says
        kube_says = {n: seen[f"k-{n}"] for n in PODS}
        assert kube_says["plain"] == ("bound", "bare") and kube_says["restart"] == ("bound", "restart")
        assert kube_says["userns"] == kube_says["bind"] == kube_says["userns-bind"] == ("bound", "userns-bind")
        assert kube_says["restart-bind"] == ("unschedulable", f"0/5 nodes are available: 5 {REQUIRED}. preemption: "
                                             "0/5 nodes are available: 5 Preemption is not helpful for scheduling.")
        assert kube_says["on-bare-restart"] == ("unschedulable", (
            f"0/5 nodes are available: 1 {REQUIRED}, 4 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."))

        # A node that starts declaring both features requeues the pods both schedulers gave up on
        # (no other event can: nothing else about the cluster changes; the unschedulable pool's
        # flush is 5 minutes away).
        await _declare(admin, "late", LATE)

        async def both_bound():
            got = await _outcomes(admin)
            placed = {k: got.get(k) for k in ("k-restart-bind", "p-restart-bind")}
            return placed if all(v and v[0] == "bound" for v in placed.values()) else None
        placed = await wait_for(both_bound, 60, what="restart-bind bound after the node declared the features")
        assert placed == {"k-restart-bind": ("bound", "late"), "p-restart-bind": ("bound", "late")}
        after = await _outcomes(admin)
        assert after["k-on-bare-restart"][0] == after["p-on-bare-restart"][0] == "unschedulable"
    finally:
        kube.stop()
        app.request_stop()
        await task
