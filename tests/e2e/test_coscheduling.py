"""Gang scheduling against a real API server: issue 17's checks for the Coscheduling plugin.

* two 4-GPU jobs on 6 GPUs: one runs whole, the other waits with nothing bound or reserved past its
  timeout, and runs whole once the first job's pods are gone;
* a member whose node is deleted while it waits at Permit releases its whole group: nothing binds
  to the deleted node, nothing binds while the group is incomplete, and the group binds together
  once a replacement node appears;
* 50 groups of 8 arriving at once onto room for 30: 30 complete groups, none partial;
* the scheduler started without the PodGroup CRD schedules a group once the CRD is installed.

Nodes have no kubelet: extended resources are set in node status, and "finished" pods are deleted
with ``gracePeriodSeconds: 0`` as a kubelet would. Needs the Coscheduling plugin (issue 17).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .conftest import scheduler_config, wait_for
from .podgroup_kit import LABEL, create_podgroup, install_crd, podgroup
from .preemption_kit import force_delete

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"


def gang_config(**args) -> dict:
    """kube-scheduler's default plugins with Coscheduling as QueueSort and at every other point."""
    profile: dict = {"schedulerName": "pysched", "plugins": {
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}
    if args:
        profile["pluginConfig"] = [{"name": "Coscheduling", "args": args}]
    return scheduler_config(profiles=[profile])


def gpu_node(name: str, gpus: int, **kw) -> dict:
    return make_node(name, cpu="64", memory="256Gi", extended={GPU: str(gpus)}, **kw)


def gpu_member(name: str, group: str, **kw) -> dict:
    return make_pod(name, labels={LABEL: group}, cpu="100m", memory="100Mi", extended={GPU: "1"}, **kw)


async def placements(admin) -> dict[str, dict[str, str | None]]:
    """group -> {member name: node name or None}, for every pod of a group in ``default``."""
    out: dict[str, dict[str, str | None]] = {}
    for p in await list_pods(admin, "default", labelSelector=LABEL):
        out.setdefault(p["metadata"]["labels"][LABEL], {})[p["metadata"]["name"]] = p["spec"].get("nodeName")
    return out


def bound_count(members: dict[str, str | None]) -> int:
    return sum(1 for n in members.values() if n)


async def metric(sched, name: str, **labels) -> float:
    try:
        got = await sched.metric(name, **labels)
    except OSError as exc:     # aiohttp's connection errors: the scheduler stopped serving
        errors = [line[:600] for line in sched.log().splitlines() if "level=error" in line]
        raise AssertionError(f"the scheduler does not answer /metrics ({exc}); exited: {sched.proc.poll()}; "
                             f"its last errors:\n" + "\n".join(errors[-3:])) from exc
    return 0.0 if got is None else got


async def reservations(sched) -> tuple[float, float]:
    """(groups waiting at Permit, pods assumed but not bound) as the scheduler reports them."""
    return (await metric(sched, "pysched_podgroups_waiting"),
            await metric(sched, "scheduler_cache_size", type="assumed_pods"))


async def test_two_gpu_jobs_one_runs_whole_other_waits_with_nothing_held(admin, scheduler_factory):
    timeout = 4
    await install_crd(admin)
    await create_nodes(admin, [gpu_node(f"gpu{i}", 2) for i in range(3)])          # 6 GPUs
    for job in ("job-a", "job-b"):
        await create_podgroup(admin, podgroup(job, "default", 4, scheduleTimeoutSeconds=timeout))
    sched = scheduler_factory(gang_config()).start()
    await sched.wait_log("caches synced", 60)
    await create_pods(admin, [gpu_member(f"{job}-{i}", job) for job in ("job-a", "job-b") for i in range(4)])

    async def one_whole():
        got = await placements(admin)
        whole = [g for g, m in got.items() if bound_count(m) == 4]
        return whole[0] if len(whole) == 1 else None
    winner = await wait_for(one_whole, 60, what="one job with all four members bound")
    loser = "job-b" if winner == "job-a" else "job-a"

    # For several timeouts: the other job never has a member bound, and whatever it reserves
    # (members assumed and held at Permit) is given back within its scheduleTimeoutSeconds. It
    # waits rather than spins: with nothing changing in the cluster its 4 pods back off, so their
    # attempts stay few (a spinning gang makes thousands and slows every other pod down).
    attempts_before = await _failed_attempts(sched)
    held_since: float | None = None
    longest = 0.0
    end = time.monotonic() + 3 * timeout
    while time.monotonic() < end:
        got = await placements(admin)
        assert bound_count(got[loser]) == 0, f"a member of the waiting job was bound: {got[loser]}"
        assert bound_count(got[winner]) == 4, got[winner]
        waiting, assumed = await reservations(sched)
        now = time.monotonic()
        if waiting or assumed:
            held_since = held_since if held_since is not None else now
            longest = max(longest, now - held_since)
        else:
            held_since = None
        await asyncio.sleep(0.2)
    attempts = await _failed_attempts(sched) - attempts_before
    assert attempts <= 100, f"the waiting job made {attempts:.0f} scheduling attempts in {3 * timeout}s"
    # the cache metrics are refreshed every second: allow that on top of the timeout
    assert longest <= timeout + 2, f"a partial group held its reservations for {longest:.1f}s (timeout {timeout}s)"

    async def nothing_reserved():
        waiting, assumed = await reservations(sched)
        pending = sum([await metric(sched, "scheduler_pending_pods", queue=q)
                       for q in ("active", "backoff", "unschedulable", "gated")])
        return (waiting, assumed, pending) == (0, 0, 4)
    await wait_for(nothing_reserved, 30, what="the waiting job's 4 pods pending, no group waiting, nothing assumed")
    assert bound_count((await placements(admin))[loser]) == 0

    for i in range(4):                         # the first job finishes: its pods go
        await force_delete(admin, "default", f"{winner}-{i}")

    async def loser_whole():
        got = await placements(admin)
        return got if winner not in got and bound_count(got[loser]) == 4 else None
    got = await wait_for(loser_whole, 60, what=f"{loser} runs with all four members")
    assert all(n.startswith("gpu") for n in got[loser].values()), got
    assert await metric(sched, "pysched_podgroups_admitted_total") >= 2
    assert sched.terminate() == 0, sched.log()[-3000:]


async def _failed_attempts(sched) -> float:
    return sum([await metric(sched, "scheduler_schedule_attempts_total", result=r, profile="pysched")
                for r in ("unschedulable", "error")])


async def test_member_whose_node_is_deleted_releases_the_whole_group(admin, scheduler_factory):
    await install_crd(admin)
    # m0 and m1 fit only on "old" (pool a); m2 only on a pool-b node, which does not exist yet, so the
    # first two wait at Permit for it. podGroupRejectPercentage 100 keeps them waiting while m2 is
    # unschedulable (the PostFilter rejection is not what this test is about); the timeout is long.
    await create_nodes(admin, [make_node("old", cpu="4", labels={"pool": "a"})])
    await create_podgroup(admin, podgroup("g", "default", 3, scheduleTimeoutSeconds=50))
    # Members scheduled one by one (scheduler-plugins' way): in the pod-group cycle m0 and m1 would
    # never wait at Permit for m2.
    sched = scheduler_factory(gang_config(podGroupRejectPercentage=100, schedulerPluginsCompatible=True)).start()
    await sched.wait_log("caches synced", 60)
    await create_pods(admin, [make_pod(f"m{i}", labels={LABEL: "g"}, cpu="1", node_selector={"pool": "a"})
                              for i in range(2)]
                      + [make_pod("m2", labels={LABEL: "g"}, cpu="1", node_selector={"pool": "b"})])

    async def two_waiting():
        return await reservations(sched) == (1, 2)
    await wait_for(two_waiting, 30, what="m0 and m1 assumed on 'old' and held at Permit")
    assert bound_count((await placements(admin))["g"]) == 0

    await admin.request("DELETE", "/api/v1/nodes/old", rate_limit=False)
    await wait_for(lambda: _node_count(sched, 0), 30, what="the scheduler saw 'old' deleted")
    # m2 now fits ("b1" has room for it alone); m0 and m1 fit nowhere: the group is incomplete and
    # no member may bind - not m2 alone, and not m0/m1 to the deleted node.
    await create_nodes(admin, [make_node("b1", cpu="1", labels={"pool": "b"})])
    end = time.monotonic() + 8
    while time.monotonic() < end:
        got = (await placements(admin))["g"]
        assert bound_count(got) == 0, f"a member bound while its group cannot be complete: {got}"
        await asyncio.sleep(0.2)

    await create_nodes(admin, [make_node("a2", cpu="4", labels={"pool": "a"})])

    async def whole():
        got = (await placements(admin))["g"]
        return got if bound_count(got) == 3 else None
    got = await wait_for(whole, 60, what="the group bound once a replacement node appeared")
    assert got == {"m0": "a2", "m1": "a2", "m2": "b1"}, got

    async def released():     # the binds' informer updates turn the last assumptions into bound pods
        return await reservations(sched) == (0, 0)
    await wait_for(released, 15, what="no reservation left once every member is bound")


async def _node_count(sched, n: int) -> bool:
    return await metric(sched, "scheduler_cache_size", type="nodes") == n


async def test_fifty_gangs_onto_room_for_thirty_place_only_whole_groups(admin, scheduler_factory):
    groups, size, nodes = 50, 8, 30
    await install_crd(admin)
    await create_nodes(admin, [gpu_node(f"n{i:02d}", size) for i in range(nodes)])     # 240 GPUs
    names = [f"g{i:02d}" for i in range(groups)]
    await asyncio.gather(*(create_podgroup(admin, podgroup(g, "default", size, scheduleTimeoutSeconds=5))
                           for g in names))
    sched = scheduler_factory(gang_config()).start()
    await sched.wait_log("caches synced", 60)
    await create_pods(admin, [gpu_member(f"{g}-{i}", g) for g in names for i in range(size)])

    # Settled: the bound count has not moved for 5 s, nothing is assumed or waiting at Permit,
    # and no pod is in the active queue.
    last: dict = {"bound": -1, "since": time.monotonic()}

    async def settled():
        got = await placements(admin)
        bound = sum(bound_count(m) for m in got.values())
        now = time.monotonic()
        if bound != last["bound"]:
            last.update(bound=bound, since=now)
            return None
        quiet = (await reservations(sched) == (0, 0)
                 and await metric(sched, "scheduler_pending_pods", queue="active") == 0)
        return got if quiet and now - last["since"] >= 5 else None
    got = await wait_for(settled, 120, interval=0.5, what="the scheduler settled")

    counts = {g: bound_count(got.get(g, {})) for g in names}
    partial = {g: c for g, c in counts.items() if 0 < c < size}
    whole = [g for g, c in counts.items() if c == size]
    assert not partial, f"partially placed groups: {partial}"
    assert len(whole) == nodes, f"{len(whole)} whole groups placed, expected {nodes}: {counts}"

    # Every member left over is held in a queue. A retried gang cycles through the active queue and
    # a scheduling cycle, where for a moment it is counted nowhere: read until all are counted.
    async def all_held():
        held = [await metric(sched, "scheduler_pending_pods", queue=q) for q in ("active", "backoff", "unschedulable")]
        return sum(held) == (groups - nodes) * size
    await wait_for(all_held, 30, interval=0.2, what=f"{(groups - nodes) * size} members held in the queues")


async def test_scheduler_started_without_the_crd_schedules_groups_once_installed(admin, scheduler_factory):
    # No flag sets Options.optional_crd_poll_seconds: the scheduler LISTs again at its default (10 s).
    await create_nodes(admin, [make_node(f"n{i}", cpu="2") for i in range(2)])
    sched = scheduler_factory(gang_config()).start()
    await sched.wait_log("caches synced", 60)
    await sched.wait_log("list refused; treating the resource as empty and retrying", 5)
    # Members first (Kubeflow does not wait for its PodGroup): PreFilter holds them back.
    await create_pods(admin, [make_pod(f"w{i}", labels={LABEL: "late"}, cpu="1") for i in range(3)])
    await asyncio.sleep(2)
    assert bound_count((await placements(admin))["late"]) == 0

    await install_crd(admin)
    await create_podgroup(admin, podgroup("late", "default", 3))
    await sched.wait_log("list accepted; following the resource", 30)

    async def whole():
        got = (await placements(admin))["late"]
        return got if bound_count(got) == 3 else None
    await wait_for(whole, 45, what="the group scheduled once its CRD and PodGroup appeared")
    assert sched.terminate() == 0, sched.log()[-3000:]   # the PodGroup informer stops with the scheduler



async def test_a_storm_of_failed_gang_attempts_starves_no_bind_and_leaves_no_gang_part_bound(admin, scheduler_factory):
    """schedulerPluginsCompatible (no group backoff) with a client limited to qps 20, burst 40
    (kube-scheduler's default is 50/100): three 4-GPU jobs on 6 GPUs. One runs; the other two grab and release the
    GPUs left, each release requeueing the other, thousands of failed attempts a minute. Every
    failed attempt wants a PodScheduled=False patch: sent as they came, they ran the client's rate
    limiter thousands of tokens into debt, and binds behind them failed ("client rate limiter: a
    token is 30s away"), leaving gangs part bound. Patches are coalesced per pod and wait for spare
    tokens: when the running job ends mid-storm, a waiting job binds whole at once, no request fails
    on the rate limiter, and the patches written are far fewer than the failed attempts."""
    await install_crd(admin)
    await create_nodes(admin, [gpu_node(f"gpu{i}", 2) for i in range(3)])          # 6 GPUs
    jobs = ("job-a", "job-b", "job-c")
    for job in jobs:
        await create_podgroup(admin, podgroup(job, "default", 4, scheduleTimeoutSeconds=2))
    cfg = gang_config(schedulerPluginsCompatible=True)
    cfg["clientConnection"] = {"qps": 20, "burst": 40}
    sched = scheduler_factory(cfg).start()
    await sched.wait_log("caches synced", 60)
    await create_pods(admin, [gpu_member(f"{job}-{i}", job) for job in jobs for i in range(4)])

    async def one_whole():
        got = await placements(admin)
        whole = [g for g, m in got.items() if bound_count(m) == 4]
        return whole[0] if len(whole) == 1 else None
    winner = await wait_for(one_whole, 60, what="one job with all four members bound")
    await asyncio.sleep(15)                                # the other two storm meanwhile
    storm = await _failed_attempts(sched)
    for i in range(4):                                     # the running job ends
        await force_delete(admin, "default", f"{winner}-{i}")

    async def next_whole():
        got = await placements(admin)
        whole = [g for g, m in got.items() if g != winner and bound_count(m) == 4]
        return whole[0] if len(whole) == 1 else None
    await wait_for(next_whole, 30, what="a waiting job bound whole once the first one ended")
    await asyncio.sleep(5)
    got = await placements(admin)
    partial = {g: bound_count(m) for g, m in got.items() if 0 < bound_count(m) < 4}
    assert not partial, f"jobs left part bound: {partial}"
    failed = await _failed_attempts(sched)
    written = await metric(sched, "pysched_pod_status_writes_total", result="written")
    coalesced = await metric(sched, "pysched_pod_status_writes_total", result="coalesced")
    print(f"failed attempts {failed:.0f} ({storm:.0f} in the first 15 s of storm), status patches "
          f"written {written:.0f}, coalesced {coalesced:.0f}")
    assert storm >= 1000, f"no storm to weather: {storm:.0f} failed attempts"
    limited = [ln for ln in sched.log().splitlines() if "client rate limiter" in ln]
    assert not limited, limited[:3]
    assert await metric(sched, "pysched_pod_status_writes_total", result="failed") == 0
    assert written < failed / 10, (written, failed)
    assert sched.terminate() == 0, sched.log()[-3000:]


@pytest.mark.parametrize("compatible", [False, True], ids=["pysched", "schedulerPluginsCompatible"])
async def test_a_gang_with_one_large_member_is_placed_whole(admin, scheduler_factory, compatible):
    """One 3-CPU driver whose name sorts last and three 1-CPU workers on two 3-CPU nodes: only the
    driver alone on a node fits. Tried by name, the workers spread over both nodes first and the
    driver fits nowhere, after every backoff again (0 bound after 85 s); pysched tries the largest
    member first. scheduler-plugins' name order (compatible mode) gets there by its retries."""
    await install_crd(admin)
    await create_nodes(admin, [make_node(f"n{i}", cpu="3", memory="16Gi") for i in range(2)])
    await create_podgroup(admin, podgroup("spark", "default", 4, scheduleTimeoutSeconds=3))
    sched = scheduler_factory(gang_config(schedulerPluginsCompatible=compatible)).start()
    await sched.wait_log("caches synced", 60)
    pods = [make_pod(f"a-worker-{i}", labels={LABEL: "spark"}, cpu="1", memory="1Gi") for i in range(3)]
    pods.append(make_pod("z-driver", labels={LABEL: "spark"}, cpu="3", memory="1Gi"))
    await create_pods(admin, pods)

    async def whole():
        got = (await placements(admin)).get("spark", {})
        return got if bound_count(got) == 4 else None
    got = await wait_for(whole, 60, what="the gang bound whole")
    workers = {got[f"a-worker-{i}"] for i in range(3)}
    assert len(workers) == 1 and got["z-driver"] not in workers, got
    assert sched.terminate() == 0, sched.log()[-3000:]
