"""Extended resources backed by DRA (DRAExtendedResource, on by default from 1.36, GA in 1.37):
kube-scheduler 1.37.2 and pysched, each alone on a fresh control plane with the same objects.

A DeviceClass ``gpu-er`` backs ``example.com/gpu`` (``spec.extendedResourceName``; and its implicit
``deviceclass.resource.kubernetes.io/gpu-er``); the fake driver's ResourceSlices publish the
devices (``dra_kit``). Cases, each in its own namespace on its own nodes:

* ``explicit``: a pod asks ``example.com/gpu: 2`` on a node without a device plugin: placed there,
  its special claim created (generateName ``<pod>-extended-resources-``, the annotation, the pod
  as controller owner, request ``container-0-request-1``), allocated, reserved, finalized, and the
  pod's ``status.extendedResourceClaimStatus`` naming it;
* ``implicit``: the same through ``deviceclass.resource.kubernetes.io/gpu-er: 1``, two containers;
* ``plugin``: the node advertises ``example.com/gpu`` (a device plugin): NodeResourcesFit's, no claim;
* ``too-many``: 5 where the node has 4 devices: pending, ``cannot allocate all claims``;
* ``no-fit``: it also asks ``other.com/x``, which the node lacks and no class backs (the profile
  has NodeResourcesFit ignore it): DynamicResources says ``cannot fit resource``.

Compared: the node of each pod or its whole FailedScheduling message, each claim (generateName,
annotations, owner, spec, allocation with ``allocationTimestamp`` as present, reservedFor,
finalizers) and each pod's ``extendedResourceClaimStatus`` (the claim's name by its generateName).
Skipped below a 1.37 control plane (1.35's gate is off).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time

import pytest

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess, binaries_version
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import SchedulerProcess, scheduler_config
from .dra_kit import CASE_LABEL, MIXED, RES, TIMESTAMP_SET, _tail, device_class, resource_slice

pytestmark = pytest.mark.e2e

GPU = "example.com/gpu"
CLASS = "gpu-er"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
OTHER = "other.com/x"
PROFILE = "dra-ext"


def _pod(name: str, case: str, *containers: dict[str, str]) -> dict:
    p = make_pod(name, namespace=f"ext-{case}", scheduler=PROFILE, cpu="10m", memory="10Mi",
                 node_selector={CASE_LABEL: case})
    base = p["spec"]["containers"][0]
    p["spec"]["containers"] = []
    for i, extra in enumerate(containers):
        c = copy.deepcopy(base)
        c["name"] = f"c{i}"
        c["resources"]["requests"].update(extra)
        c["resources"]["limits"] = dict(extra)   # extended resources: requests equal limits
        p["spec"]["containers"].append(c)
    return p


# case -> (nodes: name -> extended allocatable or None, pods)
CASES: dict[str, tuple[dict[str, dict | None], list[dict]]] = {
    "explicit": ({"explicit-n1": None}, [_pod("explicit-pod", "explicit", {GPU: "2"})]),
    "implicit": ({"implicit-n1": None}, [_pod("implicit-pod", "implicit", {IMPLICIT: "1"}, {IMPLICIT: "2"})]),
    "plugin": ({"plugin-n1": {GPU: "4"}}, [_pod("plugin-pod", "plugin", {GPU: "2"})]),
    "too-many": ({"too-many-n1": None}, [_pod("too-many-pod", "too-many", {GPU: "5"})]),
    "no-fit": ({"no-fit-n1": None}, [_pod("no-fit-pod", "no-fit", {GPU: "1", OTHER: "1"})]),
}
PENDING = {"too-many-pod", "no-fit-pod"}


def _profile() -> dict:
    return {"schedulerName": PROFILE,
            "pluginConfig": [{"name": "NodeResourcesFit", "args": {"ignoredResources": [OTHER]}}]}


async def _create(admin: KubeClient) -> None:
    cls = device_class(CLASS)
    cls["spec"]["extendedResourceName"] = GPU
    await admin.request("POST", f"{RES}/deviceclasses", body=cls, rate_limit=False)
    for case, (nodes, pods) in CASES.items():
        await admin.request("POST", "/api/v1/namespaces", rate_limit=False,
                            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ext-{case}"}})
        await create_nodes(admin, [make_node(n, labels={CASE_LABEL: case}, extended=ext) for n, ext in nodes.items()])
        for n, ext in nodes.items():
            if ext is None:
                await admin.request("POST", f"{RES}/resourceslices", body=resource_slice(n, MIXED), rate_limit=False)
        await create_pods(admin, pods)


def _claim(c: dict, pods_by_uid: dict[str, str]) -> dict:
    meta = c["metadata"]
    st = copy.deepcopy(c.get("status") or {})
    alloc = st.get("allocation")
    if alloc and "allocationTimestamp" in alloc:
        alloc["allocationTimestamp"] = TIMESTAMP_SET
    owners = [{**r, "uid": pods_by_uid.get(r.get("uid"), r.get("uid"))} for r in meta.get("ownerReferences") or ()]
    return {"generateName": meta.get("generateName"), "annotations": meta.get("annotations"), "owners": owners,
            "finalizers": meta.get("finalizers"), "spec": c.get("spec"), "allocation": alloc,
            "reservedFor": sorted(r.get("name", "") for r in st.get("reservedFor") or ())}


async def _outcome(admin: KubeClient) -> dict:
    out: dict = {}
    for case in CASES:
        ns = f"ext-{case}"
        pods = await list_pods(admin, ns)
        uids = {p["metadata"]["uid"]: f"<{p['metadata']['name']}>" for p in pods}
        claims, _ = await admin.list_all(f"{RES}/namespaces/{ns}/resourceclaims")
        names = {c["metadata"]["name"]: (c["metadata"].get("generateName") or "") + "*" for c in claims}
        case_out: dict = {"claims": sorted(json.dumps(_claim(c, uids), sort_keys=True) for c in claims)}
        for p in pods:
            name = p["metadata"]["name"]
            if p["spec"].get("nodeName"):
                placed: object = p["spec"]["nodeName"]
            else:
                cond = pod_scheduled_condition(p) or {}
                placed = {"pending": cond.get("message"), "reason": cond.get("reason")}
            ext = copy.deepcopy((p.get("status") or {}).get("extendedResourceClaimStatus"))
            if ext:
                ext["resourceClaimName"] = names.get(ext.get("resourceClaimName"), ext.get("resourceClaimName"))
            case_out[name] = {"placed": placed, "extendedResourceClaimStatus": ext}
        out[case] = case_out
    return out


def _settled(outcome: dict) -> bool:
    for case_out in outcome.values():
        for name, v in case_out.items():
            if name == "claims":
                continue
            placed = v["placed"]
            if name in PENDING:
                if not isinstance(placed, dict) or placed.get("reason") != "Unschedulable":
                    return False
            elif not isinstance(placed, str) or (name != "plugin-pod" and not v["extendedResourceClaimStatus"]):
                return False
    return True


_RUNS: dict[str, tuple[dict, str]] = {}


async def run(who: str, timeout: float = 60.0) -> tuple[dict, str]:
    if who in _RUNS:
        return _RUNS[who]
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await _create(admin)
            if who == "kube":
                proc = KubeSchedulerProcess(cp, {"profiles": [_profile()],
                                                 "clientConnection": {"qps": 500, "burst": 1000}}).start()
                stop, log_path = proc.stop, proc.log_path
            else:
                ours = SchedulerProcess(cp, cp.workdir, scheduler_config(profiles=[_profile()]), name=who).start()
                stop, log_path = ours.close, ours.log_path
            try:
                deadline = time.monotonic() + timeout
                outcome = await _outcome(admin)
                while not _settled(outcome) and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                    outcome = await _outcome(admin)
            finally:
                stop()
            _RUNS[who] = (outcome, _tail(log_path))
            return _RUNS[who]
        finally:
            await admin.close()


@pytest.fixture(autouse=True)
def _needs_137():
    if binaries_version() < (1, 37):
        pytest.skip("extended resources backed by DRA: kube-scheduler 1.37's default (the gate is off in 1.35)")


async def test_kube_scheduler_does_what_the_cases_say():
    kube, log = await run("kube")
    print(json.dumps(kube, indent=1, sort_keys=True))
    assert kube["explicit"]["explicit-pod"]["placed"] == "explicit-n1", log
    [claim] = [json.loads(c) for c in kube["explicit"]["claims"]]
    assert claim["generateName"] == "explicit-pod-extended-resources-"
    assert claim["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim["owners"] == [{"apiVersion": "v1", "kind": "Pod", "name": "explicit-pod", "uid": "<explicit-pod>",
                                "controller": True}]
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "container-0-request-1", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount",
                                                      "count": 2}}]
    assert claim["reservedFor"] == ["explicit-pod"]
    assert claim["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert kube["explicit"]["explicit-pod"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "c0", "resourceName": GPU, "requestName": "container-0-request-1"}],
        "resourceClaimName": "explicit-pod-extended-resources-*"}
    assert kube["plugin"] == {"claims": [], "plugin-pod": {"placed": "plugin-n1", "extendedResourceClaimStatus": None}}
    assert "cannot allocate all claims" in kube["too-many"]["too-many-pod"]["placed"]["pending"]
    assert "cannot fit resource" in kube["no-fit"]["no-fit-pod"]["placed"]["pending"]


@pytest.mark.parametrize("case", list(CASES))
async def test_pysched_does_what_kube_scheduler_does(case):
    kube, _ = await run("kube")
    ours, log = await run("pysched")
    assert ours[case] == kube[case], f"{json.dumps(ours[case], indent=1, sort_keys=True)}\n--- pysched log ---\n{log}"
