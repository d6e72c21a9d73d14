"""GPUShare with GPUs published as DRA devices with consumable capacity (``draDrivers``): the same
policies place a pod asking through a ResourceClaim as one asking through annotations - same node,
same GPU (DynamicResources' allocator steered by the cycle's ``DevicePreference``) - and what the
claims hold is counted once, from Reserve and then from the store."""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from typing import Any

import pytest

from pysched.apis import config as configmod
from pysched.framework.api import ConfigError
from pysched.framework.devicepreference import DEVICE_PREFERENCE_KEY, DeviceID, reorder
from pysched.plugins.dynamic_resources.allocator import Allocator, SliceIndex
from pysched.plugins.gpushare import GPUShare
from pysched.plugins.gpushare.args import GPUShareArgs
from pysched.plugins.gpushare.plugin import GPUPreference
from pysched.testing.objects import make_node, make_pod
from pysched.tools.offline import OfflineScheduler

DRIVER = "gpu.example.com"
MODEL = "A100"
GPU_MEMORY = 40          # Gi per GPU: a request of m thousandths asks m * 40 / 1000 Gi
CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
NODES = 3
GPUS = 2


def gpu_device(name: str, *, multi: bool = True, memory: str = f"{GPU_MEMORY}Gi") -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": MODEL}},
                         "capacity": {"memory": {"value": memory}}}
    if multi:
        d["allowMultipleAllocations"] = True
    return d


def gpu_slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus", "resourceVersion": "1"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def gpu_claim(name: str, milli: int) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    if milli < 1000:
        # milli/1000 of 40Gi, in Mi (exact for multiples of 25)
        exactly["capacity"] = {"requests": {"memory": f"{milli * GPU_MEMORY * 1024 // 1000}Mi"}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"claim-{name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def config(policy: str, dra: bool, **extra: Any) -> configmod.SchedulerConfig:
    args: dict[str, Any] = {"policy": policy, **extra}
    if dra:
        args.update(draDrivers=[DRIVER], draShareCapacity="memory")
    return configmod.parse({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": "pysched", "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}], "enabled": [
                {"name": "PrioritySort"}, {"name": "NodeResourcesFit"}, {"name": "DynamicResources"},
                {"name": "GPUShare"}, {"name": "DefaultBinder"}]},
            "score": {"disabled": [{"name": "NodeResourcesFit"}]}},
            "pluginConfig": [{"name": "GPUShare", "args": args}]}]})


def cluster(policy: str, dra: bool, **extra: Any) -> tuple[OfflineScheduler, GPUShare]:
    sim = OfflineScheduler(config(policy, dra, **extra), seed=7)
    for i in range(NODES):
        name = f"n{i}"
        if dra:
            sim.add_node(make_node(name, cpu="32"))
            sim.add_object(gpu_slice(name, [gpu_device(f"gpu-{g}") for g in range(GPUS)]))
        else:
            sim.add_node(make_node(name, cpu="32", labels={"alibabacloud.com/gpu-card-model": MODEL},
                                   extended={"alibabacloud.com/gpu-count": str(GPUS)}))
    if dra:
        sim.add_object(CLASS)
    plugin = sim.frameworks["pysched"].plugins["GPUShare"]
    assert isinstance(plugin, GPUShare)
    plugin.rng.seed(7)
    return sim, plugin


def gpu_pod(sim: OfflineScheduler, name: str, milli: int, cpu: int, dra: bool) -> dict[str, Any]:
    if dra:
        p = make_pod(name, cpu=f"{cpu}m")
        sim.add_object(gpu_claim(name, milli))
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    else:
        p = make_pod(name, cpu=f"{cpu}m", annotations={"alibabacloud.com/gpu-milli": str(milli)})
    p["metadata"]["uid"] = f"uid-{name}"
    return p


def sequence(n: int = 14, seed: int = 3) -> list[tuple[int, int]]:
    """(GPU thousandths, milli CPU) per pod: 500, 700 and 300 (a GPU half-used, another 70 % used:
    300 fits both, and the policies choose) and a few others."""
    rng = random.Random(seed)
    first = [(500, 2000), (700, 4000), (300, 2000)]
    return first + [(rng.choice((300, 700, 500, 200, 1000)), rng.choice((1000, 2000, 8000))) for _ in range(n - 3)]


