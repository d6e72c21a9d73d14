"""The structured DRA allocator: which devices of a node's ResourceSlices a pod's claims get.

Our own implementation of what kube-scheduler 1.35 does with its default feature gates (the
"incubating" allocator of k8s.io/dynamic-resource-allocation: admin access and prioritized lists
on; partitionable devices, device taints, consumable capacity and binding conditions off):

* **Pools** (``gather_pools``): the slices that apply to the node (``spec.nodeName`` equal to it,
  ``spec.allNodes``, or a ``spec.nodeSelector`` matching it; slices with ``perDeviceNodeSelection``
  or ``sharedCounters`` are skipped while their gate is off), grouped by driver and pool name, only the
  highest ``pool.generation``. A pool with fewer slices than ``resourceSliceCount`` is complete if
  the missing slices exist for other nodes, dropped if a newer generation exists anywhere, and
  otherwise incomplete. Duplicate device names make a pool invalid. Pools are tried sorted by
  driver and pool name and a pool's slices by name (1.37 sorts both; 1.35 took Go map and informer
  order, so any order was upstream's).
* **Search** (``Allocator.allocate``): depth-first, claim by claim, request by request, device slot
  by device slot; the first complete answer wins. A device is taken for a normal request only if
  no claim in the cluster has it (persisted or in flight) and no other request of this call took
  it; an admin-access request may take devices allocated elsewhere. DeviceClass selectors then
  request selectors must all be true (CEL, ``dra.cel``). ``matchAttribute`` constraints pin the
  value of the first device in their scope. ``allocationMode: All`` takes every selectable device of
  the node's pools and fails when there is none or one is in use. ``firstAvailable`` tries its
  subrequests in order. Slots are filled in increasing device order: since whether a set of devices
  works does not depend on the order it was picked in, this finds upstream's first answer without
  visiting the permutations of each set.
* **Device preference** (pysched's own, ``framework.devicepreference``): when the pod's cycle
  carries a ``DevicePreference`` (``Allocator.preference``), the node's candidates it names are
  tried first, in its order, then the others in the order above; the search is otherwise the
  same. Without one, the order above, as upstream.
* **Result**: one ``status.allocation`` per claim - ``devices.results`` (request, driver, pool,
  device, ``adminAccess`` when asked), ``devices.config`` (class configs, then claim configs, as
  upstream orders and repeats them; 1.37's once per claim config, without ``requests`` when it
  names them all: ``Allocator.kube_version``) and ``nodeSelector`` (the node's name for node-local devices,
  the slices' merged selector term, or none for devices available on all nodes).

Behind kube feature gates (the names ``Allocator`` and ``SliceIndex`` get in ``features``; off, the
above is all), as 1.37.2's incubating allocator does with the gate on:

* **Device taints** (``DRADeviceTaints``): a device with a ``NoSchedule`` or ``NoExecute`` taint
  (its own, or one a DeviceTaintRule adds: ``SliceIndex(taint_rules=...)``, which the plugin passes
  with ``DRADeviceTaintRules``) is taken only for a request or subrequest whose ``tolerations``
  tolerate every such taint (``resourceclaim.ToleratesTaint``: effect and key when set, ``Equal``
  value or ``Exists``); other effects are ignored. The check comes after the device is known free
  and selectable and before the constraints, so an ``All`` request with an untolerated device has
  no answer (and no constraint error). Each result carries its request's tolerations.
* **Partitionable devices** (``DRAPartitionableDevices``): a pool's ``sharedCounters`` slices
  define counter sets; a device with ``consumesCounters`` is taken only while, for every counter of
  its pool, what the allocated devices (in the cluster, persisted or in flight, of every slice of
  the pool) and the devices of this search consume stays within it (upstream's
  ``checkAvailableCounters``, checked before the taints). A pool is invalid for a duplicate
  counter set name, a consumed set it lacks (``counter set X not found``) or a consumed counter a
  set lacks. A ``perDeviceNodeSelection`` slice applies to the node when one of its devices does
  (the device's ``nodeName``, ``allNodes`` or ``nodeSelector``), only such devices are candidates,
  and they, not the slice, give the allocation's ``nodeSelector``. A pool whose slices for this
  node are not all of it is complete when the rest exist for other nodes; their devices then count
  against the counters.
* **Consumable capacity** (``DRAConsumableCapacity``; the rules of what a request consumes are in
  ``capacity``): a device with ``allowMultipleAllocations`` is shared, not taken - any number of
  claims, and any of the requests of one claim (one request still takes distinct devices), get a
  share of it while, for each capacity, what the cluster's shares (persisted and in flight:
  ``SharedAllocations``) and this search's consume plus the request's amount stays within the
  value. Every candidate, shared or not, must have each capacity the request names in
  ``capacity.requests`` and room for it (checked before the counters, and again last in
  ``_add``); an unrepresentable amount aborts (``checking capacity for device ...``). Only a
  device's first share charges its counters, and a shared device counts as allocated for its
  pool's counters. A share's result carries ``consumedCapacity`` (every capacity of the device,
  in the quantities' own format) and a ``shareID``: upstream makes a random UUID (version 4) per
  share, and so does pysched. ``All`` lists the devices whose capacity could serve the request at
  all, then fails quietly when one has too little left. ``distinctAttribute`` constraints want
  every device of their requests to have the attribute with a value no other has. CEL sees the
  device's ``allowMultipleAllocations``. With the gate off a shared device is an ordinary one,
  ``distinctAttribute`` is an empty constraint and ``capacity`` on a request or subrequest is
  upstream's error (``has capacity requests, but the DRAConsumableCapacity feature is
  disabled``), as 1.35's allocator and 1.37's stable one do (1.37's incubating allocator, chosen
  while another of its gates is on, honours ``distinctAttribute`` and shows CEL the field even
  with the gate off). ``DRAFractionalCapacityRange`` (off by default) switches step rounding to
  milli-value arithmetic.

Errors that upstream treats as fatal for the scheduling attempt (a CEL run-time error, a class
missing at allocation time, ``All`` over an incomplete pool, ...) raise ``AllocationError`` with
upstream's text; ``InvalidPools`` is the per-node "invalid resource pools were encountered".

Binding conditions (``SliceIndex(binding_conditions=True)``, the plugin's DRADeviceBindingConditions
with DRAResourceClaimDeviceStatus; ``binding``): devices with ``bindingConditions`` become
allocatable, a result copies the device's ``bindingConditions`` and ``bindingFailureConditions``,
and a ``bindsToNode`` device pins the allocation to the node. Pools holding such devices come after
all others whatever the gates (upstream 1.37's ``gatherPools``).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pysched.framework.api import NodeSelector, ObjectError, QuantityError, parse_node_selector, parse_quantity
from pysched.framework.devicepreference import DevicePreference, reorder
from pysched.plugins.dynamic_resources.capacity import (
    Capacity,
    CapacityError,
    Quantity,
    SharedAllocations,
    consumed,
    fits,
    parse_capacities,
    parse_requests,
)
from pysched.plugins.dynamic_resources.cel import CelDevice, Selector, SelectorError, compile_selector, prefetch

MAX_RESULTS = 32          # AllocationResultsMaxSize
FROM_CLASS, FROM_CLAIM = "FromClass", "FromClaim"
EXACT, ALL = "ExactCount", "All"

# The kube feature gates the allocator reads (``Handle.feature_gates`` holds the names of those on).
DEVICE_TAINTS = "DRADeviceTaints"
DEVICE_TAINT_RULES = "DRADeviceTaintRules"
PARTITIONABLE_DEVICES = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
FRACTIONAL_CAPACITY_RANGE = "DRAFractionalCapacityRange"
TAINT_EFFECTS = ("NoSchedule", "NoExecute")   # the effects that keep a device from being allocated
# why ``Allocator._add`` refused a device
NO_COUNTERS, TAINTED, CONSTRAINT, NO_CAPACITY = "counters", "tainted", "constraint", "capacity"

DeviceID = tuple[str, str, str]   # driver, pool, device


class AllocationError(Exception):
    """Upstream aborts the scheduling attempt with this text (a Filter Error)."""


class InvalidPools(Exception):
    """No answer, and the node has invalid pools: Filter's ``invalid resource pools were encountered``."""

    def __init__(self) -> None:
        super().__init__("invalid resource pools were encountered")


