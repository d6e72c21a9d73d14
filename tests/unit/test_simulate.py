"""pysched simulate: snapshot validation, API defaulting of file pods, placements, explain, report."""

import json
import textwrap
from types import SimpleNamespace

import pytest
import yaml

from pysched import explanation as explain
from pysched.apis.core import defaults as apidefaults
from pysched.tools.report import render
from pysched.tools.simulate import Simulation, format_text, main
from pysched.tools.snapshot import SnapshotError, load_pods, load_snapshot
from pysched_dev.testkit import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"


def write(tmp_path, name, docs) -> str:
    p = tmp_path / name
    if isinstance(docs, str):
        p.write_text(textwrap.dedent(docs))
    else:
        p.write_text(yaml.safe_dump_all(docs))
    return str(p)


def as_list(items):
    return {"apiVersion": "v1", "kind": "List", "items": items}


def nodes3():
    return [make_node(f"n{i}", cpu="2", memory="4Gi", labels={ZONE: f"z{i}"}) for i in range(3)]


# -- snapshot and pod files: clear errors -------------------------------------------------------

def node_error(tmp_path, mutate) -> tuple[str, str]:
    """The snapshot path and the error for a snapshot holding node n0 after ``mutate``."""
    node = make_node("n0")
    mutate(node)
    path = write(tmp_path, "snap.yaml", [as_list([node])])
    with pytest.raises(SnapshotError) as err:
        load_snapshot(path)
    return path, str(err.value)

@pytest.mark.parametrize("mutate,expected", [
    (lambda n: n["status"]["allocatable"].update(cpu="4x"),
     "Node n0 (items[0]): status.allocatable.cpu: invalid quantity '4x'"),
    (lambda n: n["metadata"].pop("name"), "Node (items[0]): metadata.name: required"),
    (lambda n: n["spec"].update(taints=[{"key": "a", "effect": "Sometimes"}]),
     "Node n0 (items[0]): spec.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute, "
     "got 'Sometimes'"),
    (lambda n: n["metadata"]["labels"].update(gpu=True),
     "Node n0 (items[0]): metadata.labels[gpu]: expected a string, got True (quote it in YAML)"),
])
def test_bad_node_names_object_and_field(tmp_path, mutate, expected):
    path, error = node_error(tmp_path, mutate)
    assert error == f"{path}: {expected}"


def test_bad_pod_fields_are_named(tmp_path):
    bad = make_pod("web", memory="lots")
    path = write(tmp_path, "snap.yaml", [as_list([make_node("n0"), bad])])
    with pytest.raises(SnapshotError, match=r"Pod default/web \(items\[1\]\): "
                                            r"spec.containers\[0\].resources.requests.memory: invalid quantity 'lots'"):
        load_snapshot(path)
    aff = make_pod("aff", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}})
    path = write(tmp_path, "pods.yaml", [aff])
    with pytest.raises(SnapshotError, match=r"Pod default/aff \(document\): spec.affinity.nodeAffinity"):
        load_pods(path)
    tol = make_pod("tol", tolerations=[{"key": "gpu", "operator": "Near"}])
    path = write(tmp_path, "tol.yaml", [tol])
    with pytest.raises(SnapshotError) as err:
        load_pods(path)
    assert str(err.value) == (f"{path}: Pod default/tol (document): spec.tolerations[0].operator: "
                              "must be empty or one of Equal, Exists, Lt, Gt, got 'Near'")


SYNTAX = ("must consist of alphanumeric characters, '-', '_' or '.', "
          "and must start and end with an alphanumeric character")


