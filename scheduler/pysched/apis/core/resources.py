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
* for pods already on a node, in-place resize is honoured: a container's effective request is the
  maximum of spec, ``status.containerStatuses[].resources.requests`` (actuated) and
  ``allocatedResources`` (or only the last two when the resize is Infeasible).

"Non-zero" requests (cpu 100m, memory 200Mi for containers that state none) are what the scoring
plugins use, exactly as upstream; NodeResourcesFit's score ignores pod-level requests
(``fit_score_requests``), as kube-scheduler 1.35 does.
"""

from __future__ import annotations

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
            if name:
                out[name] = cs
    return out


def _effective(spec_reqs: dict[str, int], cs: dict | None, infeasible: bool) -> dict[str, int]:
    if cs is None or cs.get("resources") is None:
        return spec_reqs
    actuated = parse_resource_list((cs.get("resources") or {}).get("requests"))
    allocated = parse_resource_list(cs.get("allocatedResources"))
    if infeasible:
        return _max_of(actuated, allocated)
    return _max_of(spec_reqs, actuated, allocated)


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
    if defaults and not _every_container_states(spec, defaults):
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

    kube-scheduler 1.35 builds the strategy scorer (``nodeResourceStrategyTypeMap``) without the
    PodLevelResources gate, so ``calculatePodResourceRequest`` asks ``PodRequests`` to skip
    pod-level resources there, while the filter and BalancedAllocation (whose scorer has the gate)
    use them."""
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


def pod_requests(spec: dict, status: dict | None = None, *, use_status: bool = False,
                 defaults: dict[str, int] | None = None) -> dict[str, int]:
    """Total requests of a pod (``PodRequests``); ``defaults`` fill requests a container omits."""
    statuses = _status_by_name(status) if use_status else None
    infeasible = _resize_infeasible(status) if use_status else False
    pod_level = _pod_level_requests(spec)

    reqs: dict[str, int] = {}
    for c in spec.get("containers") or ():
        r = container_requests(c)
        if statuses is not None:
            r = _effective(r, statuses.get(c.get("name")), infeasible)
        if defaults:
            r = _apply_non_missing(r, defaults)
        _add(reqs, r)

    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        r = container_requests(c)
        restartable = c.get("restartPolicy") == "Always"
        if restartable and statuses is not None:
            r = _effective(r, statuses.get(c.get("name")), infeasible)
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

    for name, v in pod_level.items():
        reqs[name] = v

    overhead = spec.get("overhead")
    if overhead:
        _add(reqs, parse_resource_list(overhead, "spec.overhead"))
    return reqs


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
