"""pysched under Kueue on a living cluster: Kueue (``hack/kueue.sh``, v0.17.1) decides *whether* a Job
runs - admission into a ClusterQueue's quota, the Job suspended until then, the flavor's node labels
and topology-aware scheduling's gate put on its pods - and pysched decides *where* each pod runs.

kube-controller-manager's Job controller creates the pods, KWOK plays the kubelets (nodes advertise
``nvidia.com/gpu``), pysched binds every pod with ``schedulerName: pysched``. Checked as a user
would: the Workload's conditions, the Job's ``suspend``, the pods' ``spec.nodeName`` and ``Scheduled``
Events, and from the API server's audit log each binding (and that it came after Kueue's ungate).

* ``test_admission_flavor_and_quota``: an admitted Job's pods land only on nodes with the
  ResourceFlavor's labels although larger empty nodes exist; a Job over the ClusterQueue's nominal
  quota and one over what is left of it stay suspended with no pods; deleting the first Job admits
  the second, whose pods pysched places; when it completes its quota comes back.
* ``test_topology_gate``: a ResourceFlavor with a Topology (TAS) makes Kueue gate the Job's pods
  (``kueue.x-k8s.io/topology``) until it has picked each pod's node (``nodeSelector
  kubernetes.io/hostname``); pysched holds the gated pods and places them on those nodes once
  Kueue lifts the gate.
"""

from __future__ import annotations

import datetime

import pytest

from pysched_dev.audit import ok
from pysched_dev.livecluster import kwok_node, wait_nodes_ready
from pysched_dev.testkit import create_nodes, pod_scheduled_condition

from .auditkit import successful_binds
from .conftest import scheduler_config, wait_for
from .kueue_kit import (
    GPU,
    HOSTNAME,
    KUEUE_USER,
    TOPOLOGY_GATE,
    Paused,
    cluster_queue,
    condition,
    create,
    create_queues,
    get,
    job_pods,
    kueue_living_cluster,
    local_queue,
    queued_job,
    resource_flavor,
    scheduled_events,
    topology,
    wait_admitted,
    wait_pending,
    wait_placed,
    workload_of,
)

pytestmark = pytest.mark.e2e
ACCEL = "pysched.test/accelerator"
POOL = "pysched.test/pool"


@pytest.fixture
def living_cluster(request, tmp_path):
    """This module's living cluster runs Kueue too (``live_admin`` and ``live_scheduler_factory``
    use it). Its nodes are never failed here: a long node-monitor grace keeps them Ready while the
    TAS test pauses kube-controller-manager for a moment."""
    yield from kueue_living_cluster(request, tmp_path, node_monitor_grace_seconds=60)


async def start_pysched(live_admin, live_scheduler_factory, nodes: list[dict]):
    await create_nodes(live_admin, nodes)
    await wait_nodes_ready(live_admin, [n["metadata"]["name"] for n in nodes])
    sched = live_scheduler_factory(scheduler_config()).start()
    await sched.wait_log("caches synced", 60)
    return sched


async def assert_scheduled_by_pysched(live_admin, pods: list[dict]) -> None:
    """Each pod has pysched's ``Scheduled`` Event naming the node it is bound to (events are written
    in the background, after the binding)."""
    names = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}

    async def recorded():
        events = await scheduled_events(live_admin)
        return events if names.keys() <= events.keys() else None
    events = await wait_for(recorded, 60, what=f"Scheduled events for {sorted(names)}")
    for name, node in names.items():
        e = events[name]
        assert e["reportingController"] == "pysched", e
        assert e["note"] == f"Successfully assigned default/{name} to {node}", e


async def no_pods_and_suspended(live_admin, job: dict) -> None:
    j = await get(live_admin, job)
    assert j["spec"].get("suspend") is True, f"Job {job['metadata']['name']} runs: {j['spec']}"
    assert not await job_pods(live_admin, job, live=False), f"Job {job['metadata']['name']} has pods"


