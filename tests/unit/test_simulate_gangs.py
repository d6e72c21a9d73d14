"""Gangs offline as the live scheduler places them (issue 54, deliverable 5): ``OfflineScheduler.
schedule_group`` runs one attempt of the live pod-group cycle (``Scheduler.attempt_group``), and
``pysched simulate`` schedules a group's pods together, keeps the cycle's messages, and with
``--explain`` shows the attempt placement by placement (one per topology domain); the UI's
explanation of a member carries the same attempt."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml

from pysched.apis import config as configmod
from pysched.framework.features import default_gates
from pysched.testing.objects import make_node, make_pod
from pysched.tools.offline import OfflineScheduler
from pysched.tools.simulate import Simulation, format_text, main
from pysched.tools.snapshot import Snapshot

RACK = "example.com/rack"
GATES = default_gates((1, 37)) | {"GenericWorkload", "TopologyAwareWorkloadScheduling"}
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GPU = "nvidia.com/gpu"


def workload_group(name, min_count, *, topology=RACK, ns="default"):
    spec: dict = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1", "generation": 1}, "spec": spec}


def member(name, group, cpu="1500m"):
    p = make_pod(name, cpu=cpu)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def racks():
    """rack-a: 2 x 4 CPU, 2 of them taken (holds 3 members of 1.5 CPU); rack-b: 2 x 4 CPU (holds 4,
    left fuller); rack-c: 2 x 8 CPU (holds 4, left emptier)."""
    nodes = [make_node(f"{r}-{i}", cpu=cpu, labels={RACK: f"rack-{r}"})
             for r, cpu in (("a", "4"), ("b", "4"), ("c", "8")) for i in range(2)]
    busy = make_pod("busy", cpu="2", node_name="a-0")
    return nodes, busy


def offline(gates=GATES):
    sim = OfflineScheduler(feature_gates=gates)
    nodes, busy = racks()
    for n in nodes:
        sim.add_node(n)
    sim.add_pod(busy)
    return sim


# -- OfflineScheduler.schedule_group -------------------------------------------------------------

def test_offline_gang_goes_whole_into_the_best_rack_and_the_attempt_lists_every_rack():
    sim = offline()
    sim.add_object(workload_group("train", 4))
    pods = [member(f"m{i}", "train") for i in range(4)]
    for p in pods:
        sim.observe_pending(p)
    got = sim.schedule_group(pods)
    assert [o.code for o in got.outcomes] == ["Scheduled"] * 4
    assert {o.node.split("-")[0] for o in got.outcomes} == {"b"}       # the rack left fullest
    assert not sim.cache.assumed and not sim.waiting                    # assumed as bound, none held
    assert sorted(p.name for p in sim.cache.pods.values() if p.node_name.startswith("b-")) == ["m0", "m1", "m2", "m3"]
    t = got.trace
    assert (t["source"], t["minCount"], t["result"], t["placement"]) == ("GangScheduling", 4, "Scheduled", "rack-b")
    by = {p["placement"]: p for p in t["placements"]}
    assert list(by) == ["rack-a", "rack-b", "rack-c"]
    assert [name for name, p in by.items() if p["chosen"]] == ["rack-b"]
    assert not by["rack-a"]["fits"]
    assert by["rack-a"]["message"] == "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"
    assert list(by["rack-a"]["unplaced"].values()) == ["0/2 nodes are available: 2 Insufficient cpu."]
    assert by["rack-b"]["fits"] and by["rack-c"]["fits"]
    assert set(by["rack-b"]["scores"]) == {"NodeResourcesFit", "PodGroupPodsCount"}
    assert sum(by["rack-b"]["scores"].values()) > sum(by["rack-c"]["scores"].values())


def test_a_gang_that_fits_nowhere_leaves_every_member_unplaced_with_the_cycles_messages():
    sim = offline()
    sim.add_object(workload_group("train", 4))
    pods = [member(f"m{i}", "train", cpu="5") for i in range(4)]
    for p in pods:
        sim.observe_pending(p)
    got = sim.schedule_group(pods)
    msgs = {o.pod: o.message for o in got.outcomes}
    assert all(o.node is None and o.code == "Unschedulable" for o in got.outcomes)
    group = ("0/3 placements are available, first placement status: minCount (4) cannot be satisfied: "
             "0 scheduled, 3 remaining")
    # m0 fit nowhere in the first placement (its own verdict); the others were never tried there
    assert msgs["default/m0"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert msgs["default/m1"] == msgs["default/m2"] == msgs["default/m3"] == f"pod group is unschedulable, {group}"
    assert {p.name for p in sim.cache.pods.values()} == {"busy"}        # nothing held
    assert got.trace["result"] == "Unschedulable" and got.trace["blockedBy"] == "default/m0"
    assert not any(p["chosen"] for p in got.trace["placements"])
    assert got.trace["status"].startswith(f"pod group is unschedulable, {group}")


def test_members_preenqueue_holds_back_are_not_tried():
    sim = offline()
    sim.add_object(workload_group("train", 4))
    pods = [member(f"m{i}", "train") for i in range(3)]                 # one short of minCount
    for p in pods:
        sim.observe_pending(p)
    got = sim.schedule_group(pods)
    assert {o.message for o in got.outcomes} == {"waiting for minCount pods from a gang to appear in scheduling queue"}
    assert got.trace["inAttempt"] == 0 and got.trace["placements"] == []


# -- simulate ------------------------------------------------------------------------------------

def simulate(pods, objects, explain=(), gates=GATES, cfg=None):
    nodes, busy = racks()
    sim = Simulation(cfg, feature_gates=gates)
    return sim.run(Snapshot(nodes=nodes, pods=[busy], objects=objects), pods, explain=list(explain))


def test_simulate_places_a_workload_gang_in_one_attempt_and_explains_it_rack_by_rack():
    pods = [member(f"m{i}", "train") for i in range(4)]
    res = simulate(pods, [workload_group("train", 4)], explain=["podgroup/default/train"])
    assert {p.node.split("-")[0] for p in res.placements} == {"b"}
    verdict = res.groups[0]
    assert (verdict["group"], verdict["source"], verdict["verdict"], verdict["placement"], verdict["placementsTried"]) \
        == ("default/train", "GangScheduling", "placed", "rack-b", 3)
    assert list(res.explain_groups) == ["default/train"] and not res.explain     # the group, no pod traced
    text = format_text(res)
    assert "default/train  4/4 (minCount 4)  placed in rack-b" in text
    lines = text[text.index("Explain pod group default/train"):].splitlines()
    assert lines[0].endswith("placed in rack-b (best of 2 placements that fit)")
    assert lines[1] == "  Placements tried (3; * chosen):"
    assert lines[2] == "    rack-a (2 nodes): minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"
    assert lines[4] == "      not placed: m3: 0/2 nodes are available: 2 Insufficient cpu."
    assert lines[5].startswith("  * rack-b (2 nodes): fits; score ")
    assert "NodeResourcesFit" in lines[5] and "PodGroupPodsCount" in lines[5]
    assert lines[6].startswith("      placed: m0 -> b-")
    assert lines[7].startswith("    rack-c (2 nodes): fits; score ")
    assert json.loads(json.dumps(res.as_dict()))["explainPodGroups"]["default/train"]["placement"] == "rack-b"


def test_explaining_a_member_gives_its_cycle_on_the_groups_placement_and_the_groups_attempt():
    pods = [member(f"m{i}", "train", cpu="5") for i in range(4)]
    res = simulate(pods, [workload_group("train", 4)], explain=["default/m0"])
    assert list(res.explain_groups) == ["default/train"]
    trace = res.explain["default/m0"]
    assert (trace["podGroup"], trace["groupPlacement"]) == ("default/train", "rack-a")
    assert trace["error"] == "0/2 nodes are available: 2 Insufficient cpu."
    text = format_text(res)
    assert "  (its cycle on placement rack-a in pod group default/train's attempt)" in text
    assert "Placements tried (3; none chosen):" in text
    verdict = res.groups[0]
    assert verdict["verdict"] == "not placed" and verdict["blockedBy"] == "default/m0"
    assert verdict["reason"] == "0/2 nodes are available: 2 Insufficient cpu."


def test_a_scheduler_plugins_gang_goes_through_the_cycle_with_its_messages():
    """Coscheduling's default: one attempt for the group on every node (one placement), members
    keep the cycle's messages - no member was held at Permit, nothing times out."""
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [{
        "schedulerName": "pysched",
        "plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                    "multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}]})
    pg = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
          "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    pods = [make_pod(f"g{i}", labels={GROUP_LABEL: "g"}, extended={GPU: "1"}) for i in range(3)]
    nodes = [make_node(f"n{i}", extended={GPU: "1"}) for i in range(2)]
    res = Simulation(cfg).run(Snapshot(nodes=nodes, objects=[pg]), pods, explain=["podgroup/default/g"])
    msgs = {p.pod: p.message for p in res.placements}
    assert not any(p.node for p in res.placements)
    assert msgs["default/g2"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert msgs["default/g0"] == msgs["default/g1"] == (
        "pod group is unschedulable, minMember (3) cannot be satisfied: 2 scheduled, 0 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor")
    attempt = res.explain_groups["default/g"]
    assert attempt["source"] == "Coscheduling"
    assert [(p["placement"], p["nodes"], p["fits"]) for p in attempt["placements"]] == [("all nodes", 2, False)]
    assert "    all nodes (2 nodes): minMember (3) cannot be satisfied: 2 scheduled, 0 remaining" in format_text(res)


def test_simulate_takes_feature_gates_and_records_them(tmp_path, capsys):
    nodes, busy = racks()
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, busy]}))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([workload_group("train", 4), *[member(f"m{i}", "train") for i in range(4)]]))
    args = SimpleNamespace(config=None, cluster=str(cluster), pods=str(pods), explain=["podgroup/default/train"],
                           report=None, seed=0, output="json", plugin_module=[], add_nodes=[], scale=[],
                           metrics_file=None, explain_nodes="summary",
                           feature_gates="GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["explainPodGroups"]["default/train"]["placement"] == "rack-b"
    assert out["inputs"]["flags"]["featureGates"] == "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    assert "--feature-gates GenericWorkload=true,TopologyAwareWorkloadScheduling=true" in out["inputs"]["command"]
    # without the gates the pods are scheduled on their own (GangScheduling is not on): not one rack
    args.feature_gates = ""
    main(args)
    assert json.loads(capsys.readouterr().out)["explainPodGroups"] == {}
    args.feature_gates = "NoSuchGate=true"
    assert main(args) == 2
    assert "--feature-gates: unrecognized feature gate: NoSuchGate" in capsys.readouterr().err


# -- the UI's explanation ------------------------------------------------------------------------

def test_the_uis_explanation_of_a_member_carries_its_groups_attempt():
    from pysched.ui import runner
    from pysched.ui.scenario import Scenario
    nodes, busy = racks()
    sc = Scenario.from_snapshot(Snapshot(nodes=nodes, pods=[busy]),
                                [workload_group("train", 4), *[member(f"m{i}", "train") for i in range(4)]])
    sc.feature_gates = GATES
    row = next(p for p in sc.as_dict()["pods"] if p["key"] == "default/m0")
    assert row["podGroup"] == "default/train"
    r = runner.run(sc)
    assert {n.split("-")[0] for n in r.nodes.values() if n} == {"b"}
    view = runner.explain(r, "default/m1")
    attempt = view["groupAttempt"]
    assert attempt["placement"] == "rack-b" and len(attempt["placements"]) == 3
    assert view["podGroup"] == "default/train" and view["groupPlacement"] == "rack-b"
