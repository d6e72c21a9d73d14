"""Go's ``time.Duration.String()`` for seconds: how kube-scheduler prints a duration in a message
(``3s``, ``1m0s``, ``1m30s``, ``1.5s``, ``500ms``, ``1h0m0s``)."""

from __future__ import annotations

_SECOND = 1_000_000_000


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(digits, '0').rstrip('0')}"


def go_duration(seconds: float) -> str:
    """``seconds`` as Go prints a ``time.Duration`` of that length (rounded to the nanosecond)."""
    ns = round(seconds * _SECOND)
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u == 0:
        return "0s"
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_fraction(u, 1_000)}µs"
    if u < _SECOND:
        return f"{sign}{_fraction(u, 1_000_000)}ms"
    hours, rest = divmod(u, 3600 * _SECOND)
    minutes, rest = divmod(rest, 60 * _SECOND)
    text = _fraction(rest, _SECOND) + "s"
    if hours:
        text = f"{hours}h{minutes}m{text}"
    elif minutes:
        text = f"{minutes}m{text}"
    return sign + text
