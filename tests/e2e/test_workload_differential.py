"""kube-scheduler 1.37.2 and pysched schedule Kubernetes' own pod groups alike (issue 54): the
``scheduling.k8s.io/v1beta1`` PodGroup, gang and basic policies, the pod-group scheduling cycle
(``pkg/scheduler/schedule_one_podgroup.go``), GangScheduling's PreEnqueue and PlacementFeasible,
topology placement (TopologyPlacementGenerator, PodGroupPodsCount and NodeResourcesFit's placement
score) and the group's validation.

Both schedulers run with ``--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=
true``, each alone on a fresh control plane (Kubernetes 1.37.2, the same gates and
``--runtime-config=scheduling.k8s.io/v1beta1=true``: ``workload_kit``; ``PYSCHED_BIN_DIR`` must
name its binaries, the module is skipped below 1.37) holding every scenario below, each in a
namespace and on nodes of its own. Compared per scenario: each pod's node, its first
FailedScheduling message (whole) and its PodScheduled condition's reason; each PodGroup's
``PodGroupInitiallyScheduled`` condition (status, reason, message). kube-scheduler's outcome is
checked against the one written in the scenario on every run; pysched must produce the same.

Nodes have 16Gi and 4, 5 or 6 CPUs; members ask for 3 CPUs and 100Mi, so a node holds one member and
the first member goes to the biggest free node (LeastAllocated and BalancedAllocation agree), the
next to the next biggest: every choice has one best answer, as every placement has.

The objects are created while the scheduler runs (``workload_kit.run_scenarios``): upstream orders
a group's members by priority, attempts, then the time each reached its queue, and the pods a
starting scheduler lists reach it in no fixed order.

With TopologyAwareWorkloadScheduling on, every group is placed through the placement algorithm: a
group without a topology constraint has one placement (every node), hence "0/1 placements" in its
messages, and a member that fails there counts every node of the cluster (``TOTAL_NODES``).

What a member of a group that was not placed is told (``submitPodGroupAlgorithmResult``; ``short``
shows all three): one that fit is told "pod group is unschedulable, " and the group's status (with
the PodGroupPostFilter's verdict appended, so "pod group is unschedulable" twice); one that failed
the filters, its own FitError (without a preemption part: PostFilter runs for the group, not the
pod); one never tried, the group's status as PlacementFeasible left it, without the PostFilter's
verdict. The PodGroup's condition carries the group's status with that verdict.

``min-below``'s group condition is masked (``regressed``): upstream may end it True or False.
"""

from __future__ import annotations

import pytest

from pysched_dev.devcluster import binaries_version

from .workload_kit import (
    OTHER_PROFILE,
    PROFILE,
    SCHEDULED,
    UNTRIED,
    Run,
    Runs,
    Scenario,
    condition,
    failed,
    member,
    node,
    on,
    podgroup,
    priority_class,
    rack_key,
)

pytestmark = pytest.mark.e2e

if binaries_version() < (1, 37):
    pytest.skip("needs a Kubernetes 1.37 control plane (PYSCHED_BIN_DIR)", allow_module_level=True)


def nodes(scenario: str, *cpus: str, rack: str | None = None) -> list[dict]:
    """Nodes ``<scenario>[-<rack>]-n1``... with these CPUs."""
    prefix = f"{scenario}-{rack}" if rack else scenario
    return [node(f"{prefix}-n{i}", scenario, cpu, rack=rack) for i, cpu in enumerate(cpus, 1)]


def members(scenario: str, group: str | None, count: int, **kw) -> list[dict]:
    return [member(f"m{i}", scenario, group, **kw) for i in range(count)]


def elsewhere(failing: int) -> str:
    """The FitError of a member of a group without a topology constraint that fits none of its
    scenario's ``failing`` nodes (for want of CPU): its placement is the whole cluster."""
    reasons = [f"{failing} Insufficient cpu",
               f"{TOTAL_NODES - failing} node(s) didn't match Pod's node affinity/selector"]
    return f"0/{TOTAL_NODES} nodes are available: {', '.join(sorted(reasons))}."


