"""DRA scenarios for the differential e2e tests: a fake GPU driver's objects, the cases, a runner
that plays each case through one scheduler on its own control plane, and the normalized outcome.

The driver ``gpu.example.com`` publishes one ResourceSlice per node (pool = the node's name,
generation 1, one slice per pool), its devices ``gpu-0``, ``gpu-1``... carrying the attributes
``model`` (string), ``numa`` (int) and the capacity ``memory``. Upstream's allocator returns the
first solution of a depth-first search over pools (in random map order), slices and devices (in
``spec.devices`` order): with one pool per node and one node per feasible choice, the devices it
picks are fixed, and so is what pysched has to pick.

All cases run at once on one control plane: each has its own namespace and its own nodes (labelled
``CASE_LABEL: <case>``, which every pod of the case selects), so no case sees another's devices,
and the node a pod lands on is decided by its devices - cases with two nodes have exactly one
where the claims fit - never by a score tie-break. Case ``i`` (several pods competing for four
devices on two nodes) is the exception; it is compared on what does not depend on the order the
pods were taken in.

There is no kube-controller-manager: claims from a ResourceClaimTemplate are made here as the
resourceclaim controller makes them (``generate_claim``/``publish_claim_statuses``), and nothing
deallocates a claim afterwards (each run has its own control plane).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess, binaries_version
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition
from tests.differential import strip_postfilter

from . import kustomize
from .conftest import REPO, SchedulerProcess, scheduler_config
from .test_manifests_metrics import sa_kubeconfig

DRIVER = "gpu.example.com"
CLASS = DRIVER                      # the DeviceClass: every device of the driver
CFG_CLASS = "gpu-cfg.example.com"   # the same devices, with a class config
PROFILE = "dra-diff"                # both schedulers' profile: the pods are the same objects for both
CASE_LABEL = "dra.example.com/case"
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ADMIN_NS_LABEL = "resource.kubernetes.io/admin-access"
RES = "/apis/resource.k8s.io/v1"

# Device layouts: (model, numa, memory) for gpu-0, gpu-1, ...
MIXED = [("a100", 0, "40Gi"), ("a100", 1, "40Gi"), ("h100", 0, "80Gi"), ("h100", 1, "80Gi")]
A100_ONLY = [("a100", 0, "40Gi"), ("a100", 1, "40Gi")]
H100_ONLY = [("h100", 0, "80Gi"), ("h100", 1, "80Gi")]
SKEWED = [("a100", 0, "40Gi"), ("a100", 1, "40Gi"), ("h100", 1, "80Gi")]   # the only h100 is on numa 1
SPLIT = [("a100", 0, "40Gi"), ("h100", 1, "80Gi")]                         # no numa with both models

MODEL_H100 = 'device.attributes["gpu.example.com"].model == "h100"'
MODEL_A100 = 'device.attributes["gpu.example.com"].model == "a100"'
MEMORY_64GI = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0'


# -- objects ------------------------------------------------------------------------------------

def device_class(name: str = CLASS, config: list[dict] | None = None) -> dict:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def resource_slice(node: str, layout: list[tuple]) -> dict:
    """Devices (model, numa, memory[, more attributes as the API spells them])."""
    devices = [{"name": f"gpu-{i}",
                "attributes": {"model": {"string": model}, "numa": {"int": numa}, **(more[0] if more else {})},
                "capacity": {"memory": {"value": memory}}}
               for i, (model, numa, memory, *more) in enumerate(layout)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def opaque(**parameters) -> dict:
    return {"opaque": {"driver": DRIVER,
                       "parameters": {"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig", **parameters}}}


def exactly(name: str, *selectors: str, cls: str = CLASS, count: int | None = None, mode: str | None = None,
            admin: bool = False) -> dict:
    """A request for ``count`` (default 1) devices of ``cls`` matching every CEL selector."""
    req: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        req["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if mode:
        req["allocationMode"] = mode
    if count is not None:
        req["count"] = count
    if admin:
        req["adminAccess"] = True
    return {"name": name, "exactly": req}


def sub(name: str, *selectors: str, cls: str = CLASS, count: int | None = None) -> dict:
    """A subrequest of ``firstAvailable``."""
    req = exactly(name, *selectors, cls=cls, count=count)
    return {"name": name, **req["exactly"]}


def claim_spec(*requests: dict, constraints: list[dict] | None = None, config: list[dict] | None = None) -> dict:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"devices": devices}


def claim(name: str, *requests: dict, **kw) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": claim_spec(*requests, **kw)}


def template(name: str, *requests: dict, labels: dict | None = None, annotations: dict | None = None,
             **kw) -> dict:
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"metadata": meta, "spec": claim_spec(*requests, **kw)}}


def dra_pod(name: str, case: str, claims: dict[str, str] | None = None,
            templates: dict[str, str] | None = None) -> dict:
    """A pod of ``case`` (it selects the case's nodes) with pod claims ``{pod claim name: ResourceClaim
    name}`` and ``{pod claim name: ResourceClaimTemplate name}``; its container uses all of them."""
    p = make_pod(name, namespace=ns_of(case), scheduler=PROFILE, cpu="10m", memory="10Mi",
                 node_selector={CASE_LABEL: case})
    refs = [{"name": n, "resourceClaimName": c} for n, c in (claims or {}).items()]
    refs += [{"name": n, "resourceClaimTemplateName": t} for n, t in (templates or {}).items()]
    p["spec"]["resourceClaims"] = refs
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": r["name"]} for r in refs]
    return p


def ns_of(case: str) -> str:
    return f"dra-{case}"


def generate_name(pod: str, pod_claim: str) -> str:
    """The generateName the resourceclaim controller gives a claim from a template (controller.go:652-663)."""
    name = f"{pod}-{pod_claim}-"
    if len(name) > 57:   # both parts truncated in proportion, joined without a trailing hyphen
        name = pod[:len(pod) * 57 // len(name)] + "-" + pod_claim[:len(pod_claim) * 57 // len(name)]
    return name


def generate_claim(pod: dict, pod_claim: str, tmpl: dict) -> dict:
    """The ResourceClaim the resourceclaim controller creates for ``pod``'s ``pod_claim`` from ``tmpl``."""
    meta = tmpl["spec"].get("metadata") or {}
    out_meta: dict[str, Any] = {
        "namespace": pod["metadata"]["namespace"],
        "generateName": generate_name(pod["metadata"]["name"], pod_claim),
        "annotations": {**(meta.get("annotations") or {}), POD_CLAIM_ANNOTATION: pod_claim},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                             "uid": pod["metadata"]["uid"], "controller": True}],
    }
    if meta.get("labels"):
        out_meta["labels"] = dict(meta["labels"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": out_meta,
            "spec": copy.deepcopy(tmpl["spec"]["spec"])}


async def publish_claim_statuses(admin: KubeClient, pod: dict, statuses: dict[str, str]) -> None:
    """``pod.status.resourceClaimStatuses`` as the controller writes it: a forced server-side apply of
    the status with its field manager."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "status": {"resourceClaimStatuses": [{"name": n, "resourceClaimName": c} for n, c in statuses.items()]}}
    await admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                        params={"fieldManager": "ResourceClaimController", "force": "true"},
                        body=body, content_type="application/apply-patch+yaml", rate_limit=False)


# -- expected outcomes --------------------------------------------------------------------------

# ``status.allocation.allocationTimestamp``: kube-scheduler 1.36+ stamps it (DRADeviceBindingConditions
# and DRAResourceClaimDeviceStatus, on by default from 1.36) on every allocation it writes; 1.35 never.
# The time itself differs between runs: the outcome keeps only that it is there.
TIMESTAMP_SET = "<set>"
def release() -> tuple[int, int]:
    """The control plane's Kubernetes release (its binaries'), which both schedulers follow."""
    return binaries_version()


def stamps_allocations() -> bool:
    """Whether allocations carry ``allocationTimestamp`` at this release."""
    return release() >= (1, 36)


def result(request: str, node: str, device: str, **extra) -> dict:
    return {"request": request, "driver": DRIVER, "pool": node, "device": device, **extra}


def on_node(node: str) -> dict:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def allocated(node: str, results: list[dict], reserved_for: list[str], config: list[dict] | None = None) -> dict:
    devices: dict[str, Any] = {"results": sorted(results, key=_result_key)}
    if config:
        devices["config"] = config
    allocation: dict[str, Any] = {"devices": devices, "nodeSelector": on_node(node)}
    if stamps_allocations():
        allocation["allocationTimestamp"] = TIMESTAMP_SET
    return {"allocation": allocation, "reservedFor": sorted(reserved_for), "finalizers": [FINALIZER]}


UNALLOCATED = {"allocation": None, "reservedFor": [], "finalizers": []}


def pending(message: str, reason: str = "Unschedulable") -> dict:
    """A pod left pending: its PodScheduled=False condition's reason, and its message without the
    PostFilter plugins' verdicts (kube-scheduler 1.35's DynamicResources PostFilter adds "still not
    schedulable, " or "no new claims to deallocate, " before DefaultPreemption's; 1.37's adds
    nothing - the whole messages are compared between the schedulers, not here)."""
    return {"pending": message, "reason": reason}


def no_devices_message(nodes_with_claims_failing: int) -> str:
    """kube-scheduler's FitError text (without PostFilter's verdicts) for a pod whose claims fit on
    none of its case's nodes: every other node fails the pod's nodeSelector."""
    reasons = [f"{nodes_with_claims_failing} cannot allocate all claims",
               f"{TOTAL_NODES - nodes_with_claims_failing} node(s) didn't match Pod's node affinity/selector"]
    # FitError.Error(): "<count> <reason>" strings in plain string order ("17 ..." before "2 ...")
    return f"0/{TOTAL_NODES} nodes are available: {', '.join(sorted(reasons))}."


# -- cases --------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str                                   # short id; the namespace is dra-<name>, nodes <name>-n<k>
    doc: str
    nodes: dict[str, list]                      # node name -> device layout
    pods: list[dict]
    claims: list[dict] = field(default_factory=list)
    templates: list[dict] = field(default_factory=list)
    ns_labels: dict[str, str] = field(default_factory=dict)
    # expected: the normalized outcome kube-scheduler must produce (hand-written), a callable so
    # that it can use TOTAL_NODES, known only once every case exists
    expected: Callable[[], dict] = dict
    # settled(pods by name) -> bool: the run stops waiting for this case once true
    settled: Callable[[dict[str, dict]], bool] | None = None
    # normalize(outcome) -> outcome: for a case whose per-pod outcome depends on scheduling order
    normalize: Callable[[dict], dict] | None = None

    @property
    def namespace(self) -> str:
        return ns_of(self.name)

    def bound_pods(self) -> list[str]:
        return sorted(n for n, v in self.expected()["pods"].items() if isinstance(v, str))

    def pending_pods(self) -> list[str]:
        return sorted(n for n, v in self.expected()["pods"].items() if not isinstance(v, str))

    def is_settled(self, pods: dict[str, dict]) -> bool:
        if self.settled is not None:
            return self.settled(pods)
        return (all(n in pods and pods[n]["spec"].get("nodeName") for n in self.bound_pods())
                and all(n in pods and _unschedulable(pods[n]) for n in self.pending_pods()))


def _unschedulable(pod: dict) -> bool:
    c = pod_scheduled_condition(pod)
    return bool(c and c.get("status") == "False" and not pod["spec"].get("nodeName"))


def _nodes(case: str, *layouts) -> dict[str, list]:
    return {f"{case}-n{i}": layout for i, layout in enumerate(layouts, 1)}


def case_a() -> Case:
    return Case("a", "one device, any: the first of the only node's slice", _nodes("a", MIXED),
                claims=[claim("a-claim", exactly("gpu"))],
                pods=[dra_pod("a-pod", "a", claims={"gpu": "a-claim"})],
                expected=lambda: {"pods": {"a-pod": "a-n1"},
                                  "claims": {"a-claim": allocated("a-n1", [result("gpu", "a-n1", "gpu-0")],
                                                                  ["a-pod"])}})


def case_b() -> Case:
    return Case("b", "count 2: the first two devices", _nodes("b", MIXED),
                claims=[claim("b-claim", exactly("gpus", count=2))],
                pods=[dra_pod("b-pod", "b", claims={"gpus": "b-claim"})],
                expected=lambda: {"pods": {"b-pod": "b-n1"},
                                  "claims": {"b-claim": allocated("b-n1", [result("gpus", "b-n1", "gpu-0"),
                                                                           result("gpus", "b-n1", "gpu-1")],
                                                                  ["b-pod"])}})


def case_c() -> Case:
    return Case("c", "CEL on an attribute: only n2 has an h100, its first is gpu-2",
                _nodes("c", A100_ONLY, MIXED),
                claims=[claim("c-claim", exactly("gpu", MODEL_H100))],
                pods=[dra_pod("c-pod", "c", claims={"gpu": "c-claim"})],
                expected=lambda: {"pods": {"c-pod": "c-n2"},
                                  "claims": {"c-claim": allocated("c-n2", [result("gpu", "c-n2", "gpu-2")],
                                                                  ["c-pod"])}})


def case_d() -> Case:
    return Case("d", "CEL on a capacity (memory >= 64Gi), count 2: n2's two 80Gi devices",
                _nodes("d", A100_ONLY, MIXED),
                claims=[claim("d-claim", exactly("big", MEMORY_64GI, count=2))],
                pods=[dra_pod("d-pod", "d", claims={"big": "d-claim"})],
                expected=lambda: {"pods": {"d-pod": "d-n2"},
                                  "claims": {"d-claim": allocated("d-n2", [result("big", "d-n2", "gpu-2"),
                                                                           result("big", "d-n2", "gpu-3")],
                                                                  ["d-pod"])}})


def case_e() -> Case:
    numa = [{"requests": ["small", "big"], "matchAttribute": f"{DRIVER}/numa"}]
    return Case("e", "matchAttribute numa across an a100 and an h100 request: n1 has no numa with both; on n2 "
                     "the search backtracks from gpu-0 (numa 0) to gpu-1 to pair it with gpu-2 (numa 1)",
                _nodes("e", SPLIT, SKEWED),
                claims=[claim("e-claim", exactly("small", MODEL_A100), exactly("big", MODEL_H100),
                              constraints=numa)],
                pods=[dra_pod("e-pod", "e", claims={"pair": "e-claim"})],
                expected=lambda: {"pods": {"e-pod": "e-n2"},
                                  "claims": {"e-claim": allocated("e-n2", [result("small", "e-n2", "gpu-1"),
                                                                           result("big", "e-n2", "gpu-2")],
                                                                  ["e-pod"])}})


def case_f() -> Case:
    return Case("f", "allocationMode All with a selector: every a100 of n1; n2 has none, and All with no "
                     "matching device is no solution",
                _nodes("f", MIXED, H100_ONLY),
                claims=[claim("f-claim", exactly("all", MODEL_A100, mode="All"))],
                pods=[dra_pod("f-pod", "f", claims={"all": "f-claim"})],
                expected=lambda: {"pods": {"f-pod": "f-n1"},
                                  "claims": {"f-claim": allocated("f-n1", [result("all", "f-n1", "gpu-0"),
                                                                           result("all", "f-n1", "gpu-1")],
                                                                  ["f-pod"])}})


def case_g() -> Case:
    return Case("g", "a claim from a ResourceClaimTemplate, made the way the resourceclaim controller does",
                _nodes("g", MIXED),
                templates=[template("g-tmpl", exactly("gpu", MODEL_H100), labels={"app": "g"})],
                pods=[dra_pod("g-pod", "g", templates={"gpu": "g-tmpl"})],
                expected=lambda: {"pods": {"g-pod": "g-n1"},
                                  "claims": {"g-pod-gpu-*": allocated("g-n1", [result("gpu", "g-n1", "gpu-2")],
                                                                      ["g-pod"])}})


def case_h() -> Case:
    return Case("h", "one claim shared by two pods: allocated once (on n2, the only node with an h100), "
                     "reserved for both, both pods on n2",
                _nodes("h", A100_ONLY, MIXED),
                claims=[claim("h-shared", exactly("gpu", MODEL_H100))],
                pods=[dra_pod("h-pod1", "h", claims={"gpu": "h-shared"}),
                      dra_pod("h-pod2", "h", claims={"gpu": "h-shared"})],
                expected=lambda: {"pods": {"h-pod1": "h-n2", "h-pod2": "h-n2"},
                                  "claims": {"h-shared": allocated("h-n2", [result("gpu", "h-n2", "gpu-2")],
                                                                   ["h-pod1", "h-pod2"])}})


COMPETITORS = 5


def case_i() -> Case:
    names = [f"i-pod{k}" for k in range(COMPETITORS)]

    def settled(pods: dict[str, dict]) -> bool:
        bound = sum(1 for n in names if n in pods and pods[n]["spec"].get("nodeName"))
        waiting = sum(1 for n in names if n in pods and _unschedulable(pods[n]))
        return bound == 4 and waiting == COMPETITORS - 4

    def normalize(out: dict) -> dict:
        # Which pod gets which device depends on the order the pods are taken in: compare the
        # multiset of placements and of devices, and that each bound pod's own claim says so.
        pods, claims = out["pods"], out["claims"]
        devices, mismatched = [], []
        for k, n in enumerate(names):
            c = claims.get(f"i-claim{k}") or {}
            alloc = c.get("allocation")
            if alloc:
                devices += [f"{r['pool']}/{r['device']}" for r in alloc["devices"]["results"]]
            node = pods.get(n)
            ok = (alloc is not None and alloc.get("nodeSelector") == on_node(node) and c["reservedFor"] == [n]
                  and c["finalizers"] == [FINALIZER] if isinstance(node, str)
                  else alloc is None and c.get("reservedFor") == [])
            if not ok:
                mismatched.append({"pod": n, "node": node, "claim": c})
        return {"bound": sorted(v for v in pods.values() if isinstance(v, str)),
                "pending": sorted(json.dumps(v, sort_keys=True) for v in pods.values() if not isinstance(v, str)),
                "devices": sorted(devices), "mismatched": mismatched}

    return Case("i", f"{COMPETITORS} pods, each with its own one-device claim, compete for 2+2 devices: "
                     "4 bound, 2 per node, every device given once; 1 pending",
                _nodes("i", A100_ONLY, A100_ONLY),
                claims=[claim(f"i-claim{k}", exactly("gpu")) for k in range(COMPETITORS)],
                pods=[dra_pod(n, "i", claims={"gpu": f"i-claim{k}"}) for k, n in enumerate(names)],
                settled=settled, normalize=normalize,
                expected=lambda: {"bound": ["i-n1", "i-n1", "i-n2", "i-n2"],
                                  "pending": [json.dumps(pending(no_devices_message(2)), sort_keys=True)],
                                  "devices": ["i-n1/gpu-0", "i-n1/gpu-1", "i-n2/gpu-0", "i-n2/gpu-1"],
                                  "mismatched": []})


def case_j() -> Case:
    return Case("j", "unsatisfiable: 3 h100 where there are 2; the pod stays pending, the claim untouched",
                _nodes("j", MIXED),
                claims=[claim("j-claim", exactly("gpus", MODEL_H100, count=3))],
                pods=[dra_pod("j-pod", "j", claims={"gpus": "j-claim"})],
                expected=lambda: {"pods": {"j-pod": pending(no_devices_message(1))},
                                  "claims": {"j-claim": UNALLOCATED}})


def case_k() -> Case:
    # k-pod1's claims go to one Allocate call: its admin claim (first) takes gpu-0 and keeps it from
    # the normal claim after it, which gets gpu-1. k-pod2's normal claim gets gpu-0 in either order:
    # an admin-access allocation never counts as taken, and an admin request may take a taken device.
    return Case("k", "adminAccess (namespace labelled for it): an admin claim shares gpu-0 with a normal claim",
                _nodes("k", MIXED), ns_labels={ADMIN_NS_LABEL: "true"},
                claims=[claim("k-admin", exactly("monitor", MODEL_A100, admin=True)),
                        claim("k-mine", exactly("gpu", MODEL_A100)),
                        claim("k-other", exactly("gpu", MODEL_A100))],
                pods=[dra_pod("k-pod1", "k", claims={"monitor": "k-admin", "gpu": "k-mine"}),
                      dra_pod("k-pod2", "k", claims={"gpu": "k-other"})],
                expected=lambda: {"pods": {"k-pod1": "k-n1", "k-pod2": "k-n1"},
                                  "claims": {"k-admin": allocated("k-n1", [result("monitor", "k-n1", "gpu-0",
                                                                                  adminAccess=True)], ["k-pod1"]),
                                             "k-mine": allocated("k-n1", [result("gpu", "k-n1", "gpu-1")],
                                                                 ["k-pod1"]),
                                             "k-other": allocated("k-n1", [result("gpu", "k-n1", "gpu-0")],
                                                                  ["k-pod2"])}})


def case_l() -> Case:
    first = {"name": "gpu", "firstAvailable": [sub("big", MODEL_H100, count=3), sub("small", MODEL_H100)]}
    return Case("l", "firstAvailable: 3 h100 do not fit, the second choice (1 h100) does",
                _nodes("l", MIXED),
                claims=[claim("l-claim", first)],
                pods=[dra_pod("l-pod", "l", claims={"gpu": "l-claim"})],
                expected=lambda: {"pods": {"l-pod": "l-n1"},
                                  "claims": {"l-claim": allocated("l-n1", [result("gpu/small", "l-n1", "gpu-2")],
                                                                  ["l-pod"])}})


def case_m() -> Case:
    # Class configs come first, once per class, listing every request of that class; then the
    # claim's, in order: one naming two requests is copied once per request it names (upstream's
    # loop; once from 1.37), one naming none once. (1.37 also drops ``requests`` from a config
    # that names every request of the claim; none here does.)
    both = opaque(mode="both")
    every = opaque(mode="every")
    return Case("m", "device configuration: a class config and claim configs copied into the allocation",
                _nodes("m", MIXED),
                claims=[claim("m-claim", exactly("a", cls=CFG_CLASS), exactly("b"), exactly("c", cls=CFG_CLASS),
                              config=[{"requests": ["a", "c"], **both}, every])],
                pods=[dra_pod("m-pod", "m", claims={"cfg": "m-claim"})],
                expected=lambda: {"pods": {"m-pod": "m-n1"},
                                  "claims": {"m-claim": allocated(
                                      "m-n1", [result("a", "m-n1", "gpu-0"), result("b", "m-n1", "gpu-1"),
                                               result("c", "m-n1", "gpu-2")], ["m-pod"],
                                      config=[{"source": "FromClass", "requests": ["a", "c"], **CLASS_CONFIG},
                                              *[{"source": "FromClaim", "requests": ["a", "c"], **both}] * (
                                                  1 if release() >= (1, 37) else 2),
                                              {"source": "FromClaim", **every}])}})


def case_n() -> Case:
    # Both nodes can serve the claim; DynamicResources' Score (8 - the index of the chosen
    # subrequest) decides: n-n2 gets the first choice (two h100), n-n1 only the second. The nodes
    # are alike otherwise, so no other score tells them apart.
    first = {"name": "gpu", "firstAvailable": [sub("two", MODEL_H100, count=2), sub("one", MODEL_H100)]}
    return Case("n", "firstAvailable scored: the node where the first choice fits wins",
                _nodes("n", SKEWED, MIXED),
                claims=[claim("n-claim", first)],
                pods=[dra_pod("n-pod", "n", claims={"gpu": "n-claim"})],
                expected=lambda: {"pods": {"n-pod": "n-n2"},
                                  "claims": {"n-claim": allocated("n-n2", [result("gpu/two", "n-n2", "gpu-2"),
                                                                           result("gpu/two", "n-n2", "gpu-3")],
                                                                  ["n-pod"])}})


def case_o() -> Case:
    # A claim left allocated on o-n1 (no pod holds it) by a pod that cannot go there: PostFilter
    # deallocates it, the claim's update requeues the pod, and it is allocated again on o-n2.
    stale = claim("o-claim", exactly("gpu"))
    stale["status"] = {"allocation": {"devices": {"results": [result("gpu", "o-n1", "gpu-0")]},
                                      "nodeSelector": on_node("o-n1")}}
    pod = dra_pod("o-pod", "o", claims={"gpu": "o-claim"})
    pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] = "o-n2"
    return Case("o", "PostFilter: a claim allocated for a node the pod cannot use is deallocated, then "
                     "allocated where the pod goes",
                _nodes("o", MIXED, MIXED),
                claims=[stale],
                pods=[pod],
                expected=lambda: {"pods": {"o-pod": "o-n2"},
                                  "claims": {"o-claim": allocated("o-n2", [result("gpu", "o-n2", "gpu-0")],
                                                                  ["o-pod"])}})


def case_p() -> Case:
    return Case("p", "a claim fails PreFilter: its device class does not exist (DynamicResources' PostFilter: "
                     "1.35 says no new claims to deallocate, 1.37 nothing; preemption is not helpful)",
                _nodes("p", MIXED),
                claims=[claim("p-claim", exactly("gpu", cls="nosuch.example.com"))],
                pods=[dra_pod("p-pod", "p", claims={"gpu": "p-claim"})],
                expected=lambda: {"pods": {"p-pod": pending(
                    f"0/{TOTAL_NODES} nodes are available: request gpu: device class nosuch.example.com does not "
                    "exist.")}, "claims": {"p-claim": UNALLOCATED}})


def case_q() -> Case:
    pod = dra_pod("q-pod", "q", claims={"gpu": "q-claim"})
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}]
    return Case("q", "rejected at PreFilter before DynamicResources' own (VolumeBinding: a PVC that does not exist): "
                     "its PostFilter finds no cycle state, the message ends 'not found' and preemption never runs",
                _nodes("q", MIXED),
                claims=[claim("q-claim", exactly("gpu"))],
                pods=[pod],
                expected=lambda: {"pods": {"q-pod": pending(
                    f'0/{TOTAL_NODES} nodes are available: persistentvolumeclaim "missing" not found.')},
                    "claims": {"q-claim": UNALLOCATED}})


CLASS_CONFIG = opaque(sharing="TimeSlicing")
CASES: list[Case] = [case_a(), case_b(), case_c(), case_d(), case_e(), case_f(), case_g(), case_h(), case_i(),
                     case_j(), case_k(), case_l(), case_m(), case_n(), case_o(), case_p(), case_q()]
TOTAL_NODES = sum(len(c.nodes) for c in CASES)


# -- the run ------------------------------------------------------------------------------------

@dataclass
class Run:
    """One scheduler's outcome for every case."""

    who: str
    outcomes: dict[str, dict]                   # case name -> normalized outcome
    unsettled: list[str]                        # cases still not settled at the deadline
    messages: dict[str, str]                    # ns/pod -> full PodScheduled=False message
    devices: list[str]                          # every non-admin allocated device, one entry per result
    log_tail: str
    seconds: float

    def explain(self, case: str) -> str:
        return (f"{self.who}: case {case} {'did not settle' if case in self.unsettled else 'settled'}; "
                f"outcome:\n{json.dumps(self.outcomes.get(case), indent=1, sort_keys=True)}\n"
                f"--- {self.who} log tail ---\n{self.log_tail}")


