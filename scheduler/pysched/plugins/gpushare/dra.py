"""GPUs published as DRA devices with consumable capacity, as GPUShare sees them.

``DraInventory`` reads the ResourceSlices of the drivers named in ``draDrivers`` (node-local
slices: ``spec.nodeName``; per pool only its highest generation) and lists each node's GPUs in the
order the DRA allocator tries them (pools by driver and pool name, slices by name, devices as
listed): the node's GPU ``i`` of the device table is its ``i``-th device. A device's share is
counted in thousandths of its ``draShareCapacity`` capacity; a device that is not
multi-allocatable (``allowMultipleAllocations``) or lacks that capacity is a whole GPU only (any
allocation takes all of it). Its model is the ``draModelAttribute`` attribute.

``dra_ask`` reads what a pod's ResourceClaims ask of such GPUs: requests (``exactly``) of a GPU
DeviceClass (one listed in ``draDeviceClasses``, or whose CEL selectors say ``device.driver ==
"<driver>"`` for one of ``draDrivers``), ``count`` devices each with ``capacity.requests`` of the
share capacity (thousandths: ceil(1000 * request / capacity), against the largest capacity the
drivers publish; no capacity request: a whole GPU). ``allocated_shares`` reads an allocation's
results back as (device, thousandths).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pysched.framework.api import QuantityError, parse_quantity
from pysched.framework.devicepreference import DeviceID
from pysched.framework.handle import ObjectLister
from pysched.plugins.gpushare.ask import FULL, NO_GPU, GPUAsk

log = logging.getLogger("pysched.gpushare")

_DRIVER_SELECTOR = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class DraGpu:
    id: DeviceID
    capacity: Fraction | None      # the share capacity's value; None: a whole GPU only
    model: str | None


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (QuantityError, ValueError, TypeError):
        return None


def _attribute(device: Mapping[str, Any], driver: str, name: str) -> str | None:
    attrs = device.get("attributes") or {}
    raw = attrs.get(name)
    if raw is None:
        domain, _, short = name.rpartition("/")
        raw = attrs.get(short) if domain == driver else attrs.get(f"{driver}/{name}") if not domain else None
    if not isinstance(raw, Mapping):
        return None
    for key in ("string", "version", "int", "bool"):
        if key in raw:
            return str(raw[key])
    return None


class DraInventory:
    """The GPUs of the ``drivers``' ResourceSlices, per node, rebuilt when the slices change."""

    def __init__(self, drivers: Iterable[str], share_capacity: str, model_attribute: str,
                 device_classes: Iterable[str] = ()) -> None:
        self.drivers = frozenset(drivers)
        self.share_capacity = share_capacity
        self.model_attribute = model_attribute
        self.device_classes = frozenset(device_classes)
        self.version = -1                                  # the store's resourceslices version read
        self.by_node: dict[str, list[DraGpu]] = {}
        self.column: dict[DeviceID, tuple[str, int]] = {}   # device -> (its node, its GPU index)
        self.gpus: dict[DeviceID, DraGpu] = {}
        self.reference: Fraction | None = None             # the largest share capacity published
        self._classes: tuple[int, frozenset[str]] = (-1, frozenset())

    def refresh(self, objects: ObjectLister) -> bool:
        """Re-read the slices when they changed since the last call; True when re-read."""
        mark = objects.kind_version("resourceslices")
        if mark == self.version:
            return False
        pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for s in objects.list("resourceslices"):
            spec = s.get("spec") or {}
            if spec.get("driver") not in self.drivers or not spec.get("nodeName"):
                continue
            pool = spec.get("pool") or {}
            pools.setdefault((spec["driver"], str(pool.get("name", ""))), []).append(s)
        by_node: dict[str, list[DraGpu]] = {}
        missing: list[str] = []
        for (driver, pool), slices in sorted(pools.items()):
            newest = max(int((s["spec"].get("pool") or {}).get("generation") or 0) for s in slices)
            for s in sorted(slices, key=lambda x: (x.get("metadata") or {}).get("name", "")):
                spec = s["spec"]
                if int((spec.get("pool") or {}).get("generation") or 0) != newest:
                    continue
                for d in spec.get("devices") or ():
                    cap = ((d.get("capacity") or {}).get(self.share_capacity) or {}).get("value")
                    value = _quantity(cap) if cap is not None else None
                    if value is not None and value <= 0:
                        value = None
                    if value is None:
                        missing.append(f"{driver}/{pool}/{d.get('name', '')}")
                    elif not d.get("allowMultipleAllocations"):
                        value = None
                    gpu = DraGpu((driver, pool, str(d.get("name", ""))), value,
                                 _attribute(d, driver, self.model_attribute))
                    by_node.setdefault(spec["nodeName"], []).append(gpu)
        if missing:
            log.warning("DRA GPUs without the share capacity GPUShareArgs.draShareCapacity names: each is "
                        "counted as one whole GPU", extra={"kv": {"draShareCapacity": self.share_capacity,
                                                                  "devices": ", ".join(missing[:10]),
                                                                  "count": len(missing)}})
        self.by_node = by_node
        self.column = {g.id: (node, i) for node, gpus in by_node.items() for i, g in enumerate(gpus)}
        self.gpus = {g.id: g for gpus in by_node.values() for g in gpus}
        caps = [g.capacity for g in self.gpus.values() if g.capacity is not None]
        self.reference = max(caps) if caps else None
        self.version = mark
        return True

    # -- the classes that mean "GPU" ---------------------------------------------------------------

    def gpu_classes(self, objects: ObjectLister) -> frozenset[str]:
        """``draDeviceClasses``, and the DeviceClasses whose selectors pin one of the drivers."""
        mark = objects.kind_version("deviceclasses")
        if self._classes[0] != mark:
            names = set(self.device_classes)
            for c in objects.list("deviceclasses"):
                for sel in (c.get("spec") or {}).get("selectors") or ():
                    expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                    if any(m in self.drivers for m in _DRIVER_SELECTOR.findall(expr)):
                        names.add((c.get("metadata") or {}).get("name", ""))
            self._classes = (mark, frozenset(names))
        return self._classes[1]

    # -- asks and shares -----------------------------------------------------------------------------

    def thousandths(self, amount: Fraction, capacity: Fraction | None) -> int:
        """ceil(1000 * amount / capacity), within 0..1000 (a whole GPU without a capacity)."""
        if capacity is None or capacity <= 0:
            return FULL
        return max(0, min(FULL, math.ceil(FULL * amount / capacity)))

    def dra_ask(self, claims: Iterable[Mapping[str, Any]], classes: frozenset[str]) -> GPUAsk:
        """What the claims' GPU requests ask, as one ``GPUAsk``; ``NO_GPU`` when they ask none, or
        in a way GPUShare does not steer (``All``, ``firstAvailable``, admin access, several
        requests sharing GPUs, or requests of different shares): DynamicResources alone places those."""
        asks: list[tuple[int, int]] = []
        for claim in claims:
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                subs = [r["exactly"]] if r.get("exactly") is not None else list(r.get("firstAvailable") or ())
                if not any(s.get("deviceClassName") in classes for s in subs):
                    continue
                spec = r.get("exactly")
                if spec is None or spec.get("adminAccess") \
                        or (spec.get("allocationMode") or "ExactCount") != "ExactCount":
                    return NO_GPU
                count = int(spec.get("count") or 1)
                wanted = ((spec.get("capacity") or {}).get("requests") or {}).get(self.share_capacity)
                amount = _quantity(wanted) if wanted is not None else None
                milli = FULL if amount is None else max(1, self.thousandths(amount, self.reference))
                asks.append((milli, count))
        if not asks:
            return NO_GPU
        millis = {m for m, _ in asks}
        count = sum(c for _, c in asks)
        if len(millis) != 1:
            return NO_GPU
        milli = millis.pop()
        if count > 1 and milli != FULL:
            return NO_GPU
        return GPUAsk(milli, count)

    def allocated_shares(self, allocation: Mapping[str, Any]) -> list[tuple[DeviceID, int]]:
        """The allocation's results on the inventory's GPUs as (device, thousandths it takes):
        ``consumedCapacity`` of the share capacity for a share, the whole GPU otherwise; admin
        access takes nothing."""
        out = []
        for r in (allocation.get("devices") or {}).get("results") or ():
            if r.get("adminAccess"):
                continue
            did = (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
            gpu = self.gpus.get(did)
            if gpu is None:
                continue
            consumed = (r.get("consumedCapacity") or {}).get(self.share_capacity)
            amount = _quantity(consumed) if consumed is not None else None
            milli = FULL if amount is None or gpu.capacity is None else self.thousandths(amount, gpu.capacity)
            if milli > 0:
                out.append((did, milli))
        return out