GROUP_UNSCHEDULABLE = "pod group is unschedulable"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
SCHEDULED_OR_REGRESSED = "True/Scheduled, or False/Unschedulable after the retry of a member that did not fit"


# 1 scheduled, 1 remaining: m0 placed, m1 failed, PlacementFeasible gives up before m2
SHORT = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"
# in either rack: m0 and m1 placed, m2 failed
NONE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
SAME = "all pods in a single pod group should have the same"
PRIORITY_MISMATCH = f"{SAME} priority as the pod group's priority, got 0 and 1000"
SCHEDULER_MISMATCH = f'{SAME} .spec.schedulerName set, got: "{OTHER_PROFILE}" and "{PROFILE}"'
PREEMPTION_MISMATCH = f"{SAME} preemption policy, got PreemptLowerPriority and Never"


def placed_none(placements: int, first: str) -> str:
    """The group's status when no placement holds it (``podGroupSchedulingPlacementAlgorithm``)."""
    return f"{GROUP_UNSCHEDULABLE}, 0/{placements} placements are available, first placement status: {first}"


def unschedulable(message: str) -> dict:
    return condition("False", "Unschedulable", message)


def refused(message: str) -> dict:
    """A member of a group ``validatePodGroup`` refused: the error, reason SchedulerError."""
    return failed(message, "SchedulerError")


def regressed(outcome: dict) -> dict:
    """``min-below``'s group condition, True/Scheduled or False/Unschedulable: upstream binds two
    members in one cycle and writes True, then retries the third at once (what is left of a group
    that was placed goes straight back to activeQ), alone: no member placed, "pod group is
    unschedulable". ``updatePodGroupCondition`` refuses to turn True into False, but it reads the
    PodGroup from the cycle's snapshot, which may not hold the True it wrote a few milliseconds
    before, and its patch then overwrites True with False. pysched may do either; True is what
    the API documents (the condition never reverts)."""
    cond = outcome["podgroups"].get("g")
    if cond in (SCHEDULED, condition("False", "Unschedulable", f"{GROUP_UNSCHEDULABLE}, {NO_VICTIMS}")):
        outcome["podgroups"]["g"] = SCHEDULED_OR_REGRESSED
    return outcome


# -- scenarios ----------------------------------------------------------------------------------

