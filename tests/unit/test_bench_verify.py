"""The benchmark's independent placement checker catches every kind of violation it claims to."""

from bench import verify
from bench.workloads import ZONE
from pysched_dev.testkit import make_node, make_pod


def bound(pod: dict, node: str) -> dict:
    pod["spec"]["nodeName"] = node
    return pod


def kinds(nodes, pods) -> list[str]:
    return sorted(v.kind for v in verify.check_placements(nodes, pods))


def test_valid_placements_pass():
    nodes = [make_node("n1", labels={ZONE: "a"}), make_node("n2", labels={ZONE: "b"})]
    pods = [bound(make_pod(f"p{i}"), f"n{1 + i % 2}") for i in range(8)]
    assert verify.check_placements(nodes, pods) == []


def test_overcommitted_cpu_and_pod_count_are_violations():
    nodes = [make_node("n1", cpu="1", pods="3")]
    pods = [bound(make_pod(f"p{i}", cpu="300m"), "n1") for i in range(4)]
    vs = verify.check_placements(nodes, pods)
    details = " ".join(v.detail for v in vs)
    assert {v.kind for v in vs} == {"resources"}
    assert "cpu requested 1200 > allocatable 1000" in details
    assert "pods requested 4 > allocatable 3" in details


def test_extended_resource_absent_from_node_is_a_violation():
    nodes = [make_node("n1")]
    pods = [bound(make_pod("gpu", extended={"nvidia.com/gpu": "1"}), "n1")]
    assert kinds(nodes, pods) == ["resources"]


def test_init_container_max_counts_not_sum():
    nodes = [make_node("n1", cpu="1")]
    init = [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "900m"}}}]
    pods = [bound(make_pod("p", cpu="500m", init_containers=init), "n1")]
    assert kinds(nodes, pods) == []
    pods.append(bound(make_pod("q", cpu="200m"), "n1"))
    assert kinds(nodes, pods) == ["resources"]


def test_node_selector_and_required_affinity():
    nodes = [make_node("n1", labels={ZONE: "a"}), make_node("n2", labels={ZONE: "c"})]
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]}}}
    assert kinds(nodes, [bound(make_pod("ok", affinity=aff), "n1")]) == []
    assert kinds(nodes, [bound(make_pod("bad", affinity=aff), "n2")]) == ["node-affinity"]
    assert kinds(nodes, [bound(make_pod("sel", node_selector={ZONE: "a"}), "n2")]) == ["node-affinity"]


def test_untolerated_noschedule_taint_but_not_prefer():
    taint = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    soft = [{"key": "maint", "value": "x", "effect": "PreferNoSchedule"}]
    nodes = [make_node("hard", taints=taint), make_node("soft", taints=soft)]
    tol = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    assert kinds(nodes, [bound(make_pod("p"), "hard")]) == ["taint"]
    assert kinds(nodes, [bound(make_pod("t", tolerations=tol), "hard")]) == []
    assert kinds(nodes, [bound(make_pod("s"), "soft")]) == []
    wrong_value = [{"key": "dedicated", "operator": "Equal", "value": "other", "effect": "NoSchedule"}]
    assert kinds(nodes, [bound(make_pod("w", tolerations=wrong_value), "hard")]) == ["taint"]


def test_required_anti_affinity_on_hostname():
    nodes = [make_node("n1"), make_node("n2")]
    aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    apart = [bound(make_pod("a", labels={"color": "green"}, affinity=aff), "n1"),
             bound(make_pod("b", labels={"color": "green"}, affinity=aff), "n2")]
    assert kinds(nodes, apart) == []
    together = apart + [bound(make_pod("c", labels={"color": "green"}, affinity=aff), "n1")]
    assert "anti-affinity" in kinds(nodes, together)
    # An existing pod without the term still may not join a pod whose anti-affinity matches it.
    plain = [apart[0], bound(make_pod("d", labels={"color": "green"}), "n1")]
    assert kinds(nodes, plain) == ["anti-affinity"]


def test_topology_spread_skew():
    nodes = [make_node(f"n{z}", labels={ZONE: z}) for z in "abc"]
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "s"}}}]
    even = [bound(make_pod(f"p{i}", labels={"app": "s"}, spread=spread), f"n{'abc'[i % 3]}") for i in range(6)]
    assert kinds(nodes, even) == []
    skewed = even + [bound(make_pod("x", labels={"app": "s"}, spread=spread), "na"),
                     bound(make_pod("y", labels={"app": "s"}, spread=spread), "na")]
    assert kinds(nodes, skewed) == ["topology-spread"]
    # An empty zone counts as a domain with zero pods.
    lonely = [bound(make_pod(f"q{i}", labels={"app": "s"}, spread=spread), "na") for i in range(2)]
    assert kinds(nodes, lonely) == ["topology-spread"]


