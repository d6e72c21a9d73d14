"""pysched simulate, the frictions a newcomer hit (issue 39, item 5): --explain by workload or glob,
supporting objects in --pods, a --pods pod already in the snapshot, --scale, the grouped text
explain, --metrics-file without a Prometheus address, and a report that records what reproduces it
(configuration, inputs) and how each pod was sampled and picked."""

import hashlib
import json
from types import SimpleNamespace

import pytest
import yaml

from pysched.cli import build_parser
from pysched.tools import report_data
from pysched.tools.offline import natural_key
from pysched.tools.report import render
from pysched.tools.simulate import format_explain, format_text, main, prepare
from pysched.tools.snapshot import SnapshotError, load_pods
from pysched.tools.workloads import deletion_order, parse_scale
from pysched_dev.testkit import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
CONTAINERS = [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
GROUP = "scheduling.x-k8s.io/pod-group"


def write(tmp_path, name, docs) -> str:
    p = tmp_path / name
    p.write_text(docs if isinstance(docs, str) else yaml.safe_dump_all(docs))
    return str(p)


def as_list(items):
    return {"apiVersion": "v1", "kind": "List", "items": items}


def workload(kind, name, replicas=None, ns="shop", **spec):
    labels = {"app": name}
    body = {"template": {"metadata": {"labels": labels}, "spec": {"containers": CONTAINERS}}, **spec}
    if kind != "Job":
        body["selector"] = {"matchLabels": labels}
    if replicas is not None:
        body["replicas"] = replicas
    api = {"Job": "batch/v1"}.get(kind, "apps/v1")
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": body}


def nodes(n=3, **kw):
    return [make_node(f"n{i}", cpu="4", memory="16Gi", labels={ZONE: f"z{i % 3}"}, **kw) for i in range(n)]


def args_for(tmp_path, snapshot_items, pod_docs, **kw):
    base = dict(config=None, cluster=write(tmp_path, "s.yaml", [as_list(snapshot_items)]),
                pods=write(tmp_path, "p.yaml", pod_docs), explain=[], report=None, seed=0, output="json",
                plugin_module=[], add_nodes=[], scale=[], metrics_file=None, explain_nodes="summary")
    base.update(kw)
    return SimpleNamespace(**base)


def run(tmp_path, snapshot_items, pod_docs, explain=(), **kw):
    simulation, snap, pods, extra = prepare(args_for(tmp_path, snapshot_items, pod_docs, **kw))
    notes = extra.pop("notes")
    res = simulation.run(snap, pods, explain=list(explain), **extra)
    res.notes.extend(notes)
    return simulation, res


def main_json(tmp_path, capsys, snapshot_items, pod_docs, **kw):
    code = main(args_for(tmp_path, snapshot_items, pod_docs, **kw))
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip().startswith("{") else None), captured.err


def by_pod(res):
    return {p.pod: p for p in res.placements}


# -- --explain: a workload, a glob ---------------------------------------------------------------

def snapshot_deployment(name="web", ns="shop", bound=(), pending=(), rs_hash="5f7d9"):
    """A Deployment's ReplicaSet as a live cluster holds it, and pods it owns (bound: (pod, node))."""
    rs_name = f"{name}-{rs_hash}"
    labels = {"app": name, "pod-template-hash": rs_hash}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": rs_name, "namespace": ns, "uid": f"uid-{rs_name}", "labels": labels,
                       "annotations": {"deployment.kubernetes.io/revision": "3"},
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                            "uid": f"uid-{name}", "controller": True}]},
          "spec": {"replicas": len(bound) + len(pending), "selector": {"matchLabels": labels},
                   "template": {"metadata": {"labels": labels},
                                "spec": {"schedulerName": "pysched", "containers": CONTAINERS}}}}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name, "uid": f"uid-{rs_name}",
             "controller": True}
    pods = []
    for i, (pod_name, node) in enumerate([*bound, *((p, None) for p in pending)]):
        p = make_pod(pod_name, namespace=ns, cpu="500m", memory="1Gi", labels=labels, owner=owner, node_name=node)
        p["metadata"]["creationTimestamp"] = f"2025-06-01T00:00:{i:02d}Z"
        pods.append(p)
    return rs, pods