async def test_admission_flavor_and_quota(living_cluster, live_admin, live_scheduler_factory):
    # Two small A100 nodes and two large, empty T4 nodes: LeastAllocated alone would choose a T4 one.
    a100 = {f"a100-{i}" for i in range(2)}
    nodes = [kwok_node(n, cpu="8", memory="32Gi", labels={ACCEL: "a100"}, extended={GPU: "4"}) for n in sorted(a100)]
    nodes += [kwok_node(f"t4-{i}", cpu="32", memory="128Gi", labels={ACCEL: "t4"}, extended={GPU: "8"})
              for i in range(2)]
    await start_pysched(live_admin, live_scheduler_factory, nodes)
    await create_queues(live_admin, resource_flavor("a100", {ACCEL: "a100"}),
                        cluster_queue("team", "a100", {"cpu": "6", "memory": "64Gi", GPU: "4"}),
                        local_queue("team", "team"))

    # (a) Admitted: Kueue unsuspends the Job with the flavor's node labels as its nodeSelector, pysched
    # places the pods - only on the A100 nodes.
    first = await create(live_admin, queued_job("first", "team", 3, run_for="1h"))
    assert first["spec"]["suspend"] is True, "Kueue's webhook suspends a queued Job at creation"
    wl = await wait_admitted(live_admin, first)
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "a100", "memory": "a100",
                                                                            GPU: "a100"}
    placed = await wait_placed(live_admin, first, 3)
    assert {p["spec"]["nodeName"] for p in placed} <= a100, [p["spec"]["nodeName"] for p in placed]
    assert all(p["spec"]["schedulerName"] == "pysched" and p["spec"]["nodeSelector"] == {ACCEL: "a100"}
               for p in placed), [p["spec"] for p in placed]
    await assert_scheduled_by_pysched(live_admin, placed)

    # (b) Over quota: 5 GPUs against a nominal 4 (never admitted), then 2 GPUs with 1 left. Kueue
    # has tried both and said why; both stay suspended, without pods.
    too_big = await create(live_admin, queued_job("too-big", "team", 5))
    await wait_pending(live_admin, too_big, f"insufficient quota for {GPU} in flavor a100")
    second = await create(live_admin, queued_job("second", "team", 2))
    await wait_pending(live_admin, second, f"insufficient unused quota for {GPU} in flavor a100")
    for job in (too_big, second):
        await no_pods_and_suspended(live_admin, job)

    # The first Job deleted: its Workload goes with it (garbage collector), its quota to the second.
    await live_admin.request("DELETE", "/apis/batch/v1/namespaces/default/jobs/first",
                             body={"propagationPolicy": "Background"}, rate_limit=False)
    await wait_admitted(live_admin, second)
    placed2 = await wait_placed(live_admin, second, 2)
    assert {p["spec"]["nodeName"] for p in placed2} <= a100
    await assert_scheduled_by_pysched(live_admin, placed2)
    await no_pods_and_suspended(live_admin, too_big)

    # The second Job completes (KWOK ends its pods): its Workload Finished, the quota free again -
    # and the Job over the nominal quota still waits.
    async def finished():
        j, w = await get(live_admin, second), await workload_of(live_admin, second)
        return condition(j, "Complete") == "True" and w is not None and condition(w, "Finished") == "True"
    await wait_for(finished, 60, what="Job second Complete and its Workload Finished")

    async def released():
        cq = await get(live_admin, cluster_queue("team", "a100", {}))
        st = cq.get("status") or {}
        usage = {r["name"]: r["total"] for f in st.get("flavorsUsage") or () for r in f["resources"]}
        return st if (usage.get(GPU) == "0" and st.get("admittedWorkloads") == 0
                      and st.get("pendingWorkloads") == 1) else None
    await wait_for(released, 60, what="ClusterQueue team: no GPU in use, nothing admitted, one pending")
    await no_pods_and_suspended(live_admin, too_big)
    assert condition(await workload_of(live_admin, too_big), "QuotaReserved") == "False"

    # Nothing but the five admitted pods (all on A100 nodes) was ever bound, each once.
    binds = successful_binds(living_cluster.cp)
    assert set(binds) == {p["metadata"]["name"] for p in placed + placed2}, binds
    assert set(binds.values()) == {1}, binds


