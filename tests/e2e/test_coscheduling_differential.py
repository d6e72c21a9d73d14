"""Coscheduling against scheduler-plugins' own scheduler (issue 38): the same PodGroups, nodes and
pods through scheduler-plugins' kube-scheduler (``hack/scheduler-plugins.sh``) and through
pysched, one after the other on one API server, compared on what a user sees - which pods were
bound, and the first FailedScheduling message of each pod that was not.

Scenarios (nodes with one GPU each, every scenario on nodes and in a namespace of its own; every
object created before the scheduler starts). The first test uses ``permitWaitingTimeSeconds: 3``
and ``podGroupRejectPercentage: 100``, so only the Permit timeout ends a short group's wait:

* ``whole``: three members of a minMember-3 group: all bound;
* ``short``: the third member fits nowhere: the first two wait, the third fails with the filters'
  and preemption's verdict, the first waiter times out after the wait it asked for and its
  Unreserve rejects the second;
* ``orphan``: a member of a PodGroup that does not exist passes PreFilter and is rejected at
  Permit.

Each further test has one scenario and a control plane of its own:

* ``compete`` (same arguments): two minMember-2 groups for two GPUs; the older PodGroup wins
  upstream. pysched differs twice - see that test's docstring;
* ``reject`` (Coscheduling's defaults: ``podGroupRejectPercentage`` 10): ``short`` again, but the
  third member's PostFilter rejects the group at once, with upstream's message, and the two
  waiting members fail with ``optimistic rejection in PostFilter``.

pysched runs with ``schedulerPluginsCompatible: true`` (upstream's backoff and queue ties).
"""

from __future__ import annotations

import asyncio

import pytest

from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, list_pods, make_node, make_pod

from .conftest import wait_for
from .podgroup_kit import LABEL, create_podgroup, install_crd, podgroup
from .preemption_kit import force_delete
from .scheduler_plugins_kit import pysched_starter, upstream_starter

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"
ARGS = {"permitWaitingTimeSeconds": 3, "podGroupRejectPercentage": 100}
UPSTREAM = "sp-scheduler"


def profile(name: str, args: dict | None = None, **extra_args) -> dict:
    return {"schedulerName": name,
            "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}},
            "pluginConfig": [{"name": "Coscheduling", "args": {**(ARGS if args is None else args), **extra_args}}]}


def member(name: str, ns: str, group: str, scheduler: str, **kw) -> dict:
    return make_pod(name, namespace=ns, scheduler=scheduler, labels={LABEL: group}, cpu="100m", memory="100Mi",
                    extended={GPU: "1"}, **kw)


async def first_failures(admin, ns: str) -> dict[str, str]:
    """Each pod's first FailedScheduling message (the Event's note), by pod name."""
    events, _ = await admin.list_all(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
    out: dict[str, tuple[str, str]] = {}
    for e in events:
        if e.get("reason") != "FailedScheduling":
            continue
        name = e["regarding"]["name"]
        when = e.get("eventTime") or e["metadata"]["creationTimestamp"]
        if name not in out or when < out[name][0]:
            out[name] = (when, e.get("note") or "")
    return {k: v[1] for k, v in out.items()}


async def bound(admin, ns: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, ns)}


# scenario -> its GPU nodes (one GPU each); each test runs one of these sets
MAIN = {"whole": 3, "short": 2, "orphan": 1}
COMPETE = {"compete": 2}
REJECT = {"reject": 2}
SECOND = 1.1   # creationTimestamps have whole seconds: objects this far apart differ in them


def scenario_nodes(scenarios: dict[str, int]) -> list[dict]:
    return [make_node(f"{scenario}-{i}", cpu="64", memory="256Gi", extended={GPU: "1"}, labels={"scenario": scenario})
            for scenario, n in scenarios.items() for i in range(n)]


