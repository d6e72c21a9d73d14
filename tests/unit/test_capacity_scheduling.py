"""CapacityScheduling (ElasticQuota): the max and aggregate-min rules, usage from bound and assumed
pods, reclaim preemption that takes back only borrowed capacity, priority preemption inside a
quota, quotas and gangs together, the quota arithmetic's upstream corners, and the metrics.

Offline tests run the production cycle (``OfflineScheduler``: PreFilter, Reserve, PostFilter's dry
runs); victims an outcome names are then deleted, as the evaluator's DELETE would."""

from __future__ import annotations

import pytest

from pysched.apis import config as configmod
from pysched.metrics import METRICS
from pysched.plugins.capacity_scheduling.elasticquota import UNLIMITED, QuotaSpec, countable, exceeds, exceeds_named
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

GPU = "nvidia.com/gpu"
QUOTAS = {"multiPoint": {"enabled": [{"name": "CapacityScheduling"}]},
          "postFilter": {"enabled": [{"name": "CapacityScheduling"}], "disabled": [{"name": "*"}]}}


def quota(ns, lo=None, hi=None, name="quota", created="2026-01-01T00:00:00Z"):
    spec = {}
    if lo is not None:
        spec["min"] = lo
    if hi is not None:
        spec["max"] = hi
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created, "resourceVersion": "1"},
            "spec": spec}


def config(plugins=None, args=None):
    prof = {"schedulerName": "pysched", "plugins": plugins or QUOTAS}
    if args is not None:
        prof["pluginConfig"] = [{"name": "CapacityScheduling", "args": args}]
    return configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, "profiles": [prof]})


def gpu_pod(name, ns, gpus=1, start=None, **kw):
    p = pod(name, namespace=ns, extended={GPU: str(gpus)}, cpu="100m", **kw)
    if start:
        p["status"] = {"startTime": start}
    return p


def sim_with(quotas, nodes=2, gpus_per_node=4, args=None, plugins=None):
    sim = OfflineScheduler(config(plugins, args))
    for q in quotas:
        assert sim.add_object(q)
    for i in range(nodes):
        sim.add_node(node(f"n{i}", cpu="16", extended={GPU: str(gpus_per_node)}))
    return sim


def plugin(sim):
    return sim.frameworks["pysched"].plugins["CapacityScheduling"]


TEAMS = [quota("a", {GPU: "4", "cpu": "8"}, {GPU: "8", "cpu": "32"}),
         quota("b", {GPU: "4", "cpu": "8"}, {GPU: "8", "cpu": "32"})]


def test_a_team_borrows_what_the_other_leaves_idle_up_to_the_total_min():
    sim = sim_with(TEAMS)
    outs = [sim.schedule(gpu_pod(f"a{i}", "a")) for i in range(9)]
    assert [o.code for o in outs[:8]] == ["Scheduled"] * 8
    # 8 GPUs used by a = 8 = a's max = min(a) + min(b): the ninth is refused (max is checked first)
    assert outs[8].code == "Unschedulable"
    assert outs[8].message.startswith("0/2 nodes are available: Pod a/a8 is rejected in PreFilter because "
                                      "ElasticQuota a is more than Max.")
    assert plugin(sim).usage.of("a")[GPU] == 8