@pytest.mark.parametrize("mutate,expected", [
    (lambda n: n["metadata"].update(name="Node_A"),
     "Node Node_A (items[0]): metadata.name: invalid name 'Node_A': a lowercase RFC 1123 subdomain"),
    (lambda n: n["metadata"]["labels"].update({"gpu type": "a100"}),
     "Node n0 (items[0]): metadata.labels: invalid key 'gpu type': name part " + SYNTAX),
    (lambda n: n["metadata"]["labels"].update({"Example.com/gpu": "a100"}),
     "Node n0 (items[0]): metadata.labels: invalid key 'Example.com/gpu': prefix part a lowercase RFC 1123"),
    (lambda n: n["metadata"]["labels"].update({"a/b/c": "x"}),
     "Node n0 (items[0]): metadata.labels: invalid key 'a/b/c': a valid label key is a name with an optional"),
    (lambda n: n["metadata"]["labels"].update({"x" * 64: "v"}),
     f"Node n0 (items[0]): metadata.labels: invalid key '{'x' * 64}': name part must be no more than 63"),
    (lambda n: n["metadata"]["labels"].update(zone="us east"),
     "Node n0 (items[0]): metadata.labels[zone]: invalid value 'us east': a label value must be empty or consist"),
    (lambda n: n["metadata"]["labels"].update(zone="v" * 64),
     "Node n0 (items[0]): metadata.labels[zone]: invalid value"),
    (lambda n: n["metadata"]["labels"].update(zone="east\n"),
     "Node n0 (items[0]): metadata.labels[zone]: invalid value 'east\\n'"),
    (lambda n: n["metadata"].update(annotations={"-bad": "free text is fine"}),
     "Node n0 (items[0]): metadata.annotations: invalid key '-bad': name part " + SYNTAX),
    (lambda n: n["spec"].update(taints=[{"key": "dedicated/", "effect": "NoSchedule"}]),
     "Node n0 (items[0]): spec.taints[0].key: invalid key 'dedicated/': name part must be non-empty"),
    (lambda n: n["spec"].update(taints=[{"key": "dedicated", "value": "ml team", "effect": "NoSchedule"}]),
     "Node n0 (items[0]): spec.taints[0].value: invalid value 'ml team'"),
    (lambda n: n["spec"].update(taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"},
                                        {"key": "a", "value": "x", "effect": "NoSchedule"}]),
     "Node n0 (items[0]): spec.taints[2]: duplicate of spec.taints[0]: taints must be unique by key and effect"),
])
def test_node_names_labels_and_taints_follow_the_api_rules(tmp_path, mutate, expected):
    path, error = node_error(tmp_path, mutate)
    assert error.startswith(f"{path}: {expected}")


@pytest.mark.parametrize("kwargs,expected", [
    ({"name": "Web"}, "Pod default/Web (document): metadata.name: invalid name 'Web'"),
    ({"namespace": "team.a"}, "Pod team.a/web (document): metadata.namespace: invalid namespace 'team.a': "
                              "must not contain dots"),
    ({"node_selector": {"disk": "fast ssd"}}, "Pod default/web (document): spec.nodeSelector[disk]: invalid value"),
    ({"node_selector": {"_disk": "ssd"}}, "Pod default/web (document): spec.nodeSelector: invalid key '_disk'"),
    ({"tolerations": [{"operator": "Equal", "value": "x"}]},
     "Pod default/web (document): spec.tolerations[0].operator: must be Exists when key is empty"),
    ({"tolerations": [{"value": "x"}]},
     "Pod default/web (document): spec.tolerations[0].operator: must be Exists when key is empty"),
    ({"tolerations": [{"key": "gpu", "value": "a 100"}]},
     "Pod default/web (document): spec.tolerations[0].value: invalid value 'a 100'"),
    ({"tolerations": [{"key": "gpu", "operator": "Exists", "tolerationSeconds": 30}]},
     "Pod default/web (document): spec.tolerations[0].effect: must be NoExecute when tolerationSeconds is set"),
    ({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "30"}]},
     "Pod default/web (document): spec.tolerations[0].tolerationSeconds: expected an integer"),
    ({"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]},
     "Pod default/web (document): spec.tolerations[0].value: must be empty when operator is Exists"),
    ({"tolerations": [{"key": "cpu-gen", "operator": "Gt", "value": "07"}]},
     "Pod default/web (document): spec.tolerations[0].value: must be a decimal integer for operator Gt, got '07'"),
    ({"tolerations": [{"key": "cpu-gen", "operator": "Lt", "value": "-0"}]},
     "Pod default/web (document): spec.tolerations[0].value: must be a decimal integer for operator Lt"),
    ({"tolerations": [{"key": "cpu-gen", "operator": "Lt", "value": str(2**63)}]},
     "Pod default/web (document): spec.tolerations[0].value: must be a decimal integer for operator Lt"),
    ({"tolerations": [{"key": "team/", "operator": "Exists"}]},
     "Pod default/web (document): spec.tolerations[0].key: invalid key 'team/'"),
])
def test_pod_names_selectors_and_tolerations_follow_the_api_rules(tmp_path, kwargs, expected):
    kwargs = {"name": "web", **kwargs}
    path = write(tmp_path, "pods.yaml", [make_pod(kwargs.pop("name"), **kwargs)])
    with pytest.raises(SnapshotError) as err:
        load_pods(path)
    assert str(err.value).startswith(f"{path}: {expected}")


