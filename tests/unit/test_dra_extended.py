"""Extended resources backed by DRA (DRAExtendedResource): the DeviceClass mapping, the special
claim's requests and mappings, and DynamicResources' PreFilter to PreBind for them."""

from __future__ import annotations

import asyncio
import copy

import pytest

from pysched.framework import CycleState, PodInfo
from pysched.framework.features import default_gates
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.dynamic_resources.extended import (
    ANNOTATION,
    DEVICE_CLASS_PREFIX,
    ExtendedResourceClasses,
    requests_and_mappings,
)
from pysched.testing import UAU, PluginTester

from .conftest import node, pod
from .test_plugin_dynamic_resources import DRIVER, at_release, slice_

GPU = "example.com/gpu"
FINALIZER = "resource.kubernetes.io/delete-protection"


def device_class(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z") -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if resource:
        spec["extendedResourceName"] = resource
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "creationTimestamp": created, "resourceVersion": "1"}, "spec": spec}


def container(name: str, **requests) -> dict:
    return {"name": name, "image": "x", "resources": {"requests": dict(requests)}}


# -- the mapping -------------------------------------------------------------------------------

def test_a_class_backs_its_extended_resource_name_and_its_implicit_one():
    m = ExtendedResourceClasses([device_class("gpu", GPU), device_class("plain")])
    assert m.device_class(GPU)["metadata"]["name"] == "gpu"
    assert m.device_class(DEVICE_CLASS_PREFIX + "gpu")["metadata"]["name"] == "gpu"
    assert m.device_class(DEVICE_CLASS_PREFIX + "plain")["metadata"]["name"] == "plain"
    assert m.device_class("example.com/other") is None


def test_the_newer_class_takes_a_shared_name_then_the_smaller_name_with_upstreams_quirks():
    old = device_class("b-old", GPU, "2026-01-01T00:00:00Z")
    young = device_class("a-young", GPU, "2026-01-02T00:00:00Z")
    late = device_class("c-late", GPU, "2026-01-02T00:00:00Z")
    twin = device_class("0-twin", GPU, "2026-01-02T00:00:00Z")
    m = ExtendedResourceClasses([old, young])
    assert m.device_class(GPU) is young and m.device_class(DEVICE_CLASS_PREFIX + "b-old") is old
    m.add(old)   # re-added (older): keeps nothing new
    assert m.device_class(GPU) is young
    m.add(late)  # as new, larger name: loses - and does not even get its implicit name
    assert m.device_class(GPU) is young and m.device_class(DEVICE_CLASS_PREFIX + "c-late") is None
    m.add(twin)  # as new, smaller name: takes it
    assert m.device_class(GPU) is twin and m.device_class(DEVICE_CLASS_PREFIX + "0-twin") is twin
    # deleting a class forgets its explicit name, whoever holds it
    m.delete(late)
    assert m.device_class(GPU) is None and m.device_class(DEVICE_CLASS_PREFIX + "0-twin") is twin
    # an update of a class that holds its name changes nothing (the old object stays)
    m.add(twin)
    changed = copy.deepcopy(twin)
    changed["spec"]["selectors"] = []
    m.update(twin, changed)
    assert m.device_class(GPU) is twin
    # moved to another name: the old one is forgotten
    moved = copy.deepcopy(twin)
    moved["spec"]["extendedResourceName"] = "example.com/tpu"
    m.update(twin, moved)
    assert m.device_class(GPU) is None and m.device_class("example.com/tpu") is moved


# -- requests and mappings ---------------------------------------------------------------------

