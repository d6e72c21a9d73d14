"""Kubernetes 1.37's workload API in the differential e2e tests: ``scheduling.k8s.io/v1beta1``
PodGroups and their member pods, a control plane that serves them, one scheduler run over a set of
scenarios, and the outcome a user sees.

The API server serves PodGroup and Workload at ``v1beta1`` with ``--feature-gates=GenericWorkload=
true,TopologyAwareWorkloadScheduling=true`` and ``--runtime-config=scheduling.k8s.io/v1beta1=true``
(``control_plane``); kube-scheduler and pysched both run with the same two gates (``GATES``).
A pod joins a group with ``spec.schedulingGroup.podGroupName``.

A ``Scenario`` has its own namespace (``wl-<name>``) and its own nodes (labelled ``SCENARIO_LABEL:
<name>``, which every pod of the scenario selects; a topology scenario's racks under a topology key
of its own, ``<name>.example.com/rack``, so no group sees another scenario's domains). Its objects
are created one after the other, in the order written, while the scheduler runs - the PodGroup
before its pods unless the scenario says otherwise - so that upstream's member order (priority,
attempts, then the time each pod reached the queue) is the order written. A scenario may have a
second act (``then``): objects created once every scenario has settled on its first outcome
(``first``).

The outcome (``outcome``), compared whole between the schedulers:

* per pod: its node, the note of its first ``FailedScheduling`` Event (``events.k8s.io/v1``, by eventTime; later
  attempts may say something else) and its ``PodScheduled`` condition (``"True"``, the reason when
  False, None when absent);
* per PodGroup: its ``PodGroupInitiallyScheduled`` condition's status, reason and message (not the
  timestamps or observedGeneration), None when it has none.

Upstream breaks node-score and placement-score ties at random: a scenario must leave exactly one
best choice (nodes of different sizes, members that fill a node), or its outcome is not fixed.
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
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess
from pysched_dev.testkit import (
    create_nodes,
    ensure_namespace,
    list_pods,
    make_node,
    make_pod,
    pod_scheduled_condition,
    poll_until,
)

from .conftest import SchedulerProcess, scheduler_config
from .dra_kit import _tail
from .test_coscheduling_differential import first_failures

GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
APISERVER_ARGS = [f"--feature-gates={GATES}", "--runtime-config=scheduling.k8s.io/v1beta1=true"]
SCHEDULER_ARGS = [f"--feature-gates={GATES}"]
V1BETA1 = "scheduling.k8s.io/v1beta1"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"
# CompositePodGroups (``scheduling.k8s.io/v1alpha3``, alpha): the extra gate and API version
COMPOSITE_GATES = f"{GATES},CompositePodGroup=true"
COMPOSITE_RUNTIME_CONFIG = f"{V1ALPHA3}=true,{V1BETA1}=true"
CONDITION = "PodGroupInitiallyScheduled"
PROFILE = "wl-diff"           # both schedulers' profile: the pods are the same objects for both
OTHER_PROFILE = "wl-diff-b"   # a second profile, for a group whose members name different ones
SCENARIO_LABEL = "wl.example.com/scenario"

_PATHS = {"PodGroup": "podgroups", "Pod": "pods", "CompositePodGroup": "compositepodgroups"}
_CLUSTER_PATHS = {"PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses"}


# -- objects ------------------------------------------------------------------------------------

def ns_of(scenario: str) -> str:
    return f"wl-{scenario}"


def rack_key(scenario: str) -> str:
    """The topology key of ``scenario``'s racks (its own, so no other group sees its domains)."""
    return f"{scenario}.example.com/rack"


def podgroup(name: str, scenario: str, min_count: int | None = None, *, topology: str | None = None,
             priority_class: str | None = None) -> dict:
    """A v1beta1 PodGroup: ``gang: {minCount}`` when ``min_count`` is given, ``basic: {}`` otherwise;
    ``schedulingConstraints.topology`` with one ``key``; ``priorityClassName``."""
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": {"name": name, "namespace": ns_of(scenario)},
            "spec": spec}


def member(name: str, scenario: str, group: str | None, *, cpu: str = "3", scheduler: str = PROFILE,
           priority_class: str | None = None, preemption_policy: str | None = None,
           node_name: str | None = None) -> dict:
    """A pod of ``scenario`` (it selects the scenario's nodes) in PodGroup ``group`` (None: in none),
    requesting ``cpu`` and 100Mi."""
    p = make_pod(name, namespace=ns_of(scenario), scheduler=scheduler, cpu=cpu, memory="100Mi",
                 node_selector={SCENARIO_LABEL: scenario}, node_name=node_name)
    if group is not None:
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
    if priority_class:
        p["spec"]["priorityClassName"] = priority_class
    if preemption_policy:
        p["spec"]["preemptionPolicy"] = preemption_policy
    return p


def priority_class(name: str, value: int, preemption_policy: str | None = None) -> dict:
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                          "value": value}
    if preemption_policy:
        pc["preemptionPolicy"] = preemption_policy
    return pc


def node(name: str, scenario: str, cpu: str, *, rack: str | None = None) -> dict:
    """A node of ``scenario`` with ``cpu`` and 16Gi; in ``rack`` under the scenario's ``rack_key``."""
    labels = {SCENARIO_LABEL: scenario}
    if rack:
        labels[rack_key(scenario)] = rack
    return make_node(name, cpu=cpu, memory="16Gi", labels=labels)


def control_plane(gates: str = GATES, runtime_config: str = f"{V1BETA1}=true") -> ControlPlane:
    """A control plane (not started) serving ``scheduling.k8s.io/v1beta1`` with the two gates (or
    ``gates`` and ``runtime_config``: ``COMPOSITE_GATES``, ``COMPOSITE_RUNTIME_CONFIG``)."""
    return ControlPlane(extra_apiserver_args=[f"--feature-gates={gates}", f"--runtime-config={runtime_config}"])


async def create_object(admin: KubeClient, obj: dict) -> dict:
    """Create a PodGroup, CompositePodGroup, Pod or PriorityClass."""
    kind = obj["kind"]
    if kind in _CLUSTER_PATHS:
        return await admin.request("POST", _CLUSTER_PATHS[kind], body=obj, rate_limit=False)
    ns = obj["metadata"]["namespace"]
    base = {"PodGroup": f"/apis/{V1BETA1}", "CompositePodGroup": f"/apis/{V1ALPHA3}"}.get(kind, "/api/v1")
    return await admin.request("POST", f"{base}/namespaces/{ns}/{_PATHS[kind]}", body=obj, rate_limit=False)


# -- expected outcomes --------------------------------------------------------------------------

def on(node_name: str) -> dict:
    """A pod bound to ``node_name`` without a FailedScheduling Event before."""
    return {"node": node_name, "failed": None, "condition": "True"}


def failed(message: str, reason: str = "Unschedulable") -> dict:
    """A pod left pending: its first FailedScheduling note, and PodScheduled=False with ``reason``."""
    return {"node": None, "failed": message, "condition": reason}


# A pod no scheduling cycle has judged (PreEnqueue keeps it out of the active queue): no Event, no
# condition.
UNTRIED = {"node": None, "failed": None, "condition": None}


def condition(status: str, reason: str, message: str = "") -> dict:
    """A PodGroup's PodGroupInitiallyScheduled condition."""
    return {"status": status, "reason": reason, "message": message}


SCHEDULED = condition("True", "Scheduled")


# -- scenarios ----------------------------------------------------------------------------------

@dataclass
class Scenario:
    name: str
    doc: str
    nodes: list[dict]
    objects: list[dict]                                 # PodGroups and pods, created in this order
    # expected() -> {"pods": {...}, "podgroups": {...}}: kube-scheduler's outcome, written by hand (a
    # callable, so that it can use what is known only once every scenario exists)
    expected: Callable[[], dict]
    cluster_objects: list[dict] = field(default_factory=list)   # PriorityClasses, created first
    then: list[dict] = field(default_factory=list)      # the second act, once every scenario settled
    first: dict | None = None                           # the outcome before the second act
    # mask(outcome) -> outcome: for a scenario whose outcome has a part that may differ between runs
    mask: Callable[[dict], dict] | None = None

    @property
    def namespace(self) -> str:
        return ns_of(self.name)


def _has_settled(expected: dict, got: dict) -> bool:
    """Whether ``got`` shows everything ``expected`` waits for: each pod expected bound is bound,
    each pod expected to fail has its Event and condition, each PodGroup expected to have a
    condition has one (a pod expected UNTRIED cannot be waited for)."""
    for name, want in expected["pods"].items():
        have = got["pods"].get(name) or UNTRIED
        if want["node"] and not have["node"]:
            return False
        if want["failed"] and not (have["failed"] and have["condition"]):
            return False
    return all(got["podgroups"].get(name) is not None
               for name, want in expected["podgroups"].items() if want is not None)


# -- reading the outcome ------------------------------------------------------------------------

def pod_outcome(pod: dict, first_failure: str | None) -> dict:
    cond = pod_scheduled_condition(pod)
    shown = None if cond is None else ("True" if cond.get("status") == "True" else cond.get("reason", ""))
    return {"node": pod["spec"].get("nodeName"), "failed": first_failure, "condition": shown}


