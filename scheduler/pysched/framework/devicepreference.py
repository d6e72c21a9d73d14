"""Device preference: how a plugin steers which DRA devices a pod gets on a node.

The DynamicResources allocator tries a node's candidate devices in its own order (pools by driver
and pool name, slices by name, devices as their slice lists them) and keeps the first complete
answer. A plugin that knows better which device a pod should get - GPUShare, which scores GPUs with
a packing or fragmentation policy - writes a ``DevicePreference`` into the pod's ``CycleState``
under ``DEVICE_PREFERENCE_KEY`` (at PreFilter); the allocator, when the key is there, asks it per
node for an order and tries the devices it names first (``reorder``), and DynamicResources tells it
at Reserve which allocation each claim got. Without the key the allocator is exactly upstream's.

The contract lives here, in the framework, so neither plugin imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

#: The CycleState key a ``DevicePreference`` is written under.
DEVICE_PREFERENCE_KEY = "pysched/device-preference"

#: A device as the allocator names it: (driver, pool, device).
DeviceID = tuple[str, str, str]

T = TypeVar("T")


@runtime_checkable
class DevicePreference(Protocol):
    def order(self, node_name: str, devices: Sequence[DeviceID]) -> Sequence[int] | None:
        """The positions, in ``devices`` (the node's candidates in the allocator's order), of the
        devices to try first, most preferred first; None or empty: no preference on this node.
        The named devices are tried first, in the order given, then the others in the allocator's
        order. Called for every node the allocator searches (Filter), and again at
        Reserve for a node no Filter call judged: answer the same for the same cycle and node."""
        ...

    def allocated(self, node_name: str, claim_uid: str, allocation: Mapping[str, Any]) -> None:
        """Reserve gave the pod's claim ``claim_uid`` the allocation ``allocation`` (its
        ``status.allocation``: ``devices.results`` with driver, pool, device and, for a share of a
        multi-allocatable device, ``consumedCapacity``) on ``node_name``. Called once per claim the
        pod's Reserve allocates (not for claims allocated already)."""
        ...


def reorder(items: Sequence[T], positions: Sequence[int] | None) -> list[T]:
    """The items at ``positions`` first, in that order, then the others in their own order (what
    one request may take keeps its order but for the preferred devices). Out-of-range and repeated
    positions are ignored."""
    if not positions:
        return list(items)
    chosen: list[int] = []
    for p in positions:
        if 0 <= p < len(items) and p not in chosen:
            chosen.append(p)
    taken = set(chosen)
    return [items[p] for p in chosen] + [x for i, x in enumerate(items) if i not in taken]
