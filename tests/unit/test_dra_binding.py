"""DynamicResources with device binding conditions (DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus on; kube-scheduler 1.37's defaults): which devices are allocated, what
the allocation carries, PreBind's wait and its verdicts, Filter's and PostFilter's handling of a
claim whose binding failed or timed out; and that nothing of it happens with the gates off."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta

import pytest

from pysched.apis.config import ConfigError
from pysched.framework import CycleState, PodInfo
from pysched.framework.args import load_args
from pysched.plugins.dynamic_resources import DynamicResources, DynamicResourcesArgs, binding
from pysched.testing import UAU, PluginTester

from .conftest import node
from .test_plugin_dynamic_resources import CLASS, DRIVER, FakeClient, claim_, dra_pod

GATES = frozenset({"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"})
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ATTACHED, FAILED = "dra.example.com/attached", "dra.example.com/failed"
PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/a"
NOT_AVAILABLE = (UAU, ("resourceclaim not available on the node",))


def bc_device(name: str, **extra) -> dict:
    return {"name": name, "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED], **extra}


def slice_(node_name: str | None, pool: str, *devices: dict) -> dict:
    spec: dict = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                  "devices": list(devices)}
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{pool}-slice", "resourceVersion": "1"}, "spec": spec}


def make_tester(*objects, gates: frozenset[str] = GATES, args: dict | None = None) -> PluginTester:
    """A PluginTester whose plugin was built with ``gates`` (the kube feature gates that are on)."""
    hh = PluginTester(DynamicResources, nodes=[node("n1"), node("n2")], objects=[CLASS, *objects])
    hh.handle.feature_gates = gates
    hh.plugin = DynamicResources(load_args(DynamicResourcesArgs, args, "args", gates), hh.handle)
    hh.plugin.now = lambda: NOW
    return hh


def allocate(hh: PluginTester, raw_pod: dict, node_name: str = "n1") -> tuple[DynamicResources, PodInfo, CycleState]:
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(raw_pod, keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    pl.filter(state, p, hh.nodes())
    assert pl.reserve(state, p, node_name) is None
    return pl, p, state


def results(pl: DynamicResources, uid: str = "uid-a") -> list[dict]:
    return pl.in_flight[uid]["status"]["allocation"]["devices"]["results"]


# -- allocation --------------------------------------------------------------------------------

def test_devices_with_binding_conditions_are_allocated_only_with_the_gates():
    objects = (slice_("n1", "n1", bc_device("g0")), claim_("a"))
    assert make_tester(*objects, gates=frozenset()).filter(dra_pod("p", "a"))["n1"] == (
        UAU, ("cannot allocate all claims",))
    assert make_tester(*objects, gates=frozenset({"DRADeviceBindingConditions"})).filter(dra_pod("p", "a"))["n1"] == (
        UAU, ("cannot allocate all claims",))
    pl, _, _ = allocate(make_tester(*objects), dra_pod("p", "a"))
    assert results(pl) == [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0",
                            "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}]


def test_binds_to_node_limits_an_allocation_from_a_cluster_wide_slice_to_the_node():
    hh = make_tester(slice_(None, "shared", bc_device("g0", bindsToNode=True)), claim_("a"))
    pl, _, _ = allocate(hh, dra_pod("p", "a"), "n2")
    assert pl.in_flight["uid-a"]["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}
    # without bindsToNode, the device is usable everywhere: no selector
    hh = make_tester(slice_(None, "shared", bc_device("g0")), claim_("a"))
    pl, _, _ = allocate(hh, dra_pod("p", "a"), "n2")
    assert "nodeSelector" not in pl.in_flight["uid-a"]["status"]["allocation"]


@pytest.mark.parametrize("gates", [frozenset(), GATES], ids=["gates-off", "gates-on"])
def test_pools_with_binding_conditions_are_tried_after_the_others(gates):
    # pool "a" sorts first by name, but one of its devices has binding conditions: "b" is tried first
    hh = make_tester(slice_("n1", "a", {"name": "plain"}, bc_device("slow")), slice_("n1", "b", {"name": "g0"}),
                claim_("a"), gates=gates)
    pl, _, _ = allocate(hh, dra_pod("p", "a"))
    assert [(r["pool"], r["device"]) for r in results(pl)] == [("b", "g0")]


# -- args --------------------------------------------------------------------------------------

def test_binding_timeout_is_allowed_with_the_gates_and_at_least_one_second():
    assert make_tester().plugin.binding_timeout == 600.0
    assert make_tester(args={"bindingTimeout": "90s"}).plugin.binding_timeout == 90.0
    with pytest.raises(ConfigError, match=r'^args\.bindingTimeout: Invalid value: "500ms": must be at least 1 second$'):
        make_tester(args={"bindingTimeout": "500ms"})
    with pytest.raises(ConfigError, match=r"^args\.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
                                          r"DRAResourceClaimDeviceStatus feature gate is disabled$"):
        make_tester(args={"bindingTimeout": "90s"}, gates=frozenset({"DRADeviceBindingConditions"}))


# -- the rules ---------------------------------------------------------------------------------

def bc_claim(conditions: list[dict] | None = None, timestamp: str | None = None) -> dict:
    result = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0",
              "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
    c = claim_("a", allocation={"devices": {"results": [result]}})
    if timestamp:
        c["status"]["allocation"]["allocationTimestamp"] = timestamp
    if conditions is not None:
        c["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "g0", "conditions": conditions}]
    return c


def cond(kind: str, status: str = "True", reason: str = "Done", message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-02T03:04:05Z"}


def test_a_claim_is_ready_when_every_binding_condition_is_true():
    assert not binding.claim_ready(claim_("a"))                               # not allocated
    assert binding.claim_ready(claim_("a", allocation={"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}))   # nothing to wait for
    assert not binding.claim_ready(bc_claim())                                # no device status yet
    assert not binding.claim_ready(bc_claim([cond(ATTACHED, "False")]))
    assert not binding.claim_ready(bc_claim([cond("other")]))
    assert binding.claim_ready(bc_claim([cond(ATTACHED)]))
    assert binding.claim_ready(bc_claim([cond(ATTACHED), cond(FAILED, "False")]))


def test_a_true_failure_condition_fails_the_binding_with_upstreams_text():
    with pytest.raises(binding.BindingFailed) as exc:
        binding.claim_ready(bc_claim([cond(ATTACHED), cond(FAILED, reason="NoFabric", message='port "7" down')]))
    assert str(exc.value) == 'device binding failed: claim=a, reason=NoFabric, message="port \\"7\\" down"'


def test_a_claim_times_out_binding_timeout_after_its_allocation_timestamp():
    c = bc_claim(timestamp="2026-01-02T03:00:00Z")
    assert not binding.claim_timed_out(c, 600, NOW)
    assert binding.claim_timed_out(c, 60, NOW)
    assert not binding.claim_timed_out(bc_claim(), 60, NOW)                   # no timestamp: unknown
    assert binding.unavailable(c, 60, NOW) and not binding.unavailable(c, 600, NOW)
    assert not binding.unavailable(bc_claim([cond(ATTACHED)], "2026-01-02T03:00:00Z"), 60, NOW)   # ready
    assert binding.unavailable(bc_claim([cond(FAILED)]), 600, NOW)           # failed, whatever the time
    with pytest.raises(binding.BindingFailed, match="^device binding timeout: claim=a$"):
        binding.pod_ready([c], 60, NOW)


def test_status_line_lists_the_devices_as_upstreams_log_does():
    pending = bc_claim([cond(FAILED, "False")])
    assert binding.status_line([pending], "timeout") == f"<driver={DRIVER}, pool=n1> g0 pending=[{ATTACHED}]"
    assert binding.status_line([pending], "success") == ""
    failed = bc_claim([cond(FAILED)])
    assert binding.status_line([failed], "failed") == f"<driver={DRIVER}, pool=n1> g0 failed=[{FAILED}]"


# -- PreBind -----------------------------------------------------------------------------------

class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, who, *, controller, type_, reason, action, note, related=None) -> None:
        self.events.append((type_, reason, action, note))


def prebind_setup(gates: frozenset[str] = GATES):
    hh = make_tester(slice_("n1", "n1", bc_device("g0")), claim_("a"), gates=gates)
    pl, p, state = allocate(hh, dra_pod("pa", "a"))
    client = FakeClient({"a": claim_("a")})
    hh.handle.client = client
    hh.handle.recorder = Recorder()
    return hh, pl, p, state, client


def store_update(hh: PluginTester, client: FakeClient, conditions: list[dict]) -> None:
    """The driver sets the device's conditions; the watch brings the claim to the store."""
    written = copy.deepcopy(client.server["a"])
    written["status"]["devices"] = [{"driver": DRIVER, "pool": "n1", "device": "g0", "conditions": conditions}]
    written["metadata"]["resourceVersion"] = str(client.next_version)
    client.next_version += 1
    hh.objects.add(written)


