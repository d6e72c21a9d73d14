"""Effective resource requests of a Pod, following the API's rules.

This is the arithmetic kube-scheduler gets from ``component-helpers/resource.PodRequests``:

* regular containers are summed;
* restartable init containers (sidecars, ``restartPolicy: Always``) are added to the sum and stay
  counted for every later init container;
* each ordinary init container needs ``its requests + sidecars started before it``; the pod needs
  the maximum of that and the container sum, per resource;
* pod-level ``spec.resources.requests`` (cpu, memory, hugepages) replace the aggregate;
* ``spec.overhead`` is added;
* a resource given only as a limit gets an equal request (API defaulting; applied here too so
  objects read from files behave like objects read from the API);
* a zero request is no demand;
* for pods already on a node, in-place resize is honoured, as the release pysched behaves as does
  it (``Accounting``, below).

In-place resize, per release (``component-helpers`` of that release):

* 1.35 and 1.36: a container's effective request is the maximum of spec,
  ``status.containerStatuses[].resources.requests`` (actuated) and ``allocatedResources``, taken
  per container (only actuated and allocated when the resize is Infeasible), for regular and
  restartable init containers, and only when the container's status has ``resources``. With
  InPlacePodLevelResourcesVerticalScaling (on by default from 1.36) pod-level requests are the
  same maximum over ``spec.resources.requests``, ``status.resources.requests`` and
  ``status.allocatedResources``, for the resources ``spec.resources.requests`` names.
* 1.37: spec, actuated and allocated are each aggregated over *all* containers (the sidecar rules
  above applied to each), and the pod needs the maximum of the three sums (of actuated and
  allocated when Infeasible); a container without status counts its spec in all three. With
  InPlacePodLevelResourcesVerticalScaling, a pod whose ``status.allocatedResources`` and
  ``status.resources.requests`` are both set has those as its allocated and actuated sums; pod-level
  requests are the maximum over the resources any of the three lists names.

Which rules apply is process-wide state (``set_accounting``): the code here sits below the
framework and has no Handle, and every pod one scheduler reads follows that scheduler's release.
The scheduler sets it once at start from the release it behaves as (``accounting_for``); the
default is kube-scheduler 1.37's with its default gates.

"Non-zero" requests (cpu 100m, memory 200Mi for containers that state none) are what the scoring
plugins use, exactly as upstream (applied to each of spec, actuated and allocated per container in
1.37); NodeResourcesFit's score ignores pod-level requests (``fit_score_requests``), as
kube-scheduler does (1.35 to 1.37).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pysched.apis.core.quantity import resource_value, saturate

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_POD_LEVEL = (CPU, MEMORY)


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_prefixed_native(name: str) -> bool:
    return "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """Extended resources are namespaced by a domain outside kubernetes.io (``nvidia.com/gpu``)."""
    return "/" in name and not is_prefixed_native(name) and not name.startswith("requests.")


def is_attachable_volume(name: str) -> bool:
    return name.startswith("attachable-volumes-")


def is_scalar(name: str) -> bool:
    """Resources kube-scheduler keeps in ``ScalarResources`` (everything but cpu/memory/storage/pods)."""
    return (is_extended_resource(name) or is_hugepages(name) or is_prefixed_native(name)
            or is_attachable_volume(name))


def _supported_pod_level(name: str) -> bool:
    return name in _POD_LEVEL or is_hugepages(name)


def parse_resource_list(raw: dict | None, where: str = "") -> dict[str, int]:
    if not raw:
        return {}
    out = {}
    for name, q in raw.items():
        try:
            out[name] = resource_value(name, q)
        except ValueError as exc:
            raise ValueError(f"{where}[{name}]: {exc}") from None
    return out


def container_requests(container: dict) -> dict[str, int]:
    """Requests of one container with limits-only resources defaulted to their limit."""
    res = container.get("resources")
    if not res:
        return {}
    reqs = res.get("requests")
    limits = res.get("limits")
    out = parse_resource_list(reqs) if reqs else {}
    if limits:
        for name, q in limits.items():
            if name not in out:
                out[name] = resource_value(name, q)
    return out


def _add(acc: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        acc[k] = acc.get(k, 0) + v


def _max_into(acc: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        if k not in acc or v > acc[k]:
            acc[k] = v


def _max_of(*lists: dict[str, int] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for lst in lists:
        if lst:
            _max_into(out, lst)
    return out


@dataclass(frozen=True)
class Accounting:
    """How requests of pods with in-place resize status are counted (module docstring).

    ``separate_sums``: component-helpers 1.37's rule (spec, actuated and allocated each summed, then
    the maximum); False: the per-container maximum of 1.35 and 1.36. ``pod_level_status``: the
    InPlacePodLevelResourcesVerticalScaling feature gate (pod-level ``status.resources`` and
    ``status.allocatedResources`` are read)."""

    separate_sums: bool = True
    pod_level_status: bool = True


IN_PLACE_POD_LEVEL_RESOURCES_VERTICAL_SCALING = "InPlacePodLevelResourcesVerticalScaling"


def accounting_for(kube_version: tuple[int, int], feature_gates: Iterable[str]) -> Accounting:
    """The accounting kube-scheduler ``kube_version`` does with the gates ``feature_gates`` on."""
    return Accounting(separate_sums=kube_version >= (1, 37),
                      pod_level_status=IN_PLACE_POD_LEVEL_RESOURCES_VERTICAL_SCALING in feature_gates)


_accounting = Accounting()


def current_accounting() -> Accounting:
    return _accounting


def set_accounting(acc: Accounting) -> Accounting:
    """Count every pod parsed from now on with ``acc``; the previous setting is returned. The
    scheduler calls this once at start, before its informers parse any pod; tests use
    ``accounting``."""
    global _accounting
    prev, _accounting = _accounting, acc
    return prev


@contextmanager
def accounting(acc: Accounting) -> Iterator[Accounting]:
    """``with accounting(accounting_for((1, 35), gates)):`` count pods as that release, then restore."""
    prev = set_accounting(acc)
    try:
        yield acc
    finally:
        set_accounting(prev)


def _resize_infeasible(status: dict | None) -> bool:
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == "PodResizePending":
            return cond.get("reason") == "Infeasible"
    return False


def _status_by_name(status: dict | None) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if not status:
        return out
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            name = cs.get("name")
            if name and name not in out:
                out[name] = cs
    return out


def _effective(spec_reqs: dict[str, int], cs: dict | None, infeasible: bool) -> dict[str, int]:
    """1.35/1.36: one container's maximum of spec, actuated and allocated."""
    if cs is None or cs.get("resources") is None:
        return spec_reqs
    actuated = parse_resource_list((cs.get("resources") or {}).get("requests"))
    allocated = parse_resource_list(cs.get("allocatedResources"))
    if infeasible:
        return _max_of(actuated, allocated)
    return _max_of(spec_reqs, actuated, allocated)