async def create_case(admin: KubeClient, case: Case) -> None:
    ns = case.namespace
    await admin.request("POST", "/api/v1/namespaces", rate_limit=False,
                        body={"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": ns, "labels": dict(case.ns_labels)}})
    await create_nodes(admin, [make_node(n, labels={CASE_LABEL: case.name}) for n in case.nodes])
    for node, layout in case.nodes.items():
        await admin.request("POST", f"{RES}/resourceslices", body=resource_slice(node, layout), rate_limit=False)
    for c in case.claims:
        c = copy.deepcopy(c)
        status = c.pop("status", None)
        made = await admin.request("POST", f"{RES}/namespaces/{ns}/resourceclaims", body=c, rate_limit=False)
        if status:   # a claim allocated before the run: the API server ignores status on create
            made["status"] = status
            await admin.request("PUT", f"{RES}/namespaces/{ns}/resourceclaims/{c['metadata']['name']}/status",
                                body=made, rate_limit=False)
    templates = {t["metadata"]["name"]: t for t in case.templates}
    for t in case.templates:
        await admin.request("POST", f"{RES}/namespaces/{ns}/resourceclaimtemplates", body=t, rate_limit=False)
    created = await create_pods(admin, case.pods)
    # The resourceclaim controller's part: a claim per template reference, then the pod's status.
    for pod in created:
        statuses = {}
        for ref in pod["spec"].get("resourceClaims") or ():
            if ref.get("resourceClaimTemplateName"):
                body = generate_claim(pod, ref["name"], templates[ref["resourceClaimTemplateName"]])
                made = await admin.request("POST", f"{RES}/namespaces/{ns}/resourceclaims", body=body,
                                           rate_limit=False)
                statuses[ref["name"]] = made["metadata"]["name"]
        if statuses:
            await publish_claim_statuses(admin, pod, statuses)


