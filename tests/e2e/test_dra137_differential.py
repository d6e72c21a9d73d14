"""kube-scheduler 1.37.2 and pysched allocate the same DRA devices with 1.37's default gates:
device taints and DeviceTaintRules, partitionable devices (shared counters, per-device node
selection), consumable capacity (multi-allocatable devices shared while their capacity lasts,
request policies, ``distinctAttribute``; a result's random ``shareID`` is compared as a UUID).

Each scheduler runs alone on a fresh control plane (Kubernetes 1.37.2: ``PYSCHED_BIN_DIR`` must
name its binaries, the module is skipped otherwise) holding every case below (``dra_kit.SliceCase``:
slices written out whole, DeviceTaintRules; some cases change the cluster once their pods are
pending and settle on what follows; claims may be allocated before the run). kube-scheduler runs
with its defaults, where DRADeviceTaints, DRADeviceTaintRules, DRAPartitionableDevices and
DRAConsumableCapacity are on; so does pysched, following the API server's release (1.37) with its
default gates.

Compared per case as ``test_dra_differential`` compares: the node of each pod or its
FailedScheduling reason, and each claim's allocation (without ``allocationTimestamp``, which
kube-scheduler 1.37 writes for binding conditions), reservedFor and finalizers; every
FailedScheduling message whole. kube-scheduler's outcome is checked against the one written in the
case, and pysched runs once more as the ServiceAccount of ``manifests/`` (DeviceTaintRules must be
readable).
"""

from __future__ import annotations

import json
import uuid

import pytest

from pysched_dev.devcluster import binaries_version

from .dra_kit import (
    DRIVER,
    FINALIZER,
    RES,
    Run,
    SliceCase,
    claim,
    dra_pod,
    exactly,
    on_node,
    pending,
    result,
    run_slice_cases,
)

pytestmark = pytest.mark.e2e

if binaries_version() < (1, 37):
    pytest.skip("needs a Kubernetes 1.37 control plane (PYSCHED_BIN_DIR)", allow_module_level=True)

# -- objects ------------------------------------------------------------------------------------

def dev(name: str, **fields) -> dict:
    return {"name": name, "attributes": {"model": {"string": "a100"}}, **fields}


def node_slice(node: str, *devices: dict, name: str | None = None, pool: str | None = None, count: int = 1,
               generation: int = 1, **spec) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name or f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": list(devices),
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count}, **spec}}


def taint_rule(name: str, taint: dict, **selector) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}}


def tolerating(name: str, *tolerations: dict, **kw) -> dict:
    r = exactly(name, **kw)
    r["exactly"]["tolerations"] = list(tolerations)
    return r


def nodes(case: str, count: int = 1) -> dict[str, list]:
    return {f"{case}-n{i}": [] for i in range(1, count + 1)}


def one_claim(case: str, *requests: dict, **kw) -> dict:
    """The claim ``<case>-claim`` and the pod ``<case>-pod`` using it."""
    return {"claims": [claim(f"{case}-claim", *requests, **kw)],
            "pods": [dra_pod(f"{case}-pod", case, claims={"gpu": f"{case}-claim"})]}


def bound(case: str, node: str, results: list[dict], selector: dict | None = None) -> dict:
    alloc: dict = {"devices": {"results": sorted(results, key=lambda r: (r["request"], r["device"]))}}
    if selector is not None:
        alloc["nodeSelector"] = selector
    return {"pods": {f"{case}-pod": node},
            "claims": {f"{case}-claim": {"allocation": alloc, "reservedFor": [f"{case}-pod"],
                                         "finalizers": [FINALIZER]}}}


def stays_pending(case: str, failing: int) -> dict:
    return {"pods": {f"{case}-pod": pending(no_devices(failing))},
            "claims": {f"{case}-claim": {"allocation": None, "reservedFor": [], "finalizers": []}}}


def no_devices(failing: int) -> str:
    reasons = [f"{failing} cannot allocate all claims",
               f"{TOTAL_NODES - failing} node(s) didn't match Pod's node affinity/selector"]
    return f"0/{TOTAL_NODES} nodes are available: {', '.join(sorted(reasons))}."


BROKEN = {"key": "example.com/broken", "value": "fan", "effect": "NoSchedule"}
EVICT = {"key": "example.com/evict", "effect": "NoExecute"}


async def _delete(admin, path: str) -> None:
    await admin.request("DELETE", path, rate_limit=False)


