"""Kubernetes resource quantities ("100m", "500Mi", "1.5", "2e3") parsed to integers.

The scheduler keeps every resource as an int: CPU in millicores, everything else in base units,
rounded up the way ``resource.Quantity.MilliValue()`` / ``Value()`` round (towards +infinity).

Huge amounts saturate at ``MAX_AMOUNT`` (apimachinery's ``MaxMilliValue``, about 9.2e15): ``1E`` of
cpu (10^21 millicores) becomes 9.2e15 millicores. The API server accepts such quantities on a Node,
and apimachinery's parser caps binary-SI amounts at 2^63-1, but ``MilliValue()``/``Value()`` then
overflow silently (0 on the int64 fast path, wrapped bits on the big-decimal path), so
kube-scheduler sees a 1E-cpu node as having no cpu at all - and a pod requesting 1E cpu as
requesting none. We keep the meaning of the number instead ("more than anything real"), with room
left in int64 for the scheduler's sums and scores. No real node or pod comes near the bound.
Parsed strings are memoised: a cluster uses a handful of distinct quantity strings, and this
runs once per container per watch event.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY: dict[str, int] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, int | Fraction] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                 r"(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")

_CACHE_VALUE: dict[str, int] = {}
_CACHE_MILLI: dict[str, int] = {}
_CACHE_LIMIT = 4096


class QuantityError(ValueError):
    """A string is not a valid Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Exact value of a quantity string."""
    if isinstance(text, bool):
        raise QuantityError(f"invalid quantity {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}")
        return Fraction(str(text))
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: expected a string")
    m = _RE.match(text.strip())
    if not m:
        raise QuantityError(f"invalid quantity {text!r}")
    number, exponent, suffix = m.groups()
    value = Fraction(number)
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    elif suffix:
        value *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return value


# apimachinery's resource.MaxMilliValue, (2^63-1)/1000: the bound below which MilliValue() is exact.
# Every amount saturates here (about 9.2e15: 9.2 trillion cores, 8 PiB), leaving a factor 1000 of
# int64 headroom for what the scheduler computes from amounts: sums over a node's pods, x100 scores.
MAX_AMOUNT = (2**63 - 1) // 1000


def _ceil(v: Fraction) -> int:
    return -((-v.numerator) // v.denominator)


def saturate(v: int) -> int:
    """``v`` clamped into [-MAX_AMOUNT, MAX_AMOUNT]."""
    return MAX_AMOUNT if v > MAX_AMOUNT else -MAX_AMOUNT if v < -MAX_AMOUNT else v


def value(text: str | int | float) -> int:
    """Integer value rounded up, as ``Quantity.Value()``."""
    if type(text) is str:
        hit = _CACHE_VALUE.get(text)
        if hit is not None:
            return hit
    v = saturate(_ceil(parse_quantity(text)))
    if type(text) is str and len(_CACHE_VALUE) < _CACHE_LIMIT:
        _CACHE_VALUE[text] = v
    return v


def milli_value(text: str | int | float) -> int:
    """Value in thousandths rounded up, as ``Quantity.MilliValue()`` (used for CPU)."""
    if type(text) is str:
        hit = _CACHE_MILLI.get(text)
        if hit is not None:
            return hit
    v = saturate(_ceil(parse_quantity(text) * 1000))
    if type(text) is str and len(_CACHE_MILLI) < _CACHE_LIMIT:
        _CACHE_MILLI[text] = v
    return v


def resource_value(name: str, text: str | int | float) -> int:
    """The scheduler's integer for resource ``name``: millicores for cpu, base units otherwise."""
    return milli_value(text) if name == "cpu" else value(text)


def format_resource(name: str, amount: int) -> str:
    """Human form used in logs and explanations (``1500m``, ``2Gi``)."""
    if name == "cpu":
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
