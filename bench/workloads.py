"""Benchmark workloads: which nodes to create and which init and measured pods to schedule.

Node and pod shapes follow scheduler_perf's templates (``node-default.yaml``: 4 CPU, 32Gi, 110
pods; ``pod-default.yaml``: one pause container, 100m / 500Mi) with zone and instance-type labels
on every node. A workload is data plus two builder functions and a prelude (cluster objects such
as PriorityClasses that the driver creates before any scheduler starts); the same pods (only
``schedulerName`` differs) go to every scheduler under test, and every builder is deterministic.
"""

from __future__ import annotations

import random
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


# -- inter-pod affinity -------------------------------------------------------------------------

TEAM_LABEL = "bench.pysched.io/team"
AFFINITY_TEAMS = 30


def team_of(i: int) -> int:
    return i % AFFINITY_TEAMS


def pod_affinity_pod(i: int, scheduler: str, phase: str) -> dict:
    """Every pod is in team ``i % 30``. Init pods of team t are held to zone ``t % 3`` (a
    nodeSelector); a measured pod requires a pod of its team in its zone (so it must go to that
    zone: the InterPodAffinity Filter decides) and prefers (weight 10) a node that already runs one."""
    pod = default_pod(i, scheduler, phase)
    team = f"team-{team_of(i):02d}"
    pod["metadata"]["labels"][TEAM_LABEL] = team
    if phase == "measure":
        selector = {"matchLabels": {TEAM_LABEL: team}}
        pod["spec"]["affinity"] = {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": ZONE}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 10, "podAffinityTerm": {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}}],
        }}
    else:
        pod["spec"]["nodeSelector"] = {ZONE: ZONES[team_of(i) % len(ZONES)]}
    return pod


# -- pod anti-affinity -------------------------------------------------------------------------

def anti_affinity_pod(i: int, scheduler: str, phase: str) -> dict:
    pod = default_pod(i, scheduler, phase)
    if phase == "measure":
        pod["metadata"]["labels"]["color"] = "green"
        pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


# -- pod anti-affinity with many distinct terms ---------------------------------------------------

GROUP_LABEL = "bench.pysched.io/group"
HOSTNAME = "kubernetes.io/hostname"
MANY_TERMS_GROUP_SIZE = 2   # pods of one phase per group: init pod i and measured pod i share group i // 2


def many_terms_group(i: int) -> int:
    return i // MANY_TERMS_GROUP_SIZE


def _group(g: int) -> str:
    return f"g-{g:04d}"


def many_terms_pod(i: int, scheduler: str, phase: str) -> dict:
    """Pod ``i`` of either phase is in group ``g = i // 2`` (so a group has 2 init and 2 measured
    pods) and has required anti-affinity to its own group on the hostname; even pods also prefer
    (weight 50) to stay out of the zones of group g+1, pods with ``i % 4 == 1`` prefer (weight 10)
    the zones of groups g+2 or g+3 (a matchExpressions selector). The selectors name groups that
    may not exist (past the last one): such a term matches no pod, which is harmless."""
    pod = default_pod(i, scheduler, phase)
    g = many_terms_group(i)
    pod["metadata"]["labels"][GROUP_LABEL] = _group(g)
    affinity: dict = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {GROUP_LABEL: _group(g)}}, "topologyKey": HOSTNAME}]}}
    if i % 2 == 0:
        affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [{
            "weight": 50, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {GROUP_LABEL: _group(g + 1)}}, "topologyKey": ZONE}}]
    if i % 4 == 1:
        affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 10, "podAffinityTerm": {
                "labelSelector": {"matchExpressions": [
                    {"key": GROUP_LABEL, "operator": "In", "values": [_group(g + 2), _group(g + 3)]}]},
                "topologyKey": ZONE}}]}
    pod["spec"]["affinity"] = affinity
    return pod


# -- preemption --------------------------------------------------------------------------------

PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
LOW_PRIORITY = ("bench-low", 1)
HIGH_PRIORITY = ("bench-high", 1000)
PREEMPTION_CPU = "900m"     # 4 fill a 4-CPU node (400m left); a measured pod needs one of them gone


def priority_classes() -> list[tuple[str, dict]]:
    return [(PRIORITY_CLASSES_PATH, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                     "metadata": {"name": name}, "value": value,
                                     "description": "pysched benchmark (Preemption workload)"})
            for name, value in (LOW_PRIORITY, HIGH_PRIORITY)]


def preemption_pod(i: int, scheduler: str, phase: str) -> dict:
    """scheduler_perf's pod-low-priority shape (900m / 500Mi, ``terminationGracePeriodSeconds: 0``
    so a victim's delete removes it at once without a kubelet) for both phases: init pods in
    ``bench-low``, measured pods in ``bench-high``. ``spec.priority`` is set to the class's value
    too (the Priority admission plugin accepts a matching value and fills it in if absent; with the
    plugin off, as in scheduler_perf, the explicit value is what counts)."""
    cls, value = HIGH_PRIORITY if phase == "measure" else LOW_PRIORITY
    pod = make_pod(f"{phase}-{i:05d}", namespace=NAMESPACE, scheduler=scheduler, cpu=PREEMPTION_CPU,
                   memory="500Mi", labels={PHASE_LABEL: phase}, priority=value)
    pod["spec"]["priorityClassName"] = cls
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


PDB_LABEL = "bench-pdb"
PDB_PATH = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"


def preemption_pdb_pod(i: int, scheduler: str, phase: str) -> dict:
    """The larger preemption variant: init pods as ``preemption_pod``, every fourth one covered by
    a PodDisruptionBudget that allows no disruption; measured pods of twice the CPU (1800m), so
    each must evict two init pods, and should pick the two no PDB protects."""
    pod = preemption_pod(i, scheduler, phase)
    if phase == "measure":
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1800m"
    elif i % 4 == 0:
        pod["metadata"]["labels"][PDB_LABEL] = "protected"
    return pod


def priority_classes_and_pdb() -> list[tuple]:
    """The PriorityClasses, and a PDB over the protected init pods; its status (no disruption
    controller runs) says no disruption is allowed."""
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "bench-protected", "namespace": NAMESPACE},
           "spec": {"minAvailable": "100%", "selector": {"matchLabels": {PDB_LABEL: "protected"}}}}
    status = {"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
                         "observedGeneration": 1}}
    return [*priority_classes(), (PDB_PATH, pdb, status)]


# -- dynamic resource allocation (DRA) ---------------------------------------------------------

DRA_DRIVER = "gpu.bench.pysched.io"
DRA_CLASS = DRA_DRIVER
DRA_DEVICES_PER_NODE = 4
RESOURCE_API = "/apis/resource.k8s.io/v1"
H100_SELECTOR = f'device.attributes["{DRA_DRIVER}"].model == "h100"'


