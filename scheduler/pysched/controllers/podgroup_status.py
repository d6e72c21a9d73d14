"""A PodGroup's status from its member pods, as scheduler-plugins' PodGroup controller computes it.

Upstream (``pkg/controllers/podgroup_controller.go``) moves a group one step per reconcile and
relies on its own status write to trigger the next step; ``next_status`` applies the same step
rule until it no longer changes anything, so one write lands where upstream converges after
several. The step rule, for a group with ``minMember`` m (absent: 0, as in Go):

* ``Finished`` and ``Failed`` are final: nothing changes any more;
* ``""`` -> ``Pending``;
* ``Pending`` -> ``Scheduling`` once at least m member pods exist (and at least one: upstream
  indexes the first pod here), filling ``occupiedBy`` from that pod's owners;
* otherwise: fewer than m pods -> ``Pending``; running + succeeded < m -> ``Scheduling``;
  >= m -> ``Running``; then any failed and failed + running + succeeded >= m -> ``Failed``; then
  succeeded >= m -> ``Finished`` (later rules win).

Two deliberate differences: the counts (pods by ``status.phase``) are kept current in every
non-final phase, not only outside ``Pending``; and ``scheduleStartTime``, which current upstream
never writes, is set once - when the group first reaches ``Scheduling`` - unless already set.
``status.scheduled`` (removed upstream, absent from the CRD) is never written. Zero counts and empty
strings are left out, as Go's ``omitempty`` does.
"""

from __future__ import annotations

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PENDING, SCHEDULING, RUNNING, FINISHED, FAILED, UNKNOWN = (
    "Pending", "Scheduling", "Running", "Finished", "Failed", "Unknown")
FINAL = frozenset((FINISHED, FAILED))
STATUS_FIELDS = ("phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime")


def min_member(pg: dict) -> int:
    try:
        return int((pg.get("spec") or {}).get("minMember") or 0)
    except (TypeError, ValueError):
        return 0


def pod_counts(pods: list[dict]) -> tuple[int, int, int]:
    """(running, succeeded, failed) member pods by ``status.phase``."""
    running = succeeded = failed = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            running += 1
        elif phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
    return running, succeeded, failed


def occupied_by(pod: dict) -> str:
    """Upstream's ``fillOccupiedObj``: sorted ``namespace/ownerName`` of the pod's owners, comma-joined."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    return ",".join(sorted(f"{ns}/{ref.get('name', '')}" for ref in meta.get("ownerReferences") or ()))


def _first(pods: list[dict]) -> dict:
    """The oldest member (upstream takes its list's first item, whose order is unspecified)."""
    return min(pods, key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "",
                                    (p.get("metadata") or {}).get("name") or ""))


def _clean(status: dict) -> dict:
    return {k: v for k, v in status.items() if v not in (None, "", 0)}


def step(status: dict, minimum: int, pods: list[dict], now: str) -> dict:
    """One application of upstream's transition rule (see the module docstring)."""
    phase = status.get("phase") or ""
    if phase in FINAL:
        return status
    new = dict(status)
    new["running"], new["succeeded"], new["failed"] = pod_counts(pods)
    running, succeeded, failed = new["running"], new["succeeded"], new["failed"]
    if phase == "":
        new["phase"] = PENDING
    elif phase == PENDING:
        if pods and len(pods) >= minimum:
            new["phase"] = SCHEDULING
            owners = occupied_by(_first(pods))
            if owners:
                new["occupiedBy"] = owners
            if not new.get("scheduleStartTime"):
                new["scheduleStartTime"] = now
    else:
        if len(pods) < minimum:
            new["phase"] = PENDING
        else:
            new["phase"] = SCHEDULING if succeeded + running < minimum else RUNNING
            if failed and failed + running + succeeded >= minimum:
                new["phase"] = FAILED
            if succeeded >= minimum:
                new["phase"] = FINISHED
    return _clean(new)


def next_status(pg: dict, pods: list[dict], now: str) -> dict:
    """The status the group should have, given all its member pods (same namespace, labelled)."""
    status = _clean({k: v for k, v in (pg.get("status") or {}).items() if k in STATUS_FIELDS})
    minimum = min_member(pg)
    for _ in range(8):           # at most "" -> Pending -> Scheduling -> recount -> final
        new = step(status, minimum, pods, now)
        if new == status:
            break
        status = new
    return status


def status_patch(old: dict, new: dict) -> dict:
    """A JSON merge patch turning ``old`` status fields into ``new`` (None removes a field)."""
    old = _clean({k: v for k, v in (old or {}).items() if k in STATUS_FIELDS})
    patch: dict = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch
