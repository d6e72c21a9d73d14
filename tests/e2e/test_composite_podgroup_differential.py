"""kube-scheduler 1.37.2 and pysched schedule CompositePodGroups alike (issue 54): trees of
``scheduling.k8s.io/v1alpha3`` CompositePodGroups whose leaves are ``v1beta1`` PodGroups
(``spec.parentCompositePodGroupName``), ``schedulingPolicy.gang.minGroupCount``, a CompositePodGroup's
topology key, GangScheduling's PreEnqueue for a whole tree, and the conditions of every leaf.

Both schedulers run with ``--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=
true,CompositePodGroup=true``, each alone on a fresh control plane (Kubernetes 1.37.2 with the same
gates and ``--runtime-config=scheduling.k8s.io/v1alpha3=true,scheduling.k8s.io/v1beta1=true``;
``workload_kit``) holding every scenario below. Compared per scenario as in
``test_workload_differential``: each pod's node, first FailedScheduling message and PodScheduled
reason; each PodGroup's ``PodGroupInitiallyScheduled`` condition; and each CompositePodGroup's
status conditions (kube-scheduler writes none).

Upstream keeps a CompositePodGroup's children in a Go map: they are tried in no fixed order. So
each child has nodes of its own (``PART_KEY``: a member selects its child's part), and a scenario
whose outcome depends on which child is tried first (``cpg-fails``) is compared order-blind
(``order_blind``: which pod or PodGroup got which outcome is left out, the outcomes are not).

Nodes have 16Gi and 4, 5 or 6 CPUs; members ask for 3 CPUs (one member per node, the biggest free
node first).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pysched_dev.devcluster import binaries_version

from .workload_kit import (
    COMPOSITE_GATES,
    COMPOSITE_RUNTIME_CONFIG,
    SCHEDULED,
    UNTRIED,
    V1ALPHA3,
    Run,
    Runs,
    Scenario,
    condition,
    failed,
    member,
    node,
    ns_of,
    on,
    podgroup,
    rack_key,
)

pytestmark = pytest.mark.e2e

if binaries_version() < (1, 37):
    pytest.skip("needs a Kubernetes 1.37 control plane (PYSCHED_BIN_DIR)", allow_module_level=True)

PART_KEY = "cpg.example.com/part"
GROUP_UNSCHEDULABLE = "pod group is unschedulable"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


# -- objects ------------------------------------------------------------------------------------

def cpg(name: str, scenario: str, min_group_count: int | None = None, *, parent: str | None = None,
        topology: str | None = None) -> dict:
    """A v1alpha3 CompositePodGroup: ``gang: {minGroupCount}`` when given, ``basic: {}`` otherwise."""
    policy: dict[str, Any] = ({"gang": {"minGroupCount": min_group_count}} if min_group_count is not None
                              else {"basic": {}})
    spec: dict[str, Any] = {"workloadRef": {"workloadName": "w", "templateName": name}, "schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": V1ALPHA3, "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": ns_of(scenario)}, "spec": spec}


def child(name: str, scenario: str, parent: str, min_count: int | None = None, **kw) -> dict:
    """A v1beta1 PodGroup of CompositePodGroup ``parent``."""
    pg = podgroup(name, scenario, min_count, **kw)
    pg["spec"]["parentCompositePodGroupName"] = parent
    pg["spec"]["workloadRef"] = {"workloadName": "w", "templateName": name}
    return pg


def pod(name: str, scenario: str, group: str, part: str, **kw) -> dict:
    """A member of PodGroup ``group`` on the nodes of ``part``."""
    p = member(name, scenario, group, **kw)
    p["spec"]["nodeSelector"][PART_KEY] = part
    return p


def part_node(name: str, scenario: str, cpu: str, part: str, *, rack: str | None = None) -> dict:
    n = node(f"{scenario}-{name}", scenario, cpu, rack=rack)
    n["metadata"]["labels"][PART_KEY] = part
    return n


def order_blind(outcome: dict) -> dict:
    """The outcome without which pod (PodGroup) got which outcome: the values sorted, in the order
    of the names (for a tree whose children upstream tries in no fixed order)."""
    out = dict(outcome)
    for kind in ("pods", "podgroups"):
        names = sorted(outcome[kind])
        values = sorted((outcome[kind][n] for n in names), key=lambda v: json.dumps(v, sort_keys=True))
        out[kind] = dict(zip(names, values, strict=True))
    return out


def unschedulable(message: str) -> dict:
    return condition("False", "Unschedulable", message)


def fit_error(fitting_elsewhere: int, insufficient: int) -> str:
    """The FitError of a member that fits none of its part's ``insufficient`` nodes (CPU), on a
    placement of every node: ``fitting_elsewhere`` is unused (kept for the reader)."""
    reasons = [f"{insufficient} Insufficient cpu", f"{TOTAL_NODES - insufficient} node(s) didn't match "
                                                   "Pod's node affinity/selector"]
    return f"0/{TOTAL_NODES} nodes are available: {', '.join(sorted(reasons))}."


def placed_none(placements: int, first: str) -> str:
    return f"{GROUP_UNSCHEDULABLE}, 0/{placements} placements are available, first placement status: {first}"


B_SCHEDULED_OR_REGRESSED = "True/Scheduled, or False/Unschedulable after a's retry"


def b_regressed(outcome: dict) -> dict:
    """``cpg-min-met``'s two races. PodGroup b, True/Scheduled or False/Unschedulable: a's members are retried at
    once; the root places nobody (b has no member left), so b takes the root's status - and the
    PodGroupPostFilter's verdict twice (the root's status is b's too). Upstream does not take a
    condition back from True, unless its informer has not yet seen the True it wrote (a race)."""
    b = outcome["podgroups"].get("b")
    retried = unschedulable(f"{GROUP_UNSCHEDULABLE}, {NO_VICTIMS}, {NO_VICTIMS}")
    if b in (SCHEDULED, retried):
        outcome = {**outcome, "podgroups": {**outcome["podgroups"], "b": B_SCHEDULED_OR_REGRESSED}}
    # a0's first FailedScheduling note: the tree's attempt's, or - when that Event was not yet written
    # by the time the retry's came (a loaded machine; the series keeps the first note written) - the
    # retry's, which ends with PodGroupPostFilter's verdict. Either is upstream's.
    a0 = (outcome.get("pods") or {}).get("a0")
    if a0 and isinstance(a0.get("failed"), str) and a0["failed"].endswith(f", {NO_VICTIMS}"):
        a0 = {**a0, "failed": a0["failed"][:-len(f", {NO_VICTIMS}")]}
        outcome = {**outcome, "pods": {**outcome["pods"], "a0": a0}}
    return outcome


# -- scenarios ------------------------------------------------------------------------------------

def scenarios() -> list[Scenario]:
    s = "cpg-whole"
    whole = Scenario(
        s, "a CompositePodGroup (gang, minGroupCount 2) of two gangs: placed whole in one cycle, every leaf "
           "PodGroup True/Scheduled, no status on the CompositePodGroup",
        [part_node("n1", s, "4", "a"), part_node("n2", s, "5", "a"), part_node("n3", s, "6", "b")],
        [cpg("c", s, 2), child("a", s, "c", 2), child("b", s, "c", 1),
         pod("a0", s, "a", "a"), pod("a1", s, "a", "a"), pod("b0", s, "b", "b")],
        lambda: {"pods": {"a0": on("cpg-whole-n2"), "a1": on("cpg-whole-n1"), "b0": on("cpg-whole-n3")},
                 "podgroups": {"a": SCHEDULED, "b": SCHEDULED}, "compositepodgroups": {"c": None}})
    s = "cpg-min-met"
    min_met = Scenario(
        s, "minGroupCount 1 of two gangs, one of which does not fit (its part has one node for two "
           "members): the other is placed, the failing one's members and PodGroup say why. The "
           "CompositePodGroup comes last, so the tree is tried once, whole (with it first, the tree "
           "is ready as soon as gang a is, and may be tried before b0 exists). a's members are retried at "
           "once, alone: the root places nobody, PodGroupPostFilter runs and a's condition ends with its "
           "verdict",
        [part_node("n1", s, "4", "a"), part_node("n2", s, "5", "b")],
        [child("a", s, "c", 2), child("b", s, "c", 1),
         pod("a0", s, "a", "a"), pod("a1", s, "a", "a"), pod("b0", s, "b", "b"), cpg("c", s, 1)],
        lambda: {"pods": {"a0": failed(f"{GROUP_UNSCHEDULABLE}, {A_MIN_MET}"),
                          "a1": failed(fit_error(0, 1)), "b0": on("cpg-min-met-n2")},
                 "podgroups": {"a": unschedulable(f"{A_MIN_MET}, {NO_VICTIMS}"), "b": B_SCHEDULED_OR_REGRESSED},
                 "compositepodgroups": {"c": None}},
        mask=b_regressed)
    s = "cpg-fails"
    fails = Scenario(
        s, "minGroupCount 2 of two gangs that fit nowhere: the first child tried fails, the CompositePodGroup "
           "gives up before the second (order-blind: upstream tries the children in no fixed order)",
        [part_node("n1", s, "4", "a"), part_node("n2", s, "5", "b")],
        [cpg("c", s, 2), child("a", s, "c", 1), child("b", s, "c", 1),
         pod("a0", s, "a", "a", cpu="8"), pod("b0", s, "b", "b", cpu="8")],
        lambda: order_blind({"pods": {"a0": failed(fit_error(0, 1)), "b0": failed(FAILS_UNTRIED)},
                             "podgroups": {"a": unschedulable(FAILS_TRIED), "b": unschedulable(FAILS_CPG)},
                             "compositepodgroups": {"c": None}}),
        mask=order_blind)
    s = "cpg-rack"
    rack = Scenario(
        s, "a CompositePodGroup with a topology key: both children in one rack (r1), though a's member "
           "would rather go to r2's bigger node; in r2 b has no node, so the tree does not fit there",
        [part_node("r1-n1", s, "4", "a", rack="r1"), part_node("r1-n2", s, "5", "b", rack="r1"),
         part_node("r2-n3", s, "6", "a", rack="r2")],
        [cpg("c", s, 2, topology=rack_key(s)), child("a", s, "c", 1), child("b", s, "c", 1),
         pod("a0", s, "a", "a"), pod("b0", s, "b", "b")],
        lambda: {"pods": {"a0": on("cpg-rack-r1-n1"), "b0": on("cpg-rack-r1-n2")},
                 "podgroups": {"a": SCHEDULED, "b": SCHEDULED}, "compositepodgroups": {"c": None}})
    s = "cpg-quorum"
    quorum = Scenario(
        s, "PreEnqueue for the whole tree: minGroupCount 2, but gang a has one member of two - every member "
           "waits untried; a's second member releases the tree, placed whole",
        [part_node("n1", s, "4", "a"), part_node("n2", s, "5", "a"), part_node("n3", s, "6", "b")],
        [cpg("c", s, 2), child("a", s, "c", 2), child("b", s, "c", 1),
         pod("a0", s, "a", "a"), pod("b0", s, "b", "b")],
        lambda: {"pods": {"a0": on("cpg-quorum-n2"), "a1": on("cpg-quorum-n1"), "b0": on("cpg-quorum-n3")},
                 "podgroups": {"a": SCHEDULED, "b": SCHEDULED}, "compositepodgroups": {"c": None}},
        then=[pod("a1", s, "a", "a")],
        first={"pods": {"a0": UNTRIED, "b0": UNTRIED}, "podgroups": {"a": None, "b": None},
               "compositepodgroups": {"c": None}})
    s = "cpg-nested"
    nested = Scenario(
        s, "three levels: CompositePodGroup r (basic) holds CompositePodGroup m (gang, minGroupCount 2: "
           "PodGroups a and b) and PodGroup d; placed whole",
        [part_node("n1", s, "4", "a"), part_node("n2", s, "5", "b"), part_node("n3", s, "6", "d")],
        [cpg("r", s), cpg("m", s, 2, parent="r"), child("a", s, "m", 1), child("b", s, "m", 1),
         child("d", s, "r", 1), pod("a0", s, "a", "a"), pod("b0", s, "b", "b"), pod("d0", s, "d", "d")],
        lambda: {"pods": {"a0": on("cpg-nested-n1"), "b0": on("cpg-nested-n2"), "d0": on("cpg-nested-n3")},
                 "podgroups": {"a": SCHEDULED, "b": SCHEDULED, "d": SCHEDULED},
                 "compositepodgroups": {"m": None, "r": None}})
    return [whole, min_met, fails, rack, quorum, nested]


# cpg-min-met: gang a's status (its member a0 fit, a1 did not) in the first attempt
A_MIN_MET = placed_none(1, "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining")
# cpg-fails: the child tried (its member fit nowhere), the CompositePodGroup, the child never tried
# (the PodGroupPostFilter's verdict appended to each result; the untried child's result shares the
# CompositePodGroup's status, so that one has it twice; the untried member got a copy before)
FAILS_TRIED = placed_none(1, f"minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, {NO_VICTIMS}")
FAILS_UNTRIED = placed_none(1, "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining")
FAILS_CPG = f"{FAILS_UNTRIED}, {NO_VICTIMS}, {NO_VICTIMS}"

SCENARIOS = scenarios()
TOTAL_NODES = sum(len(s.nodes) for s in SCENARIOS)
IDS = [s.name for s in SCENARIOS]

RUNS = Runs(SCENARIOS, gates=COMPOSITE_GATES, runtime_config=COMPOSITE_RUNTIME_CONFIG)


async def outcome_of(who: str) -> Run:
    return await RUNS.of(who)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_kube_scheduler_does_what_the_scenario_says(scenario):
    await RUNS.check_kube(scenario)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_pysched_schedules_the_tree_as_kube_scheduler(scenario):
    await RUNS.check_pysched(scenario)