def test_the_total_min_bounds_borrowing_and_a_team_within_min_reclaims_exactly_its_guarantee():
    sim = sim_with(TEAMS, nodes=3)                              # 12 GPUs, but the mins add up to 8
    for i in range(8):
        assert sim.schedule(gpu_pod(f"a{i}", "a", start=f"2026-01-01T00:00:0{i}Z")).code == "Scheduled"
    out = sim.schedule(gpu_pod("a8", "a"))
    assert "ElasticQuota a is more than Max" in out.message
    taken = []
    for i in range(4):
        b = gpu_pod(f"b{i}", "b")
        out = sim.schedule(b)
        assert out.code == "Unschedulable", out
        assert out.message.startswith(f"0/3 nodes are available: Pod b/b{i} is rejected in PreFilter because "
                                      "total ElasticQuota used is more than min.")
        # one victim of a (over its min), never more than the pod needs; the latest started first
        assert out.nominated_node and len(out.victims) == 1 and out.victims[0].startswith("a/")
        taken.append(out.victims[0])
        victim = next(p for p in sim.cache.pods.values() if p.key == out.victims[0])
        sim.remove_pod(victim.uid)
        assert sim.schedule(b).code == "Scheduled"
    assert taken == [f"a/a{i}" for i in (7, 6, 5, 4)]
    assert plugin(sim).usage.of("a")[GPU] == 4 and plugin(sim).usage.of("b")[GPU] == 4
    # b has its guarantee; a is back at its min: a fifth b pod may not take a's guarantee
    out = sim.schedule(gpu_pod("b4", "b"))
    assert out.code == "Unschedulable" and not out.victims
    assert "total ElasticQuota used is more than min" in out.message
    assert "No victims found on node" in out.message


def test_a_team_over_its_min_only_preempts_its_own_lower_priority_pods():
    sim = sim_with(TEAMS)
    for i in range(4):
        assert sim.schedule(gpu_pod(f"b{i}", "b", priority=1000)).code == "Scheduled"
    for i in range(4):
        assert sim.schedule(gpu_pod(f"low{i}", "a", priority=0)).code == "Scheduled"
    # a is at its min (4) and the total at 8: a high-priority a pod must take one of a's own
    out = sim.schedule(gpu_pod("high", "a", priority=100))
    assert out.code == "Unschedulable" and len(out.victims) == 1 and out.victims[0].startswith("a/low")
    # a pod of a at the same priority as a's pods finds no victim at all
    out = sim.schedule(gpu_pod("same", "a", priority=0))
    assert not out.victims and "No victims found on node n0 for preemptor pod same" in out.message


def test_namespaces_without_a_quota_are_not_checked_and_never_mix_with_quota_pods():
    sim = sim_with(TEAMS[:1], nodes=1)
    assert sim.schedule(gpu_pod("free", "other", gpus=4)).code == "Scheduled"   # no quota: no check
    out = sim.schedule(gpu_pod("a0", "a"))
    assert out.code == "Unschedulable" and "Insufficient nvidia.com/gpu" in out.message
    # a is within its min, but "other" has no quota: its pods are never victims of a quota's pod
    assert not out.victims and "No victims found on node n0 for preemptor pod a0" in out.message


def test_usage_counts_pods_bound_by_anyone_before_and_after_the_quota_and_forgets_terminated_ones():
    sim = sim_with([], nodes=1)
    existing = gpu_pod("old", "a", gpus=3, node_name="n0", scheduler="default-scheduler")
    sim.add_pod(existing)
    assert sim.add_object(quota("a", {GPU: "4"}, {GPU: "4", "cpu": "8"}))   # created after its pod ran
    out = sim.schedule(gpu_pod("p", "a", gpus=2))
    assert "ElasticQuota a is more than Max" in out.message                   # 3 + 2 > 4
    done = dict(existing, status={"phase": "Succeeded"})
    sim.add_pod(done)
    assert plugin(sim).usage.of("a").get(GPU, 0) == 0
    assert sim.schedule(gpu_pod("p2", "a", gpus=2)).code == "Scheduled"


def test_reserve_counts_the_assumed_pod_and_unreserve_gives_it_back():
    sim = sim_with(TEAMS, nodes=1)
    cs = plugin(sim)
    p = sim.cache.pods  # noqa: F841 - the cache is not what the plugin reads
    from pysched.framework import CycleState
    from pysched.framework.podinfo import PodInfo
    info = PodInfo.from_dict(gpu_pod("x", "a", gpus=2))
    cs.reserve(CycleState(), info, "n0")
    assert cs.usage.of("a")[GPU] == 2
    cs.unreserve(CycleState(), info, "n0")
    assert cs.usage.of("a")[GPU] == 0
    bound = PodInfo.from_dict(gpu_pod("y", "a", gpus=1, node_name="n0"))
    cs.pod_seen(bound)
    cs.unreserve(CycleState(), bound, "n0")       # a bound pod is the informer's: not given back
    assert cs.usage.of("a")[GPU] == 1