async def until_waiting(pl: DynamicResources) -> None:
    for _ in range(100):
        if pl.binding_waiters:
            return
        await asyncio.sleep(0)
    raise AssertionError("PreBind never started waiting")


def test_prebind_waits_for_the_binding_conditions_then_lets_the_pod_bind():
    hh, pl, p, state, client = prebind_setup()

    async def scenario():
        task = asyncio.ensure_future(pl.pre_bind(state, p, "n1"))
        await until_waiting(pl)
        assert not task.done()
        written = client.server["a"]["status"]["allocation"]
        assert written["allocationTimestamp"] == "2026-01-02T03:04:05Z"
        assert written["devices"]["results"][0]["bindingConditions"] == [ATTACHED]
        store_update(hh, client, [cond(ATTACHED, "False")])   # not yet
        await asyncio.sleep(0)
        assert not task.done()
        store_update(hh, client, [cond(ATTACHED)])
        return await task

    assert asyncio.run(scenario()) is None
    assert pl.binding_waiters == {}
    assert hh.handle.recorder.events == [("Normal", "BindingConditionsPending", "Scheduling",
                                          "waiting for binding conditions for device on node n1")]


def test_prebind_fails_when_a_failure_condition_turns_true():
    hh, pl, p, state, client = prebind_setup()

    async def scenario():
        task = asyncio.ensure_future(pl.pre_bind(state, p, "n1"))
        await until_waiting(pl)
        store_update(hh, client, [cond(FAILED, reason="Broken", message="no link")])
        return await task

    st = asyncio.run(scenario())
    assert st.code.name == "ERROR"
    assert st.message() == 'device binding failed: claim=a, reason=Broken, message="no link"'


