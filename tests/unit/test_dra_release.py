"""DynamicResources' behaviour that follows the kube-scheduler release rather than a feature gate:
the allocation's config (1.37), the queue's TargetPod event for a pod's generated claims."""

from __future__ import annotations

import pytest

from pysched.backend.queue.scheduling_queue import _generated_claims_changed
from pysched.framework import CycleState, PodInfo
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.dynamic_resources.allocator import Allocator, SliceIndex
from pysched.testing import PluginTester

from .conftest import node, pod
from .test_plugin_dynamic_resources import CLASS, DRIVER, at_release, dra_pod, slice_

CLASS_CFG = {**CLASS, "spec": {**CLASS["spec"], "config": [{"opaque": {"driver": DRIVER, "parameters": {"c": 1}}}]}}


def _claim(*requests: str, config: list[dict]) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default", "uid": "uid-c", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": r, "exactly": {"deviceClassName": "gpu", "count": 1,
                                                                      "allocationMode": "ExactCount"}}
                                              for r in requests], "config": config}}}


def _config(claim: dict, once: bool) -> list[tuple[str, list[str] | None]]:
    alloc = Allocator([claim], {"gpu": CLASS_CFG}, set(), SliceIndex([slice_("n1", "g0", "g1", "g2")]))
    alloc.kube_version = (1, 37) if once else (1, 35)
    [a] = alloc.allocate("n1", {})
    return [(e["source"], e.get("requests")) for e in a["devices"]["config"]]


def test_1_37_writes_a_claim_config_once_and_one_naming_every_request_without_requests():
    two = {"requests": ["a", "b"], "opaque": {"driver": DRIVER}}
    every = {"opaque": {"driver": DRIVER}}
    c = _claim("a", "b", "c", config=[two, every])
    # 1.35: once per request it names; the class config lists its requests
    assert _config(c, once=False) == [("FromClass", ["a", "b", "c"]), ("FromClaim", ["a", "b"]),
                                      ("FromClaim", ["a", "b"]), ("FromClaim", None)]
    # 1.37: once; the class config names every request: "applies to all", no requests
    assert _config(c, once=True) == [("FromClass", None), ("FromClaim", ["a", "b"]), ("FromClaim", None)]
    # a claim config naming every request loses them too
    assert _config(_claim("a", "b", config=[two]), once=True) == [("FromClass", None), ("FromClaim", None)]


@pytest.mark.parametrize("release", [(1, 35), (1, 36), (1, 37)])
def test_the_plugin_asks_for_1_37s_config_at_1_37(release):
    c = _claim("a", "b", config=[{"requests": ["a", "b"], "opaque": {"driver": DRIVER}}])
    hh = PluginTester(DynamicResources, nodes=[node("n1")], objects=[CLASS_CFG, slice_("n1", "g0", "g1"), c])
    pl = at_release(hh, release)
    p = PodInfo.from_dict(dra_pod("p", "c"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    pl.filter(state, p, hh.nodes())
    assert pl.reserve(state, p, "n1") is None
    config = pl.in_flight["uid-c"]["status"]["allocation"]["devices"]["config"]
    assert len([e for e in config if e["source"] == "FromClaim"]) == (1 if release >= (1, 37) else 2)


def test_a_pods_generated_claim_statuses_are_its_upstream_update_pod_generated_resource_claim():
    a = pod("p")
    b = {**a, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}
    c = {**a, "status": {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x",
                                                          "requestMappings": []}}}
    pa, pb, pc = (PodInfo.from_dict(x, keep_raw=True) for x in (a, b, c))
    assert _generated_claims_changed(pa, pb) and _generated_claims_changed(pa, pc)
    assert not _generated_claims_changed(pb, PodInfo.from_dict(b, keep_raw=True))


def test_a_pod_dynamic_resources_rejected_is_requeued_when_its_generated_claims_are_published():
    """The queue asks the plugins that rejected the pod about the TargetPod event (their hint):
    DynamicResources requeues it once all its claims are there; a pod rejected by another plugin
    stays where it is (a status change is no spec change)."""
    from pysched.backend.queue.scheduling_queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
    from pysched.eventhandlers import EventRegistry

    claim = _claim("gpu", config=[])
    claim["metadata"]["name"] = "p-gpu-x"
    raw = dra_pod("p", "ignored")
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": True,
                                             "uid": raw["metadata"]["uid"]}]
    hh = PluginTester(DynamicResources, nodes=[node("n1")], objects=[CLASS, claim])

    from pysched.plugins.node_resources_fit import NodeResourcesFit

    class Fwk:
        handle = hh.handle
        plugins = {"DynamicResources": hh.plugin, "NodeResourcesFit": PluginTester(NodeResourcesFit).plugin}

    registry = EventRegistry([Fwk()])
    for rejector, moved in (("DynamicResources", True), ("NodeResourcesFit", False)):
        q = SchedulingQueue(sort_key=lambda qpi: (-qpi.pod.priority, qpi.timestamp), pop_from_backoff=False)
        q.event_filter = lambda qpi, ev: registry.interested(qpi, *ev[:5])
        q.add(PodInfo.from_dict(raw, keep_raw=True))
        qpi = q.pop_nowait()
        qpi.unschedulable_plugins = {rejector}
        q.add_unschedulable_if_not_present(qpi)
        published = {**raw, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}
        q.update(PodInfo.from_dict(published, keep_raw=True))
        assert (qpi.where in (ACTIVE, BACKOFF)) == moved and (qpi.where == UNSCHEDULABLE) != moved


@pytest.mark.parametrize("release", [(1, 35), (1, 37)])
def test_cel_runtime_errors_name_the_device_from_1_37(release):
    from pysched.plugins.dynamic_resources.allocator import AllocationError
    bad_class = {**CLASS, "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].x == 1'}}]}}
    alloc = Allocator([_claim("a", config=[])], {"gpu": bad_class}, set(), SliceIndex([slice_("n1", "g0")]))
    alloc.kube_version = release
    with pytest.raises(AllocationError) as err:
        alloc.allocate("n1", {})
    if release < (1, 37):
        assert str(err.value) == "class gpu: selector #0: CEL runtime error: no such key: x"
    else:
        assert str(err.value) == (
            f"class gpu: selector #0 on device {DRIVER}/n1/g0: CEL runtime error: no such key: x. consider using "
            "CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields")
    # an error other than a missing key gets no hint
    odd = {**CLASS, "spec": {"selectors": [{"cel": {"expression": 'quantity("1.5").asInteger() == 1'}}]}}
    alloc = Allocator([_claim("a", config=[])], {"gpu": odd}, set(), SliceIndex([slice_("n1", "g0")]))
    alloc.kube_version = release
    with pytest.raises(AllocationError) as err:
        alloc.allocate("n1", {})
    on = "" if release < (1, 37) else f" on device {DRIVER}/n1/g0"
    assert str(err.value).startswith(f"class gpu: selector #0{on}: CEL runtime error: ")
    assert "consider using" not in str(err.value)
