"""Queueing hints as kube-scheduler 1.35 decides them: an event that cannot help leaves a rejected pod
in the unschedulable pool, one that can sends it back to be tried.

Each test rejects a pod for real (a scheduling cycle on the offline engine), then feeds cluster
events through the same event handlers the informers use.
"""

from __future__ import annotations

import pytest

from pysched.apis import config as configmod
from pysched.framework import ClusterEvent
from pysched.framework.features import EXISTING_ANTI_AFFINITY_DELETE_HINT, FeatureGateError, parse_feature_gates
from pysched.profile import build_frameworks
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

ZONE = "topology.kubernetes.io/zone"
REQUEUED = ("active", "backoff")


def rejected(sim: OfflineScheduler, p: dict, plugin: str | None = None):
    """Add ``p``, run its cycle; it must end in the unschedulable pool (rejected by ``plugin``)."""
    sim.add_pod(p)
    qpi = sim.queue.pop_nowait()
    assert qpi is not None and qpi.pod.name == p["metadata"]["name"]
    sim.scheduler.schedule_one(qpi)
    assert qpi.where == "unschedulable", (qpi, sim.scheduler.last_results.get(qpi.pod.uid))
    if plugin is not None:
        assert plugin in qpi.unschedulable_plugins, qpi.unschedulable_plugins
    return qpi


def bound(name, node_name, **kw):
    p = pod(name, **kw)
    p["spec"]["nodeName"] = node_name
    return p


def with_node_labels(n: dict, **labels) -> dict:
    n = dict(n, metadata=dict(n["metadata"], labels={**n["metadata"].get("labels", {}), **labels},
                              resourceVersion=str(int(n["metadata"]["resourceVersion"]) + 1)))
    return n


def test_taint_toleration_requeues_only_when_the_untolerated_taint_goes():
    sim = OfflineScheduler()
    tainted = node("n1", taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}])
    sim.add_node(tainted)
    qpi = rejected(sim, pod("p"), "TaintToleration")
    other = dict(tainted, spec={"taints": [{"key": "gpu", "value": "y", "effect": "NoSchedule"}]})
    other["metadata"] = dict(tainted["metadata"], resourceVersion="100")
    sim.add_node(other)                                              # still untolerated
    assert qpi.where == "unschedulable"
    sim.add_node(node("n2", taints=[{"key": "spot", "effect": "NoExecute"}]))   # added, untolerated
    assert qpi.where == "unschedulable"
    clean = dict(other, spec={})
    clean["metadata"] = dict(other["metadata"], resourceVersion="101")
    sim.add_node(clean)
    assert qpi.where in REQUEUED


def test_node_affinity_requeues_when_a_node_starts_matching():
    sim = OfflineScheduler()
    sim.add_node(node("n1", labels={ZONE: "b"}))
    qpi = rejected(sim, pod("p", node_selector={ZONE: "a"}), "NodeAffinity")
    sim.add_node(node("n2", labels={ZONE: "c"}))                       # added, does not match
    assert qpi.where == "unschedulable"
    sim.add_node(with_node_labels(node("n1", labels={ZONE: "b"}), tier="x"))   # relabelled, still no match
    assert qpi.where == "unschedulable"
    sim.add_node(with_node_labels(node("n2", labels={ZONE: "c"}), **{ZONE: "a"}))
    assert qpi.where in REQUEUED


