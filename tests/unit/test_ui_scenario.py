"""pysched ui: the Scenario (loading, queue order, what a run is given) without the server."""

import copy

import pytest
import yaml

from pysched.testing.objects import make_node, make_pod
from pysched.tools.snapshot import Snapshot, load_snapshot, read_objects
from pysched.ui import runner
from pysched.ui.scenario import Scenario, ScenarioError


def test_from_snapshot_takes_a_pods_file_as_read_objects_reads_it(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all([
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"}, "value": 10},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                  "template": {"metadata": {"labels": {"app": "db"}},
                               "spec": {"schedulerName": "pysched", "priorityClassName": "batch",
                                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                  "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                      "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
        make_pod("solo"),
    ]))
    snapshot = Snapshot(nodes=[make_node("n0"), make_node("n1")],
                        pods=[make_pod("done", node_name="n0"), dict(make_pod("gone", node_name="n0"),
                                                                     status={"phase": "Succeeded"})])
    sc = Scenario.from_snapshot(snapshot, [o for o, _ in read_objects(path)])
    assert sc.version == 0 and sc.skipped_terminated == 1
    assert set(sc.pods) == {"default/done", "default/solo", "default/db-0", "default/db-1"}
    assert {k for k in sc.objects} == {("PriorityClass", "batch"), ("StatefulSet", "default/db"),
                                       ("PersistentVolumeClaim", "default/data-db-0"),
                                       ("PersistentVolumeClaim", "default/data-db-1")}
    rows = {p["key"]: p for p in sc.as_dict()["pods"]}
    assert rows["default/db-1"]["owner"] == "StatefulSet/db" and rows["default/db-1"]["priority"] == 10
    run = runner.run(sc)
    # the claims have no StorageClass nor volume to bind: VolumeBinding keeps the StatefulSet pending
    assert run.nodes == {"default/db-0": None, "default/db-1": None, "default/solo": "n1"}

    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(snapshot, [make_pod("ok"), make_pod("bad", memory="lots")])
    assert str(err.value) == "document 1: spec.containers[0].resources.requests.memory: invalid quantity 'lots'"
    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(snapshot, None, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n")
    assert err.value.errors[0].field == "kind"


def test_a_run_changes_nothing_it_was_given():
    nodes = [make_node(f"n{i}", cpu="2", labels={"topology.kubernetes.io/zone": f"z{i % 2}"}) for i in range(4)]
    gang = [make_pod(f"g{i}", cpu="500m", labels={"scheduling.x-k8s.io/pod-group": "g"}) for i in range(3)]
    spread = [make_pod(f"s{i}", labels={"app": "s"}, spread=[{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}}}]) for i in range(4)]
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                           "schedulerName": "pysched", "containers": [{"name": "c"}]}}}}
    pg = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"},
          "spec": {"minMember": 3}}
    sc = Scenario.from_snapshot(Snapshot(nodes=nodes, pods=[make_pod("b", node_name="n0")]),
                                [pg, deploy, *gang, *spread, make_pod("huge", cpu="64")])
    state = sc.freeze()
    before = copy.deepcopy((state.nodes, state.bound, state.pending, state.objects))
    r = runner.run(state)
    runner.explain(r, "default/s3")
    assert (state.nodes, state.bound, state.pending, state.objects) == before
    assert r.pending == 1 and r.placed == len(state.pending) - 1


def test_queue_order_export_and_admitted_priorities(tmp_path):
    stamped = [dict(make_pod(name), metadata=dict(make_pod(name)["metadata"], creationTimestamp=ts))
               for name, ts in (("late", "2025-01-02T00:00:00Z"), ("early", "2025-01-01T00:00:00Z"))]
    admitted = make_pod("admitted", priority=500)
    admitted["spec"]["priorityClassName"] = "from-the-cluster"      # not in the scenario
    gated = make_pod("gated", gates=["wait"])
    sc = Scenario.from_snapshot(Snapshot(nodes=[make_node("n0")], pods=[*stamped, admitted, gated]),
                                [make_pod("added")])
    state = sc.freeze()
    # oldest first; pods without creationTimestamp after, in the order they came
    assert [p["metadata"]["name"] for p in state.pending] == ["early", "late", "admitted", "gated", "added"]
    assert [p["metadata"]["name"] for p in state.to_schedule()] == ["early", "late", "admitted", "added"]
    r = runner.run(state)
    assert set(r.nodes) == {"default/early", "default/late", "default/admitted", "default/added"}
    row = next(p for p in sc.as_dict()["pods"] if p["key"] == "default/admitted")
    assert row["priority"] == 500 and row["state"] == "pending"
    assert next(p for p in sc.as_dict()["pods"] if p["key"] == "default/gated")["state"] == "pending"
    # a new pod naming an unknown class is refused, as the API server would
    with pytest.raises(ScenarioError) as err:
        sc.apply_objects([dict(make_pod("new"), spec=dict(make_pod("new")["spec"], priorityClassName="nope"))])
    assert err.value.errors[0].field == "spec.priorityClassName"

    path = tmp_path / "export.yaml"
    path.write_text(sc.export_yaml())
    again = Scenario.from_snapshot(load_snapshot(path))
    assert [p["metadata"]["name"] for p in again.freeze().pending] == ["early", "late", "admitted", "gated", "added"]
    assert runner.run(again).nodes == r.nodes


