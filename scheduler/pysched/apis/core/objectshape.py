"""JSON types of the Pod and Node fields pysched reads, checked for objects that bypassed an API server.

Objects from the API server's watch always have the types of the Go structs, so the informer path
parses them without checks. Objects from elsewhere - an extender request body, a snapshot file -
may hold anything: ``"containers": 5``, ``"labels": []``, ``"hostPort": "80"``. ``pod_problem`` and
``node_problem`` walk the fields our parsers and plugins read (``PodInfo.from_dict``,
``NodeSpec.from_dict``, ``resources``, ``podaffinity``, ``PodTopologySpread``, the pod fields
NodeDeclaredFeatures infers requirements from) and name the first one whose JSON type is wrong,
as Go's decoder would refuse it::

    spec.containers[0].resources.requests: expected an object, got list

Rules, after ``encoding/json`` into the v1 types: ``null`` anywhere means "absent"; integers must
be JSON integers within the Go field's range (int32/int64); quantities are strings or numbers that
parse as a Kubernetes quantity; a list item or a map value may not be ``null`` (our parsers would
have to invent a zero value; nothing real sends one). Fields we do not read are not looked at.

Where plugins do arithmetic with a value, the API server's range for it is checked too - resource
amounts >= 0, preferred-term weights 1-100, ``maxSkew``/``minDomains`` > 0 - since a value the
API server would refuse could otherwise only surface as an out-of-range score.
"""

from __future__ import annotations

from typing import Any

from pysched.apis.core.quantity import QuantityError, parse_quantity

STR, BOOL, INT32, INT64, OBJECT = "string", "bool", "int32", "int64", "object"
QUANTITY = "quantity"   # a resource amount: the API server also requires it to be >= 0
_INT_RANGE = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}
_EXPECTED = {STR: "a string", BOOL: "true or false", INT32: "an integer", INT64: "an integer",
             QUANTITY: "a quantity (string or number)", OBJECT: "an object"}



class IntIn:
    """An integer field (``bits``: the Go type) in the range the API server enforces; ``problem`` is
    the API server's words for a value outside it. Plugins do arithmetic with these."""
    __slots__ = ("bits", "lo", "hi", "problem")

    def __init__(self, bits: int, lo: int, hi: int, problem: str) -> None:
        self.bits, self.lo, self.hi, self.problem = bits, lo, hi, problem


class MapOf:
    """A JSON object with free keys whose values all have one shape (labels, resource lists)."""
    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _short(v: Any, limit: int = 64) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _expected(shape) -> str:
    if isinstance(shape, dict):
        return "an object"
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, MapOf):
        return "an object"
    if isinstance(shape, IntIn):
        return "an integer"
    return _EXPECTED[shape]


def _problem(v: Any, shape, where: str) -> str | None:
    """The first wrong type under ``v`` (``where`` names ``v``), or None. ``v`` is not None."""
    if isinstance(shape, dict):
        if type(v) is not dict:
            return f"{where or 'object'}: expected an object, got {json_kind(v)}"
        for key, sub in shape.items():
            child = v.get(key)
            if child is not None:
                p = _problem(child, sub, f"{where}.{key}" if where else key)
                if p:
                    return p
        return None
    if isinstance(shape, list):
        if type(v) is not list:
            return f"{where}: expected a list, got {json_kind(v)}"
        item = shape[0]
        for i, child in enumerate(v):
            if child is None:
                return f"{where}[{i}]: expected {_expected(item)}, got null"
            p = _problem(child, item, f"{where}[{i}]")
            if p:
                return p
        return None
    if isinstance(shape, MapOf):
        if type(v) is not dict:
            return f"{where}: expected an object, got {json_kind(v)}"
        for key, child in v.items():
            if child is None:
                return f"{where}[{key}]: expected {_expected(shape.value)}, got null"
            p = _problem(child, shape.value, f"{where}[{key}]")
            if p:
                return p
        return None
    if shape is STR:
        return None if type(v) is str else f"{where}: expected a string, got {json_kind(v)}"
    if shape is BOOL:
        return None if type(v) is bool else f"{where}: expected true or false, got {json_kind(v)}"
    if shape is OBJECT:
        return None if type(v) is dict else f"{where}: expected an object, got {json_kind(v)}"
    if shape is INT32 or shape is INT64:
        if type(v) is not int:
            return f"{where}: expected an integer, got {json_kind(v)}"
        lo, hi = _INT_RANGE[shape]
        return None if lo <= v <= hi else f"{where}: {v} is out of range for {shape}"
    if isinstance(shape, IntIn):
        if type(v) is not int:
            return f"{where}: expected an integer, got {json_kind(v)}"
        return None if shape.lo <= v <= shape.hi else f"{where}: Invalid value: {v}: {shape.problem}"
    if shape is QUANTITY:
        if type(v) not in (str, int, float):
            return f"{where}: expected a quantity (string or number), got {json_kind(v)}"
        try:
            amount = parse_quantity(v)
        except QuantityError:
            return f"{where}: invalid quantity {_short(v)}"
        return None if amount >= 0 else f"{where}: Invalid value: {_short(v)}: must be greater than or equal to 0"
    raise AssertionError(f"unknown shape {shape!r}")