def scenarios() -> list[Scenario]:
    return [
        Scenario("whole", "gang minCount 3, three members, room for all: all bound, the group Scheduled",
                 nodes("whole", "4", "5", "6"),
                 [podgroup("g", "whole", 3), *members("whole", "g", 3)],
                 lambda: {"pods": {"m0": on("whole-n3"), "m1": on("whole-n2"), "m2": on("whole-n1")},
                          "podgroups": {"g": SCHEDULED}}),
        Scenario("short", "gang minCount 3, the second member fits nowhere: m0 was placed, m1 failed the "
                          "filters, m2 was never tried (PlacementFeasible gave up after m1); three messages",
                 nodes("short", "4", "5"),
                 [podgroup("g", "short", 3), member("m0", "short", "g"), member("m1", "short", "g", cpu="8"),
                  member("m2", "short", "g")],
                 lambda: {"pods": {"m0": failed(f"{GROUP_UNSCHEDULABLE}, {placed_none(1, SHORT)}, {NO_VICTIMS}"),
                                   "m1": failed(elsewhere(2)),
                                   "m2": failed(placed_none(1, SHORT))},
                          "podgroups": {"g": unschedulable(f"{placed_none(1, SHORT)}, {NO_VICTIMS}")}}),
        Scenario("waiting", "gang minCount 3 with two members: PreEnqueue keeps them out of the queue (no "
                            "Event, no condition); the third arrives and all bind",
                 nodes("waiting", "4", "5", "6"),
                 [podgroup("g", "waiting", 3), *members("waiting", "g", 2)],
                 then=[member("m2", "waiting", "g")],
                 first={"pods": {"m0": UNTRIED, "m1": UNTRIED}, "podgroups": {"g": None}},
                 expected=lambda: {"pods": {"m0": on("waiting-n3"), "m1": on("waiting-n2"), "m2": on("waiting-n1")},
                                   "podgroups": {"g": SCHEDULED}}),
        Scenario("missing-group", "members of a PodGroup that does not exist wait untried; the group is "
                                  "created and they bind",
                 nodes("missing-group", "4", "5"),
                 members("missing-group", "g", 2),
                 then=[podgroup("g", "missing-group", 2)],
                 first={"pods": {"m0": UNTRIED, "m1": UNTRIED}, "podgroups": {}},
                 expected=lambda: {"pods": {"m0": on("missing-group-n2"), "m1": on("missing-group-n1")},
                                   "podgroups": {"g": SCHEDULED}}),
        Scenario("basic", "basic policy: no minimum, the members are placed as they come",
                 nodes("basic", "4", "5"),
                 [podgroup("g", "basic"), *members("basic", "g", 2)],
                 lambda: {"pods": {"m0": on("basic-n2"), "m1": on("basic-n1")}, "podgroups": {"g": SCHEDULED}}),
        Scenario("topology", "gang minCount 3 in one rack: rack ra holds three members, rb two: all in ra",
                 [*nodes("topology", "4", "5", "6", rack="ra"), *nodes("topology", "4", "5", rack="rb")],
                 [podgroup("g", "topology", 3, topology=rack_key("topology")), *members("topology", "g", 3)],
                 lambda: {"pods": {"m0": on("topology-ra-n3"), "m1": on("topology-ra-n2"),
                                   "m2": on("topology-ra-n1")},
                          "podgroups": {"g": SCHEDULED}}),
        Scenario("topology-best", "gang minCount 2 in one rack: both racks hold it (PodGroupPodsCount ties "
                                  "at 100), NodeResourcesFit's placement score (MostAllocated over the rack) "
                                  "prefers ra, fuller with the 4-CPU pod already on ra-n3: cpu (6+4)/13 -> 76, "
                                  "memory 0, 38 against rb's 6/9 -> 66, 33",
                 [*nodes("topology-best", "4", "5", "4", rack="ra"), *nodes("topology-best", "4", "5", rack="rb")],
                 [member("filler", "topology-best", None, cpu="4", scheduler="nobody",
                         node_name="topology-best-ra-n3"),
                  podgroup("g", "topology-best", 2, topology=rack_key("topology-best")),
                  *members("topology-best", "g", 2)],
                 lambda: {"pods": {"filler": {"node": "topology-best-ra-n3", "failed": None, "condition": None},
                                   "m0": on("topology-best-ra-n2"), "m1": on("topology-best-ra-n1")},
                          "podgroups": {"g": SCHEDULED}}),
        Scenario("topology-none", "gang minCount 3 in one rack, two racks of two nodes: no placement holds "
                                  "it. The message reports the first placement (Go map order), but the "
                                  "racks are alike, so it reads the same whichever it is",
                 [*nodes("topology-none", "4", "5", rack="ra"), *nodes("topology-none", "4", "5", rack="rb")],
                 [podgroup("g", "topology-none", 3, topology=rack_key("topology-none")),
                  *members("topology-none", "g", 3)],
                 lambda: {"pods": {"m0": failed(f"{GROUP_UNSCHEDULABLE}, {placed_none(2, NONE)}, {NO_VICTIMS}"),
                                   "m1": failed(f"{GROUP_UNSCHEDULABLE}, {placed_none(2, NONE)}, {NO_VICTIMS}"),
                                   "m2": failed("0/2 nodes are available: 2 Insufficient cpu.")},
                          "podgroups": {"g": unschedulable(f"{placed_none(2, NONE)}, {NO_VICTIMS}")}}),
        Scenario("min-below", "gang minCount 2 with three members and room for two: two bound, the third "
                              "fails the filters; the group Scheduled, or not (``regressed``)",
                 nodes("min-below", "4", "5"),
                 [podgroup("g", "min-below", 2), *members("min-below", "g", 3)],
                 lambda: {"pods": {"m0": on("min-below-n2"), "m1": on("min-below-n1"), "m2": failed(elsewhere(2))},
                          "podgroups": {"g": SCHEDULED_OR_REGRESSED}},
                 mask=regressed),
        Scenario("priority-mismatch", "a member whose priority is not its group's: the group is refused "
                                      "before any member is tried (validatePodGroup), SchedulerError",
                 nodes("priority-mismatch", "4", "5"),
                 [podgroup("g", "priority-mismatch", 2, priority_class="wl-high"),
                  member("m0", "priority-mismatch", "g", priority_class="wl-high"),
                  member("m1", "priority-mismatch", "g")],
                 cluster_objects=[priority_class("wl-high", 1000)],
                 expected=lambda: {"pods": {"m0": refused(PRIORITY_MISMATCH),
                                            "m1": refused(PRIORITY_MISMATCH)},
                                   "podgroups": {"g": condition("False", "SchedulerError", PRIORITY_MISMATCH)}}),
        Scenario("scheduler-mismatch", "members naming two profiles of one scheduler: refused, SchedulerError",
                 nodes("scheduler-mismatch", "4", "5"),
                 [podgroup("g", "scheduler-mismatch", 2), member("m0", "scheduler-mismatch", "g"),
                  member("m1", "scheduler-mismatch", "g", scheduler=OTHER_PROFILE)],
                 lambda: {"pods": {"m0": refused(SCHEDULER_MISMATCH), "m1": refused(SCHEDULER_MISMATCH)},
                          "podgroups": {"g": condition("False", "SchedulerError", SCHEDULER_MISMATCH)}}),
        Scenario("preemption-mismatch", "members with different preemption policies (PodGroupPreemptionPolicy "
                                        "off: they must agree among themselves): refused, SchedulerError",
                 nodes("preemption-mismatch", "4", "5"),
                 [podgroup("g", "preemption-mismatch", 2),
                  member("m0", "preemption-mismatch", "g", priority_class="wl-never"),
                  member("m1", "preemption-mismatch", "g")],
                 cluster_objects=[priority_class("wl-never", 0, "Never")],
                 expected=lambda: {"pods": {"m0": refused(PREEMPTION_MISMATCH),
                                            "m1": refused(PREEMPTION_MISMATCH)},
                                   "podgroups": {"g": condition("False", "SchedulerError", PREEMPTION_MISMATCH)}}),
    ]