def test_nominated_pods_of_the_same_quota_count_against_its_max():
    sim = sim_with([quota("a", {GPU: "4"}, {GPU: "4", "cpu": "32"})], nodes=1)
    for i in range(3):
        assert sim.schedule(gpu_pod(f"a{i}", "a")).code == "Scheduled"
    from pysched.framework.podinfo import PodInfo
    nominated = PodInfo.from_dict(gpu_pod("nom", "a", priority=10))
    sim.scheduler.queue.nominator.add(nominated, "n0")
    out = sim.schedule(gpu_pod("late", "a", priority=0))
    assert "ElasticQuota a is more than Max" in out.message        # 3 + 1 nominated + 1 > 4
    sim.scheduler.queue.nominator.delete(nominated.uid)
    assert sim.schedule(gpu_pod("late2", "a", priority=0)).code == "Scheduled"


@pytest.mark.parametrize("compatible", [False, True])
def test_a_quota_governs_what_it_names_unless_scheduler_plugins_compatible(compatible):
    # min and max name only GPUs; the pod also requests cpu and memory
    sim = sim_with([quota("a", {GPU: "4"}, {GPU: "8"})], args={"schedulerPluginsCompatible": compatible})
    out = sim.schedule(gpu_pod("p", "a"))
    if compatible:    # upstream: max's unnamed cpu is 0
        assert out.code == "Unschedulable" and "ElasticQuota a is more than Max" in out.message
    else:
        assert out.code == "Scheduled"
    sim = sim_with([quota("a", {GPU: "4"})], args={"schedulerPluginsCompatible": compatible})
    out = sim.schedule(gpu_pod("p", "a"))
    if compatible:    # upstream: no max is unlimited, but min's unnamed cpu and memory are 0
        assert "total ElasticQuota used is more than min" in out.message
    else:
        assert out.code == "Scheduled"


def test_the_oldest_quota_of_a_namespace_applies():
    sim = sim_with([quota("a", {GPU: "1"}, {GPU: "1"}, name="young", created="2026-02-01T00:00:00Z"),
                    quota("a", {GPU: "4"}, {GPU: "4"}, name="old", created="2026-01-01T00:00:00Z")])
    assert plugin(sim).quota_of("a").name == "old"
    assert sim.schedule(gpu_pod("p", "a", gpus=3)).code == "Scheduled"


def gang_in_quota(ns: str, nodes: int):
    """a holds 6 GPUs (its min is 4); then a PodGroup of 3 one-GPU members in ``ns``, scheduled in
    turn with ``postFilter: [Coscheduling, CapacityScheduling]`` as the docs list them."""
    plugins = {"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
               "multiPoint": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]},
               "postFilter": {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}],
                              "disabled": [{"name": "*"}]}}
    sim = sim_with(TEAMS, nodes=nodes, plugins=plugins)
    for i in range(6):
        assert sim.schedule(gpu_pod(f"a{i}", "a", priority=1000)).code == "Scheduled"
    assert sim.add_object({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                           "metadata": {"name": "job", "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z",
                                        "resourceVersion": "1"}, "spec": {"minMember": 3}})
    members = [gpu_pod(f"m{i}", ns, labels={"scheduling.x-k8s.io/pod-group": "job"}, priority=1000)
               for i in range(3)]
    for m in members:
        sim.observe_pending(m)
    return sim, members, [sim.schedule(m) for m in members]