def problem(v: Any, shape, where: str) -> str | None:
    """Like ``_problem`` but ``None`` is accepted (an absent value)."""
    return None if v is None else _problem(v, shape, where)


# -- the shapes -------------------------------------------------------------------------------

WEIGHT = IntIn(32, 1, 100, "must be in the range 1-100")
POSITIVE32 = IntIn(32, 1, 2**31 - 1, "must be greater than zero")

RESOURCE_LIST = MapOf(QUANTITY)
RESOURCES = {"requests": RESOURCE_LIST, "limits": RESOURCE_LIST}
REQUIREMENT = {"key": STR, "operator": STR, "values": [STR]}
LABEL_SELECTOR = {"matchLabels": MapOf(STR), "matchExpressions": [REQUIREMENT]}
NODE_SELECTOR_TERM = {"matchExpressions": [REQUIREMENT], "matchFields": [REQUIREMENT]}
POD_AFFINITY_TERM = {"labelSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR, "namespaces": [STR],
                     "topologyKey": STR, "matchLabelKeys": [STR], "mismatchLabelKeys": [STR]}
POD_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": WEIGHT, "podAffinityTerm": POD_AFFINITY_TERM}],
}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [NODE_SELECTOR_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": WEIGHT, "preference": NODE_SELECTOR_TERM}],
    },
    "podAffinity": POD_AFFINITY,
    "podAntiAffinity": POD_AFFINITY,
}
VOLUME_MOUNTS = [{"bindMountOptions": [STR]}]
CONTAINER = {"name": STR, "image": STR, "restartPolicy": STR, "resources": RESOURCES,
             "ports": [{"name": STR, "containerPort": INT32, "hostPort": INT32, "hostIP": STR, "protocol": STR}],
             "restartPolicyRules": [{"action": STR}], "volumeMounts": VOLUME_MOUNTS}
CONTAINER_STATUS = {"name": STR, "resources": RESOURCES, "allocatedResources": RESOURCE_LIST}
POD = {
    "metadata": {
        "name": STR, "namespace": STR, "uid": STR, "resourceVersion": STR, "generation": INT64,
        "creationTimestamp": STR, "deletionTimestamp": STR, "labels": MapOf(STR), "annotations": MapOf(STR),
        "ownerReferences": [{"apiVersion": STR, "kind": STR, "name": STR, "uid": STR, "controller": BOOL}],
    },
    "spec": {
        "schedulerName": STR, "nodeName": STR, "priority": INT32, "priorityClassName": STR,
        "containers": [CONTAINER], "initContainers": [CONTAINER], "resources": RESOURCES,
        "ephemeralContainers": [{"volumeMounts": VOLUME_MOUNTS}], "hostNetwork": BOOL, "hostUsers": BOOL,
        "overhead": RESOURCE_LIST, "nodeSelector": MapOf(STR), "affinity": AFFINITY,
        "tolerations": [{"key": STR, "operator": STR, "value": STR, "effect": STR, "tolerationSeconds": INT64}],
        "schedulingGates": [{"name": STR}],
        "topologySpreadConstraints": [{
            "maxSkew": POSITIVE32, "topologyKey": STR, "whenUnsatisfiable": STR, "labelSelector": LABEL_SELECTOR,
            "minDomains": POSITIVE32, "nodeAffinityPolicy": STR, "nodeTaintsPolicy": STR, "matchLabelKeys": [STR]}],
        "volumes": [{"name": STR, "persistentVolumeClaim": {"claimName": STR, "readOnly": BOOL}, "ephemeral": OBJECT,
                     "image": {"reference": STR}}],
        "resourceClaims": [OBJECT],
    },
    "status": {
        "phase": STR, "nominatedNodeName": STR,
        "conditions": [{"type": STR, "status": STR, "reason": STR, "message": STR}],
        "containerStatuses": [CONTAINER_STATUS], "initContainerStatuses": [CONTAINER_STATUS],
        "resources": RESOURCES, "allocatedResources": RESOURCE_LIST,
    },
}
NODE = {
    "metadata": {"name": STR, "uid": STR, "resourceVersion": STR, "labels": MapOf(STR)},
    "spec": {"taints": [{"key": STR, "value": STR, "effect": STR}], "unschedulable": BOOL},
    "status": {"allocatable": RESOURCE_LIST, "images": [{"names": [STR], "sizeBytes": INT64}],
               "declaredFeatures": [STR]},
}


def pod_problem(obj: Any, where: str = "") -> str | None:
    """The first Pod field pysched reads whose JSON type is wrong; ``where`` names the pod in the
    message (``ExtenderArgs.Pod.spec...``), without it the path starts at the pod (``spec...``)."""
    return _problem(obj, POD, where)


def node_problem(obj: Any, where: str = "") -> str | None:
    """The first Node field pysched reads whose JSON type is wrong (paths as ``pod_problem``)."""
    return _problem(obj, NODE, where)