@pytest.mark.parametrize("release", [(1, 35), (1, 36), (1, 37)])
def test_plugins_registering_node_add_also_hear_node_taint_updates_before_1_37(release):
    """As kube-scheduler 1.35/1.36 adds for every plugin that registers Node/Add without
    UpdateNodeTaint (NodeName, NodeAffinity, InterPodAffinity, NodePorts, volume plugins,
    DynamicResources ...); 1.37 removed that with the node preCheck."""
    from pysched.eventhandlers import EventRegistry
    reg = EventRegistry(OfflineScheduler(kube_version=release).frameworks.values())

    def taint_regs(plugin):
        return [r for r in reg.by_plugin[plugin] if r.event == ClusterEvent("Node", "UpdateNodeTaint")]

    for plugin in ("NodeName", "NodeAffinity", "InterPodAffinity", "NodePorts", "NodeResourcesFit"):
        regs = taint_regs(plugin)
        if release < (1, 37):
            assert len(regs) == 1 and regs[0].hint is None, (plugin, regs)
        else:
            assert regs == [], (plugin, regs)
    # one that registers it itself keeps its own (with its hint), not a second one
    regs = taint_regs("TaintToleration")
    assert len(regs) == 1 and regs[0].hint is not None


def test_node_unschedulable_requeues_on_uncordon_not_on_cordon():
    sim = OfflineScheduler()
    cordoned = node("n1")
    cordoned["spec"]["unschedulable"] = True
    sim.add_node(cordoned)
    qpi = rejected(sim, pod("p"), "NodeUnschedulable")
    c2 = node("n2")
    c2["spec"]["unschedulable"] = True
    sim.add_node(c2)                                                   # added cordoned
    assert qpi.where == "unschedulable"
    open_ = node("n1")
    open_["metadata"]["resourceVersion"] = "999"
    sim.add_node(open_)
    assert qpi.where in REQUEUED


def test_node_resources_fit_requeues_on_an_increase_it_could_use():
    sim = OfflineScheduler()
    sim.add_node(node("n1", cpu="1"))
    sim.add_pod(bound("hog", "n1", cpu="900m"))
    qpi = rejected(sim, pod("p", cpu="500m", memory=None), "NodeResourcesFit")
    mem = node("n1", cpu="1", memory="64Gi")
    mem["metadata"]["resourceVersion"] = "999"
    sim.add_node(mem)                                                  # more memory; p wants cpu
    assert qpi.where == "unschedulable"
    sim.add_node(node("tiny", cpu="100m"))                              # added, too small even empty
    assert qpi.where == "unschedulable"
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "hog"))
    assert qpi.where in REQUEUED


def waiting_for_a_db_pod():
    """A pod with required affinity to app=db in its zone, rejected: no such pod runs."""
    sim = OfflineScheduler()
    sim.add_node(node("n1", labels={ZONE: "a"}))
    want_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}}
    sim.add_pod(bound("first", "n1", labels={"app": "other"}))
    return sim, rejected(sim, pod("p", affinity=want_db), "InterPodAffinity")


def test_inter_pod_affinity_pod_events():
    sim, qpi = waiting_for_a_db_pod()
    sim.add_pod(bound("web", "n1", labels={"app": "web"}))            # bound, does not match
    assert qpi.where == "unschedulable"
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "web"))   # deleted, no anti terms
    assert qpi.where == "unschedulable"
    sim.add_pod(bound("db", "n1", labels={"app": "db"}))
    assert qpi.where in REQUEUED


def test_inter_pod_affinity_deletion_of_a_pod_its_own_anti_affinity_matched():
    sim = OfflineScheduler()
    sim.add_node(node("n1"))
    avoid_db = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    sim.add_pod(bound("db", "n1", labels={"app": "db"}))
    sim.add_pod(bound("web", "n1", labels={"app": "web"}))
    qpi = rejected(sim, pod("p", affinity=avoid_db), "InterPodAffinity")
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "web"))
    assert qpi.where == "unschedulable"
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "db"))
    assert qpi.where in REQUEUED


def _blocked_by_existing_anti_affinity(sim: OfflineScheduler):
    sim.add_node(node("n1"))
    hates_web = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    sim.add_pod(bound("loner", "n1", labels={"app": "loner"}, affinity=hates_web))
    qpi = rejected(sim, pod("p", labels={"app": "web"}), "InterPodAffinity")
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "loner"))
    return qpi