def test_explain_takes_a_workload_or_a_glob_instead_of_generated_names(tmp_path):
    rs, snap_pods = snapshot_deployment("api", pending=["api-5f7d9-aaaaa"])
    docs = [workload("Deployment", "web", replicas=3), workload("Job", "batch", parallelism=2),
            make_pod("web-standalone", namespace="shop"), make_pod("other", namespace="shop")]
    items = [*nodes(), rs, *snap_pods]
    _, res = run(tmp_path, items, docs, explain=["deployment/shop/web"])
    web = sorted(p.pod for p in res.placements if p.owner == "Deployment web")
    assert len(web) == 3 and sorted(res.explain) == web           # every pod of it, nothing else
    # kubectl's short names; a Job; a pending snapshot pod found through its ReplicaSet's owner
    _, res = run(tmp_path, items, docs, explain=["deploy/shop/web", "job/shop/batch", "deployment/shop/api"])
    jobs = [p.pod for p in res.placements if p.owner == "Job batch"]
    assert len(jobs) == 2 and set(res.explain) == {*web, *jobs, "shop/api-5f7d9-aaaaa"}
    # a glob over ns/name: the Deployment's pods (web-<hash>-<suffix>) and web-standalone, not "other"
    _, res = run(tmp_path, items, docs, explain=["shop/web-*"])
    assert sorted(res.explain) == sorted([*web, "shop/web-standalone"])
    # the exact name still works; a pattern that names nothing says so
    _, res = run(tmp_path, items, docs, explain=["shop/other", "statefulset/shop/nope"])
    assert list(res.explain) == ["shop/other"]
    assert any(n.startswith("--explain statefulset/shop/nope: no pod scheduled here matches it") for n in res.notes)


def test_explain_flag_help_and_parser_take_the_new_flags():
    args = build_parser().parse_args(["simulate", "--cluster", "c", "--pods", "p", "--explain", "deployment/a/b",
                                      "--scale", "deployment/a/b=3", "--explain-nodes", "all"])
    assert args.explain == ["deployment/a/b"] and args.scale == ["deployment/a/b=3"] and args.explain_nodes == "all"
    assert build_parser().parse_args(["simulate", "--cluster", "c", "--pods", "p"]).explain_nodes == "summary"


# -- supporting objects in --pods ---------------------------------------------------------------

COSCHED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pysched
  plugins:
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
    multiPoint: {enabled: [{name: Coscheduling}]}