def test_pod_on_missing_node_and_unchecked_constraints_are_reported():
    nodes = [make_node("n1")]
    assert kinds(nodes, [bound(make_pod("p"), "gone")]) == ["node-missing"]
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {}}]}}
    assert kinds(nodes, [bound(make_pod("q", affinity=aff), "n1")]) == ["unchecked"]


def test_required_pod_affinity_in_a_zone():
    nodes = [make_node("a1", labels={ZONE: "a"}), make_node("a2", labels={ZONE: "a"}),
             make_node("b1", labels={ZONE: "b"})]
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"team": "red"}}, "topologyKey": ZONE}]}}
    anchor = bound(make_pod("anchor", labels={"team": "red"}), "a1")
    near = bound(make_pod("near", affinity=aff), "a2")                 # same zone, other node
    assert kinds(nodes, [anchor, near]) == []
    far = bound(make_pod("far", affinity=aff), "b1")
    assert kinds(nodes, [anchor, near, far]) == ["affinity"]
    assert kinds(nodes, [far]) == ["affinity"]                        # nothing matches, not self either
    # The first pod of a group that matches its own term may go anywhere while no other pod does...
    first = bound(make_pod("first", labels={"team": "red"}, affinity=aff), "b1")
    assert kinds(nodes, [first]) == []
    # ...but not once a matching pod is elsewhere: it should have joined it.
    assert kinds(nodes, [first, anchor]) == ["affinity"]
    # Another namespace's pod does not count unless the term names that namespace.
    other_ns = bound(make_pod("other", namespace="other", labels={"team": "red"}), "b1")
    assert kinds(nodes, [other_ns, far]) == ["affinity"]
    named = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"team": "red"}}, "topologyKey": ZONE, "namespaces": ["other"]}]}}
    assert kinds(nodes, [other_ns, bound(make_pod("named", affinity=named), "b1")]) == []


def test_unbound_pods_are_ignored():
    nodes = [make_node("n1", cpu="1")]
    assert verify.check_placements(nodes, [make_pod("p", cpu="5")]) == []


def phase_pod(name: str, phase: str, deleting: bool = False) -> dict:
    pod = make_pod(name, labels={"phase": phase})
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


def test_evictions_within_the_budget_pass():
    pods = [phase_pod(f"i{k}", "init") for k in range(3)] + [phase_pod(f"m{k}", "measure") for k in range(2)]
    created = {"init": 5, "measure": 2}
    assert verify.check_evictions(pods, "phase", created, {"init": 2, "measure": 0}) == []


def test_evictions_beyond_the_budget_and_lost_measured_pods_are_violations():
    pods = [phase_pod("i0", "init"), phase_pod("i1", "init", deleting=True), phase_pod("m0", "measure")]
    vs = verify.check_evictions(pods, "phase", {"init": 4, "measure": 2}, {"init": 2})
    assert [(v.kind, v.pod, v.detail) for v in vs] == [
        ("eviction", "*/phase=init", "3 of 4 pods gone, at most 2 allowed"),
        ("eviction", "*/phase=measure", "1 of 2 pods gone, at most 0 allowed")]
    # Pods without the label are not counted.
    assert verify.check_evictions([make_pod("x")], "phase", {"init": 0}, {}) == []


def _claim(name, results):
    status = {"allocation": {"devices": {"results": results}}} if results is not None else {}
    return {"metadata": {"name": name, "namespace": "default"}, "status": status}


def _dra_pod(name, claim, node):
    p = make_pod(name)
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return bound(p, node)


def test_dra_claims_allocated_on_the_pods_node_and_never_twice():
    def dev(pool, device):
        return {"driver": "gpu.bench.pysched.io", "pool": pool, "device": device, "request": "gpu"}
    good = [_claim("c1", [dev("n1", "gpu-0")]), _claim("c2", [dev("n1", "gpu-1")])]
    pods = [_dra_pod("p1", "c1", "n1"), _dra_pod("p2", "c2", "n1")]
    assert verify.check_claims(good, pods) == []
    twice = [_claim("c1", [dev("n1", "gpu-0")]), _claim("c2", [dev("n1", "gpu-0")])]
    assert [v.kind for v in verify.check_claims(twice, pods)] == ["dra"]
    elsewhere = [_claim("c1", [dev("n2", "gpu-0")]), good[1]]
    assert [v.kind for v in verify.check_claims(elsewhere, pods)] == ["dra"]
    unallocated = [_claim("c1", None), good[1]]
    assert [v.kind for v in verify.check_claims(unallocated, pods)] == ["dra"]
    assert verify.check_claims(unallocated, [make_pod("pending")]) == []   # unbound pods: nothing to check