def _as_release(sim: OfflineScheduler, release: tuple[int, int], flags: str = "") -> OfflineScheduler:
    """``sim`` with its frameworks built as kube-scheduler ``release`` (and ``flags``) builds them."""
    from pysched.eventhandlers import EventRegistry
    gates = parse_feature_gates(flags, release)
    fw = build_frameworks(sim.cfg, sim.registry, cache=sim.cache, client=None, recorder=None, objects=sim.objects,
                          feature_gates=gates, kube_version=release)
    sim.frameworks.update(fw)
    sim.scheduler.frameworks.update(fw)
    sim.events.registry = EventRegistry(fw.values())
    sim.queue.event_filter = lambda qpi, ev: sim.events.registry.interested(qpi, *ev[:5])
    return sim


@pytest.mark.parametrize("release", [(1, 35), (1, 36)])
def test_the_blocker_of_an_existing_anti_affinity_leaving_does_not_requeue_before_1_37(release):
    """1.35/1.36's hint looks at the waiting pod's own terms only: the pod waits for another event
    (or the 5-minute flush) although the pod that kept it out is gone."""
    qpi = _blocked_by_existing_anti_affinity(_as_release(OfflineScheduler(), release))
    assert qpi.where == "unschedulable"


def test_the_blocker_of_an_existing_anti_affinity_leaving_requeues_from_1_37():
    """1.37's isSchedulableAfterAssignedPodChange also looks at the deleted pod's own anti-affinity."""
    qpi = _blocked_by_existing_anti_affinity(_as_release(OfflineScheduler(), (1, 37)))
    assert qpi.where in REQUEUED


def test_the_feature_gate_requeues_when_the_existing_anti_affinity_blocker_leaves():
    sim = _as_release(OfflineScheduler(), (1, 35), f"{EXISTING_ANTI_AFFINITY_DELETE_HINT}=true")
    qpi = _blocked_by_existing_anti_affinity(sim)
    assert qpi.where in REQUEUED


@pytest.mark.parametrize("release,requeued", [((1, 36), False), ((1, 37), True)])
def test_a_pod_stops_matching_one_anti_affinity_term(release, requeued):
    """1.37: an update requeues when the placed pod stops matching *any* anti-affinity term (1.35/1.36:
    all of them)."""
    sim = _as_release(OfflineScheduler(), release)
    sim.add_node(node("n1"))
    two_terms = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"},
        {"labelSelector": {"matchLabels": {"tier": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    sim.add_pod(bound("db", "n1", labels={"app": "db"}))
    qpi = rejected(sim, pod("p", affinity=two_terms), "InterPodAffinity")
    relabelled = bound("db", "n1", labels={"app": "cache"})
    relabelled["metadata"]["uid"] = next(u for u, x in sim.cache.pods.items() if x.name == "db")
    relabelled["metadata"]["resourceVersion"] = "2"
    sim.add_pod(relabelled)
    assert (qpi.where in REQUEUED) is requeued


def test_feature_gates_are_parsed_strictly():
    assert EXISTING_ANTI_AFFINITY_DELETE_HINT not in parse_feature_gates("")
    assert EXISTING_ANTI_AFFINITY_DELETE_HINT in parse_feature_gates(f" {EXISTING_ANTI_AFFINITY_DELETE_HINT}=True ")
    for bad, msg in (("Nope=true", "unrecognized feature gate: Nope"),
                     (EXISTING_ANTI_AFFINITY_DELETE_HINT, "missing bool value"),
                     (f"{EXISTING_ANTI_AFFINITY_DELETE_HINT}=yes", "invalid value of")):
        with pytest.raises(FeatureGateError, match=msg):
            parse_feature_gates(bad)


def test_topology_spread_ignores_other_namespaces_and_non_matching_pods():
    sim = OfflineScheduler()
    for n, z in (("n1", "a"), ("n2", "b")):
        sim.add_node(node(n, labels={ZONE: z}))
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "nodeAffinityPolicy": "Ignore", "labelSelector": {"matchLabels": {"app": "s"}}}]
    for i in range(2):
        sim.add_pod(bound(f"a{i}", "n1", labels={"app": "s"}))
    qpi = rejected(sim, pod("p", labels={"app": "s"}, node_selector={ZONE: "a"},
                            spread=spread), "PodTopologySpread")
    sim.add_pod(bound("x", "n2", labels={"app": "s"}, namespace="elsewhere"))
    sim.remove_pod(next(u for u, x in sim.cache.pods.items() if x.name == "x"))
    sim.add_pod(bound("y", "n2", labels={"app": "other"}))
    assert qpi.where == "unschedulable"
    sim.add_pod(bound("b0", "n2", labels={"app": "s"}))
    assert qpi.where in REQUEUED


def test_a_node_deleted_is_an_event_topology_spread_hears():
    sim = OfflineScheduler()
    for n, z in (("n1", "a"), ("n2", "b"), ("n3", "c")):
        sim.add_node(node(n, labels={ZONE: z}))
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "nodeAffinityPolicy": "Ignore", "labelSelector": {"matchLabels": {"app": "s"}}}]
    sim.add_pod(bound("a0", "n1", labels={"app": "s"}))
    sim.add_pod(bound("b0", "n2", labels={"app": "s"}))
    qpi = rejected(sim, pod("p", labels={"app": "s"}, node_selector={ZONE: "a"},
                            spread=spread), "PodTopologySpread")
    sim.remove_node("n3")                        # zone c (0 pods) gone: the minimum is 1 now
    assert qpi.where in REQUEUED


