"""kube-scheduler 1.37.2 and pysched handle devices with binding conditions alike.

Each scheduler runs alone on a fresh 1.37 control plane (skipped on an older one) holding three
cases, each a node whose one device (``gpu-0``) has ``bindingConditions: [attached]`` and
``bindingFailureConditions: [failed]``, one claim and one pod. The test plays the DRA driver: each
time it sees a fresh allocation of a case's claim (allocated, reserved for the pod, no
``status.devices`` yet), it applies the case's next step to the device's conditions:

* ``ok``: ``attached`` True - the pod binds.
* ``fail``: ``failed`` True - PreBind fails (``device binding failed: ...``), the next attempt finds
  the claim unavailable and PostFilter deallocates it; on the new allocation ``attached`` True - the
  pod binds.
* ``timeout`` (a profile with ``bindingTimeout: 3s``): ``attached`` False - PreBind gives up
  (``device binding timeout: context deadline exceeded``), the next attempt finds the claim timed
  out and PostFilter deallocates it; on the new allocation ``attached`` True - the pod binds.

Compared per case: the pod's node, the claim (allocation with the results' binding conditions and
whether ``allocationTimestamp`` is set, ``reservedFor``, finalizers, the devices' condition types and
statuses) and the distinct (reason, note) of the pod's Events (FailedScheduling, Scheduled,
BindingConditionsPending). kube-scheduler polls the conditions every 5 s; pysched follows the
claim's watch, so it may need fewer attempts, but not different ones. kube-scheduler's outcome is
also checked against the one written down for each case.

pysched follows the 1.37 API server's release, so its binding-condition gates are on as
kube-scheduler's; on an older control plane the tests are skipped.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass

import pytest

from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess, binaries_version
from pysched_dev.testkit import create_nodes, make_node
from tests.differential import strip_postfilter

from . import kustomize
from .conftest import REPO, SchedulerProcess, scheduler_config
from .dra_kit import (
    CASE_LABEL,
    DRIVER,
    RES,
    _tail,
    binding_slice,
    claim,
    device_class,
    dra_pod,
    exactly,
    normalize_claim,
    pod_events,
    set_device_conditions,
)
from .test_manifests_metrics import sa_kubeconfig

pytestmark = pytest.mark.e2e

ATTACHED, FAILED = f"{DRIVER}/attached", f"{DRIVER}/failed"
PROFILE, SHORT = "dra-bind", "dra-bind-short"    # bindingTimeout: default (600s), 3s
SHORT_TIMEOUT = "3s"
PENDING = "BindingConditionsPending"
PREBIND = 'running PreBind plugin "DynamicResources": '


def cond(kind: str, status: str, reason: str, message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@dataclass
class BCase:
    name: str
    steps: list[list[dict]]     # the device conditions the driver sets on each fresh allocation
    profile: str = PROFILE

    @property
    def ns(self) -> str:
        return f"bc-{self.name}"

    @property
    def node(self) -> str:
        return f"bc-{self.name}-n1"

    @property
    def pod(self) -> str:
        return f"bc-{self.name}-pod"

    @property
    def claim(self) -> str:
        return f"bc-{self.name}-claim"


CASES = [
    BCase("ok", [[cond(ATTACHED, "True", "Attached")]]),
    BCase("fail", [[cond(FAILED, "True", "Broken", 'fabric "port 7" down')], [cond(ATTACHED, "True", "Attached")]]),
    BCase("timeout", [[cond(ATTACHED, "False", "Preparing")], [cond(ATTACHED, "True", "Attached")]],
          profile=SHORT),
]
TOTAL_NODES = len(CASES)


def not_available_message() -> str:
    return (f"0/{TOTAL_NODES} nodes are available: 1 resourceclaim not available on the node, "
            f"{TOTAL_NODES - 1} node(s) didn't match Pod's node affinity/selector.")


def expected(case: BCase) -> dict:
    """kube-scheduler's outcome, written down: the pod on the case's node, the claim allocated
    there with the device's binding conditions, stamped, reserved for the pod, its device
    attached; and the pod's Events (FailedScheduling without the PostFilter verdicts)."""
    result = {"request": "gpu", "driver": DRIVER, "pool": case.node, "device": "gpu-0",
              "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
    events = {(PENDING, f"waiting for binding conditions for device on node {case.node}"),
              ("Scheduled", f"Successfully assigned {case.ns}/{case.pod} to {case.node}")}
    if case.name == "fail":
        events |= {("FailedScheduling", PREBIND + f'device binding failed: claim={case.claim}, reason=Broken, '
                                                  'message="fabric \\"port 7\\" down"'),
                   ("FailedScheduling", not_available_message())}
    if case.name == "timeout":
        events |= {("FailedScheduling", PREBIND + "device binding timeout: context deadline exceeded"),
                   ("FailedScheduling", not_available_message())}
    return {"node": case.node,
            "claim": {"allocation": {"devices": {"results": [result]},
                                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                         {"key": "metadata.name", "operator": "In", "values": [case.node]}]}]},
                                     "allocationTimestamp": True},
                      "reservedFor": [case.pod], "finalizers": ["resource.kubernetes.io/delete-protection"],
                      "devices": [[ATTACHED, "True"]]},
            "events": sorted(events)}


