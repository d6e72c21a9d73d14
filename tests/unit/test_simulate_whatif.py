"""pysched simulate: workloads expanded into Pods, pending snapshot pods, --add-nodes, exit codes."""

import copy
import json
from types import SimpleNamespace

import pytest
import yaml

from pysched.cli import build_parser
from pysched.framework.podinfo import PodInfo
from pysched.tools import simulate as simulate_mod
from pysched.tools.simulate import Simulation, format_text, main, prepare
from pysched.tools.snapshot import SnapshotError, load_snapshot
from pysched_dev.testkit import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
CONTAINERS = [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]


def write(tmp_path, name, docs) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs))
    return str(p)


def as_list(items):
    return {"apiVersion": "v1", "kind": "List", "items": items}


def workload(kind, name, replicas=None, labels=None, **spec):
    labels = labels or {"app": name}
    # a copy: a test that breaks one workload's containers must not break the next test's
    body = {"template": {"metadata": {"labels": labels}, "spec": {"containers": copy.deepcopy(CONTAINERS)}}, **spec}
    if kind != "Job":
        body["selector"] = {"matchLabels": labels}
    if replicas is not None:
        body["replicas"] = replicas
    api = {"Job": "batch/v1"}.get(kind, "apps/v1")
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "shop"}, "spec": body}


def args_for(tmp_path, snapshot_items, pod_docs, **kw):
    base = dict(config=None, cluster=write(tmp_path, "s.yaml", [as_list(snapshot_items)]),
                pods=write(tmp_path, "p.yaml", pod_docs), explain=[], report=None, seed=0, output="json",
                plugin_module=[], add_nodes=[])
    base.update(kw)
    return SimpleNamespace(**base)


def nodes3(**kw):
    return [make_node(f"n{i}", cpu="4", memory="16Gi", labels={ZONE: f"z{i}"}, **kw) for i in range(3)]


def run(tmp_path, snapshot_items, pod_docs, **kw):
    simulation, snap, pods, extra = prepare(args_for(tmp_path, snapshot_items, pod_docs, **kw))
    extra.pop("notes")
    return simulation, pods, simulation.run(snap, pods, **extra)


# -- workloads ------------------------------------------------------------------------------

