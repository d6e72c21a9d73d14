"""NodeDeclaredFeatures (kube-scheduler 1.37's plugin): which pod fields require which node feature,
the Filter's verdicts and message, its queueing hints, and nothing at all without its feature gate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pysched.apis import config as configmod
from pysched.apis.core.objectshape import node_problem, pod_problem
from pysched.eventhandlers import EventRegistry, node_update_actions
from pysched.framework import ClusterEvent, Code, CycleState, FilterPlugin, FilterResult, NodeBatch, NodeSpec, PodInfo
from pysched.plugins import node_declared_features as ndf
from pysched.plugins.node_declared_features import (
    FEATURES,
    GATE,
    REASON,
    NodeDeclaredFeatures,
    required_features,
    schedulable_after_node_change,
    schedulable_after_pod_update,
)
from pysched.profile import build_frameworks, default_registry
from pysched.testing import UAU, PluginTester
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod
from .test_queueing_hints import rejected

RESTART = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND = "VolumeBindMountOptions"
ON = frozenset({GATE})


def declaring(name: str, *features: str, rv: int | None = None) -> dict:
    n = node(name)
    if features:
        n["status"]["declaredFeatures"] = list(features)
    if rv is not None:
        n["metadata"]["resourceVersion"] = str(rv)
    return n


def restart_rule(action: str = "RestartAllContainers") -> list[dict]:
    return [{"action": action, "exitCodes": {"operator": "In", "values": [42]}}]


def needing(name: str, *features: str) -> dict:
    """A pod whose spec requires exactly ``features``."""
    p = pod(name)
    spec = p["spec"]
    c = spec["containers"][0]
    if RESTART in features:
        c["restartPolicy"] = "Never"
        c["restartPolicyRules"] = restart_rule()
    if USERNS in features:
        spec["hostNetwork"], spec["hostUsers"] = True, False
    if BIND in features:
        spec["volumes"] = [{"name": "data", "emptyDir": {}}]
        c["volumeMounts"] = [{"name": "data", "mountPath": "/data", "bindMountOptions": ["noexec"]}]
    return p


def names(bits: int) -> list[str]:
    return ndf.feature_names(bits)


def ndf_tester(*nodes: dict, gates: frozenset[str] = ON) -> PluginTester[NodeDeclaredFeatures]:
    t = PluginTester(NodeDeclaredFeatures, nodes=nodes)
    t.handle.feature_gates = gates
    t.plugin = NodeDeclaredFeatures(None, t.handle)
    return t


# -- the registry and what each pod field requires -----------------------------------------------

def test_the_table_is_component_helpers_registry_in_its_order():
    assert [f.name for f in FEATURES] == [
        "DRANodeAllocatableResources", "DRAOptionalNodeOperations", "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes", RESTART, USERNS, BIND]
    assert [f.name for f in FEATURES if f.required_by is not None] == [RESTART, USERNS, BIND]
    assert all(f.max_version is None for f in FEATURES)   # none is version-bounded at 1.37.2


def spec_of(p: dict) -> dict:
    return p["spec"]


@pytest.mark.parametrize("edit,expected", [
    (lambda s: None, []),
    # RestartAllContainersOnContainerExits: a rule with that action, in a container or an init container
    (lambda s: s["containers"][0].update(restartPolicy="Never", restartPolicyRules=restart_rule()), [RESTART]),
    (lambda s: s["containers"][0].update(restartPolicy="Never", restartPolicyRules=restart_rule("Restart")), []),
    (lambda s: s.update(initContainers=[{"name": "i", "image": "x", "restartPolicy": "Always",
                                         "restartPolicyRules": restart_rule()}]), [RESTART]),
    (lambda s: s.update(ephemeralContainers=[{"name": "e", "image": "x",
                                              "restartPolicyRules": restart_rule()}]), []),
    # UserNamespacesHostNetworkSupport: host network with hostUsers false, both
    (lambda s: s.update(hostNetwork=True, hostUsers=False), [USERNS]),
    (lambda s: s.update(hostNetwork=True), []),
    (lambda s: s.update(hostNetwork=True, hostUsers=True), []),
    (lambda s: s.update(hostUsers=False), []),
    # VolumeBindMountOptions: non-empty bindMountOptions on any kind of container's mount
    (lambda s: s["containers"][0].update(volumeMounts=[{"name": "v", "mountPath": "/v",
                                                        "bindMountOptions": ["nodev"]}]), [BIND]),
    (lambda s: s["containers"][0].update(volumeMounts=[{"name": "v", "mountPath": "/v", "bindMountOptions": []}]), []),
    (lambda s: s.update(initContainers=[{"name": "i", "image": "x", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]}]), [BIND]),
    (lambda s: s.update(ephemeralContainers=[{"name": "e", "image": "x", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}]}]), [BIND]),
], ids=["nothing", "restart-all", "restart-one", "init-restart-all", "ephemeral-restart-all", "hostnet-userns",
        "hostnet", "hostnet-hostusers", "userns", "bind-opts", "bind-opts-empty", "init-bind-opts",
        "ephemeral-bind-opts"])
def test_what_each_pod_field_requires(edit, expected):
    p = pod("p")
    edit(p["spec"])
    assert names(required_features(p["spec"])) == expected


def test_requirements_add_up():
    assert names(required_features(spec_of(needing("p", RESTART, USERNS, BIND)))) == [RESTART, USERNS, BIND]


def test_a_feature_past_its_max_version_is_not_required(monkeypatch):
    bounded = tuple(dataclasses.replace(f, max_version=(1, 37, 1)) if f.name == USERNS else f for f in FEATURES)
    monkeypatch.setattr(ndf, "FEATURES", bounded)
    spec = spec_of(needing("p", USERNS, BIND))
    assert names(required_features(spec, (1, 37, 2))) == [BIND]          # newer than the bound: dropped
    assert names(required_features(spec, (1, 37, 1))) == [USERNS, BIND]  # the bound itself: still required


# -- PreFilter and Filter -------------------------------------------------------------------------

NODES = [declaring("bare"), declaring("restart", RESTART), declaring("userns-bind", BIND, USERNS),
         declaring("all", "Other/unknown", RESTART, USERNS, BIND), declaring("unknown-only", "SomethingElse")]


def test_a_pod_that_needs_nothing_is_skipped_at_prefilter():
    t = ndf_tester(*NODES)
    st = t.pre_filter(pod("plain"))
    assert st is not None and st.code == Code.SKIP
    assert t.pre_filter(needing("p", RESTART)) is None


def test_filter_keeps_the_pod_on_nodes_declaring_every_feature_it_needs():
    t = ndf_tester(*NODES)
    rejected = (UAU, (REASON,))
    assert REASON == "node(s) didn't match Pod's required features"
    assert t.filter(needing("r", RESTART)) == {"bare": rejected, "restart": None, "userns-bind": rejected,
                                               "all": None, "unknown-only": rejected}
    assert t.filter(needing("u", USERNS)) == {"bare": rejected, "restart": rejected, "userns-bind": None,
                                              "all": None, "unknown-only": rejected}
    assert t.filter(needing("ub", USERNS, BIND)) == {"bare": rejected, "restart": rejected, "userns-bind": None,
                                                     "all": None, "unknown-only": rejected}
    assert t.filter(needing("rb", RESTART, BIND)) == {"bare": rejected, "restart": rejected,
                                                      "userns-bind": rejected, "all": None,
                                                      "unknown-only": rejected}
    assert set(t.filter(pod("plain")).values()) == {None}


def test_filter_sees_a_node_declare_a_feature_later():
    t = ndf_tester(declaring("n1"))
    assert t.filter(needing("p", BIND)) == {"n1": (UAU, (REASON,))}
    t.add_node(declaring("n1", BIND, rv=10_000))
    assert t.filter(needing("p", BIND)) == {"n1": None}
    t.add_node(declaring("n1", rv=10_001))
    assert t.filter(needing("p", BIND)) == {"n1": (UAU, (REASON,))}


def test_filter_without_prefilter_state_infers_the_requirements_itself():
    t = ndf_tester(*NODES)
    p = PodInfo.from_dict(needing("p", RESTART), keep_raw=True)
    res = t.plugin.filter(CycleState(), p, t.nodes())
    assert dict(zip(t.nodes().names, res.passed.tolist())) == {
        "bare": False, "restart": True, "userns-bind": False, "all": True, "unknown-only": False}


def test_a_deferred_resize_is_skipped_only_under_its_gate():
    deferred = needing("p", RESTART)
    deferred["status"] = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]}
    assert ndf_tester(declaring("bare")).filter(deferred) == {"bare": (UAU, (REASON,))}
    both = ndf_tester(declaring("bare"), gates=ON | {"InPlacePodVerticalScalingSchedulerPreemption"})
    st = both.pre_filter(deferred)
    assert st is not None and st.code == Code.SKIP
    assert both.filter(deferred) == {"bare": None}
    infeasible = dict(deferred, status={"conditions": [{"type": "PodResizePending", "reason": "Infeasible"}]})
    assert both.filter(infeasible) == {"bare": (UAU, (REASON,))}


def test_without_the_gate_the_plugin_does_nothing():
    t = ndf_tester(*NODES, gates=frozenset())
    st = t.pre_filter(needing("p", RESTART, USERNS, BIND))
    assert st is not None and st.code == Code.SKIP
    assert set(t.filter(needing("p", RESTART, USERNS, BIND)).values()) == {None}
    assert tuple(t.plugin.events_to_register()) == ()


# -- queueing hints ---------------------------------------------------------------------------------

def spec(n: dict) -> NodeSpec:
    return NodeSpec.from_dict(n)


def test_events_registered_under_the_gate():
    events = [r.event for r in ndf_tester().plugin.events_to_register()]
    assert events == [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeDeclaredFeature"),
                      ClusterEvent("Pod", "Update")]
    assert all(r.hint is not None for r in ndf_tester().plugin.events_to_register())


def test_node_hint_requeues_on_an_added_node_or_a_changed_declared_list():
    p = PodInfo.from_dict(needing("p", BIND), keep_raw=True)
    bare, with_bind = spec(declaring("n")), spec(declaring("n", BIND))
    assert schedulable_after_node_change(p, None, bare)            # any added node
    assert schedulable_after_node_change(p, bare, with_bind)
    assert schedulable_after_node_change(p, with_bind, bare)       # changed is enough, as upstream
    assert schedulable_after_node_change(p, bare, spec(declaring("n", "Unknown")))   # compared as sent
    assert not schedulable_after_node_change(p, with_bind, spec(declaring("n", BIND)))
    relabelled = declaring("n")
    relabelled["metadata"]["labels"]["x"] = "y"
    assert not schedulable_after_node_change(p, bare, spec(relabelled))


def test_pod_hint_requeues_the_pod_itself_when_its_requirements_change():
    old = needing("p", BIND)
    same = dict(old, metadata=dict(old["metadata"], labels={"x": "y"}))
    changed = dict(old, spec=dict(old["spec"], hostNetwork=True, hostUsers=False))
    p, o = PodInfo.from_dict(old, keep_raw=True), PodInfo.from_dict(old, keep_raw=True)
    assert not schedulable_after_pod_update(p, o, PodInfo.from_dict(same, keep_raw=True))
    assert schedulable_after_pod_update(p, o, PodInfo.from_dict(changed, keep_raw=True))
    other = PodInfo.from_dict(needing("q", USERNS), keep_raw=True)
    assert not schedulable_after_pod_update(p, other, other)


def test_node_update_actions_name_declared_features_only_under_the_gate():
    bare, with_bind = spec(declaring("n")), spec(declaring("n", BIND))
    assert node_update_actions(bare, with_bind, declared_features=True) == {"UpdateNodeDeclaredFeature"}
    assert node_update_actions(bare, with_bind) == set()
    assert not bare.same_for_scheduling(with_bind)   # the cache keeps the new list


class RejectAll(FilterPlugin):
    """Rejects every node and registers no events: every cluster event may requeue what it rejected."""
    name = "RejectAll"

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        return FilterResult.from_mask(np.zeros(len(nodes), dtype=bool), Code.UNSCHEDULABLE, "rejected")


def _offline(gates: frozenset[str], *extra: str) -> OfflineScheduler:
    """The offline engine with a profile that enables the plugin (as kube-scheduler 1.37's default
    profile does: last in multiPoint) and ``gates``; ``extra``: more plugins enabled before it."""
    registry = default_registry()
    registry.register(RejectAll)
    enabled = [{"name": n} for n in (*extra, "NodeDeclaredFeatures")]
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [
        {"schedulerName": "pysched", "plugins": {"multiPoint": {"enabled": enabled}}}]})
    sim = OfflineScheduler(cfg, registry=registry)
    fw = build_frameworks(sim.cfg, sim.registry, cache=sim.cache, client=None, recorder=None, objects=sim.objects,
                          feature_gates=gates)
    sim.frameworks.update(fw)
    sim.scheduler.frameworks.update(fw)
    sim.events.registry = EventRegistry(fw.values())
    sim.queue.event_filter = lambda qpi, ev: sim.events.registry.interested(qpi, *ev)
    return sim


def test_a_profile_enabling_it_runs_it_last_among_the_filters():
    sim = _offline(ON)
    filters = [pl.name for pl in sim.frameworks["pysched"].filter]
    assert filters[-1] == "NodeDeclaredFeatures" and "NodeUnschedulable" in filters


def test_a_node_declaring_the_feature_later_requeues_the_pod():
    sim = _offline(ON)
    sim.add_node(declaring("n1", RESTART))
    qpi = rejected(sim, needing("p", BIND), "NodeDeclaredFeatures")
    assert qpi.unschedulable_plugins == {"NodeDeclaredFeatures"}
    assert sim.scheduler.last_results[qpi.pod.uid]["error"].startswith(f"0/1 nodes are available: 1 {REASON}. ")
    sim.add_node(declaring("n1", RESTART, "Unrelated", rv=20_000))   # changed, still no BIND: the hint says go
    assert qpi.where in ("active", "backoff")


def test_the_declared_list_staying_the_same_leaves_the_pod_waiting():
    sim = _offline(ON)
    sim.add_node(declaring("n1", RESTART))
    qpi = rejected(sim, needing("p", BIND), "NodeDeclaredFeatures")
    relabelled = declaring("n1", RESTART, rv=20_001)
    relabelled["metadata"]["labels"]["x"] = "y"
    sim.add_node(relabelled)
    assert qpi.where == "unschedulable"


@pytest.mark.parametrize("gates,requeued", [(frozenset(), False), (ON, True)], ids=["gate-off", "gate-on"])
def test_a_declared_features_update_is_a_cluster_event_only_under_the_gate(gates, requeued):
    """Seen by a plugin that hears every event: without the gate the update is none at all."""
    sim = _offline(gates, "RejectAll")
    sim.add_node(declaring("n1"))
    qpi = rejected(sim, pod("p"), "RejectAll")
    sim.add_node(declaring("n1", BIND, rv=20_002))
    assert (qpi.where in ("active", "backoff")) is requeued


# -- object shapes (extender requests, snapshot files) ----------------------------------------------

def test_the_fields_it_reads_are_type_checked():
    n = declaring("n", BIND)
    n["status"]["declaredFeatures"] = "VolumeBindMountOptions"
    assert node_problem(n) == "status.declaredFeatures: expected a list, got string"
    p = needing("p", USERNS)
    p["spec"]["hostUsers"] = "false"
    assert pod_problem(p) == "spec.hostUsers: expected true or false, got string"
    p = needing("p", BIND)
    p["spec"]["containers"][0]["volumeMounts"][0]["bindMountOptions"] = "noexec"
    assert pod_problem(p) == "spec.containers[0].volumeMounts[0].bindMountOptions: expected a list, got string"
    p = needing("p", RESTART)
    p["spec"]["containers"][0]["restartPolicyRules"][0]["action"] = 1
    assert pod_problem(p) == "spec.containers[0].restartPolicyRules[0].action: expected a string, got number"
    assert pod_problem(needing("p", RESTART, USERNS, BIND)) is None and node_problem(declaring("n", BIND)) is None
