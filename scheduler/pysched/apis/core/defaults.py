"""What the API server does to a Pod on create that changes how it schedules, for pods read from files.

``pysched simulate`` schedules pods that never went through an API server, so it applies here the
parts of creation that matter to scheduling (Kubernetes 1.35):

* defaulting (``SetDefaults_Pod``): ``metadata.namespace`` ``default``; a container's (and init
  container's) requests default to its limits for every resource with a limit but no request -
  limits-only extended resources such as ``nvidia.com/gpu`` get requests; pod-level
  ``spec.resources`` requests default from the containers' requests, then from pod-level limits;
* the Priority admission plugin: ``spec.priority`` from ``priorityClassName`` (the snapshot's
  PriorityClasses plus the built-in ``system-cluster-critical`` / ``system-node-critical``), or
  from the globalDefault class; an unknown class is an error, as the API would reject the pod;
* the DefaultTolerationSeconds admission plugin: ``not-ready`` / ``unreachable`` NoExecute
  tolerations (300 s) unless the pod already tolerates them;
* PrepareForCreate: ``matchLabelKeys`` / ``mismatchLabelKeys`` of pod (anti-)affinity terms and
  ``matchLabelKeys`` of topology spread constraints merged into their ``labelSelector``
  (``key In/NotIn [the pod's value]``).

A pod without ``schedulerName`` is given ``default_scheduler`` (simulate passes its first profile,
where the API would say ``default-scheduler``). Each pod also gets a uid and an increasing
creationTimestamp, so queue order follows file order.
"""

from __future__ import annotations

import copy
import datetime

from pysched.apis.core.quantity import format_resource
from pysched.apis.core.resources import pod_requests

BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
DEFAULT_TOLERATION_SECONDS = 300
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
POD_LEVEL_RESOURCES = ("cpu", "memory")


class AdmissionError(ValueError):
    """The API server would reject this pod on create."""


def priority_classes(objects: list[dict]) -> tuple[dict[str, int], int | None]:
    """PriorityClass name -> value, and the globalDefault value (None if no class is default)."""
    classes = dict(BUILTIN_PRIORITY_CLASSES)
    default = None
    for o in objects:
        if o.get("kind") != "PriorityClass":
            continue
        value = o.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise AdmissionError(f"PriorityClass {o['metadata']['name']}: value: expected an integer")
        classes[o["metadata"]["name"]] = value
        if o.get("globalDefault") is True:
            default = value if default is None else min(default, value)
    return classes, default


def _default_container_requests(containers: list[dict]) -> None:
    for c in containers:
        res = c.get("resources")
        if not res or not res.get("limits"):
            continue
        reqs = res.setdefault("requests", {})
        if reqs is None:
            reqs = res["requests"] = {}
        for name, value in res["limits"].items():
            reqs.setdefault(name, value)


def _default_pod_level_requests(spec: dict) -> None:
    res = spec.get("resources")
    if not res or not res.get("limits"):
        return
    reqs = dict(res.get("requests") or {})
    containers_only = {k: v for k, v in spec.items() if k not in ("resources", "overhead")}
    aggregate = pod_requests(containers_only)
    for name in POD_LEVEL_RESOURCES:
        if name not in reqs and aggregate.get(name):
            reqs[name] = format_resource(name, aggregate[name])
    for name, value in res["limits"].items():
        if name not in reqs and (name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")):
            reqs[name] = value
    if reqs:
        res["requests"] = reqs


def _merge_label_keys(selector: dict | None, keys, operator: str, labels: dict) -> None:
    if selector is None:
        return
    exprs = selector.setdefault("matchExpressions", [])
    for key in keys or ():
        if key in labels:
            exprs.append({"key": key, "operator": operator, "values": [labels[key]]})


def _merge_affinity_keys(spec: dict, labels: dict) -> None:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block = affinity.get(kind) or {}
        terms = list(block.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        terms += [w.get("podAffinityTerm") or {}
                  for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
        for term in terms:
            if term.get("matchLabelKeys") or term.get("mismatchLabelKeys"):
                _merge_label_keys(term.get("labelSelector"), term.get("matchLabelKeys"), "In", labels)
                _merge_label_keys(term.get("labelSelector"), term.get("mismatchLabelKeys"), "NotIn", labels)


def _default_tolerations(spec: dict) -> None:
    tols = spec.get("tolerations") or []

    def tolerated(key: str) -> bool:
        return any((t.get("operator") == "Exists" and not t.get("key")) or
                   (t.get("key") == key and t.get("effect") in ("", None, "NoExecute")) for t in tols)

    added = []
    for key in (NOT_READY, UNREACHABLE):
        if not tolerated(key):
            added.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                          "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    if added:
        spec["tolerations"] = tols + added


def apply(pod: dict, *, default_scheduler: str, classes: dict[str, int], global_default: int | None,
          seq: int, base_time: datetime.datetime | None = None) -> dict:
    """A created copy of ``pod`` (the input is not modified)."""
    p = copy.deepcopy(pod)
    meta = p.setdefault("metadata", {})
    if not meta.get("namespace"):
        meta["namespace"] = "default"
    meta.setdefault("uid", f"simulated-{seq:06d}-{meta['name']}")
    base = base_time or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    meta.setdefault("creationTimestamp", (base + datetime.timedelta(seconds=seq)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta.setdefault("resourceVersion", "1")
    labels = meta.get("labels") or {}
    spec = p["spec"]
    spec.setdefault("schedulerName", default_scheduler)
    _default_container_requests(spec.get("containers") or [])
    _default_container_requests(spec.get("initContainers") or [])
    _default_pod_level_requests(spec)
    pc = spec.get("priorityClassName")
    if pc:
        if pc not in classes:
            raise AdmissionError(f"Pod {meta['namespace']}/{meta['name']}: spec.priorityClassName: "
                                 f"no PriorityClass with name {pc} was found")
        spec["priority"] = classes[pc]
    elif spec.get("priority") is None and global_default is not None:
        spec["priority"] = global_default
    _default_tolerations(spec)
    _merge_affinity_keys(spec, labels)
    for c in spec.get("topologySpreadConstraints") or ():
        if c.get("matchLabelKeys"):
            _merge_label_keys(c.get("labelSelector"), c["matchLabelKeys"], "In", labels)
    return p
