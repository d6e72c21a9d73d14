"""Pod (anti-)affinity terms, parsed once per pod, with kube-scheduler's matching rules.

A term matches a pod when the pod's namespace is in the term's namespaces (default: the
namespace of the pod that declares the term) or its ``namespaceSelector`` matches the namespace's
labels (``{}`` = every namespace, absent = none), and its ``labelSelector`` matches the pod's
labels (absent = nothing; ``{}`` = everything) - ``framework.AffinityTerm.Matches``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from pysched.apis.core.model import LabelSelector, ObjectError, parse_label_selector

if TYPE_CHECKING:
    from pysched.framework.podinfo import PodInfo


class AffinityTerm(NamedTuple):
    namespaces: frozenset[str]
    ns_selector: LabelSelector | None
    selector: LabelSelector | None
    topology_key: str

    def matches(self, pod: PodInfo, ns_labels: dict[str, str] | None) -> bool:
        if pod.namespace in self.namespaces or (self.ns_selector is not None
                                                and self.ns_selector.matches(ns_labels or {})):
            return self.selector is not None and self.selector.matches(pod.labels)
        return False

    def resolved_namespaces(self, list_namespaces: Callable[[LabelSelector], list[str]]) -> frozenset[str] | None:
        """The term's namespaces with its selector expanded (``None`` = all namespaces)."""
        if self.ns_selector is None:
            return self.namespaces
        if self.ns_selector.empty:
            return None
        return self.namespaces | frozenset(list_namespaces(self.ns_selector))


class WeightedTerm(NamedTuple):
    weight: int
    term: AffinityTerm


class PodAffinityTerms(NamedTuple):
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[WeightedTerm, ...]
    preferred_anti_affinity: tuple[WeightedTerm, ...]

    @property
    def any(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity
                    or self.preferred_affinity or self.preferred_anti_affinity)


EMPTY = PodAffinityTerms((), (), (), ())


def _term(raw: Any, pod_ns: str, where: str) -> AffinityTerm:
    if not isinstance(raw, dict):
        raise ObjectError(f"{where}: expected an object")
    key = raw.get("topologyKey") or ""
    if not key:
        raise ObjectError(f"{where}.topologyKey: required")
    sel = parse_label_selector(raw.get("labelSelector"), f"{where}.labelSelector")
    ns_sel = parse_label_selector(raw.get("namespaceSelector"), f"{where}.namespaceSelector")
    names = raw.get("namespaces") or []
    if not names and raw.get("namespaceSelector") is None:
        namespaces = frozenset((pod_ns,))
    else:
        namespaces = frozenset(names)
    # matchLabelKeys / mismatchLabelKeys are merged into labelSelector by the API server on create;
    # objects read from files get the same merge in scheduler.defaulting.
    return AffinityTerm(namespaces, ns_sel, sel, key)


def parse_pod_affinity(pod_affinity: dict[str, Any] | None, pod_anti_affinity: dict[str, Any] | None,
                       pod_ns: str) -> PodAffinityTerms:
    if not pod_affinity and not pod_anti_affinity:
        return EMPTY
    pa = pod_affinity or {}
    paa = pod_anti_affinity or {}
    base = "spec.affinity"

    def req(lst: Any, where: str) -> tuple[AffinityTerm, ...]:
        return tuple(_term(t, pod_ns, f"{where}[{i}]") for i, t in enumerate(lst or ()))

    def pref(lst: Any, where: str) -> tuple[WeightedTerm, ...]:
        out = []
        for i, w in enumerate(lst or ()):
            if not isinstance(w, dict):
                raise ObjectError(f"{where}[{i}]: expected an object")
            out.append(WeightedTerm(int(w.get("weight") or 0),
                                    _term(w.get("podAffinityTerm") or {}, pod_ns, f"{where}[{i}].podAffinityTerm")))
        return tuple(out)

    return PodAffinityTerms(
        req(pa.get("requiredDuringSchedulingIgnoredDuringExecution"),
            f"{base}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
        req(paa.get("requiredDuringSchedulingIgnoredDuringExecution"),
            f"{base}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
        pref(pa.get("preferredDuringSchedulingIgnoredDuringExecution"),
             f"{base}.podAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
        pref(paa.get("preferredDuringSchedulingIgnoredDuringExecution"),
             f"{base}.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
    )