def dra_prelude() -> list[tuple]:
    """The DeviceClass: every device of the bench driver."""
    return [(f"{RESOURCE_API}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRA_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}})]


def dra_node_objects(i: int) -> list[tuple]:
    """Node ``i``'s ResourceSlice (its pool is the node's name): four GPUs, two a100 and two h100."""
    node = default_node(i)["metadata"]["name"]
    devices = [{"name": f"gpu-{k}", "attributes": {"model": {"string": "h100" if k >= 2 else "a100"}},
                "capacity": {"memory": {"value": "80Gi" if k >= 2 else "40Gi"}}}
               for k in range(DRA_DEVICES_PER_NODE)]
    return [(f"{RESOURCE_API}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
        "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                 "devices": devices}})]


def dra_claim_name(i: int, phase: str) -> str:
    return f"{phase}-{i:05d}-gpu"


def dra_pod_objects(i: int, scheduler: str, phase: str) -> list[tuple]:
    """Pod ``i``'s ResourceClaim: one GPU of the class; every fourth pod's must be an h100 (a CEL
    selector)."""
    exactly: dict = {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": 1}
    if i % 4 == 0:
        exactly["selectors"] = [{"cel": {"expression": H100_SELECTOR}}]
    return [(f"{RESOURCE_API}/namespaces/{NAMESPACE}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": dra_claim_name(i, phase), "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})]


def dra_pod(i: int, scheduler: str, phase: str) -> dict:
    """A default pod whose container uses its own pre-created ResourceClaim (``dra_pod_objects``)."""
    pod = default_pod(i, scheduler, phase)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": dra_claim_name(i, phase)}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
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
    """The PodGroups of the measured pods: scheduler-plugins' (minMember = the group size) or, for
    ``gang_api`` "kubernetes", Kubernetes' (gang minCount = the group size, the workload's topology
    key as the group's constraint)."""
    size = workload.gang_size
    names = [gang_group(g * size, size) for g in range(workload.measure_pods // size)]
    if workload.gang_api == "kubernetes":
        spec: dict = {"schedulingPolicy": {"gang": {"minCount": size}}}
        if workload.gang_topology:
            spec["schedulingConstraints"] = {"topology": [{"key": workload.gang_topology}]}
        return [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": n, "namespace": NAMESPACE}, "spec": spec} for n in names]
    return [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": n, "namespace": NAMESPACE},
             "spec": {"minMember": size, "scheduleTimeoutSeconds": 30}} for n in names]


# -- a backlog of gangs on racks and blocks (bench/GANGS.md) ----------------------------------------

BLOCK = "bench.pysched.io/block"
RACK = "bench.pysched.io/rack"
GROUP_LABEL = "bench.pysched.io/gang"          # every gang-backlog member, whichever PodGroup API it uses
#: Kubernetes 1.37's PodGroups: the API server serves them, the schedulers run their pod-group cycle.
WORKLOAD_GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
WORKLOAD_APISERVER_ARGS = (f"--feature-gates={WORKLOAD_GATES}", "--runtime-config=scheduling.k8s.io/v1beta1=true")
RACK_NODES, BLOCK_RACKS = 25, 10
BACKLOG_NODE_CPU, BACKLOG_MEMBER_CPU = 8, 4
#: CPU a background pod already takes on a node, drawn per node (seeded by its index): 0, 4, 4 or 6
#: of 8, so a node holds 2, 1, 1 or 0 members of 4 CPU - about 25 members (3 gangs of 8) a rack.
BACKGROUND_CPU = (0, 4, 4, 6)


def backlog_node(i: int) -> dict:
    """Node ``i`` of rack ``i // 25`` of block ``i // 250``: 8 CPU, 32Gi."""
    rack = i // RACK_NODES
    return make_node(f"node-{i:05d}", cpu=str(BACKLOG_NODE_CPU), memory="32Gi", labels={
        ZONE: ZONES[rack // BLOCK_RACKS % len(ZONES)], INSTANCE_TYPE: "m5.2xlarge",
        BLOCK: f"block-{rack // BLOCK_RACKS}", RACK: f"rack-{rack:03d}"})


def background_cpu(i: int) -> int:
    return random.Random(f"background-{i}").choice(BACKGROUND_CPU)


def backlog_background(i: int) -> list[tuple]:
    """Node ``i``'s background pod, bound by name (no scheduler involved), or none."""
    cpu = background_cpu(i)
    if not cpu:
        return []
    pod = make_pod(f"background-{i:05d}", namespace=NAMESPACE, scheduler="bench-background", cpu=str(cpu),
                   memory="1Gi", labels={PHASE_LABEL: "background"}, node_name=f"node-{i:05d}")
    return [(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)]


def make_backlog_pod(size: int, api: str) -> Callable[[int, str, str], dict]:
    """Measured pod ``i``: member ``i % size`` of gang ``i // size``, 4 CPU; in a Kubernetes PodGroup
    (``spec.schedulingGroup``, ``api`` "kubernetes") or a scheduler-plugins one (its label, "x-k8s")."""
    def pod(i: int, scheduler: str, phase: str) -> dict:
        if phase != "measure":
            return default_pod(i, scheduler, phase)
        group = gang_group(i, size)
        labels = {PHASE_LABEL: phase, GROUP_LABEL: group}
        if api == "x-k8s":
            labels[GANG_LABEL] = group
        p = make_pod(f"measure-{group}-{i % size}", namespace=NAMESPACE, scheduler=scheduler,
                     cpu=str(BACKLOG_MEMBER_CPU), memory="2Gi", labels=labels)
        if api == "kubernetes":
            p["spec"]["schedulingGroup"] = {"podGroupName": group}
        return p
    return pod


# -- GPUs shared device by device (the openb trace's cluster and asks; GPUShare) ----------------

GPU_MILLI = "alibabacloud.com/gpu-milli"
GPU_COUNT = "alibabacloud.com/gpu-count"
GPU_MODEL = "alibabacloud.com/gpu-card-model"
#: Node shapes (per 100 nodes, GPUs, model, CPUs, memory): the main machine shapes of the openb
#: trace's GPU cluster (Alibaba, "Beware of Fragmentation", USENIX ATC '23), their shares rounded.
GPU_SHARE_NODE_SHAPES = (
    (45, 8, "G2", 96, "384Gi"), (32, 2, "T4", 104, "512Gi"), (9, 2, "P100", 16, "120Gi"),
    (4, 4, "V100M16", 32, "128Gi"), (4, 8, "G3", 128, "768Gi"), (2, 8, "V100M32", 96, "768Gi"),
    (2, 1, "V100M16", 8, "32Gi"), (2, 4, "T4", 96, "384Gi"))
#: Pod kinds (kind, weight, GPUs, CPUs to choose from): CPU-only, sharing one GPU, k whole GPUs.
GPU_SHARE_POD_KINDS = (("cpu", 12, 0, (1, 2, 4, 8)), ("share", 40, 1, (2, 4)), ("whole", 42, 1, (4, 8)),
                       ("whole", 4, 2, (8,)), ("whole", 2, 4, (16,)))
#: The share of one GPU a sharing pod asks (thousandths), weighted roughly as the trace's.
GPU_SHARE_MILLI = ((800, 30), (400, 25), (300, 10), (600, 8), (200, 7), (500, 5), (250, 3), (100, 3), (900, 2))
#: The GPU models a pod may ask for (every fifth sharing or one-GPU pod names one of these).
GPU_SHARE_MODELS = ("G2", "G2|G3", "G3|V100M32", "T4|G2")


def _shape_sequence() -> tuple[tuple[int, str, int, str], ...]:
    seq = [shape[1:] for shape in GPU_SHARE_NODE_SHAPES for _ in range(shape[0])]
    random.Random("gpushare-nodes").shuffle(seq)
    return tuple(seq)


GPU_SHARE_SEQUENCE = _shape_sequence()


def gpu_share_node(i: int) -> dict:
    """Node ``i``: the shape ``i % 100`` of a fixed shuffle of ``GPU_SHARE_NODE_SHAPES``; its GPUs as
    allocatable ``alibabacloud.com/gpu-count`` (and ``nvidia.com/gpu``, for the whole-GPU pods that
    request it), its model as the ``alibabacloud.com/gpu-card-model`` label."""
    gpus, model, cpu, memory = GPU_SHARE_SEQUENCE[i % len(GPU_SHARE_SEQUENCE)]
    return make_node(f"node-{i:05d}", cpu=str(cpu), memory=memory, extended={GPU_COUNT: str(gpus), GPU: str(gpus)},
                     labels={ZONE: ZONES[i % len(ZONES)], INSTANCE_TYPE: f"gpu-{model.lower()}-{gpus}x",
                             GPU_MODEL: model})


def gpu_share_pod(i: int, scheduler: str, phase: str) -> dict:
    """Pod ``i`` of a phase, drawn (seeded by phase and index) from ``GPU_SHARE_POD_KINDS``: CPU-only,
    sharing one GPU (``gpu-milli`` < 1000, ``gpu-count`` 1), or k whole GPUs (``gpu-milli`` 1000,
    ``gpu-count`` k; a quarter of the one-GPU pods request ``nvidia.com/gpu: 1`` instead); every
    fifth sharing or one-GPU pod names GPU models (``gpu-card-model``). 4 GiB of memory per CPU."""
    rng = random.Random(f"gpushare-{phase}-{i}")
    kind, _, gpus, cpus = rng.choices(GPU_SHARE_POD_KINDS, weights=[k[1] for k in GPU_SHARE_POD_KINDS])[0]
    cpu = rng.choice(cpus)
    annotations: dict[str, str] = {}
    extended: dict[str, str] = {}
    if kind == "share":
        milli = rng.choices([m for m, _ in GPU_SHARE_MILLI], weights=[w for _, w in GPU_SHARE_MILLI])[0]
    else:
        milli = 1000
    if gpus == 1 and rng.random() < 0.2:
        annotations[GPU_MODEL] = rng.choice(GPU_SHARE_MODELS)
    if kind == "whole" and gpus == 1 and rng.random() < 0.25:
        extended[GPU] = "1"
    elif gpus:
        annotations.update({GPU_MILLI: str(milli), GPU_COUNT: str(gpus)})
    return make_pod(f"{phase}-{i:05d}", namespace=NAMESPACE, scheduler=scheduler, cpu=str(cpu),
                    memory=f"{4 * cpu}Gi", extended=extended or None, labels={PHASE_LABEL: phase},
                    annotations=annotations or None)


def no_prelude() -> list[tuple[str, dict]]:
    return []


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
    prelude: Callable[[], list[tuple]] = no_prelude   # (POST path, body[, status to merge-patch])
    node_objects: Callable[[int], list[tuple]] | None = None   # created after node i: (POST path, body)
    pod_objects: Callable[[int, str, str], list[tuple]] | None = None   # created before pod i of a phase
    preemption_victims: int = 0   # preemption workloads: init pods each measured pod must evict
    gang_api: str = "x-k8s"   # gang workloads: scheduler-plugins' PodGroups (Coscheduling) or "kubernetes" (1.37's)
    group_label: str = GANG_LABEL   # gang workloads: the label naming each measured pod's group
    gang_topology: str = ""   # gang_api "kubernetes": the PodGroups' schedulingConstraints.topology key
    apiserver_args: tuple[str, ...] = ()   # e.g. the feature gates and API of Kubernetes' PodGroups
    feature_gates: str = ""   # --feature-gates for the schedulers under test (pysched, kube-scheduler)
    bare_pods: bool = False   # on a living cluster too, the measured pods are created bare (no Deployment)
    runs_with: tuple[str, ...] = ()   # only these schedulers ("kind" or "kind:profile"); () for every one
    gpu_share: str = ""       # the GPUShare policy pysched adds to its profile (e.g. "FGD"; "": none)

    def scaled(self, nodes: int, init_pods: int, measure_pods: int) -> Workload:
        return replace(self, nodes=nodes, init_pods=init_pods, measure_pods=measure_pods)

    def admits(self, kind: str, profile: str = "") -> bool:
        """Whether scheduler ``kind`` (with pysched's ``profile``) runs this workload (``runs_with``)."""
        return not self.runs_with or kind in self.runs_with or f"{kind}:{profile}" in self.runs_with

    @property
    def coscheduling(self) -> bool:
        """Gangs in scheduler-plugins' PodGroups: the CRD installed, pysched runs Coscheduling."""
        return bool(self.gang_size) and self.gang_api == "x-k8s"

    @property
    def groups(self) -> int:
        return self.measure_pods // self.gang_size if self.gang_size else 0

    @property
    def fitting_groups(self) -> int:
        """Gang workloads: how many whole groups the nodes' GPUs hold (all when they take no GPU)."""
        if not self.gpus_per_node:
            return self.groups
        return min(self.groups, self.nodes * self.gpus_per_node // self.gang_size) if self.gang_size else 0

    @property
    def expected_bound(self) -> int:
        """Measured pods that a correct scheduler binds: all, or for gangs only whole fitting groups."""
        return self.fitting_groups * self.gang_size if self.gang_size else self.measure_pods

    @property
    def eviction_budget(self) -> dict[str, int]:
        """How many pods of each phase may be gone at the end (``bench.verify.check_evictions``).
        No workload may lose a measured pod, and only preemption workloads lose init pods: at least
        ``preemption_victims`` per measured pod, and a few more are no error: with 50 nodes
        kube-scheduler evicted 52 pods for 50 preemptors. (The race: preemptor A is nominated to a
        node, B is nominated there too and picks a second victim; A is retried before that
        victim's delete arrives, the node looks full with B counted, and A preempts again
        elsewhere. pysched counts a victim as terminating from the moment a preemption chooses
        it, so A waits instead.) Twice the minimum allows that but not victim sets that are not
        minimal (with a 900m preemptor, evicting all four pods of a node is 4x)."""
        return {"init": 2 * self.measure_pods * self.preemption_victims, "measure": 0}


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("SchedulingBasic/500Nodes", 500, 500, 1000,
             description="default pods (100m, 500Mi) on plain nodes"),
    Workload("SchedulingBasic/5000Nodes_10000Pods", 5000, 1000, 10000,
             description="default pods on 5,000 plain nodes", tags=("large",)),
    Workload("SchedulingBasic/15000Nodes_10000Pods", 15000, 1000, 10000,
             description="default pods on 15,000 plain nodes", tags=("large",)),
    Workload("SchedulingNodeAffinity/1000Nodes", 1000, 1000, 2000, node=default_node, pod=affinity_pod,
             description="required node affinity zone In [zone-a, zone-b]"),
    Workload("SchedulingTaintsTolerations/1000Nodes", 1000, 1000, 2000, node=tainted_node, pod=toleration_pod,
             description="half the nodes NoSchedule-tainted, a quarter PreferNoSchedule; half the pods tolerate"),
    Workload("TopologySpreading/1000Nodes", 1000, 1000, 2000, pod=spread_pod,
             description="maxSkew 5 over 3 zones, DoNotSchedule"),
    Workload("SchedulingGPUSpotMix/1000Nodes", 1000, 1000, 2000, node=gpu_spot_node, pod=gpu_spot_pod,
             description="10% tainted 8-GPU nodes, 40% tainted spot nodes; GPU, spot-tolerant and on-demand pods"),
    Workload("SchedulingPodAffinity/1000Nodes", 1000, 1000, 2000, pod=pod_affinity_pod,
             description="30 teams; init pods of team t held to zone t%3, measured pods require a pod of their "
                         "team in their zone and prefer its node"),
    Workload("SchedulingPodAntiAffinity/2000Nodes", 2000, 1000, 1000, pod=anti_affinity_pod,
             description="1,000 pods with required anti-affinity to each other on hostname"),
    Workload("SchedulingPodAntiAffinity/ManyTerms_2000Nodes", 2000, 1000, 1000, pod=many_terms_pod,
             description="500 groups of 2 init + 2 measured pods, each with required anti-affinity to its own "
                         "group on hostname; half also prefer (weight 50) to avoid the next group's zones, a "
                         "quarter prefer (weight 10) the zones of groups g+2/g+3: 1,250 distinct terms"),
    Workload("Preemption/500Nodes", 500, 2000, 500, pod=preemption_pod, prelude=priority_classes,
             preemption_victims=1,
             description="2,000 bench-low (priority 1) init pods of 900m fill 500 4-CPU nodes; 500 bench-high "
                         "(1000) measured pods of 900m each preempt one (scheduler_perf PreemptionBasic with "
                         "one victim per preemptor)"),
    Workload("Preemption/5000Nodes_2Victims_PDB", 5000, 20000, 1000, pod=preemption_pdb_pod,
             prelude=priority_classes_and_pdb, preemption_victims=2, tags=("large",),
             description="20,000 bench-low init pods of 900m fill 5,000 4-CPU nodes, a quarter of them under a "
                         "PodDisruptionBudget allowing no disruption; 1,000 bench-high measured pods of 1800m "
                         "each preempt two, which should be ones no PDB protects"),
    Workload("DynamicResources/1000Nodes", 1000, 1000, 2000, pod=dra_pod, prelude=dra_prelude,
             node_objects=dra_node_objects, pod_objects=dra_pod_objects, tags=("dra",),
             description="one ResourceSlice of 4 GPUs (2 a100, 2 h100) per node; every pod has its own "
                         "ResourceClaim for one GPU, every fourth an h100 by a CEL selector"),
    Workload("GangScheduling/100Nodes_150Groups", 100, 100, 1200, node=gang_node, pod=make_gang_pod(8),
             gang_size=8, gpus_per_node=8, tags=("gang",),
             description="150 PodGroups of 8 one-GPU pods onto 100 8-GPU nodes that hold 100 groups; pysched "
                         "with Coscheduling, kube-scheduler without gang semantics (reference only)"),
    Workload("GangBacklog/1000Nodes_100Gangs", 1000, 0, 800, node=backlog_node,
             pod=make_backlog_pod(8, "kubernetes"), node_objects=backlog_background, gang_size=8,
             gang_api="kubernetes", gang_topology=RACK, group_label=GROUP_LABEL,
             apiserver_args=WORKLOAD_APISERVER_ARGS, feature_gates=WORKLOAD_GATES, bare_pods=True,
             runs_with=("kube-scheduler", "pysched:default", "pysched:topology"), tags=("gang",),
             description="100 Kubernetes PodGroups (scheduling.k8s.io/v1beta1, gang minCount 8, topology key "
                         "rack) of 8 bare 4-CPU pods, all at once, on 1,000 8-CPU nodes in 4 blocks x 10 racks "
                         "x 25 nodes, a background pod of 0/4/4/6 CPU on each (about 3 gangs a rack)"),
    Workload("GangBacklog/1000Nodes_100Gangs_Coscheduling", 1000, 0, 800, node=backlog_node,
             pod=make_backlog_pod(8, "x-k8s"), node_objects=backlog_background, gang_size=8,
             group_label=GROUP_LABEL, bare_pods=True, runs_with=("scheduler-plugins", "pysched:default"),
             tags=("gang",),
             description="the same gangs in scheduler-plugins' PodGroups (minMember 8, no topology): "
                         "Coscheduling"),
    Workload("SchedulingGPUShare/1000Nodes", 1000, 1000, 2000, node=gpu_share_node, pod=gpu_share_pod,
             gpu_share="FGD", tags=("gpushare",),
             description="1,000 GPU nodes in the openb trace's shapes (1/2/4/8 GPUs of 6 models); pods CPU-only, "
                         "sharing one GPU (alibabacloud.com/gpu-milli), or 1-4 whole GPUs, a fifth naming models; "
                         "pysched with GPUShare (FGD, learned target workload), kube-scheduler ignoring the "
                         "annotations (reference only)"),
)}

SMOKE = Workload("Smoke/GPUSpotMix", 10, 4, 16, node=gpu_spot_node, pod=gpu_spot_pod,
                 description="tiny run for make test")