def run(policy: str, dra: bool, pods: list[tuple[int, int]]) -> tuple[list[tuple[str | None, tuple[int, ...]]],
                                                                       list[list[int]], OfflineScheduler, GPUShare]:
    sim, plugin = cluster(policy, dra)
    placed = []
    for k, (milli, cpu) in enumerate(pods):
        out = sim.schedule(gpu_pod(sim, f"p{k}", milli, cpu, dra))
        placed.append((out.node, plugin.devices_of(f"uid-p{k}") or () if out.node else ()))
    rows = [plugin.table.left[plugin.table.row(f"n{i}")][:GPUS].tolist() for i in range(NODES)]
    return placed, rows, sim, plugin


def dra_devices(sim: OfflineScheduler) -> dict[str, tuple[str, ...]]:
    """Per claim name: the devices DynamicResources' Reserve allocated (in flight: offline nothing is written)."""
    plugin = sim.frameworks["pysched"].plugins["DynamicResources"]
    return {c["metadata"]["name"]: tuple(r["device"] for r in c["status"]["allocation"]["devices"]["results"])
            for c in plugin.in_flight.values()}


@pytest.mark.parametrize("policy", ["FGD", "BestFit", "GpuPacking"])
def test_dra_gpus_are_placed_as_annotation_gpus(policy):
    pods = sequence()
    by_annotation, rows_annotation, _, _ = run(policy, False, pods)
    by_dra, rows_dra, sim, _ = run(policy, True, pods)
    assert by_dra == by_annotation
    assert rows_dra == rows_annotation
    assert any(node for node, _ in by_dra) and not all(node for node, _ in by_dra)   # some fit, some not
    # the GPU GPUShare holds is the one DynamicResources allocated
    allocated = dra_devices(sim)
    for k, (node, devices) in enumerate(by_dra):
        if node:
            assert allocated[f"p{k}"] == tuple(f"gpu-{d}" for d in devices)


def test_without_the_preference_the_allocator_takes_its_own_order(monkeypatch):
    """The sequence above needs the hook: with GPUShare's preference ignored, DynamicResources
    gives some pod another GPU than the policy chose (the test above would fail)."""
    pods = sequence()
    by_annotation, _, _, _ = run("BestFit", False, pods)
    monkeypatch.setattr(GPUPreference, "order", lambda self, node, devices: None)
    _, _, sim, _ = run("BestFit", True, pods)
    allocated = dra_devices(sim)
    chosen = {f"p{k}": tuple(f"gpu-{d}" for d in devices) for k, (node, devices) in enumerate(by_annotation) if node}
    assert any(allocated.get(name) != devices for name, devices in chosen.items())


class _Prefer:
    def __init__(self, device: str) -> None:
        self.device = device
        self.reported: list[tuple[str, str]] = []

    def order(self, node_name: str, devices: Sequence[DeviceID]) -> Sequence[int] | None:
        return [i for i, d in enumerate(devices) if d[2] == self.device]

    def allocated(self, node_name: str, claim_uid: str, allocation: Any) -> None:
        self.reported.append((node_name, claim_uid))


def test_allocator_tries_the_preferred_device_first_and_is_unchanged_without_one():
    features = frozenset({"DRAConsumableCapacity"})
    slices = [gpu_slice("n0", [gpu_device(f"gpu-{g}") for g in range(3)])]
    classes = {"gpu": CLASS}

    def allocate(preference: Any) -> str:
        allocator = Allocator([gpu_claim("c", 300)], classes, set(), SliceIndex(slices, features=features),
                              features=features)
        allocator.preference = preference
        found = allocator.allocate("n0", {})
        assert found is not None
        return str(found[0]["devices"]["results"][0]["device"])

    assert allocate(None) == "gpu-0"
    assert allocate(_Prefer("gpu-2")) == "gpu-2"
    assert allocate(_Prefer("nosuch")) == "gpu-0"


def test_reorder_puts_the_preferred_first_and_keeps_the_others_order():
    assert reorder(["nic0", "g0", "g1", "nic1", "g2"], [4, 1]) == ["g2", "g0", "nic0", "g1", "nic1"]
    assert reorder(["a", "b"], None) == ["a", "b"]
    assert reorder(["a", "b"], [9, 1, 1]) == ["b", "a"]


def test_reserve_reports_each_claim_allocation_to_the_preference():
    sim, _ = cluster("BestFit", True)
    prefer = _Prefer("gpu-1")
    fwk = sim.frameworks["pysched"]
    p = gpu_pod(sim, "solo", 300, 1000, True)
    real_pre_filter = fwk.run_pre_filter

    def pre_filter(state, pod, *args, **kwargs):
        out = real_pre_filter(state, pod, *args, **kwargs)
        state.write(DEVICE_PREFERENCE_KEY, prefer)     # another plugin's preference, not GPUShare's
        return out

    fwk.run_pre_filter = pre_filter
    out = sim.schedule(p)
    assert out.node and prefer.reported == [(out.node, "claim-solo")]
    assert dra_devices(sim) == {"solo": ("gpu-1",)}