async def _untaint_slice(admin, name: str) -> None:
    s = await admin.request("GET", f"{RES}/resourceslices/{name}", rate_limit=False)
    for d in s["spec"]["devices"]:
        d.pop("taints", None)
    await admin.request("PUT", f"{RES}/resourceslices/{name}", body=s, rate_limit=False)


# -- cases: device taints -----------------------------------------------------------------------

def taint_cases() -> list[SliceCase]:
    return [
        SliceCase("ta", "a device tainted NoSchedule in its slice is skipped", nodes("ta"),
                  slices=[node_slice("ta-n1", dev("gpu-0", taints=[BROKEN]), dev("gpu-1"))],
                  **one_claim("ta", exactly("gpu")),
                  expected=lambda: bound("ta", "ta-n1", [result("gpu", "ta-n1", "gpu-1")], on_node("ta-n1"))),
        SliceCase("tb", "a request tolerating the taint (Equal, the default operator) gets the device, and the "
                        "result carries its tolerations", nodes("tb"),
                  slices=[node_slice("tb-n1", dev("gpu-0", taints=[BROKEN]))],
                  **one_claim("tb", tolerating("gpu", {"key": "example.com/broken", "value": "fan"})),
                  expected=lambda: bound("tb", "tb-n1", [result("gpu", "tb-n1", "gpu-0", tolerations=[
                      {"key": "example.com/broken", "operator": "Equal", "value": "fan"}])], on_node("tb-n1"))),
        SliceCase("tc", "a DeviceTaintRule (NoExecute) taints the pool of n1: the pod goes to n2", nodes("tc", 2),
                  slices=[node_slice("tc-n1", dev("gpu-0")), node_slice("tc-n2", dev("gpu-0"))],
                  objects=[taint_rule("tc-rule", EVICT, driver=DRIVER, pool="tc-n1")],
                  **one_claim("tc", exactly("gpu")),
                  expected=lambda: bound("tc", "tc-n2", [result("gpu", "tc-n2", "gpu-0")], on_node("tc-n2"))),
        SliceCase("td", "every taint must be tolerated: the request tolerates one of gpu-0's two and not "
                        "gpu-1's: cannot allocate all claims", nodes("td"),
                  slices=[node_slice("td-n1", dev("gpu-0", taints=[EVICT, BROKEN]), dev("gpu-1", taints=[BROKEN]))],
                  **one_claim("td", tolerating("gpu", {"key": "example.com/evict", "operator": "Exists"})),
                  expected=lambda: stays_pending("td", 1)),
        SliceCase("te", "allocationMode All with one tainted device: no allocation (no error)", nodes("te"),
                  slices=[node_slice("te-n1", dev("gpu-0"), dev("gpu-1", taints=[BROKEN]))],
                  **one_claim("te", exactly("gpu", mode="All")),
                  expected=lambda: stays_pending("te", 1)),
        SliceCase("tf", "a taint with effect None does not keep the device", nodes("tf"),
                  slices=[node_slice("tf-n1", dev("gpu-0", taints=[{"key": "example.com/note", "effect": "None"}]))],
                  **one_claim("tf", exactly("gpu")),
                  expected=lambda: bound("tf", "tf-n1", [result("gpu", "tf-n1", "gpu-0")], on_node("tf-n1"))),
        SliceCase("tg", "firstAvailable: the first subrequest does not tolerate the taint, the second does",
                  nodes("tg"),
                  slices=[node_slice("tg-n1", dev("gpu-0", taints=[BROKEN]))],
                  **one_claim("tg", {"name": "gpu", "firstAvailable": [
                      {"name": "plain", "deviceClassName": DRIVER},
                      {"name": "tolerant", "deviceClassName": DRIVER, "tolerations": [{"operator": "Exists"}]}]}),
                  expected=lambda: bound("tg", "tg-n1", [result("gpu/tolerant", "tg-n1", "gpu-0", tolerations=[
                      {"operator": "Exists"}])], on_node("tg-n1"))),
        SliceCase("th", "a DeviceTaintRule keeps one of two devices; deleting it moves the pending pod back "
                        "(the rule's event requeues it)", nodes("th"),
                  slices=[node_slice("th-n1", dev("gpu-0"), dev("gpu-1"))],
                  objects=[taint_rule("th-rule", BROKEN, device="gpu-0")],
                  **one_claim("th", exactly("gpu", count=2)),
                  then=lambda admin: _delete(admin, f"{RES}/devicetaintrules/th-rule"),
                  expected=lambda: bound("th", "th-n1", [result("gpu", "th-n1", "gpu-0"),
                                                         result("gpu", "th-n1", "gpu-1")], on_node("th-n1"))),
        SliceCase("ti", "the driver drops the taint from its slice: the pending pod is placed", nodes("ti"),
                  slices=[node_slice("ti-n1", dev("gpu-0", taints=[BROKEN]))],
                  **one_claim("ti", exactly("gpu")),
                  then=lambda admin: _untaint_slice(admin, f"ti-n1-{DRIVER}"),
                  expected=lambda: bound("ti", "ti-n1", [result("gpu", "ti-n1", "gpu-0")], on_node("ti-n1"))),
    ]


