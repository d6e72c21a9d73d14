"""Consumable capacity (DRAConsumableCapacity): what a request consumes of a device's capacities.

Our own implementation of kube-scheduler 1.37.2's rules (``consumable_capacity.go`` of the
incubating allocator in k8s.io/dynamic-resource-allocation v0.37.2):

* A device's capacity may carry a ``requestPolicy``. What a request consumes of a capacity
  (``consumed``): with no ``capacity.requests`` entry for it, the policy's ``default`` or else the
  whole ``value``; with an entry and no policy, the entry; with ``validRange`` (and its ``min``),
  the entry rounded up to ``min`` and then to the next ``min + n * step``; with ``validValues``, the
  first valid value at least the entry (the entry itself when it exceeds them all).
* A request fits a device (``fits``, upstream's ``CmpRequestOverCapacity``) when the device has
  every capacity the request names (otherwise it is skipped, not an error), every consumed amount
  is representable and not negative (otherwise a ``CapacityError``: the allocation aborts), no
  consumed amount violates its policy (past ``validRange.max``, off the step from ``min``, not one
  of ``validValues``; the ``default`` always passes), and, for each capacity, what the cluster's
  shares already consume (persisted and in flight) plus what the allocation being searched takes
  plus this amount stays within ``value``.
* Rounding to a step uses ``Quantity.Value()`` arithmetic (integers rounded up), and its results
  keep the step's format; with DRAFractionalCapacityRange (off by default in 1.37) a range whose
  bounds are exact in thousandths uses milli-value arithmetic instead, as upstream's ``useMilli``.
  A request past int64 (or past the milli range) cannot be rounded: ``CapacityError`` with
  upstream's text.

Quantities keep their format (``Quantity``) because the allocation result records them
(``consumedCapacity``) and the API server writes them in canonical form: ``12Gi`` must stay
``12Gi``, not become ``12884901888``. ``str(q)`` is apimachinery's canonical form.

One difference, on purpose: upstream lets a consumed amount equal to the policy's ``default`` pass
by Go struct equality (same internal representation); pysched compares values. API validation
keeps ``default`` inside its own policy, so the two agree on every object the API server accepts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pysched.framework.api import QuantityError, parse_quantity

__all__ = ["Capacity", "CapacityError", "ConsumedCapacity", "Quantity", "SharedAllocations", "consumed",
           "fits", "parse_capacities", "parse_requests", "result_shares"]

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"
MAX_INT64 = 2**63 - 1
NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
NEGATIVE = "capacity value is negative"

_SUFFIX = re.compile(r"(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


class CapacityError(Exception):
    """A consumed amount that cannot be computed: upstream aborts the allocation with this text."""


def _ceil(v: Fraction) -> int:
    """``Quantity.Value()``'s rounding: up, away from zero."""
    a = abs(v)
    up = -((-a.numerator) // a.denominator)
    return up if v >= 0 else -up


def _div(a: int, b: int) -> int:
    """Go's integer division (towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _rem(a: int, b: int) -> int:
    """Go's remainder (the sign of the dividend)."""
    return a - b * _div(a, b)


@dataclass(frozen=True)
class Quantity:
    """A ``resource.Quantity``: its exact value and its format (which suffixes it is written with)."""

    value: Fraction
    format: str = DECIMAL_SI

    @classmethod
    def parse(cls, text: Any) -> Quantity:
        """As ``resource.ParseQuantity``: the format from the suffix, the value rounded up to nano."""
        v = parse_quantity(text if text is not None else 0)
        fmt = DECIMAL_SI
        if isinstance(text, str):
            m = _SUFFIX.search(text.strip())
            suffix = m.group(0) if m else ""
            if suffix[:1] in ("e", "E") and len(suffix) > 1:
                fmt = DECIMAL_EXPONENT
            elif suffix.endswith("i"):
                fmt = BINARY_SI
        if (v * 10**9).denominator != 1:   # rounded up to the nearest nano, away from zero
            v = Fraction(_ceil(v * 10**9), 10**9)
        if fmt == BINARY_SI and 0 < abs(v) < 1:
            fmt = DECIMAL_SI
        return cls(v, fmt)

    def milli(self) -> int:
        """``MilliValue()``."""
        return _ceil(self.value * 1000)

    def integer(self) -> int:
        """``Value()``."""
        return _ceil(self.value)

    def __str__(self) -> str:
        """apimachinery's canonical form (``Quantity.String()``)."""
        v = self.value
        if v == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (-1024 < v < 1024 or v.denominator != 1):
            fmt = DECIMAL_SI
        sign = "-" if v < 0 else ""
        if fmt == BINARY_SI:
            n, e = abs(v.numerator), 0
            while n >= 1024 and n % 1024 == 0:
                n //= 1024
                e += 10
            return f"{sign}{n}{_BINARY_SUFFIXES.get(e, '')}"
        # mantissa * 10**exponent with no trailing zeros, then the exponent made a multiple of 3
        a = abs(v)
        exponent = 0
        while a.denominator != 1:
            a *= 10
            exponent -= 1
        n = a.numerator
        while n >= 10 and n % 10 == 0:
            n //= 10
            exponent += 1
        while exponent % 3:
            n *= 10
            exponent -= 1
        if fmt == DECIMAL_EXPONENT:
            return f"{sign}{n}" + (f"e{exponent}" if exponent else "")
        return f"{sign}{n}{_DECIMAL_SUFFIXES.get(exponent, '')}"


def _milli_exact(q: Quantity) -> int | None:
    """``safeMilliValue``: the milli value when it is exact (and within int64)."""
    m = q.value * 1000
    return m.numerator if m.denominator == 1 and abs(m.numerator) <= MAX_INT64 else None


@dataclass(frozen=True)
class Range:
    min: Quantity | None
    max: Quantity | None
    step: Quantity | None


@dataclass(frozen=True)
class Capacity:
    """One ``DeviceCapacity``: its value and ``requestPolicy`` (``has_policy`` when one is set)."""

    value: Quantity
    has_policy: bool = False
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] | None = None
    valid_range: Range | None = None


