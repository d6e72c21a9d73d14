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


# -- declarative plugin args ------------------------------------------------------------------------
#
# A plugin's ``Args`` is a dataclass; ``decode_args(Args, raw, path)`` is the one strict decoder.
# Field names are snake_case in Python and camelCase on the wire (``ignored_resources`` <->
# ``ignoredResources``), unless ``arg(json=...)`` says otherwise. Supported field types: bool,
# int (int64; ``arg(bits=32)`` for int32), float, str, nested Args dataclasses, ``list[...]``
# and ``dict[str, ...]`` of those, and ``X | None``. ``arg(ge=, le=, choices=, required=)``
# adds the usual checks; rules that span fields go in the class's ``validate(self, path)``,
# which the decoder calls after decoding (nested ones first). Errors are ``ConfigError`` whose
# message starts with the field path, as for the rest of the configuration.

ARG_META = "pysched.arg"


def arg(*, json: str | None = None, ge: float | None = None, le: float | None = None,
        choices: tuple | None = None, required: bool = False, bits: int = 64, omit_empty: bool = False) -> dict:
    """Field metadata for ``dataclasses.field(metadata=arg(...))``."""
    return {ARG_META: {"json": json, "ge": ge, "le": le, "choices": choices, "required": required,
                       "bits": bits, "omit_empty": omit_empty}}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _meta(f) -> dict:
    return f.metadata.get(ARG_META) or {"json": None, "ge": None, "le": None, "choices": None,
                                        "required": False, "bits": 64, "omit_empty": False}


def wire_name(f) -> str:
    return _meta(f)["json"] or _camel(f.name)


def _hints(cls) -> dict:
    import typing
    return typing.get_type_hints(cls)


def _decode_value(tp, value, where: str, meta: dict):
    import dataclasses
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _decode_value(inner[0], value, where, meta)
    if tp is typing.Any:
        return value
    if dataclasses.is_dataclass(tp):
        return decode_args(tp, value, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return [_decode_value(item, v, f"{where}[{i}]", {}) for i, v in enumerate(value)]
    if origin is dict:
        _, item = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {str(k): _decode_value(item, v, f"{where}.{k}", {}) for k, v in value.items()}
    key = where.rsplit(".", 1)[-1]
    parent = where[: -len(key)]
    holder = {key: value}
    if tp is bool:
        return read_bool(holder, key, parent, False)
    if tp is int:
        v = read_int(holder, key, parent, 0, bits=meta.get("bits", 64))
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        v = float(value)
    elif tp is str:
        v = read_str(holder, key, parent, "")
    else:
        raise TypeError(f"{where}: unsupported Args field type {tp!r}")
    return v


def _check(v, where: str, meta: dict) -> None:
    if meta.get("choices") and v not in meta["choices"]:
        raise ConfigError(f"{where}: {v!r} is not one of {', '.join(map(str, meta['choices']))}")
    if meta.get("ge") is not None and v < meta["ge"]:
        raise ConfigError(f"{where}: must be >= {meta['ge']}, got {v}")
    if meta.get("le") is not None and v > meta["le"]:
        raise ConfigError(f"{where}: must be <= {meta['le']}, got {v}")


def decode_args(cls, raw, path: str):
    """Strictly decode ``raw`` (a mapping, or None for all defaults) into the dataclass ``cls``."""
    import dataclasses

    fields = dataclasses.fields(cls)
    by_wire = {wire_name(f): f for f in fields}
    kind = getattr(cls, "KIND", None)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(raw).__name__}")
    for k in raw:
        if k not in by_wire and not (kind and k in META_KEYS):
            raise ConfigError(f"{path}.{k}: unknown field")
    if kind and raw.get("kind") not in (None, kind):
        raise ConfigError(f"{path}.kind: expected {kind}, got {raw.get('kind')!r}")
    hints = _hints(cls)
    values = {}
    for wire, f in by_wire.items():
        meta = _meta(f)
        where = f"{path}.{wire}"
        if raw.get(wire) is None:
            if meta["required"]:
                raise ConfigError(f"{where}: Required value")
            continue
        v = _decode_value(hints[f.name], raw[wire], where, meta)
        if meta["required"] and v in ("", [], {}):
            raise ConfigError(f"{where}: Required value")
        if v is not None and not isinstance(v, (list, dict)) and not dataclasses.is_dataclass(v):
            _check(v, where, meta)
        values[f.name] = v
    obj = cls(**values)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        validate(path)
    return obj


def encode_args(obj) -> dict:
    """The wire form of an Args dataclass (``--write-config-to``): every field that is set."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None or (_meta(f)["omit_empty"] and v in ("", [], {})):
            continue
        out[wire_name(f)] = _encode_value(v)
    return out


def _encode_value(v):
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return encode_args(v)
    if isinstance(v, list):
        return [_encode_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _encode_value(x) for k, x in v.items()}
    return v


def load_args(args_cls, raw, path: str):
    """A plugin's Args from its ``pluginConfig`` entry (None when absent: all defaults)."""
    import dataclasses

    if dataclasses.is_dataclass(args_cls):
        return decode_args(args_cls, raw, path)
    return args_cls.from_dict(raw or {}, path)   # TODO(layout): legacy hand-written Args


def dump_args(args) -> dict:
    import dataclasses

    if args is None:
        return {}
    if dataclasses.is_dataclass(args):
        return encode_args(args)
    return args.to_dict() if hasattr(args, "to_dict") else {}
