"""Strict field readers for configuration decoding: Go durations, bounded integers and floats,
booleans, strings and lists, each error naming the field path (``profiles[0].x: ...``).

Shared by the KubeSchedulerConfiguration decoder and the plugin-args decoder."""

from __future__ import annotations

from typing import Any, overload

from pysched.apis.config.types import ConfigError
from pysched.util.goduration import go_duration

# time.ParseDuration's units, in nanoseconds ("µs" is U+00B5 and "μs" U+03BC, both accepted).
_DURATION_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX_DURATION = 2**63 - 1   # time.Duration is an int64 of nanoseconds


def go_duration_ns(text: str) -> int:
    """Nanoseconds in a Go duration string, by ``time.ParseDuration``'s grammar and limits:
    ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`` or ``0``; beyond int64 nanoseconds (~292 years) it is
    invalid. Raises ``ValueError`` with Go's message."""
    quoted = '"' + text + '"'
    invalid = ValueError(f"time: invalid duration {quoted}")
    s, neg = text, False
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or s[0].isascii() and s[0].isdigit()):
            raise invalid
        i = 0
        while i < len(s) and "0" <= s[i] <= "9":
            i += 1
        whole, s = s[:i], s[i:]
        frac = ""
        if s[:1] == ".":
            j = 1
            while j < len(s) and "0" <= s[j] <= "9":
                j += 1
            frac, s = s[1:j], s[j:]
        if not whole and not frac:
            raise invalid
        j = 0
        while j < len(s) and s[j] != "." and not ("0" <= s[j] <= "9"):
            j += 1
        if j == 0:
            raise ValueError(f"time: missing unit in duration {quoted}")
        unit, s = s[:j], s[j:]
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            raise ValueError(f'time: unknown unit "{unit}" in duration {quoted}')
        v = int(whole or "0")
        if v > 2**63 // scale:
            raise invalid
        v *= scale
        if frac:
            v += int(int(frac) * scale // 10 ** len(frac))
            if v > 2**63:
                raise invalid
        total += v
        if total > 2**63:
            raise invalid
    if neg:
        return -total
    if total > _MAX_DURATION:
        raise invalid
    return total


def parse_duration(value: Any, path: str) -> float:
    """A ``metav1.Duration`` ("15s", "1m30s", "500ms") to seconds; errors name the field."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{path}: expected a duration such as \"15s\", got {value!r}")
    if isinstance(value, (int, float)):
        # A bare number is nanoseconds in Go's JSON encoding of time.Duration.
        if not -(2**63) <= value <= _MAX_DURATION:
            raise ConfigError(f"{path}: Invalid value: {value!r}: out of range for a duration (int64 nanoseconds)")
        return float(value) / 1e9
    text = value.strip()
    if text == "":
        return 0.0
    try:
        return go_duration_ns(text) / 1e9
    except ValueError as exc:
        raise ConfigError(f'{path}: Invalid value: "{text}": {exc}') from None


def format_duration(seconds: float) -> str:
    """A duration as the API writes it (Go's ``time.Duration.String()``)."""
    return go_duration(seconds)


# -- strict decoding helpers --------------------------------------------------------------------

def read_mapping(raw: Any, path: str, allowed: tuple[str, ...]) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in allowed:
            where = f"{path}.{k}" if path else str(k)
            raise ConfigError(f"{where}: unknown field")
    return raw


def read_bool(raw: dict, key: str, path: str, default: bool) -> bool:
    v = raw.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ConfigError(f"{path}{key}: expected true or false, got {v!r}")
    return v


@overload
def read_int(raw: dict, key: str, path: str, default: int, bits: int = 64) -> int: ...
@overload
def read_int(raw: dict, key: str, path: str, default: None, bits: int = 64) -> int | None: ...
def read_int(raw: dict, key: str, path: str, default: int | None, bits: int = 64) -> int | None:
    """An integer field of Go type int32/int64 (``bits``): a larger number fails to decode."""
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{path}{key}: expected an integer, got {v!r}")
    if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise ConfigError(f"{path}{key}: Invalid value: {v}: "
                          f"cannot unmarshal number {v} into Go value of type int{bits}")
    return v


_FLOAT32_MAX = 3.4028234663852886e38


def read_float(raw: dict, key: str, path: str, default: float) -> float:
    """A float32 field (``clientConnection.qps``)."""
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{path}{key}: expected a number, got {v!r}")
    if not abs(v) <= _FLOAT32_MAX:
        raise ConfigError(f"{path}{key}: Invalid value: {v!r}: "
                          f"cannot unmarshal number {v!r} into Go value of type float32")
    return float(v)


def read_str(raw: dict, key: str, path: str, default: str) -> str:
    v = raw.get(key, default)
    if v is None:
        return default
    if not isinstance(v, str):
        raise ConfigError(f"{path}{key}: expected a string, got {v!r}")
    return v


def read_list(raw: dict, key: str, path: str) -> list:
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(f"{path}{key}: expected a list, got {type(v).__name__}")
    return v