class AllocationTimeout(Exception):
    """The search ran past ``filterTimeout``."""


# -- pools -------------------------------------------------------------------------------------

@dataclass
class Device:
    driver: str
    pool: str
    name: str
    slice_name: str
    node_local: bool                       # the slice names a node
    node_selector: dict[str, Any] | None   # the slice's spec.nodeSelector
    raw: dict[str, Any]
    cel: CelDevice
    # The device's own taints, then those DeviceTaintRules add (with DRADeviceTaintRules on).
    taints: list[dict[str, Any]] = field(default_factory=list)
    # With DRAPartitionableDevices: its slice has perDeviceNodeSelection (node_local and
    # node_selector are then the device's own), and the counters it consumes (set -> counter -> amount).
    per_device: bool = False
    consumes: list[tuple[str, dict[str, Fraction]]] = field(default_factory=list)
    # With DRAConsumableCapacity: ``allowMultipleAllocations``, and its capacities (with their
    # request policies); ``plain`` when no capacity has a policy or a negative value.
    multi: bool = False
    capacities: dict[str, Capacity] = field(default_factory=dict)
    plain: bool = True

    @property
    def id(self) -> DeviceID:
        return (self.driver, self.pool, self.name)


@dataclass
class Pool:
    driver: str
    name: str
    devices: list[Device] = field(default_factory=list)   # of the slices that apply to the node
    incomplete: bool = False
    invalid: str = ""
    # With DRAPartitionableDevices: the devices of the pool's other slices (their allocated devices
    # consume counters too), and the counter sets of its ``sharedCounters`` slices.
    other_devices: list[Device] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Fraction]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


Slice = dict[str, Any]