async def create_all(admin: KubeClient, cases: list[Case]) -> None:
    await admin.request("POST", f"{RES}/deviceclasses", body=device_class(), rate_limit=False)
    await admin.request("POST", f"{RES}/deviceclasses", body=device_class(CFG_CLASS, [CLASS_CONFIG]),
                        rate_limit=False)
    for case in cases:
        await create_case(admin, case)


def _result_key(r: dict) -> tuple:
    return (r.get("request", ""), r.get("driver", ""), r.get("pool", ""), r.get("device", ""))


def normalize_claim(claim_obj: dict, pod_names_by_uid: dict[str, str]) -> dict:
    """status.allocation (results sorted by request, then device; config and nodeSelector as they
    are; an allocationTimestamp as ``TIMESTAMP_SET``), the pods in reservedFor by name (an entry
    that is not exactly {resource: pods, name, uid} of that live pod shows as its JSON), and the
    finalizers."""
    st = claim_obj.get("status") or {}
    alloc = copy.deepcopy(st.get("allocation"))
    if alloc:
        devices = alloc.setdefault("devices", {})
        devices["results"] = sorted(devices.get("results") or [], key=_result_key)
        if "allocationTimestamp" in alloc:
            alloc["allocationTimestamp"] = TIMESTAMP_SET
    reserved = []
    for ref in st.get("reservedFor") or ():
        name, uid = ref.get("name"), ref.get("uid")
        exact = ref == {"resource": "pods", "name": name, "uid": uid} and pod_names_by_uid.get(uid) == name
        reserved.append(name if exact else json.dumps(ref, sort_keys=True))
    return {"allocation": alloc or None, "reservedFor": sorted(reserved),
            "finalizers": sorted(claim_obj["metadata"].get("finalizers") or [])}