def without_allocation_timestamp(outcome: dict) -> dict:
    """The outcome without ``status.allocation.allocationTimestamp``: kube-scheduler 1.37 writes it
    in PreBind under DRADeviceBindingConditions (binding conditions), which this file does not
    compare."""
    for c in outcome["claims"].values():
        if c.get("allocation"):
            c["allocation"].pop("allocationTimestamp", None)
    return outcome


# -- cases: partitionable devices --------------------------------------------------------------

def counters(node: str, *sets: dict, count: int = 2) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-counters"},
            "spec": {"driver": DRIVER, "nodeName": node, "sharedCounters": list(sets),
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}}


def counter_set(name: str = "gpu-0", **amounts: str) -> dict:
    return {"name": name, "counters": {k: {"value": v} for k, v in amounts.items()}}


def part(name: str, set_name: str = "gpu-0", **amounts: str) -> dict:
    return dev(name, consumesCounters=[{"counterSet": set_name, "counters": {k: {"value": v}
                                                                             for k, v in amounts.items()}}])


def per_device(name: str, *devices: dict) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": DRIVER, "perDeviceNodeSelection": True, "devices": list(devices),
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}}


# a per-device node selector: the nodes of case pd (a device for all nodes would reach every case)
PD_NODES = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "dra.example.com/case", "operator": "In",
                                                         "values": ["pd"]}]}]}


def partitionable_cases() -> list[SliceCase]:
    parts = (part("whole", memory="80Gi"), part("half-0", memory="40Gi"), part("half-1", memory="40Gi"))
    return [
        SliceCase("pa", "shared counters: the whole GPU leaves nothing for a second device, its two halves fit",
                  nodes("pa"),
                  slices=[counters("pa-n1", counter_set(memory="80Gi")), node_slice("pa-n1", *parts, count=2)],
                  **one_claim("pa", exactly("gpu", count=2)),
                  expected=lambda: bound("pa", "pa-n1", [result("gpu", "pa-n1", "half-0"),
                                                         result("gpu", "pa-n1", "half-1")], on_node("pa-n1"))),
        SliceCase("pb", "shared counters exhausted: three halves of an 80Gi GPU do not fit", nodes("pb"),
                  slices=[counters("pb-n1", counter_set(memory="80Gi")),
                          node_slice("pb-n1", part("half-0", memory="40Gi"), part("half-1", memory="40Gi"),
                                     part("half-2", memory="40Gi"), count=2)],
                  **one_claim("pb", exactly("gpu", count=3)),
                  expected=lambda: stays_pending("pb", 1)),
        SliceCase("pc", "per-device node selection: the pool's only device for n2 decides the node, and the "
                        "allocation is bound to n2", nodes("pc", 2),
                  slices=[per_device("pc-shared", dev("gpu-0", nodeName="pc-n2"))],
                  **one_claim("pc", exactly("gpu")),
                  expected=lambda: bound("pc", "pc-n2", [result("gpu", "pc-shared", "gpu-0")], on_node("pc-n2"))),
        SliceCase("pd", "per-device node selection: a device's own node selector (the case's nodes) becomes "
                        "the allocation's", nodes("pd"),
                  slices=[per_device("pd-shared", dev("gpu-0", nodeName="elsewhere"),
                                     dev("gpu-1", nodeSelector=PD_NODES))],
                  **one_claim("pd", exactly("gpu")),
                  expected=lambda: bound("pd", "pd-n1", [result("gpu", "pd-shared", "gpu-1")], PD_NODES)),
        SliceCase("pe", "a device consumes a counter set its pool does not have: the pool is invalid", nodes("pe"),
                  slices=[counters("pe-n1", counter_set(memory="80Gi")),
                          node_slice("pe-n1", part("gpu-0", "nosuch", memory="40Gi"), count=2)],
                  **one_claim("pe", exactly("gpu")),
                  expected=lambda: {"pods": {"pe-pod": pending(invalid_pools(1))},
                                    "claims": {"pe-claim": {"allocation": None, "reservedFor": [],
                                                            "finalizers": []}}}),
    ]


