"""``pysched simulate --scale`` in every shape of input a user has (issue 56): a ``--pods`` file of
bare Pods, one holding only the workload (already running in the snapshot, or not), a mix, and no
``--pods`` at all. The workload ends with N pods in total, counting those the snapshot runs, and
one note says what was scaled and to how many; bad values are errors naming the flag."""

import json

import pytest
import yaml

from pysched.cli import build_parser
from pysched.tools.simulate import main
from pysched_dev.testkit import make_pod

from .test_simulate_frictions import args_for, main_json, nodes, run, snapshot_deployment, workload


def web_running(n=2):
    """The snapshot of a cluster where ``kubectl apply -f web.yaml`` made ``n`` pods (a ReplicaSet
    of Deployment shop/web and its pods, bound)."""
    rs, pods = snapshot_deployment("web", bound=[(f"web-5f7d9-p{i}", f"n{i % 3}") for i in range(n)])
    return [*nodes(), rs, *pods]


def scale_notes(res):
    return [n for n in res.notes if "--scale" in n]


def pods_of_web(simulation):
    """Every pod of Deployment shop/web the simulation ends with (bound before, or placed now)."""
    return sorted(p.name for p in simulation.sim.cache.pods.values()
                  if p.namespace == "shop" and p.name.startswith("web-"))


def test_a_workload_in_pods_already_running_is_scaled_to_a_total_not_added_on_top(tmp_path):
    # the case: the Deployment file that was applied, and --scale for it
    simulation, res = run(tmp_path, web_running(2), [workload("Deployment", "web", replicas=2)],
                          scale=["deployment/shop/web=5"])
    assert len(res.placements) == 3 and all(p.node for p in res.placements)   # 2 running + 3 = 5
    assert len(pods_of_web(simulation)) == 5
    assert scale_notes(res) == ["--scale deployment/shop/web=5: Deployment shop/web from --pods already has 2 "
                                "pod(s) in the snapshot; 3 pod(s) created from the --pods template to make 5"]
    assert not any("in addition" in n for n in res.notes)                       # no contradicting note
    # scaling down removes the snapshot's pods (newest first); the file adds none
    simulation, res = run(tmp_path, web_running(3), [workload("Deployment", "web", replicas=3)],
                          scale=["deploy/shop/web=1"])
    assert res.placements == [] and pods_of_web(simulation) == ["web-5f7d9-p0"]
    assert scale_notes(res) == ["--scale deploy/shop/web=1: Deployment shop/web from --pods already has 3 pod(s) in "
                                "the snapshot; 2 removed to make 1 (not yet on a node first, then the newest): "
                                "shop/web-5f7d9-p2, shop/web-5f7d9-p1"]
    # as many as it runs: nothing changes, and the note says so
    simulation, res = run(tmp_path, web_running(2), [workload("Deployment", "web", replicas=6)],
                          scale=["deployment/shop/web=2"])
    assert res.placements == [] and len(pods_of_web(simulation)) == 2
    assert scale_notes(res)[0].endswith("already has 2 pod(s) in the snapshot; unchanged at 2")


def test_a_workload_in_pods_not_yet_running_is_expanded_with_n(tmp_path):
    simulation, res = run(tmp_path, nodes(), [workload("Deployment", "web", replicas=2)],
                          scale=["deployment/shop/web=4"])
    assert len(res.placements) == 4 and all(p.source == "pods" for p in res.placements)
    assert scale_notes(res) == ["--scale deployment/shop/web=4: Deployment shop/web from --pods: 4 pod(s) created "
                                "(the file says 2 replica(s))"]