class SliceIndex:
    """The cluster's ResourceSlices, indexed for ``gather_pools``; rebuilt when they change.

    ``CelDevice`` objects (a device's CEL context and the selector results) live as long as the
    index, so a selector is evaluated once per device until the slices change.
    """

    def __init__(self, slices: list[Slice], *, features: Container[str] = frozenset(),
                 taint_rules: Iterable[dict[str, Any]] = (), binding_conditions: bool = False):
        """``taint_rules``: the cluster's DeviceTaintRules, whose taints are added to the devices
        they select (the plugin passes them only with DRADeviceTaintRules on).
        ``binding_conditions``: DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus):
        devices with bindingConditions may be allocated (``binding.py``); otherwise they are skipped."""
        self.binding_conditions = binding_conditions
        self.features = features
        self.partitionable = PARTITIONABLE_DEVICES in features
        self.consumable = CONSUMABLE_CAPACITY in features
        self.taint_rules = [r for r in taint_rules if ((r.get("spec") or {}).get("deviceSelector")) is not None]
        self.by_node: dict[str, list[Slice]] = {}
        # allNodes and nodeSelector slices (and perDeviceNodeSelection ones with DRAPartitionableDevices)
        self.cluster_wide: list[Slice] = []
        self.pool_slices: dict[tuple[str, str], dict[int, list[Slice]]] = {}   # pool -> generation -> slices
        self._devices: dict[tuple[str, int], list[Device]] = {}
        self._selectors: dict[str, NodeSelector | None] = {}
        # Per node, while no slice selects nodes by label (the pools then depend on the node's name
        # alone): the gathered pools and their allocatable devices, built once per index instead
        # of once per pod and node. Pools are not changed after they are gathered.
        self._node_pools: dict[str, tuple[list[Pool], list[Device]]] = {}
        self._prefetched: set[tuple[str, str]] = set()   # (node, expression) asked for all its devices
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver", ""), pool.get("name", ""))
            gen = int(pool.get("generation") or 0)
            self.pool_slices.setdefault(key, {}).setdefault(gen, []).append(s)
            if not self.partitionable and (spec.get("perDeviceNodeSelection") or spec.get("sharedCounters")):
                continue   # DRAPartitionableDevices is off
            if spec.get("nodeName"):
                self.by_node.setdefault(spec["nodeName"], []).append(s)
            elif spec.get("allNodes") or spec.get("nodeSelector") or spec.get("perDeviceNodeSelection"):
                self.cluster_wide.append(s)

    def node_pools(self, node_name: str, node_labels: dict[str, str]) -> tuple[list[Pool], list[Device]]:
        """``gather_pools`` and the devices an allocation may use from them (complete, valid pools;
        those that consume counters only with DRAPartitionableDevices; with per-device node
        selection, those for this node; no binding conditions), cached per node when the pools
        depend on its name only."""
        hit = self._node_pools.get(node_name) if not self.cluster_wide else None
        if hit is not None:
            return hit
        pools = self.gather_pools(node_name, node_labels)
        candidates = [d for p in pools if not p.incomplete and not p.invalid
                      for d in self.usable(p, node_name, node_labels)]
        if not self.cluster_wide:
            self._node_pools[node_name] = (pools, candidates)
        return pools, candidates

    def allows_binding_conditions(self, device: Device) -> bool:
        """A device with ``bindingConditions`` is allocatable only with DRADeviceBindingConditions."""
        return self.binding_conditions or not device.raw.get("bindingConditions")

    def usable(self, pool: Pool, node_name: str, node_labels: dict[str, str]) -> list[Device]:
        """The devices of ``pool`` an allocation on the node may consider, in the pool's order."""
        out = []
        for d in pool.devices:
            if not self.allows_binding_conditions(d):
                continue
            if d.raw.get("consumesCounters") and not self.partitionable:
                continue
            if d.per_device and not self._device_on_node(d, node_name, node_labels):
                continue   # upstream: not selectable for this node
            out.append(d)
        return out

    def prefetched(self, node_name: str, selector: Any) -> bool:
        """Whether ``selector`` was already asked for every device of the node (then marks it so):
        only while the node's pools are cached, i.e. depend on its name alone."""
        if self.cluster_wide:
            return False
        key = (node_name, selector.expression)
        if key in self._prefetched:
            return True
        self._prefetched.add(key)
        return False

    def gather_pools(self, node_name: str, node_labels: dict[str, str]) -> list[Pool]:
        relevant: dict[tuple[str, str], tuple[int, list[Slice]]] = {}
        for s in [*self.by_node.get(node_name, ()), *self.cluster_wide]:
            spec = s["spec"]
            if spec.get("perDeviceNodeSelection") and not spec.get("nodeName"):
                if not any(self._device_on_node(d, node_name, node_labels) for d in self._slice_devices(s)):
                    continue
            elif not spec.get("nodeName") and not spec.get("allNodes"):
                if not self._node_selector(s).matches(node_labels, node_name):
                    continue
            pool = spec.get("pool") or {}
            key = (spec.get("driver", ""), pool.get("name", ""))
            gen = int(pool.get("generation") or 0)
            have = relevant.get(key)
            if have is None or gen > have[0]:
                relevant[key] = (gen, [s])
            elif gen == have[0]:
                have[1].append(s)
        pools = []
        for key in sorted(relevant):
            gen, slices = relevant[key]
            want = int((slices[0]["spec"].get("pool") or {}).get("resourceSliceCount") or 0)
            others: list[Slice] = []
            if len(slices) != want:
                gens = self.pool_slices.get(key, {})
                if any(g > gen for g in gens):
                    continue   # the driver is publishing a newer generation without this node
                everything = gens.get(gen, [])
                if len(everything) != want:
                    pools.append(Pool(*key, incomplete=True))
                    continue
                mine = {id(s) for s in slices}
                others = [s for s in everything if id(s) not in mine]
            pools.append(self._build_pool(key, slices, others))
        # Pools with a device that has binding conditions come after all others, each group in
        # pool order (upstream's gatherPools since 1.36, whatever the gates).
        pools.sort(key=_has_binding_conditions)
        return pools

    def _build_pool(self, key: tuple[str, str], slices: list[Slice], others: list[Slice]) -> Pool:
        """A complete pool from the slices that apply to the node (in slice name order, as 1.37
        sorts them; 1.35's order was the informer's) and the pool's other slices, validated as
        upstream's ``buildPool``: unique device names among the node's slices, and with
        DRAPartitionableDevices unique counter set names and only known sets and counters consumed."""
        p = Pool(*key)
        counter_slices = []
        for s in sorted(slices, key=lambda s: (s.get("metadata") or {}).get("name", "")):
            if self.partitionable and s["spec"].get("sharedCounters"):
                counter_slices.append(s)
            else:
                p.devices.extend(self._slice_devices(s))
        for s in others:
            if self.partitionable and s["spec"].get("sharedCounters"):
                counter_slices.append(s)
            else:
                p.other_devices.extend(self._slice_devices(s))
        seen: set[str] = set()
        for d in p.devices:
            if d.name in seen:
                p.invalid = f"duplicate device name {d.name}"
                return p
            seen.add(d.name)
        if not self.partitionable:
            return p
        for s in counter_slices:
            for cs in s["spec"].get("sharedCounters") or ():
                name = cs.get("name", "")
                if name in p.counter_sets:
                    p.invalid = f"duplicate counter set name {name}"
                    return p
                p.counter_sets[name] = {c: _quantity(v.get("value")) for c, v in (cs.get("counters") or {}).items()}
        for d in [*p.devices, *p.other_devices]:
            for set_name, counters in d.consumes:
                known = p.counter_sets.get(set_name)
                if known is None:
                    p.invalid = f"counter set {set_name} not found"
                    return p
                for c in counters:
                    if c not in known:
                        p.invalid = f"counter {c} not found in counter set {set_name}"
                        return p
        return p

    def _device_on_node(self, d: Device, node_name: str, node_labels: dict[str, str]) -> bool:
        """A device of a ``perDeviceNodeSelection`` slice: its own ``nodeName``, ``allNodes`` or
        ``nodeSelector`` (``NodeMatches``)."""
        raw = d.raw
        if raw.get("nodeName"):
            return bool(raw["nodeName"] == node_name)
        if raw.get("allNodes"):
            return True
        if raw.get("nodeSelector"):
            key = f"{d.slice_name}/{d.name}"
            sel = self._selectors.get(key)
            if sel is None:
                try:
                    sel = parse_node_selector(raw["nodeSelector"], "nodeSelector")
                except ObjectError as exc:
                    raise AllocationError(f"gather pool information: failed to perform node selection for device "
                                          f"{d.name} in slice {d.slice_name}: failed to parse node selector: "
                                          f"{exc}") from None
                assert sel is not None
                self._selectors[key] = sel
            return sel.matches(node_labels, node_name)
        return False

    def _node_selector(self, s: dict[str, Any]) -> NodeSelector:
        name = (s.get("metadata") or {}).get("name", "")
        if name not in self._selectors:
            try:
                self._selectors[name] = parse_node_selector(s["spec"]["nodeSelector"], "spec.nodeSelector")
            except ObjectError as exc:
                raise AllocationError(f"gather pool information: failed to perform node selection for slice "
                                      f"{name}: failed to parse node selector: {exc}") from None
        sel = self._selectors[name]
        assert sel is not None
        return sel

    def _slice_devices(self, s: dict[str, Any]) -> list[Device]:
        key = ((s.get("metadata") or {}).get("name", ""), id(s))
        out = self._devices.get(key)
        if out is None:
            spec = s["spec"]
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            per_device = bool(self.partitionable and spec.get("perDeviceNodeSelection"))
            consumable = self.consumable
            out = [Device(driver, pool, d.get("name", ""), key[0], bool((d if per_device else spec).get("nodeName")),
                          (d if per_device else spec).get("nodeSelector"), d,
                          CelDevice(driver, d, consumable and bool(d.get("allowMultipleAllocations"))),
                          [*(d.get("taints") or ()), *self._rule_taints(driver, pool, d.get("name", ""))],
                          per_device,
                          [(c.get("counterSet", ""), {n: _quantity(v.get("value")) for n, v in
                                                      (c.get("counters") or {}).items()})
                           for c in d.get("consumesCounters") or ()] if self.partitionable else [])
                   for d in spec.get("devices") or ()]
            if consumable:
                for dev in out:
                    dev.multi = bool(dev.raw.get("allowMultipleAllocations"))
                    dev.capacities = parse_capacities(dev.raw.get("capacity"))
                    dev.plain = all(not c.has_policy and c.value.value >= 0 for c in dev.capacities.values())
            self._devices[key] = out
        return out

    def _rule_taints(self, driver: str, pool: str, device: str) -> list[dict[str, Any]]:
        """The taints of the DeviceTaintRules whose ``deviceSelector`` (driver, pool, device; an
        unset field matches any) selects the device, in the rules' order (the resourceslice
        tracker's ``applyPatches``). A rule without a selector selects nothing."""
        out = []
        for rule in self.taint_rules:
            spec = rule.get("spec") or {}
            sel = spec["deviceSelector"]
            if sel.get("driver") is not None and sel["driver"] != driver:
                continue
            if sel.get("pool") is not None and sel["pool"] != pool:
                continue
            if sel.get("device") is not None and sel["device"] != device:
                continue
            out.append(spec.get("taint") or {})
        return out