def scenario_objects(scheduler: str, scenarios: dict[str, int]) -> list[tuple[list[dict], list[dict]]]:
    """(PodGroups, pods) batches of the scenarios, created in order ``SECOND`` apart; each scenario in
    a namespace of its own and on its own nodes."""
    def pin(scenario, **extra):
        return {"node_selector": {"scenario": scenario, **extra}}

    def ns(scenario):
        return f"{scenario}-{scheduler}"
    first: tuple[list[dict], list[dict]] = ([], [])
    batches = [first]
    if "whole" in scenarios:
        first[0].append(podgroup("g", ns("whole"), 3))
        first[1].extend(member(f"m{i}", ns("whole"), "g", scheduler, **pin("whole")) for i in range(3))
    for short in ("short", "reject"):        # the third member fits nowhere
        if short in scenarios:
            first[0].append(podgroup("g", ns(short), 3))
            first[1].extend(member(f"m{i}", ns(short), "g", scheduler, **pin(short)) for i in range(2))
            first[1].append(member("m2", ns(short), "g", scheduler, **pin(short, zone="nowhere")))
    if "orphan" in scenarios:
        first[1].append(member("lonely", ns("orphan"), "nope", scheduler, **pin("orphan")))
    if "compete" in scenarios:
        # Two minMember-2 groups for two GPUs: "old" (created a second before "young") must win,
        # though young's pods are the older ones and come first by name too - upstream's queue
        # orders by the PodGroup's creation time.
        first[0].append(podgroup("old", ns("compete"), 2))
        batches.append(([podgroup("young", ns("compete"), 2)],
                        [member(f"a{i}", ns("compete"), "young", scheduler, **pin("compete")) for i in range(2)]))
        batches.append(([], [member(f"b{i}", ns("compete"), "old", scheduler, **pin("compete")) for i in range(2)]))
    return batches


def scenario_settled(scenario: str, placed: dict[str, str | None], failures: dict[str, str]) -> bool:
    """Whether the scenario reached the outcome it is compared on."""
    if scenario == "whole":
        return len(placed) == 3 and all(placed.values())
    if scenario in ("short", "reject"):
        return len(failures) == 3
    if scenario == "orphan":
        return bool(failures)
    if scenario == "compete":
        return sum(map(bool, placed.values())) == 2 and len(failures) >= 2
    raise ValueError(scenario)


async def run_scenarios(admin, scheduler: str, start, scenarios: dict[str, int] = MAIN) -> dict[str, tuple[dict, dict]]:
    """Every object created before the scheduler starts (so no member is tried before its
    siblings exist); (bound pods, first failure messages) per scenario once each has settled."""
    batches = scenario_objects(scheduler, scenarios)
    for scenario in scenarios:
        await ensure_namespace(admin, f"{scenario}-{scheduler}")
    for i, (groups, pods) in enumerate(batches):
        if i:
            await asyncio.sleep(SECOND)
        for g in groups:
            await create_podgroup(admin, g)
        await create_pods(admin, pods)
    stop = await start()
    try:
        async def outcome(scenario):
            ns = f"{scenario}-{scheduler}"
            return await bound(admin, ns), await first_failures(admin, ns)

        async def settled():
            for scenario in scenarios:
                if not scenario_settled(scenario, *await outcome(scenario)):
                    return False
            return True
        await wait_for(settled, 60, what=f"{scheduler}: every scenario settled")
        out = {}
        for scenario in scenarios:
            placed, failures = await outcome(scenario)
            out[scenario] = ({k: bool(v) for k, v in placed.items()}, failures)
    finally:
        await stop()
    for _, pods in batches:   # the GPUs go back for the next scheduler
        for p in pods:
            await force_delete(admin, p["metadata"]["namespace"], p["metadata"]["name"])

    async def gone():
        return not any([await list_pods(admin, f"{scenario}-{scheduler}") for scenario in scenarios])
    await wait_for(gone, 60, what=f"{scheduler}'s pods gone")
    return out


def normalised(results: dict[str, tuple[dict, dict]], scheduler: str) -> dict:
    # the namespaces carry the scheduler's name; nothing else in a message may differ (pysched
    # follows kube-scheduler 1.35 here, as scheduler-plugins' scheduler is built on it:
    # ``scheduler_plugins_kit.ORACLE_RELEASE``)
    return {scenario: (placed, {pod: msg.replace(f"{scenario}-{scheduler}/", f"{scenario}/")
                                for pod, msg in messages.items()})
            for scenario, (placed, messages) in results.items()}


