"""DynamicResources' PreFilter, Filter, Reserve and Unreserve over a snapshot (no API server)."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import pytest

from pysched.framework import ClusterEvent, CycleState, FrameworkError, PodInfo
from pysched.framework.api import ApiError
from pysched.framework.args import load_args
from pysched.framework.features import default_gates
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.dynamic_resources.dynamic_resources import DynamicResourcesArgs
from pysched.testing import UAU, PluginTester

from .conftest import node, pod

DRIVER = "gpu.example.com"
NODES = [node("n1"), node("n2"), node("n3")]
CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def slice_(node_name: str, *names: str, model: str = "a100") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-gpus", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": n, "attributes": {"model": {"string": model}}} for n in names]}}


def claim_(name: str, count: int = 1, selector: str = "", cls: str = "gpu", allocation: dict | None = None) -> dict:
    exactly: dict = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    if allocation is not None:
        c["status"] = {"allocation": allocation}
    return c


def dra_pod(name: str, *claims: str) -> dict:
    p = pod(name)
    p["spec"]["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    return p


def make_tester(*objects) -> PluginTester:
    return PluginTester(DynamicResources, nodes=NODES,
                        objects=[CLASS, slice_("n1", "g0", "g1"), slice_("n2", "g0", model="h100"), *objects])


def at_release(hh: PluginTester, release: tuple[int, int], args: dict | None = None) -> DynamicResources:
    """Rebuild ``hh``'s plugin as kube-scheduler ``release`` (its default gates) runs it."""
    hh.handle.kube_version = release
    hh.handle.feature_gates = default_gates(release)
    hh.plugin = DynamicResources(load_args(DynamicResourcesArgs, args, "args"), hh.handle)
    return hh.plugin


RELEASES = [(1, 35), (1, 36), (1, 37)]


CANNOT = (UAU, ("cannot allocate all claims",))


def test_only_nodes_whose_slices_have_the_devices_pass():
    h100 = f'device.attributes["{DRIVER}"].model == "h100"'
    hh = make_tester(claim_("one"), claim_("two", 2), claim_("h100", selector=h100))
    assert hh.filter(dra_pod("p", "one")) == {"n1": None, "n2": None, "n3": CANNOT}
    assert hh.filter(dra_pod("p", "two")) == {"n1": None, "n2": CANNOT, "n3": CANNOT}
    assert hh.filter(dra_pod("p", "h100")) == {"n1": CANNOT, "n2": None, "n3": CANNOT}
    assert hh.filter(dra_pod("p", "one", "two")) == {"n1": CANNOT, "n2": CANNOT, "n3": CANNOT}


def test_prefilter_refusals_carry_upstreams_text():
    hh = make_tester(claim_("nocls", cls="tpu"))
    st = hh.pre_filter(dra_pod("p", "nocls"))
    assert st.code == UAU and st.message() == "request gpu: device class tpu does not exist"
    assert hh.pre_filter(pod("plain")).is_skip()


def test_devices_allocated_to_other_claims_are_taken():
    taken = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}
    admin = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g1",
                                      "adminAccess": True}]}}
    hh = make_tester(claim_("other", allocation=taken), claim_("watcher", allocation=admin), claim_("two", 2),
                claim_("one"))
    assert hh.filter(dra_pod("p", "two"))["n1"] == CANNOT     # g0 is taken; admin access takes nothing
    assert hh.filter(dra_pod("p", "one"))["n1"] is None