def test_deployment_becomes_a_replicaset_and_its_pods_seen_as_one_workload(tmp_path):
    dep = workload("Deployment", "web", replicas=3)
    simulation, pods, res = run(tmp_path, nodes3(), [dep])
    names = [p["metadata"]["name"] for p in pods]
    assert len(names) == 3 and len(set(names)) == 3
    rs_name = names[0].rsplit("-", 1)[0]
    assert rs_name.startswith("web-") and all(n.startswith(rs_name + "-") and len(n) == len(rs_name) + 6 for n in names)
    # Deterministic: the same file gives the same names.
    assert [p["metadata"]["name"] for p in run(tmp_path, nodes3(), [dep])[1]] == names
    rs = simulation.sim.objects.get("replicasets", f"shop/{rs_name}")
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs_name == f"web-{h}" and rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    for p in pods:
        ref = p["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("ReplicaSet", rs_name, True)
        assert p["metadata"]["labels"] == {"app": "web", "pod-template-hash": h}
        # PodTopologySpread's system-default constraints select the pod's siblings through its owner.
        sel = simulation.sim.objects.default_selector(PodInfo.from_dict(p))
        assert sel is not None and sel.matches(p["metadata"]["labels"]) and not sel.matches({"app": "web"})
    assert all(p.node for p in res.placements) and {p.owner for p in res.placements} == {"Deployment web"}
    # Another template gives another ReplicaSet.
    dep["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert run(tmp_path, nodes3(), [dep])[1][0]["metadata"]["name"].rsplit("-", 1)[0] != rs_name


def test_statefulset_ordinals_and_claims(tmp_path):
    ss = workload("StatefulSet", "db", replicas=3, volumeClaimTemplates=[
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}])
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "x",
          "volumeBindingMode": "WaitForFirstConsumer",
          "metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}
    kept = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-db-0", "namespace": "shop"},
            "spec": {"storageClassName": "old", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}
    simulation, pods, res = run(tmp_path, [*nodes3(), sc, kept], [ss])
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1", "db-2"]
    assert pods[1]["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pods[2]["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-2"}}]
    assert simulation.sim.objects.get("persistentvolumeclaims", "shop/data-db-0")["spec"]["storageClassName"] == "old"
    new = simulation.sim.objects.get("persistentvolumeclaims", "shop/data-db-1")
    assert new["spec"]["storageClassName"] == "std" and new["metadata"]["labels"] == {"app": "db"}
    assert simulation.sim.objects.get("statefulsets", "shop/db") is not None
    assert [p.node is not None for p in res.placements] == [False, True, True]   # class "old" does not exist
    assert "pod has unbound immediate persistentvolumeclaims" in res.placements[0].message.lower()
    assert any("OrderedReady" in n for n in prepare(args_for(tmp_path, [*nodes3(), sc], [ss]))[3]["notes"])


@pytest.mark.parametrize("spec,expected", [
    ({}, 1), ({"parallelism": 3, "completions": 2}, 2), ({"parallelism": 2, "completions": 5}, 2),
    ({"parallelism": 4}, 4), ({"parallelism": 3, "suspend": True}, 0), ({"parallelism": 0}, 0),
])
def test_job_creates_parallelism_pods_at_most_completions(tmp_path, spec, expected):
    _, jobs, res = run(tmp_path, nodes3(), [workload("Job", "batch", **spec)])
    assert len(jobs) == expected and len(res.placements) == expected   # none at all is a valid answer
    for p in jobs:
        assert p["metadata"]["labels"]["job-name"] == "batch" and p["metadata"]["ownerReferences"][0]["kind"] == "Job"


def test_indexed_job_names_carry_the_index(tmp_path):
    job = workload("Job", "idx", parallelism=2, completions=4, completionMode="Indexed")
    _, pods, _ = run(tmp_path, nodes3(), [job])
    assert [p["metadata"]["name"].split("-")[1] for p in pods] == ["0", "1"]
    assert pods[1]["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"


def test_daemonset_one_pod_per_eligible_node_pinned_and_tolerating(tmp_path):
    nodes = nodes3()
    nodes.append(make_node("cordoned", labels={ZONE: "z0"}, unschedulable=True))
    nodes.append(make_node("tainted", labels={ZONE: "z1"}, taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    nodes.append(make_node("windows", labels={"kubernetes.io/os": "windows"}))
    ds = workload("DaemonSet", "agent")
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    _, pods, res = run(tmp_path, nodes, [ds])
    by = {p.pod: p.node for p in res.placements}
    assert sorted(by.values()) == ["cordoned", "n0", "n1", "n2"]   # not the tainted or windows nodes
    for p in pods:
        terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        node = by[f"shop/{p['metadata']['name']}"]
        assert terms == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        keys = {(t["key"], t["effect"]) for t in p["spec"]["tolerations"]}
        assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys   # why it lands on the cordoned node


def test_bad_workloads_name_the_field(tmp_path):
    bad = workload("Deployment", "web")
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(SnapshotError, match=r"Deployment shop/web \(document\): spec.template.metadata.labels: "
                                            "`selector` does not match"):
        prepare(args_for(tmp_path, nodes3(), [bad]))
    bad = workload("ReplicaSet", "web", replicas="3")
    with pytest.raises(SnapshotError, match=r"ReplicaSet shop/web \(document\): spec.replicas: expected a non-neg"):
        prepare(args_for(tmp_path, nodes3(), [bad]))
    bad = workload("Deployment", "web", replicas=1)
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(SnapshotError, match=r"Pod shop/web-\w+-\w+ \(document, from Deployment web spec.template\): "
                                            r"spec.containers\[0\].resources.requests.cpu: invalid quantity"):
        prepare(args_for(tmp_path, nodes3(), [bad]))
    bad = workload("DaemonSet", "agent")
    bad["spec"]["template"]["spec"]["nodeSelector"] = ["oops"]
    with pytest.raises(SnapshotError, match=r"DaemonSet shop/agent \(document\): spec.template.spec.nodeSelector: "
                                            "expected a map"):
        prepare(args_for(tmp_path, nodes3(), [bad]))
    with pytest.raises(SnapshotError, match="kind: expected Pod or one of Deployment"):
        prepare(args_for(tmp_path, nodes3(), [{"apiVersion": "batch/v1", "kind": "CronJob",
                                               "metadata": {"name": "c"}}]))


# -- pending pods in the snapshot -----------------------------------------------------------------

def pending(name, created, **kw):
    p = make_pod(name, cpu="3", memory="1Gi", **kw)
    p["metadata"]["creationTimestamp"] = created
    return p


def test_pending_snapshot_pods_queue_by_priority_then_creation_before_the_file(tmp_path):
    node = make_node("only", cpu="7", memory="16Gi")
    snap = [node, pending("newer", "2026-03-01T00:00:00Z"), pending("older", "2026-02-01T00:00:00Z"),
            pending("gated", "2026-01-01T00:00:00Z", gates=["wait"]),
            pending("theirs", "2026-01-01T00:00:00Z", scheduler="default-scheduler")]
    _, _, res = run(tmp_path, snap, [make_pod("file", cpu="3", memory="1Gi")])
    by = {p.pod: p for p in res.placements}
    # Room for two pods of 3 CPU: the older pending pod, the newer one, then the file's pod.
    assert {p.pod for p in res.placements if p.node} == {"default/older", "default/newer"}
    assert by["default/file"].node is None and by["default/older"].source == "snapshot"
    assert "default/gated" not in by and "default/theirs" not in by
    assert any("not scheduled (schedulingGates)" in n for n in res.notes)
    # A file pod of higher priority goes first.
    _, _, res = run(tmp_path, snap, [make_pod("urgent", cpu="3", memory="1Gi", priority=100)])
    assert {p.pod for p in res.placements if p.node} == {"default/urgent", "default/older"}
    assert json.loads(json.dumps(res.as_dict()))["placements"][1]["source"] == "snapshot"


# -- --add-nodes ------------------------------------------------------------------------------

def test_add_nodes_copies_the_template_and_counts_what_they_took(tmp_path):
    tmpl = make_node("m5-a", cpu="2", memory="8Gi", labels={ZONE: "z9", "pool": "m5"},
                     taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    file_node = tmp_path / "gpu.yaml"
    gpu_taint = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    file_node.write_text(yaml.safe_dump(make_node("gpu", cpu="16", memory="64Gi", extended={"nvidia.com/gpu": "4"},
                                                  taints=gpu_taint)))
    pods = [make_pod(f"p{i}", cpu="1500m", memory="1Gi",
                     tolerations=[{"key": "team", "operator": "Exists", "effect": "NoSchedule"}]) for i in range(3)]
    pods.append(make_pod("train", cpu="1", memory="1Gi", extended={"nvidia.com/gpu": "2"},
                         tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    simulation, _, res = run(tmp_path, [tmpl], pods, add_nodes=["m5-a:2", str(file_node) + ":1", "m5-a:1"])
    nodes = simulation.sim.cache.nodes
    assert sorted(nodes) == ["gpu-sim-0", "m5-a", "m5-a-sim-0", "m5-a-sim-1", "m5-a-sim-2"]
    copy = nodes["m5-a-sim-1"]
    assert copy.labels[ZONE] == "z9" and copy.labels["pool"] == "m5"
    assert copy.labels["kubernetes.io/hostname"] == "m5-a-sim-1"
    assert [t.key for t in copy.taints] == ["team"] and copy.allocatable["cpu"] == 2000
    assert all(p.node for p in res.placements)
    added = {a["template"]: a for a in res.added_nodes}
    assert added["m5-a"]["count"] == 3 and added[str(file_node)]["count"] == 1
    assert added[str(file_node)]["podsPlaced"] == 1                  # train needs the GPU node
    # p0..p2 need a 2-CPU node each: m5-a and its copies.
    on_copies = sum(1 for p in res.placements if p.node and p.node.startswith("m5-a-sim-"))
    assert added["m5-a"]["podsPlaced"] == on_copies >= 2
    assert "Added nodes (--add-nodes)" in format_text(res)


@pytest.mark.parametrize("spec,error", [
    ("n0", "expected TEMPLATE:N"), ("n0:two", "N: 'two' is not an integer"), ("n0:0", "N: must be between 1"),
    ("nope:2", "--add-nodes nope: no node of that name in the snapshot, and no such file"),
])
def test_add_nodes_bad_input_exits_2(tmp_path, capsys, spec, error):
    args = args_for(tmp_path, nodes3(), [make_pod("a")], add_nodes=[spec])
    assert main(args) == 2
    assert error in capsys.readouterr().err


# -- exit codes -------------------------------------------------------------------------------

def test_exit_codes(tmp_path, capsys, monkeypatch):
    from pysched.cli import parse_args
    with pytest.raises(SystemExit) as usage:      # argparse: a missing or malformed flag
        parse_args(["simulate", "--pods", "p.yaml"])
    assert usage.value.code == 2
    assert main(args_for(tmp_path, nodes3(), [make_pod("a")])) == 0
    assert main(args_for(tmp_path, nodes3(), [make_pod("a"), make_pod("huge", cpu="64")])) == 1
    assert main(args_for(tmp_path, nodes3(), [make_pod("other", scheduler="someone-else")])) == 1
    assert main(args_for(tmp_path, nodes3(), [make_pod("a")], report=str(tmp_path / "no" / "dir" / "r.html"))) == 2
    assert "--report: cannot write" in capsys.readouterr().err

    def broken(self, *a, **kw):
        raise KeyError("bug")
    monkeypatch.setattr(simulate_mod.Simulation, "run", broken)
    assert main(args_for(tmp_path, nodes3(), [make_pod("a")])) == 3
    err = capsys.readouterr().err
    assert "internal error" in err and "KeyError: 'bug'" in err


def test_exit_codes_are_in_help_and_docs():
    from pathlib import Path
    help_text = build_parser()._subparsers._group_actions[0].choices["simulate"].format_help()
    readme = (Path(__file__).resolve().parents[2] / "docs" / "simulate-explain-shadow.md").read_text()
    for line in ("0  every pod was placed", "1  at least one pod was not placed", "2  bad input",
                 "3  internal error"):
        assert line in help_text
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |"):
        assert code in readme


def test_snapshot_load_checks_stay_for_snapshots(tmp_path):
    path = write(tmp_path, "s.yaml", [as_list(nodes3())])
    assert len(load_snapshot(path).nodes) == 3
    assert isinstance(Simulation(), Simulation)