def test_a_gang_inside_a_quota_reclaims_for_its_last_member():
    sim, members, outs = gang_in_quota("b", nodes=3)
    # Two fit under the total min (6 + 2 = 8), the third does not. b is within its min and a
    # borrows: the third reclaims one of a's GPUs, while the two members keep waiting at Permit -
    # with Coscheduling listed first at postFilter too, whose release of the waiting members runs
    # only when no preemption could complete the group (issue 50: it released them, its gate then
    # counted 0 of 3 members and vetoed the reclaim, and the gang never ran).
    assert [o.code for o in outs] == ["Waiting", "Waiting", "Unschedulable"]
    assert outs[2].nominated_node and len(outs[2].victims) == 1 and outs[2].victims[0].startswith("a/")
    assert plugin(sim).usage.of("b").get(GPU, 0) == 2             # the waiting members hold their GPUs
    victim = next(p for p in sim.cache.pods.values() if p.key == outs[2].victims[0])
    sim.remove_pod(victim.uid)
    assert sim.schedule(members[2]).code == "Scheduled"           # the group is complete: all three go
    assert plugin(sim).usage.of("b").get(GPU, 0) == 3


def test_a_gang_inside_a_quota_that_cannot_reclaim_is_released_whole():
    """a's own gang, a at 6 of its max 8 on 8 GPUs: the third member passes a's max, and a has no
    lower-priority pod to evict, so Coscheduling's PostFilter releases the waiting members and
    nothing of the gang stays charged."""
    sim, _, outs = gang_in_quota("a", nodes=2)
    assert [o.code for o in outs] == ["Waiting", "Waiting", "Unschedulable"]
    assert not outs[2].victims
    assert all(node is None for node, _ in sim.settled.values())
    assert plugin(sim).usage.of("a").get(GPU, 0) == 6             # nothing of the gang still charged


def test_upstream_quota_arithmetic():
    assert countable("nvidia.com/gpu") and countable("hugepages-2Mi") and countable("cpu")
    assert not countable("pods") and not countable("requests.cpu") and not countable("storage")
    # cpu, memory, ephemeral-storage always compared; others only when the left side names them
    assert exceeds({"cpu": 1}, {}, {}, UNLIMITED)
    assert not exceeds({GPU: 5}, {}, {}, UNLIMITED) and exceeds({GPU: 5}, {}, {}, 0)
    assert not exceeds({GPU: 2}, {GPU: 2}, {GPU: 4}, 0) and exceeds({GPU: 3}, {GPU: 2}, {GPU: 4}, 0)
    q = QuotaSpec.from_dict(quota("a", {"cpu": "1500m"}, {"memory": "1Gi"}))
    assert q.min == {"cpu": 1500} and q.max == {"memory": 2**30}
    compat = QuotaSpec.from_dict(quota("a"), scheduler_plugins_compatible=True)
    assert compat.max == {"cpu": UNLIMITED, "memory": UNLIMITED, "ephemeral-storage": UNLIMITED}
    # pysched's reading: only what the bound names
    assert not exceeds_named({"cpu": 5, "memory": 9}, {}, {GPU: 1}) and exceeds_named({GPU: 1}, {GPU: 1}, {GPU: 1})
    bad = QuotaSpec.from_dict(quota("a", {"cpu": "lots"}))
    assert bad.problems and "spec.min.cpu" in bad.problems[0]


def test_quota_metrics_are_read_when_scraped():
    sim = sim_with(TEAMS, nodes=2)
    for i in range(8):
        sim.schedule(gpu_pod(f"a{i}", "a"))
    reg = METRICS.registry
    assert reg.get_sample_value("pysched_quota_used", {"quota": "a/quota", "resource": GPU}) == 8
    assert reg.get_sample_value("pysched_quota_used", {"quota": "a/quota", "resource": "cpu"}) == pytest.approx(0.8)
    assert reg.get_sample_value("pysched_quota_min", {"quota": "b/quota", "resource": GPU}) == 4
    assert reg.get_sample_value("pysched_quota_max", {"quota": "b/quota", "resource": "cpu"}) == 32
    # (pysched_quota_preemption_victims_total counts evictions sent: tests/e2e/test_capacity_scheduling.py)