def test_what_the_api_accepts_is_accepted(tmp_path):
    node = make_node("node-1.example.com",
                     labels={"example.com/Gpu_Type": "A100.sxm-4", "empty": "", "x" * 63: "v" * 63},
                     taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"},
                             {"key": "example.com/b", "value": "", "effect": "PreferNoSchedule"}])
    # Annotation keys are checked case-insensitively; their values are free text.
    node["metadata"]["annotations"] = {"Example.COM/Note": "any text: at all\n"}
    pod = make_pod("web-0.v2", namespace="team-a", node_selector={"example.com/Gpu_Type": "A100.sxm-4"},
                   tolerations=[{"operator": "Exists"},
                                {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                                {"key": "a", "value": ""}, {"key": "gen", "operator": "Gt", "value": "-5"},
                                {"key": "gen", "operator": "Lt", "value": "0"}])
    snap = load_snapshot(write(tmp_path, "snap.yaml", [as_list([node, pod])]))
    assert [n["metadata"]["name"] for n in snap.nodes] == ["node-1.example.com"]
    assert [p["metadata"]["name"] for p in snap.pods] == ["web-0.v2"]


def test_unreadable_yaml_and_wrong_kinds(tmp_path):
    path = write(tmp_path, "bad.yaml", "items: [a, b\n")
    with pytest.raises(SnapshotError, match=r"not valid YAML at line 2"):
        load_snapshot(path)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    with pytest.raises(SnapshotError, match="kind: expected Pod, got 'Deployment'"):
        load_pods(write(tmp_path, "p.yaml", [dep]))
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(str(tmp_path / "missing.yaml"))
    dup = write(tmp_path, "dup.yaml", [make_pod("a"), make_pod("a")])
    with pytest.raises(SnapshotError, match="duplicate of document 1"):
        load_pods(dup)


def test_snapshot_kinds_are_sorted_and_unknown_kinds_counted(tmp_path):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    snap = load_snapshot(write(tmp_path, "s.yaml", [as_list([*nodes3(), cm, ns]),
                                                    {"kind": "PodList", "items": [make_pod("p")]}]))
    assert len(snap.nodes) == 3 and [p["kind"] for p in snap.pods] == ["Pod"]
    assert snap.ignored == {"ConfigMap": 1} and snap.objects == [ns]


# -- API defaulting ------------------------------------------------------------------------------

def test_limits_only_extended_resource_gets_a_request_and_defaults_apply():
    pod = make_pod("train", cpu=None, memory=None, limits_only={"nvidia.com/gpu": "2", "cpu": "1"})
    pod["metadata"].pop("namespace")
    pod["spec"].pop("schedulerName")
    out = apidefaults.apply(pod, default_scheduler="pysched", classes={}, global_default=None, seq=3)
    res = out["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"nvidia.com/gpu": "2", "cpu": "1"}
    assert out["metadata"]["namespace"] == "default" and out["spec"]["schedulerName"] == "pysched"
    assert out["metadata"]["creationTimestamp"] == "2026-01-01T00:00:03Z"
    keys = {(t["key"], t["effect"], t.get("tolerationSeconds")) for t in out["spec"]["tolerations"]}
    assert keys == {("node.kubernetes.io/not-ready", "NoExecute", 300),
                    ("node.kubernetes.io/unreachable", "NoExecute", 300)}
    assert "requests" not in pod["spec"]["containers"][0]["resources"] or \
        "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"]["requests"]  # input untouched


def test_priority_class_and_label_key_merges():
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev", "absent"]}]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}},
        "mismatchLabelKeys": ["tenant"]}]}}
    pod = make_pod("web", labels={"app": "web", "rev": "7", "tenant": "a"}, spread=spread, affinity=anti)
    pod["spec"]["priorityClassName"] = "high"
    out = apidefaults.apply(pod, default_scheduler="pysched", classes={"high": 1000}, global_default=None, seq=0)
    assert out["spec"]["priority"] == 1000
    assert out["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] == [
        {"key": "rev", "operator": "In", "values": ["7"]}]
    term = out["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchExpressions"] == [{"key": "tenant", "operator": "NotIn", "values": ["a"]}]
    pod["spec"]["priorityClassName"] = "nope"
    with pytest.raises(apidefaults.AdmissionError, match="spec.priorityClassName: no PriorityClass with name nope"):
        apidefaults.apply(pod, default_scheduler="pysched", classes={}, global_default=None, seq=0)