def podgroup_condition(pg: dict) -> dict | None:
    for c in (pg.get("status") or {}).get("conditions") or ():
        if c.get("type") == CONDITION:
            return condition(c.get("status", ""), c.get("reason", ""), c.get("message", ""))
    return None


async def podgroup_events(admin: KubeClient, ns: str) -> dict[str, list[tuple[str, str, str]]]:
    """The Events about each PodGroup of ``ns``: (type, reason, note), oldest first."""
    events, _ = await admin.list_all(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    for e in events:
        if (e.get("regarding") or {}).get("kind") == "PodGroup":
            when = e.get("eventTime") or e["metadata"]["creationTimestamp"]
            out.setdefault(e["regarding"]["name"], []).append((when, e.get("type", ""), e.get("reason", ""),
                                                               e.get("note") or ""))
    return {name: [t[1:] for t in sorted(evs)] for name, evs in out.items()}


async def outcome(admin: KubeClient, scenario: Scenario) -> dict:
    ns = scenario.namespace
    failures = await first_failures(admin, ns)
    pods = {p["metadata"]["name"]: pod_outcome(p, failures.get(p["metadata"]["name"]))
            for p in await list_pods(admin, ns)}
    groups, _ = await admin.list_all(f"/apis/{V1BETA1}/namespaces/{ns}/podgroups")
    out: dict[str, Any] = {"pods": pods, "podgroups": {g["metadata"]["name"]: podgroup_condition(g) for g in groups}}
    if any(o["kind"] == "CompositePodGroup" for o in [*scenario.objects, *scenario.then]):
        # CompositePodGroups: their status.conditions, whole (kube-scheduler writes none)
        cpgs, _ = await admin.list_all(f"/apis/{V1ALPHA3}/namespaces/{ns}/compositepodgroups")
        out["compositepodgroups"] = {c["metadata"]["name"]: (c.get("status") or {}).get("conditions") for c in cpgs}
    return scenario.mask(out) if scenario.mask else out


async def settle(admin: KubeClient, scenarios: list[Scenario], expected: Callable[[Scenario], dict],
                 timeout: float, grace: float = 2.0) -> list[str]:
    """Wait until every scenario shows what ``expected(scenario)`` waits for, then ``grace`` seconds
    more (for what cannot be waited for: a pod that stays untried, an Event that must not come);
    the scenarios not settled at the deadline."""
    deadline = time.monotonic() + timeout
    waiting = list(scenarios)
    while waiting and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        waiting = [s for s in waiting if not _has_settled(expected(s), await outcome(admin, s))]
    await asyncio.sleep(grace)
    return [s.name for s in waiting]


# -- one scheduler over every scenario ------------------------------------------------------------

@dataclass
class Run:
    """One scheduler's outcome for every scenario: ``first`` before the second acts, ``outcomes``
    at the end."""

    who: str
    first: dict[str, dict]
    outcomes: dict[str, dict]
    unsettled: list[str]
    log_tail: str
    seconds: float
    # scenario -> PodGroup name -> its Events' (type, reason, note), oldest first (pysched's own:
    # kube-scheduler writes none about a PodGroup)
    group_events: dict[str, dict[str, list[tuple[str, str, str]]]] = field(default_factory=dict)

    def explain(self, scenario: str) -> str:
        return (f"{self.who}: scenario {scenario} {'did not settle' if scenario in self.unsettled else 'settled'}; "
                f"first act:\n{json.dumps(self.first.get(scenario), indent=1, sort_keys=True)}\n"
                f"outcome:\n{json.dumps(self.outcomes.get(scenario), indent=1, sort_keys=True)}\n"
                f"--- {self.who} log tail ---\n{self.log_tail}")


SCHEDULERS = ("kube", "pysched")


def profiles() -> list[dict]:
    return [{"schedulerName": PROFILE}, {"schedulerName": OTHER_PROFILE}]


READY_NS = "wl-ready"


async def prepare(admin: KubeClient, scenarios: list[Scenario]) -> None:
    """Every scenario's cluster objects, namespace and nodes (nothing a scheduler acts on)."""
    for s in scenarios:
        for obj in s.cluster_objects:
            await create_object(admin, copy.deepcopy(obj))
        await ensure_namespace(admin, s.namespace)
        await create_nodes(admin, s.nodes)


async def wait_ready(admin: KubeClient, timeout: float) -> None:
    """Until the scheduler has judged a pod of its own (one no node selects, in ``READY_NS``): its
    caches are synced, so every object created from now on reaches it as an event, in order."""
    await ensure_namespace(admin, READY_NS)
    await create_object(admin, make_pod("ready", namespace=READY_NS, scheduler=PROFILE, cpu="10m", memory="10Mi",
                                        node_selector={SCENARIO_LABEL: "none"}))

    async def judged():
        return pod_scheduled_condition(await admin.get(f"/api/v1/namespaces/{READY_NS}/pods/ready"))
    await poll_until(judged, timeout, fail=lambda _: AssertionError(f"the scheduler judged no pod in {timeout}s"))


async def run_scenarios(who: str, scenarios: list[Scenario], timeout: float = 30.0, *, gates: str = GATES,
                        runtime_config: str = f"{V1BETA1}=true") -> Run:
    """A fresh control plane with every scenario's nodes, one scheduler alone (kube-scheduler or
    ``python -m pysched``, both with ``GATES`` and ``profiles()``), then, once it has judged a pod,
    every scenario's objects one at a time; when every scenario settled on its first act (or
    ``timeout``), the second acts, and again; the outcomes read back. ``gates`` and
    ``runtime_config``: the API server's and both schedulers' (``COMPOSITE_GATES``...).

    The objects are created while the scheduler runs, not before: upstream orders a group's
    members by the time each reached its queue, and a scheduler that lists pods at startup
    receives them in no fixed order."""
    assert who in SCHEDULERS, who
    start = time.monotonic()
    with control_plane(gates, runtime_config) as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            await prepare(admin, scenarios)
            if who == "kube":
                kube = KubeSchedulerProcess(cp, {"profiles": profiles(),
                                                 "clientConnection": {"qps": 500, "burst": 1000}},
                                            extra_args=[f"--feature-gates={gates}"]).start()
                stop, log_path = kube.stop, kube.log_path
            else:
                assert cp.workdir is not None
                ours = SchedulerProcess(cp, cp.workdir, scheduler_config(profiles=profiles()), name=who,
                                        extra_args=[f"--feature-gates={gates}"]).start()
                stop, log_path = ours.close, ours.log_path
            try:
                await wait_ready(admin, 60.0)
                for s in scenarios:
                    for obj in s.objects:
                        await create_object(admin, copy.deepcopy(obj))
                unsettled = await settle(admin, scenarios, lambda s: s.first or s.expected(), timeout)
                first = {s.name: await outcome(admin, s) for s in scenarios}
                acts = [s for s in scenarios if s.then]
                for s in acts:
                    for obj in s.then:
                        await create_object(admin, copy.deepcopy(obj))
                unsettled = sorted(set(unsettled) | set(await settle(admin, acts, lambda s: s.expected(), timeout,
                                                                     grace=0.5)))
                outcomes = {s.name: await outcome(admin, s) for s in scenarios}
                group_events = {s.name: await podgroup_events(admin, s.namespace) for s in scenarios}
            finally:
                stop()
            return Run(who, first, outcomes, unsettled, _tail(log_path), time.monotonic() - start, group_events)
        finally:
            await admin.close()


class Runs:
    """Each scheduler's run over a module's scenarios, made once (the first test that asks) and kept
    for the module's other tests; a run that failed fails every test that asks for it."""

    def __init__(self, scenarios: list[Scenario], **run_args: Any):
        self.scenarios = scenarios
        self.run_args = run_args
        self._runs: dict[str, Run | BaseException] = {}

    async def of(self, who: str) -> Run:
        if who not in self._runs:
            try:
                self._runs[who] = await run_scenarios(who, self.scenarios, **self.run_args)
            except Exception as exc:  # noqa: BLE001 - re-raised below, and for every later scenario
                self._runs[who] = exc
            else:
                run = self._runs[who]
                print(f"\n{who}: {run.seconds:.1f}s, unsettled={run.unsettled}\n"
                      + json.dumps({"first": run.first, "outcomes": run.outcomes}, indent=1, sort_keys=True))
        run = self._runs[who]
        if isinstance(run, BaseException):
            raise AssertionError(f"the {who} run failed: {run!r}") from run
        return run

    async def check_kube(self, scenario: Scenario) -> None:
        """kube-scheduler did what ``scenario`` says it does."""
        kube = await self.of("kube")
        assert scenario.name not in kube.unsettled, kube.explain(scenario.name)
        if scenario.first is not None:
            assert kube.first[scenario.name] == scenario.first, kube.explain(scenario.name)
        assert kube.outcomes[scenario.name] == scenario.expected(), kube.explain(scenario.name)

    async def check_pysched(self, scenario: Scenario) -> None:
        """pysched did what kube-scheduler did, on both acts."""
        kube = await self.of("kube")
        ours = await self.of("pysched")
        assert ours.first[scenario.name] == kube.first[scenario.name], ours.explain(scenario.name)
        assert ours.outcomes[scenario.name] == kube.outcomes[scenario.name], ours.explain(scenario.name)