def _q(text: Any) -> Quantity | None:
    if text is None:
        return None
    try:
        return Quantity.parse(text)
    except QuantityError:
        return Quantity(Fraction(0))   # API validation keeps such values out


def parse_capacities(raw: Mapping[str, Any] | None) -> dict[str, Capacity]:
    """A device's ``capacity`` map."""
    out: dict[str, Capacity] = {}
    for name, c in (raw or {}).items():
        c = c or {}
        value = _q(c.get("value")) or Quantity(Fraction(0))
        policy = c.get("requestPolicy")
        if policy is None:
            out[name] = Capacity(value)
            continue
        values = policy.get("validValues")
        rng = policy.get("validRange")
        out[name] = Capacity(
            value, True, _q(policy.get("default")),
            None if values is None else tuple(_q(v) or Quantity(Fraction(0)) for v in values),
            None if rng is None else Range(_q(rng.get("min")), _q(rng.get("max")), _q(rng.get("step"))))
    return out


def parse_requests(spec: Mapping[str, Any]) -> dict[str, Quantity] | None:
    """A request's (or subrequest's) ``capacity.requests``; None when it has none."""
    requests = (spec.get("capacity") or {}).get("requests")
    if not requests:
        return None
    return {name: _q(v) or Quantity(Fraction(0)) for name, v in requests.items()}


# -- what a request consumes ---------------------------------------------------------------------

def _use_milli(rng: Range, fractional: bool) -> bool:
    """``useMilli``: DRAFractionalCapacityRange on, min/max/step exact in thousandths, step >= 1m."""
    if not fractional:
        return False
    for q in (rng.min, rng.max, rng.step):
        if q is not None and _milli_exact(q) is None:
            return False
    return not (rng.step is not None and rng.step.milli() < 1)


def _round_up_range(requested: Quantity, rng: Range, fractional: bool) -> Quantity:
    assert rng.min is not None
    if requested.value < rng.min.value:
        return rng.min
    step = rng.step
    if step is None:
        return requested
    if _use_milli(rng, fractional):
        req = _milli_exact(requested)
        if req is None:
            raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested} is not a representable milli value")
        step_m, min_m = step.milli(), rng.min.milli()
        added = req - min_m
        n = _div(added, step_m) + (1 if _rem(added, step_m) else 0)
        if n > _div(MAX_INT64 - min_m, step_m):
            raise CapacityError(f"{NOT_REPRESENTABLE}: rounding request {requested} up to the next step passes the "
                                f"milli-value range")
        val = min_m + step_m * n
        return Quantity(Fraction(val, 1000), step.format)
    if requested.value > MAX_INT64:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested} exceeds MaxInt64")
    req_i, step_i, min_i = requested.integer(), step.integer(), rng.min.integer()
    added = req_i - min_i
    n = _div(added, step_i) + (1 if _rem(added, step_i) else 0)
    if min_i >= 0 and n > _div(MAX_INT64 - min_i, step_i):
        raise CapacityError(f"{NOT_REPRESENTABLE}: rounding request {requested} up to the next step passes MaxInt64")
    return Quantity(Fraction(min_i + step_i * n), step.format)


def _consumed_one(requested: Quantity | None, cap: Capacity, fractional: bool) -> Quantity:
    """``calculateConsumedCapacity``."""
    if requested is None:
        return cap.default if cap.has_policy and cap.default is not None else cap.value
    if not cap.has_policy:
        return requested
    if cap.valid_range is not None and cap.valid_range.min is not None:
        return _round_up_range(requested, cap.valid_range, fractional)
    if cap.valid_values is not None:
        for v in cap.valid_values:
            if requested.value <= v.value:
                return v
        return requested
    return requested