def claim_key(claim_obj: dict) -> str:
    """A generated claim by its generateName (the suffix is random), any other by its name."""
    meta = claim_obj["metadata"]
    if meta.get("generateName") and POD_CLAIM_ANNOTATION in (meta.get("annotations") or {}):
        return meta["generateName"] + "*"
    return meta["name"]


def pod_outcome(pod: dict) -> Any:
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"]
    cond = pod_scheduled_condition(pod)
    if cond and cond.get("status") == "False":
        return pending(strip_postfilter(cond.get("message", "")), cond.get("reason", ""))
    return {"waiting": cond}


async def collect(admin: KubeClient, cases: list[Case]) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    outcomes, messages, devices = {}, {}, []
    for case in cases:
        ns = case.namespace
        pods = await list_pods(admin, ns)
        uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}
        claims, _ = await admin.list_all(f"{RES}/namespaces/{ns}/resourceclaims")
        out = {"pods": {p["metadata"]["name"]: pod_outcome(p) for p in pods},
               "claims": {claim_key(c): normalize_claim(c, uids) for c in claims}}
        for p in pods:
            cond = pod_scheduled_condition(p)
            if cond and cond.get("status") == "False":
                messages[f"{ns}/{p['metadata']['name']}"] = cond.get("message", "")
        for c in claims:
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ():
                if not r.get("adminAccess"):
                    devices.append(f"{r['driver']}/{r['pool']}/{r['device']}")
        outcomes[case.name] = case.normalize(out) if case.normalize else out
    return outcomes, messages, devices