"""


def test_pod_file_takes_podgroups_priorityclasses_pdbs_and_elasticquotas(tmp_path):
    pg = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
          "metadata": {"name": "gang", "namespace": "ml"}, "spec": {"minMember": 2}}
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
          "value": 5000}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "ml"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    eq = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
          "metadata": {"name": "quota", "namespace": "ml"}, "spec": {"max": {"cpu": "8"}}}
    members = [make_pod(f"m{i}", namespace="ml", labels={GROUP: "gang"}) for i in range(2)]
    for m in members:     # one priority: the pod-group cycle refuses a gang whose members disagree
        m["spec"]["priorityClassName"] = "urgent"
    cfg = write(tmp_path, "c.yaml", COSCHED)
    simulation, res = run(tmp_path, nodes(), [pg, pc, pdb, eq, *members], config=cfg)
    assert [g["verdict"] for g in res.groups] == ["placed"]            # the PodGroup came from --pods
    assert all(p.node for p in res.placements)
    store = simulation.sim.objects
    assert store.get("poddisruptionbudgets", "ml/db") is not None and store.get("elasticquotas", "ml/quota")
    trace_pod = next(p for p in simulation.sim.cache.pods.values() if p.name == "m0")
    assert trace_pod.priority == 5000                                   # priorityClassName resolved from --pods
    # a bad supporting object is bad input naming the field; unknown kinds are still refused
    bad = dict(pc, value="high")
    with pytest.raises(SnapshotError, match=r"PriorityClass urgent \(document 1\): value: required: an integer"):
        load_pods(write(tmp_path, "bad.yaml", [bad, members[0]]), None, [])
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(SnapshotError, match="kind: expected Pod or one of .*PodGroup.*got 'ConfigMap'"):
        load_pods(write(tmp_path, "cm.yaml", [cm]), None, [])


def test_elasticquotas_and_deployments_in_the_snapshot_are_kept(tmp_path):
    eq = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
          "metadata": {"name": "quota", "namespace": "ml"}, "spec": {"max": {"cpu": "8"}}}
    simulation, res = run(tmp_path, [*nodes(), eq, workload("Deployment", "web", replicas=0)], [make_pod("x")])
    assert simulation.sim.objects.get("elasticquotas", "ml/quota") is not None
    assert not any("ignored objects" in n for n in res.notes)


# -- a --pods pod already in the snapshot ---------------------------------------------------------

def test_a_pod_already_in_the_snapshot_is_updated_not_placed_twice(tmp_path):
    bound = make_pod("web", namespace="shop", cpu="3", memory="1Gi", node_name="n0", scheduler="default-scheduler")
    pending = make_pod("queued", namespace="shop", cpu="1", scheduler="pysched")
    items = [*nodes(), bound, pending]
    new_web = make_pod("web", namespace="shop", cpu="1", memory="1Gi")
    _, res = run(tmp_path, items, [new_web, make_pod("queued", namespace="shop", cpu="2")])
    pods = [p.pod for p in res.placements]
    assert sorted(pods) == ["shop/queued", "shop/web"]                  # each once, from --pods
    assert all(p.source == "pods" for p in res.placements)
    before = {n["node"]: n["requested"]["cpu"] for n in res.before["nodes"]}
    after = sum(n["requested"]["cpu"] for n in res.after["nodes"])
    assert before["n0"] == 0 and after == 3000                        # the old 3-cpu copy no longer counts
    note = next(n for n in res.notes if "treated as updates" in n)
    assert "shop/web (on n0)" in note and "shop/queued (pending)" in note


# -- --scale -------------------------------------------------------------------------------------

def test_scale_up_a_snapshot_deployment_creates_pods_as_its_replicaset_would(tmp_path):
    rs, snap_pods = snapshot_deployment("web", bound=[("web-5f7d9-aaaaa", "n0"), ("web-5f7d9-bbbbb", "n1")])
    simulation, res = run(tmp_path, [*nodes(), rs, *snap_pods], [make_pod("x", namespace="shop")],
                          scale=["deployment/shop/web=5"])
    scaled = [p for p in res.placements if p.source == "scale"]
    assert len(scaled) == 3 and all(p.node for p in scaled) and all(p.owner == "Deployment web" for p in scaled)
    names = [p.pod for p in scaled]
    assert len(set(names)) == 3 and all(n.startswith("shop/web-5f7d9-") for n in names)
    created = [p for p in simulation.sim.cache.pods.values() if p.owner_kind == "ReplicaSet"]
    assert len(created) == 5 and {p.owner_name for p in created} == {"web-5f7d9"}
    assert any("Deployment shop/web (ReplicaSet web-5f7d9) had 2 pod(s) in the snapshot; 3 pod(s) created to make 5"
               in n for n in res.notes)
    # the scaled pods can be explained by their workload
    _, res = run(tmp_path, [*nodes(), rs, *snap_pods], [make_pod("x", namespace="shop")],
                 scale=["deployment/shop/web=5"], explain=["deployment/shop/web"])
    assert len(res.explain) == 3


def test_scale_down_removes_pods_not_on_a_node_first_then_the_newest(tmp_path):
    rs, snap_pods = snapshot_deployment("web", bound=[("web-5f7d9-old", "n0"), ("web-5f7d9-mid", "n1"),
                                                      ("web-5f7d9-new", "n2")], pending=["web-5f7d9-queued"])
    _, res = run(tmp_path, [*nodes(), rs, *snap_pods], [make_pod("x", namespace="shop", cpu="10m")],
                 scale=["deployment/shop/web=2"])
    before = {n["node"]: n["requested"]["pods"] for n in res.before["nodes"]}
    # queued (no node) and then the newest bound one (web-new on n2) went; old and mid stay
    assert [p.pod for p in res.placements] == ["shop/x"]
    assert before == {"n0": 1, "n1": 1, "n2": 0}
    note = next(n for n in res.notes if n.startswith("--scale deployment/shop/web=2"))
    assert note.endswith("2 removed to make 2 (not yet on a node first, then the newest): shop/web-5f7d9-queued, "
                         "shop/web-5f7d9-new")
    order = deletion_order(snap_pods)
    assert [p["metadata"]["name"] for p in order] == ["web-5f7d9-queued", "web-5f7d9-new", "web-5f7d9-mid",
                                                      "web-5f7d9-old"]


def test_scale_a_statefulset_by_ordinals_and_a_workload_in_the_pod_file(tmp_path):
    ss = workload("StatefulSet", "db", replicas=2)
    ss["metadata"]["uid"] = "uid-db"
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-db", "controller": True}
    snap_pods = [make_pod(f"db-{i}", namespace="shop", node_name=f"n{i}", owner=owner) for i in range(2)]
    _, res = run(tmp_path, [*nodes(), ss, *snap_pods], [make_pod("x", namespace="shop")],
                 scale=["statefulset/shop/db=4"])
    assert sorted(p.pod for p in res.placements if p.source == "scale") == ["shop/db-2", "shop/db-3"]
    _, res = run(tmp_path, [*nodes(), ss, *snap_pods], [make_pod("x", namespace="shop")],
                 scale=["sts/shop/db=1"])
    assert any(n.endswith("1 removed to make 1 (not yet on a node first, then the newest): shop/db-1")
               for n in res.notes)
    # a Deployment the snapshot holds without any ReplicaSet: expanded from its template
    _, res = run(tmp_path, [*nodes(), workload("Deployment", "api", replicas=1)], [make_pod("x", namespace="shop")],
                 scale=["deployment/shop/api=2"])
    assert [p.owner for p in res.placements if p.source == "scale"] == ["Deployment api"] * 2
    # a Deployment in --pods: expanded with the replicas asked for
    _, res = run(tmp_path, nodes(), [workload("Deployment", "web", replicas=2)], scale=["deployment/shop/web=4"])
    assert len(res.placements) == 4 and all(p.source == "pods" for p in res.placements)
    assert "--scale deployment/shop/web=4: Deployment shop/web from --pods: 4 pod(s) created (the file says 2 " \
           "replica(s))" in res.notes


def test_scale_errors_are_bad_input(tmp_path, capsys):
    code, _, err = main_json(tmp_path, capsys, nodes(), [make_pod("x")], scale=["deployment/shop/nope=3"])
    assert code == 2 and "--scale deployment/shop/nope=3: no Deployment shop/nope in --pods" in err
    code, _, err = main_json(tmp_path, capsys, nodes(), [make_pod("x")], scale=["job/shop/x=3"])
    assert code == 2 and "expected KIND/NAMESPACE/NAME=REPLICAS" in err
    with pytest.raises(Exception, match="replicas: expected a non-negative integer"):
        parse_scale("deployment/a/b=-1")


def test_a_pod_file_workload_already_running_in_the_snapshot_gets_a_note(tmp_path):
    rs, snap_pods = snapshot_deployment("web", bound=[("web-5f7d9-aaaaa", "n0")])
    _, res = run(tmp_path, [*nodes(), rs, *snap_pods], [workload("Deployment", "web", replicas=1)])
    assert any(n.startswith("Deployment shop/web in --pods already has 1 pod(s) in the snapshot") for n in res.notes)


# -- the grouped text explain ---------------------------------------------------------------------

def test_text_explain_groups_nodes_by_verdict_and_sorts_them_naturally(tmp_path):
    ns = nodes(12)
    for n in ns[1:10]:
        n["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    ns[11]["status"]["allocatable"]["cpu"] = ns[11]["status"]["capacity"]["cpu"] = "100m"
    _, res = run(tmp_path, ns, [make_pod("web", cpu="500m")], explain=["default/web"])
    text = format_text(res)
    assert "    9 nodes: TaintToleration: node(s) had untolerated taint(s)  [n1, n2, n3, n4, n5, +4 more]" in text
    assert "    1 node: NodeResourcesFit: Insufficient cpu  [n11]" in text
    trace = res.explain["default/web"]
    best = res.placements[0].node
    # n0 and n10 tie (zones z0 and z1, both empty): the line names the one the seed picked
    assert f"    2 nodes: passed, best score {trace['totalScores'][best]} ({best}, tied with 1 more)  [n0, n10]" in text
    assert f"Tie: 2 node(s) share the top score {trace['totalScores'][best]} (n0, n10); the seeded tie-break " \
           f"picked {best}" in text
    assert "n1: " not in text                                     # no per-node rows by default
    full = format_explain(trace, "all")
    rows = [line.split()[0] for line in full.splitlines() if line.startswith("    n") and "TaintToleration" in line]
    assert rows == [f"n{i}" for i in range(1, 10)]                 # naturally sorted, every node
    assert full.index("    n2 ") < full.index("    n10 ")
    assert sorted(["n10", "n2", "n1", "a", "n1b"], key=natural_key) == ["a", "n1", "n1b", "n2", "n10"]


# -- --metrics-file without a Prometheus address -------------------------------------------------

def load_config(provider: str) -> str:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pysched
  plugins:
    multiPoint:
      enabled: [{{name: TargetLoadPacking, weight: 10}}]
{provider}"""