def consumed(requests: Mapping[str, Quantity] | None, capacities: Mapping[str, Capacity],
             fractional: bool = False) -> dict[str, Quantity]:
    """What a request consumes of each capacity of a device (``GetConsumedCapacityFromRequest``):
    one entry per capacity, in the device's order. Raises ``CapacityError`` (``capacity "x": ...``)."""
    out: dict[str, Quantity] = {}
    for name, cap in capacities.items():
        try:
            out[name] = _consumed_one((requests or {}).get(name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f'capacity "{name}": {exc}') from None
    return out


def _violates_policy(amount: Quantity, cap: Capacity, fractional: bool) -> bool:
    if not cap.has_policy:
        return False
    if cap.default is not None and amount.value == cap.default.value:
        return False
    rng = cap.valid_range
    if rng is not None:
        if rng.max is not None and amount.value > rng.max.value:
            return True
        if rng.step is not None:
            minimum = rng.min or Quantity(Fraction(0))
            if _use_milli(rng, fractional):
                req = _milli_exact(amount)
                if req is None:
                    return True
                step, low = rng.step.milli(), minimum.milli()
            else:
                req, step, low = amount.integer(), rng.step.integer(), minimum.integer()
            if step and _rem(req - low, step) != 0:
                return True
        return False
    if cap.valid_values:
        return not any(amount.value == v.value for v in cap.valid_values)
    return False


ConsumedCapacity = dict[str, Fraction]   # capacity name -> amount consumed (aggregated per device)


def fits(requests: Mapping[str, Quantity] | None, capacities: Mapping[str, Capacity],
         in_use: Mapping[str, Fraction] | None = None, allocating: Mapping[str, Fraction] | None = None,
         fractional: bool = False) -> bool:
    """``CmpRequestOverCapacity``: whether the request fits what is left of the device's capacities
    (``in_use``: the cluster's shares, ``allocating``: those of the search). False to skip the
    device; ``CapacityError`` (``capacity "x": ...``) to abort the allocation."""
    if requests and any(name not in capacities for name in requests):
        return False
    amounts: list[tuple[str, Quantity]] = []
    for name, cap in capacities.items():
        try:
            amount = _consumed_one((requests or {}).get(name), cap, fractional)
        except CapacityError as exc:
            raise CapacityError(f'capacity "{name}": {exc}') from None
        if amount.value < 0:
            raise CapacityError(f'capacity "{name}": {NEGATIVE}')
        amounts.append((name, amount))
    for name, amount in amounts:
        cap = capacities[name]
        if _violates_policy(amount, cap, fractional):
            return False
        total = amount.value + (in_use or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > cap.value.value:
            return False
    return True


# -- the cluster's shares ------------------------------------------------------------------------

DeviceKey = tuple[str, str, str]   # driver, pool, device


@dataclass
class SharedAllocations:
    """The shares of multi-allocatable devices that claims hold (upstream's
    ``AllocatedSharedDeviceIDs`` and ``AggregatedCapacity``): per device, its shares' IDs and the
    sum of what they consume. A device with a share is allocated (its counters are consumed once)
    but not taken: further requests may share it while its capacity lasts."""

    shares: dict[DeviceKey, dict[str, int]] = field(default_factory=dict)     # device -> share ID -> holders
    capacity: dict[DeviceKey, ConsumedCapacity] = field(default_factory=dict)

    def add(self, device: DeviceKey, share_id: str, amounts: Mapping[str, Fraction] | None, sign: int = 1) -> None:
        ids = self.shares.setdefault(device, {})
        ids[share_id] = ids.get(share_id, 0) + sign
        if ids[share_id] <= 0:
            del ids[share_id]
            if not ids:
                del self.shares[device]
        if amounts is not None:
            total = self.capacity.setdefault(device, {})
            for name, v in amounts.items():
                total[name] = total.get(name, Fraction(0)) + sign * v
            if sign < 0 and all(v == 0 for v in total.values()):
                del self.capacity[device]   # ConsumedCapacityCollection.Remove drops an empty entry

    def has_share(self, device: DeviceKey) -> bool:
        """Some claim holds a share of it, or consumed capacity is recorded for it."""
        return device in self.shares or device in self.capacity

    def merged(self, more: Iterable[tuple[DeviceKey, str, Mapping[str, Fraction] | None]]) -> SharedAllocations:
        """A copy with ``more`` shares added (the allocations in flight)."""
        out = SharedAllocations({d: dict(ids) for d, ids in self.shares.items()},
                                {d: dict(c) for d, c in self.capacity.items()})
        for device, share_id, amounts in more:
            out.add(device, share_id, amounts)
        return out


def result_shares(claim: Mapping[str, Any]) -> list[tuple[DeviceKey, str, ConsumedCapacity | None]]:
    """The shares ``claim``'s allocation holds: its results with a ``shareID`` (admin-access results
    excepted), with their consumed capacity (None when the result records none)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    out = []
    for r in (allocation.get("devices") or {}).get("results") or ():
        if r.get("adminAccess") or r.get("shareID") is None:
            continue
        raw = r.get("consumedCapacity")
        amounts = None if raw is None else {n: (_q(v) or Quantity(Fraction(0))).value for n, v in raw.items()}
        out.append(((r.get("driver", ""), r.get("pool", ""), r.get("device", "")), str(r["shareID"]), amounts))
    return out
