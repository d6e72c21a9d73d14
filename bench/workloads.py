"""Benchmark workloads: which nodes to create and which init and measured pods to schedule.

Node and pod shapes follow scheduler_perf's templates (``node-default.yaml``: 4 CPU, 32Gi, 110
pods; ``pod-default.yaml``: one pause container, 100m / 500Mi) with zone and instance-type labels
on every node. A workload is data plus two builder functions; the same pods (only
``schedulerName`` differs) go to every scheduler under test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pysched_dev.testkit import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
GPU = "nvidia.com/gpu"
ZONES = ("zone-a", "zone-b", "zone-c")
PHASE_LABEL = "bench.pysched.io/phase"
NAMESPACE = "bench"


def default_node(i: int) -> dict:
    return make_node(f"node-{i:05d}", labels={ZONE: ZONES[i % len(ZONES)], INSTANCE_TYPE: "m5.xlarge"})


def default_pod(i: int, scheduler: str, phase: str) -> dict:
    return make_pod(f"{phase}-{i:05d}", namespace=NAMESPACE, scheduler=scheduler, labels={PHASE_LABEL: phase})


# -- node affinity -----------------------------------------------------------------------------

def affinity_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    if phase == "measure":
        pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}]}]}}}
    return pod


# -- taints and tolerations --------------------------------------------------------------------

def tainted_node(i: int) -> dict:
    node = default_node(i)
    if i % 2 == 0:
        node["spec"]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    elif i % 4 == 1:
        node["spec"]["taints"] = [{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}]
    return node


def toleration_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    if i % 2 == 0:
        pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch",
                                       "effect": "NoSchedule"}]
    return pod


# -- topology spread ---------------------------------------------------------------------------

def spread_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    if phase == "measure":
        pod["metadata"]["labels"]["app"] = "spread"
        pod["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]
    return pod


# -- GPU and spot mix --------------------------------------------------------------------------

def gpu_spot_node(i: int) -> dict:
    zone = ZONES[i % len(ZONES)]
    if i % 10 == 0:
        return make_node(f"node-{i:05d}", cpu="32", memory="256Gi", extended={GPU: "8"},
                         labels={ZONE: zone, INSTANCE_TYPE: "p4d.24xlarge", CAPACITY_TYPE: "on-demand"},
                         taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"}])
    if i % 10 < 5:
        return make_node(f"node-{i:05d}", labels={ZONE: zone, INSTANCE_TYPE: "m5.xlarge", CAPACITY_TYPE: "spot"},
                         taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}])
    return make_node(f"node-{i:05d}", labels={ZONE: zone, INSTANCE_TYPE: "m5.xlarge", CAPACITY_TYPE: "on-demand"})


def gpu_spot_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    kind = i % 10
    if kind == 0:      # a training pod: 1 or 2 GPUs, tolerates the GPU taint
        pod = make_pod(pod["metadata"]["name"], namespace=NAMESPACE, scheduler=scheduler, cpu="2", memory="8Gi",
                       extended={GPU: str(1 + (i // 10) % 2)}, labels={PHASE_LABEL: phase},
                       tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}])
    elif kind < 5:     # interruptible work: prefers spot, tolerates it
        pod["metadata"]["labels"]["lifecycle-preference"] = "spot"
        pod["spec"]["tolerations"] = [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    elif kind == 5:    # must stay on on-demand capacity
        pod["spec"]["nodeSelector"] = {CAPACITY_TYPE: "on-demand"}
    return pod


# -- pod anti-affinity -------------------------------------------------------------------------

def anti_affinity_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    if phase == "measure":
        pod["metadata"]["labels"]["color"] = "green"
        pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


# -- gangs (PodGroups) ---------------------------------------------------------------------------

GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def gang_node(i: int) -> dict:
    """An 8-GPU node; CPU and memory never the limit for the gang pods."""
    return make_node(f"node-{i:05d}", cpu="64", memory="512Gi", extended={GPU: "8"},
                     labels={ZONE: ZONES[i % len(ZONES)], INSTANCE_TYPE: "p4d.24xlarge"})


def gang_group(i: int, size: int) -> str:
    return f"gang-{i // size:04d}"


def make_gang_pod(size: int) -> Callable[[int, str, str], dict]:
    """Measured pod ``i`` is member ``i % size`` of group ``i // size`` and takes one GPU; init pods
    are plain default pods."""
    def pod(i: int, scheduler: str, phase: str) -> dict:
        if phase != "measure":
            return default_pod(i, scheduler, phase)
        group = gang_group(i, size)
        return make_pod(f"measure-{group}-{i % size}", namespace=NAMESPACE, scheduler=scheduler, cpu="1",
                        memory="1Gi", extended={GPU: "1"}, labels={PHASE_LABEL: phase, GANG_LABEL: group})
    return pod


def podgroups(workload: Workload) -> list[dict]:
    """The PodGroups of the measured pods (minMember = the group size)."""
    size = workload.gang_size
    return [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": gang_group(g * size, size), "namespace": NAMESPACE},
             "spec": {"minMember": size, "scheduleTimeoutSeconds": 30}}
            for g in range(workload.measure_pods // size)]


def no_prelude() -> list[tuple[str, dict]]: return []


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    node: Callable[[int], dict] = default_node
    pod: Callable[[int, str, str], dict] = default_pod
    description: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    gang_size: int = 0        # > 0: measured pods form PodGroups of this size (pysched runs Coscheduling)
    gpus_per_node: int = 0    # gang workloads: how many GPUs each node has (each member takes one)
    prelude: Callable[[], list[tuple[str, dict]]] = no_prelude

    def scaled(self, nodes: int, init_pods: int, measure_pods: int) -> Workload:
        return replace(self, nodes=nodes, init_pods=init_pods, measure_pods=measure_pods)

    @property
    def groups(self) -> int:
        return self.measure_pods // self.gang_size if self.gang_size else 0

    @property
    def fitting_groups(self) -> int:
        """Gang workloads: how many whole groups the nodes' GPUs hold."""
        return min(self.groups, self.nodes * self.gpus_per_node // self.gang_size) if self.gang_size else 0

    @property
    def expected_bound(self) -> int:
        """Measured pods that a correct scheduler binds: all, or for gangs only whole fitting groups."""
        return self.fitting_groups * self.gang_size if self.gang_size else self.measure_pods


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("SchedulingBasic/500Nodes", 500, 500, 1000,
             description="default pods (100m, 500Mi) on plain nodes"),
    Workload("SchedulingBasic/5000Nodes_10000Pods", 5000, 1000, 10000,
             description="default pods on 5,000 plain nodes", tags=("large",)),
    Workload("SchedulingNodeAffinity/1000Nodes", 1000, 1000, 2000, node=default_node, pod=affinity_pod,
             description="required node affinity zone In [zone-a, zone-b]"),
    Workload("SchedulingTaintsTolerations/1000Nodes", 1000, 1000, 2000, node=tainted_node, pod=toleration_pod,
             description="half the nodes NoSchedule-tainted, a quarter PreferNoSchedule; half the pods tolerate"),
    Workload("TopologySpreading/1000Nodes", 1000, 1000, 2000, pod=spread_pod,
             description="maxSkew 5 over 3 zones, DoNotSchedule"),
    Workload("SchedulingGPUSpotMix/1000Nodes", 1000, 1000, 2000, node=gpu_spot_node, pod=gpu_spot_pod,
             description="10% tainted 8-GPU nodes, 40% tainted spot nodes; GPU, spot-tolerant and on-demand pods"),
    Workload("SchedulingPodAntiAffinity/2000Nodes", 2000, 1000, 1000, pod=anti_affinity_pod,
             description="1,000 pods with required anti-affinity to each other on hostname"),
    Workload("GangScheduling/100Nodes_150Groups", 100, 100, 1200, node=gang_node, pod=make_gang_pod(8),
             gang_size=8, gpus_per_node=8, tags=("gang",),
             description="150 PodGroups of 8 one-GPU pods onto 100 8-GPU nodes that hold 100 groups; pysched "
                         "with Coscheduling, kube-scheduler without gang semantics (reference only)"),
)}

SMOKE = Workload("Smoke/GPUSpotMix", 10, 4, 16, node=gpu_spot_node, pod=gpu_spot_pod,
                 description="tiny run for make test")