@pytest.mark.parametrize("provider", [
    "",                                                                   # no pluginConfig at all
    "  pluginConfig:\n  - name: TargetLoadPacking\n    args: {metricProvider: {type: Prometheus}}\n",
    "  pluginConfig:\n  - name: TargetLoadPacking\n    args: {metricProvider: {type: Prometheus, address: "
    "'http://prom:9090', bearerTokenFile: /var/run/absent/token}}\n",
])
def test_metrics_file_needs_no_prometheus_address(tmp_path, capsys, provider):
    cfg = write(tmp_path, "c.yaml", load_config(provider))
    metrics = write(tmp_path, "m.yaml", "nodes: {n0: {cpu: 0}, n1: {cpu: 15}, n2: {cpu: 90}}\n")
    code, out, _ = main_json(tmp_path, capsys, nodes(), [make_pod("web", cpu="1")], config=cfg,
                             metrics_file=metrics, explain=["default/web"])
    assert code == 0
    notes = out["explain"]["default/web"]["scoreNotes"]["TargetLoadPacking"]
    assert notes["n2"].startswith("cpu sample 90.0")                   # the file's load was read
    assert any("TargetLoadPacking reads its load from --metrics-file" in n for n in out["notes"])
    # without the file, the configuration is checked as the live scheduler checks it
    if "address: 'http" not in provider:
        code, _, err = main_json(tmp_path, capsys, nodes(), [make_pod("web", cpu="1")], config=cfg)
        assert code == 2 and "with --metrics-file the load-aware plugins read the file" in err