def test_simulate_explain_names_the_quota_that_held_the_pod_back():
    from pysched.tools.simulate import Simulation, format_explain
    from pysched.tools.snapshot import Snapshot
    snap = Snapshot(nodes=[node("n0", cpu="16", extended={GPU: "12"})], objects=TEAMS,
                    pods=[gpu_pod(f"a{i}", "a", node_name="n0") for i in range(8)])
    over = gpu_pod("a8", "a")
    del over["metadata"]["uid"]
    res = Simulation(config()).run(snap, [over], explain={"a/a8"})
    assert [(o.pod, o.node) for o in res.placements] == [("a/a8", None)]
    text = format_explain(res.explain["a/a8"])
    assert "Pod a/a8 is rejected in PreFilter because ElasticQuota a is more than Max" in text, text
    assert "ElasticQuota a/quota: cpu: used 800m + this pod 100m, min 8, max 32; " \
           "nvidia.com/gpu: used 8 + this pod 1, min 4, max 8" in text, text
    assert "nvidia.com/gpu: 9 of the mins' 8" in text, text


def test_status_used_names_every_bounded_resource_and_is_written_only_when_it_changes():
    from pysched.controllers.elasticquota import desired_used, used_patch
    eq = quota("a", {GPU: "4", "cpu": "8"}, {GPU: "8", "memory": "64Gi"})
    used = desired_used(eq, {"cpu": 1500, GPU: 0, "ephemeral-storage": 2**30})
    assert used == {"cpu": "1500m", "ephemeral-storage": "1Gi", "memory": "0", GPU: "0"}
    eq["status"] = {"used": {"cpu": "1.5", "memory": 0, GPU: "0", "ephemeral-storage": "1073741824"}}
    assert used_patch(eq, used) is None                       # the same amounts, written differently
    eq["status"]["used"]["pods"] = "3"
    eq["status"]["used"][GPU] = "2"
    assert used_patch(eq, used) == {"status": {"used": {**used, "pods": None}}}


def bound(name, ns, node_name, gpus=1, priority=None, start=None, **kw):
    p = gpu_pod(name, ns, gpus=gpus, start=start, node_name=node_name, priority=priority, **kw)
    return p


def test_a_quota_without_a_min_counts_as_over_it_so_its_borrowing_is_reclaimed():
    # b names only a max: it has no guarantee, every GPU it holds is borrowed
    sim = sim_with([quota("a", {GPU: "4"}, {GPU: "8"}), quota("c", {GPU: "4"}, {GPU: "8"}),
                    quota("b", None, {GPU: "8"})])
    for i in range(4):
        sim.add_pod(bound(f"a{i}", "a", "n0"))
        sim.add_pod(bound(f"b{i}", "b", "n1"))
    out = sim.schedule(gpu_pod("c0", "c"))
    assert "total ElasticQuota used is more than min" in out.message
    assert len(out.victims) == 1 and out.victims[0].startswith("b/"), out


def test_a_team_with_no_guarantee_cannot_reclaim_from_a_higher_priority_team():
    sim = sim_with([quota("a", {GPU: "8"}, {GPU: "8"}), quota("b", None, {GPU: "8"})])
    for i in range(6):
        sim.add_pod(bound(f"a{i}", "a", f"n{i // 4}", priority=1000))
    for i in range(2):
        sim.add_pod(bound(f"b{i}", "b", "n1", priority=0))
    out = sim.schedule(gpu_pod("b2", "b", priority=0))     # b is over its (absent) min: only its own, lower
    assert not out.victims, out