def _actuated(spec_reqs: dict[str, int], cs: dict | None, infeasible: bool) -> dict[str, int] | None:
    """1.37: what one container runs with (``containerActuatedRequests``); None: no list."""
    if cs is not None:
        res = cs.get("resources")
        if res is not None and res.get("requests") is not None:
            return parse_resource_list(res["requests"])
        if cs.get("allocatedResources") is not None:
            return parse_resource_list(cs["allocatedResources"])
    return None if infeasible else spec_reqs


def _allocated(spec_reqs: dict[str, int], cs: dict | None, infeasible: bool) -> dict[str, int] | None:
    """1.37: what the kubelet allocated one container (``containerAllocatedRequests``); None: no list."""
    if cs is not None and cs.get("allocatedResources") is not None:
        return parse_resource_list(cs["allocatedResources"])
    return None if infeasible else spec_reqs


def pod_resource(spec: dict, status: dict | None = None, *,
                 use_status: bool = False) -> tuple[dict[str, int], int, int]:
    """``(requests, non-zero cpu, non-zero memory)`` of a pod, as ``PodInfo.CalculateResource``."""
    reqs = pod_requests(spec, status, use_status=use_status)
    if not _pod_level_requests(spec):
        defaults = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
    else:
        defaults = {}
        if CPU not in reqs:
            defaults[CPU] = DEFAULT_MILLI_CPU_REQUEST
        if MEMORY not in reqs:
            defaults[MEMORY] = DEFAULT_MEMORY_REQUEST
    # The defaults fill what a container's list omits; when every container's spec states them
    # they change nothing, unless a list comes from the status (1.37's actuated and allocated
    # lists, or an Infeasible resize's): it may omit one.
    from_status = use_status and _carries_resize(status)
    if defaults and (from_status or not _every_container_states(spec, defaults)):
        non0 = pod_requests(spec, status, use_status=use_status, defaults=defaults)
    else:
        non0 = reqs
    # Sums of saturated amounts saturate too: the node table and the scores work in int64.
    return ({k: saturate(v) for k, v in reqs.items()}, saturate(non0.get(CPU, 0)),
            saturate(non0.get(MEMORY, 0)))


