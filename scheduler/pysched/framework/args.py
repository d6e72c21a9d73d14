"""Helpers for typed plugin arguments (``pluginConfig[].args``).

A plugin declares ``Args``: a class with ``from_dict(raw, path)`` that validates strictly (an
unknown key or a bad value raises ``ConfigError`` naming ``path.key``) and ``to_dict()`` giving
the effective values for ``--write-config-to``. ``apiVersion``/``kind`` keys, which
kube-scheduler's files carry (``kind: NodeResourcesFitArgs``), are accepted and checked.
"""

from __future__ import annotations

from typing import Any

from pysched.apis.config.fields import read_bool, read_int, read_str
from pysched.apis.config.types import ConfigError

META_KEYS = ("apiVersion", "kind")


def strict(raw: Any, path: str, allowed: tuple[str, ...], kind: str | None = None) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in allowed and k not in META_KEYS:
            raise ConfigError(f"{path}.{k}: unknown field")
    if kind and raw.get("kind") not in (None, kind):
        raise ConfigError(f"{path}.kind: expected {kind}, got {raw.get('kind')!r}")
    return raw


def get_int(raw: dict, key: str, path: str, default: int, *, lo: int | None = None,
            hi: int | None = None) -> int:
    v = read_int(raw, key, path + ".", default)
    if lo is not None and v < lo:
        raise ConfigError(f"{path}.{key}: must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ConfigError(f"{path}.{key}: must be <= {hi}, got {v}")
    return v


def get_str(raw: dict, key: str, path: str, default: str, choices: tuple[str, ...] | None = None) -> str:
    v = read_str(raw, key, path + ".", default)
    if choices and v not in choices:
        raise ConfigError(f"{path}.{key}: {v!r} is not one of {', '.join(choices)}")
    return v


def get_bool(raw: dict, key: str, path: str, default: bool) -> bool:
    return read_bool(raw, key, path + ".", default)


def get_str_list(raw: dict, key: str, path: str) -> list[str]:
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{path}.{key}: expected a list of strings")
    return list(v)


def get_list(raw: dict, key: str, path: str) -> list:
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(f"{path}.{key}: expected a list")
    return v


def get_map(raw: dict, key: str, path: str) -> dict:
    v = raw.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigError(f"{path}.{key}: expected a mapping")
    return v
