"""What changed between kube-scheduler releases in scores and accounting lands where kube-scheduler puts it.

One cluster, four cases, each a pod held to its own nodes by a ``nodeSelector`` (``case=...``);
kube-scheduler (the control plane's release) judges the four pods first, they are deleted, then
pysched (following the same release, read from the API server) judges the same four pods. The
outcome - the node, or the failure's reason and FitError - must be the same, and is the one the
release's formula gives (so the test tells the releases apart on each leg of ``make test``):

* ``balanced``: NodeResourcesBalancedAllocation. ``bal-a`` (4 cpu, 4Gi; 2 cpu and 2Gi used) is
  balanced and the pod (1 cpu) unbalances it; ``bal-b`` (875m and 3200Mi used) is lopsided and the
  pod evens it out a little. NodeResourcesFit: a 35, b 34. 1.35 scores the balance after: a 87,
  b 84 -> ``bal-a``. 1.36+ scores the improvement: a 50 + (50 + 87 - 100) / 2 = 68, b
  50 + (50 + 84 - 71) / 2 = 81 -> ``bal-b``.
* ``image``: ImageLocality and image volumes. ``img-c`` holds the pod's container image (1200 MiB),
  ``img-v`` its image volume's image (2400 MiB); one node in six holds each. 1.35 ignores the
  volume: c 18, v 0 -> ``img-c``. 1.37 counts it, and two images in the bound: c
  (200 - 23) * 100 / 1977 = 8, v (400 - 23) * 100 / 1977 = 19 -> ``img-v``.
* ``resize``: a pod on ``rs-a`` (2 cpu) resized in place both ways - container a spec 1, running
  500m, allocated 1; b spec 500m, running 1, allocated 500m. 1.35 takes the largest per container
  (1 + 1 = 2: the node is full, the pod is Unschedulable); 1.37 the largest sum (1.5 of 2: the
  pod, 400m, fits).
* ``pod-level``: a pod on ``rs-p`` (2 cpu) whose containers request 1 cpu and whose pod-level
  ``status.allocatedResources`` and ``status.resources`` read 1800m (InPlacePodLevelResourcesVerticalScaling).
  A 1.35 API server drops those fields: the pod fits. 1.37 counts 1800m: it does not.
"""

from __future__ import annotations

import copy

import pytest

from pysched_dev.devcluster import binaries_version
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod, pod_scheduled_condition
from tests.differential import strip_postfilter

from .conftest import scheduler_config, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

KUBE = "kube-scores"
MI = 2**20
APP_IMAGE, MODEL_IMAGE = "example.com/app:v1", "example.com/model:v1"


def node(name: str, case: str, cpu: str, memory: str = "4Gi", images: list | None = None) -> dict:
    n = make_node(name, cpu=cpu, memory=memory, labels={"case": case})
    if images:
        n["status"]["images"] = [{"names": [img], "sizeBytes": size} for img, size in images]
    return n


def bound(name: str, node_name: str, cpu: str, memory: str | None = None) -> dict:
    return make_pod(name, scheduler="other", cpu=cpu, memory=memory, node_name=node_name)


def resized_both_ways() -> tuple[dict, dict]:
    p = bound("resized", "rs-a", cpu="1")
    b = copy.deepcopy(p["spec"]["containers"][0])
    b["name"] = "b"
    b["resources"] = {"requests": {"cpu": "500m"}}
    p["spec"]["containers"].append(b)

    def status(name: str, running: str, allocated: str) -> dict:
        return {"name": name, "image": "x", "imageID": "", "ready": False, "restartCount": 0,
                "state": {"waiting": {}}, "resources": {"requests": {"cpu": running}},
                "allocatedResources": {"cpu": allocated}}
    return p, {"containerStatuses": [status("c", "500m", "1"), status("b", "1", "500m")]}


def pod_level_status() -> tuple[dict, dict]:
    p = bound("pod-level", "rs-p", cpu="500m")
    b = copy.deepcopy(p["spec"]["containers"][0])
    b["name"] = "b"
    p["spec"]["containers"].append(b)
    return p, {"resources": {"requests": {"cpu": "1800m"}}, "allocatedResources": {"cpu": "1800m"}}


def cases(scheduler: str, prefix: str) -> list[dict]:
    pods = []
    for case, cpu in (("balanced", "1"), ("image", "100m"), ("resize", "400m"), ("pod-level", "400m")):
        p = make_pod(f"{prefix}-{case}", scheduler=scheduler, cpu=cpu, memory=None, node_selector={"case": case})
        if case == "image":
            p["spec"]["containers"][0]["image"] = APP_IMAGE
            p["spec"]["volumes"] = [{"name": "model", "image": {"reference": MODEL_IMAGE}}]
        pods.append(p)
    return pods


async def judge(admin, pods: list[dict]) -> dict[str, tuple]:
    """Each pod's outcome: ("bound", node) or (reason, FitError part of the message)."""
    async def outcomes():
        got = {}
        for p in pods:
            name = p["metadata"]["name"]
            live = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
            cond = pod_scheduled_condition(live)
            if live["spec"].get("nodeName"):
                got[name.split("-", 1)[1]] = ("bound", live["spec"]["nodeName"])
            elif cond and cond.get("status") == "False":
                got[name.split("-", 1)[1]] = (cond.get("reason"), strip_postfilter(cond.get("message", "")))
            else:
                return None
        return got
    return await wait_for(outcomes, 90, what="every pod bound or failed")


async def test_release_scores_and_accounting_match_kube_scheduler(control_plane, admin, scheduler_factory):
    from pysched_dev.devcluster import KubeSchedulerProcess
    await create_nodes(admin, [
        node("bal-a", "balanced", cpu="4"), node("bal-b", "balanced", cpu="4"),
        node("img-c", "image", cpu="4", images=[(APP_IMAGE, 1200 * MI)]),
        node("img-v", "image", cpu="4", images=[(MODEL_IMAGE, 2400 * MI)]),
        node("rs-a", "resize", cpu="2"), node("rs-p", "pod-level", cpu="2"),
    ])
    resized, resized_status = resized_both_ways()
    pod_level, pod_level_st = pod_level_status()
    await create_pods(admin, [bound("used-a", "bal-a", cpu="2", memory="2Gi"),
                              bound("used-b", "bal-b", cpu="875m", memory="3200Mi"), resized, pod_level])
    for p, st in ((resized, resized_status), (pod_level, pod_level_st)):
        await admin.request("PATCH", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}/status",
                            body={"status": st}, content_type="application/merge-patch+json")

    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": KUBE}]}).start()
    try:
        theirs_pods = cases(KUBE, "kube")
        await create_pods(admin, theirs_pods)
        theirs = await judge(admin, theirs_pods)
    finally:
        kube.stop()
    for p in theirs_pods:
        await admin.request("DELETE", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}",
                            body={"gracePeriodSeconds": 0})
    sched = scheduler_factory(scheduler_config()).start()
    ours_pods = cases("pysched", "ours")
    await create_pods(admin, ours_pods)
    ours = await judge(admin, ours_pods)
    sched.terminate()

    release = binaries_version(control_plane.bin)
    assert theirs["balanced"] == ("bound", "bal-a" if release < (1, 36) else "bal-b"), theirs
    assert theirs["image"] == ("bound", "img-c" if release < (1, 36) else "img-v"), theirs
    assert (theirs["resize"][0] == "Unschedulable") == (release < (1, 37)), theirs
    assert (theirs["pod-level"][0] == "Unschedulable") == (release >= (1, 37)), theirs
    assert ours == theirs
