"""Device binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus): what
DynamicResources asks of a claim whose devices a driver must prepare before the pod may bind.

A ResourceSlice device may list ``bindingConditions`` (and ``bindingFailureConditions``, and
``bindsToNode``). With both gates on, the allocator may pick such a device; its allocation result
carries the two lists, and PreBind (after writing the allocation, with ``allocationTimestamp``)
waits until the driver sets every binding condition ``True`` in the claim's
``status.devices[].conditions`` for that device. As kube-scheduler 1.37's plugin:

* ready (``claim_ready``): every device result with binding conditions has a status entry (same
  driver, pool and device) in which each binding condition is True and no failure condition is
  True; a True failure condition is an error, ``device binding failed: claim=<name>,
  reason=<reason>, message="<message>"`` (Go's ``%q``);
* timed out (``claim_timed_out``): not ready and ``allocationTimestamp`` + ``bindingTimeout`` is in
  the past (only for claims with binding conditions): ``device binding timeout: claim=<name>``;
* PreBind's own wait ends after ``bindingTimeout`` (default 600 s):
  ``device binding timeout: context deadline exceeded``.

Upstream polls every 5 s; pysched also wakes on every change of the pod's claims in the object
store (readiness and failure are seen at once; a claim's own timeout is judged at upstream's 5 s
ticks only, so a wait fails with the message upstream's would), on the event loop, so the wait
blocks neither the loop nor other pods' binding cycles. A failed or timed-out PreBind is an Error: the
pod backs off, Unreserve takes it out of ``reservedFor`` (the allocation stays), and the next
attempt's Filter finds the claim unavailable on every node (failed, or timed out), so PostFilter
deallocates it and the pod gets devices anew.

``status_line`` is upstream's one-line summary of the devices still pending or failed, for the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from pysched.framework.api import go_quote

GATE = "DRADeviceBindingConditions"
DEVICE_STATUS_GATE = "DRAResourceClaimDeviceStatus"
BINDING_TIMEOUT_DEFAULT = "10m0s"   # DynamicResourcesBindingTimeoutDefault, as kube writes it
POLL = 5.0                          # upstream's poll interval: the longest pysched sleeps between checks
FAILED = "device binding failed"    # ErrDeviceBindingFailed
TIMEOUT = "device binding timeout"  # ErrDeviceBindingTimeout
DEADLINE = f"{TIMEOUT}: context deadline exceeded"
PENDING_REASON = "BindingConditionsPending"


def enabled(gates: Iterable[str]) -> bool:
    """Both gates on (``DeviceBindingAndStatus`` in upstream's allocator features)."""
    on = set(gates)
    return GATE in on and DEVICE_STATUS_GATE in on


class BindingFailed(Exception):
    """A failure condition is True, or a claim timed out: the message is upstream's error text."""


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or ())


def _device_status(claim: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
    for d in (claim.get("status") or {}).get("devices") or ():
        if (d.get("driver"), d.get("pool"), d.get("device")) == (result.get("driver"), result.get("pool"),
                                                                 result.get("device")):
            return d
    return None


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or ():
        if c.get("type") == kind:
            return c
    return None


def _is_true(status: dict[str, Any], kind: str) -> bool:
    c = _condition(status, kind)
    return c is not None and c.get("status") == "True"


def _name(claim: dict[str, Any]) -> str:
    return (claim.get("metadata") or {}).get("name", "")


def claim_ready(claim: dict[str, Any]) -> bool:
    """``isClaimReadyForBinding``: True when every binding condition of every allocated device is
    True (also when there are none); False while one is not yet; raises BindingFailed when a
    failure condition is True. An unallocated claim is not ready."""
    if not (claim.get("status") or {}).get("allocation"):
        return False
    for result in _results(claim):
        if not result.get("bindingConditions"):
            continue
        status = _device_status(claim, result)
        if status is None:
            return False
        for kind in result.get("bindingFailureConditions") or ():
            c = _condition(status, kind)
            if c is not None and c.get("status") == "True":
                raise BindingFailed(f"{FAILED}: claim={_name(claim)}, reason={c.get('reason', '')}, "
                                    f"message={go_quote(c.get('message', ''))}")
        if not all(_is_true(status, kind) for kind in result["bindingConditions"]):
            return False
    return True


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 ``metav1.Time`` (``2006-01-02T15:04:05Z``), or None."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(now: datetime) -> str:
    """``metav1.Time`` as the API server stores it: UTC, whole seconds."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim_timed_out(claim: dict[str, Any], timeout: float, now: datetime) -> bool:
    """``isClaimTimeout``: the claim has a device with binding conditions and its
    ``allocationTimestamp`` is more than ``timeout`` seconds ago."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    at = parse_time(allocation.get("allocationTimestamp"))
    if at is None:
        return False
    if not any(r.get("bindingConditions") is not None for r in _results(claim)):
        return False
    return at + timedelta(seconds=timeout) < now


def unavailable(claim: dict[str, Any], timeout: float, now: datetime) -> bool:
    """Filter's check of an allocated claim: its binding failed, or it is not ready and timed out
    (PostFilter may then deallocate it so that other devices can be tried)."""
    try:
        ready = claim_ready(claim)
    except BindingFailed:
        return True
    return not ready and claim_timed_out(claim, timeout, now)


def has_binding_conditions(claims: Iterable[dict[str, Any]]) -> bool:
    """Whether any allocated device of ``claims`` has binding conditions (PreBind must wait)."""
    return any(r.get("bindingConditions") for c in claims for r in _results(c))


def pod_ready(claims: Iterable[dict[str, Any]], timeout: float | None, now: datetime) -> bool:
    """``isPodReadyForBinding`` over the claims as they are now: True when all are ready; raises
    BindingFailed on a failure condition, or when one is not ready and timed out (``timeout`` None:
    that is not judged now)."""
    for claim in claims:
        if not claim_ready(claim):
            if timeout is not None and claim_timed_out(claim, timeout, now):
                raise BindingFailed(f"{TIMEOUT}: claim={_name(claim)}")
            return False
    return True


def _summaries(claim: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for result in _results(claim):
        conds = result.get("bindingConditions") or []
        if not conds:
            continue
        status = _device_status(claim, result)
        failed = ([k for k in result.get("bindingFailureConditions") or () if _is_true(status, k)]
                  if status is not None else [])
        pending = [k for k in conds if status is None or not _is_true(status, k)]
        out.append({"driver": result.get("driver", ""), "pool": result.get("pool", ""),
                    "device": result.get("device", ""), "failed": failed, "pending": pending})
    return out


def status_line(claims: Iterable[dict[str, Any]], outcome: str) -> str:
    """``formatBCStatusOneLine(getBindingConditionsStatusForStatus(...))``: ``outcome`` is
    ``success`` (devices all true), ``failed`` (devices with a true failure condition) or anything
    else (devices still pending, none failed)."""
    parts = []
    for claim in claims:
        for s in _summaries(claim):
            if outcome == "success":
                keep, s = not s["failed"] and not s["pending"], s
            elif outcome == "failed":
                keep, s = bool(s["failed"]), {**s, "pending": []}
            else:
                keep = bool(s["pending"]) and not s["failed"]
            if not keep:
                continue
            line = f"<driver={s['driver']}, pool={s['pool']}> {s['device']}"
            if s["failed"]:
                line += f" failed=[{','.join(s['failed'])}]"
            if s["pending"]:
                line += f" pending=[{','.join(s['pending'])}]"
            parts.append(line)
    return "; ".join(parts)
