"""The scheduler-extender wire format (``k8s.io/kube-scheduler/extender/v1``), validated.

The Go types carry no JSON tags, so keys are the Go field names: ``Pod``, ``Nodes``,
``NodeNames``; ``Nodes``/``NodeNames``/``FailedNodes``/``FailedAndUnresolvableNodes``/``Error``;
a bare ``[{"Host", "Score"}]`` list; ``PodName``/``PodNamespace``/``PodUID``/``Node``;
``Pod``/``NodeNameToVictims``/``NodeNameToMetaVictims``. Go's decoder matches keys
case-insensitively, so the parsers here do too (``pod`` is accepted as ``Pod``), while
everything we send uses the exact Go names.

``WireError`` messages name the offending field (``ExtenderArgs.Pod.metadata.name: required``,
``ExtenderArgs.Pod.spec.containers[0].resources.requests: expected an object, got list``): the
pods and nodes in a request are checked field by field (``objectshape``) before anything parses
them. The server turns these errors into HTTP 400, the client into a logged, rejected answer.
"""

from __future__ import annotations

from typing import Any

from pysched.apis.core.model import ObjectError, parse_label_selector
from pysched.apis.core.names import dns1123_label_problem, dns1123_subdomain_problem
from pysched.apis.core.objectshape import json_kind, node_problem, pod_problem

MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10


class ExtenderError(RuntimeError):
    """An extender call failed: no answer, an error status, or an answer that is not valid."""


class WireError(ValueError):
    pass


def field(obj: dict, name: str) -> Any:
    """Case-insensitive lookup of a Go field name, as ``encoding/json`` does."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


def _mapping(v: Any, where: str) -> dict:
    if not isinstance(v, dict):
        raise WireError(f"{where}: expected an object, got {json_kind(v)}")
    return v


def parse_pod(v: Any, where: str) -> dict:
    pod = _mapping(v, where)
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise WireError(f"{where}.metadata.name: required")
    if not isinstance(pod.get("spec"), dict):
        raise WireError(f"{where}.spec: required")
    problem = pod_problem(pod, where)
    if problem:
        raise WireError(problem)
    # PodTopologySpread parses these selectors per cycle; a bad one is the pod's fault, said now.
    for i, c in enumerate(pod["spec"].get("topologySpreadConstraints") or ()):
        try:
            parse_label_selector(c.get("labelSelector"), f"{where}.spec.topologySpreadConstraints[{i}].labelSelector")
        except ObjectError as exc:
            raise WireError(str(exc)) from None
    meta.setdefault("namespace", "default")
    return pod


def parse_node(v: Any, where: str) -> dict:
    node = _mapping(v, where)
    meta = node.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise WireError(f"{where}.metadata.name: required")
    problem = node_problem(node, where)
    if problem:
        raise WireError(problem)
    return node


def parse_args(body: Any) -> tuple[dict, list[str] | None, list[dict] | None]:
    """ExtenderArgs -> (pod, node names or None, node objects or None)."""
    obj = _mapping(body, "ExtenderArgs")
    pod = parse_pod(field(obj, "Pod"), "ExtenderArgs.Pod")
    names = field(obj, "NodeNames")
    nodes = field(obj, "Nodes")
    node_names = None
    node_objs = None
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise WireError("ExtenderArgs.NodeNames: expected a list of strings")
        node_names = names
    if nodes is not None:
        items = _mapping(nodes, "ExtenderArgs.Nodes").get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise WireError("ExtenderArgs.Nodes.items: expected a list")
        seen: dict[str, int] = {}
        for i, n in enumerate(items):
            name = parse_node(n, f"ExtenderArgs.Nodes.items[{i}]")["metadata"]["name"]
            if name in seen:
                raise WireError(f"ExtenderArgs.Nodes.items[{i}].metadata.name: {name!r} duplicates items[{seen[name]}]")
            seen[name] = i
        node_objs = items
    if node_names is None and node_objs is None:
        raise WireError("ExtenderArgs: one of Nodes or NodeNames is required")
    return pod, node_names, node_objs


def parse_binding_args(body: Any) -> dict:
    """ExtenderBindingArgs -> {PodName, PodNamespace, PodUID, Node}, all required (kube-scheduler sends all)."""
    obj = _mapping(body, "ExtenderBindingArgs")
    out = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        v = field(obj, key)
        if v is not None and not isinstance(v, str):
            raise WireError(f"ExtenderBindingArgs.{key}: expected a string, got {json_kind(v)}")
        if not v:
            raise WireError(f"ExtenderBindingArgs.{key}: required")
        problem = _NAME_RULES.get(key, lambda _: None)(v)
        if problem:
            raise WireError(f"ExtenderBindingArgs.{key}: invalid name {v[:64]!r}: {problem}")
        out[key] = v
    return out


# The names bind puts into API paths must be object names (no "/", no "..").
_NAME_RULES = {"PodName": dns1123_subdomain_problem, "PodNamespace": dns1123_label_problem,
               "Node": dns1123_subdomain_problem}


def _victim_uids(v: Any, where: str, meta: bool) -> list[str]:
    """UIDs in one node's Victims (full pods) or MetaVictims (``{"UID": ...}``)."""
    victims = _mapping(v, where)
    pods = field(victims, "Pods")
    if pods is None:
        pods = []
    if not isinstance(pods, list):
        raise WireError(f"{where}.Pods: expected a list, got {json_kind(pods)}")
    n_pdb = field(victims, "NumPDBViolations")
    if n_pdb is not None and (type(n_pdb) is not int or not -(2**63) <= n_pdb < 2**63):
        raise WireError(f"{where}.NumPDBViolations: expected an integer")
    uids = []
    for i, p in enumerate(pods):
        w = f"{where}.Pods[{i}]"
        p = _mapping(p, w)
        if meta:
            uid = field(p, "UID")
            w += ".UID"
        else:
            m = p.get("metadata")
            if m is not None and not isinstance(m, dict):
                raise WireError(f"{w}.metadata: expected an object, got {json_kind(m)}")
            uid = (m or {}).get("uid")
            w += ".metadata.uid"
        if uid is not None and not isinstance(uid, str):
            raise WireError(f"{w}: expected a string, got {json_kind(uid)}")
        uids.append(uid or "")
    return uids