def invalid_pools(failing: int) -> str:
    reasons = [f"{failing} invalid resource pools were encountered",
               f"{TOTAL_NODES - failing} node(s) didn't match Pod's node affinity/selector"]
    return f"0/{TOTAL_NODES} nodes are available: {', '.join(sorted(reasons))}."


# -- cases: consumable capacity ----------------------------------------------------------------

SHARE = "<uuid>"   # what ``masked_share_ids`` leaves of a result's shareID


def multi(name: str, attributes: dict | None = None, **capacities: dict) -> dict:
    """A device with ``allowMultipleAllocations`` and ``capacities`` (name -> DeviceCapacity)."""
    d = dev(name, allowMultipleAllocations=True, capacity=capacities)
    if attributes:
        d["attributes"] = {**d["attributes"], **attributes}
    return d


def cap(value: str, policy: dict | None = None) -> dict:
    return {"value": value, **({"requestPolicy": policy} if policy else {})}


def wanting(name: str, mode: str | None = None, **requests: str) -> dict:
    """A request for one device (or all, ``mode``) with ``capacity.requests``."""
    r = exactly(name, mode=mode)
    r["exactly"]["capacity"] = {"requests": dict(requests)}
    return r


def shared_result(request: str, pool: str, device: str, **consumed: str) -> dict:
    return result(request, pool, device, shareID=SHARE, consumedCapacity=dict(consumed))


def two_claims(case: str, first: dict, second: dict) -> dict:
    """The claims ``<case>-x`` and ``<case>-y`` (one request each) and the pod ``<case>-pod`` using both."""
    return {"claims": [claim(f"{case}-x", first), claim(f"{case}-y", second)],
            "pods": [dra_pod(f"{case}-pod", case, claims={"x": f"{case}-x", "y": f"{case}-y"})]}


def bound_two(case: str, node: str, x: list[dict], y: list[dict]) -> dict:
    def allocation(results: list[dict]) -> dict:
        return {"allocation": {"devices": {"results": results}, "nodeSelector": on_node(node)},
                "reservedFor": [f"{case}-pod"], "finalizers": [FINALIZER]}
    return {"pods": {f"{case}-pod": node}, "claims": {f"{case}-x": allocation(x), f"{case}-y": allocation(y)}}


def held(name: str, pool: str, device: str, share_id: str, **consumed: str) -> dict:
    """A claim allocated before the run: one share of ``device``, reserved for no pod."""
    c = claim(name, exactly("gpu"))
    c["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": pool,
                                                           "device": device, "shareID": share_id,
                                                           "consumedCapacity": dict(consumed)}]},
                                  "nodeSelector": on_node(pool)}}
    return c


def held_outcome(pool: str, device: str, **consumed: str) -> dict:
    return {"allocation": {"devices": {"results": [shared_result("gpu", pool, device, **consumed)]},
                           "nodeSelector": on_node(pool)}, "reservedFor": [], "finalizers": []}


# The devices are cards, not gpu-N: case th's DeviceTaintRule taints every device named gpu-0 until
# its second act deletes it.
RANGE = {"default": "1Gi", "validRange": {"min": "1Gi", "max": "16Gi", "step": "1Gi"}}
VALUES = {"default": "10G", "validValues": ["10G", "20G", "40G"]}