def test_the_total_min_rule_looks_only_at_what_the_pod_asks_for():
    sim = sim_with([quota("a", {GPU: "4"}, {GPU: "16"}), quota("b", {GPU: "4"}, {GPU: "16"})], nodes=3)
    for i in range(9):                                     # another scheduler ran 9 GPU pods in a
        sim.add_pod(bound(f"x{i}", "a", f"n{i // 4}", scheduler="default-scheduler"))
    cpu_only = pod("cpu", namespace="b", cpu="100m")
    assert sim.schedule(cpu_only).code == "Scheduled"
    out = sim.schedule(gpu_pod("g", "b"))                   # a GPU pod is held: 9 + 1 > 8
    assert "total ElasticQuota used is more than min" in out.message


def test_the_quota_rules_hold_after_the_victims_go_or_the_node_is_no_candidate():
    # four nodes, each with one pod of a (a borrows 2 over its min 2) and one of b; b's 2-GPU pod
    # would need both of a's borrowed GPUs, but each node has only one to give
    sim = sim_with([quota("a", {GPU: "2"}, {GPU: "8"}), quota("b", {GPU: "6"}, {GPU: "8"})], nodes=4)
    for i in range(4):
        sim.add_pod(bound(f"a{i}", "a", f"n{i}"))
        sim.add_pod(bound(f"b{i}", "b", f"n{i}"))
    out = sim.schedule(gpu_pod("big", "b", gpus=2))
    assert out.message.endswith("0/4 nodes are available: 4 global quota max exceeded."), out.message
    assert not out.victims


def test_nominated_pods_of_another_quota_within_its_min_count_against_the_total():
    sim = sim_with(TEAMS, nodes=2)
    for i in range(4):
        sim.add_pod(bound(f"a{i}", "a", "n0"))
    for i in range(3):
        sim.add_pod(bound(f"b{i}", "b", "n1"))
    from pysched.framework.podinfo import PodInfo
    nominated = PodInfo.from_dict(gpu_pod("bn", "b"))
    sim.scheduler.queue.nominator.add(nominated, "n1")
    out = sim.schedule(gpu_pod("a4", "a"))                 # 7 + 1 nominated + 1 > 8
    assert "total ElasticQuota used is more than min" in out.message
    sim.scheduler.queue.nominator.delete(nominated.uid)
    assert sim.schedule(gpu_pod("a5", "a")).code == "Scheduled"


def test_a_preemptor_waits_for_a_quota_victim_terminating_on_its_nominated_node():
    sim = sim_with(TEAMS, nodes=2)
    for i in range(8):
        sim.add_pod(bound(f"a{i}", "a", f"n{i // 4}"))
    leaving = bound("a0", "a", "n0")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    sim.add_pod(leaving)
    b = gpu_pod("b0", "b")
    b["status"] = {"nominatedNodeName": "n0"}
    out = sim.schedule(b)
    assert out.message.endswith("not eligible due to a terminating pod on the nominated node."), out.message


def test_a_reclaim_with_pod_affinity_terms_still_finds_its_victim():
    """Inter-pod affinity makes the dry run run PreFilter again: the quota rule must not refuse it there."""
    sim = sim_with(TEAMS, nodes=2)
    for i in range(8):
        sim.add_pod(bound(f"a{i}", "a", f"n{i // 4}"))
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "nothing-here"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    out = sim.schedule(gpu_pod("b0", "b", affinity=anti))
    assert len(out.victims) == 1 and out.victims[0].startswith("a/"), out


def test_a_bound_pod_whose_requests_change_is_counted_anew():
    sim = sim_with(TEAMS, nodes=1)
    cs = plugin(sim)
    from pysched.framework.podinfo import PodInfo
    cs.pod_seen(PodInfo.from_dict(bound("r", "a", "n0", gpus=2)))
    assert cs.usage.of("a")[GPU] == 2
    resized = bound("r", "a", "n0", gpus=1)
    resized["metadata"]["uid"] = next(iter(cs.usage.pods))
    cs.pod_seen(PodInfo.from_dict(resized))
    assert cs.usage.of("a")[GPU] == 1