def test_global_default_priority_class():
    pcs = [{"kind": "PriorityClass", "metadata": {"name": "std"}, "value": 5, "globalDefault": True}]
    classes, default = apidefaults.priority_classes(pcs)
    assert default == 5 and classes["system-node-critical"] == 2000001000
    out = apidefaults.apply(make_pod("p"), default_scheduler="x", classes=classes, global_default=default, seq=0)
    assert out["spec"]["priority"] == 5


# -- the simulation ------------------------------------------------------------------------------

def snapshot_with_pods(tmp_path, pods, nodes=None):
    existing = make_pod("existing", cpu="1500m", memory="1Gi", node_name="n0", scheduler="default-scheduler")
    snap = load_snapshot(write(tmp_path, "s.yaml", [as_list([*(nodes or nodes3()), existing])]))
    return snap, load_pods(write(tmp_path, "p.yaml", pods))


def test_placements_follow_priority_then_file_order_and_count_existing_pods(tmp_path):
    pods = [make_pod("low", cpu="1500m", memory="1Gi"), make_pod("high", cpu="1500m", memory="1Gi", priority=10),
            make_pod("third", cpu="1500m", memory="1Gi"), make_pod("fourth", cpu="1500m", memory="1Gi")]
    snap, pods = snapshot_with_pods(tmp_path, pods)
    res = Simulation(seed=1).run(snap, pods, explain={"default/fourth"})
    by = {p.pod: p.node for p in res.placements}
    # Only n1 and n2 have room (n0 holds the existing pod): priority first, then file order.
    assert {by["default/high"], by["default/low"]} == {"n1", "n2"}
    assert by["default/third"] is None and by["default/fourth"] is None
    failed = [p for p in res.placements if not p.node]
    assert all(p.message == "0/3 nodes are available: 3 Insufficient cpu. "
               "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod." for p in failed)
    before = {n["node"]: n for n in res.before["nodes"]}
    after = {n["node"]: n for n in res.after["nodes"]}
    assert before["n0"]["requested"]["cpu"] == 1500 and after["n1"]["requested"]["cpu"] == 1500
    zones = {z["zone"]: z for z in res.after["zones"]}
    assert set(zones) == {"z0", "z1", "z2"} and zones["z1"]["requested"]["pods"] == 1
    assert res.explain["default/fourth"]["error"].startswith("0/3 nodes are available")