def test_node_rows_leave_out_labels_that_repeat_others():
    node = make_node("n0", labels={"topology.kubernetes.io/zone": "a", "failure-domain.beta.kubernetes.io/zone": "a",
                                   "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "arm64",
                                   "node.kubernetes.io/instance-type": "m5.large", "eks.amazonaws.com/capacityType":
                                   "SPOT"})
    row = Scenario.from_snapshot(Snapshot(nodes=[node])).as_dict()["nodes"][0]
    assert row["labels"] == {"kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "a",
                             "beta.kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "m5.large",
                             "eks.amazonaws.com/capacityType": "SPOT"}
    assert (row["zone"], row["instanceType"], row["capacityType"]) == ("a", "m5.large", "spot")
    bare = Scenario.from_snapshot(Snapshot(nodes=[make_node("n1")])).as_dict()["nodes"][0]
    assert (bare["zone"], bare["instanceType"], bare["capacityType"]) == ("(no zone)", "(unlabelled)", "(unlabelled)")


def test_a_snapshot_or_pods_file_beyond_the_limits_is_refused_at_load(tmp_path, capsys):
    from pysched.cli import parse_args
    from pysched.ui.command import main
    from pysched.ui.limits import Limits

    nodes = [make_node(f"n{i}") for i in range(3)]
    bound = [make_pod(f"b{i}", node_name="n0") for i in range(3)]
    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), limits=Limits(max_nodes=2))
    assert str(err.value) == "the snapshot holds 3 nodes, more than the limit of 2 (pysched ui --max-nodes)"
    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), limits=Limits(max_pods=2))
    assert str(err.value) == "the snapshot holds 3 pods, more than the limit of 2 (pysched ui --max-pods)"
    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), limits=Limits(max_scenario_bytes=1000))
    assert str(err.value).startswith("the snapshot holds ") and str(err.value).endswith(
        "bytes of objects (as JSON), more than the limit of 1,000 bytes (pysched ui --max-scenario-bytes)")
    with pytest.raises(ScenarioError) as err:
        Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), [make_pod("p0"), make_pod("p1")],
                               limits=Limits(max_pods=4))
    assert str(err.value) == ("document 1: the scenario would hold 5 pods, more than the limit of 4 "
                              "(pysched ui --max-pods)")

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes + bound}))
    assert main(parse_args(["ui", "--cluster", str(cluster), "--max-nodes", "2"])) == 2
    assert capsys.readouterr().err == ("pysched ui: the snapshot holds 3 nodes, more than the limit of 2 "
                                       "(pysched ui --max-nodes)\n")
    args = parse_args(["ui", "--max-scenario-bytes", "1Gi", "--max-request-bytes", "1048576", "--max-pods", "5_000",
                       "--allow-host", "ui.lab"])
    assert (args.max_scenario_bytes, args.max_request_bytes, args.max_pods, args.allow_host) == (
        2**30, 2**20, 5000, ["ui.lab"])
    assert (parse_args(["ui"]).max_pods, parse_args(["ui"]).max_nodes) == (100_000, 20_000)
    for bad in (["--max-pods", "0"], ["--max-nodes", "many"], ["--max-scenario-bytes", "lots"]):
        with pytest.raises(SystemExit) as exit_:
            parse_args(["ui", *bad])
        assert exit_.value.code == 2
    assert bad[0] in capsys.readouterr().err


def test_the_scenario_size_follows_every_change():
    from pysched.ui.scenario import json_size

    def actual(sc: Scenario) -> int:
        return sum(json_size(o) for o in (*sc.nodes.values(), *sc.pods.values(), *sc.objects.values()))
    sc = Scenario.from_snapshot(Snapshot(nodes=[make_node("n0"), make_node("n1")],
                                         pods=[make_pod("b", node_name="n1")]), [make_pod("p")])
    assert sc.json_bytes == actual(sc) > 0
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}}}
    sc.apply_objects([deploy])
    assert sc.json_bytes == actual(sc)
    sc.apply_objects([dict(deploy, spec=dict(deploy["spec"], replicas=1))])
    sc.clone_node("n0", 2)
    sc.delete_node("n1")             # its pod becomes pending (a smaller copy)
    sc.delete_pod("default/p")
    assert sc.json_bytes == actual(sc) == sc.freeze().json_bytes
    sc.apply_objects([deploy], "delete")
    assert sc.json_bytes == actual(sc)