def test_requests_per_container_named_by_container_and_resource_index():
    m = ExtendedResourceClasses([device_class("gpu", GPU)])
    spec = {"containers": [container("a", cpu="1", **{GPU: "2"}), container("b", **{GPU: "1"}),
                           container("c", cpu="1")]}
    requests, mappings = requests_and_mappings(spec, [GPU], m)
    # "a": cpu, example.com/gpu sorted -> the gpu is request index 1
    assert requests == [
        {"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                                                      "count": 2}},
        {"name": "container-1-request-0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                                                      "count": 1}}]
    assert mappings == [{"containerName": "a", "resourceName": GPU, "requestName": "container-0-request-1"},
                        {"containerName": "b", "resourceName": GPU, "requestName": "container-1-request-0"}]


def test_init_containers_reuse_the_later_long_lived_requests_and_keep_only_the_largest_of_their_own():
    m = ExtendedResourceClasses([device_class("gpu", GPU)])
    spec = {"initContainers": [container("i0", **{GPU: "3"}), container("i1", **{GPU: "5"}),
                               {**container("side", **{GPU: "1"}), "restartPolicy": "Always"}],
            "containers": [container("main", **{GPU: "2"})]}
    requests, mappings = requests_and_mappings(spec, [GPU], m)
    # long-lived: the sidecar (index 2) and main (3); i0 reuses both (1 + 2 = 3: no request of its
    # own); i1 reuses them and needs 2 more; only the largest short-lived request is kept
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-1-request-0", 2), ("container-2-request-0", 1), ("container-3-request-0", 2)]
    assert mappings == [
        {"containerName": "side", "resourceName": GPU, "requestName": "container-2-request-0"},
        {"containerName": "main", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i0", "resourceName": GPU, "requestName": "container-2-request-0"},
        {"containerName": "i0", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i1", "resourceName": GPU, "requestName": "container-2-request-0"},
        {"containerName": "i1", "resourceName": GPU, "requestName": "container-3-request-0"},
        {"containerName": "i1", "resourceName": GPU, "requestName": "container-1-request-0"}]


# -- the plugin --------------------------------------------------------------------------------

def gpu_pod(name: str = "p", count: str = "2", **more) -> dict:
    p = pod(name, cpu="100m", memory="100Mi")
    p["spec"]["containers"][0]["resources"]["requests"].update({GPU: count, **more})
    return p


def make(*objects, release=(1, 37), nodes=None) -> PluginTester:
    hh = PluginTester(DynamicResources,
                      nodes=nodes or [node("n1"), node("n2", extended={GPU: "4"}), node("n3")],
                      objects=[device_class("gpu", GPU), slice_("n1", "g0", "g1"), *objects])
    at_release(hh, release)
    return hh


def _filter(hh: PluginTester, raw: dict):
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(raw, keep_raw=True)
    state = CycleState()
    _, st = pl.pre_filter(state, p, hh.nodes())
    return pl, p, state, st


def test_only_under_the_gate():
    hh = make(release=(1, 35))
    assert hh.pre_filter(gpu_pod()).is_skip()
    hh = make()
    assert hh.pre_filter(gpu_pod()) is None
    # 1.36 and 1.37 (on by default), or any release with the gate on
    hh.handle.feature_gates = default_gates((1, 35)) | {"DRAExtendedResource"}
    hh.plugin = DynamicResources(None, hh.handle)
    assert hh.pre_filter(gpu_pod()) is None


def test_filter_allocates_where_the_node_does_not_advertise_the_resource():
    hh = make()
    # n1: no example.com/gpu in allocatable, two devices; n2: a device plugin's 4 (NodeResourcesFit's
    # business); n3: nothing to allocate from
    assert hh.filter(gpu_pod()) == {"n1": None, "n2": None, "n3": (UAU, ("cannot allocate all claims",))}
    assert hh.filter(gpu_pod(count="3"))["n1"] == (UAU, ("cannot allocate all claims",))


def test_a_request_neither_allocatable_nor_backed_cannot_fit():
    hh = make(nodes=[node("n1", extended={"other.com/x": "1"}), node("n2")])
    assert hh.filter(gpu_pod(**{"other.com/x": "1"})) == {"n1": None, "n2": (UAU, ("cannot fit resource",))}


def test_a_claim_from_a_prior_cycle_is_refused_and_deleted_by_post_filter():
    hh = make()
    raw = gpu_pod()
    stale = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "p-extended-resources-x1", "namespace": "default", "uid": "uid-stale",
                          "resourceVersion": "7", "annotations": {ANNOTATION: "true"}, "finalizers": [FINALIZER],
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": True,
                                               "uid": raw["metadata"]["uid"]}]},
             "spec": {"devices": {"requests": []}}}
    hh.objects.add(stale)
    assert hh.filter(raw) == {n: (UAU, ("cannot schedule extended resource claim",)) for n in ("n1", "n2", "n3")}
    pl, p, state, _ = _filter(hh, raw)
    pl.filter(state, p, hh.nodes())
    calls = []

    class Client:
        async def request(self, method, path, body=None, **_):
            calls.append((method, path, copy.deepcopy(body)))
            return body or {}
    hh.handle.client = Client()
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True
    _, st = pl.post_filter(state, p, None)
    assert st.code.name == "UNSCHEDULABLE" and st.message() == "deletion of ResourceClaim completed"
    asyncio.run(spawned[0])
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/p-extended-resources-x1"
    assert [(m, pth) for m, pth, _ in calls] == [("PUT", path), ("DELETE", path)]
    assert "finalizers" not in calls[0][2]["metadata"]


class ApiServer:
    """Records requests and answers them as the API server would for these few."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict | None]] = []
        self.version = 100

    async def request(self, method, path, *, body=None, content_type="application/json", **_):
        self.calls.append((method, path, copy.deepcopy(body)))
        out = copy.deepcopy(body) or {}
        meta = out.setdefault("metadata", {})
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        if method == "POST":
            meta["name"] = meta["generateName"] + "abcde"
            meta["uid"] = "uid-created"
        return out


def test_reserve_and_prebind_create_the_claim_write_it_and_the_pods_status():
    hh = make()
    raw = gpu_pod()
    raw["spec"]["containers"][0]["name"] = "main"
    pl, p, state, st = _filter(hh, raw)
    assert st is None
    pl.filter(state, p, hh.nodes())
    assert pl.reserve(state, p, "n1") is None
    [(fake_uid, promised)] = pl.in_flight.items()
    assert promised["metadata"]["name"] == "<extended-resources>"
    assert [r["device"] for r in promised["status"]["allocation"]["devices"]["results"]] == ["g0", "g1"]
    server = ApiServer()
    hh.handle.client = server
    created: list[str] = []
    hh.handle.metrics.resource_claim_created = created.append  # type: ignore[method-assign]
    assert asyncio.run(pl.pre_bind(state, p, "n1")) is None
    assert created == ["success"]   # dynamic_resource_allocation_resourceclaim_creates_total
    (m1, create, body), (m2, put, fin), (m3, put_status, status), (m4, patch, pod_status) = server.calls
    assert (m1, create) == ("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")
    assert body == {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"namespace": "default", "generateName": "p-extended-resources-",
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                                      "uid": raw["metadata"]["uid"], "controller": True}],
                                 "annotations": {ANNOTATION: "true"}},
                    "spec": {"devices": {"requests": [
                        {"name": "container-0-request-1",
                         "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}}
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/p-extended-resources-abcde"
    assert (m2, put) == ("PUT", path) and fin["metadata"]["finalizers"] == [FINALIZER]
    assert (m3, put_status) == ("PUT", path + "/status")
    assert status["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": p.uid}]
    assert "allocationTimestamp" in status["status"]["allocation"]   # 1.37: binding conditions gates on
    assert (m4, patch) == ("PATCH", "/api/v1/namespaces/default/pods/p/status")
    assert pod_status == {"status": {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}],
        "resourceClaimName": "p-extended-resources-abcde"}}}
    # the devices stay promised under the created claim's uid until the store shows it
    assert fake_uid not in pl.in_flight and "uid-created" in pl.in_flight
    # a failed bind after this: Unreserve deletes the created claim
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True
    pl.unreserve(state, p, "n1")
    asyncio.run(spawned[0])
    assert [(m, pth) for m, pth, _ in server.calls[4:]] == [("PUT", path), ("DELETE", path)]


def test_a_node_with_the_device_plugin_needs_no_claim():
    hh = make()
    pl, p, state, _ = _filter(hh, gpu_pod())
    pl.filter(state, p, hh.nodes())
    assert pl.reserve(state, p, "n2") is None and not pl.in_flight
    server = ApiServer()
    hh.handle.client = server
    assert asyncio.run(pl.pre_bind(state, p, "n2")) is None
    assert server.calls == []


@pytest.mark.parametrize("release", [(1, 36), (1, 37)])
def test_the_implicit_name_asks_the_class_too(release):
    hh = make(release=release)
    raw = pod("p")
    raw["spec"]["containers"][0]["resources"]["requests"][DEVICE_CLASS_PREFIX + "gpu"] = "1"
    assert hh.filter(raw) == {"n1": None, "n2": (UAU, ("cannot allocate all claims",)),
                              "n3": (UAU, ("cannot allocate all claims",))}


# -- NodeResourcesFit --------------------------------------------------------------------------

def fit(release=(1, 37), nodes=None) -> PluginTester:
    from pysched.plugins.node_resources_fit import NodeResourcesFit
    hh = PluginTester(NodeResourcesFit, nodes=nodes or [node("n1"), node("n2", extended={GPU: "1"})],
                      objects=[device_class("gpu", GPU)])
    hh.handle.kube_version, hh.handle.feature_gates = release, default_gates(release)
    hh.plugin = NodeResourcesFit(None, hh.handle)
    return hh


def test_fit_leaves_a_dra_backed_resource_to_dynamic_resources_where_the_node_has_none():
    insufficient = (UAU, (f"Insufficient {GPU}",))
    # 1.35 (gate off): checked everywhere
    assert fit((1, 35)).filter(gpu_pod()) == {"n1": insufficient, "n2": insufficient}
    # 1.37: n1 has none of it - DynamicResources' to allocate; n2's device plugin must have room
    assert fit().filter(gpu_pod()) == {"n1": None, "n2": insufficient}
    assert fit().filter(gpu_pod(count="1")) == {"n1": None, "n2": None}
    # a resource no class backs is checked as before
    assert fit().filter(gpu_pod(count="1", **{"other.com/x": "1"}))["n1"] == (UAU, ("Insufficient other.com/x",))


def test_fit_hints_count_delegated_resources_and_device_classes():
    from pysched.framework import ClusterEvent
    from pysched.framework.nodeinfo import NodeSpec
    for release, delegated in (((1, 35), False), ((1, 37), True)):
        events = {r.event: r.hint for r in fit(release).plugin.events_to_register()}
        assert (ClusterEvent("DeviceClass", "Add") in events) == delegated
        waiting = PodInfo.from_dict(gpu_pod(), keep_raw=True)
        node_hint = events[ClusterEvent("Node", "Add")]
        assert node_hint(waiting, None, NodeSpec.from_dict(node("bare"))) is delegated
        # an update that changes nothing the pod asks for: requeued only where DRA would allocate it
        bare = NodeSpec.from_dict(node("bare"))
        labelled = NodeSpec.from_dict(node("bare", labels={"x": "y"}))
        assert node_hint(waiting, bare, labelled) is delegated
    hint = {r.event: r.hint for r in fit().plugin.events_to_register()}[ClusterEvent("DeviceClass", "Add")]
    waiting = PodInfo.from_dict(gpu_pod(), keep_raw=True)
    assert hint(waiting, None, device_class("other", GPU)) is True            # names the resource
    assert hint(waiting, None, device_class("other")) is False               # names nothing it asks for
    implicit = PodInfo.from_dict(gpu_pod(**{DEVICE_CLASS_PREFIX + "other": "1"}), keep_raw=True)
    assert hint(implicit, None, device_class("other")) is True               # its implicit name
    assert hint(waiting, device_class("other", GPU), device_class("other", GPU)) is False   # unchanged name
    assert hint(waiting, device_class("other"), device_class("other", GPU)) is True
