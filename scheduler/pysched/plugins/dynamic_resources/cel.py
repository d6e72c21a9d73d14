"""Device selectors in CEL, evaluated as kube-scheduler 1.35's DRA allocator evaluates them.

A DeviceClass or a request selects devices with CEL expressions over one variable, ``device``:
``device.driver``, ``device.attributes[domain][name]`` and ``device.capacity[domain][name]``. An
attribute or capacity named without a domain in the ResourceSlice belongs to the driver's domain.

Two engines, one chosen for the process (``engine()``):

* ``pysched-cel`` (``cel_go``) - kube-scheduler's own CEL code in a helper binary built from
  ``cmd/pysched-cel``: every library, optional types, the cost limit and the error texts exactly as
  upstream. Found (``find_helper``), in this order, where ``PYSCHED_CEL_HELPER`` names it, in the
  package itself (``pysched/_bin/pysched-cel``: the Linux amd64 and arm64 wheels carry it), or on
  ``PATH`` (the container image has it there; ``make`` builds it with ``hack/pysched-cel.sh``; an
  editable install has no ``_bin``).
* ``builtin`` (``cel_builtin``) - a subset in Python (Rust CEL plus ``quantity()``/``semver()``),
  used otherwise: a selector it cannot read fails to compile, so its pod stays pending where
  kube-scheduler would place it (63 of the 114 library selectors of ``tests/unit/test_dra_cel.py``).
  That is a broken install, not a mode: it is logged at ERROR level when the engine is chosen (the
  DynamicResources plugin chooses it when its profile is built, at start), naming the fix, and the
  process exports ``pysched_dra_cel_engine{engine="builtin"} 1`` (``describe``; docs/operations.md
  has the alert).

``PYSCHED_CEL_ENGINE=builtin`` forces the subset (logged at INFO: a choice, not an accident);
``=pysched-cel`` makes a missing helper an error (the profile is refused at start).

Expressions are compiled once (``compile_selector``, memoised by text). A device keeps what each
selector said about it (``CelDevice``), and the allocator asks for a selector over many devices at
once (``prefetch``) so the helper is asked once per selector and batch of devices, not per pair.

DRAConsumableCapacity (``consumable_capacity``): kube-scheduler gives the gate to its CEL cache, so
the helper is started with ``--consumable-capacity`` under it (one engine per value). Selectors
compile in the stored-expressions environment, which declares ``device.allowMultipleAllocations``
whatever the gate; its value is the device's with the gate on (1.37's allocator passes it, as 1.35's
did only with the gate) and false with it off.
"""

from __future__ import annotations

import logging
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine, device_variable
from pysched.plugins.dynamic_resources.cel_go import GoEngine
from pysched.plugins.dynamic_resources.celerrors import SelectorError

__all__ = ["CelDevice", "Selector", "SelectorError", "compile_selector", "describe", "device_variable", "engine",
           "find_helper", "prefetch"]

log = logging.getLogger("pysched.plugins.dra.cel")

ENGINE_ENV = "PYSCHED_CEL_ENGINE"
HELPER_ENV = "PYSCHED_CEL_HELPER"
HELPER_NAME = "pysched-cel"
# Where a platform wheel puts the helper: pysched/_bin/pysched-cel (package data; absent from the
# source tree, the sdist and the pure wheel).
BUNDLED = Path(__file__).resolve().parents[2] / "_bin" / HELPER_NAME

FALLBACK_MESSAGE = (
    "pysched-cel not found: DRA device selectors fall back to the built-in CEL subset (no optional types, "
    "no strings, lists, sets, regex, IP/CIDR, URL or format libraries): a selector outside it fails to "
    "compile and its pod stays pending where kube-scheduler would place it. Fix: install a Linux amd64 or "
    "arm64 wheel of pysched (it carries the helper), use the container image, or build cmd/pysched-cel "
    "(hack/pysched-cel.sh) and put it on PATH or set PYSCHED_CEL_HELPER; PYSCHED_CEL_ENGINE=builtin "
    "chooses the subset knowingly")

# The choices already logged (``engine`` is cached per DRAConsumableCapacity value: one line each time
# the choice itself changes, which only tests do).
_announced: set[tuple[str, str | None, str]] = set()


def find_helper() -> tuple[str, str] | None:
    """Where pysched-cel is, and how it was found: ``(path, source)`` with source
    ``PYSCHED_CEL_HELPER``, ``bundled`` (the wheel's ``pysched/_bin``) or ``PATH``; None when none has it."""
    override = os.environ.get(HELPER_ENV)
    if override:
        return override, HELPER_ENV
    if os.access(BUNDLED, os.X_OK) and BUNDLED.is_file():
        return str(BUNDLED), "bundled"
    found = shutil.which(HELPER_NAME)
    return (found, "PATH") if found else None