def parse_preemption_args(body: Any) -> tuple[dict, dict[str, list[str]]]:
    """ExtenderPreemptionArgs -> (pod, node -> victim UIDs)."""
    obj = _mapping(body, "ExtenderPreemptionArgs")
    pod = parse_pod(field(obj, "Pod"), "ExtenderPreemptionArgs.Pod")
    meta = field(obj, "NodeNameToMetaVictims")
    full = field(obj, "NodeNameToVictims")
    if meta is not None:
        where, victims, is_meta = "ExtenderPreemptionArgs.NodeNameToMetaVictims", meta, True
    elif full is not None:
        where, victims, is_meta = "ExtenderPreemptionArgs.NodeNameToVictims", full, False
    else:
        raise WireError("ExtenderPreemptionArgs: one of NodeNameToVictims or NodeNameToMetaVictims is required")
    out = {node: _victim_uids(v, f"{where}[{node}]", is_meta) for node, v in _mapping(victims, where).items()}
    return pod, out


def parse_preemption_result(body: Any, who: str) -> dict[str, tuple[list[str], int]]:
    """ExtenderPreemptionResult -> node -> (victim UIDs, NumPDBViolations)."""
    obj = _mapping(body, f"{who}: ExtenderPreemptionResult")
    victims = field(obj, "NodeNameToMetaVictims")
    if victims is None:
        return {}
    where = f"{who}: ExtenderPreemptionResult.NodeNameToMetaVictims"
    out = {}
    for node, v in _mapping(victims, where).items():
        uids = _victim_uids(v, f"{where}[{node}]", True)
        out[node] = (uids, int(field(v, "NumPDBViolations") or 0))
    return out


def victim_ref(namespace: str, name: str, uid: str, node: str, priority: int) -> dict:
    """The part of a victim pod a ``NodeNameToVictims`` request carries (the scheduler keeps no
    full object of pods already on nodes): its identity, node and priority."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"nodeName": node, "priority": priority}}


def parse_filter_result(body: Any, sent: list[str], node_cache_capable: bool, who: str) -> tuple[list[str], dict, dict]:
    """ExtenderFilterResult -> (passing names, failed, failed-and-unresolvable); raises on bad answers."""
    obj = _mapping(body, f"{who}: ExtenderFilterResult")
    err = field(obj, "Error")
    if err:
        raise WireError(f"{who}: {err}")
    sent_set = set(sent)
    names = field(obj, "NodeNames")
    nodes = field(obj, "Nodes")
    if node_cache_capable and names is not None:
        if not isinstance(names, list):
            raise WireError(f"{who}: ExtenderFilterResult.NodeNames: expected a list")
        result = list(names)
    elif nodes is not None:
        items = _mapping(nodes, f"{who}: ExtenderFilterResult.Nodes").get("items") or []
        result = [((n or {}).get("metadata") or {}).get("name", "") for n in items]
    else:
        result = []
    for n in result:
        if n not in sent_set:
            raise WireError(f"extender {who!r} claims a filtered node {n!r} which is not found in the input node list")
    failed = field(obj, "FailedNodes") or {}
    unres = field(obj, "FailedAndUnresolvableNodes") or {}
    for label, m in (("FailedNodes", failed), ("FailedAndUnresolvableNodes", unres)):
        if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values()):
            raise WireError(f"{who}: ExtenderFilterResult.{label}: expected a map of node name to reason")
    return result, dict(failed), dict(unres)


def parse_priorities(body: Any, sent: list[str], who: str) -> tuple[dict[str, int], list[str]]:
    """HostPriorityList -> (host -> score 0..10, problems). Out-of-range or unknown hosts are dropped."""
    if not isinstance(body, list):
        raise WireError(f"{who}: HostPriorityList must be a bare JSON array, got {type(body).__name__}")
    sent_set = set(sent)
    out: dict[str, int] = {}
    problems = []
    for i, hp in enumerate(body):
        if not isinstance(hp, dict):
            raise WireError(f"{who}: HostPriorityList[{i}]: expected an object")
        host, score = field(hp, "Host"), field(hp, "Score")
        if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, int):
            raise WireError(f"{who}: HostPriorityList[{i}]: Host must be a string and Score an integer")
        if host not in sent_set:
            problems.append(f"HostPriorityList[{i}]: host {host!r} was not sent")
            continue
        if not MIN_EXTENDER_PRIORITY <= score <= MAX_EXTENDER_PRIORITY:
            problems.append(f"HostPriorityList[{i}]: score {score} for {host!r} is outside "
                            f"[{MIN_EXTENDER_PRIORITY}, {MAX_EXTENDER_PRIORITY}]")
            continue
        out[host] = score
    return out, problems


def filter_result(node_names: list[str] | None, node_objs: list[dict] | None, passed: list[str],
                  failed: dict[str, str], unresolvable: dict[str, str], error: str = "") -> dict:
    if node_objs is not None:
        keep = set(passed)
        nodes = {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                 "items": [n for n in node_objs if n["metadata"]["name"] in keep]}
        return {"Nodes": nodes, "NodeNames": None, "FailedNodes": failed,
                "FailedAndUnresolvableNodes": unresolvable, "Error": error}
    return {"Nodes": None, "NodeNames": passed, "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable, "Error": error}
