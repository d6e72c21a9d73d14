"""Cluster snapshots and pod files for ``pysched simulate``: read, validate, sort by kind.

A snapshot is what ``kubectl get nodes,pods -A -o yaml`` prints (a ``List``), or any YAML stream of
objects and ``*List``s; Namespaces, Services, workloads, PVCs/PVs/StorageClasses, CSINodes,
VolumeAttachments, CSIDrivers, CSIStorageCapacities, ResourceClaims, DeviceClasses, ResourceSlices,
PodDisruptionBudgets, PriorityClasses, PodGroups, ElasticQuotas and Deployments (for ``--scale``) are used when present,
other kinds are counted and ignored. A pod file (``load_pods``) holds Pods, workloads, and the same
supporting kinds (``SUPPORTING_KINDS``: a PodGroup, PriorityClass, PodDisruptionBudget or
ElasticQuota that goes with the pods). Every Node and Pod is validated up front so that a bad file
fails with an error naming the file, the object and the field -
``snapshot.yaml: Node node-a (items[3]): status.allocatable.cpu: invalid quantity '4x'`` - rather
than with a wrong placement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pysched.apis.core.model import parse_int
from pysched.apis.core.names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)
from pysched.apis.core.quantity import QuantityError, resource_value
from pysched.util.yamlfile import YAMLFileError, read_yaml

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("", "Equal", "Exists", "Lt", "Gt")
_INT64_RE = re.compile(r"0|-?[1-9][0-9]*")          # canonical decimal form, for fullmatch
USED_KINDS = ("Namespace", "Service", "ReplicaSet", "StatefulSet", "ReplicationController",
              "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment",
              "CSIDriver", "CSIStorageCapacity",
              "ResourceClaim", "DeviceClass", "ResourceSlice", "PriorityClass", "PodDisruptionBudget", "PodGroup",
              "ElasticQuota", "Deployment")

# What a pod file may hold besides Pods and workloads: whatever a snapshot holds but Nodes.
SUPPORTING_KINDS = USED_KINDS


class SnapshotError(ValueError):
    """A snapshot or pod file is unreadable or holds an invalid object; the message says where."""


@dataclass
class Snapshot:
    nodes: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)       # the USED_KINDS
    ignored: dict[str, int] = field(default_factory=dict)    # kind -> count


def _describe(obj: dict, where: str) -> str:
    kind = obj.get("kind") or "object"
    raw_meta = obj.get("metadata")
    meta = raw_meta if isinstance(raw_meta, dict) else {}
    name = meta.get("name")
    if not name:
        return f"{kind} ({where})"
    ns = meta.get("namespace")
    return f"{kind} {ns + '/' if ns and kind == 'Pod' else ''}{name} ({where})"


def read_objects(path: str | Path) -> list[tuple[dict, str]]:
    """Every object in a YAML stream, Lists flattened, each with where it came from."""
    p = Path(path)
    try:
        docs = read_yaml(p, all_documents=True)
    except YAMLFileError as exc:
        raise SnapshotError(f"{p}: {exc}") from None
    out: list[tuple[dict, str]] = []
    for d, doc in enumerate(docs):
        if doc is None:
            continue
        here = f"document {d + 1}" if len(docs) > 1 else "document"
        if not isinstance(doc, dict):
            raise SnapshotError(f"{p}: {here}: expected a Kubernetes object or List, got {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise SnapshotError(f"{p}: {here}: items: expected a list")
            item_kind = kind[:-4] if kind != "List" else None
            for i, item in enumerate(items):
                w = f"{here}, items[{i}]" if len(docs) > 1 else f"items[{i}]"
                if not isinstance(item, dict):
                    raise SnapshotError(f"{p}: {w}: expected an object")
                if item_kind and not item.get("kind"):
                    item = dict(item, kind=item_kind)
                out.append((item, w))
        else:
            out.append((doc, here))
    return out


def _fail(path, obj, where, fld, problem) -> SnapshotError:
    return SnapshotError(f"{path}: {_describe(obj, where)}: {fld}: {problem}")


def _string_map(path, obj, where, fld, value, key_problem=None, value_problem=None) -> None:
    """A map of strings; with ``key_problem``/``value_problem``, each key and value is checked too."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _fail(path, obj, where, fld, "expected a mapping of strings")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise _fail(path, obj, where, f"{fld}[{k}]", f"expected a string, got {v!r} (quote it in YAML)")
        problem = key_problem(k) if key_problem else None
        if problem:
            raise _fail(path, obj, where, fld, f"invalid key {k!r}: {problem}")
        problem = value_problem(v) if value_problem else None
        if problem:
            raise _fail(path, obj, where, f"{fld}[{k}]", f"invalid value {v!r}: {problem}")


