"""Independent placement checker: does the final cluster state satisfy every hard constraint?

Written apart from the scheduler's plugins (it reuses only the quantity parser) so that a bug in a
plugin cannot hide itself. It checks, for every bound pod: the node exists; the summed requests of
the node's pods (cpu, memory, ephemeral-storage, extended resources, pod count) fit allocatable;
nodeSelector and required node affinity; NoSchedule/NoExecute taints are tolerated; required pod
anti-affinity (and existing pods' anti-affinity against it); DoNotSchedule topology spread skew.
required pod affinity (a pod matching the term in the same domain, or - upstream's rule for the
first pod of a group - none anywhere and the pod matching its own term). A constraint it cannot
check (namespaceSelector, minDomains, matchLabelKeys) is reported as a violation of kind
``unchecked`` rather than passed silently. ``check_evictions`` counts the pods
that are gone (preemption victims) against what the workload allows; ``check_gangs`` finds
partially placed PodGroups; ``check_gpu_share`` checks GPUs shared device by device (the
annotation protocol GPUShare follows; the names are spelled out here, not imported from it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pysched.apis.core.quantity import milli_value, value


@dataclass(frozen=True)
class Violation:
    kind: str
    pod: str
    node: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} pod={self.pod} node={self.node}: {self.detail}"


def _key(pod: dict) -> str:
    m = pod["metadata"]
    return f"{m.get('namespace', 'default')}/{m['name']}"


def _amount(name: str, text) -> int:
    return milli_value(text) if name == "cpu" else value(text)


def pod_requests(pod: dict) -> dict[str, int]:
    """Effective requests: max(sum of containers, each init container) plus overhead."""
    spec = pod["spec"]
    total: dict[str, int] = defaultdict(int)
    for c in spec.get("containers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] += _amount(name, q)
    for c in spec.get("initContainers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total[name], _amount(name, q))
    for name, q in (spec.get("overhead") or {}).items():
        total[name] += _amount(name, q)
    return dict(total)


def _expr_matches(expr: dict, labels: dict) -> bool:
    op, key, vals = expr["operator"], expr["key"], expr.get("values") or []
    has = key in labels
    if op == "In":
        return has and labels[key] in vals
    if op == "NotIn":
        return not has or labels[key] not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        try:
            v, bound = int(labels[key]), int(vals[0])
        except (KeyError, ValueError, IndexError):
            return False
        return v > bound if op == "Gt" else v < bound
    raise ValueError(f"unknown operator {op!r}")


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelector semantics; a nil selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expr_matches(e, labels) for e in selector.get("matchExpressions") or ())


def node_affinity_ok(pod: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not req:
        return True
    for term in req.get("nodeSelectorTerms") or ():
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_expr_matches(e, labels) for e in exprs) and all(
                _expr_matches(f, {"metadata.name": node["metadata"]["name"]}) for f in fields):
            return True
    return False


def _tolerates(tol: dict, taint: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"
    if tol["key"] != taint["key"]:
        return False
    return op == "Exists" or (tol.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(pod: dict, node: dict) -> dict | None:
    tols = pod["spec"].get("tolerations") or ()
    for taint in node["spec"].get("taints") or ():
        if taint["effect"] in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tols):
            return taint
    return None


def check_placements(nodes: list[dict], pods: list[dict]) -> list[Violation]:
    """Every violation of a hard constraint among the bound pods (an empty list means valid)."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in pods if p["spec"].get("nodeName")]
    out: list[Violation] = []
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in bound:
        node_name = pod["spec"]["nodeName"]
        node = by_name.get(node_name)
        if node is None:
            out.append(Violation("node-missing", _key(pod), node_name, "bound to a node that does not exist"))
            continue
        for name, amount in pod_requests(pod).items():
            used[node_name][name] += amount
        used[node_name]["pods"] += 1
        if not node_affinity_ok(pod, node):
            out.append(Violation("node-affinity", _key(pod), node_name, "nodeSelector/required node affinity"))
        taint = untolerated_taint(pod, node)
        if taint:
            out.append(Violation("taint", _key(pod), node_name, f"untolerated taint {taint['key']}:{taint['effect']}"))
    for node_name, amounts in used.items():
        alloc = by_name[node_name]["status"].get("allocatable") or {}
        for name, amount in amounts.items():
            cap = _amount(name, alloc[name]) if name in alloc else 0
            if amount > cap:
                out.append(Violation("resources", "*", node_name, f"{name} requested {amount} > allocatable {cap}"))
    domains = _Domains(bound, by_name)
    out.extend(_check_anti_affinity(bound, by_name, domains))
    out.extend(_check_affinity(bound, by_name, domains))
    out.extend(_check_spread(bound, by_name))
    return out