async def test_coscheduling_outcomes_and_messages_match_scheduler_plugins(control_plane, admin, scheduler_factory):
    await install_crd(admin)
    await create_nodes(admin, scenario_nodes(MAIN))

    start_upstream = upstream_starter(control_plane, profile(UPSTREAM))
    start_pysched = pysched_starter(scheduler_factory, profile("pysched", schedulerPluginsCompatible=True))
    theirs = await run_scenarios(admin, UPSTREAM, start_upstream)
    ours = await run_scenarios(admin, "pysched", start_pysched)

    theirs_n, ours_n = normalised(theirs, UPSTREAM), normalised(ours, "pysched")
    assert theirs_n["whole"] == ({"m0": True, "m1": True, "m2": True}, {})
    assert theirs_n["orphan"][1] == {"lonely": "0/1 nodes are available: 1 PodGroup not found."}
    timed_out = "0/1 nodes are available: 1 rejected due to timeout after waiting 3s at plugin Coscheduling."
    released = "0/1 nodes are available: 1 rejection in Unreserve."
    # The two waiters' timers end a moment apart (each 3 s after its own Permit): the first to end
    # reports the timeout, and its Unreserve rejects the other - unless the other's timer ended
    # first or meanwhile. Whichever waiter it was, in both schedulers.
    for results in (theirs_n, ours_n):
        waiters = [results["short"][1].pop(m) for m in ("m0", "m1")]
        assert timed_out in waiters and set(waiters) <= {timed_out, released}, waiters
    print("scheduler-plugins:", theirs_n)   # shown on a failure, beside pysched's in the assertion
    for scenario in MAIN:
        assert ours_n[scenario] == theirs_n[scenario], scenario


async def test_coscheduling_default_reject_percentage_matches_scheduler_plugins(control_plane, admin,
                                                                                 scheduler_factory):
    """``reject``: the ``short`` scenario under Coscheduling's defaults (``podGroupRejectPercentage``
    10, ``permitWaitingTimeSeconds`` 60): when the third member fails, a third of the group (more
    than 10 %) is missing, so its PostFilter rejects the two waiting members at once and says so."""
    await install_crd(admin)
    await create_nodes(admin, scenario_nodes(REJECT))

    start_upstream = upstream_starter(control_plane, profile(UPSTREAM, {}))
    start_pysched = pysched_starter(scheduler_factory, profile("pysched", {}, schedulerPluginsCompatible=True))
    theirs = normalised(await run_scenarios(admin, UPSTREAM, start_upstream, REJECT), UPSTREAM)
    ours = normalised(await run_scenarios(admin, "pysched", start_pysched, REJECT), "pysched")
    print("scheduler-plugins:", theirs)
    waiter = "0/1 nodes are available: 1 optimistic rejection in PostFilter."
    assert theirs["reject"] == ({"m0": False, "m1": False, "m2": False}, {
        "m0": waiter, "m1": waiter,
        "m2": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
              "no new claims to deallocate, "
              "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling., "
              "PodGroup reject/g gets rejected due to Pod m2 is unschedulable even after PostFilter"})
    assert ours == theirs


async def test_coscheduling_older_group_wins_like_scheduler_plugins(control_plane, admin, scheduler_factory):
    """``compete``: two minMember-2 groups, "old" created a second before "young", for two nodes with
    one GPU each; young's pods are a second older than old's and sort first by name, and every pod
    exists before the scheduler starts. Upstream's QueueSort orders members by their PodGroup's
    creationTimestamp, so old's pods go first and old wins; young's first failures follow.

    pysched agrees on the winner because it orders the queue again once every informer has listed
    (``SchedulingQueue.resort``): the pods are listed, and queued, before the PodGroups whose
    creation time orders them. One difference, pysched's:

    * the losers' message: the filters' verdict is the same, but pysched's PreemptionGate refuses
      preemption for a member whose quorum is not yet placed (``preemption: not eligible: PodGroup
      compete/<group> has 0 of minMember 2 members assumed or bound; a gang member preempts only to
      complete its group``), where upstream's DefaultPreemption looks and finds nothing
      (``preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.``).
    """
    await install_crd(admin)
    await create_nodes(admin, scenario_nodes(COMPETE))

    start_upstream = upstream_starter(control_plane, profile(UPSTREAM))
    start_pysched = pysched_starter(scheduler_factory, profile("pysched", schedulerPluginsCompatible=True))
    theirs = normalised(await run_scenarios(admin, UPSTREAM, start_upstream, COMPETE), UPSTREAM)
    ours = normalised(await run_scenarios(admin, "pysched", start_pysched, COMPETE), "pysched")
    print("scheduler-plugins:", theirs)
    print("pysched:", ours)
    verdict = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: "
    assert theirs["compete"] == ({"a0": False, "a1": False, "b0": True, "b1": True},   # the older group won
                                 dict.fromkeys(("a0", "a1"), verdict + "0/2 nodes are available: 2 No preemption "
                                               "victims found for incoming pod."))
    placed, messages = ours["compete"]
    assert placed == theirs["compete"][0]
    assert messages == dict.fromkeys(("a0", "a1"), verdict + "not eligible: PodGroup compete/young has 0 of "
                                     "minMember 2 members assumed or bound; a gang member preempts only to "
                                     "complete its group"), messages
