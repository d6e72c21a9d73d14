"""Coscheduling against scheduler-plugins' own scheduler (issue 38): the same PodGroups, nodes and
pods through scheduler-plugins' kube-scheduler (``hack/scheduler-plugins.sh``) and through
pysched, one after the other on one API server, compared on what a user sees - which pods were
bound, and the first FailedScheduling message of each pod that was not.

Scenarios (three nodes with one GPU each; ``permitWaitingTimeSeconds: 3`` and
``podGroupRejectPercentage: 100``, so only the Permit timeout ends a short group's wait):

* ``whole``: three members of a minMember-3 group: all bound;
* ``short``: the third member fits nowhere: the first two wait, the third fails with the filters'
  and preemption's verdict, the first waiter times out after the wait it asked for and its
  Unreserve rejects the second;
* ``orphan``: a member of a PodGroup that does not exist passes PreFilter and is rejected at
  Permit.

pysched runs with ``schedulerPluginsCompatible: true`` (upstream's backoff and queue ties).
"""

from __future__ import annotations

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


def profile(name: str, **extra_args) -> dict:
    return {"schedulerName": name,
            "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}},
            "pluginConfig": [{"name": "Coscheduling", "args": {**ARGS, **extra_args}}]}


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


SCENARIOS = {"whole": 3, "short": 2, "orphan": 1}   # scenario -> its GPU nodes (one GPU each)


def scenario_nodes() -> list[dict]:
    return [make_node(f"{scenario}-{i}", cpu="64", memory="256Gi", extended={GPU: "1"}, labels={"scenario": scenario})
            for scenario, n in SCENARIOS.items() for i in range(n)]


def scenario_objects(scheduler: str) -> tuple[list[dict], list[dict]]:
    """(PodGroups, pods) of every scenario, each in a namespace of its own and on its own nodes."""
    def pin(scenario, **extra):
        return {"node_selector": {"scenario": scenario, **extra}}
    groups = [podgroup("g", f"whole-{scheduler}", 3), podgroup("g", f"short-{scheduler}", 3)]
    pods = [member(f"m{i}", f"whole-{scheduler}", "g", scheduler, **pin("whole")) for i in range(3)]
    pods += [member(f"m{i}", f"short-{scheduler}", "g", scheduler, **pin("short")) for i in range(2)]
    pods += [member("m2", f"short-{scheduler}", "g", scheduler, **pin("short", zone="nowhere"))]
    pods += [member("lonely", f"orphan-{scheduler}", "nope", scheduler, **pin("orphan"))]
    return groups, pods


async def run_scenarios(admin, scheduler: str, start) -> dict[str, tuple[dict, dict]]:
    """Every object created before the scheduler starts (so no member is tried before its
    siblings exist); (bound pods, first failure messages) per scenario once each has settled."""
    groups, pods = scenario_objects(scheduler)
    for scenario in SCENARIOS:
        await ensure_namespace(admin, f"{scenario}-{scheduler}")
    for g in groups:
        await create_podgroup(admin, g)
    await create_pods(admin, pods)
    stop = await start()
    try:
        async def settled():
            whole = await bound(admin, f"whole-{scheduler}")
            short = await first_failures(admin, f"short-{scheduler}")
            orphan = await first_failures(admin, f"orphan-{scheduler}")
            return all(whole.values()) and len(short) == 3 and orphan
        await wait_for(settled, 60, what=f"{scheduler}: every scenario settled")
        out = {}
        for scenario in SCENARIOS:
            ns = f"{scenario}-{scheduler}"
            out[scenario] = ({k: bool(v) for k, v in (await bound(admin, ns)).items()}, await first_failures(admin, ns))
    finally:
        await stop()
    for p in pods:   # the GPUs go back for the next scheduler
        await force_delete(admin, p["metadata"]["namespace"], p["metadata"]["name"])

    async def gone():
        return not any([await list_pods(admin, f"{scenario}-{scheduler}") for scenario in SCENARIOS])
    await wait_for(gone, 60, what=f"{scheduler}'s pods gone")
    return out


async def test_coscheduling_outcomes_and_messages_match_scheduler_plugins(control_plane, admin, scheduler_factory):
    await install_crd(admin)
    await create_nodes(admin, scenario_nodes())

    start_upstream = upstream_starter(control_plane, profile(UPSTREAM))
    start_pysched = pysched_starter(scheduler_factory, profile("pysched", schedulerPluginsCompatible=True))
    theirs = await run_scenarios(admin, UPSTREAM, start_upstream)
    ours = await run_scenarios(admin, "pysched", start_pysched)

    def normalised(results: dict[str, tuple[dict, dict]], scheduler: str) -> dict:
        # the namespaces carry the scheduler's name; nothing else in a message may differ
        return {scenario: (placed, {pod: msg.replace(f"{scenario}-{scheduler}/", f"{scenario}/")
                                    for pod, msg in messages.items()})
                for scenario, (placed, messages) in results.items()}

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
    for scenario in SCENARIOS:
        assert ours_n[scenario] == theirs_n[scenario], scenario