def test_explain_lists_every_plugin_verdict_and_scores(tmp_path):
    nodes = nodes3()
    nodes[2]["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    snap, pods = snapshot_with_pods(tmp_path, [make_pod("web", cpu="400m", memory="1Gi")], nodes)
    res = Simulation(seed=0).run(snap, pods, explain={"default/web"})
    trace = res.explain["default/web"]
    taint = next(f for f in trace["filter"] if f["plugin"] == "TaintToleration")
    assert taint["nodes"]["n2"] == "node(s) had untolerated taint(s)"
    fit = trace["score"]["NodeResourcesFit"]
    assert set(fit) == {"n0", "n1"} and set(fit["n1"]) == {"raw", "normalized", "weighted"}
    assert fit["n1"]["raw"] > fit["n0"]["raw"]  # n0 already holds 1.5 CPU
    text = format_text(res)
    assert "Explain default/web: n1" in text and "TaintToleration: node(s) had untolerated taint(s)" in text
    s = explain.summary(trace)
    assert s["selectedNode"] == "n1"
    assert s["filterRejections"] == {"TaintToleration": {"node(s) had untolerated taint(s)": 1}}
    assert s["topNodes"][0]["node"] == "n1" and "NodeResourcesFit" in s["topNodes"][0]["plugins"]
    line = explain.annotations(trace, "default/web")[explain.SUMMARY_ANNOTATION]
    top = s["topNodes"]
    assert line == (f"bound to n1 (score {top[0]['total']}, next n0 {top[1]['total']}); 2/3 nodes fit; filtered out: "
                    f"1 by TaintToleration; details: pysched explain default/web")
    assert explain.outcome(s) == (f"bound to n1: best of 2 feasible of 3 evaluated nodes (total {top[0]['total']}, "
                                  f"next n0 {top[1]['total']}); filtered out: 1 by TaintToleration (node(s) had "
                                  f"untolerated taint(s))")
    failed = explain.human_line({"error": "0/3 nodes are available: 3 Insufficient cpu.", "feasibleNodes": 0,
                                 "evaluatedNodes": 3, "filterRejections": {"NodeResourcesFit": {
                                     "Insufficient cpu": 3}}}, "default/late")
    assert failed == ("not scheduled: 0/3 nodes fit; filtered out: 3 by NodeResourcesFit (Insufficient cpu); "
                      "details: pysched explain default/late")


def test_pending_snapshot_pods_and_foreign_scheduler_names(tmp_path):
    pending = make_pod("waiting", cpu="1", scheduler="default-scheduler")
    snap = load_snapshot(write(tmp_path, "s.yaml", [as_list([*nodes3(), pending])]))
    pods = load_pods(write(tmp_path, "p.yaml", [make_pod("other", scheduler="someone-else")]))
    res = Simulation().run(snap, pods)
    assert res.placements[0].code == "NotHandled" and "someone-else" in res.placements[0].message
    assert any("1 pending pod(s)" in n for n in res.notes)


def test_main_exit_codes_json_and_report(tmp_path, capsys):
    snap = write(tmp_path, "s.yaml", [as_list(nodes3())])
    pods = write(tmp_path, "p.yaml", [make_pod("a"), make_pod("huge", cpu="64")])
    report = tmp_path / "r.html"
    args = SimpleNamespace(config=None, cluster=snap, pods=pods, explain=["default/a"], report=str(report),
                           seed=0, output="json", plugin_module=[])
    assert main(args) == 1  # one pod could not be placed
    out = json.loads(capsys.readouterr().out)
    assert [p["result"] for p in out["placements"]] == ["Scheduled", "Unschedulable"]
    page = report.read_text()
    assert "<script type=\"application/json\" id=\"sim-data\">" in page
    # self-contained: no external resources
    assert "http" not in page.split("<body")[1].replace("http://www.w3.org/2000/svg", "")
    bad = write(tmp_path, "bad.yaml", [as_list([make_node("n", cpu="four")])])
    args.cluster = bad
    assert main(args) == 2
    assert "status.allocatable.cpu: invalid quantity 'four'" in capsys.readouterr().err


def test_report_escapes_user_text():
    from pysched.tools.simulate import Placement, SimulationResult
    res = SimulationResult("p", 0, [Placement("ns/<script>", None, "Unschedulable", "</script><b>x", "p")],
                           {"resources": [], "nodes": [], "zones": []}, {"resources": [], "nodes": [], "zones": []})
    page = render(res)
    assert "ns/&lt;script&gt;" in page and "&lt;/script&gt;&lt;b&gt;x" in page  # HTML escaped
    assert "<\\/script><b>x" in page and "</script><b>x" not in page  # the JSON cannot close its script


def _util_row(name, zone, labels, alloc_cpu, used_cpu):
    return {"node": name, "zone": zone, "labels": labels, "allocatable": {"cpu": alloc_cpu, "pods": 110},
            "requested": {"cpu": used_cpu, "pods": 1}}


def test_report_data_groups_by_instance_and_capacity_type_and_reason():
    from pysched.tools import report_data
    from pysched.tools.simulate import Placement, SimulationResult
    it = "node.kubernetes.io/instance-type"
    labels = [{it: "m5.large", "karpenter.sh/capacity-type": "spot"},
              {it: "m5.large", "eks.amazonaws.com/capacityType": "ON_DEMAND"},
              {it: "p4d.24xlarge", "karpenter.sh/capacity-type": "reserved"},   # counts as on-demand
              {}]
    before = {"resources": ["cpu", "pods"], "zones": [],
              "nodes": [_util_row(f"n{i}", "z", lab, 1000, 0) for i, lab in enumerate(labels)]}
    after = {"resources": ["cpu", "pods"], "zones": [],
             "nodes": [_util_row(f"n{i}", "z", lab, 1000, 250 * i) for i, lab in enumerate(labels)]}
    fit = ("0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu, x: y}, 3 Insufficient cpu. "
           "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
    res = SimulationResult("p", 0, [Placement("a/ok", "n0", "", "Scheduled", "p"),
                                    Placement("a/big", None, "Unschedulable", fit, "p"),
                                    Placement("a/big2", None, "Unschedulable", fit, "p"),
                                    Placement("a/other", None, "NotHandled", "no profile for schedulerName 'x'", "x"),
                                    Placement("a/m", None, "Unschedulable", "PodGroup a/g not placed (0/2 ...)", "p")],
                           before, after)
    view = report_data.build(res)
    by_type = {g["key"]: (g["nodes"], g["after"]["cpu"]) for g in view["byInstanceType"]}
    assert by_type == {"m5.large": (2, 12.5), "p4d.24xlarge": (1, 50.0), "(unlabelled)": (1, 75.0)}
    by_cap = {g["key"]: g["nodes"] for g in view["byCapacityType"]}
    assert by_cap == {"on-demand": 2, "spot": 1, "(unlabelled)": 1}
    assert view["summary"]["placed"] == 1 and view["summary"]["unplaced"] == 4
    assert view["summary"]["reasons"] == [
        {"reason": "Insufficient cpu", "pods": 2},
        {"reason": "node(s) had untolerated taint {dedicated: gpu, x: y}", "pods": 2},
        {"reason": "no profile for the pod's schedulerName", "pods": 1},
        {"reason": "pod group not placed (all or nothing)", "pods": 1}]
    assert view["histograms"]["cpu"]["after"] == [1, 0, 1, 0, 0, 1, 0, 1, 0, 0]
    assert view["nodeBars"] is not None  # small cluster: the per-node bar charts stay


def test_report_explain_matrix_top_nodes_and_failures_by_reason():
    from pysched.tools import report_data
    trace = {"pod": "a/p", "selectedNode": "n7", "result": "Scheduled",
             "filter": [{"plugin": "TaintToleration",
                         "nodes": {"t0": "untolerated", "t1": "untolerated", **{f"n{i}": "passed" for i in range(30)}}},
                        {"plugin": "NodeResourcesFit", "nodes": {"n0": "Insufficient cpu",
                                                                 **{f"n{i}": "passed" for i in range(1, 30)}}}],
             "score": {"Fit": {f"n{i}": {"raw": i, "normalized": i, "weighted": i} for i in range(1, 30)}},
             "totalScores": {f"n{i}": 100 if i != 7 else 90 for i in range(1, 30)}, "feasibleNodes": []}
    m = report_data._explain_matrix(trace)
    assert len(m["top"]) == report_data.TOP_NODES and "n7" in [r["node"] for r in m["top"]]  # the winner is shown
    assert [(f["plugin"], f["reason"], f["count"]) for f in m["failed"]] == [
        ("TaintToleration", "untolerated", 2), ("NodeResourcesFit", "Insufficient cpu", 1)]
    assert m["failedNodes"] == 3 and m["evaluated"] == 32


# -- load-aware what-ifs ----------------------------------------------------------------------------

LOAD_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pysched
  plugins:
    multiPoint:
      enabled: [{name: TargetLoadPacking, weight: 10}]
  pluginConfig:
  - name: TargetLoadPacking
    args:
      metricProvider: {type: Prometheus, address: "http://127.0.0.1:9090"}
"""


def test_metrics_file_puts_load_into_simulate_and_explain(tmp_path, capsys):
    snap = write(tmp_path, "s.yaml", [as_list([make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)])])
    pods = write(tmp_path, "p.yaml", [make_pod("web", cpu="1", memory="1Gi")])
    cfg = write(tmp_path, "c.yaml", LOAD_CONFIG)
    # n1 at 15 %: the pod's 1.5 cores take it to 52.5 %; n0 at 0 % -> 37.5 %, n2 at 90 % -> over 100
    metrics = write(tmp_path, "m.yaml", "nodes: {n0: {cpu: 0}, n1: {cpu: 15}, n2: {cpu: 90}}\n")
    args = SimpleNamespace(config=cfg, cluster=snap, pods=pods, explain=["default/web"], report=None, seed=0,
                           output="text", plugin_module=[], metrics_file=metrics)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Explain default/web: n0" in out          # 37.5 % is nearest the 40 % target
    assert "TargetLoadPacking read:" in out
    assert "n2: cpu sample 90.0 (0s old); pending 0m; pod 1500m; predicted 127.5% of 4000m" in out
    # Without the file the plugin falls back (Neutral) and says so; the pod still schedules.
    args.metrics_file = None
    assert main(args) == 0
    assert "n2: cpu source down: fallback Neutral" in capsys.readouterr().out


def test_bad_metrics_file_is_bad_input_naming_the_field(tmp_path, capsys):
    snap = write(tmp_path, "s.yaml", [as_list(nodes3())])
    pods = write(tmp_path, "p.yaml", [make_pod("web")])
    metrics = write(tmp_path, "m.yaml", "nodes: {n0: {cpu: lots}}\n")
    args = SimpleNamespace(config=None, cluster=snap, pods=pods, explain=[], report=None, seed=0, output="text",
                           plugin_module=[], metrics_file=metrics)
    assert main(args) == 2
    assert f"--metrics-file: {metrics}: nodes.n0.cpu: expected a number, got 'lots'" in capsys.readouterr().err