def _labels(path, obj, where, fld, value) -> None:
    """A label map (``metadata.labels``, ``spec.nodeSelector``): keys and values as the API requires."""
    _string_map(path, obj, where, fld, value, qualified_name_problem, label_value_problem)


def _quantities(path, obj, where, fld, value) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _fail(path, obj, where, fld, "expected a mapping of resource name to quantity")
    for name, q in value.items():
        try:
            resource_value(str(name), q)
        except (QuantityError, ValueError) as exc:
            raise _fail(path, obj, where, f"{fld}.{name}", str(exc)) from None


def _metadata(path, obj, where, *, namespaced: bool, name_problem=None) -> dict:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise _fail(path, obj, where, "metadata", "required")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(path, obj, where, "metadata.name", "required")
    problem = name_problem(name) if name_problem else None
    if problem:
        raise _fail(path, obj, where, "metadata.name", f"invalid name {name!r}: {problem}")
    ns = meta.get("namespace")
    if namespaced and ns is not None:
        if not isinstance(ns, str):
            raise _fail(path, obj, where, "metadata.namespace", "expected a string")
        problem = dns1123_label_problem(ns) if ns else None
        if problem:
            raise _fail(path, obj, where, "metadata.namespace", f"invalid namespace {ns!r}: {problem}")
    _labels(path, obj, where, "metadata.labels", meta.get("labels"))
    # The apiserver checks annotation keys case-insensitively; values are free text.
    _string_map(path, obj, where, "metadata.annotations", meta.get("annotations"),
                lambda k: qualified_name_problem(k.lower()))
    return meta