def _has_binding_conditions(pool: Pool) -> bool:
    return any(d.raw.get("bindingConditions") is not None for d in pool.devices)


# -- claims ------------------------------------------------------------------------------------

@dataclass
class Alternative:
    """A request, or one subrequest of a ``firstAvailable`` request."""
    request: str            # the request's own name
    result_name: str        # "req" or "req/sub"
    class_name: str
    selectors: list[Any]    # compiled request selectors
    mode: str
    count: int
    admin: bool
    all_devices: list[Device] = field(default_factory=list)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    # With DRAConsumableCapacity: ``capacity.requests`` (None when there are none)
    capacity_requests: dict[str, Quantity] | None = None

    @property
    def own_name(self) -> str:
        """The request's or subrequest's own name, as upstream's capacity errors print it."""
        return self.result_name.rpartition("/")[2]


@dataclass
class Request:
    name: str
    alternatives: list[Alternative]


@dataclass
class MatchAttribute:
    requests: list[str]
    attribute: str
    value: Any = None
    devices: int = 0

    def covers(self, alt: Alternative) -> bool:
        if not self.requests:
            return True
        return alt.request in self.requests or alt.result_name in self.requests

    def add(self, device: Device) -> bool:
        got = _attribute(device, self.attribute)
        if got is None:
            return False
        if self.devices and got != self.value:
            return False
        if not self.devices:
            self.value = got
        self.devices += 1
        return True

    def remove(self) -> None:
        self.devices -= 1
        if not self.devices:
            self.value = None


@dataclass
class DistinctAttribute:
    """``distinctAttribute`` (DRAConsumableCapacity): every device of the constraint's requests has
    the attribute, each with its own value (values of different types never clash), as upstream's
    ``distinctAttributeConstraint``."""
    requests: list[str]
    attribute: str
    values: list[tuple[str, Any]] = field(default_factory=list)

    def covers(self, alt: Alternative) -> bool:
        if not self.requests:
            return True
        return alt.request in self.requests or alt.result_name in self.requests

    def add(self, device: Device) -> bool:
        got = _attribute(device, self.attribute)
        if got is None or got in self.values:
            return False
        self.values.append(got)
        return True

    def remove(self) -> None:
        self.values.pop()


Constraint = MatchAttribute | DistinctAttribute
MATCH, DISTINCT = "matchAttribute", "distinctAttribute"


def _constraint(kind: str, requests: list[str], attribute: str) -> Constraint:
    return DistinctAttribute(requests, attribute) if kind == DISTINCT else MatchAttribute(requests, attribute)


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """``resourceclaim.ToleratesTaint``: the effect (if set) and key (if set) match, and the value
    is equal (operator ``Equal``, the default) or anything (``Exists``)."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"


def taint_prevents_allocation(device: Device, tolerations: list[dict[str, Any]]) -> bool:
    """A NoSchedule or NoExecute taint of the device that no toleration of the request tolerates
    (other effects, None included, are ignored)."""
    for taint in device.taints:
        if taint.get("effect") in TAINT_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return True
    return False


def request_alternatives(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A claim's request as (result name, spec) per way to satisfy it: itself for ``exactly``, each
    subrequest (``request/sub``) for ``firstAvailable``; [] for a request type not known here."""
    name = request.get("name", "")
    if request.get("exactly") is not None:
        return [(name, request["exactly"])]
    return [(f"{name}/{sub.get('name', '')}", sub) for sub in request.get("firstAvailable") or ()]


def _quantity(text: Any) -> Fraction:
    """A counter's or capacity's exact amount (0 for what is not a quantity: API validation keeps
    such values out)."""
    try:
        return parse_quantity(text if text is not None else 0)
    except QuantityError:
        return Fraction(0)


def _attribute(device: Device, name: str) -> tuple[str, Any] | None:
    """The typed value of a fully qualified attribute (``domain/id``); a bare id in the driver's domain."""
    attrs = device.raw.get("attributes") or {}
    a = attrs.get(name)
    if a is None:
        domain, _, short = name.rpartition("/")
        if domain == device.driver:
            a = attrs.get(short)
    if not isinstance(a, dict):
        return None
    for typ in ("int", "bool", "string", "version"):
        if typ in a:
            return (typ, a[typ])
    return None


@dataclass
class Pick:
    """A device taken for a request during the search, with what taking it changed."""
    alt: Alternative
    device: Device
    taken_from: int | None = None   # the claim that had the device before (an admin request shares)
    counters: bool = False          # its counters were charged to the pool
    marked: bool = False            # the device is in use for the claim (not a share)
    share: dict[str, Quantity] | None = None   # a share of a multi-allocatable device: what it consumes


@dataclass
class ClaimState:
    claim: dict[str, Any]
    label: str                     # ns/name, as upstream prints claims
    requests: list[Request]
    constraints: list[Constraint]
    results: list[Pick] = field(default_factory=list)
    chosen: dict[str, Alternative] = field(default_factory=dict)


# -- the search --------------------------------------------------------------------------------