def fit_score_requests(spec: dict) -> tuple[dict[str, int], int, int] | None:
    """What NodeResourcesFit's *score* counts for a pod with pod-level ``spec.resources.requests``:
    ``(requests, cpu, memory)`` from the containers alone, each container missing a cpu or memory
    request counted at 100m / 200Mi; None for a pod without pod-level requests (the score then
    uses ``pod_resource``'s non-zero values, which are the same thing).

    kube-scheduler (1.35 to 1.37) builds the strategy scorer (``nodeResourceStrategyTypeMap``)
    without the PodLevelResources gate, so ``calculatePodResourceRequest`` asks ``PodRequests`` to
    skip pod-level resources there, while the filter and BalancedAllocation (whose scorer has the
    gate) use them."""
    if not _pod_level_requests(spec):
        return None
    containers_only = {k: v for k, v in spec.items() if k != "resources"}
    reqs = pod_requests(containers_only, defaults={CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST})
    out = {k: saturate(v) for k, v in reqs.items()}
    return out, out.get(CPU, 0), out.get(MEMORY, 0)


def _every_container_states(spec: dict, names: dict[str, int]) -> bool:
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            res = c.get("resources") or {}
            reqs = res.get("requests") or {}
            limits = res.get("limits") or {}
            for n in names:
                if n not in reqs and n not in limits:
                    return False
    return True


Row = tuple[dict[str, int] | None, bool]   # one container's list and whether it is a sidecar


def _aggregate(containers: Sequence[dict[str, int] | None], inits: Sequence[Row],
               defaults: dict[str, int] | None) -> dict[str, int]:
    """The sidecar-aware aggregate (``aggregateContainerResourcesByFn``) of one list per container."""
    reqs: dict[str, int] = {}
    for r in containers:
        r = r or {}
        if defaults:
            r = _apply_non_missing(r, defaults)
        _add(reqs, r)
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for r, restartable in inits:
        r = r or {}
        if defaults:
            r = _apply_non_missing(r, defaults)
        if restartable:
            _add(reqs, r)
            _add(sidecars, r)
            use = sidecars
        else:
            use = dict(r)
            _add(use, sidecars)
        _max_into(init_max, use)
    _max_into(reqs, init_max)
    return reqs