def test_reserve_keeps_devices_in_flight_until_unreserve():
    hh = make_tester(claim_("a", 2), claim_("b"))
    pl: DynamicResources = hh.plugin
    a = PodInfo.from_dict(dra_pod("pa", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, a, hh.nodes())
    pl.filter(state, a, hh.nodes())
    assert pl.reserve(state, a, "n1") is None
    promised = pl.in_flight["uid-a"]
    assert promised["status"]["allocation"]["devices"]["results"][1]["device"] == "g1"
    assert "resource.kubernetes.io/delete-protection" in promised["metadata"]["finalizers"]
    assert hh.filter(dra_pod("pb", "b"))["n1"] == CANNOT      # both of n1's GPUs are promised to pa
    # a second pod sharing claim "a" waits for it rather than allocating it again
    st = hh.pre_filter(dra_pod("pc", "a"))
    assert st.code == UAU and st.message() == "resource claim default/a is in the process of being allocated"
    pl.unreserve(state, a, "n1")
    assert pl.in_flight == {}
    assert hh.filter(dra_pod("pb", "b"))["n1"] is None


def test_in_flight_devices_are_forgotten_once_the_store_shows_the_claim_allocated():
    hh = make_tester(claim_("a", 2))
    pl: DynamicResources = hh.plugin
    a = PodInfo.from_dict(dra_pod("pa", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, a, hh.nodes())
    pl.filter(state, a, hh.nodes())
    pl.reserve(state, a, "n1")
    hh.objects.add(pl.in_flight["uid-a"])          # the watch reports the claim allocated
    pl.settle_in_flight()
    assert pl.in_flight == {}
    assert (DRIVER, "n1", "g0") in pl.allocated_devices()


def test_a_written_allocation_outlives_unreserve_until_the_store_holds_it():
    """Bind fails after PreBind wrote the claim: its devices must stay taken until the watch shows
    the write (or a newer version: the claim deallocated since), not be free in between."""
    hh = make_tester(claim_("a", 2), claim_("b"))
    pl, p, state = _bound_state(hh, dra_pod("pa", "a"))
    client = FakeClient({"a": claim_("a")})
    client.next_version = 10
    hh.handle.client = client
    assert asyncio.run(pl.pre_bind(state, p, "n1")) is None
    assert pl.written == {"uid-a": 11}             # the finalizer's update was 10, the status 11
    pl.unreserve(state, p, "n1")                    # e.g. the bind itself failed
    assert hh.filter(dra_pod("pb", "b"))["n1"] == CANNOT      # still taken: the store lags
    stale = claim_("a")
    stale["metadata"]["resourceVersion"] = "10"
    hh.objects.add(stale)                           # an older event arrives first: still taken
    assert hh.filter(dra_pod("pb", "b"))["n1"] == CANNOT
    deallocated = claim_("a")
    deallocated["metadata"]["resourceVersion"] = "12"
    hh.objects.add(deallocated)                     # newer than the write, and unallocated
    assert hh.filter(dra_pod("pb", "b"))["n1"] is None and pl.in_flight == {}


def test_an_allocated_claim_is_usable_only_on_the_nodes_its_allocation_names():
    on_n2 = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "g0"}]},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}
    hh = make_tester(claim_("shared", allocation=on_n2))
    assert hh.filter(dra_pod("p", "shared")) == {"n1": (UAU, ("resourceclaim not available on the node",)),
                                                 "n2": None,
                                                 "n3": (UAU, ("resourceclaim not available on the node",))}


@pytest.mark.parametrize("release", RELEASES)
def test_a_cel_runtime_error_aborts_the_attempt(release):
    hh = make_tester(claim_("bad", selector=f'device.attributes["{DRIVER}"].memory == 1'))
    at_release(hh, release)
    with pytest.raises(FrameworkError) as exc:
        hh.filter(dra_pod("p", "bad"))
    st = exc.value.status
    assert st.code.name == "ERROR"
    if release < (1, 37):
        assert st.message() == "claim default/bad: selector #0: CEL runtime error: no such key: memory"
    else:   # 1.37 names the device, and a missing key gets a hint
        assert st.message() == (
            f"claim default/bad: selector #0 on device {DRIVER}/n1/g0: CEL runtime error: no such key: memory. "
            "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
            "for optional fields")



def test_filter_timeout_is_parsed_from_the_args():
    assert PluginTester(DynamicResources, {"filterTimeout": "250ms"}).plugin.filter_timeout == pytest.approx(0.25)
    assert PluginTester(DynamicResources, {"filterTimeout": "0s"}).plugin.filter_timeout == 0.0


class FakeClient:
    """Records requests; ``fail`` maps (method, path) to ApiErrors raised once each, in order."""

    def __init__(self, server_claims: dict[str, dict], fail: dict | None = None):
        self.server = server_claims
        self.fail = {k: list(v) for k, v in (fail or {}).items()}
        self.calls: list[tuple[str, str, dict | None]] = []
        self.next_version = 100

    async def request(self, method, path, *, body=None, content_type="application/json", **_):
        self.calls.append((method, path, copy.deepcopy(body)))
        errors = self.fail.get((method, path))
        if errors:
            raise errors.pop(0)
        name = path.split("/resourceclaims/")[1].split("/")[0]
        if method == "GET":
            return copy.deepcopy(self.server[name])
        if method == "PUT":
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = str(self.next_version)
            self.next_version += 1
            self.server[name] = stored
            return copy.deepcopy(stored)
        return {}


