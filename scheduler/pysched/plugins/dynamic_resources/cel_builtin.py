"""The built-in subset evaluator for DRA device selectors (used when ``pysched-cel`` is absent).

kube-scheduler evaluates selectors in Kubernetes' full CEL environment; ``cel_go`` runs that very
code. Without the helper binary, this module evaluates the subset a Python CEL implementation can:
the Rust CEL behind the ``common-expression-language`` package, plus Kubernetes' ``quantity()``
(``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``, ``asInteger``,
``asApproximateFloat``, ``isInteger``, ``sign``) and ``semver()`` (``compareTo``,
``isGreaterThan``, ``isLessThan``, ``major``, ``minor``, ``patch``). Not here: optional types
(``.?``, ``[?]``, ``orValue``), the strings, lists, sets, regex, IP/CIDR, URL and format libraries,
``cel.bind``, the runtime cost limit and upstream's exact error texts. ``cel`` says which one runs.

``device.driver`` (string), ``device.attributes[domain][name]`` (int, bool, string or version) and
``device.capacity[domain][name]`` (quantity). An attribute or capacity named without a domain in
the ResourceSlice belongs to the driver's domain. Quantities and versions travel through CEL as
one-key maps holding their canonical text, so equal values compare equal
(``quantity("1Gi") == quantity("1024Mi")``). Evaluating a compiled selector takes a few
microseconds, building a device's context about 50 us.

The package is loaded on the first compile, not at import: its ``__init__`` also imports its
command-line tool (typer, rich, prompt_toolkit), 290 ms on this machine, so only the compiled
extension module is loaded (23 ms); should that fail, the package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from types import ModuleType
from typing import Any

from pysched.framework.api import QuantityError, parse_quantity
from pysched.plugins.dynamic_resources.celerrors import SelectorError

QUANTITY = "__quantity__"
VERSION = "__semver__"
# The domains a selector names literally: upstream's device map answers an unknown domain with an
# empty map (``"x" in device.attributes["other.example.com"]`` is false, not an error).
_DOMAIN = re.compile(r'device\.(?:attributes|capacity)\[\s*"([^"\\]*)"\s*\]')
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                     r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


@lru_cache(maxsize=1)
def _cel() -> ModuleType:
    """The CEL extension module of ``common-expression-language``, without its CLI."""
    try:
        spec = importlib.util.find_spec("cel")
        where = list(spec.submodule_search_locations or ()) if spec else []
        for directory in where:
            for name in os.listdir(directory):
                if name.startswith("cel.") and name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                    ext = importlib.util.spec_from_file_location("cel.cel", os.path.join(directory, name))
                    if ext is None or ext.loader is None:
                        continue
                    module = importlib.util.module_from_spec(ext)
                    ext.loader.exec_module(module)
                    return module
    except (ImportError, OSError):
        pass
    import cel
    return cel


# -- values ------------------------------------------------------------------------------------

def quantity_value(text: str) -> dict[str, str]:
    """A quantity as CEL sees it: its exact value in lowest terms, so equal amounts are equal."""
    try:
        v = parse_quantity(text)
    except QuantityError as exc:
        raise SelectorError(f"invalid quantity {text!r}: {exc}") from None
    return {QUANTITY: f"{v.numerator}/{v.denominator}"}


def version_value(text: str) -> dict[str, str]:
    if not _SEMVER.match(text):
        raise SelectorError(f"invalid semver {text!r}")
    return {VERSION: text}


def _q(value: Any) -> Fraction:
    if isinstance(value, dict) and QUANTITY in value:
        return Fraction(value[QUANTITY])
    raise SelectorError(f"expected a quantity, got {value!r}")


def _v(value: Any) -> tuple[Any, ...]:
    if isinstance(value, dict) and VERSION in value:
        m = _SEMVER.match(value[VERSION])
        assert m is not None
        pre = m.group(4)
        # A release sorts after its pre-releases; pre-release identifiers compare numerically
        # when numeric, numerics before alphanumerics (semver 2.0.0, section 11).
        pre_key = (1,) if pre is None else (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p)
                                                 for p in pre.split(".")])
        return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key)
    raise SelectorError(f"expected a version, got {value!r}")


def _key(value: Any) -> Any:
    if isinstance(value, dict) and QUANTITY in value:
        return _q(value)
    return _v(value)


def _compare(a: Any, b: Any) -> int:
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def _frac_quantity(v: Fraction) -> dict[str, str]:
    return {QUANTITY: f"{v.numerator}/{v.denominator}"}


def _as_integer(value: Any) -> int:
    v = _q(value)
    if v.denominator != 1 or not -(2**63) <= v.numerator < 2**63:
        raise SelectorError("cannot convert value to integer")
    return v.numerator


def _version_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        return int(_v(value)[index])
    return part


FUNCTIONS = {
    "quantity": quantity_value,
    "semver": version_value,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: _frac_quantity(_q(a) + (_q(b) if isinstance(b, dict) else Fraction(b))),
    "sub": lambda a, b: _frac_quantity(_q(a) - (_q(b) if isinstance(b, dict) else Fraction(b))),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_q(a)),
    "isInteger": lambda a: _q(a).denominator == 1 and -(2**63) <= _q(a).numerator < 2**63,
    "sign": lambda a: (_q(a) > 0) - (_q(a) < 0),
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
}


# -- devices -----------------------------------------------------------------------------------

def qualify(name: str, driver: str) -> tuple[str, str]:
    """``domain/name`` or a bare ``name`` (in the driver's domain) -> (domain, name)."""
    domain, sep, rest = name.rpartition("/")
    return (domain, rest) if sep else (driver, name)


def attribute_value(attr: dict[str, Any]) -> Any:
    """A ResourceSlice DeviceAttribute (exactly one of int, bool, string, version) as CEL sees it."""
    for field in ("int", "bool", "string"):
        if field in attr:
            return attr[field]
    if "version" in attr:
        return version_value(attr["version"])
    raise SelectorError(f"attribute has no value: {attr!r}")


def device_variable(driver: str, device: dict[str, Any], domains: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The ``device`` variable for one device of a ResourceSlice (``spec.devices[]``); ``domains``
    get an empty map in ``attributes`` and ``capacity`` when the device has nothing there."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, short = qualify(name, driver)
        attributes.setdefault(domain, {})[short] = attribute_value(attr)
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, short = qualify(name, driver)
        capacity.setdefault(domain, {})[short] = quantity_value(str(cap.get("value", "0")))
    for domain in domains:
        attributes.setdefault(domain, {})
        capacity.setdefault(domain, {})
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": bool(device.get("allowMultipleAllocations"))}


class BuiltinEngine:
    """Compiles with the Rust CEL and evaluates one device at a time (a context per device)."""

    name = "builtin"
    exact = False

    def compile(self, expression: str) -> Any:
        try:
            return _cel().compile(expression)
        except (ValueError, RuntimeError) as exc:
            raise SelectorError(f"compilation failed: {exc}") from None

    def evaluate(self, program: Any, expression: str, devices: list[Any]) -> list[bool | SelectorError]:
        domains = frozenset(_DOMAIN.findall(expression))
        out: list[bool | SelectorError] = []
        for dev in devices:
            ctx = dev.builtin_context(domains)
            try:
                value = program.execute(ctx)
            except Exception as exc:  # noqa: BLE001 - CEL reports run-time errors as assorted exceptions
                out.append(SelectorError(_reason(exc)))
                continue
            out.append(value if isinstance(value, bool) else
                       SelectorError(f"expression must return a bool, got {type(value).__name__}"))
        return out

    def context(self, driver: str, device: dict[str, Any], domains: frozenset[str]) -> Any:
        ctx = _cel().Context()
        for name, fn in FUNCTIONS.items():
            ctx.add_function(name, fn)
        ctx.add_variable("device", device_variable(driver, device, domains))
        return ctx


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    return str(exc) or type(exc).__name__
