"""Volumes (WaitForFirstConsumer provisioning), the DRA hold and refusal, and scheduling gates, on a real API
server."""

from __future__ import annotations

import pytest

from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import wait_for

pytestmark = pytest.mark.e2e
Z = "topology.kubernetes.io/zone"


async def _get(admin, path):
    return await admin.get(path)


async def test_wait_for_first_consumer_claim_is_provisioned_before_the_pod_binds(admin, scheduler_factory):
    await create_nodes(admin, [make_node("na", labels={Z: "a"}), make_node("nb", labels={Z: "b"})])
    await admin.request("POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "late"},
        "provisioner": "example.com/fake", "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": Z, "values": ["b"]}]}]})
    await admin.request("POST", "/api/v1/namespaces/default/persistentvolumeclaims", body={
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "late",
                 "resources": {"requests": {"storage": "1Gi"}}}})
    pod = make_pod("db")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    missing = make_pod("no-claim")
    missing["spec"]["volumes"] = [{"name": "x", "persistentVolumeClaim": {"claimName": "nope"}}]
    await create_pods(admin, [pod, missing])
    sched = scheduler_factory().start()

    async def annotated():
        pvc = await _get(admin, "/api/v1/namespaces/default/persistentvolumeclaims/data")
        return (pvc["metadata"].get("annotations") or {}).get("volume.kubernetes.io/selected-node")

    # allowedTopologies only permits zone b: the scheduler must pick nb and ask for provisioning there
    assert await wait_for(annotated, 60, what="selected-node annotation") == "nb"
    p = await _get(admin, "/api/v1/namespaces/default/pods/db")
    assert not p["spec"].get("nodeName"), "the pod must wait until its claim is bound"

    # Act as the external provisioner and the PV controller.
    await admin.request("POST", "/api/v1/persistentvolumes", body={
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "late",
                 "csi": {"driver": "fake.example.com", "volumeHandle": "h1"},
                 "claimRef": {"namespace": "default", "name": "data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": Z, "operator": "In", "values": ["b"]}]}]}}}})
    await admin.request("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data",
                        body={"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                              "spec": {"volumeName": "pv-data"}}, content_type="application/merge-patch+json")
    await admin.request("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data/status",
                        body={"status": {"phase": "Bound"}}, content_type="application/merge-patch+json")

    async def bound():
        p = await _get(admin, "/api/v1/namespaces/default/pods/db")
        return p["spec"].get("nodeName")

    assert await wait_for(bound, 60, what="pod bound after its claim") == "nb"
    m = await _get(admin, "/api/v1/namespaces/default/pods/no-claim")
    # VolumeBinding's PreFilter rejected it before DynamicResources' ran: that PostFilter finds no
    # state and ends the PostFilter loop ("not found"), so no preemption is tried - as upstream
    assert pod_scheduled_condition(m)["message"] == ('0/2 nodes are available: persistentvolumeclaim "nope" not found. '
                                                     "not found")
    sched.terminate()


async def _claim(admin, name):
    await admin.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", body={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "example.com"}}]}}})


async def _events_for(admin, pod_name):
    events = await admin.get("/apis/events.k8s.io/v1/namespaces/default/events")
    return [e for e in events.get("items") or () if (e.get("regarding") or {}).get("name") == pod_name]


async def test_dra_pods_wait_for_their_claims_then_are_judged_and_gated_pods_wait(admin, scheduler_factory):
    await create_nodes(admin, [make_node("n1")])
    await _claim(admin, "some-claim")
    dra = make_pod("dra")
    dra["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "some-claim"}]
    held = make_pod("held")
    held["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "later-claim"}]
    gated = make_pod("gated", gates=["example.com/quota"])
    await create_pods(admin, [dra, held, gated, make_pod("plain")])
    sched = scheduler_factory().start()

    async def plain_bound():
        p = await _get(admin, "/api/v1/namespaces/default/pods/plain")
        return p["spec"].get("nodeName")

    await wait_for(plain_bound, 60, what="plain pod bound")

    async def dra_cond():
        return pod_scheduled_condition(await _get(admin, "/api/v1/namespaces/default/pods/dra"))

    cond = await wait_for(dra_cond, 30, what="DRA pod condition")
    # Its claim exists, so DynamicResources judges it: no DeviceClass "example.com" (upstream's text).
    assert cond["reason"] == "Unschedulable" and cond["message"].startswith(
        "0/1 nodes are available: request r: device class example.com does not exist.")
    # A pod whose claim does not exist yet is held before scheduling: no attempt, no condition, no event.
    h = await _get(admin, "/api/v1/namespaces/default/pods/held")
    assert not h["spec"].get("nodeName") and pod_scheduled_condition(h) is None
    assert await _events_for(admin, "held") == []
    # Its claim appears: the hold ends and the pod is judged the same way.
    await _claim(admin, "later-claim")

    async def held_cond():
        return pod_scheduled_condition(await _get(admin, "/api/v1/namespaces/default/pods/held"))

    cond = await wait_for(held_cond, 30, what="released DRA pod condition")
    assert cond["reason"] == "Unschedulable" and "device class example.com does not exist" in cond["message"]
    g = await _get(admin, "/api/v1/namespaces/default/pods/gated")
    assert not g["spec"].get("nodeName")
    assert pod_scheduled_condition(g)["reason"] == "SchedulingGated"   # set by the API server, left alone
    await admin.request("PATCH", "/api/v1/namespaces/default/pods/gated",
                        body={"spec": {"schedulingGates": None}}, content_type="application/merge-patch+json")

    async def gated_bound():
        return (await _get(admin, "/api/v1/namespaces/default/pods/gated"))["spec"].get("nodeName")

    assert await wait_for(gated_bound, 20, what="un-gated pod bound") == "n1"
    sched.terminate()