def _bound_state(hh: PluginTester, pod_raw: dict) -> tuple[DynamicResources, PodInfo, CycleState]:
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(pod_raw, keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    pl.filter(state, p, hh.nodes())
    assert pl.reserve(state, p, "n1") is None
    return pl, p, state


def test_prebind_writes_the_finalizer_then_allocation_and_reservation_retrying_a_conflict():
    hh = make_tester(claim_("a"))
    pl, p, state = _bound_state(hh, dra_pod("pa", "a"))
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a"
    client = FakeClient({"a": claim_("a")},
                        fail={("PUT", path + "/status"): [ApiError(409, "Conflict", "the object has been modified")]})
    hh.handle.client = client
    assert asyncio.run(pl.pre_bind(state, p, "n1")) is None
    assert [(m, u) for m, u, _ in client.calls] == [
        ("PUT", path),                 # the delete-protection finalizer
        ("PUT", path + "/status"),     # conflict
        ("GET", path),                 # re-read (the finalizer is there now)
        ("PUT", path + "/status")]
    written = client.server["a"]
    assert written["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert written["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": p.name, "uid": p.uid}]


def test_prebind_refuses_a_claim_allocated_elsewhere_meanwhile():
    hh = make_tester(claim_("a"))
    pl, p, state = _bound_state(hh, dra_pod("pa", "a"))
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a"
    other = claim_("a", allocation={"devices": {"results": []}})
    client = FakeClient({"a": other}, fail={("PUT", path): [ApiError(409, "Conflict", "modified")]})
    hh.handle.client = client
    st = asyncio.run(pl.pre_bind(state, p, "n1"))
    assert st.code.name == "ERROR" and st.message() == "claim default/a got allocated elsewhere in the meantime"


def test_unreserve_takes_the_pod_out_of_reserved_for():
    shared = claim_("s", allocation={"devices": {"results": []}})
    hh = make_tester(shared)
    pl: DynamicResources = hh.plugin
    raw = dra_pod("pa", "s")
    p = PodInfo.from_dict(raw, keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    st = state.get("DynamicResources/state")
    st.claims[0]["status"]["reservedFor"] = [{"resource": "pods", "name": p.name, "uid": p.uid}]  # PreBind wrote
    client = FakeClient({"s": shared})
    hh.handle.client = client
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True
    pl.unreserve(state, p, "n1")
    asyncio.run(spawned[0])
    assert client.calls == [("PATCH", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/s/status",
                             {"metadata": {"uid": "uid-s"},
                              "status": {"reservedFor": [{"$patch": "delete", "uid": p.uid}]}})]


def test_score_prefers_the_node_where_the_first_alternative_fits():
    prioritized = claim_("pri")
    prioritized["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "two", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        {"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]
    hh = make_tester(prioritized, claim_("plain"))
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(dra_pod("p", "pri"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    res = pl.filter(state, p, hh.nodes())
    passed = hh.nodes().subset(res.passed)
    assert passed.names == ["n1", "n2"]
    assert pl.pre_score(state, p, passed) is None
    scores = pl.score(state, p, passed)
    assert scores.tolist() == [8, 7]          # n1 fits "two" (first, 8 - 0); n2 only "one" (8 - 1)
    pl.normalize_score(state, p, passed, scores)
    assert scores.tolist() == [100, 87]
    # a pod without prioritized requests skips the Score
    q = PodInfo.from_dict(dra_pod("q", "plain"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, q, hh.nodes())
    assert pl.pre_score(state, q, hh.nodes()).is_skip()
    assert pl.pre_score(CycleState(), PodInfo.from_dict(pod("plain")), hh.nodes()).is_skip()


ON_N2 = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "g0"}]},
         "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
             {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}


def _post_filter(hh: PluginTester, pod_raw: dict):
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(pod_raw, keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    pl.filter(state, p, hh.nodes().subset(np.array([True, False, False])))   # only n1 is left to it
    return pl, p, pl.post_filter(state, p, None)


def test_post_filter_deallocates_an_unreserved_claim_allocated_for_a_node_the_pod_cannot_use():
    stale = claim_("stale", allocation=ON_N2)
    hh = make_tester(stale)
    client = FakeClient({"stale": copy.deepcopy(stale)})
    hh.handle.client = client
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True
    _, _, (result, st) = _post_filter(hh, dra_pod("p", "stale"))
    assert result is None and st.code.name == "UNSCHEDULABLE"
    assert st.message() == "deallocation of ResourceClaim completed"
    asyncio.run(spawned[0])
    [(method, path, body)] = client.calls
    assert (method, path) == ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/stale/status")
    assert "allocation" not in body["status"] and "reservedFor" not in body["status"]


@pytest.mark.parametrize("release", RELEASES)
def test_post_filter_leaves_claims_other_pods_hold(release):
    held = claim_("held", allocation=ON_N2)
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "other", "uid": "uid-other"}]
    hh = make_tester(held)
    at_release(hh, release)
    hh.handle.spawn = lambda coro: pytest.fail("nothing to deallocate")
    _, _, (_, st) = _post_filter(hh, dra_pod("p", "held"))
    # 1.35 and 1.36 say why nothing was done; 1.37's status is a bare Unschedulable
    said = "still not schedulable" if release < (1, 37) else ""
    assert st.code.name == "UNSCHEDULABLE" and st.message() == said and len(st.reasons) == bool(said)
    # a pod without claims: upstream's state is empty (preemption speaks next)
    pl: DynamicResources = hh.plugin
    plain, state = PodInfo.from_dict(pod("plain")), CycleState()
    pl.pre_filter(state, plain, None)
    _, st = pl.post_filter(state, plain, None)
    said = "no new claims to deallocate" if release < (1, 37) else ""
    assert st.code.name == "UNSCHEDULABLE" and st.message() == said and len(st.reasons) == bool(said)
    # PreFilter never ran (an earlier plugin rejected the pod): upstream finds no state - an error
    # that ends the PostFilter loop, so no preemption is tried
    _, st = pl.post_filter(CycleState(), plain, None)
    assert st.code.name == "ERROR" and st.message() == "not found"


def test_prebind_waits_for_an_earlier_unreserve_before_trusting_reserved_for():
    """Unreserve's PATCH (taking the pod out of reservedFor) is still on its way when the pod's
    next attempt reaches PreBind: the claim in the store still lists the pod, but PreBind must
    let the PATCH land and reserve again, or the pod would be bound without a reservation."""
    alloc = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}
    shared = claim_("s", allocation=alloc)
    hh = make_tester(shared)
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(dra_pod("pa", "s"), keep_raw=True)
    reserved = copy.deepcopy(shared)
    reserved["status"]["reservedFor"] = [{"resource": "pods", "name": p.name, "uid": p.uid}]
    hh.objects.add(reserved)                       # the first attempt's PreBind, as the store shows it
    client = FakeClient({"s": copy.deepcopy(shared)})   # the API server once the PATCH has landed
    hh.handle.client = client
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True

    async def scenario():
        first = CycleState()
        pl.pre_filter(first, p, hh.nodes())
        pl.unreserve(first, p, "n1")               # the bind failed: PATCH spawned, not sent yet
        second = CycleState()
        pl.pre_filter(second, p, hh.nodes())       # the retry still sees the pod in reservedFor
        bind = asyncio.ensure_future(pl.pre_bind(second, p, "n1"))
        await asyncio.sleep(0)
        assert not bind.done() and client.calls == []
        await spawned[0]                           # the PATCH lands
        return await bind

    assert asyncio.run(scenario()) is None
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/s"
    assert [(m, u) for m, u, _ in client.calls] == [("PATCH", path + "/status"), ("GET", path),
                                                    ("PUT", path + "/status")]
    assert client.server["s"]["status"]["reservedFor"] == [{"resource": "pods", "name": p.name, "uid": p.uid}]


def test_prebind_lets_the_write_fence_refusal_through():
    """A replica that cannot prove it leads refuses its own write: the engine must see that error
    (it requeues the pod quietly), not a claim failure."""
    from pysched.client.fence import NotLeaderError

    hh = make_tester(claim_("a"))
    pl, p, state = _bound_state(hh, dra_pod("pa", "a"))
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a"
    hh.handle.client = FakeClient({"a": claim_("a")}, fail={("PUT", path): [NotLeaderError("lease lost")]})
    with pytest.raises(NotLeaderError):
        asyncio.run(pl.pre_bind(state, p, "n1"))


def test_a_search_past_filter_timeout_is_timed_out_trying_to_allocate_devices():
    # 40 devices, each on its own NUMA node; two must share one: ~800 steps to find there is no answer.
    numa = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "n1-numa", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"d{i}", "attributes": {"numa": {"int": i}}} for i in range(40)]}}
    pair = claim_("pair", 2)
    pair["spec"]["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
    slow = PluginTester(DynamicResources, {"filterTimeout": "1us"}, nodes=[node("n1")], objects=[CLASS, numa, pair])
    at_release(slow, (1, 35), {"filterTimeout": "1us"})
    assert slow.filter(dra_pod("p", "pair")) == {"n1": (UAU, ("timed out trying to allocate devices",))}
    patient = PluginTester(DynamicResources, nodes=[node("n1")], objects=[CLASS, numa, pair])
    assert patient.filter(dra_pod("p", "pair")) == {"n1": CANNOT}
    # 1.36 on: an Error naming the node (the attempt ends; the pod retries after a backoff)
    for release in ((1, 36), (1, 37)):
        at_release(slow, release, {"filterTimeout": "1us"})
        with pytest.raises(FrameworkError) as err:
            slow.filter(dra_pod("p", "pair"))
        st = err.value.status
        assert st.code.name == "ERROR" and st.message() == (
            "node n1: timed out trying to allocate devices")   # the runtime prefixes running "..." filter plugin


@pytest.mark.parametrize("release", RELEASES)
def test_score_counts_an_already_allocated_claims_choice_from_1_36(release):
    """Upstream's computeScore walks every claim of the pod from 1.36: one allocated already adds
    8 - i for the subrequest its own allocation chose, on every node the others fit."""
    held = claim_("held", allocation={"devices": {"results": [
        {"request": "gpu/one", "driver": DRIVER, "pool": "n1", "device": "g1"}]}})
    held["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "two", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        {"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]
    pri = claim_("pri")
    pri["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "any", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]
    hh = make_tester(held, pri)
    pl = at_release(hh, release)
    p = PodInfo.from_dict(dra_pod("p", "held", "pri"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    passed = hh.nodes().subset(pl.filter(state, p, hh.nodes()).passed)
    assert passed.names == ["n1", "n2"]
    assert pl.pre_score(state, p, passed) is None
    # "pri" takes its first (only) alternative: 8; "held" chose its second: 7 more from 1.36
    assert pl.score(state, p, passed).tolist() == ([8, 8] if release < (1, 36) else [15, 15])


@pytest.mark.parametrize("release", RELEASES)
def test_events_per_release(release):
    """1.37 registers ResourceClaim Delete (an allocated claim deleted frees its devices); every
    release requeues a pod on its own update publishing its generated claims."""
    hh = make_tester(claim_("one"))
    pl = at_release(hh, release)
    events = {r.event: r.hint for r in pl.events_to_register()}
    assert (ClusterEvent("ResourceClaim", "Delete") in events) == (release >= (1, 37))
    hint = events[ClusterEvent("TargetPod", "UpdatePodGeneratedResourceClaim")]
    waiting = PodInfo.from_dict(dra_pod("p", "one"), keep_raw=True)
    assert hint(waiting, waiting, waiting) is True
    missing = PodInfo.from_dict(dra_pod("p", "nosuch"), keep_raw=True)
    assert hint(missing, missing, missing) is False
    claim_hint = events[ClusterEvent("ResourceClaim", "Add")]
    allocated, unallocated = claim_("x", allocation=ON_N2), claim_("x")
    if release >= (1, 37):
        assert claim_hint(waiting, allocated, None) is True    # deleted while allocated: devices free
        assert claim_hint(waiting, unallocated, None) is False
    # a pod without claims (extended resources backed by DRA) is requeued by a deallocation
    plain = PodInfo.from_dict(pod("plain"), keep_raw=True)
    assert claim_hint(plain, allocated, unallocated) is True
    assert claim_hint(plain, unallocated, claim_("x", allocation=ON_N2)) is False


def test_explain_shows_dra_verdicts_and_the_gpu_score_of_dra_gpus():
    """``explain`` (the offline scheduler's trace): DynamicResources' verdict per node for a pod
    with a GPU claim, and the GPU score keeping a DRA GPU node free for a pod without one."""
    from pysched.apis.config.decode import parse
    from pysched.tools.offline import OfflineScheduler

    gpu_driver = "gpu.nvidia.com"
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "pysched", "plugins": {"multiPoint": {"enabled": [{"name": "GPU"}]}}}]})
    sim = OfflineScheduler(cfg)
    for n in ("n1", "n2"):
        sim.add_node(node(n))
    sim.add_object({**CLASS, "metadata": {"name": gpu_driver},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{gpu_driver}"'}}]}})
    gpus = slice_("n1", "gpu-0")
    gpus["spec"]["driver"] = gpu_driver
    sim.add_object(gpus)
    sim.add_object(claim_("train", cls=gpu_driver))
    trainer = dra_pod("trainer", "train")
    trainer["spec"]["schedulerName"] = "pysched"
    out = sim.schedule(trainer, explain=True)
    assert out.node == "n1"
    assert {"plugin": "DynamicResources", "nodes": {"n1": "passed", "n2": "cannot allocate all claims"}} \
        in out.trace["filter"]
    web = pod("web")
    web["spec"]["schedulerName"] = "pysched"
    out = sim.schedule(web, explain=True)
    assert out.node == "n2"
    assert {n: s["raw"] for n, s in out.trace["score"]["GPU"].items()} == {"n1": 0, "n2": 100}
