"""A mixed workload on labelled, tainted nodes in three zones, against the real API server.

Every placement is checked against the hard constraints by independent code in this file, and
the pods that cannot fit must carry kube-scheduler's reasons and counts.
"""

from __future__ import annotations

import collections

import pytest

from pysched_dev.testkit import (
    create_nodes,
    create_pods,
    custom_scores_profile,
    list_pods,
    make_node,
    make_pod,
    pod_scheduled_condition,
)
from tests.differential import no_claims_verdict

from .conftest import scheduler_config, wait_for
from .test_scheduling import assert_no_overcommit

pytestmark = pytest.mark.e2e
NOT_HELPFUL_9 = (f" {no_claims_verdict()}preemption: 0/9 nodes are available: "
                 "9 Preemption is not helpful for scheduling.")

Z = "topology.kubernetes.io/zone"
IT = "node.kubernetes.io/instance-type"
CT = "karpenter.sh/capacity-type"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def cluster() -> list[dict]:
    nodes = []
    for z in ("a", "b", "c"):
        nodes.append(make_node(f"{z}-spot", cpu="4", memory="16Gi",
                               labels={Z: z, IT: "m5.xlarge", CT: "spot", "disk": "ssd"}))
        nodes.append(make_node(f"{z}-od", cpu="4", memory="16Gi", labels={Z: z, IT: "c5.xlarge", CT: "on-demand"}))
        nodes.append(make_node(f"{z}-gpu", cpu="8", memory="32Gi", labels={Z: z, IT: "p3.2xlarge", CT: "on-demand"},
                               taints=[GPU_TAINT], extended={"nvidia.com/gpu": "2"}))
    return nodes


def workload() -> list[dict]:
    pods = []
    hard = [{"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "hard"}}}]
    soft = [{"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "soft"}}}]
    pods += [make_pod(f"hard-{i}", cpu="100m", memory="64Mi", labels={"app": "hard"}, spread=hard) for i in range(7)]
    pods += [make_pod(f"soft-{i}", cpu="100m", memory="64Mi", labels={"app": "soft"}, spread=soft) for i in range(6)]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "solo"}}}]}}
    pods += [make_pod(f"solo-{i}", cpu="100m", memory="64Mi", labels={"app": "solo"}, affinity=anti) for i in range(5)]
    pods += [make_pod(f"ssd-{i}", cpu="200m", node_selector={"disk": "ssd"}) for i in range(3)]
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    pods += [make_pod(f"train-{i}", cpu="1", memory="4Gi", extended={"nvidia.com/gpu": "1"}, tolerations=tol)
             for i in range(4)]
    pods += [make_pod(f"spot-{i}", cpu="100m", labels={"lifecycle-preference": "spot"}) for i in range(3)]
    # may, but should not, use GPU nodes
    pods += [make_pod(f"plain-{i}", cpu="100m", tolerations=tol) for i in range(4)]
    # cannot fit anywhere, for the message checks
    pods.append(make_pod("no-such-label", node_selector={"disk": "nvme"}))
    pods.append(make_pod("too-many-gpus", extended={"nvidia.com/gpu": "3"}, tolerations=tol))
    pods.append(make_pod("untolerated-gpu", extended={"nvidia.com/gpu": "1"}))
    return pods


def _tolerates(pod, taint) -> bool:
    for t in pod["spec"].get("tolerations") or ():
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


