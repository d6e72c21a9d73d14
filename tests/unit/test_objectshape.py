"""Wrong JSON types in Pods and Nodes: the first one is named, and the parsers never raise."""

import pytest

from pysched.apis.core.objectshape import node_problem, pod_problem
from pysched.apis.core.quantity import MAX_AMOUNT
from pysched.apis.core.resources import pod_resource
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo

from .conftest import node, pod


def _set(obj, path, value):
    *parents, last = path
    for k in parents:
        obj = obj.setdefault(k, {}) if isinstance(obj, dict) else obj[k]
    obj[last] = value


@pytest.mark.parametrize("path,value,message", [
    (("spec", "containers", 0, "resources", "requests"), [],
     "spec.containers[0].resources.requests: expected an object, got list"),
    (("spec", "containers"), 5, "spec.containers: expected a list, got number"),
    (("spec", "containers", 0), None, "spec.containers[0]: expected an object, got null"),
    (("spec", "containers", 0, "resources", "requests", "cpu"), True,
     "spec.containers[0].resources.requests[cpu]: expected a quantity"),
    (("spec", "containers", 0, "resources", "requests", "cpu"), "lots",
     "spec.containers[0].resources.requests[cpu]: invalid quantity 'lots'"),
    (("spec", "tolerations"), [{"key": 1}], "spec.tolerations[0].key: expected a string, got number"),
    (("spec", "priority"), 1.5, "spec.priority: expected an integer, got number"),
    (("spec", "priority"), 2**31, "spec.priority: 2147483648 is out of range for int32"),
    (("spec", "affinity"), {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: expected an object, got list"),
    (("spec", "topologySpreadConstraints"), [{"maxSkew": "1"}],
     "spec.topologySpreadConstraints[0].maxSkew: expected an integer"),
    (("metadata", "ownerReferences"), "x", "metadata.ownerReferences: expected a list, got string"),
    (("metadata", "labels"), {"a": 1}, "metadata.labels[a]: expected a string, got number"),
    (("status", "conditions"), [[]], "status.conditions[0]: expected an object, got list"),
])
def test_pod_field_of_the_wrong_type_is_named(path, value, message):
    raw = pod("p", cpu="100m")
    _set(raw, path, value)
    assert pod_problem(raw) == message or pod_problem(raw).startswith(message)
    assert pod_problem(raw, "ExtenderArgs.Pod").startswith("ExtenderArgs.Pod." + message.split(":")[0])


@pytest.mark.parametrize("path,value", [
    (("spec", "containers", 0, "resources"), "x"),
    (("spec", "containers", 0, "ports"), [{"hostPort": "80"}]),
    (("spec", "tolerations"), [5]),
    (("spec", "volumes"), [{"persistentVolumeClaim": "c"}]),
    (("metadata", "ownerReferences"), [[]]),
    (("spec", "affinity"), {"podAffinity": "x"}),
    (("spec", "affinity"), {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}),
])
def test_podinfo_never_raises_and_names_the_field(path, value):
    raw = pod("p", cpu="100m")
    _set(raw, path, value)
    info = PodInfo.from_dict(raw)
    assert info.parse_error == pod_problem(raw)
    assert info.key == "default/p" and info.requests == {}


def test_well_typed_objects_have_no_problem():
    assert pod_problem(pod("p", cpu="1", tolerations=[{"key": "k", "operator": "Exists"}],
                           affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                               {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}})) is None
    assert node_problem(node("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])) is None


NODE_CASES = [
    (("spec", "taints"), [5], "spec.taints[0]: expected an object, got number"),
    (("status", "allocatable"), ["cpu"], "status.allocatable: expected an object, got list"),
    (("status", "images"), [{"names": 5, "sizeBytes": 1}], "status.images[0].names: expected a list, got number"),
    (("metadata",), "n1", "metadata: expected an object, got string"),
]


@pytest.mark.parametrize("path,value,message", NODE_CASES + [
    # wrong, though the parser would not trip over them: only a checked path (the extender) sees them
    (("spec", "taints"), [{"effect": 3}], "spec.taints[0].effect: expected a string, got number"),
    (("spec", "unschedulable"), "yes", "spec.unschedulable: expected true or false, got string"),
    (("status", "images"), [{"names": ["i"], "sizeBytes": 2**63}],
     "status.images[0].sizeBytes: 9223372036854775808 is out of range"),
])
def test_node_field_of_the_wrong_type_is_named(path, value, message):
    raw = node("n1")
    _set(raw, path, value)
    assert node_problem(raw).startswith(message)


@pytest.mark.parametrize("path,value,message", NODE_CASES)
def test_nodespec_never_raises_and_names_the_field(path, value, message):
    raw = node("n1")
    _set(raw, path, value)
    spec = NodeSpec.from_dict(raw)
    assert spec.parse_error == message and spec.allocatable == {}


def test_pod_totals_saturate_at_int64():
    raw = pod("p", cpu="1E", memory="8Ei")
    raw["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "1E", "memory": "8Ei"}}})
    reqs, non0_cpu, non0_mem = pod_resource(raw["spec"])
    assert reqs == {"cpu": MAX_AMOUNT, "memory": MAX_AMOUNT} and (non0_cpu, non0_mem) == (MAX_AMOUNT, MAX_AMOUNT)