async def settle(admin: KubeClient, cases: list[Case], timeout: float) -> list[str]:
    """Wait until every case is settled; the cases that were not at the deadline."""
    deadline = time.monotonic() + timeout
    waiting = list(cases)
    while waiting and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        still = []
        for case in waiting:
            pods = {p["metadata"]["name"]: p for p in await list_pods(admin, case.namespace)}
            if not case.is_settled(pods):
                still.append(case)
        waiting = still
    return [c.name for c in waiting]


def _tail(path, limit: int = 6000) -> str:
    """The end of a scheduler's log, without kube-scheduler's list of flags."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line for line in lines if "flags.go" not in line)[-limit:]


SCHEDULERS = ("kube", "pysched", "pysched-rbac")


async def run_cases(who: str, cases: list[Case] | None = None, timeout: float = 60.0) -> Run:
    """A fresh control plane, every case's objects, then one scheduler alone until every case
    settled (or ``timeout``); the outcome read back from the API server.

    ``who``: "kube" (kube-scheduler), "pysched" (with the control plane's admin credentials, as
    tests/differential.py runs it) or "pysched-rbac" (as the ServiceAccount of ``manifests/``, with
    exactly the ClusterRole of manifests/rbac.yaml)."""
    assert who in SCHEDULERS, who
    cases = CASES if cases is None else cases
    start = time.monotonic()
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await create_all(admin, cases)
            if who == "kube":
                kube = KubeSchedulerProcess(cp, {"profiles": [{"schedulerName": PROFILE}],
                                                 "clientConnection": {"qps": 500, "burst": 1000}}).start()
                stop, log_path = kube.stop, kube.log_path
            else:
                kubeconfig = None   # the control plane's admin
                if who == "pysched-rbac":
                    await kustomize.apply(admin, REPO / "manifests")
                    kubeconfig = await sa_kubeconfig(cp, admin, "pysched-system")
                ours = SchedulerProcess(cp, cp.workdir, scheduler_config(profiles=[{"schedulerName": PROFILE}]),
                                        name=who, kubeconfig=kubeconfig).start()
                stop, log_path = ours.close, ours.log_path
            try:
                unsettled = await settle(admin, cases, timeout)
                outcomes, messages, devices = await collect(admin, cases)
            finally:
                stop()
            return Run(who, outcomes, unsettled, messages, devices, _tail(log_path), time.monotonic() - start)
        finally:
            await admin.close()


# -- kube-scheduler 1.37's gates (appended for tests/e2e/test_dra_binding_differential.py) -------

def binding_slice(node: str, devices: list[dict]) -> dict:
    """One node-local ResourceSlice of ``DRIVER`` (pool = the node) with ``devices`` as given
    (``bindingConditions``, ``bindingFailureConditions``, ``bindsToNode`` and all)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