def consumable_cases() -> list[SliceCase]:
    return [
        SliceCase("ca", "one pod, two claims: both share the multi-allocatable GPU (10Gi + 30Gi of its 40Gi), each "
                        "result with a shareID and what it consumes", nodes("ca"),
                  slices=[node_slice("ca-n1", multi("card-0", memory=cap("40Gi")))],
                  **two_claims("ca", wanting("gpu", memory="10Gi"), wanting("gpu", memory="30Gi")),
                  expected=lambda: bound_two("ca", "ca-n1", [shared_result("gpu", "ca-n1", "card-0", memory="10Gi")],
                                             [shared_result("gpu", "ca-n1", "card-0", memory="30Gi")])),
        SliceCase("cb", "the second claim does not fit beside the first on card-0 (30Gi + 20Gi > 40Gi): it gets "
                        "card-1", nodes("cb"),
                  slices=[node_slice("cb-n1", multi("card-0", memory=cap("40Gi")),
                                     multi("card-1", memory=cap("40Gi")))],
                  **two_claims("cb", wanting("gpu", memory="30Gi"), wanting("gpu", memory="20Gi")),
                  expected=lambda: bound_two("cb", "cb-n1", [shared_result("gpu", "cb-n1", "card-0", memory="30Gi")],
                                             [shared_result("gpu", "cb-n1", "card-1", memory="20Gi")])),
        SliceCase("cc", "a share allocated before (30Gi of cc-n1's GPU) counts: 20Gi more fit only on cc-n2",
                  nodes("cc", 2),
                  slices=[node_slice("cc-n1", multi("card-0", memory=cap("40Gi"))),
                          node_slice("cc-n2", multi("card-0", memory=cap("40Gi")))],
                  claims=[held("cc-held", "cc-n1", "card-0", "3f1e6a1c-7d1b-4d3e-9a55-3b8f2f0f6a01", memory="30Gi"),
                          claim("cc-claim", wanting("gpu", memory="20Gi"))],
                  pods=[dra_pod("cc-pod", "cc", claims={"gpu": "cc-claim"})],
                  expected=lambda: {**bound("cc", "cc-n2", [shared_result("gpu", "cc-n2", "card-0", memory="20Gi")],
                                            on_node("cc-n2")),
                                    "claims": {**bound("cc", "cc-n2", [shared_result("gpu", "cc-n2", "card-0",
                                                                                     memory="20Gi")],
                                                       on_node("cc-n2"))["claims"],
                                               "cc-held": held_outcome("cc-n1", "card-0", memory="30Gi")}}),
        SliceCase("cd", "request policies round up: validRange to the next 1Gi step (1536Mi -> 2Gi), validValues to "
                        "the next value (15G -> 20G); a capacity not requested consumes its default", nodes("cd"),
                  slices=[node_slice("cd-n1", multi("card-0", memory=cap("16Gi", RANGE),
                                                    bandwidth=cap("40G", VALUES)))],
                  **one_claim("cd", wanting("a", memory="1536Mi"), wanting("b", bandwidth="15G")),
                  expected=lambda: bound("cd", "cd-n1", [
                      shared_result("a", "cd-n1", "card-0", memory="2Gi", bandwidth="10G"),
                      shared_result("b", "cd-n1", "card-0", memory="1Gi", bandwidth="20G")], on_node("cd-n1"))),
        SliceCase("ce", "a request past its policy's max skips the shared GPU; the ordinary GPU of ce-n2 has the "
                        "capacity and is taken whole", nodes("ce", 2),
                  slices=[node_slice("ce-n1", multi("card-0", memory=cap("40Gi", RANGE))),
                          node_slice("ce-n2", dev("card-0", capacity={"memory": cap("40Gi")}))],
                  **one_claim("ce", wanting("gpu", memory="20Gi")),
                  expected=lambda: bound("ce", "ce-n2", [result("gpu", "ce-n2", "card-0")], on_node("ce-n2"))),
        SliceCase("cf", "distinctAttribute: two requests that would share card-0 go to GPUs on different numa nodes",
                  nodes("cf"),
                  slices=[node_slice("cf-n1", *(multi(f"card-{i}", {"numa": {"int": numa}}, memory=cap("40Gi"))
                                                for i, numa in enumerate((0, 0, 1))))],
                  **one_claim("cf", wanting("a", memory="1Gi"), wanting("b", memory="1Gi"),
                              constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),
                  expected=lambda: bound("cf", "cf-n1", [shared_result("a", "cf-n1", "card-0", memory="1Gi"),
                                                         shared_result("b", "cf-n1", "card-2", memory="1Gi")],
                                         on_node("cf-n1"))),
        SliceCase("cg", "allocationMode All: the GPU whose capacity could never serve the request is left out",
                  nodes("cg"),
                  slices=[node_slice("cg-n1", multi("card-0", memory=cap("40Gi")), multi("card-1", memory=cap("8Gi")),
                                     multi("card-2", memory=cap("40Gi")))],
                  **one_claim("cg", wanting("gpu", mode="All", memory="16Gi")),
                  expected=lambda: bound("cg", "cg-n1", [shared_result("gpu", "cg-n1", "card-0", memory="16Gi"),
                                                         shared_result("gpu", "cg-n1", "card-2", memory="16Gi")],
                                         on_node("cg-n1"))),
        SliceCase("ch", "a shared GPU consuming counters charges them once: two shares fit where a second device "
                        "would not", nodes("ch"),
                  slices=[counters("ch-n1", counter_set(memory="40Gi")),
                          node_slice("ch-n1", multi("card-0", memory=cap("40Gi")) | {"consumesCounters": [
                              {"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}, count=2)],
                  **two_claims("ch", wanting("gpu", memory="10Gi"), wanting("gpu", memory="10Gi")),
                  expected=lambda: bound_two("ch", "ch-n1", [shared_result("gpu", "ch-n1", "card-0", memory="10Gi")],
                                             [shared_result("gpu", "ch-n1", "card-0", memory="10Gi")])),
        SliceCase("ci", "CEL sees device.allowMultipleAllocations", nodes("ci"),
                  slices=[node_slice("ci-n1", dev("card-0"), multi("card-1"))],
                  **one_claim("ci", exactly("gpu", "device.allowMultipleAllocations")),
                  expected=lambda: bound("ci", "ci-n1", [result("gpu", "ci-n1", "card-1", shareID=SHARE)],
                                         on_node("ci-n1"))),
        SliceCase("cj", "a request past int64 cannot be rounded to the step: the attempt fails with the "
                        "allocator's error", nodes("cj"),
                  slices=[node_slice("cj-n1", multi("card-0", memory=cap("40Gi", RANGE)))],
                  **one_claim("cj", wanting("gpu", memory="10E")),
                  expected=lambda: {"pods": {"cj-pod": pending(
                      'running "DynamicResources" filter plugin: claim dra-cj/cj-claim, request gpu: checking '
                      f'capacity for device {DRIVER}/cj-n1/card-0: capacity "memory": capacity request cannot be '
                      "represented in the device's range arithmetic: request 10E exceeds MaxInt64",
                      "SchedulerError")},
                      "claims": {"cj-claim": {"allocation": None, "reservedFor": [], "finalizers": []}}}),
    ]


def masked_share_ids(outcome: dict) -> dict:
    """The outcome with every result's ``shareID`` that is a UUID written ``<uuid>``: upstream makes
    a random one per share (``uuid.NewUUID``, version 4), and so does pysched; nothing else about
    it can agree."""
    for c in outcome["claims"].values():
        for r in ((c.get("allocation") or {}).get("devices") or {}).get("results") or ():
            try:
                uuid.UUID(str(r.get("shareID")))
            except ValueError:
                continue
            r["shareID"] = SHARE
    return outcome


CASES: list[SliceCase] = [*taint_cases(), *partitionable_cases()]
for _case in CASES:
    _case.normalize = without_allocation_timestamp
for _case in consumable_cases():
    _case.normalize = lambda outcome: masked_share_ids(without_allocation_timestamp(outcome))
    CASES.append(_case)
TOTAL_NODES = sum(len(c.nodes) for c in CASES)
IDS = [c.name for c in CASES]

_RUNS: dict[str, Run | BaseException] = {}


async def outcome_of(who: str) -> Run:
    if who not in _RUNS:
        try:
            _RUNS[who] = await run_slice_cases(who, CASES, timeout=90.0)
        except Exception as exc:  # noqa: BLE001 - re-raised below, and for every later case
            _RUNS[who] = exc
        else:
            run = _RUNS[who]
            print(f"\n{who}: {run.seconds:.1f}s, unsettled={run.unsettled}\n"
                  + json.dumps(run.outcomes, indent=1, sort_keys=True))
    run = _RUNS[who]
    if isinstance(run, BaseException):
        raise AssertionError(f"the {who} run failed: {run!r}") from run
    return run


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_kube_scheduler_does_what_the_case_says(case):
    kube = await outcome_of("kube")
    assert case.name not in kube.unsettled, kube.explain(case.name)
    assert kube.outcomes[case.name] == case.expected(), kube.explain(case.name)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_pysched_allocates_as_kube_scheduler(case):
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched")
    assert ours.outcomes[case.name] == kube.outcomes[case.name], ours.explain(case.name)
    prefix = f"{case.namespace}/"
    assert ({k: v for k, v in ours.messages.items() if k.startswith(prefix)}
            == {k: v for k, v in kube.messages.items() if k.startswith(prefix)})


async def test_pysched_as_its_serviceaccount_allocates_as_kube_scheduler():
    """The same with the ClusterRole of manifests/rbac.yaml: DeviceTaintRules are readable."""
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched-rbac")
    differ = sorted(c for c in kube.outcomes if ours.outcomes.get(c) != kube.outcomes[c])
    assert differ == [], "\n".join(ours.explain(c) for c in differ[:2])
    assert "forbidden" not in ours.log_tail.lower(), ours.log_tail