# -- what reproduces a result; sampling and ties ----------------------------------------------------

def test_json_and_report_record_config_inputs_and_flags(tmp_path, capsys):
    report = tmp_path / "r.html"
    args = args_for(tmp_path, nodes(), [make_pod("web")], report=str(report), seed=7,
                    add_nodes=["n0:2"], explain=["default/web"])
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    files = out["inputs"]["files"]
    for name, path in (("cluster", args.cluster), ("pods", args.pods)):
        with open(path, "rb") as f:
            assert files[name] == {"file": path, "sha256": hashlib.sha256(f.read()).hexdigest(),
                                   "bytes": len(open(path, "rb").read())}
    assert out["inputs"]["flags"]["seed"] == 7 and out["inputs"]["flags"]["addNodes"] == ["n0:2"]
    assert "--add-nodes n0:2" in out["inputs"]["command"] and "--seed 7" in out["inputs"]["command"]
    assert out["config"]["kind"] == "KubeSchedulerConfiguration"
    assert out["config"]["profiles"][0]["schedulerName"] == "pysched"
    assert out["config"]["profiles"][0]["pluginConfig"]          # defaults applied: every plugin's args
    page = report.read_text()
    assert "Reproduce this run" in page and files["cluster"]["sha256"] in page
    assert "Effective KubeSchedulerConfiguration" in page and "NodeResourcesFitArgs" in page
    embedded = json.loads(page.split('id="sim-data">')[1].split("</script>")[0])
    assert embedded["inputs"]["files"]["pods"]["sha256"] == files["pods"]["sha256"]
    assert embedded["config"]["profiles"][0]["schedulerName"] == "pysched"


