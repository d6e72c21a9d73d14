"""The gang-backlog benchmark (bench/GANGS.md): its layout, its PodGroups, which schedulers run it, where
the gangs went and the attempts per gang."""

from __future__ import annotations

from collections import Counter

from bench import aggregate, gangs, plan, report
from bench.runner import gang_semantics
from bench.schedulers import TOPOLOGY_LEVELS, pysched_profile
from bench.workloads import (
    BLOCK,
    GANG_LABEL,
    GROUP_LABEL,
    RACK,
    WORKLOAD_APISERVER_ARGS,
    WORKLOADS,
    background_cpu,
    podgroups,
)

KUBE = WORKLOADS["GangBacklog/1000Nodes_100Gangs"]
COSCHED = WORKLOADS["GangBacklog/1000Nodes_100Gangs_Coscheduling"]


def test_layout_is_4_blocks_of_10_racks_of_25_nodes_with_room_for_more_gangs_than_the_backlog():
    nodes = [KUBE.node(i) for i in range(KUBE.nodes)]
    racks = Counter(n["metadata"]["labels"][RACK] for n in nodes)
    blocks = {n["metadata"]["labels"][BLOCK]: set() for n in nodes}
    for n in nodes:
        blocks[n["metadata"]["labels"][BLOCK]].add(n["metadata"]["labels"][RACK])
    assert len(racks) == 40 and set(racks.values()) == {25}
    assert len(blocks) == 4 and {len(rs) for rs in blocks.values()} == {10}
    assert tuple(TOPOLOGY_LEVELS) == (BLOCK, RACK)
    # Members of 4 CPU on 8-CPU nodes: a rack holds floor(member slots / 8) gangs.
    slots = [(8 - background_cpu(i)) // 4 for i in range(KUBE.nodes)]
    per_rack = [sum(slots[r * 25:(r + 1) * 25]) // 8 for r in range(40)]
    assert KUBE.groups == 100 < sum(per_rack) < 130        # racks fill up, but every gang has a rack
    assert min(per_rack) >= 1 and max(per_rack) <= 4
    # The background pods are bound by name and deterministic.
    (path, pod), = KUBE.node_objects(next(i for i in range(10) if background_cpu(i)))
    assert path == "/api/v1/namespaces/bench/pods" and pod["spec"]["nodeName"].startswith("node-")
    assert [background_cpu(i) for i in range(50)] == [background_cpu(i) for i in range(50)]


def test_kubernetes_podgroups_require_a_rack_and_pods_join_by_scheduling_group():
    assert (KUBE.expected_bound, KUBE.gang_api, KUBE.coscheduling) == (800, "kubernetes", False)
    pgs = podgroups(KUBE)
    assert len(pgs) == 100 and pgs[0]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pgs[0]["spec"] == {"schedulingPolicy": {"gang": {"minCount": 8}},
                              "schedulingConstraints": {"topology": [{"key": RACK}]}}
    pod = KUBE.pod(9, "pysched", "measure")
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang-0001"}
    assert pod["metadata"]["labels"][GROUP_LABEL] == "gang-0001" and GANG_LABEL not in pod["metadata"]["labels"]
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in WORKLOAD_APISERVER_ARGS
    assert KUBE.bare_pods and KUBE.scaled(100, 0, 80).groups == 10 and len(podgroups(KUBE.scaled(100, 0, 80))) == 10


def test_coscheduling_variant_uses_scheduler_plugins_podgroups_and_no_scheduling_group():
    assert COSCHED.coscheduling and COSCHED.expected_bound == 800
    assert podgroups(COSCHED)[0]["spec"]["minMember"] == 8
    pod = COSCHED.pod(0, "pysched", "measure")
    assert "schedulingGroup" not in pod["spec"] and pod["metadata"]["labels"][GANG_LABEL] == "gang-0000"
    assert gang_semantics(COSCHED, "scheduler-plugins") == "Coscheduling"
    assert gang_semantics(COSCHED, "kube-scheduler") == "none (reference)"


def test_plan_runs_each_variant_only_with_its_schedulers_and_profiles():
    got = [(p.workload.name, p.kind, p.profile) for p in plan.runs(
        [KUBE, COSCHED], ["drain"], [(5000, 5000)], ["pysched", "kube-scheduler", "scheduler-plugins"], 1,
        ["default", "topology"])]
    assert got == [(KUBE.name, "pysched", "default"), (KUBE.name, "pysched", "topology"),
                   (KUBE.name, "kube-scheduler", ""),
                   (COSCHED.name, "pysched", "default"), (COSCHED.name, "scheduler-plugins", "")]
    other = WORKLOADS["SchedulingBasic/500Nodes"]                 # no list: every scheduler
    assert other.admits("scheduler-plugins") and other.admits("pysched", "topology")


def test_topology_profile_swaps_upstreams_generator_for_topology_aware_placement():
    p = pysched_profile("pysched", "topology")
    assert p["plugins"]["placementGenerate"] == {"enabled": [{"name": "TopologyAwarePlacement"}],
                                                 "disabled": [{"name": "TopologyPlacementGenerator"}]}
    assert p["pluginConfig"] == [{"name": "TopologyAwarePlacement", "args": {"levels": [BLOCK, RACK]}}]


def test_domains_count_whole_groups_and_those_inside_one_rack_or_block():
    labels = {"n1": {RACK: "r1", BLOCK: "b1"}, "n2": {RACK: "r1", BLOCK: "b1"},
              "n3": {RACK: "r2", BLOCK: "b1"}, "n4": {RACK: "r3", BLOCK: "b2"}, "bare": {}}
    group_of = {"a0": "a", "a1": "a",          # one rack
                "b0": "b", "b1": "b",          # two racks of one block
                "c0": "c", "c1": "c",          # two blocks
                "d0": "d", "d1": "d",          # partial: not whole, not counted
                "e0": "e", "e1": "e"}          # a node without the labels: spread
    hosts = {"a0": "n1", "a1": "n2", "b0": "n1", "b1": "n3", "c0": "n3", "c1": "n4", "d0": "n1", "d1": None,
             "e0": "bare", "e1": "bare"}
    got = gangs.domains(group_of, hosts, labels, 2, {"rack": RACK, "block": BLOCK})
    assert got == {"whole": 4, "one_rack": 1, "one_block": 2}


def test_attempts_per_group_from_pod_and_podgroup_counters():
    assert gangs.attempts_per_group({"attempts_all_results": 850, "podgroup_attempts": 104}, 100) == {
        "pod_attempts_per_group": 8.5, "group_attempts_per_group": 1.04}
    assert gangs.attempts_per_group({"attempts_all_results": 800, "podgroup_attempts": None}, 100) == {
        "pod_attempts_per_group": 8.0, "group_attempts_per_group": None}
    assert gangs.attempts_per_group({}, 0)["pod_attempts_per_group"] is None


def _run(scheduler, repeat, last, whole, one_rack, partial=0, semantics="pod-group cycle"):
    return {"workload": "GangBacklog/x", "mode": "drain", "repeat": repeat, "scheduler": scheduler, "qps": 5000.0,
            "burst": 5000, "error": "", "violations": [], "bind_offsets": [0.5, last], "cpu_s_per_1000_pods": 2.0,
            "peak_rss_mib": 100.0, "load": {"loadavg_start": [1.0, 1.0, 1.0]},
            "gang": {"groups": 3, "fitting": 3, "placed": whole, "partial": partial, "group_size": 2,
                     "groups_per_s": 1.0, "admit_p50_ms": 1.0, "admit_p99_ms": 1.0, "semantics": semantics,
                     "whole": whole, "one_rack": one_rack, "one_block": whole, "pod_attempts_per_group": 2.0,
                     "group_attempts_per_group": None}}


def test_backlog_table_reports_medians_the_worst_whole_count_and_fails_partial_gangs_of_any_gang_scheduler():
    text = report.gang_backlog_table(aggregate.cells([_run("kube-scheduler", 0, 3.0, 3, 3),
                                                      _run("kube-scheduler", 1, 5.0, 2, 1)]))
    row = "| kube-scheduler | pod-group cycle | 2 | 4.0 [3.0-5.0] | 2 / 3 | 2 [1-3] | 2 [2-3] | 0 | 2.0 | n/a |"
    assert row in text
    assert [r["scheduler"] for r in report.failed_runs([_run("kube-scheduler", 0, 1.0, 2, 2, partial=1)])] == [
        "kube-scheduler"]
    assert report.failed_runs([_run("kube-scheduler", 0, 1.0, 2, 2, partial=1, semantics="none (reference)")]) == []


def test_chart_lines_tell_pysched_profiles_apart():
    from bench.charts import series
    assert series({"scheduler": "pysched", "profile": "topology"}) == "pysched (topology)"
    assert series({"scheduler": "pysched", "profile": "default"}) == "pysched"
    assert series({"scheduler": "kube-scheduler", "profile": ""}) == "kube-scheduler"