def test_a_pod_we_bound_is_an_assigned_pod_add_when_the_informer_confirms_it():
    sim, qpi = waiting_for_a_db_pod()
    db = pod("db", labels={"app": "db"})
    sim.add_pod(db)
    dq = sim.queue.pop_nowait()
    sim.cache.assume(dq.pod, "n1")              # our own bind, in flight
    sim.queue.done(dq.pod.uid)
    assert qpi.where == "unschedulable"
    sim.add_pod(dict(db, spec=dict(db["spec"], nodeName="n1")))   # the informer confirms it
    assert qpi.where in REQUEUED


def test_an_event_during_the_attempt_requeues_the_pod_when_it_fails():
    """A node added while the pod's cycle ran (the cycle could not see it): upstream replays the
    in-flight events through the hints when the attempt fails."""
    sim = OfflineScheduler()
    sim.add_node(node("n1", labels={ZONE: "b"}))
    sim.add_pod(pod("p", node_selector={ZONE: "a"}))
    qpi = sim.queue.pop_nowait()
    sim.add_node(node("n2", labels={ZONE: "c"}))          # an event that cannot help
    fwk = sim.frameworks["pysched"]
    from pysched.framework.cycle_state import CycleState
    from pysched.framework.status import FitError
    try:
        sim.scheduler.schedule_pod(fwk, CycleState(), qpi.pod, None)
    except FitError as exc:
        failure = exc
    sim.add_node(node("n3", labels={ZONE: "a"}))          # arrives before the failure is handled
    sim.scheduler._cycle_failed(fwk, CycleState(), qpi, failure, 0.0, None)   # noqa: SLF001
    assert qpi.where in REQUEUED
    # and without a helpful event it waits in the pool
    sim.add_pod(pod("q", node_selector={ZONE: "z"}))
    q = sim.queue.pop_nowait()
    sim.add_node(node("n4", labels={ZONE: "y"}))
    sim.scheduler.schedule_one(q)
    assert q.where == "unschedulable"