def normalize(case: BCase, pod: dict, claim_obj: dict, events: set[tuple[str, str]]) -> dict:
    out = normalize_claim(claim_obj, {pod["metadata"]["uid"]: case.pod})
    alloc = out["allocation"]
    if alloc is not None:
        alloc["allocationTimestamp"] = bool(alloc.get("allocationTimestamp"))
    out["devices"] = [[c.get("type"), c.get("status")]
                      for d in (claim_obj.get("status") or {}).get("devices") or () for c in d.get("conditions") or ()]
    kept = {(r, strip_postfilter(n) if r == "FailedScheduling" else n) for r, n in events
            if r in ("FailedScheduling", "Scheduled", PENDING)}
    return {"node": pod["spec"].get("nodeName") or None, "claim": out, "events": sorted(kept)}


# -- the run ------------------------------------------------------------------------------------

async def create(admin: KubeClient) -> None:
    await admin.request("POST", f"{RES}/deviceclasses", body=device_class(), rate_limit=False)
    for case in CASES:
        await admin.request("POST", "/api/v1/namespaces", rate_limit=False,
                            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": case.ns}})
        await create_nodes(admin, [make_node(case.node, labels={CASE_LABEL: case.ns})])
        device = {"name": "gpu-0", "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
        await admin.request("POST", f"{RES}/resourceslices", body=binding_slice(case.node, [device]),
                            rate_limit=False)
        await admin.request("POST", f"{RES}/namespaces/{case.ns}/resourceclaims",
                            body=claim(case.claim, exactly("gpu")), rate_limit=False)
        p = dra_pod(case.pod, case.ns, claims={"gpu": case.claim})
        p["metadata"]["namespace"] = case.ns
        p["spec"]["schedulerName"] = case.profile
        await admin.request("POST", f"/api/v1/namespaces/{case.ns}/pods", body=p, rate_limit=False)


async def drive(admin: KubeClient, case: BCase, deadline: float) -> list[str]:
    """Play the driver for ``case`` until its pod is bound (or the deadline): what it did, in order."""
    done: list[str] = []
    base = f"{RES}/namespaces/{case.ns}/resourceclaims/{case.claim}"
    while time.monotonic() < deadline:
        pod = await admin.request("GET", f"/api/v1/namespaces/{case.ns}/pods/{case.pod}", rate_limit=False)
        if pod["spec"].get("nodeName"):
            return done
        c = await admin.request("GET", base, rate_limit=False)
        st = c.get("status") or {}
        fresh = (st.get("allocation") and not st.get("devices")
                 and any(r.get("uid") == pod["metadata"]["uid"] for r in st.get("reservedFor") or ()))
        if fresh:
            step = case.steps[min(len(done), len(case.steps) - 1)]
            await set_device_conditions(admin, c, step)
            done.append(json.dumps(step, sort_keys=True))
        await asyncio.sleep(0.2)
    return done


@dataclass
class Run:
    who: str
    outcomes: dict[str, dict]
    steps: dict[str, list[str]]
    log_tail: str

    def explain(self, case: str) -> str:
        return (f"{self.who}: case {case}: driver steps {self.steps.get(case)}; outcome:\n"
                f"{json.dumps(self.outcomes.get(case), indent=1)}\n--- {self.who} log tail ---\n{self.log_tail}")


def profiles() -> list[dict]:
    return [{"schedulerName": PROFILE},
            {"schedulerName": SHORT, "pluginConfig": [{"name": "DynamicResources",
                                                       "args": {"bindingTimeout": SHORT_TIMEOUT}}]}]


async def run(who: str, timeout: float = 90.0) -> Run:
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            if binaries_version(cp.bin) < (1, 37):
                pytest.skip("binding conditions are on by default from kube-scheduler 1.36/1.37 "
                            "(PYSCHED_BIN_DIR: a 1.37 control plane)")
            await create(admin)
            if who == "kube":
                kube = KubeSchedulerProcess(cp, {"profiles": profiles(),
                                                 "clientConnection": {"qps": 500, "burst": 1000}}).start()
                stop, log_path = kube.stop, kube.log_path
            else:
                kubeconfig = None
                if who == "pysched-rbac":
                    await kustomize.apply(admin, REPO / "manifests")
                    kubeconfig = await sa_kubeconfig(cp, admin, "pysched-system")
                ours = SchedulerProcess(cp, cp.workdir, scheduler_config(profiles=profiles()), name=who,
                                        kubeconfig=kubeconfig).start()
                stop, log_path = ours.close, ours.log_path
            try:
                deadline = time.monotonic() + timeout
                steps = dict(zip([c.name for c in CASES],
                                 await asyncio.gather(*(drive(admin, c, deadline) for c in CASES)), strict=True))
                await asyncio.sleep(1.0)   # the last Events are written in the background
                outcomes = {}
                for case in CASES:
                    pod = await admin.request("GET", f"/api/v1/namespaces/{case.ns}/pods/{case.pod}",
                                              rate_limit=False)
                    c = await admin.request("GET", f"{RES}/namespaces/{case.ns}/resourceclaims/{case.claim}",
                                            rate_limit=False)
                    outcomes[case.name] = normalize(case, pod, c, await pod_events(admin, case.ns, case.pod))
            finally:
                stop()
            return Run(who, outcomes, steps, _tail(log_path))
        finally:
            await admin.close()


_RUNS: dict[str, Run | BaseException] = {}


async def outcome_of(who: str) -> Run:
    if who not in _RUNS:
        try:
            _RUNS[who] = await run(who)
        except (Exception, pytest.skip.Exception) as exc:  # noqa: BLE001 - re-raised for every case
            _RUNS[who] = exc
    result = _RUNS[who]
    if isinstance(result, pytest.skip.Exception):
        raise result
    if isinstance(result, BaseException):
        raise AssertionError(f"the {who} run failed: {result!r}") from result
    return copy.deepcopy(result)


IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_kube_scheduler_does_what_the_case_says(case):
    kube = await outcome_of("kube")
    assert kube.outcomes[case.name] == expected(case), kube.explain(case.name)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_pysched_binds_as_kube_scheduler(case):
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched")
    assert ours.outcomes[case.name] == kube.outcomes[case.name], ours.explain(case.name)


async def test_pysched_as_its_serviceaccount_binds_as_kube_scheduler():
    """The same with the ClusterRole of manifests/rbac.yaml (resourceclaims/binding among it)."""
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched-rbac")
    differ = sorted(c for c in kube.outcomes if ours.outcomes.get(c) != kube.outcomes[c])
    assert differ == [], "\n".join(ours.explain(c) for c in differ)
    assert "forbidden" not in ours.log_tail.lower(), ours.log_tail