def _announce(name: str, path: str | None, source: str) -> None:
    key = (name, path, source)
    if key in _announced:
        return
    _announced.add(key)
    if path is not None:
        log.info("DRA CEL engine", extra={"kv": {"engine": name, "helper": path, "found_by": source}})
    elif source == ENGINE_ENV:
        log.info("DRA CEL engine: the built-in subset, as %s=builtin asks", ENGINE_ENV,
                 extra={"kv": {"engine": name}})
    else:
        log.error(FALLBACK_MESSAGE, extra={"kv": {"engine": name}})


@lru_cache(maxsize=2)
def engine(consumable_capacity: bool = False) -> BuiltinEngine | GoEngine:
    """The engine of this process: pysched-cel when it can be found, else the built-in subset
    (``consumable_capacity``: the DRAConsumableCapacity gate the helper is given)."""
    wanted = os.environ.get(ENGINE_ENV, "").strip().lower()
    if wanted not in ("", "auto", "builtin", HELPER_NAME):
        raise SelectorError(f"{ENGINE_ENV}={wanted!r}: expected {HELPER_NAME}, builtin or auto")
    if wanted == "builtin":
        _announce(BuiltinEngine.name, None, ENGINE_ENV)
        return BuiltinEngine()
    found = find_helper()
    if found:
        _announce(GoEngine.name, *found)
        return GoEngine(found[0], consumable_capacity=consumable_capacity)
    if wanted == HELPER_NAME:
        raise SelectorError(f"{ENGINE_ENV}={HELPER_NAME} but the helper is not on PATH, not in the package "
                            f"({BUNDLED}) and {HELPER_ENV} is not set")
    _announce(BuiltinEngine.name, None, "not found")
    return BuiltinEngine()


def describe(consumable_capacity: bool = False) -> str:
    """The name of the engine of this process (``pysched-cel`` or ``builtin``), chosen (and
    announced) if it was not yet: what ``pysched_dra_cel_engine`` exports."""
    return engine(consumable_capacity).name


class Selector:
    """One compiled CEL selector expression, and the engine that compiled it."""

    __slots__ = ("expression", "program", "engine")

    def __init__(self, expression: str, eng: BuiltinEngine | GoEngine | None = None,
                 consumable_capacity: bool = False):
        self.expression = expression
        self.engine = eng or engine(consumable_capacity)
        self.program = self.engine.compile(expression)


@lru_cache(maxsize=1024)
def compile_selector(expression: str, consumable_capacity: bool = False) -> Selector:
    return Selector(expression, consumable_capacity=consumable_capacity)


class CelDevice:
    """One published device as CEL sees it, with what each selector said about it. A device does
    not change until its ResourceSlice does, so the allocator keeps one per device and slice version
    and every result is remembered. ``allow_multiple_allocations``: what
    ``device.allowMultipleAllocations`` is (the device's own with DRAConsumableCapacity, else false)."""

    __slots__ = ("driver", "device", "multi", "_results", "_wire", "_ctx", "_domains")

    def __init__(self, driver: str, device: dict[str, Any], allow_multiple_allocations: bool = False):
        self.driver = driver
        self.device = device
        self.multi = allow_multiple_allocations
        self._results: dict[str, bool | SelectorError] = {}
        self._wire: bytes | None = None
        self._ctx: Any = None
        self._domains: frozenset[str] = frozenset()

    @property
    def wire(self) -> bytes:
        """The device as pysched-cel reads it (JSON): driver, attributes and capacity as published,
        and ``allowMultipleAllocations`` when true."""
        if self._wire is None:
            d = self.device
            wire: dict[str, Any] = {"driver": self.driver, "attributes": d.get("attributes") or {},
                                    "capacity": d.get("capacity") or {}}
            if self.multi:
                wire["allowMultipleAllocations"] = True
            self._wire = orjson.dumps(wire)
        return self._wire

    def builtin_context(self, domains: frozenset[str]) -> Any:
        """The built-in engine's CEL context, rebuilt when a selector names a domain it lacks
        (upstream answers an unknown domain with an empty map)."""
        if self._ctx is None or not domains <= self._domains:
            self._domains |= domains
            device = self.device
            if bool(device.get("allowMultipleAllocations")) != self.multi:
                device = {**device, "allowMultipleAllocations": self.multi}
            self._ctx = BuiltinEngine().context(self.driver, device, self._domains)
        return self._ctx

    def known(self, selector: Selector) -> bool:
        return selector.expression in self._results

    def remember(self, selector: Selector, result: bool | SelectorError) -> None:
        self._results[selector.expression] = result

    def matches(self, selector: Selector) -> bool:
        """Whether ``selector`` selects this device; raises SelectorError on a run-time error."""
        result = self._results.get(selector.expression)
        if result is None:
            result = selector.engine.evaluate(selector.program, selector.expression, [self])[0]
            self._results[selector.expression] = result
        if isinstance(result, SelectorError):
            raise result
        return result


def prefetch(selector: Selector, devices: list[CelDevice]) -> None:
    """Evaluate ``selector`` for every device that has no answer yet, in one request."""
    todo = [d for d in devices if not d.known(selector)]
    if not todo:
        return
    for dev, result in zip(todo, selector.engine.evaluate(selector.program, selector.expression, todo)):
        dev.remember(selector, result)