def test_a_gating_plugin_without_registrations_is_released_by_any_event():
    from pysched.eventhandlers import EventRegistry
    from pysched.framework import PreEnqueuePlugin, Status
    from pysched.framework.status import Code
    from pysched.profile import default_registry

    class Hold(PreEnqueuePlugin):
        name = "Hold"
        open = False

        def pre_enqueue(self, pod):
            return None if Hold.open else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held", plugin="Hold")

    registry = default_registry()
    registry["Hold"] = Hold
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": "pysched",
                                         "plugins": {"preEnqueue": {"enabled": [{"name": "Hold"}]}}}]})
    sim = OfflineScheduler(cfg, registry=registry)
    assert "Hold" in EventRegistry(sim.frameworks.values()).wildcard_plugins
    sim.add_pod(pod("p"))
    qpi = sim.queue.get(next(iter(sim.handlers.pending)))
    assert qpi.gated
    Hold.open = True
    sim.add_node(node("n1"))
    assert qpi.where == "active"


def test_volume_hints_pick_the_claims_and_classes_that_matter():
    from pysched.framework.podinfo import PodInfo
    from pysched.plugins.helper.volumes import (
        binding_pvc_hint,
        binding_storage_class_hint,
        csinode_hint,
        pv_topology_hint,
        zone_pvc_hint,
        zone_storage_class_hint,
    )

    p = pod("p")
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    info = PodInfo.from_dict(p)

    def pvc(name, ns="default"):
        return {"metadata": {"name": name, "namespace": ns}}

    assert binding_pvc_hint(info, None, pvc("data")) and zone_pvc_hint(info, None, pvc("data"))
    assert not binding_pvc_hint(info, None, pvc("data", "elsewhere"))
    assert not binding_pvc_hint(info, None, pvc("other"))
    assert binding_pvc_hint(info, None, pvc("p-scratch")) and not zone_pvc_hint(info, None, pvc("p-scratch"))
    sc = {"metadata": {"name": "fast"}, "volumeBindingMode": "Immediate"}
    assert binding_storage_class_hint(info, None, sc) and not zone_storage_class_hint(info, None, sc)
    assert zone_storage_class_hint(info, None, dict(sc, volumeBindingMode="WaitForFirstConsumer"))
    assert not binding_storage_class_hint(info, sc, dict(sc, parameters={"x": "y"}))
    assert binding_storage_class_hint(info, sc, dict(sc, allowedTopologies=[{"matchLabelExpressions": []}]))
    migrated = "storage.alpha.kubernetes.io/migrated-plugins"
    csinode = {"metadata": {"name": "n1", "annotations": {migrated: "a"}}}
    assert csinode_hint(info, None, csinode) and not csinode_hint(info, csinode, csinode)
    assert csinode_hint(info, csinode, {"metadata": {"name": "n1", "annotations": {migrated: "a,b"}}})
    pv_hint = pv_topology_hint((ZONE,))
    pv = {"metadata": {"name": "v", "labels": {ZONE: "a"}}}
    relabelled = {"metadata": {"name": "v", "labels": {ZONE: "a", "x": "1"}}}
    assert pv_hint(info, None, pv) and not pv_hint(info, pv, relabelled)
    assert pv_hint(info, pv, {"metadata": {"name": "v", "labels": {ZONE: "b"}}})


def _gated_on_claims(n_pods: int):
    """An engine whose ``WaitClaims`` PreEnqueue plugin gates every pod until ``open`` (registering
    ResourceClaim/Add with a hint that counts its calls and accepts the pod's own claim only), and
    ``n_pods`` pods gated by it."""
    from pysched.framework import ClusterEvent, ClusterEventWithHint, PreEnqueuePlugin, Status
    from pysched.framework.status import Code
    from pysched.profile import default_registry

    class WaitClaims(PreEnqueuePlugin):
        name = "WaitClaims"
        open = False
        hint_calls = 0

        def pre_enqueue(self, pod):
            return None if WaitClaims.open else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "claim missing",
                                                       plugin=self.name)

        def events_to_register(self):
            def hint(pod, old, new):
                WaitClaims.hint_calls += 1
                return new["metadata"]["name"] == pod.name

            return [ClusterEventWithHint(ClusterEvent("ResourceClaim", "Add"), hint)]

    registry = default_registry()
    registry["WaitClaims"] = WaitClaims
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": "pysched",
                                         "plugins": {"preEnqueue": {"enabled": [{"name": "WaitClaims"}]}}}]})
    sim = OfflineScheduler(cfg, registry=registry)
    for i in range(n_pods):
        sim.add_pod(pod(f"p{i}"))
    gated = [sim.queue.get(uid) for uid in sim.handlers.pending]
    assert len(gated) == n_pods and all(q.gated for q in gated)
    return sim, WaitClaims, gated


