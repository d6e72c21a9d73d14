"""Benchmark workloads are what their descriptions say: the many-terms anti-affinity workload has
hundreds of distinct terms and is schedulable, the preemption workload's init pods fill every node
so that each measured pod needs exactly its victims, priorities match the prelude's classes, and
every workload's objects are deterministic, uniquely named and the same for every scheduler."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from bench import verify
from bench.workloads import (
    GROUP_LABEL,
    HOSTNAME,
    PHASE_LABEL,
    WORKLOADS,
    Workload,
    no_prelude,
)
from pysched.apis.core.quantity import milli_value, value

MANY_TERMS = WORKLOADS["SchedulingPodAntiAffinity/ManyTerms_2000Nodes"]
PREEMPTION = WORKLOADS["Preemption/500Nodes"]
# The scales of the real runs in the report (nodes, init, measured).
MANY_TERMS_SMALL = MANY_TERMS.scaled(200, 200, 200)
PREEMPTION_SMALL = PREEMPTION.scaled(50, 200, 50)


def all_pods(w: Workload, scheduler: str = "pysched") -> list[dict]:
    return ([w.pod(i, scheduler, "init") for i in range(w.init_pods)]
            + [w.pod(i, scheduler, "measure") for i in range(w.measure_pods)])


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True)


# -- every workload ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_names_are_unique(name):
    w = WORKLOADS[name]
    nodes = [w.node(i)["metadata"]["name"] for i in range(w.nodes)]
    pods = [p["metadata"]["name"] for p in all_pods(w)]
    assert len(set(nodes)) == w.nodes
    assert len(set(pods)) == w.init_pods + w.measure_pods


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_pods_are_deterministic_and_differ_only_in_scheduler_name(name):
    w = WORKLOADS[name].scaled(WORKLOADS[name].nodes, min(WORKLOADS[name].init_pods, 1000),
                               min(WORKLOADS[name].measure_pods, 1000))
    ours, again, kube = all_pods(w, "pysched"), all_pods(w, "pysched"), all_pods(w, "default-scheduler")
    assert [canonical(p) for p in ours] == [canonical(p) for p in again]
    for a, b in zip(ours, kube):
        assert a["spec"].pop("schedulerName") == "pysched"
        assert b["spec"].pop("schedulerName") == "default-scheduler"
        assert canonical(a) == canonical(b)
    assert [canonical(w.node(i)) for i in range(min(w.nodes, 100))] == \
        [canonical(w.node(i)) for i in range(min(w.nodes, 100))]
    assert canonical(w.prelude()) == canonical(w.prelude())


def test_prelude_defaults_to_nothing_and_no_workload_may_lose_measured_pods():
    assert WORKLOADS["SchedulingBasic/500Nodes"].prelude is no_prelude and no_prelude() == []
    assert WORKLOADS["SchedulingBasic/500Nodes"].eviction_budget == {"init": 0, "measure": 0}
    assert PREEMPTION.eviction_budget == {"init": 1000, "measure": 0}
    assert PREEMPTION_SMALL.eviction_budget == {"init": 100, "measure": 0}


def test_15000_nodes_workload():
    w = WORKLOADS["SchedulingBasic/15000Nodes_10000Pods"]
    assert (w.nodes, w.init_pods, w.measure_pods, w.tags) == (15000, 1000, 10000, ("large",))
    assert w.node(14999) == WORKLOADS["SchedulingBasic/500Nodes"].node(14999)
    assert w.pod(9999, "x", "measure") == WORKLOADS["SchedulingBasic/500Nodes"].pod(9999, "x", "measure")


# -- anti-affinity with many distinct terms ------------------------------------------------------

def affinity_terms(pod: dict) -> list[tuple[str, dict]]:
    """(kind, term) for every pod (anti-)affinity term, required and preferred."""
    out = []
    for kind in ("podAffinity", "podAntiAffinity"):
        spec = (pod["spec"].get("affinity") or {}).get(kind) or {}
        out += [(f"{kind}/required", t) for t in spec.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
        out += [(f"{kind}/preferred", t["podAffinityTerm"])
                for t in spec.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
    return out


def distinct_terms(pods: list[dict]) -> set[tuple[str, str, str]]:
    return {(kind, canonical(t["labelSelector"]), t["topologyKey"]) for p in pods for kind, t in affinity_terms(p)}


def anti_affinity_problems(w: Workload) -> list[str]:
    """Why the workload's pods could not all be placed, by counting: every required anti-affinity
    term here is on the hostname, so the pods it keeps apart (its carriers and the pods its
    selector matches) need one node each; the terms must keep disjoint sets of pods apart (then
    each set is a clique and the sets do not interact) and the nodes must hold every pod."""
    pods = all_pods(w)
    nodes = [w.node(i) for i in range(w.nodes)]
    hostnames = {n["metadata"]["labels"][HOSTNAME] for n in nodes}
    problems = []
    apart: dict[str, set[str]] = {}
    for p in pods:
        for kind, t in affinity_terms(p):
            if kind == "podAntiAffinity/required":
                if t["topologyKey"] != HOSTNAME:
                    problems.append(f"{p['metadata']['name']}: required term on {t['topologyKey']}")
                apart.setdefault(canonical(t["labelSelector"]), set()).add(p["metadata"]["name"])
            elif kind.endswith("/required"):
                problems.append(f"{p['metadata']['name']}: {kind}")
    by_label: dict[tuple[str, str], set[str]] = {}
    for p in pods:
        for kv in p["metadata"]["labels"].items():
            by_label.setdefault(kv, set()).add(p["metadata"]["name"])
    for sel, carriers in apart.items():
        selector = json.loads(sel)
        if set(selector) == {"matchLabels"} and selector["matchLabels"]:    # by index; the same as a scan
            carriers |= set.intersection(*(by_label.get(kv, set()) for kv in selector["matchLabels"].items()))
        else:
            carriers |= {p["metadata"]["name"] for p in pods
                         if verify.selector_matches(selector, p["metadata"]["labels"])}
        if len(carriers) > len(hostnames):
            problems.append(f"{len(carriers)} pods kept apart by {sel} but {len(hostnames)} nodes")
    seen = Counter(name for members in apart.values() for name in members)
    problems += [f"{name} is in {n} anti-affinity sets" for name, n in seen.items() if n > 1]
    cpu = sum(verify.pod_requests(p)["cpu"] for p in pods)
    if cpu > sum(milli_value(n["status"]["allocatable"]["cpu"]) for n in nodes) or \
            len(pods) > sum(int(n["status"]["allocatable"]["pods"]) for n in nodes):
        problems.append("the nodes cannot hold every pod")
    return problems


@pytest.mark.parametrize("w", [MANY_TERMS, MANY_TERMS_SMALL], ids=["full", "200nodes"])
def test_many_terms_workload_is_schedulable(w):
    assert anti_affinity_problems(w) == []


def test_schedulability_count_catches_too_few_nodes():
    # Every group has 2 init + 2 measured pods: 3 nodes cannot keep them apart.
    problems = anti_affinity_problems(MANY_TERMS.scaled(3, 20, 20))
    assert problems and all("but 3 nodes" in p for p in problems)


def test_many_terms_workload_has_hundreds_of_distinct_terms():
    init = [MANY_TERMS.pod(i, "pysched", "init") for i in range(MANY_TERMS.init_pods)]
    measured = [MANY_TERMS.pod(i, "pysched", "measure") for i in range(MANY_TERMS.measure_pods)]
    terms = distinct_terms(init + measured)
    assert len(terms) >= 1000
    by_kind = Counter(kind for kind, _, _ in terms)
    assert by_kind == {"podAntiAffinity/required": 500, "podAntiAffinity/preferred": 500,
                       "podAffinity/preferred": 250}
    # The existing (init) pods already carry them all, and every measured pod has a required term.
    assert len(distinct_terms(init)) == len(terms)
    assert all(any(k == "podAntiAffinity/required" for k, _ in affinity_terms(p)) for p in measured)
    assert sum(1 for p in measured if len(affinity_terms(p)) > 1) == MANY_TERMS.measure_pods * 3 // 4
    # A measured pod's required term keeps it from its group's init pods too.
    groups = Counter(p["metadata"]["labels"][GROUP_LABEL] for p in init + measured)
    assert set(groups.values()) == {4} and len(groups) == 500


def test_pod_affinity_workload_binds_each_team_to_its_init_pods_zone():
    from bench import verify
    from bench.workloads import TEAM_LABEL, ZONE, ZONES
    w = WORKLOADS["SchedulingPodAffinity/1000Nodes"]
    nodes = [w.node(i) for i in range(6)]
    init = [w.pod(i, "pysched", "init") for i in range(60)]
    for p in init:   # the scheduler must put an init pod in its team's zone (a nodeSelector)
        zone = p["spec"]["nodeSelector"][ZONE]
        p["spec"]["nodeName"] = next(n["metadata"]["name"] for n in nodes if n["metadata"]["labels"][ZONE] == zone)
    measured = w.pod(4, "pysched", "measure")   # team-04: its init pods are in zone 4 % 3
    assert measured["metadata"]["labels"][TEAM_LABEL] == "team-04"
    for node in nodes:
        placed = dict(measured, spec=dict(measured["spec"], nodeName=node["metadata"]["name"]))
        ok = not verify.check_placements(nodes, [*init, placed])
        assert ok == (node["metadata"]["labels"][ZONE] == ZONES[4 % 3])


def test_old_anti_affinity_workload_has_one_term():
    w = WORKLOADS["SchedulingPodAntiAffinity/2000Nodes"]
    assert len(distinct_terms(all_pods(w))) == 1


# -- preemption ----------------------------------------------------------------------------------

def _amount(name: str, q: str) -> int:
    return milli_value(q) if name == "cpu" else value(q)


def fits(used: dict[str, int], alloc: dict[str, str]) -> bool:
    return all(amount <= _amount(name, alloc.get(name, "0")) for name, amount in used.items())


def add(a: dict[str, int], b: dict[str, int], times: int = 1) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v * times
    return out


def with_pod_count(requests: dict[str, int]) -> dict[str, int]:
    return {**requests, "pods": 1}


def preemption_problems(w: Workload) -> list[str]:
    """Why the workload would not measure preemption, by counting requests against allocatable:
    all init pods must fit and fill every node, so that no measured pod fits without evicting and
    exactly ``preemption_victims`` init pods make room for one."""
    init_shapes = {canonical(verify.pod_requests(w.pod(i, "s", "init"))) for i in range(w.init_pods)}
    measure_shapes = {canonical(verify.pod_requests(w.pod(i, "s", "measure"))) for i in range(w.measure_pods)}
    assert len(init_shapes) == 1 and len(measure_shapes) == 1, "one init and one measured pod shape"
    init = with_pod_count(json.loads(init_shapes.pop()))
    measured = with_pod_count(json.loads(measure_shapes.pop()))
    problems = []
    capacity = 0
    for i in range(w.nodes):
        alloc = w.node(i)["status"]["allocatable"]
        held = 0
        while fits(add({}, init, held + 1), alloc):
            held += 1
        capacity += held
        need = 0
        while need <= held and not fits(add(add({}, init, held - need), measured), alloc):
            need += 1
        if need != w.preemption_victims:
            problems.append(f"node {i}: a measured pod needs {need} victims on a full node")
    if capacity != w.init_pods:
        problems.append(f"the nodes hold {capacity} init pods, not {w.init_pods}: "
                        + ("some stay pending" if capacity < w.init_pods else "room is left over"))
    if w.preemption_victims * w.measure_pods > w.init_pods:
        problems.append("not enough victims for every measured pod")
    return problems


@pytest.mark.parametrize("w", [PREEMPTION, PREEMPTION_SMALL], ids=["full", "50nodes"])
def test_init_pods_fill_every_node_and_each_measured_pod_needs_its_victims(w):
    assert w.preemption_victims == 1
    assert preemption_problems(w) == []


def test_preemption_count_catches_room_left_over_and_wrong_victims():
    assert preemption_problems(PREEMPTION.scaled(60, 200, 50)) == [
        "the nodes hold 240 init pods, not 200: room is left over"]
    two = preemption_problems(replace(PREEMPTION_SMALL, preemption_victims=2))
    assert len(two) == 50 and two[0] == "node 0: a measured pod needs 1 victims on a full node"


def test_priorities_match_the_prelude_classes():
    prelude = PREEMPTION.prelude()
    classes = {body["metadata"]["name"]: body["value"] for _, body in prelude}
    assert len(classes) == len(prelude) == 2
    init = [PREEMPTION.pod(i, "s", "init") for i in range(PREEMPTION.init_pods)]
    measured = [PREEMPTION.pod(i, "s", "measure") for i in range(PREEMPTION.measure_pods)]
    for pod in init + measured:
        spec = pod["spec"]
        assert spec["priority"] == classes[spec["priorityClassName"]]
        assert spec.get("preemptionPolicy", "PreemptLowerPriority") == "PreemptLowerPriority"
        assert spec["terminationGracePeriodSeconds"] == 0     # a victim is gone at once without a kubelet
        assert pod["metadata"]["labels"][PHASE_LABEL] in ("init", "measure")
    assert max(p["spec"]["priority"] for p in init) < min(p["spec"]["priority"] for p in measured)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_prelude_objects_are_valid(name):
    for path, body, *status in WORKLOADS[name].prelude():
        group_version, kind, meta = body["apiVersion"], body["kind"], body["metadata"]
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        ns = meta.get("namespace")
        where = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
        assert path == where, (path, kind)
        assert meta["name"]
        assert not status or set(status[0]) == {"status"}     # merged into /status after the POST
        if kind == "PodDisruptionBudget":
            assert ns == "bench" and status and status[0]["status"]["disruptionsAllowed"] == 0
        if kind == "PriorityClass":
            assert isinstance(body["value"], int) and -2_147_483_648 <= body["value"] <= 1_000_000_000
            assert not body.get("globalDefault")


def test_dra_workload_brings_a_slice_per_node_and_a_claim_per_pod():
    from bench.workloads import DRA_CLASS, DRA_DEVICES_PER_NODE, H100_SELECTOR
    w = WORKLOADS["DynamicResources/1000Nodes"]
    (path, cls), = w.prelude()
    assert path.endswith("/deviceclasses") and cls["metadata"]["name"] == DRA_CLASS
    (_, slice_), = w.node_objects(7)
    assert slice_["spec"]["nodeName"] == slice_["spec"]["pool"]["name"] == w.node(7)["metadata"]["name"]
    assert len(slice_["spec"]["devices"]) == DRA_DEVICES_PER_NODE
    pod = w.pod(4, "pysched", "measure")
    (_, claim), = w.pod_objects(4, "pysched", "measure")
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] == H100_SELECTOR
    (_, plain), = w.pod_objects(5, "pysched", "measure")
    assert "selectors" not in plain["spec"]["devices"]["requests"][0]["exactly"]
    # Every pod fits: init and measured claims are fewer than the devices.
    assert w.init_pods + w.measure_pods <= w.nodes * DRA_DEVICES_PER_NODE