SCENARIOS = scenarios()
TOTAL_NODES = sum(len(s.nodes) for s in SCENARIOS)
IDS = [s.name for s in SCENARIOS]

RUNS = Runs(SCENARIOS)


async def outcome_of(who: str) -> Run:
    return await RUNS.of(who)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_kube_scheduler_does_what_the_scenario_says(scenario):
    await RUNS.check_kube(scenario)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
async def test_pysched_schedules_the_group_as_kube_scheduler(scenario):
    await RUNS.check_pysched(scenario)


async def test_pysched_writes_one_event_per_group_attempt_on_the_podgroup():
    """pysched's addition (kube-scheduler writes no Event about a PodGroup): each attempt of a group
    is one Event regarding its PodGroup - Scheduled, or FailedScheduling with the group's reason."""
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched")
    assert all(not evs for evs in kube.group_events.values()), kube.group_events
    (whole,) = ours.group_events["whole"].values()
    assert whole[-1] == ("Normal", "Scheduled", "placed 3 pod(s)"), whole
    # "waiting": two of three pods for a while, then the third - why it waited, then that it ran
    (waiting,) = ours.group_events["waiting"].values()
    assert waiting[0] == ("Normal", "WaitingForMembers",
                          "waiting for minCount pods: fewer than 3 of the group's pods exist"), waiting
    assert waiting[-1] == ("Normal", "Scheduled", "placed 3 pod(s)"), waiting
    (short,) = ours.group_events["short"].values()
    condition = ours.outcomes["short"]["podgroups"]
    (message,) = [c["message"] for c in condition.values()]
    failed = [e for e in short if e[1] == "FailedScheduling"]
    assert failed[0][0] == "Warning" and failed[0][2].startswith(message), short
    assert "fits nowhere: 0/34 nodes are available" in failed[0][2], short
