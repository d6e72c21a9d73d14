"""The gang benchmark workload and its report math: groups placed, admit times, partial groups."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import aggregate, gangs, verify
from bench.report import failed_runs, gang_table
from bench.schedulers import pysched_profile
from bench.workloads import GANG_LABEL, GPU, WORKLOADS, podgroups
from pysched_dev.testkit import make_node, make_pod

GANG = WORKLOADS["GangScheduling/100Nodes_150Groups"]


def test_workload_is_150_groups_of_8_on_gpus_for_100():
    assert (GANG.groups, GANG.gang_size, GANG.fitting_groups, GANG.expected_bound) == (150, 8, 100, 800)
    pods = [GANG.pod(i, "pysched", "measure") for i in range(GANG.measure_pods)]
    sizes = Counter(p["metadata"]["labels"][GANG_LABEL] for p in pods)
    assert len(sizes) == 150 and set(sizes.values()) == {8}
    assert all(p["spec"]["containers"][0]["resources"]["requests"][GPU] == "1" for p in pods)
    gpus = sum(int(GANG.node(i)["status"]["allocatable"][GPU]) for i in range(GANG.nodes))
    assert gpus == 800 == GANG.fitting_groups * GANG.gang_size
    groups = podgroups(GANG)
    assert {g["metadata"]["name"] for g in groups} == set(sizes)
    assert {g["spec"]["minMember"] for g in groups} == {8}
    assert GANG_LABEL not in (GANG.pod(0, "pysched", "init")["metadata"].get("labels") or {})
    small = GANG.scaled(3, 0, 40)                    # gang fields survive scaling
    assert (small.groups, small.fitting_groups, small.expected_bound) == (5, 3, 24)


def test_pysched_profile_enables_coscheduling_as_the_component_does():
    for profile in ("default", "shipped"):
        p = pysched_profile("pysched", profile, gang=True)
        assert p["plugins"]["queueSort"] == {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
        assert p["plugins"]["multiPoint"]["enabled"][-1] == {"name": "Coscheduling"}


def test_bench_profiles_are_kube_schedulers_plugins_or_the_shipped_set():
    from pysched_dev.testkit import CUSTOM_SCORES
    assert pysched_profile("pysched")["plugins"]["multiPoint"]["enabled"] == []      # kube's defaults only
    shipped = [e["name"] for e in pysched_profile("pysched", "shipped")["plugins"]["multiPoint"]["enabled"]]
    assert shipped == list(CUSTOM_SCORES)
    with pytest.raises(ValueError, match="unknown pysched profile"):
        pysched_profile("pysched", "fastest")


def test_loadaware_bench_profile_adds_both_trimaran_scores_with_valid_args():
    from pysched.apis.config.decode import parse as load_config_dict
    p = pysched_profile("pysched", "loadaware", metrics_address="http://127.0.0.1:9999")
    assert [e["name"] for e in p["plugins"]["multiPoint"]["enabled"]] == ["TargetLoadPacking",
                                                                         "LoadVariationRiskBalancing"]
    cfg = load_config_dict({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                            "profiles": [p]})
    from pysched.backend.cache.cache import SchedulerCache
    from pysched.profile import build_frameworks, default_registry
    fwk = build_frameworks(cfg, default_registry(), cache=SchedulerCache(), client=None, recorder=None)["pysched"]
    assert {"TargetLoadPacking", "LoadVariationRiskBalancing"} <= {pl.name for pl in fwk.score}
    with pytest.raises(ValueError, match="needs a Prometheus address"):
        pysched_profile("pysched", "loadaware")


def test_gang_summary_counts_whole_groups_and_admit_time_from_first_seen_to_last_bound():
    records = {"a0": {"seen": 10.0, "bound": 11.0}, "a1": {"seen": 10.5, "bound": 12.0},   # admitted: 2.0 s
               "b0": {"seen": 10.0, "bound": 14.0}, "b1": {"seen": 11.0, "bound": 13.0},   # admitted: 4.0 s
               "c0": {"seen": 10.0, "bound": 11.0}, "c1": {"seen": 10.0, "bound": None},  # partial: not placed
               "d0": {"seen": 10.0, "bound": None}, "d1": {"seen": 10.0, "bound": None}}
    group_of = {p: p[0] for p in records}
    s = gangs.gang_summary(10.0, records, group_of, 2)
    assert s == {"groups": 4, "group_size": 2, "placed": 2, "groups_per_s": 0.5,   # 2 groups by t=14
                 "admit_p50_ms": 2000.0, "admit_p99_ms": 4000.0}
    assert gangs.gang_summary(0.0, {}, {}, 2)["placed"] == 0


def test_partial_groups_are_violations_whole_and_empty_ones_are_not():
    def member(name, group, node=None, ns="bench"):
        p = make_pod(name, namespace=ns, labels={GANG_LABEL: group})
        if node:
            p["spec"]["nodeName"] = node
        return p
    pods = [member("a0", "a", "n1"), member("a1", "a", "n1"),      # whole
            member("b0", "b", "n1"), member("b1", "b"),            # partial
            member("c0", "c"), member("c1", "c"),                  # none bound
            member("x0", "a", "n1", ns="other")]                   # same name, other namespace
    need = {"bench/a": 2, "bench/b": 2, "bench/c": 2, "other/a": 2}
    got = verify.check_gangs(pods, need)
    assert [(v.kind, v.pod) for v in got] == [("partial-gang", "bench/b/*"), ("partial-gang", "other/a/*")]
    assert verify.check_placements([make_node("n1")], pods) == []   # the generic checker does not see gangs


def _result(scheduler, partial, error="", repeat=0):
    return {"workload": "GangScheduling/x", "mode": "burst", "repeat": repeat, "scheduler": scheduler, "qps": 50.0,
            "burst": 100, "error": error,
            "violations": [], "gang": {"groups": 3, "fitting": 2, "placed": 2 - partial, "partial": partial,
                                        "group_size": 2, "groups_per_s": 1.5, "admit_p50_ms": 10.0,
                                        "admit_p99_ms": 20.0}}


def test_partial_groups_fail_pysched_but_not_the_kube_scheduler_reference_row():
    assert failed_runs([_result("pysched", 0), _result("kube-scheduler", 2)]) == []
    assert [r["scheduler"] for r in failed_runs([_result("pysched", 1)])] == ["pysched"]
    text = gang_table(aggregate.cells([_result("pysched", 0), _result("kube-scheduler", 1),
                                       _result("kube-scheduler", 0, repeat=1)]))
    assert "| pysched | Coscheduling | 2 / 2 / 3 | 0 | 1.50 | 10 | 20 |" in text
    assert "| kube-scheduler | none (reference) | 1 / 2 / 3 | 1 |" in text   # the worst repeat
    no_gang = _result("pysched", 0)
    no_gang["gang"] = {}
    assert gang_table(aggregate.cells([no_gang])) == ""