def _ts(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_topology_gate(living_cluster, live_admin, live_scheduler_factory):
    tas = {f"tas-{i}" for i in range(2)}
    nodes = [kwok_node(n, cpu="4", memory="16Gi", labels={POOL: "tas"}, extended={GPU: "4"}) for n in sorted(tas)]
    nodes.append(kwok_node("general-0", cpu="32", memory="128Gi", labels={POOL: "general"}, extended={GPU: "8"}))
    sched = await start_pysched(live_admin, live_scheduler_factory, nodes)
    await create_queues(live_admin, topology("hosts", [HOSTNAME]),
                        resource_flavor("tas", {POOL: "tas"}, topology="hosts"),
                        cluster_queue("tas", "tas", {"cpu": "8", "memory": "64Gi", GPU: "8"}),
                        local_queue("tas", "tas"))

    def gated(count: int):
        async def check() -> bool:   # pysched's gauge, sampled every second
            return await sched.metric("scheduler_pending_pods", queue="gated") == count
        return check

    # Kueue removes its gate as soon as it sees the pods. To hold that moment open, kube-controller-
    # manager is paused until Kueue has admitted the Job (so no pod exists yet), then Kueue is paused
    # while the Job controller creates the gated pods: pysched has them, gated, for as long as needed.
    kueue = living_cluster.kueue
    with Paused(living_cluster.kcm_proc) as kcm, Paused(kueue.proc) as kueue_paused:
        kcm.pause()
        job = await create(live_admin, queued_job("train", "tas", 2, run_for="1h"))
        await wait_admitted(live_admin, job)
        tpl = (await get(live_admin, job))["spec"]["template"]["spec"]
        assert {"name": TOPOLOGY_GATE} in tpl.get("schedulingGates", []), tpl
        assert tpl["nodeSelector"] == {POOL: "tas"}, tpl
        kueue_paused.pause()
        kcm.resume()

        async def created():
            found = await job_pods(live_admin, job)
            return found if len(found) == 2 else None
        await wait_for(created, 60, what="the Job controller created 2 pods")
        await wait_for(gated(2), 60, what="pysched holding 2 gated pods")
        for p in await job_pods(live_admin, job):
            assert [g["name"] for g in p["spec"]["schedulingGates"]] == [TOPOLOGY_GATE], p["spec"]
            assert not p["spec"].get("nodeName"), p["spec"]
            cond = pod_scheduled_condition(p)
            assert cond and cond["reason"] == "SchedulingGated", p.get("status")
        # Not tried at all: no Event of pysched's about them (Scheduled, FailedScheduling), no binding.
        names = {p["metadata"]["name"] for p in await job_pods(live_admin, job)}
        events, _ = await live_admin.list_all("/apis/events.k8s.io/v1/namespaces/default/events")
        about = [e for e in events if e["regarding"]["name"] in names and e.get("reportingController") == "pysched"]
        assert not about, about
        assert not [e for e in living_cluster.cp.audit_events()
                    if e["objectRef"].get("subresource") == "binding" and e["objectRef"]["name"] in names]
        kueue_paused.resume()

    # Kueue picks a node per pod (nodeSelector kubernetes.io/hostname) and lifts the gate; pysched
    # binds each pod to exactly that node.
    placed = await wait_placed(live_admin, job, 2)
    for p in placed:
        assert not p["spec"].get("schedulingGates"), p["spec"]
        assert p["spec"]["nodeSelector"] == {POOL: "tas", HOSTNAME: p["spec"]["nodeName"]}, p["spec"]
        assert p["spec"]["nodeName"] in tas
    await assert_scheduled_by_pysched(live_admin, placed)
    await wait_for(gated(0), 30, what="pysched's gated gauge back to 0")

    # The audit log: Kueue's patch that chose each pod's node and lifted its gate, then pysched's one
    # binding of the pod, to that node, after it.
    events = living_cluster.cp.audit_events()
    nodes_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in placed}
    assert nodes_of.keys() == names
    for name, node in nodes_of.items():
        ungates = [e for e in events if e["user"]["username"] == KUEUE_USER and ok(e)
                   and e["objectRef"].get("name") == name and not e["objectRef"].get("subresource")
                   and "schedulingGates" in ((e.get("requestObject") or {}).get("spec") or {})]
        binds = [e for e in events
                 if e["objectRef"].get("subresource") == "binding" and e["objectRef"]["name"] == name]
        assert len(ungates) == 1, f"Kueue's writes lifting {name}'s gate: {ungates}"
        spec = ungates[0]["requestObject"]["spec"]
        assert not spec["schedulingGates"] and spec["nodeSelector"] == {HOSTNAME: node}, spec
        assert len(binds) == 1 and ok(binds[0]), binds
        # received after Kueue's patch was (its ResponseComplete stage may be stamped a moment after the
        # watch event that let pysched see the ungated pod, so the comparison is of receipts)
        assert _ts(binds[0]["requestReceivedTimestamp"]) > _ts(ungates[0]["requestReceivedTimestamp"]), (ungates, binds)