def _mapping(path, obj, where, fld, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(path, obj, where, fld, "expected an object")
    return value


def _list(path, obj, where, fld, value) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(path, obj, where, fld, "expected a list")
    return value


def validate_node(obj: dict, path, where: str) -> None:
    _metadata(path, obj, where, namespaced=False, name_problem=dns1123_subdomain_problem)
    spec = _mapping(path, obj, where, "spec", obj.get("spec"))
    seen: dict[tuple[str, str], int] = {}
    for i, t in enumerate(_list(path, obj, where, "spec.taints", spec.get("taints"))):
        f = f"spec.taints[{i}]"
        if not isinstance(t, dict):
            raise _fail(path, obj, where, f, "expected an object")
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise _fail(path, obj, where, f"{f}.key", "required")
        problem = qualified_name_problem(key)
        if problem:
            raise _fail(path, obj, where, f"{f}.key", f"invalid key {key!r}: {problem}")
        if t.get("effect") not in TAINT_EFFECTS:
            raise _fail(path, obj, where, f"{f}.effect",
                        f"must be one of {', '.join(TAINT_EFFECTS)}, got {t.get('effect')!r}")
        value = t.get("value")
        if value is not None and not isinstance(value, str):
            raise _fail(path, obj, where, f"{f}.value", "expected a string")
        problem = label_value_problem(value) if value else None
        if problem:
            raise _fail(path, obj, where, f"{f}.value", f"invalid value {value!r}: {problem}")
        if (key, t["effect"]) in seen:
            raise _fail(path, obj, where, f, f"duplicate of spec.taints[{seen[key, t['effect']]}]: "
                                             "taints must be unique by key and effect")
        seen[key, t["effect"]] = i
    if spec.get("unschedulable") is not None and not isinstance(spec["unschedulable"], bool):
        raise _fail(path, obj, where, "spec.unschedulable", "expected true or false")
    status = _mapping(path, obj, where, "status", obj.get("status"))
    _quantities(path, obj, where, "status.allocatable", status.get("allocatable"))
    _quantities(path, obj, where, "status.capacity", status.get("capacity"))


def _toleration(path, obj, where, f, t) -> None:
    """One toleration, by the rules of the apiserver's ``ValidateTolerations``."""
    if not isinstance(t, dict):
        raise _fail(path, obj, where, f, "expected an object")
    for fld in ("key", "operator", "value", "effect"):
        if t.get(fld) is not None and not isinstance(t[fld], str):
            raise _fail(path, obj, where, f"{f}.{fld}", "expected a string")
    key, op, value, effect = (t.get(fld) or "" for fld in ("key", "operator", "value", "effect"))
    problem = qualified_name_problem(key) if key else None
    if problem:
        raise _fail(path, obj, where, f"{f}.key", f"invalid key {key!r}: {problem}")
    if op not in TOLERATION_OPERATORS:
        raise _fail(path, obj, where, f"{f}.operator",
                    f"must be empty or one of {', '.join(TOLERATION_OPERATORS[1:])}, got {op!r}")
    if not key and op != "Exists":
        raise _fail(path, obj, where, f"{f}.operator",
                    "must be Exists when key is empty, which means \"match all values and all keys\"")
    if effect and effect not in TAINT_EFFECTS:
        raise _fail(path, obj, where, f"{f}.effect", f"must be empty or one of {', '.join(TAINT_EFFECTS)}")
    seconds = t.get("tolerationSeconds")
    if seconds is not None:
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise _fail(path, obj, where, f"{f}.tolerationSeconds", "expected an integer")
        if effect != "NoExecute":
            raise _fail(path, obj, where, f"{f}.effect", "must be NoExecute when tolerationSeconds is set")
    if op == "Exists" and value:
        raise _fail(path, obj, where, f"{f}.value", "must be empty when operator is Exists")
    if op in ("", "Equal"):
        problem = label_value_problem(value)
        if problem:
            raise _fail(path, obj, where, f"{f}.value", f"invalid value {value!r}: {problem}")
    # As the apiserver: canonical decimal form (IsDecimalInteger), then in int64 range (ParseInt).
    if op in ("Lt", "Gt") and not (_INT64_RE.fullmatch(value) and parse_int(value) is not None):
        raise _fail(path, obj, where, f"{f}.value", f"must be a decimal integer for operator {op}, got {value!r}")


def validate_pod(obj: dict, path, where: str) -> None:
    _metadata(path, obj, where, namespaced=True, name_problem=dns1123_subdomain_problem)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _fail(path, obj, where, "spec", "required")
    containers = _list(path, obj, where, "spec.containers", spec.get("containers"))
    if not containers:
        raise _fail(path, obj, where, "spec.containers", "required: at least one container")
    for key in ("containers", "initContainers"):
        for i, c in enumerate(_list(path, obj, where, f"spec.{key}", spec.get(key))):
            f = f"spec.{key}[{i}]"
            if not isinstance(c, dict):
                raise _fail(path, obj, where, f, "expected an object")
            if not isinstance(c.get("name"), str) or not c["name"]:
                raise _fail(path, obj, where, f"{f}.name", "required")
            res = _mapping(path, obj, where, f"{f}.resources", c.get("resources"))
            _quantities(path, obj, where, f"{f}.resources.requests", res.get("requests"))
            _quantities(path, obj, where, f"{f}.resources.limits", res.get("limits"))
    res = _mapping(path, obj, where, "spec.resources", spec.get("resources"))
    _quantities(path, obj, where, "spec.resources.requests", res.get("requests"))
    _quantities(path, obj, where, "spec.resources.limits", res.get("limits"))
    _quantities(path, obj, where, "spec.overhead", spec.get("overhead"))
    _labels(path, obj, where, "spec.nodeSelector", spec.get("nodeSelector"))
    for i, t in enumerate(_list(path, obj, where, "spec.tolerations", spec.get("tolerations"))):
        _toleration(path, obj, where, f"spec.tolerations[{i}]", t)
    for fld in ("nodeName", "schedulerName", "priorityClassName"):
        if spec.get(fld) is not None and not isinstance(spec[fld], str):
            raise _fail(path, obj, where, f"spec.{fld}", "expected a string")
    if spec.get("priority") is not None and (not isinstance(spec["priority"], int)
                                             or isinstance(spec["priority"], bool)):
        raise _fail(path, obj, where, "spec.priority", "expected an integer")
    # Affinity, spread constraints and the rest are parsed by the scheduler's own PodInfo, whose
    # errors already name the field; surface them here with the object.
    from pysched.framework.podinfo import PodInfo
    info = PodInfo.from_dict(obj)
    if info.parse_error:
        raise SnapshotError(f"{path}: {_describe(obj, where)}: {info.parse_error}")
    # Node selector terms the scheduler tolerates as "matches nothing" the API would reject.
    terms = list(info.required_affinity.terms) if info.required_affinity is not None else []
    terms += [p.term for p in info.preferred_affinity]
    for t in terms:
        if not t.valid:
            raise SnapshotError(f"{path}: {_describe(obj, where)}: {t.error}")


def load_snapshot(path: str | Path) -> Snapshot:
    snap = Snapshot()
    seen: dict[tuple[str, str], str] = {}
    for obj, where in read_objects(path):
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise SnapshotError(f"{path}: {where}: kind: required")
        if kind == "Node":
            validate_node(obj, path, where)
            key = ("Node", obj["metadata"]["name"])
            target = snap.nodes
        elif kind == "Pod":
            validate_pod(obj, path, where)
            meta = obj["metadata"]
            key = ("Pod", f"{meta.get('namespace') or 'default'}/{meta['name']}")
            target = snap.pods
        elif kind in USED_KINDS:
            _metadata(path, obj, where, namespaced=True)
            snap.objects.append(obj)
            continue
        else:
            snap.ignored[kind] = snap.ignored.get(kind, 0) + 1
            continue
        if key in seen:
            raise SnapshotError(f"{path}: {_describe(obj, where)}: metadata.name: duplicate of {seen[key]}")
        seen[key] = where
        target.append(obj)
    return snap


def _check_supporting(path, obj: dict, where: str) -> None:
    """The fields of a supporting object simulate reads, held to the API's types."""
    kind = obj["kind"]
    if kind == "PriorityClass":
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail(path, obj, where, "value", "required: an integer")
        if obj.get("globalDefault") is not None and not isinstance(obj["globalDefault"], bool):
            raise _fail(path, obj, where, "globalDefault", "expected true or false")
        return
    spec = _mapping(path, obj, where, "spec", obj.get("spec"))
    if kind == "PodGroup":
        mm = spec.get("minMember")
        if mm is not None and (not isinstance(mm, int) or isinstance(mm, bool) or mm < 0):
            raise _fail(path, obj, where, "spec.minMember", f"expected a non-negative integer, got {mm!r}")
        _quantities(path, obj, where, "spec.minResources", spec.get("minResources"))
    elif kind == "ElasticQuota":
        _quantities(path, obj, where, "spec.min", spec.get("min"))
        _quantities(path, obj, where, "spec.max", spec.get("max"))


def load_pods(path: str | Path, expand=None, supporting: list[dict] | None = None, *,
              allow_empty: bool = False) -> list[dict]:
    """Pods to simulate, in file order. Workloads (``workloads.WORKLOAD_KINDS``) are handed to
    ``expand(obj, where) -> [(pod, where)]``; without it they are an error. With ``supporting``,
    the ``SUPPORTING_KINDS`` (PodGroups, PriorityClasses, PodDisruptionBudgets, ElasticQuotas...)
    are appended to it; without it they are an error. A file with no object at all is an error
    unless ``allow_empty`` (``simulate --scale`` has something to do without it)."""
    from pysched.tools.workloads import WORKLOAD_KINDS, WorkloadError
    pods = []
    seen: dict[str, str] = {}
    seen_objects: dict[tuple[str, str], str] = {}
    objects = read_objects(path)
    for obj, where in objects:
        kind = obj.get("kind")
        if kind in SUPPORTING_KINDS and kind not in WORKLOAD_KINDS and supporting is not None:
            meta = _metadata(path, obj, where, namespaced=True)
            okey = (kind, f"{meta.get('namespace') or ''}/{meta['name']}")
            if okey in seen_objects:
                raise _fail(path, obj, where, "metadata.name", f"duplicate of {seen_objects[okey]}")
            seen_objects[okey] = where
            _check_supporting(path, obj, where)
            supporting.append(obj)
            continue
        if kind in WORKLOAD_KINDS and expand is not None:
            _metadata(path, obj, where, namespaced=True, name_problem=dns1123_subdomain_problem)
            try:
                produced = expand(obj, where)
            except WorkloadError as exc:
                raise SnapshotError(f"{path}: {exc}") from None
        elif kind != "Pod":
            others = [*(WORKLOAD_KINDS if expand is not None else ()),
                      *(k for k in SUPPORTING_KINDS if k not in WORKLOAD_KINDS and supporting is not None)]
            raise SnapshotError(f"{path}: {_describe(obj, where)}: kind: expected Pod"
                                f"{' or one of ' + ', '.join(others) if others else ''}, got {kind!r}")
        else:
            produced = [(obj, where)]
        for pod, pod_where in produced:
            validate_pod(pod, path, pod_where)
            meta = pod["metadata"]
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            if key in seen:
                raise SnapshotError(f"{path}: {_describe(pod, pod_where)}: metadata.name: duplicate of {seen[key]}")
            seen[key] = pod_where
            pods.append(pod)
    if not objects and not allow_empty:
        raise SnapshotError(f"{path}: no Pods found")
    return pods     # may be empty: workloads with 0 replicas, a DaemonSet with no eligible node
