"""Which DeviceClass backs an extended resource (kube's DRAExtendedResource gate), shared by
DynamicResources, which allocates such a resource through DRA, and NodeResourcesFit, which then
leaves it alone: upstream's ``ExtendedResourceCache``.

A DeviceClass backs the extended resource named in its ``spec.extendedResourceName``, and always
the implicit ``deviceclass.resource.kubernetes.io/<class name>``. When two classes name the same
resource, the newer one takes it (upstream's choice, for migrating from one class to another; same
creation time: the smaller name). Kept from DeviceClass events in the order they arrive, as
upstream's cache is - with its quirks: a class that loses an explicit name does not get its
implicit name either, an update of a class leaves the map as it is when the class already holds its
explicit name, and deleting a class forgets its explicit name whoever holds it. One map per object
store (``classes_for``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from pysched.framework.api import is_extended_resource

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"   # ResourceDeviceClassPrefix
CLASSES = "deviceclasses"


def is_dra_extended_resource_name(name: str) -> bool:
    """An extended resource name, or an implicit one of a DeviceClass (``IsDRAExtendedResourceName``)."""
    return is_extended_resource(name) or name.startswith(DEVICE_CLASS_PREFIX)


def _created(cls: dict[str, Any]) -> str:
    return (cls.get("metadata") or {}).get("creationTimestamp") or ""


def _name(cls: dict[str, Any]) -> str:
    return (cls.get("metadata") or {}).get("name") or ""


def _explicit(cls: dict[str, Any]) -> str | None:
    name = (cls.get("spec") or {}).get("extendedResourceName")
    return name if name else None


class ExtendedResourceClasses:
    """Extended resource name -> the DeviceClass backing it, from DeviceClass events in order."""

    def __init__(self, classes: Iterable[dict[str, Any]] = ()) -> None:
        self._by_resource: dict[str, dict[str, Any]] = {}
        for cls in classes:
            self.add(cls)

    def device_class(self, resource: str) -> dict[str, Any] | None:
        """The class backing ``resource`` (``GetDeviceClass``), or None."""
        return self._by_resource.get(resource)

    def backed(self, resource: str) -> bool:
        return resource in self._by_resource

    def add(self, cls: dict[str, Any]) -> None:
        self._update(cls, None)

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._update(new, old)

    def delete(self, cls: dict[str, Any]) -> None:
        self._by_resource.pop(DEVICE_CLASS_PREFIX + _name(cls), None)
        explicit = _explicit(cls)
        if explicit is not None:
            self._by_resource.pop(explicit, None)

    def _update(self, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        explicit = _explicit(new)
        holder = self._by_resource.get(explicit) if explicit is not None else None
        if holder is not None:
            # The newer class takes the name; at the same time, the smaller name. (Upstream compares
            # creation times in nanoseconds; the API gives them to the second, so text order is
            # time order.)
            if _created(new) < _created(holder):
                return
            if _created(new) == _created(holder) and _name(new) >= _name(holder):
                return
        if old is not None:
            self._by_resource.pop(DEVICE_CLASS_PREFIX + _name(old), None)
            old_explicit = _explicit(old)
            if old_explicit is not None:
                self._by_resource.pop(old_explicit, None)
        if explicit is not None:
            self._by_resource[explicit] = new
        self._by_resource[DEVICE_CLASS_PREFIX + _name(new)] = new

    def on_change(self, kind: str, typ: str | None, old: dict[str, Any] | None, obj: dict[str, Any]) -> None:
        """An ``ObjectLister.subscribe`` listener."""
        if kind != CLASSES:
            return
        if typ == "DELETED":
            self.delete(obj)
        elif old is not None:
            self.update(old, obj)
        else:
            self.add(obj)


_SHARED: weakref.WeakKeyDictionary[Any, ExtendedResourceClasses] = weakref.WeakKeyDictionary()


def classes_for(objects: Any) -> ExtendedResourceClasses:
    """The mapping kept from ``objects``' DeviceClasses, one per object store (created, and
    subscribed to the store's changes, on first use)."""
    try:
        found = _SHARED.get(objects)
    except TypeError:   # not weakly referenceable: a mapping of its own
        found = None
    if found is not None:
        return found
    made = ExtendedResourceClasses(objects.list(CLASSES))
    objects.subscribe(made.on_change)
    try:
        _SHARED[objects] = made
    except TypeError:
        pass
    return made


def backed_requests(requests: Mapping[str, int], classes: ExtendedResourceClasses) -> bool:
    """Whether a non-zero request names an extended resource some DeviceClass backs
    (``hasDeviceClassMappedExtendedResource``)."""
    return any(q and is_dra_extended_resource_name(name) and classes.backed(name) for name, q in requests.items())
