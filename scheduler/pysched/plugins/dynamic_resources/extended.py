"""Extended resources backed by DRA (kube-scheduler's DRAExtendedResource gate: beta and on in 1.36,
GA in 1.37): a pod asks for ``example.com/gpu: 2`` in its containers' ``resources.requests`` and,
on a node that does not advertise that resource in its allocatable (allocatable 0: no device
plugin there), the devices come from DRA instead.

* **The mapping** (``pysched.plugins.helper.dra_extended``, upstream's ``ExtendedResourceCache``,
  shared with NodeResourcesFit): a DeviceClass backs the extended resource named in its
  ``spec.extendedResourceName`` and the implicit ``deviceclass.resource.kubernetes.io/<class name>``.
* **The requests** (``requests_and_mappings``, upstream's ``createRequestsAndMappings``): for each
  resource to allocate through DRA (sorted by name), one request per container that asks for it
  (init containers first, then the containers), named ``container-<index>-request-<index of the
  resource among the container's sorted request names>``, ``exactly`` ``count`` devices of the
  class; an init container that runs to completion first reuses the devices of the long-lived
  containers after it, and only the largest of those short-lived requests is kept. The requests
  are sorted by name. The mappings (container, resource, request) go to the pod's
  ``status.extendedResourceClaimStatus``.
* **The special claim** (``special_claim``): one per pod, for all such resources, held in memory
  under the name ``<extended-resources>`` until PreBind creates it with ``generateName:
  <pod>-extended-resources-``, the annotation ``resource.kubernetes.io/extended-resource-claim:
  "true"`` and the pod as its controller owner (``find_special_claim`` finds one a prior cycle
  created).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from pysched.framework.api import parse_quantity
from pysched.plugins.helper.dra_extended import (
    DEVICE_CLASS_PREFIX,
    ExtendedResourceClasses,
    backed_requests,
    classes_for,
    is_dra_extended_resource_name,
)

__all__ = ["ANNOTATION", "DEVICE_CLASS_PREFIX", "SPECIAL_NAME", "ExtendedResourceClasses", "backed_requests",
           "classes_for", "find_special_claim", "is_dra_extended_resource_name", "requests_and_mappings",
           "special_claim"]

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"   # ExtendedResourceClaimAnnotation
SPECIAL_NAME = "<extended-resources>"                          # specialClaimInMemName
INT64_MAX = 2**63 - 1


def find_special_claim(pod_name: str, pod_uid: str, claims: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """A claim annotated as the pod's extended resource claim, the pod its controller
    (``findExtendedResourceClaim``)."""
    for c in claims:
        meta = c.get("metadata") or {}
        if (meta.get("annotations") or {}).get(ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or ():
            if ref.get("name") == pod_name and ref.get("controller") and ref.get("uid") == pod_uid:
                return c
    return None


def special_claim(namespace: str, pod_name: str, pod_uid: str,
                  new_uid: Callable[[], str] | None = None) -> dict[str, Any]:
    """The in-memory claim for a pod's extended resources: no requests yet, a temporary uid."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": SPECIAL_NAME,
                         "uid": (new_uid or (lambda: str(uuid.uuid4())))(),
                         "generateName": f"{pod_name}-extended-resources-",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid,
                                              "controller": True}],
                         "annotations": {ANNOTATION: "true"}},
            "spec": {}}


def _int64(text: Any) -> int | None:
    """``Quantity.AsInt64``: the value when it is a whole number that fits, else None."""
    try:
        v: Fraction = parse_quantity(text)
    except (ValueError, TypeError, ZeroDivisionError):
        return None
    if v.denominator != 1 or not -INT64_MAX - 1 <= v.numerator <= INT64_MAX:
        return None
    return int(v.numerator)


def _container_request(index: int, container: dict[str, Any], resource: str, class_name: str,
                       reusable: list[dict[str, Any] | None]) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """``createResourceRequestAndMappings``: the request (None if none is needed) and the mappings."""
    creqs = (container.get("resources") or {}).get("requests") or {}
    if resource not in creqs:
        return None, []
    want = _int64(creqs[resource])
    if not want:
        return None, []
    name = container.get("name", "")
    mappings: list[dict[str, str]] = []
    have = 0
    for r in reusable:
        if r is not None:
            have += r["exactly"]["count"]
            mappings.append({"containerName": name, "resourceName": resource, "requestName": r["name"]})
            if have >= want:
                return None, mappings
    ridx = sorted(creqs).index(resource)
    req_name = f"container-{index}-request-{ridx}"
    mappings.append({"containerName": name, "resourceName": resource, "requestName": req_name})
    return ({"name": req_name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                           "count": want - have}}, mappings)


def requests_and_mappings(pod_spec: dict[str, Any], resources: Iterable[str],
                          classes: ExtendedResourceClasses) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The special claim's device requests and the pod's container mappings for ``resources``."""
    inits = list(pod_spec.get("initContainers") or ())
    containers = inits + list(pod_spec.get("containers") or ())
    long_lived, short_lived = [], []
    for i, c in enumerate(containers):
        if i < len(inits) and c.get("restartPolicy") != "Always":
            short_lived.append(i)
        else:
            long_lived.append(i)
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = classes.device_class(resource)
        if cls is None:
            continue
        class_name = (cls.get("metadata") or {}).get("name") or ""
        long_requests: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            req, maps = _container_request(i, containers[i], resource, class_name, [])
            long_requests[i] = req
            long_mappings += maps
        biggest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            req, maps = _container_request(i, containers[i], resource, class_name, long_requests[i:])
            if req is not None:
                short_names.add(req["name"])
                if biggest is None or biggest["exactly"]["count"] < req["exactly"]["count"]:
                    biggest = req
            short_mappings += maps
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest["name"])
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = biggest["name"]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r["name"])
    return requests, mappings