def test_nodes_left_unevaluated_by_percentage_of_nodes_to_score_and_ties_are_reported(tmp_path, capsys):
    # 150 identical nodes: numFeasibleNodesToFind is 100 (50 - 150/125 = 49 %, at least 100), so the
    # search stops after 100 feasible nodes and 50 are never evaluated; all 100 scored tie.
    many = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(150)]
    code, out, _ = main_json(tmp_path, capsys, many, [make_pod("a"), make_pod("b")])
    assert code == 0
    first = out["placements"][0]["sampling"]
    assert (first["candidates"], first["numFeasibleNodesToFind"], first["notEvaluated"]) == (150, 100, 50)
    assert first["tiedAtTop"] == 100 and first["picked"] == out["placements"][0]["node"]
    assert first["picked"] in first["tied"] or len(first["tied"]) < first["tiedAtTop"]
    assert out["sampling"] == {"podsWithNodesNotEvaluated": 2, "maxNodesNotEvaluated": 50,
                               "podsWithTiesAtTop": 2, "maxTiedAtTop": out["sampling"]["maxTiedAtTop"]}
    # the same counts with an explain trace (it filters every node, but scores the same sample)
    code, explained, _ = main_json(tmp_path, capsys, many, [make_pod("a"), make_pod("b")], explain=["default/a"])
    assert explained["placements"][0]["sampling"] == first
    trace = explained["explain"]["default/a"]
    assert trace["sampling"]["notEvaluated"] == 50 and len(trace["totalScores"]) == 100
    _, res = run(tmp_path, many, [make_pod("a")], explain=["default/a"])
    text = format_text(res)
    assert "50 of 150 candidate node(s) are not evaluated" in text
    assert f"Tie: 100 node(s) share the top score {first['topScore']}" in text
    assert "50 nodes: passed, not scored (percentageOfNodesToScore" in text
    assert any(n.startswith("percentageOfNodesToScore: 1 pod(s) were scheduled from a sample") for n in res.notes)
    view = report_data.build(res)
    cols = view["podColumns"]
    row = view["pods"][0]
    assert row[cols.index("nodes not evaluated")] == 50 and row[cols.index("tied at top")] == 100
    assert view["summary"]["sampling"]["podsWithNodesNotEvaluated"] == 1
    assert view["explain"][0]["sampling"]["notEvaluated"] == 50
    assert "pods placed from a node sample" in render(res)
    # a small cluster: every node is evaluated, nothing is cut
    _, small = run(tmp_path, nodes(), [make_pod("a")])
    assert small.placements[0].sampling["notEvaluated"] == 0