def _domain(node: dict | None, key: str) -> str | None:
    return None if node is None else (node["metadata"].get("labels") or {}).get(key)


class _Domains:
    """The bound pods by topology domain, per key (built on first use of a key)."""

    def __init__(self, bound: list[dict], by_name: dict):
        self.bound, self.by_name = bound, by_name
        self._by_key: dict[str, dict[str, list[dict]]] = {}

    def pods_in(self, key: str, domain: str) -> list[dict]:
        if key not in self._by_key:
            idx: dict[str, list[dict]] = defaultdict(list)
            for p in self.bound:
                d = _domain(self.by_name.get(p["spec"]["nodeName"]), key)
                if d is not None:
                    idx[d].append(p)
            self._by_key[key] = idx
        return self._by_key[key].get(domain, [])


def _term_matches(term: dict, pod: dict, other: dict) -> bool:
    namespaces = set(term.get("namespaces") or [pod["metadata"].get("namespace", "default")])
    return (other["metadata"].get("namespace", "default") in namespaces
            and selector_matches(term.get("labelSelector"), other["metadata"].get("labels") or {}))


def _required_terms(pod: dict, kind: str, out: list[Violation]):
    """The pod's required ``kind`` (podAffinity/podAntiAffinity) terms this checker can judge; the
    others (namespaceSelector, matchLabelKeys) are reported ``unchecked`` into ``out``."""
    terms = (((pod["spec"].get("affinity") or {}).get(kind) or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or ())
    for term in terms:
        if term.get("namespaceSelector") is not None or term.get("matchLabelKeys") or term.get("mismatchLabelKeys"):
            out.append(Violation("unchecked", _key(pod), pod["spec"]["nodeName"],
                                 f"{kind} namespaceSelector/matchLabelKeys"))
            continue
        yield term


def _check_affinity(bound: list[dict], by_name: dict, domains: _Domains) -> list[Violation]:
    out: list[Violation] = []
    for pod in bound:
        for term in _required_terms(pod, "podAffinity", out):
            key = term["topologyKey"]
            mine = _domain(by_name.get(pod["spec"]["nodeName"]), key)
            if mine is not None and any(other is not pod and _term_matches(term, pod, other)
                                        for other in domains.pods_in(key, mine)):
                continue
            # Upstream lets the first pod of a group through: no pod anywhere matches the term and
            # the pod matches it itself. Judged on the final state, a match anywhere else means the
            # pod was placed away from the pods it needs.
            if (mine is not None and _term_matches(term, pod, pod)
                    and not any(other is not pod and _term_matches(term, pod, other) for other in bound)):
                continue
            out.append(Violation("affinity", _key(pod), pod["spec"]["nodeName"],
                                 f"no pod matching its required affinity in {key}={mine}"))
    return out


def _check_anti_affinity(bound: list[dict], by_name: dict, domains: _Domains) -> list[Violation]:
    out: list[Violation] = []
    pods_in = domains.pods_in
    for pod in bound:
        for term in _required_terms(pod, "podAntiAffinity", out):
            namespaces = set(term.get("namespaces") or [pod["metadata"].get("namespace", "default")])
            key = term["topologyKey"]
            mine = _domain(by_name.get(pod["spec"]["nodeName"]), key)
            if mine is None:
                continue
            for other in pods_in(key, mine):
                if other is pod or other["metadata"].get("namespace", "default") not in namespaces:
                    continue
                if selector_matches(term.get("labelSelector"), other["metadata"].get("labels") or {}):
                    out.append(Violation("anti-affinity", _key(pod), pod["spec"]["nodeName"],
                                         f"shares {key}={mine} with {_key(other)}"))
    return out


def _check_spread(bound: list[dict], by_name: dict) -> list[Violation]:
    out = []
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for pod in bound:
        for c in pod["spec"].get("topologySpreadConstraints") or ():
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            if c.get("minDomains") or c.get("matchLabelKeys"):
                out.append(Violation("unchecked", _key(pod), pod["spec"]["nodeName"],
                                     "spread minDomains/matchLabelKeys"))
                continue
            sel = repr(sorted((c.get("labelSelector") or {}).items()))
            groups[(pod["metadata"].get("namespace", "default"), c["topologyKey"], c["maxSkew"], sel)].append(pod)
    for (ns, key, max_skew, _), members in groups.items():
        probe = members[0]
        selector = probe["spec"]["topologySpreadConstraints"][0].get("labelSelector")
        for c in probe["spec"]["topologySpreadConstraints"]:
            if c["topologyKey"] == key:
                selector = c.get("labelSelector")
        # Eligible domains: nodes the pods could be placed on by node affinity and taints (the
        # default nodeAffinityPolicy Honor / nodeTaintsPolicy Ignore) that carry the key.
        counts = {d: 0 for n in by_name.values()
                  if node_affinity_ok(probe, n) and (d := _domain(n, key)) is not None}
        for pod in bound:
            if pod["metadata"].get("namespace", "default") != ns:
                continue
            if not selector_matches(selector, pod["metadata"].get("labels") or {}):
                continue
            d = _domain(by_name.get(pod["spec"]["nodeName"]), key)
            if d in counts:
                counts[d] += 1
        if counts and max(counts.values()) - min(counts.values()) > max_skew:
            out.append(Violation("topology-spread", f"{ns}/*", "*",
                                 f"{key} skew {max(counts.values()) - min(counts.values())} > maxSkew {max_skew}: "
                                 f"{counts}"))
    return out


GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def check_claims(claims: list[dict], pods: list[dict]) -> list[Violation]:
    """DRA: every bound pod's ResourceClaims are allocated, each from devices on the pod's node (a
    pool whose slices name that node, which for the bench driver is the pool named after the node),
    and no device is allocated to two claims."""
    by_name = {(c["metadata"].get("namespace", "default"), c["metadata"]["name"]): c for c in claims}
    out: list[Violation] = []
    owner: dict[tuple[str, str, str], str] = {}
    for c in claims:
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ():
            dev = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            name = f"{c['metadata'].get('namespace', 'default')}/{c['metadata']['name']}"
            if dev in owner and owner[dev] != name:
                out.append(Violation("dra", name, dev[1], f"device {'/'.join(dev)} also allocated to {owner[dev]}"))
            owner[dev] = name
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        ns = pod["metadata"].get("namespace", "default")
        for ref in pod["spec"].get("resourceClaims") or ():
            claim_name = ref.get("resourceClaimName")
            if not claim_name:
                out.append(Violation("unchecked", _key(pod), node, "claim from a template"))
                continue
            claim = by_name.get((ns, claim_name))
            alloc = ((claim or {}).get("status") or {}).get("allocation")
            if alloc is None:
                out.append(Violation("dra", _key(pod), node, f"claim {claim_name} not allocated"))
                continue
            for r in (alloc.get("devices") or {}).get("results") or ():
                if r.get("pool") != node:
                    out.append(Violation("dra", _key(pod), node,
                                         f"claim {claim_name} got {r.get('pool')}/{r.get('device')}, not on its node"))
    return out


GPU_MILLI, GPU_COUNT, GPU_MODEL = ("alibabacloud.com/gpu-milli", "alibabacloud.com/gpu-count",
                                   "alibabacloud.com/gpu-card-model")
GPU_INDEX = "alibabacloud.com/gpu-index"
NODE_GPUS = ("alibabacloud.com/gpu-count", "nvidia.com/gpu")     # a node's GPU count: the first it has
WHOLE_GPU = "nvidia.com/gpu"


def _gpu_ask(pod: dict) -> tuple[int, int, list[str]]:
    """(thousandths per GPU, GPUs, models: empty for any) a pod asks: its ``gpu-milli`` and
    ``gpu-count`` (default 1) annotations, else ``nvidia.com/gpu`` whole GPUs."""
    ann = pod["metadata"].get("annotations") or {}
    models = [m for m in (ann.get(GPU_MODEL) or "").split("|") if m]
    milli, count = int(ann.get(GPU_MILLI) or 0), int(ann.get(GPU_COUNT) or 1)
    if milli and count:
        return milli, count, models
    whole = pod_requests(pod).get(WHOLE_GPU, 0)
    return (1000, whole, models) if whole else (0, 0, models)


def check_gpu_share(nodes: list[dict], pods: list[dict]) -> list[Violation]:
    """GPU sharing: every bound pod that asks for GPUs is on a node of a model it accepts and has
    its GPUs written on it (``gpu-index``: as many distinct indices as it asks GPUs, each below the
    node's GPU count), and no GPU of a node is given more than 1000 thousandths."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    out: list[Violation] = []
    used: dict[tuple[str, int], int] = defaultdict(int)
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        node = by_name.get(node_name or "")
        milli, count, models = _gpu_ask(pod)
        if node is None or not count:
            continue
        alloc = node["status"].get("allocatable") or {}
        gpus = next((int(value(alloc[r])) for r in NODE_GPUS if value(alloc.get(r, "0")) > 0), 0)
        model = (node["metadata"].get("labels") or {}).get(GPU_MODEL)
        if models and model not in models:
            out.append(Violation("gpu-model", _key(pod), node_name, f"GPU model {model} not one of {models}"))
        text = (pod["metadata"].get("annotations") or {}).get(GPU_INDEX) or ""
        try:
            index = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            index = []
        if len(set(index)) != count or any(not 0 <= d < gpus for d in index):
            out.append(Violation("gpu-index", _key(pod), node_name,
                                 f"{GPU_INDEX}={text!r} for {count} GPU(s) of a node with {gpus}"))
            continue
        for d in index:
            used[(node_name, d)] += milli
    out += [Violation("gpu-share", "*", node, f"GPU {d} given {total}/1000")
            for (node, d), total in sorted(used.items()) if total > 1000]
    return out


def check_gangs(pods: list[dict], min_member: dict[str, int], label: str = GANG_LABEL) -> list[Violation]:
    """Gang (PodGroup) placements: a group with some members bound must have at least its
    ``minMember`` bound. ``min_member``: ``namespace/group`` -> minMember; a pod's group is its
    ``label``'s value; pods of other groups are not judged."""
    bound: dict[str, int] = defaultdict(int)
    for pod in pods:
        group = (pod["metadata"].get("labels") or {}).get(label)
        if group and pod["spec"].get("nodeName"):
            bound[f"{pod['metadata'].get('namespace', 'default')}/{group}"] += 1
    return [Violation("partial-gang", f"{key}/*", "*", f"{bound[key]} of minMember {need} bound")
            for key, need in sorted(min_member.items()) if 0 < bound[key] < need]


def check_evictions(pods: list[dict], label: str, created: dict[str, int],
                    budget: dict[str, int]) -> list[Violation]:
    """Pods removed (by preemption) beyond what is allowed. ``created``: label value (e.g. the
    benchmark phase) -> how many pods with that value were created; ``budget``: value -> how many
    of them may be gone (absent: none). A terminating pod (``deletionTimestamp`` set) counts as
    gone. Too many gone means a scheduler evicted pods it did not need to, or evicted pods it must
    not (a measured pod)."""
    alive: dict[str, int] = defaultdict(int)
    for pod in pods:
        val = (pod["metadata"].get("labels") or {}).get(label)
        if val is not None and not pod["metadata"].get("deletionTimestamp"):
            alive[val] += 1
    out = []
    for val, count in sorted(created.items()):
        gone = count - alive[val]
        allowed = budget.get(val, 0)
        if gone > allowed:
            out.append(Violation("eviction", f"*/{label}={val}", "*",
                                 f"{gone} of {count} pods gone, at most {allowed} allowed"))
    return out