def test_a_statefulset_in_pods_keeps_its_running_ordinals(tmp_path):
    ss = workload("StatefulSet", "db", replicas=2)
    ss["metadata"]["uid"] = "uid-db"
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-db", "controller": True}
    running = [make_pod(f"db-{i}", namespace="shop", node_name=f"n{i}", owner=owner) for i in range(2)]
    _, res = run(tmp_path, [*nodes(), ss, *running], [workload("StatefulSet", "db", replicas=2)],
                 scale=["statefulset/shop/db=3"])
    assert [p.pod for p in res.placements] == ["shop/db-2"]      # db-0 and db-1 stay where they run
    assert not any("treated as updates" in n for n in res.notes)
    assert scale_notes(res) == ["--scale statefulset/shop/db=3: StatefulSet shop/db from --pods already has 2 pod(s) "
                                "in the snapshot; 1 pod(s) created from the --pods template to make 3"]


def test_a_mix_of_pods_and_workloads_scales_each_target_once(tmp_path):
    items = web_running(2)
    docs = [make_pod("tool", namespace="shop"), workload("Deployment", "web", replicas=2),
            workload("Job", "batch", parallelism=1), workload("Deployment", "api", replicas=1)]
    simulation, res = run(tmp_path, items, docs, scale=["deployment/shop/web=3"])
    by_owner = sorted(p.owner or p.pod for p in res.placements)
    # the bare pod, the Job's pod, api unchanged (not scaled), web's one missing pod
    assert by_owner == ["Deployment api", "Deployment web", "Job batch", "shop/tool"]
    assert len(pods_of_web(simulation)) == 3
    assert len(scale_notes(res)) == 1


def test_no_pods_file_scales_a_workload_of_the_snapshot(tmp_path, capsys):
    args = args_for(tmp_path, web_running(2), [], scale=["deployment/shop/web=4"])
    args.pods = None
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["source"] for p in out["placements"]] == ["scale", "scale"]
    assert [n for n in out["notes"] if "--scale" in n] == [
        "--scale deployment/shop/web=4: Deployment shop/web (ReplicaSet web-5f7d9) had 2 pod(s) in the snapshot; "
        "2 pod(s) created to make 4"]
    assert "--pods" not in out["inputs"]["command"] and "pods" not in out["inputs"]["files"]
    # the command line takes it: --pods is optional with --scale
    parsed = build_parser().parse_args(["simulate", "--cluster", "s.yaml", "--scale", "deployment/shop/web=4"])
    assert parsed.pods is None
    # an empty --pods file with --scale: nothing but the scaling
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    args.pods = str(empty)
    assert main(args) == 0
    assert len(yaml.safe_load(capsys.readouterr().out)["placements"]) == 2


def test_neither_pods_nor_scale_names_both_flags(tmp_path, capsys):
    args = args_for(tmp_path, nodes(), [])
    args.pods = None
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "pysched simulate: --pods: required (the pods or workloads to schedule), unless --scale KIND/NS/NAME=N "
        "names a workload of --cluster to scale")


@pytest.mark.parametrize(("values", "error"), [
    (["deployment/shop/web"], "--scale deployment/shop/web: expected KIND/NAMESPACE/NAME=REPLICAS"),
    (["web=3"], "--scale web=3: expected KIND/NAMESPACE/NAME=REPLICAS"),
    (["deployment/shop/web=three"], "--scale deployment/shop/web=three: replicas: expected a non-negative integer, "
                                    "got 'three'"),
    (["deployment/shop/web=-2"], "replicas: expected a non-negative integer, got '-2'"),
    (["deployment/shop/web=3000000000"], "--scale deployment/shop/web=3000000000: replicas: at most 2147483647"),
    (["deploy/shop/web=2", "deployment/shop/web=3"],
     "--scale deployment/shop/web=3: Deployment shop/web is already scaled by --scale deploy/shop/web=2"),
    (["deployment/shop/nope=1"], "--scale deployment/shop/nope=1: no Deployment shop/nope in --pods"),
])
def test_bad_scale_values_are_bad_input_naming_the_flag(tmp_path, capsys, values, error):
    code, _, err = main_json(tmp_path, capsys, web_running(1), [make_pod("x", namespace="shop")], scale=values)
    assert code == 2 and error in err and err.startswith("pysched simulate: --scale ")
