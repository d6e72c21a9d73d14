"""ElasticQuotas (``scheduling.x-k8s.io/v1alpha1``) and the arithmetic CapacityScheduling checks them with.

An ElasticQuota gives its namespace a guaranteed ``spec.min`` and a ceiling ``spec.max`` per
resource. Amounts are integers as the scheduler counts them (cpu in millicores, the rest in units,
fractions rounded up). Only resource names the scheduler can count are kept: cpu, memory,
ephemeral-storage and the "scalar" ones (extended resources such as ``nvidia.com/gpu``,
``hugepages-*``, ``*kubernetes.io/*``, ``attachable-volumes-*``); ``pods``, ``requests.cpu``,
``count/pods`` and the like are ignored, as upstream ignores them.

Two readings of "is ``x1 + x2`` over ``y``":

* ``exceeds_named`` (pysched's): only the resources ``y`` names are compared. A quota that names
  only GPUs governs only GPUs; a resource no quota's ``min`` names is not limited by the total.
* ``exceeds`` (scheduler-plugins' ``cmp2``): cpu, memory and ephemeral-storage are always
  compared (a bound that does not name them reads 0, except an absent ``spec.max``, which is
  unlimited); any other resource is compared when ``x1`` names it, against ``bound`` when ``y``
  does not (unlimited for ``max``, 0 for ``min``). So a quota whose ``min`` does not name memory
  counts every pod requesting memory as over its min, and one whose ``max`` does not refuses them.

``Usage`` is what each namespace holds: the requests of its pods on a node and not terminated,
whoever scheduled them, and of the pods this scheduler assumed. It is kept for every namespace, so
a quota created after its pods sees them at once (upstream counts only pods bound after the quota
appeared, until the scheduler restarts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pysched.framework.api import resource_value
from pysched.framework.podinfo import PodInfo

NATIVE = ("cpu", "memory", "ephemeral-storage")
UNLIMITED = 2**63 - 1


def countable(name: str) -> bool:
    """Whether CapacityScheduling counts resource ``name`` (upstream's native and scalar names)."""
    if name in NATIVE:
        return True
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.")


def countable_requests(requests: Mapping[str, int]) -> dict[str, int]:
    """A pod's requests as a quota counts them (``pods`` and the names it ignores left out)."""
    return {k: v for k, v in requests.items() if v and countable(k)}


def exceeds(x1: Mapping[str, int], x2: Mapping[str, int], y: Mapping[str, int], bound: int) -> bool:
    """``x1 + x2 > y`` in any resource (upstream's ``cmp2``; see the module docstring)."""
    for r in NATIVE:
        if x1.get(r, 0) + x2.get(r, 0) > y.get(r, 0):
            return True
    for r, v in x1.items():
        if r in NATIVE:
            continue
        if v + x2.get(r, 0) > y.get(r, bound):
            return True
    return False


def exceeds_named(x1: Mapping[str, int], x2: Mapping[str, int], y: Mapping[str, int], bound: int = 0) -> bool:
    """``x1 + x2 > y`` in a resource that ``y`` names (``bound`` unused: the same shape as ``exceeds``)."""
    for r, limit in y.items():
        if x1.get(r, 0) + x2.get(r, 0) > limit:
            return True
    return False


def add_into(total: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for r, v in amounts.items():
        total[r] = total.get(r, 0) + sign * v


def parse_amounts(raw: Any, path: str) -> tuple[dict[str, int], list[str]]:
    """A ResourceList as integer amounts (countable names only) and the problems found."""
    out: dict[str, int] = {}
    problems: list[str] = []
    if raw is None:
        return out, problems
    if not isinstance(raw, dict):
        return out, [f"{path}: not a map of resource names to quantities"]
    for name, q in raw.items():
        if not countable(str(name)):
            continue
        try:
            out[str(name)] = resource_value(str(name), q)
        except (ValueError, TypeError) as exc:
            problems.append(f"{path}.{name}: {exc}")
    return out, problems


@dataclass
class QuotaSpec:
    """One ElasticQuota: its key (``namespace/name``), bounds and creation time."""
    key: str
    namespace: str
    name: str
    min: dict[str, int]
    max: dict[str, int]
    created: str = ""
    resource_version: str = ""
    problems: list[str] = field(default_factory=list)
    min_named: tuple[str, ...] = ()      # the resources spec.min / spec.max name (status keys, metrics)
    max_named: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, obj: dict[str, Any], *, scheduler_plugins_compatible: bool = False) -> QuotaSpec:
        """The quota ``obj`` sets: the amounts its ``spec.min`` and ``spec.max`` name. With
        ``scheduler_plugins_compatible`` an absent ``spec.max`` reads as unlimited cpu, memory and
        ephemeral-storage, as upstream pads it (``exceeds`` reads the others as 0). A quantity that
        does not parse is left out and reported in ``problems``."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        ns = meta.get("namespace") or "default"
        name = meta.get("name") or ""
        lo, p1 = parse_amounts(spec.get("min"), "spec.min")
        hi, p2 = parse_amounts(spec.get("max"), "spec.max")
        raw_max = spec.get("max")
        if raw_max is None and scheduler_plugins_compatible:
            for r in NATIVE:
                hi.setdefault(r, UNLIMITED)
        return cls(f"{ns}/{name}", ns, name, lo, hi, meta.get("creationTimestamp") or "",
                   meta.get("resourceVersion") or "", p1 + p2,
                   tuple(sorted((spec.get("min") or {}) if isinstance(spec.get("min"), dict) else ())),
                   tuple(sorted((spec.get("max") or {}) if isinstance(raw_max, dict) else ())))


class Usage:
    """What each namespace's pods hold: requests of pods on a node (bound or assumed) until they
    are deleted or terminate. ``bound`` pods are the informer's; the others were assumed here.
    A pod a preemption chose as a victim is ``leaving``: still bound (``bound_used``) but no
    longer charged (``used``), so later preemptions do not take from its quota again for it."""

    def __init__(self) -> None:
        self.pods: dict[str, tuple[str, dict[str, int], bool]] = {}   # uid -> (namespace, requests, bound)
        self.used: dict[str, dict[str, int]] = {}                     # namespace -> amounts charged
        self.bound_used: dict[str, dict[str, int]] = {}               # namespace -> amounts of bound pods
        self.leaving: set[str] = set()

    def mark_leaving(self, uid: str) -> bool:
        counted = self.pods.get(uid)
        if counted is None or uid in self.leaving:
            return False
        self.leaving.add(uid)
        add_into(self.used[counted[0]], counted[1], -1)
        return True

    def unmark_leaving(self, uid: str) -> None:
        if uid in self.leaving:
            self.leaving.discard(uid)
            ns, req, _ = self.pods[uid]
            add_into(self.used[ns], req)

    def add(self, uid: str, namespace: str, requests: Mapping[str, int], bound: bool) -> bool:
        """Count (or recount) a pod; True when the namespace's usage changed."""
        req = countable_requests(requests)
        old = self.pods.get(uid)
        if old is not None:
            if old == (namespace, req, bound):
                return False
            leaving = uid in self.leaving
            self.remove(uid)
            if leaving:                       # still leaving: charged no more under its new requests
                self.pods[uid] = (namespace, req, bound)
                self.leaving.add(uid)
                if bound:
                    add_into(self.bound_used.setdefault(namespace, {}), req)
                self.used.setdefault(namespace, {})
                return True
        self.pods[uid] = (namespace, req, bound)
        add_into(self.used.setdefault(namespace, {}), req)
        if bound:
            add_into(self.bound_used.setdefault(namespace, {}), req)
        return True

    def remove(self, uid: str) -> str:
        """Stop counting a pod; its namespace ("" when it was not counted)."""
        old = self.pods.pop(uid, None)
        if old is None:
            return ""
        ns, req, bound = old
        if uid in self.leaving:
            self.leaving.discard(uid)         # no longer charged already
        else:
            add_into(self.used[ns], req, -1)
        if bound:
            add_into(self.bound_used[ns], req, -1)
        return ns

    def of(self, namespace: str) -> dict[str, int]:
        return self.used.get(namespace) or {}

    def namespaces(self) -> Iterable[str]:
        return self.used.keys()


class UsageOverlay:
    """Usage with some pods taken off or put back, for a dry run (the live ``Usage`` is not
    touched; what it counts meanwhile, such as a trial's reservations, shows through)."""

    def __init__(self, usage: Usage) -> None:
        self.usage = usage
        self.delta: dict[str, dict[str, int]] = {}

    def _req(self, pod: PodInfo) -> dict[str, int]:
        counted = self.usage.pods.get(pod.uid)
        return counted[1] if counted is not None else countable_requests(pod.requests)

    def remove(self, pod: PodInfo) -> None:
        add_into(self.delta.setdefault(pod.namespace, {}), self._req(pod), -1)

    def add(self, pod: PodInfo) -> None:
        add_into(self.delta.setdefault(pod.namespace, {}), self._req(pod))

    def of(self, namespace: str) -> dict[str, int]:
        base = self.usage.of(namespace)
        d = self.delta.get(namespace)
        if not d:
            return base
        out = dict(base)
        add_into(out, d)
        return out