def _claim(name: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "1", "uid": f"c-{name}"}}


def test_a_listed_batch_of_objects_moves_the_waiting_pods_once_without_hints():
    """A LIST applied at start-up (``ClusterEvents.batch``): one move for all its objects, by
    registration alone. Object by object, every gated pod went through every claim's hint (pods x
    claims calls: 30 million for 5,000 pods and 6,000 claims)."""
    sim, plugin, gated = _gated_on_claims(20)
    plugin.open = True
    with sim.events.batch():
        for i in range(50):
            sim.add_object(_claim(f"other-{i}"))
        assert all(q.gated for q in gated)        # nothing moves before the batch ends
    assert plugin.hint_calls == 0
    assert all(q.where == "active" for q in gated)


def test_object_by_object_the_hint_decides_for_each_pod():
    sim, plugin, gated = _gated_on_claims(20)
    plugin.open = True
    for i in range(5):
        sim.add_object(_claim(f"other-{i}"))
    assert plugin.hint_calls == 5 * 20 and all(q.gated for q in gated)
    sim.add_object(_claim("p3"))
    assert [q.pod.name for q in gated if not q.gated] == ["p3"]


def test_a_batch_moves_only_pods_whose_plugin_registered_the_event():
    sim, plugin, gated = _gated_on_claims(3)
    plugin.open = True
    with sim.events.batch():
        sim.add_object({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": "data", "namespace": "default", "resourceVersion": "1"}})
    assert all(q.gated for q in gated)


@pytest.mark.parametrize("waiting_priority,requeued", [(5, True), (50, False)])
def test_a_nominated_pod_deleted_frees_its_place_for_pods_of_lower_or_equal_priority(waiting_priority, requeued):
    """Upstream's deletePodFromSchedulingQueue: a pending pod nominated to a node, deleted, is an
    assigned pod deleted for the waiting pods of lower or equal priority (getLEPriorityPreCheck) -
    NodeResourcesFit's hint then sees resources freed on that node."""
    sim = OfflineScheduler()
    sim.add_node(node("n1", cpu="1"))
    sim.add_pod(bound("filler", "n1", cpu="900m"))
    waiting = pod("p", cpu="500m")
    waiting["spec"]["priority"] = waiting_priority
    qpi = rejected(sim, waiting, "NodeResourcesFit")
    nominated = pod("nom", cpu="500m")
    nominated["spec"]["priority"] = 10
    nominated["status"] = {"nominatedNodeName": "n1"}
    sim.add_pod(nominated)
    assert qpi.where == "unschedulable"
    sim.remove_pod(nominated["metadata"]["uid"])
    assert (qpi.where in REQUEUED) is requeued


def test_a_nomination_moved_elsewhere_frees_the_old_node():
    sim = OfflineScheduler()
    sim.add_node(node("n1", cpu="1"))
    sim.add_pod(bound("filler", "n1", cpu="900m"))
    qpi = rejected(sim, pod("p", cpu="500m"), "NodeResourcesFit")
    nominated = pod("nom", cpu="500m")
    nominated["status"] = {"nominatedNodeName": "n1"}
    sim.add_pod(nominated)
    moved = {**nominated, "metadata": {**nominated["metadata"], "resourceVersion": "99"},
             "status": {"nominatedNodeName": "n2"}}
    sim.add_pod(moved)
    assert qpi.where in REQUEUED