def pod_requests(spec: dict, status: dict | None = None, *, use_status: bool = False,
                 defaults: dict[str, int] | None = None) -> dict[str, int]:
    """Total requests of a pod (``PodRequests``); ``defaults`` fill requests a container omits.
    ``use_status``: honour in-place resize (the pod is on a node), by ``current_accounting()``."""
    acc = _accounting
    statuses = _status_by_name(status) if use_status else None
    infeasible = _resize_infeasible(status) if use_status else False
    pod_level = _pod_level_requests(spec)
    containers = spec.get("containers") or ()
    init_containers = spec.get("initContainers") or ()
    pod_status = status or {}

    if statuses is None or not acc.separate_sums:
        # kube-scheduler 1.35/1.36: the maximum per container (regular and sidecar containers).
        rows: list[dict[str, int] | None] = []
        for c in containers:
            r = container_requests(c)
            if statuses is not None:
                r = _effective(r, statuses.get(c.get("name")), infeasible)
            rows.append(r)
        inits: list[Row] = []
        for c in init_containers:
            r = container_requests(c)
            restartable = c.get("restartPolicy") == "Always"
            if restartable and statuses is not None:
                r = _effective(r, statuses.get(c.get("name")), infeasible)
            inits.append((r, restartable))
        reqs = _aggregate(rows, inits, defaults)
        if pod_level and statuses is not None and acc.pod_level_status and pod_status.get("resources") is not None:
            eff = _effective_pod_level(pod_level, pod_status, infeasible)
            pod_level = {k: eff.get(k, 0) for k in pod_level}
    else:
        # kube-scheduler 1.37: spec, actuated and allocated aggregated separately, then the maximum.
        spec_rows = [container_requests(c) for c in containers]
        spec_inits = [(container_requests(c), c.get("restartPolicy") == "Always") for c in init_containers]
        spec_sum = _aggregate(spec_rows, spec_inits, defaults)
        pod_res = pod_status.get("resources")
        if not _carries_resize(status):
            reqs = spec_sum    # actuated and allocated are the spec: nothing was resized
        else:
            if (acc.pod_level_status and pod_status.get("allocatedResources") is not None
                    and pod_res is not None and pod_res.get("requests") is not None):
                allocated_sum = parse_resource_list(pod_status["allocatedResources"])
                actuated_sum = parse_resource_list(pod_res["requests"])
            else:
                assert statuses is not None
                cs_rows = [statuses.get(c.get("name")) for c in containers]
                cs_inits = [statuses.get(c.get("name")) for c in init_containers]
                allocated_sum = _aggregate(
                    [_allocated(r, cs, infeasible) for r, cs in zip(spec_rows, cs_rows, strict=True)],
                    [(_allocated(r, cs, infeasible), side)
                     for (r, side), cs in zip(spec_inits, cs_inits, strict=True)],
                    defaults)
                actuated_sum = _aggregate(
                    [_actuated(r, cs, infeasible) for r, cs in zip(spec_rows, cs_rows, strict=True)],
                    [(_actuated(r, cs, infeasible), side)
                     for (r, side), cs in zip(spec_inits, cs_inits, strict=True)],
                    defaults)
            if infeasible:
                reqs = _max_of(actuated_sum, allocated_sum)
            else:
                reqs = _max_of(spec_sum, actuated_sum, allocated_sum)
        if pod_level and acc.pod_level_status and pod_res is not None:
            eff = _effective_pod_level(pod_level, pod_status, infeasible)
            pod_level = {k: v for k, v in eff.items() if _supported_pod_level(k)}

    for name, v in pod_level.items():
        reqs[name] = v

    overhead = spec.get("overhead")
    if overhead:
        _add(reqs, parse_resource_list(overhead, "spec.overhead"))
    return reqs


def _carries_resize(status: dict | None) -> bool:
    """Whether a pod's status says anything in-place resize reads: an Infeasible resize, a container
    status with ``allocatedResources`` or ``resources.requests``, pod-level ``status.resources`` or
    ``status.allocatedResources``. Without any, actuated and allocated are the spec."""
    if not status:
        return False
    if status.get("allocatedResources") is not None or status.get("resources") is not None:
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            if cs.get("allocatedResources") is not None or (cs.get("resources") or {}).get("requests") is not None:
                return True
    return _resize_infeasible(status)


def _effective_pod_level(pod_level: dict[str, int], pod_status: dict, infeasible: bool) -> dict[str, int]:
    """The maximum of pod-level spec (unless the resize is Infeasible), ``status.resources.requests``
    and ``status.allocatedResources``."""
    actuated = parse_resource_list((pod_status.get("resources") or {}).get("requests"))
    allocated = parse_resource_list(pod_status.get("allocatedResources"))
    return _max_of(None if infeasible else pod_level, actuated, allocated)


def _apply_non_missing(reqs: dict[str, int], defaults: dict[str, int]) -> dict[str, int]:
    missing = [k for k in defaults if k not in reqs]
    if not missing:
        return reqs
    out = dict(reqs)
    for k in missing:
        out[k] = defaults[k]
    return out


def _pod_level_requests(spec: dict) -> dict[str, int]:
    res = spec.get("resources")
    if not res:
        return {}
    reqs = dict(res.get("requests") or {})
    for name, q in (res.get("limits") or {}).items():
        reqs.setdefault(name, q)
    return {k: resource_value(k, q) for k, q in reqs.items() if _supported_pod_level(k)}


def limits_declare(spec: dict, names: set[str] | frozenset[str]) -> bool:
    """Whether any container or init container requests or limits one of ``names``."""
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                for name in res.get(part) or ():
                    if name in names:
                        return True
    return False