async def set_device_conditions(admin: KubeClient, claim_obj: dict, conditions: list[dict]) -> dict:
    """The DRA driver's part: ``status.devices`` for every allocated device of ``claim_obj`` with
    ``conditions`` (type, status, reason, message), written over the claim's status."""
    ns, name = claim_obj["metadata"]["namespace"], claim_obj["metadata"]["name"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = copy.deepcopy(claim_obj)
    body["status"]["devices"] = [
        {"driver": r["driver"], "pool": r["pool"], "device": r["device"],
         "conditions": [{"lastTransitionTime": now, "observedGeneration": body["metadata"].get("generation", 1),
                         **c} for c in conditions]}
        for r in body["status"]["allocation"]["devices"]["results"]]
    return await admin.request("PUT", f"{RES}/namespaces/{ns}/resourceclaims/{name}/status", body=body,
                               rate_limit=False)


async def pod_events(admin: KubeClient, namespace: str, pod: str) -> set[tuple[str, str]]:
    """The distinct (reason, note) of the ``events.k8s.io/v1`` Events about ``pod``."""
    items, _ = await admin.list_all(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return {(e.get("reason", ""), e.get("note", "")) for e in items
            if (e.get("regarding") or {}).get("name") == pod}


# -- cases with slices written out whole (tests/e2e/test_dra137_differential.py) -------------------

@dataclass
class SliceCase(Case):
    """A case whose ResourceSlices are written out whole (``slices``: taints, shared counters,
    per-device node selection, capacities with request policies) instead of built from ``nodes``'
    layouts (which only name the nodes here), with cluster-scoped objects of its own (``objects``:
    DeviceTaintRules), and optionally a second act: once ``before(pods)`` holds, ``then(admin)``
    changes the cluster and the case settles on ``expected`` afterwards."""

    slices: list[dict] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)
    before: Callable[[dict[str, dict]], bool] | None = None
    then: Callable[[KubeClient], Any] | None = None


CLUSTER_SCOPED = {"DeviceTaintRule": "devicetaintrules", "DeviceClass": "deviceclasses"}


async def create_slice_case(admin: KubeClient, case: SliceCase) -> None:
    """``create_case`` for a ``SliceCase``: its nodes, slices and objects, then claims, templates
    and pods as ``create_case`` makes them (a copy of the case without nodes goes through it)."""
    await create_nodes(admin, [make_node(n, labels={CASE_LABEL: case.name}) for n in case.nodes])
    for s in case.slices:
        await admin.request("POST", f"{RES}/resourceslices", body=s, rate_limit=False)
    for obj in case.objects:
        await admin.request("POST", f"{RES}/{CLUSTER_SCOPED[obj['kind']]}", body=obj, rate_limit=False)
    rest = copy.copy(case)
    rest.nodes = {}
    await create_case(admin, rest)


async def run_slice_cases(who: str, cases: list[SliceCase], *, pysched: type[SchedulerProcess] = SchedulerProcess,
                          timeout: float = 60.0) -> Run:
    """``run_cases`` for ``SliceCase``s: the DeviceClasses, every case's objects, one scheduler
    (pysched started by ``pysched``, a ``SchedulerProcess`` class), the second acts once their
    ``before`` holds, then the outcome once every case settled (or ``timeout``)."""
    assert who in SCHEDULERS, who
    start = time.monotonic()
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await admin.request("POST", f"{RES}/deviceclasses", body=device_class(), rate_limit=False)
            for case in cases:
                await create_slice_case(admin, case)
            if who == "kube":
                kube = KubeSchedulerProcess(cp, {"profiles": [{"schedulerName": PROFILE}],
                                                 "clientConnection": {"qps": 500, "burst": 1000}}).start()
                stop, log_path = kube.stop, kube.log_path
            else:
                kubeconfig = None
                if who == "pysched-rbac":
                    await kustomize.apply(admin, REPO / "manifests")
                    kubeconfig = await sa_kubeconfig(cp, admin, "pysched-system")
                ours = pysched(cp, cp.workdir, scheduler_config(profiles=[{"schedulerName": PROFILE}]),
                               name=who, kubeconfig=kubeconfig).start()
                stop, log_path = ours.close, ours.log_path
            try:
                acts = [c for c in cases if c.then is not None]
                first = [SliceCase(c.name, c.doc, c.nodes, c.pods, settled=c.before or _all_pending) for c in acts]
                not_yet = set(await settle(admin, first, timeout))
                for c in acts:
                    if c.name not in not_yet:
                        assert c.then is not None
                        await c.then(admin)
                unsettled = sorted(not_yet | set(await settle(admin, cases, timeout)))
                outcomes, messages, devices = await collect(admin, cases)
            finally:
                stop()
            return Run(who, outcomes, unsettled, messages, devices, _tail(log_path), time.monotonic() - start)
        finally:
            await admin.close()


def _all_pending(pods: dict[str, dict]) -> bool:
    return bool(pods) and all(_unschedulable(p) for p in pods.values())
