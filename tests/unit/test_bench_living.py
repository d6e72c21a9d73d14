"""The benchmark's living-cluster mode (bench.living): what it asks the controllers to create."""

from __future__ import annotations

import collections
import json

import pytest

from bench import living
from bench.run import living_variants
from bench.workloads import PHASE_LABEL, WORKLOADS


def pods_of(workload, n, phase="measure"):
    return [workload.pod(i, "pysched", phase) for i in range(n)]


def test_pods_with_one_spec_are_one_deployment_and_every_pod_is_a_replica():
    w = WORKLOADS["SchedulingGPUSpotMix/1000Nodes"]
    pods = pods_of(w, 200)
    deps = living.deployments(pods, "measure")
    assert sum(d["spec"]["replicas"] for d in deps) == 200
    assert 1 < len(deps) < 200                               # a few kinds of pod, not one per pod
    # each Deployment's template is exactly its pods' spec and labels, plus the selector label
    by_spec = collections.Counter(json.dumps(p["spec"], sort_keys=True) for p in pods)
    for d in deps:
        tpl = d["spec"]["template"]
        assert d["spec"]["selector"]["matchLabels"] == {living.GROUP_LABEL: d["metadata"]["name"]}
        assert tpl["metadata"]["labels"][living.GROUP_LABEL] == d["metadata"]["name"]
        assert tpl["metadata"]["labels"][PHASE_LABEL] == "measure"
        assert by_spec[json.dumps(tpl["spec"], sort_keys=True)] == d["spec"]["replicas"]


def test_pods_that_differ_only_in_labels_are_kept_apart():
    w = WORKLOADS["SchedulingBasic/500Nodes"]
    a, b, c = pods_of(w, 3)
    b["metadata"]["labels"]["team"] = "x"           # same spec, another label: another Deployment
    deps = living.deployments([a, b, c], "measure")
    assert sorted(d["spec"]["replicas"] for d in deps) == [1, 2]
    (lone,) = [d for d in deps if d["spec"]["replicas"] == 1]
    assert lone["spec"]["template"]["metadata"]["labels"]["team"] == "x"


def test_kwok_takes_the_nodes_and_reports_their_conditions():
    w = WORKLOADS["SchedulingBasic/500Nodes"]
    nodes = living.kwok_nodes(w.scaled(3, 0, 1))
    assert [n["metadata"]["labels"]["kwok.x-k8s.io/node"] for n in nodes] == ["fake"] * 3
    assert all("conditions" not in n["status"] for n in nodes)
    assert w.node(0)["status"].get("conditions")                  # the workload's own node is untouched


def test_preemption_workloads_stay_bare():
    assert living.supported(WORKLOADS["Preemption/500Nodes"])
    assert not living.supported(WORKLOADS["TopologySpreading/1000Nodes"])
    chosen = living_variants([WORKLOADS["Preemption/500Nodes"], WORKLOADS["TopologySpreading/1000Nodes"]],
                             "bare,living")
    assert [w.name for w in chosen] == ["Preemption/500Nodes", "TopologySpreading/1000Nodes",
                                        "TopologySpreading/1000Nodes+living"]
    with pytest.raises(SystemExit, match="choose from bare, living"):
        living_variants([], "alive")


def test_status_updates_count_pod_status_writes_only():
    from bench import prom
    text = "\n".join([
        'apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 7',
        'apiserver_request_total{code="200",resource="pods",subresource="status",verb="PUT"} 2',
        'apiserver_request_total{code="200",resource="pods",subresource="status",verb="GET"} 50',
        'apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 9',
        'apiserver_request_total{code="200",resource="nodes",subresource="status",verb="PATCH"} 11'])
    assert living.status_updates(prom.parse(text)) == 9


def test_the_living_table_splits_off_the_cpu_spent_while_pods_went_ready():
    from bench import aggregate, report
    run = {"workload": "W+living", "mode": "drain", "qps": 5000.0, "burst": 5000, "scheduler": "pysched",
           "nodes": 10, "profile": "default", "error": "", "violations": [], "cpu_s_per_1000_pods": 1.5,
           "summary": {"pods": 2000, "bound": 2000, "avg": 300.0, "elapsed_s": 6.0},
           "drain": {"drain_pods_per_s": 300.0}, "bind_offsets": [0.5, 6.5],
           "living": {"status_updates_per_pod": 2.0, "ready_tail_s": 80.0, "ready_tail_cpu_s": 1.2}}
    assert aggregate.FIGURES["ready_tail_cpu_per_1000"](run) == 0.6
    assert aggregate.FIGURES["ready_tail_s"](run) == 80.0
    assert aggregate.FIGURES["ready_tail_cpu_per_1000"]({"living": {}, "summary": {"bound": 5}}) is None
    table = report.living_table(aggregate.cells([run]))
    header, _, row = table.splitlines()[:3]
    cells = dict(zip([h.strip() for h in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    assert cells["of which while pods went Ready, s / 1,000 pods"] == "0.60"
    assert cells["pods going Ready after the last Event, s"] == "80"