def test_status_only_updates_of_a_quota_do_not_requeue_pods():
    sim = sim_with(TEAMS, nodes=1)
    hints = {e.event.action: e.hint for e in plugin(sim).events_to_register() if e.event.resource == "ElasticQuota"}
    old = quota("a", {GPU: "4"}, {GPU: "8"})
    status_only = dict(old, status={"used": {GPU: "3"}})
    assert not hints["Update"](None, old, status_only)
    assert hints["Update"](None, old, quota("a", {GPU: "5"}, {GPU: "8"}))


def test_the_plugin_is_the_status_controllers_quota_source():
    """CapacityScheduling declares ``QuotaStatusSource``: the namespaces whose usage changed go to
    the watcher, and ``bound_used`` counts bound pods only, in a copy the controller may keep."""
    from pysched.framework import QuotaStatusSource
    from pysched.framework.podinfo import PodInfo
    sim = sim_with(TEAMS, nodes=1)
    cs = plugin(sim)
    assert isinstance(cs, QuotaStatusSource)
    changed: list[str] = []
    cs.watch_usage(changed.append)
    cs.pod_seen(PodInfo.from_dict(bound("r", "a", "n0", gpus=2)))
    assert changed == ["a"]
    used = cs.bound_used("a")
    assert used[GPU] == 2 and cs.bound_used("b") == {}
    used[GPU] = 99
    assert cs.bound_used("a")[GPU] == 2
    assert sim.schedule(gpu_pod("p", "b", gpus=1)).code == "Scheduled"   # Reserve charges b: heard too
    assert "b" in changed
    cs.pod_gone(next(iter(cs.usage.pods)))
    assert changed[-1] == "a" and cs.bound_used("a").get(GPU, 0) == 0


def test_the_status_controller_index_follows_quotas_and_queues_only_quota_namespaces():
    from pysched.controllers.elasticquota import ElasticQuotaIndex
    changed = []
    index = ElasticQuotaIndex(changed.append)
    index.event(None, quota("a", {GPU: "4"}))
    index.event("ADDED", quota("b", {GPU: "4"}, name="q2"))
    assert changed == ["a", "b"] and set(index.quotas) == {"a", "b"}
    index.event("DELETED", quota("b", {GPU: "4"}, name="q2"))
    assert index.quotas["b"] == {}


def test_a_victim_on_its_way_out_is_not_charged_or_chosen_again():
    """Two pods of b reclaim one after the other before the first victim is gone: the second takes
    one more pod of a, not the first one's victim again nor two (upstream would take the same)."""
    from pysched.framework.podinfo import PodInfo
    sim = sim_with(TEAMS, nodes=2)
    for i in range(8):
        sim.add_pod(bound(f"a{i}", "a", f"n{i // 4}", start=f"2026-01-01T00:00:0{i}Z"))
    cs = plugin(sim)
    b0 = gpu_pod("b0", "b")
    first = sim.schedule(b0)
    assert len(first.victims) == 1
    victim = next(p for p in sim.cache.pods.values() if p.key == first.victims[0])
    cs.evaluator.doomed_victims.add(victim.uid)              # as the live evaluator marks it
    cs._count_victims(PodInfo.from_dict(b0), type("R", (), {"nominated_node_name": first.nominated_node,
                                                            "victims": first.victims})(), _success())
    assert cs.usage.of("a")[GPU] == 7 and victim.uid in cs.usage.leaving
    sim.scheduler.queue.nominator.add(PodInfo.from_dict(b0), first.nominated_node)
    second = sim.schedule(gpu_pod("b1", "b"))
    assert len(second.victims) == 1 and second.victims != first.victims, (first, second)
    cs.evaluator.doomed_victims.discard(victim.uid)          # its deletion failed: charged again
    sim.schedule(gpu_pod("b2", "b"))
    assert cs.usage.of("a")[GPU] == 8 and not cs.usage.leaving


def _success():
    from pysched.framework import Code, Status
    return Status(Code.SUCCESS)
