"""Device selectors in CEL, evaluated as kube-scheduler 1.35's DRA allocator evaluates them.

A DeviceClass or a request selects devices with CEL expressions over one variable, ``device``:
``device.driver``, ``device.attributes[domain][name]`` and ``device.capacity[domain][name]``. An
attribute or capacity named without a domain in the ResourceSlice belongs to the driver's domain.

Two engines, one chosen for the process (``engine()``):

* ``pysched-cel`` (``cel_go``) - kube-scheduler's own CEL code in a helper binary built from
  ``cmd/pysched-cel``: every library, optional types, the cost limit and the error texts exactly as
  upstream. Used when ``PYSCHED_CEL_HELPER`` names it or ``pysched-cel`` is on ``PATH`` (the
  container image ships it; ``make`` builds it with ``hack/pysched-cel.sh``).
* ``builtin`` (``cel_builtin``) - a subset in Python (Rust CEL plus ``quantity()``/``semver()``),
  used otherwise, with one warning at start: a selector it cannot read fails to compile, so its pod
  stays pending where kube-scheduler might place it.

``PYSCHED_CEL_ENGINE=builtin`` forces the subset; ``=pysched-cel`` makes a missing helper an error.

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
from typing import Any

import orjson

from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine, device_variable
from pysched.plugins.dynamic_resources.cel_go import GoEngine
from pysched.plugins.dynamic_resources.celerrors import SelectorError

__all__ = ["CelDevice", "Selector", "SelectorError", "compile_selector", "device_variable", "engine", "prefetch"]

log = logging.getLogger("pysched.plugins.dra.cel")

ENGINE_ENV = "PYSCHED_CEL_ENGINE"
HELPER_ENV = "PYSCHED_CEL_HELPER"
HELPER_NAME = "pysched-cel"


@lru_cache(maxsize=2)
def engine(consumable_capacity: bool = False) -> BuiltinEngine | GoEngine:
    """The engine of this process: pysched-cel when it can be found, else the built-in subset
    (``consumable_capacity``: the DRAConsumableCapacity gate the helper is given)."""
    wanted = os.environ.get(ENGINE_ENV, "").strip().lower()
    if wanted not in ("", "auto", "builtin", HELPER_NAME):
        raise SelectorError(f"{ENGINE_ENV}={wanted!r}: expected {HELPER_NAME}, builtin or auto")
    if wanted != "builtin":
        path = os.environ.get(HELPER_ENV) or shutil.which(HELPER_NAME)
        if path:
            return GoEngine(path, consumable_capacity=consumable_capacity)
        if wanted == HELPER_NAME:
            raise SelectorError(f"{ENGINE_ENV}={HELPER_NAME} but the helper is not on PATH and {HELPER_ENV} "
                                "is not set")
        log.warning("pysched-cel not found: DRA device selectors use the built-in subset (no optional types, no "
                    "strings, lists, sets, regex, IP/CIDR, URL or format libraries); a selector outside it fails "
                    "to compile. Put pysched-cel on PATH or set PYSCHED_CEL_HELPER (make builds it: "
                    "hack/pysched-cel.sh)")
    return BuiltinEngine()


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