def test_claim_holdings_count_once_and_go_with_the_allocation():
    sim, plugin = cluster("BestFit", True)
    out = sim.schedule(gpu_pod(sim, "a", 300, 1000, True))
    row = plugin.table.row(out.node)
    held = plugin.table.left[row].tolist()
    assert sorted(held[:GPUS]) == [700, 1000]
    # PreBind wrote the allocation: the store's claim replaces the Reserve's holding (not added to it)
    dra = sim.frameworks["pysched"].plugins["DynamicResources"]
    written = next(iter(dra.in_flight.values()))
    sim.objects.apply("resourceclaims", "MODIFIED", written)
    assert plugin.table.left[row].tolist() == held
    sim.remove_pod("uid-a")                     # the pod goes; its allocated claim still holds the GPU
    assert plugin.table.left[row].tolist() == held
    deallocated = {**written, "status": {}}
    sim.objects.apply("resourceclaims", "MODIFIED", deallocated)
    assert plugin.table.left[row].tolist()[:GPUS] == [1000, 1000]


def test_claims_allocated_before_the_slices_are_seen_are_counted():
    """A bound pod's allocated claim (consumedCapacity) read before the slices: counted once they are."""
    sim = OfflineScheduler(config("BestFit", True), seed=1)
    sim.add_node(make_node("n0", cpu="32"))
    claim = gpu_claim("old", 500)
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n0", "device": "gpu-1", "shareID": "x",
         "consumedCapacity": {"memory": "20Gi"}}]}}}
    sim.add_object(claim)
    sim.add_object(gpu_slice("n0", [gpu_device("gpu-0"), gpu_device("gpu-1")]))
    sim.add_object(CLASS)
    plugin = sim.frameworks["pysched"].plugins["GPUShare"]
    sim.schedule(gpu_pod(sim, "b", 200, 1000, True))
    assert plugin.table.left[plugin.table.row("n0")].tolist()[:GPUS] == [1000, 300]   # tightest: gpu-1


def test_a_gpu_without_the_share_capacity_is_a_whole_gpu(caplog):
    sim = OfflineScheduler(config("BestFit", True), seed=1)
    sim.add_node(make_node("n0", cpu="32"))
    sim.add_object(gpu_slice("n0", [{"name": "gpu-0", "allowMultipleAllocations": True,
                                     "capacity": {"cores": {"value": "100"}}}]))
    sim.add_object(CLASS)
    plugin = sim.frameworks["pysched"].plugins["GPUShare"]
    claim = gpu_claim("whole", 1000)
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n0", "device": "gpu-0", "shareID": "x",
         "consumedCapacity": {"cores": "10"}}]}}}
    with caplog.at_level(logging.WARNING, logger="pysched.gpushare"):
        sim.add_object(claim)
        plugin._sync(plugin.handle.all_nodes())
    assert "draShareCapacity" in caplog.text
    assert plugin.table.left[plugin.table.row("n0")].tolist()[:1] == [0]


@pytest.mark.parametrize("args,field", [
    ({"draDrivers": [DRIVER]}, "draShareCapacity"),
    ({"draDrivers": [DRIVER], "draShareCapacity": "not a name!"}, "draShareCapacity"),
    ({"draDrivers": [DRIVER], "draShareCapacity": "memory", "draModelAttribute": "a b"}, "draModelAttribute"),
    ({"draShareCapacity": "memory"}, "draShareCapacity"),
    ({"draDrivers": [""], "draShareCapacity": "memory"}, "draDrivers[0]"),
])
def test_bad_dra_configuration_names_the_field(args, field):
    with pytest.raises(ConfigError, match=re.escape(f".{field}")):
        OfflineScheduler(configmod.parse({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "pysched",
                          "plugins": {"multiPoint": {"enabled": [{"name": "GPUShare"}]}},
                          "pluginConfig": [{"name": "GPUShare", "args": args}]}]}))


def test_dra_is_off_by_default():
    assert GPUShareArgs().dra_drivers == []


def test_annotation_pods_do_not_get_dra_gpus():
    """A node's DRA GPUs are DynamicResources' to allocate: a pod asking through annotations is
    not given one (its index annotation would name a GPU the DRA driver may give to a claim)."""
    sim, _ = cluster("BestFit", True)
    out = sim.schedule(gpu_pod(sim, "ann", 300, 1000, False))
    assert out.node is None and "node(s) had no GPUs" in out.message
    assert sim.schedule(gpu_pod(sim, "claim", 300, 1000, True)).node