class Solution:
    """The claims' devices on one node, found by ``Allocator.solve``; ``allocations()`` builds each
    claim's ``status.allocation`` once, when asked."""

    __slots__ = ("_allocator", "_claims", "_node", "_built")

    def __init__(self, allocator: Allocator, claims: list[ClaimState], node: str):
        self._allocator, self._claims, self._node = allocator, claims, node
        self._built: list[dict[str, Any]] | None = None

    def allocations(self) -> list[dict[str, Any]]:
        if self._built is None:
            self._built = [self._allocator._result(cs, self._node) for cs in self._claims]
        return self._built


class Allocator:
    """Allocate ``claims`` (unallocated, in the pod's order) on one node."""

    # The kube-scheduler release whose allocator to follow where releases differ without a gate
    # (the plugin sets it). 1.37 (k/k#139731, #139732): a claim config naming several requests is
    # written once, not once per request it names, and a config naming every request of the claim
    # is written without ``requests`` ("applies to all"); a CEL run-time error names the device,
    # and a missing key adds a hint (k/k#136709).
    kube_version: tuple[int, int] = (1, 35)

    def __init__(self, claims: list[dict[str, Any]], classes: dict[str, dict[str, Any]],
                 allocated: Container[DeviceID], index: SliceIndex, *, timeout: float = 0.0,
                 features: Container[str] = frozenset(), shared: SharedAllocations | None = None):
        """``allocated``: the devices claims hold (persisted or in flight); ``shared`` (or
        ``allocated.shared``): with DRAConsumableCapacity, the shares of multi-allocatable devices."""
        self.features = features
        self.taints = DEVICE_TAINTS in features
        self.partitionable = PARTITIONABLE_DEVICES in features
        self.consumable = CONSUMABLE_CAPACITY in features
        self.fractional = self.consumable and FRACTIONAL_CAPACITY_RANGE in features
        if shared is None:
            shared = getattr(allocated, "shared", None)
        self.shared = shared if isinstance(shared, SharedAllocations) and self.consumable else SharedAllocations()
        # Per pool (by id): its counters less what the devices allocated in the cluster consume,
        # computed once per allocator (the allocated devices do not change while it lives).
        self._available: dict[str, dict[str, dict[str, Fraction]]] = {}
        self.raw_claims = claims
        self.classes = classes
        self.allocated = allocated
        self.index = index
        self.timeout = timeout
        self._deadline = 0.0
        self._class_selectors: dict[str, list[Any]] = {}
        # Per claim (by identity), what ``_prepare`` derives from it alone when every alternative
        # counts devices (ExactCount): its label, its requests (read-only during a search) and its
        # constraints' specs. ``All`` alternatives list a node's devices and are prepared per node.
        self._node_independent: dict[int, tuple[str, list[Request], list[tuple[str, list[str], str]]]] = {}
        # A plugin's preference among a node's devices (``framework.devicepreference``: the plugin
        # sets it from the cycle's state); None: the candidates in the order above.
        self.preference: DevicePreference | None = None

    def start_deadline(self) -> None:
        """From now on, ``timeout`` seconds for every ``allocate`` call until the next start (the
        plugin starts one per Filter call: the search runs on the event loop)."""
        self._deadline = time.monotonic() + self.timeout if self.timeout > 0 else 0.0

    def allocate(self, node_name: str, node_labels: dict[str, str]) -> list[dict[str, Any]] | None:
        """One ``status.allocation`` per claim, or None when they cannot all be allocated here."""
        found = self.solve(node_name, node_labels)
        return None if found is None else found.allocations()

    def prefetch_nodes(self, nodes: list[tuple[str, dict[str, str]]]) -> None:
        """Ask pysched-cel once per selector the claims use about every device of ``nodes`` not
        asked yet, before ``solve`` visits them one by one (which would ask once per node: 5,000
        round trips on the first pod at 5,000 nodes, past the Filter's time budget). Anything
        wrong with a selector or class is left for ``solve`` to report."""
        try:
            selectors = self._claim_selectors()
        except (AllocationError, SelectorError):
            return
        if not selectors:
            return
        index = self.index
        cands: list[CelDevice] = []
        for name, labels in nodes:
            fresh = [sel for sel in selectors if not index.prefetched(name, sel)]
            if fresh:
                cands.extend(d.cel for d in index.node_pools(name, labels)[1])
        if cands:
            for sel in selectors:
                prefetch(sel, cands)

    def _claim_selectors(self) -> list[Any]:
        out: dict[str, Any] = {}
        for claim in self.raw_claims:
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                for _, spec in request_alternatives(r):
                    class_name = spec.get("deviceClassName") or ""
                    if class_name in self.classes:
                        for sel in self._class_selector_list(class_name):
                            out.setdefault(sel.expression, sel)
                    for sel in spec.get("selectors") or ():
                        expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                        if expr:
                            compiled = self._compile(expr)
                            out.setdefault(compiled.expression, compiled)
        return list(out.values())

    def solve(self, node_name: str, node_labels: dict[str, str]) -> Solution | None:
        """Whether the claims can all be allocated on the node: a ``Solution`` whose allocations
        are built only when asked for (Filter judges every node; one is reserved), or None."""
        pools, self._candidates = self.index.node_pools(node_name, node_labels)
        if self.preference is not None and self._candidates:
            self._candidates = reorder(self._candidates,
                                       self.preference.order(node_name, [d.id for d in self._candidates]))
        self._steps = 0
        self._pools = pools
        self._node_name = node_name
        self._allocating: dict[DeviceID, int] = {}
        self._consumed: dict[str, dict[str, dict[str, Fraction]]] = {}   # pool -> counters this search charged
        # DRAConsumableCapacity: per multi-allocatable device, the shares this search took and the
        # capacity they consume (upstream's ``allocatingCapacity``)
        self._shares: Counter[DeviceID] = Counter()
        self._share_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self._pool_of = {d.id: p for p in pools for d in p.devices} if self.partitionable else {}
        self._claims = [self._prepare(c, pools) for c in self.raw_claims]
        if not self._solve(0, 0):
            if any(p.invalid for p in pools):
                raise InvalidPools()
            return None
        return Solution(self, self._claims, node_name)

    # preparation ------------------------------------------------------------------------------

    def _prepare(self, claim: dict[str, Any], pools: list[Pool]) -> ClaimState:
        known = self._node_independent.get(id(claim))
        if known is not None:
            label, requests, constraint_specs = known
            self._prefetch(requests)
            return ClaimState(claim, label, requests, [_constraint(k, list(r), a) for k, r, a in constraint_specs])
        state = self._prepare_claim(claim, pools)
        if all(alt.mode == EXACT for req in state.requests for alt in req.alternatives):
            self._node_independent[id(claim)] = (
                state.label, state.requests,
                [(DISTINCT if isinstance(c, DistinctAttribute) else MATCH, c.requests, c.attribute)
                 for c in state.constraints])
        return state

    def _prefetch(self, requests: list[Request]) -> None:
        """What ``_alternative`` asks pysched-cel for this node's devices, for prepared requests
        (once per node and selector while the slices are unchanged: the answers are kept per device)."""
        if not self._candidates:
            return
        cands: list[CelDevice] | None = None
        for req in requests:
            for alt in req.alternatives:
                for sel in (*self._class_selector_list(alt.class_name), *alt.selectors):
                    if self.index.prefetched(self._node_name, sel):
                        continue
                    if cands is None:
                        cands = [d.cel for d in self._candidates]
                    prefetch(sel, cands)

    def _prepare_claim(self, claim: dict[str, Any], pools: list[Pool]) -> ClaimState:
        meta = claim.get("metadata") or {}
        label = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        devices = (claim.get("spec") or {}).get("devices") or {}
        requests: list[Request] = []
        minimum = 0
        for r in devices.get("requests") or ():
            name = r.get("name", "")
            subs = request_alternatives(r)
            if not self.consumable:
                # upstream refuses what it would otherwise ignore
                if (r.get("exactly") or {}).get("capacity") is not None:
                    raise AllocationError(f"claim {label}, request {name}: has capacity requests, but the "
                                          f"DRAConsumableCapacity feature is disabled")
                for sub in r.get("firstAvailable") or ():
                    if sub.get("capacity") is not None:
                        raise AllocationError(f"claim {label}, subrequest {sub.get('name', '')}: has capacity "
                                              f"requests, but the DRAConsumableCapacity feature is disabled")
            if not subs:
                raise AllocationError(f"claim {label}, request {name}: unknown request type")
            alts = [self._alternative(label, name, result_name, spec, pools) for result_name, spec in subs]
            minimum += min(a.count if a.mode == EXACT else len(a.all_devices) for a in alts)
            requests.append(Request(name, alts))
        if minimum > MAX_RESULTS:
            raise AllocationError(f"claim {label}: number of requested devices {minimum} exceeds the claim "
                                  f"limit of {MAX_RESULTS}")
        constraints: list[Constraint] = []
        for i, c in enumerate(devices.get("constraints") or ()):
            if c.get("matchAttribute"):
                constraints.append(MatchAttribute(list(c.get("requests") or ()), c["matchAttribute"]))
            elif self.consumable and c.get("distinctAttribute"):
                constraints.append(DistinctAttribute(list(c.get("requests") or ()), c["distinctAttribute"]))
            else:
                raise AllocationError(f"claim {label}, constraint #{i}: empty constraint "
                                      f"(unsupported constraint type?)")
        return ClaimState(claim, label, requests, constraints)

    def _alternative(self, label: str, request: str, result_name: str, spec: dict[str, Any],
                     pools: list[Pool]) -> Alternative:
        where = f"claim {label}, request {result_name}"
        class_name = spec.get("deviceClassName") or ""
        if not class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        if class_name not in self.classes:
            raise AllocationError(f'{where}: could not retrieve device class {class_name}: '
                                  f'deviceclasses.resource.k8s.io "{class_name}" not found')
        selectors = []
        for i, sel in enumerate(spec.get("selectors") or ()):
            expr = ((sel or {}).get("cel") or {}).get("expression") or ""
            if not expr:
                raise AllocationError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
            try:
                selectors.append(self._compile(expr))
            except SelectorError as exc:
                raise AllocationError(f"claim {label}: selector #{i}: CEL compile error: {exc}") from None
        if self._candidates:
            # One request per selector for every device of the node (pysched-cel answers a batch
            # for about the price of one device); each answer is kept per device version, and an
            # error is only raised where the search consults it, as upstream evaluates lazily.
            cands = [d.cel for d in self._candidates]
            for sel in (*self._class_selector_list(class_name), *selectors):
                prefetch(sel, cands)
        mode = spec.get("allocationMode") or EXACT
        admin = bool(spec.get("adminAccess"))
        alt = Alternative(request, result_name, class_name, selectors, mode, int(spec.get("count") or 0), admin)
        alt.tolerations = list(spec.get("tolerations") or ())
        if self.consumable:
            alt.capacity_requests = parse_requests(spec)
        if mode == EXACT:
            if alt.count > MAX_RESULTS:
                raise AllocationError(f"{where}: exact count {alt.count} is too large")
        elif mode == ALL:
            for p in pools:
                if p.incomplete:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {p.id} is "
                                          f"currently being updated")
                if p.invalid:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {p.id} is "
                                          f"currently invalid")
            # every pool is complete and valid here: the node's candidates are all their usable devices
            alt.all_devices = [d for d in self._candidates if self._selectable(d, label, alt)]
            if self.consumable:
                # the capacity a device has, not what is left of it: a device short of capacity
                # now stays in "All", which then fails
                alt.all_devices = [d for d in alt.all_devices if self._static_capacity(d, label, alt)]
        else:
            raise AllocationError(f"{where}: unsupported count mode {mode}")
        return alt

    def _selectable(self, device: Device, label: str, alt: Alternative) -> bool:
        for i, sel in enumerate(self._class_selector_list(alt.class_name)):
            try:
                if not device.cel.matches(sel):
                    return False
            except SelectorError as exc:
                raise AllocationError(f"class {alt.class_name}: {self._runtime_error(i, device, exc)}") from None
        for i, sel in enumerate(alt.selectors):
            try:
                if not device.cel.matches(sel):
                    return False
            except SelectorError as exc:
                raise AllocationError(f"claim {label}: {self._runtime_error(i, device, exc)}") from None
        return True

    def _compile(self, expression: str) -> Selector:
        return compile_selector(expression, self.consumable)

    def _static_capacity(self, device: Device, label: str, alt: Alternative) -> bool:
        """Whether an "All" request fits the device's capacities, none of them consumed yet."""
        try:
            return fits(alt.capacity_requests, device.capacities, fractional=self.fractional)
        except CapacityError as exc:
            raise AllocationError(f"claim {label}, request {alt.own_name}: checking capacity for device "
                                  f"{device.name}: {exc}") from None

    def _capacity_fits(self, d: Device, label: str, alt: Alternative, check: str = "checking") -> bool:
        """``CmpRequestOverCapacity`` with what the cluster's shares and this search's consume of
        the device (every device is checked, multi-allocatable or not)."""
        if d.plain and not alt.capacity_requests and not self.shared.capacity.get(d.id) \
                and not self._share_capacity.get(d.id):
            return True   # no policy and nothing requested: each capacity is consumed whole, once
        try:
            return fits(alt.capacity_requests, d.capacities, self.shared.capacity.get(d.id),
                        self._share_capacity.get(d.id), self.fractional)
        except CapacityError as exc:
            raise AllocationError(f"claim {label}, request {alt.own_name}: {check} capacity for device "
                                  f"{d.driver}/{d.pool}/{d.name}: {exc}") from None

    def _runtime_error(self, i: int, device: Device, exc: SelectorError) -> str:
        if self.kube_version < (1, 37):
            return f"selector #{i}: CEL runtime error: {exc}"
        text = str(exc)
        if "no such key:" in text:
            text += (". consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
                     "with has() for optional fields")
        return f"selector #{i} on device {device.driver}/{device.pool}/{device.name}: CEL runtime error: {text}"

    def _class_selector_list(self, class_name: str) -> list[Any]:
        out = self._class_selectors.get(class_name)
        if out is None:
            out = []
            spec = self.classes[class_name].get("spec") or {}
            for i, sel in enumerate(spec.get("selectors") or ()):
                expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                try:
                    out.append(self._compile(expr))
                except SelectorError as exc:
                    raise AllocationError(f"class {class_name}: selector #{i}: CEL compile error: {exc}") from None
            self._class_selectors[class_name] = out
        return out

    # search -----------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._steps += 1
        if self._deadline and not self._steps & 255 and time.monotonic() > self._deadline:
            raise AllocationTimeout()

    def _solve(self, ci: int, ri: int) -> bool:
        if ci == len(self._claims):
            return True
        cs = self._claims[ci]
        if ri == len(cs.requests):
            return self._solve(ci + 1, 0)
        req = cs.requests[ri]
        for alt in req.alternatives:
            wanted = alt.count if alt.mode == EXACT else len(alt.all_devices)
            if len(cs.results) + wanted > MAX_RESULTS:
                continue   # the claim would get more than 32 results: the next alternative, or back
            cs.chosen[req.name] = alt
            if alt.mode == ALL:
                if self._take_all(ci, ri, alt):
                    return True
            elif self._fill(ci, ri, alt, 0, 0):
                return True
        return False

    def _fill(self, ci: int, ri: int, alt: Alternative, slot: int, start: int) -> bool:
        if slot == alt.count:
            return self._solve(ci, ri + 1)
        cs = self._claims[ci]
        candidates = self._candidates
        # Slots are filled in increasing device order: the last candidate for this slot leaves
        # just enough devices after it for the slots still to fill.
        for k in range(start, len(candidates) - (alt.count - slot - 1)):
            self._tick()
            d = candidates[k]
            if self._in_use(d, ci, alt.admin) or not self._selectable(d, cs.label, alt):
                continue
            if self.consumable and not self._capacity_fits(d, cs.label, alt):
                continue
            if self._add(ci, alt, d) is not None:
                continue
            if self._fill(ci, ri, alt, slot + 1, k + 1):
                return True
            self._remove(ci, alt, d)
        return False

    def _take_all(self, ci: int, ri: int, alt: Alternative) -> bool:
        if not alt.all_devices:
            return False
        cs = self._claims[ci]
        added: list[Device] = []
        ok = True
        for d in alt.all_devices:
            if self._in_use(d, ci, alt.admin):
                ok = False
                break
            refused = self._add(ci, alt, d)
            if refused in (NO_COUNTERS, TAINTED, NO_CAPACITY):
                ok = False   # a device of "All" that cannot be had: no answer here, no error
                break
            if refused is not None:
                for a in reversed(added):
                    self._remove(ci, alt, a)
                raise AllocationError(f"claim {cs.label}, request {alt.result_name}: cannot add device "
                                      f"{d.driver}/{d.pool}/{d.name} because a claim constraint would not "
                                      f"be satisfied")
            added.append(d)
        if ok and self._solve(ci, ri + 1):
            return True
        for a in reversed(added):
            self._remove(ci, alt, a)
        return False

    def _in_use(self, d: Device, ci: int, admin: bool) -> bool:
        taker = self._allocating.get(d.id)
        if admin:
            return taker == ci
        return taker is not None or d.id in self.allocated

    def _add(self, ci: int, alt: Alternative, d: Device) -> str | None:
        """Take ``d`` for ``alt`` (upstream's ``allocateDevice`` once the device is free and
        selectable): None, or why not - ``NO_COUNTERS`` (its pool's shared counters would run out),
        ``TAINTED`` (checked before the constraints), ``CONSTRAINT`` or ``NO_CAPACITY`` (what is
        left of its capacity, checked last). "All" fails on all but the third without an error,
        and raises on the third.

        With DRAConsumableCapacity a multi-allocatable device is not taken but shared: it stays
        free for other requests, the share records what it consumes, and only its first share (in
        the cluster or this search) charges its counters."""
        cs = self._claims[ci]
        multi = self.consumable and d.multi
        pick = Pick(alt, d, self._allocating.get(d.id))
        if self.partitionable and d.consumes and not (multi and self._has_share(d.id)):
            if not self._charge_counters(d):
                return NO_COUNTERS
            pick.counters = True
        if self.taints and d.taints and taint_prevents_allocation(d, alt.tolerations):
            self._release(pick)
            return TAINTED
        added: list[Constraint] = []
        for c in cs.constraints:
            if c.covers(alt):
                if not c.add(d):
                    for a in reversed(added):
                        a.remove()
                    self._release(pick)
                    return CONSTRAINT
                added.append(c)
        if self.consumable:
            if not self._capacity_fits(d, cs.label, alt, "rechecking"):
                for a in reversed(added):
                    a.remove()
                self._release(pick)
                return NO_CAPACITY
            if multi:
                try:
                    pick.share = consumed(alt.capacity_requests, d.capacities, self.fractional)
                except CapacityError as exc:
                    raise AllocationError(f"claim {cs.label}, request {alt.own_name}: computing consumed capacity "
                                          f"for device {d.driver}/{d.pool}/{d.name}: {exc}") from None
                self._shares[d.id] += 1
                total = self._share_capacity.setdefault(d.id, {})
                for name, q in pick.share.items():
                    total[name] = total.get(name, Fraction(0)) + q.value
        if not multi:
            self._allocating[d.id] = ci
            pick.marked = True
        cs.results.append(pick)
        return None

    def _remove(self, ci: int, alt: Alternative, d: Device) -> None:
        cs = self._claims[ci]
        pick = cs.results.pop()
        if pick.marked:
            if pick.taken_from is None:
                del self._allocating[d.id]
            else:
                self._allocating[d.id] = pick.taken_from   # an admin request shared a device another claim took
        for c in reversed(cs.constraints):
            if c.covers(alt):
                c.remove()
        self._release(pick)

    def _release(self, pick: Pick) -> None:
        """Undo what ``_add`` charged for ``pick`` beyond the result itself."""
        if pick.share is not None:
            d = pick.device.id
            self._shares[d] -= 1
            total = self._share_capacity[d]
            for name, q in pick.share.items():
                total[name] -= q.value
            if not self._shares[d]:
                del self._shares[d]
                del self._share_capacity[d]
            pick.share = None
        if pick.counters:
            self._uncharge_counters(pick.device)
            pick.counters = False

    def _has_share(self, d: DeviceID) -> bool:
        """Some claim in the cluster or of this search shares the device (``deviceCapacityInUse``)."""
        return self.shared.has_share(d) or d in self._shares

    # counters (DRAPartitionableDevices) -------------------------------------------------------

    def _charge_counters(self, d: Device) -> bool:
        """Charge ``d``'s counters to its pool; False (and nothing charged) when some counter of
        the pool would then be consumed past what is available (upstream's
        ``checkAvailableCounters``: every counter of every set is checked, so a pool already
        overdrawn by allocated devices takes no further counter-consuming device)."""
        pool = self._pool_of[d.id]
        available = self._available_counters(pool)
        consumed = self._consumed.setdefault(pool.id, {})
        for set_name, counters in d.consumes:
            mine = consumed.setdefault(set_name, {})
            for name, amount in counters.items():
                mine[name] = mine.get(name, Fraction(0)) + amount
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, amount in counters.items():
                if amount < used.get(name, 0):
                    self._uncharge_counters(d)
                    return False
        return True

    def _uncharge_counters(self, d: Device) -> None:
        consumed = self._consumed[self._pool_of[d.id].id]
        for set_name, counters in d.consumes:
            mine = consumed[set_name]
            for name, amount in counters.items():
                mine[name] -= amount

    def _available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        """The pool's counter sets less the counters its allocated devices consume (those of the
        node's slices and of the pool's other slices; an amount may go negative)."""
        out = self._available.get(pool.id)
        if out is None:
            out = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for d in [*pool.devices, *pool.other_devices]:
                if not d.consumes or not self._is_allocated(d):
                    continue
                for set_name, counters in d.consumes:
                    have = out.get(set_name)
                    if have is None:
                        continue
                    for name, amount in counters.items():
                        if name in have:
                            have[name] -= amount
            self._available[pool.id] = out
        return out

    def _is_allocated(self, d: Device) -> bool:
        """Some claim in the cluster holds ``d`` or a share of it (persisted or in flight):
        ``IsDeviceAllocated``."""
        return d.id in self.allocated or self.shared.has_share(d.id)

    # result -----------------------------------------------------------------------------------

    def _result(self, cs: ClaimState, node_name: str) -> dict[str, Any]:
        results = []
        for pick in cs.results:
            alt, d = pick.alt, pick.device
            r: dict[str, Any] = {"request": alt.result_name, "driver": d.driver, "pool": d.pool, "device": d.name}
            if alt.admin:
                r["adminAccess"] = True
            if self.index.binding_conditions:
                for key in ("bindingConditions", "bindingFailureConditions"):
                    if d.raw.get(key):
                        r[key] = list(d.raw[key])
            if self.taints and alt.tolerations:
                r["tolerations"] = alt.tolerations   # the request's, as upstream copies them
            if pick.share is not None:
                # upstream's share ID is a random UUID (uuid.NewUUID: version 4) per share
                r["shareID"] = str(uuid.uuid4())
                if pick.share:
                    r["consumedCapacity"] = {name: str(q) for name, q in pick.share.items()}
            results.append(r)
        config: list[dict[str, Any]] = []
        class_entries: dict[str, list[dict[str, Any]]] = {}
        for req in cs.requests:
            alt = cs.chosen[req.name]
            entries = class_entries.get(alt.class_name)
            if entries is not None:
                for e in entries:
                    e["requests"].append(alt.result_name)
                continue
            entries = []
            for c in (self.classes[alt.class_name].get("spec") or {}).get("config") or ():
                e = {"source": FROM_CLASS, "requests": [alt.result_name], "opaque": c.get("opaque")}
                entries.append(e)
                config.append(e)
            class_entries[alt.class_name] = entries
        spec_config = ((cs.claim.get("spec") or {}).get("devices") or {}).get("config") or ()
        for c in spec_config:
            names = list(c.get("requests") or ())
            entry = {"source": FROM_CLAIM, "opaque": c.get("opaque")}
            if names:
                entry["requests"] = names
            if not names:
                config.append(entry)
                continue
            for req in cs.requests:
                alt = cs.chosen[req.name]
                if req.name in names or (alt.result_name != req.name and alt.result_name in names):
                    config.append(dict(entry))
                    if self.kube_version >= (1, 37):
                        break
        if self.kube_version >= (1, 37):
            for e in config:
                named = e.get("requests")
                if named and all(req.name in named or cs.chosen[req.name].result_name in named
                                 for req in cs.requests):
                    e["requests"] = None
        out: dict[str, Any] = {"devices": {"results": results}}
        if config:
            out["devices"]["config"] = [{k: v for k, v in e.items() if v is not None} for e in config]
        claim_name = (cs.claim.get("metadata") or {}).get("name", "")
        selector = _node_selector([pick.device for pick in cs.results], node_name, claim_name,
                                  self.index.binding_conditions)
        if selector is not None:
            out["nodeSelector"] = selector
        return out


def _node_selector(devices: list[Device], node_name: str, claim_name: str,
                   binds_to_node: bool = False) -> dict[str, Any] | None:
    if any(d.node_local or (binds_to_node and d.raw.get("bindsToNode")) for d in devices):
        return {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    fields: list[dict[str, Any]] = []
    exprs: list[dict[str, Any]] = []
    for d in devices:
        if not d.node_selector:
            continue
        terms = d.node_selector.get("nodeSelectorTerms") or []
        if len(terms) != 1:
            raise AllocationError(f"create NodeSelector for claim {claim_name}: unsupported ResourceSlice.NodeSelector "
                                  f"with {len(terms)} terms")
        for req in terms[0].get("matchFields") or ():
            if req not in fields:
                fields.append(req)
        for req in terms[0].get("matchExpressions") or ():
            if req not in exprs:
                exprs.append(req)
    if not fields and not exprs:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}