async def test_mixed_workload_respects_every_hard_constraint(admin, scheduler_factory):
    nodes = cluster()
    await create_nodes(admin, nodes)
    pods = workload()
    await create_pods(admin, pods)
    # GPU (plain pods stay off GPU nodes) and CapacityType (spot pods on spot nodes) are opt-in.
    sched = scheduler_factory(scheduler_config(profiles=[custom_scores_profile()])).start()
    expect_pending = {"no-such-label", "too-many-gpus", "untolerated-gpu"}

    async def settled():
        got = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        done = all(got[n]["spec"].get("nodeName") or (n in expect_pending and pod_scheduled_condition(got[n]))
                   for n in got)
        return got if done else None

    got = await wait_for(settled, 90, what="workload settled")
    by_node = {n["metadata"]["name"]: n for n in nodes}
    placement = {name: p["spec"].get("nodeName") for name, p in got.items()}
    for name in expect_pending:
        assert placement[name] is None, f"{name} should not fit"
    for name, node_name in placement.items():
        if node_name is None:
            continue
        node = by_node[node_name]
        pod = got[name]
        for k, v in (pod["spec"].get("nodeSelector") or {}).items():
            assert node["metadata"]["labels"].get(k) == v, f"{name} on {node_name} breaks nodeSelector {k}={v}"
        for taint in node["spec"].get("taints") or ():
            assert _tolerates(pod, taint), f"{name} on {node_name} does not tolerate {taint}"
    await assert_no_overcommit(admin)

    def zone_of(n):
        return by_node[n]["metadata"]["labels"][Z]
    hard = collections.Counter(zone_of(placement[f"hard-{i}"]) for i in range(7))
    assert max(hard.values()) - min(hard.get(z, 0) for z in "abc") <= 1, hard
    soft = collections.Counter(zone_of(placement[f"soft-{i}"]) for i in range(6))
    assert sorted(soft.values()) == [2, 2, 2], soft
    solos = [placement[f"solo-{i}"] for i in range(5)]
    assert len(set(solos)) == 5, solos
    assert all(placement[f"train-{i}"].endswith("-gpu") for i in range(4))
    assert all(placement[f"spot-{i}"].endswith("-spot") for i in range(3))
    assert not any(placement[f"plain-{i}"].endswith("-gpu") for i in range(4)), "GPU nodes should stay free"

    def msg(n):
        return pod_scheduled_condition(got[n])["message"]
    # TaintToleration runs before NodeAffinity, so the tainted GPU nodes are counted under taints
    assert msg("no-such-label") == ("0/9 nodes are available: 3 node(s) had untolerated taint(s), "
                                    "6 node(s) didn't match Pod's node affinity/selector." + NOT_HELPFUL_9)
    # DefaultPreemption's verdict ends each message: taints, affinity and requests above
    # allocatable are unresolvable, so no node is worth a dry run.
    assert msg("too-many-gpus") == "0/9 nodes are available: 9 Insufficient nvidia.com/gpu." + NOT_HELPFUL_9
    assert msg("untolerated-gpu") == ("0/9 nodes are available: 3 node(s) had untolerated taint(s), "
                                      "6 Insufficient nvidia.com/gpu." + NOT_HELPFUL_9)
    sched.terminate()


async def test_spread_and_affinity_messages(admin, scheduler_factory):
    maint = [{"key": "maint", "value": "true", "effect": "NoSchedule"}]
    await create_nodes(admin, [make_node("a1", cpu="2", labels={Z: "a"}),
                               make_node("b1", cpu="2", labels={Z: "b"}, taints=maint),
                               make_node("nolabel", cpu="2")])
    hard = [{"maxSkew": 1, "topologyKey": Z, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "s"}}}]
    # two pods already bound in zone a by another client
    await create_pods(admin, [make_pod(f"pre-{i}", labels={"app": "s"}, node_name="a1", scheduler="other")
                              for i in range(2)])
    needs_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": Z, "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    await create_pods(admin, [make_pod("spread-me", labels={"app": "s"}, spread=hard),
                              make_pod("needs-db", affinity=needs_db),
                              make_pod("spread-ok", labels={"app": "s"}, spread=hard,
                                       tolerations=[{"key": "maint", "operator": "Exists"}])])
    sched = scheduler_factory().start()

    async def state():
        got = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        ok = (pod_scheduled_condition(got["spread-me"]) and pod_scheduled_condition(got["needs-db"])
              and got["spread-ok"]["spec"].get("nodeName"))
        return got if ok else None

    got = await wait_for(state, 60, what="messages and the tolerating spread pod")
    # zone b (tainted, but counted: nodeTaintsPolicy defaults to Ignore) has 0 pods, so zone a would skew by 3
    assert pod_scheduled_condition(got["spread-me"])["message"] == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label), "
        f"1 node(s) had untolerated taint(s). {no_claims_verdict()}preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
    assert pod_scheduled_condition(got["needs-db"])["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod affinity rules. "
        f"{no_claims_verdict()}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert got["spread-ok"]["spec"]["nodeName"] == "b1"
    sched.terminate()
