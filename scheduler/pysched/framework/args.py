"""Plugin arguments (``pluginConfig[].args``): declarative dataclasses and one strict decoder.

A plugin's ``Args`` is a dataclass; ``decode_args(Args, raw, path)`` decodes a ``pluginConfig``
entry strictly: an unknown key, a wrong type or a bad value raises ``ConfigError`` whose message
starts with the field path (``profiles[0].pluginConfig[1].args.scoringStrategy.type: ...``), as
for the rest of the configuration. ``apiVersion``/``kind`` keys, which kube-scheduler's files
carry (``kind: NodeResourcesFitArgs``), are accepted and checked against the class's ``KIND``.

Field names are snake_case in Python and camelCase on the wire (``ignored_resources`` <->
``ignoredResources``) unless ``arg(json=...)`` says otherwise. Supported field types: bool, int
(int64; ``arg(bits=32)`` for int32), float, str, nested Args dataclasses, ``list[...]`` and
``dict[str, ...]`` of those, and ``X | None``. ``arg(ge=, le=, choices=, required=)`` adds the
usual checks; rules that span fields go in the class's ``validate(self, path)``, called after
decoding (nested classes first). ``encode_args`` gives the wire form back for
``--write-config-to``.

Defaults and rules that depend on kube feature gates (kube's ``SetDefaults_*Args`` and
``Validate*Args`` reading ``features.*``) go in the top-level class's optional
``apply_feature_gates(self, path, gates)``: ``load_args`` calls it after ``validate`` with the gates
the profile runs with (``Handle.feature_gates``), so a defaulted field is what ``--write-config-to``
writes and a gated field is refused with the path that names it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from pysched.apis.config.fields import read_bool, read_int, read_str
from pysched.apis.config.types import ConfigError
from pysched.framework.features import default_gates

T = TypeVar("T")
META_KEYS = ("apiVersion", "kind")
ARGS_API_VERSION = "kubescheduler.config.k8s.io/v1"
ARG_META = "pysched.arg"
_NO_META: dict[str, Any] = {"json": None, "ge": None, "le": None, "choices": None, "required": False, "bits": 64,
                            "omit_empty": False}


def arg(*, json: str | None = None, ge: float | None = None, le: float | None = None,
        choices: tuple[Any, ...] | None = None, required: bool = False, bits: int = 64,
        omit_empty: bool = False) -> dict[str, Any]:
    """Field metadata: ``dataclasses.field(default=..., metadata=arg(ge=0))``."""
    return {ARG_META: {"json": json, "ge": ge, "le": le, "choices": choices, "required": required,
                       "bits": bits, "omit_empty": omit_empty}}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _meta(f: dataclasses.Field[Any]) -> dict[str, Any]:
    meta: dict[str, Any] = f.metadata.get(ARG_META) or _NO_META
    return meta


def wire_name(f: dataclasses.Field[Any]) -> str:
    return _meta(f)["json"] or _camel(f.name)


def _decode_value(tp: Any, value: Any, where: str, meta: dict[str, Any]) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _decode_value(inner[0], value, where, meta)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return decode_args(typing.cast(type, tp), value, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return [_decode_value(item, v, f"{where}[{i}]", _NO_META) for i, v in enumerate(value)]
    if origin is dict:
        _, item = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {str(k): _decode_value(item, v, f"{where}.{k}", _NO_META) for k, v in value.items()}
    key = where.rsplit(".", 1)[-1]
    parent = where[: -len(key)]
    holder = {key: value}
    if tp is bool:
        return read_bool(holder, key, parent, False)
    if tp is int:
        return read_int(holder, key, parent, 0, bits=meta.get("bits", 64))
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        return read_str(holder, key, parent, "")
    raise TypeError(f"{where}: unsupported Args field type {tp!r}")


def _check(v: Any, where: str, meta: dict[str, Any]) -> None:
    if meta.get("choices") and v not in meta["choices"]:
        raise ConfigError(f"{where}: {v!r} is not one of {', '.join(map(str, meta['choices']))}")
    if meta.get("ge") is not None and v < meta["ge"]:
        raise ConfigError(f"{where}: must be >= {meta['ge']}, got {v}")
    if meta.get("le") is not None and v > meta["le"]:
        raise ConfigError(f"{where}: must be <= {meta['le']}, got {v}")


def decode_args(cls: type[T], raw: Any, path: str) -> T:
    """Strictly decode ``raw`` (a mapping, or None for all defaults) into the dataclass ``cls``."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
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
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
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


def encode_args(obj: Any) -> dict[str, Any]:
    """The wire form of an Args dataclass (``--write-config-to``): every field that is set."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None or (_meta(f)["omit_empty"] and v in ("", [], {})):
            continue
        out[wire_name(f)] = _encode_value(v)
    return out


def _encode_value(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return encode_args(v)
    if isinstance(v, list):
        return [_encode_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _encode_value(x) for k, x in v.items()}
    return v


def load_args(args_cls: Any, raw: Any, path: str, feature_gates: frozenset[str] | None = None) -> Any:
    """A plugin's Args from its ``pluginConfig`` entry (None when absent: all defaults), then its
    ``apply_feature_gates(path, gates)`` if it has one (``feature_gates``: the gates that are on;
    None: the newest release's defaults, as ``Handle``'s)."""
    if not (dataclasses.is_dataclass(args_cls) and isinstance(args_cls, type)):
        raise TypeError(f"{path}: a plugin's Args must be a dataclass, got {args_cls!r}")
    args = decode_args(args_cls, raw, path)
    gated = getattr(args, "apply_feature_gates", None)
    if gated is not None:
        gated(path, default_gates() if feature_gates is None else feature_gates)
    return args


def dump_args(args: Any) -> dict[str, Any]:
    """A plugin's Args as kube-scheduler writes them (``--write-config-to``): ``apiVersion`` and
    ``kind`` first when the class has a ``KIND``, then ``encode_args`` (``{}`` when it has none)."""
    if args is None:
        return {}
    kind = getattr(type(args), "KIND", None)
    head = {"apiVersion": ARGS_API_VERSION, "kind": kind} if kind else {}
    return {**head, **encode_args(args)}