def test_prebind_gives_up_after_the_binding_timeout():
    hh, pl, p, state, client = prebind_setup()
    pl.binding_timeout = 0.0          # the deadline has passed at the first look
    st = asyncio.run(pl.pre_bind(state, p, "n1"))
    assert st.code.name == "ERROR" and st.message() == "device binding timeout: context deadline exceeded"
    assert pl.binding_waiters == {}


def test_prebind_stops_at_a_claim_allocated_longer_ago_than_the_timeout():
    """A claim allocated in an earlier attempt (its timestamp kept) whose conditions never came."""
    old = bc_claim(timestamp="2026-01-02T02:00:00Z")
    hh = make_tester(old)
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(dra_pod("pa", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    hh.handle.client = FakeClient({"a": copy.deepcopy(old)})
    st = asyncio.run(pl.pre_bind(state, p, "n1"))
    assert st.message() == "device binding timeout: claim=a"


def test_without_the_gates_prebind_neither_stamps_nor_waits():
    hh = make_tester(slice_("n1", "n1", {"name": "g0"}), claim_("a"), gates=frozenset())
    pl, p, state = allocate(hh, dra_pod("pa", "a"))
    client = FakeClient({"a": claim_("a")})
    hh.handle.client = client
    assert asyncio.run(pl.pre_bind(state, p, "n1")) is None
    assert "allocationTimestamp" not in client.server["a"]["status"]["allocation"]


def test_with_the_gates_prebind_stamps_every_claim_it_reserves():
    """No device to wait for: PreBind does not wait, but the allocation gets its timestamp, as
    upstream's bindClaim writes it whenever the gates are on."""
    hh = make_tester(slice_("n1", "n1", {"name": "g0"}), claim_("a"))
    pl, p, state = allocate(hh, dra_pod("pa", "a"))
    client = FakeClient({"a": claim_("a")})
    hh.handle.client = client
    assert asyncio.run(pl.pre_bind(state, p, "n1")) is None
    assert client.server["a"]["status"]["allocation"]["allocationTimestamp"] == "2026-01-02T03:04:05Z"


def test_prebind_refuses_a_claim_deallocated_meanwhile():
    """An allocated claim this pod only reserves: deallocated before PreBind writes the reservation."""
    alloc = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}
    hh = make_tester(claim_("a", allocation=alloc))
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(dra_pod("pa", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    path = PATH + "/status"
    from pysched.framework.api import ApiError
    hh.handle.client = FakeClient({"a": claim_("a")}, fail={("PUT", path): [ApiError(409, "Conflict", "modified")]})
    st = asyncio.run(pl.pre_bind(state, p, "n1"))
    assert st.message() == "claim default/a got deallocated elsewhere in the meantime"


# -- Filter and PostFilter ---------------------------------------------------------------------

def test_filter_finds_a_failed_or_timed_out_claim_unavailable_everywhere():
    failed = make_tester(bc_claim([cond(FAILED)], "2026-01-02T03:04:00Z"))
    assert failed.filter(dra_pod("p", "a")) == {"n1": NOT_AVAILABLE, "n2": NOT_AVAILABLE}
    late = make_tester(bc_claim(timestamp=(NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")))
    assert late.filter(dra_pod("p", "a")) == {"n1": NOT_AVAILABLE, "n2": NOT_AVAILABLE}
    waiting = make_tester(bc_claim(timestamp="2026-01-02T03:04:00Z"))
    assert waiting.filter(dra_pod("p", "a")) == {"n1": None, "n2": None}
    off = make_tester(bc_claim([cond(FAILED)]), gates=frozenset())
    assert off.filter(dra_pod("p", "a")) == {"n1": None, "n2": None}


def test_post_filter_deallocates_a_claim_whose_binding_failed():
    failed = bc_claim([cond(FAILED)])
    hh = make_tester(failed)
    client = FakeClient({"a": copy.deepcopy(failed)})
    hh.handle.client = client
    spawned = []
    hh.handle.spawn = lambda coro: spawned.append(coro) or True
    pl: DynamicResources = hh.plugin
    p = PodInfo.from_dict(dra_pod("p", "a"), keep_raw=True)
    state = CycleState()
    pl.pre_filter(state, p, hh.nodes())
    pl.filter(state, p, hh.nodes())
    _, st = pl.post_filter(state, p, None)
    assert st.message() == "deallocation of ResourceClaim completed"
    asyncio.run(spawned[0])
    [(method, path, body)] = client.calls
    assert (method, path) == ("PUT", PATH + "/status")
    assert {"allocation", "reservedFor", "devices"}.isdisjoint(body["status"])


def test_a_claims_own_timeout_is_judged_at_upstreams_poll_ticks_not_at_every_change():
    """Upstream looks every 5 s; a claim whose allocationTimestamp + bindingTimeout passes between
    two looks is not failed by a change seen in between (it would read 'claim=<name>' where
    upstream's wait reads 'context deadline exceeded')."""
    hh, pl, p, state, client = prebind_setup()

    async def scenario():
        task = asyncio.ensure_future(pl.pre_bind(state, p, "n1"))
        await until_waiting(pl)
        pl.now = lambda: NOW + timedelta(seconds=601)       # the claim's own timeout has passed
        store_update(hh, client, [cond(ATTACHED, "False")])   # a change, between two ticks
        await asyncio.sleep(0)
        assert not task.done()
        store_update(hh, client, [cond(ATTACHED)])
        return await task

    assert asyncio.run(scenario()) is None


class _Recorded:
    """Handle.metrics that keeps the binding-condition samples."""

    def __init__(self) -> None:
        self.samples: list[tuple[str, str, bool]] = []

    def binding_conditions(self, driver: str, status: str, waited: float | None) -> None:
        self.samples.append((driver, status, waited is None))


@pytest.mark.parametrize("outcome", ["success", "failure", "timeout"])
def test_prebind_records_kube_schedulers_binding_condition_metrics(outcome):
    """scheduler_dra_bindingconditions_wait_duration_seconds per allocated device and
    scheduler_dra_bindingconditions_allocations_total per device with conditions, by how it ended."""
    hh, pl, p, state, client = prebind_setup()
    recorded = _Recorded()
    pl.handle.metrics = recorded  # type: ignore[assignment]
    if outcome == "timeout":
        pl.binding_timeout = 0.0

    async def scenario():
        task = asyncio.ensure_future(pl.pre_bind(state, p, "n1"))
        if outcome != "timeout":
            await until_waiting(pl)
            store_update(hh, client, [cond(ATTACHED)] if outcome == "success"
                         else [cond(FAILED, reason="Broken", message="no link")])
        return await task

    asyncio.run(scenario())
    assert recorded.samples == [(DRIVER, outcome, False), (DRIVER, outcome, True)]
