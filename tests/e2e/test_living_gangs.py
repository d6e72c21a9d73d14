"""Gangs in a living cluster (issue 54): Jobs whose pods join Kubernetes' own PodGroups
(``scheduling.k8s.io/v1beta1``, GenericWorkload on the API server and pysched), created by the real
Job controller, run by KWOK.

A high-priority gang that fits nowhere takes the place of lower-priority gangs: pysched preempts
whole gangs only (its rule beyond kube-scheduler 1.37, which may take some members of a gang in
single disruption mode and leave it below ``minCount``), so every gang that keeps running keeps all
its members, and the gangs preempted wait, whole, for room - none of their recreated pods runs
alone. The API server's audit log shows no pod bound twice.
"""

from __future__ import annotations

import asyncio

import pytest

from pysched_dev.devcluster import binaries_version
from pysched_dev.livecluster import kwok_node

from .conftest import scheduler_config, wait_for
from .living_kit import create, node_of, pods, priority_class, running, template
from .test_living_cluster import bound_once, start

pytestmark = pytest.mark.e2e

if binaries_version() < (1, 37):
    pytest.skip("needs a Kubernetes 1.37 control plane (PYSCHED_BIN_DIR)", allow_module_level=True)

GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
API_SERVER = [f"--feature-gates={GATES}", "--runtime-config=scheduling.k8s.io/v1beta1=true"]
LOW_GANGS, LOW_SIZE, HIGH_SIZE = 4, 4, 6   # four gangs of 4 x 1 CPU fill 4 nodes of 4 CPU


def podgroup(name: str, min_count: int, priority_class: str) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "priorityClassName": priority_class}}


def gang_job(name: str, size: int, priority_class: str) -> dict:
    tpl = template({"app": name}, cpu="1", restartPolicy="Never", priorityClassName=priority_class,
                   schedulingGroup={"podGroupName": name}, grace=0)
    # KWOK completes a Job's pods 3 s after Ready: these run until the test ends
    tpl["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": size, "completions": size, "backoffLimit": 100, "template": tpl}}


@pytest.mark.living(extra_apiserver_args=API_SERVER)
async def test_a_high_priority_gang_takes_the_place_of_whole_lower_priority_gangs(
        living_cluster, live_admin, live_scheduler_factory):
    sched = live_scheduler_factory(scheduler_config(), extra_args=[f"--feature-gates={GATES}"])
    await create(live_admin, priority_class("low", 100))
    await create(live_admin, priority_class("high", 1000))
    nodes = [kwok_node(f"n{i}", cpu="4") for i in range(4)]
    await start(live_admin, lambda cfg: sched, nodes)
    low = [f"low-{c}" for c in "abcd"[:LOW_GANGS]]
    for name in low:
        await create(live_admin, podgroup(name, LOW_SIZE, "low"))
        await create(live_admin, gang_job(name, LOW_SIZE, "low"))

    async def gangs_running(names: list[str], size: int):
        got = {n: [p for p in await pods(live_admin, n) if running(p)] for n in names}
        return got if all(len(v) == size for v in got.values()) else None
    before = await wait_for(lambda: gangs_running(low, LOW_SIZE), 90, what="the four low gangs running whole")
    layout = {n: sorted(node_of(p) or "" for p in ps) for n, ps in before.items()}

    await create(live_admin, podgroup("high", HIGH_SIZE, "high"))
    await create(live_admin, gang_job("high", HIGH_SIZE, "high"))
    await wait_for(lambda: gangs_running(["high"], HIGH_SIZE), 90, what="the high gang running whole")

    # Six CPUs were needed: two whole low gangs went (eight CPUs), the other two kept every member.
    seen: list[dict] = []

    async def settled():
        counts = {n: sum(1 for p in await pods(live_admin, n) if running(p)) for n in low}
        seen.append(counts)
        return counts if sorted(counts.values()) == [0, 0, LOW_SIZE, LOW_SIZE] else None
    try:
        counts = await wait_for(settled, 60, what="two low gangs whole, two preempted whole")
    except AssertionError:
        all_pods = {n: [(p["metadata"]["name"], node_of(p), (p.get("status") or {}).get("phase"))
                        for p in await pods(live_admin, n, live=False)] for n in low}
        high_now = [(p["metadata"]["name"], node_of(p), (p.get("status") or {}).get("nominatedNodeName"))
                    for p in await pods(live_admin, "high", live=False)]
        raise AssertionError(f"last counts {seen[-1:]}; low layout before {layout}; high {high_now}; "
                             f"pods {all_pods}") from None
    for _ in range(10):     # and it stays so: no preempted gang's recreated pod runs on its own
        await asyncio.sleep(0.5)
        now = {n: sum(1 for p in await pods(live_admin, n) if running(p)) for n in low}
        assert now == counts, f"a gang went partial: {now}"
        waiting = [p for n in low for p in await pods(live_admin, n) if not node_of(p)]
        assert all(not running(p) for p in waiting)
    high = await pods(live_admin, "high")
    assert len({node_of(p) for p in high}) >= 2 and all(running(p) for p in high)
    assert await sched.metric("scheduler_preemption_victims_sum") == 2 * LOW_SIZE
    bound_once(living_cluster)
