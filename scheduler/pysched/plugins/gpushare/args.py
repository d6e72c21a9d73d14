"""GPUShare's arguments: the policy, the names of the annotations, resources and node labels that
carry GPU asks and GPU devices, the DRA drivers whose devices are GPUs (with the capacity that is
one GPU and the model attribute), and the target workload FGD measures fragmentation against."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from pysched.framework import arg
from pysched.framework.api import ConfigError, is_extended_resource

# The policies (score + choice of GPU inside the chosen node). "None": no score (where GPU pods go
# is left to the other score plugins); the GPU inside the node is then the tightest that fits.
FGD, BEST_FIT, GPU_PACKING, GPU_CLUSTERING, DOT_PROD, RANDOM, NONE = (
    "FGD", "BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random", "None")
POLICIES = (FGD, BEST_FIT, GPU_PACKING, GPU_CLUSTERING, DOT_PROD, RANDOM, NONE)
LEARNED = "Learned"
# How nodes the policy scores equally are told apart (the FGD simulator: a fixed random rank per
# node; a per-pod random pick among them, what kube-scheduler does, costs FGD about 5 points).
NODE_HASH, NODE_NAME, SCHEDULER = "NodeHash", "NodeName", "Scheduler"

DEFAULT_MILLI_ANNOTATION = "alibabacloud.com/gpu-milli"
DEFAULT_COUNT_ANNOTATION = "alibabacloud.com/gpu-count"
DEFAULT_MODEL_ANNOTATION = "alibabacloud.com/gpu-card-model"
DEFAULT_INDEX_ANNOTATION = "alibabacloud.com/gpu-index"
DEFAULT_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
DEFAULT_NODE_GPU_RESOURCES = ("alibabacloud.com/gpu-count", "nvidia.com/gpu")
DEFAULT_WHOLE_GPU_RESOURCES = ("nvidia.com/gpu",)
DEFAULT_DRA_MODEL_ATTRIBUTE = "model"
# A capacity's or attribute's name: a C identifier or DNS label, optionally "<domain>/" first.
_QUALIFIED = re.compile(r"^(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9])?$")


@dataclass
class WorkloadClass:
    """One class of a stated target workload: pods asking ``milliCPU`` CPU and ``gpuMilli`` of
    ``gpuCount`` GPUs of one of ``models`` (empty: any), ``weight`` their share."""
    milli_cpu: int = field(default=0, metadata=arg(json="milliCPU", ge=0))
    gpu_milli: int = field(default=0, metadata=arg(ge=0, le=1000))
    gpu_count: int = field(default=0, metadata=arg(ge=0, bits=32))
    models: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    weight: float = field(default=1.0, metadata=arg(ge=0))


@dataclass
class GPUShareArgs:
    KIND: ClassVar[str] = "GPUShareArgs"
    # How nodes are scored and which GPU(s) of the chosen node a pod gets.
    policy: str = field(default=FGD, metadata=arg(choices=POLICIES))
    # Pod annotations: thousandths of one GPU per GPU (1..1000), how many GPUs, which models
    # ("A|B": any of them).
    milli_annotation: str = DEFAULT_MILLI_ANNOTATION
    count_annotation: str = DEFAULT_COUNT_ANNOTATION
    model_annotation: str = DEFAULT_MODEL_ANNOTATION
    # Written to the pod before it is bound (PreBind): the chosen GPUs' indices, "0" or "2,3", for
    # the node's device plugin; read back from bound pods.
    index_annotation: str = DEFAULT_INDEX_ANNOTATION
    # How the indices reach the pod: in the Binding DefaultBinder posts (the API server copies its
    # annotations onto the pod: one write), or, false, a patch of their own in PreBind (for a
    # binder that does not send them: an extender's, a plugin's).
    index_in_binding: bool = True
    # Extended resources a pod requests whole GPUs with (each unit one whole GPU of the node).
    whole_gpu_resources: list[str] = field(default_factory=lambda: list(DEFAULT_WHOLE_GPU_RESOURCES))
    # A node's GPU count: the first of these its allocatable names.
    node_gpu_resources: list[str] = field(default_factory=lambda: list(DEFAULT_NODE_GPU_RESOURCES))
    # The node label naming its GPU model.
    model_label: str = DEFAULT_MODEL_LABEL
    # FGD's target workload: "Learned" (the default: the classes of the GPU pods this scheduler has
    # seen, most frequent first up to ``targetWorkloadCoverage`` of them) or "Stated" (``classes``).
    target_workload: str = field(default=LEARNED, metadata=arg(choices=(LEARNED, "Stated")))
    target_workload_coverage: float = field(default=0.95, metadata=arg(ge=0.01, le=1.0))
    classes: list[WorkloadClass] = field(default_factory=list, metadata=arg(omit_empty=True))
    # Pods remembered when learning: past this many, every class's count is halved (older pods
    # fade out as the workload changes).
    learning_window: int = field(default=20000, metadata=arg(ge=100))
    # Among the nodes the policy scores best: NodeHash (the default: a fixed pseudo-random order of
    # the nodes, from a hash of each name), NodeName (the smallest name), or Scheduler (left to
    # the scheduler: random, as kube-scheduler).
    tie_break: str = field(default=NODE_HASH, metadata=arg(choices=(NODE_HASH, NODE_NAME, SCHEDULER)))
    # A pod that asks for no GPU goes, among the nodes the policy scores best, to those with the
    # least free GPU share: their CPU is the least likely to be wanted by a GPU pod.
    cpu_pods_to_busy_gpu_nodes: bool = field(default=True, metadata=arg(json="cpuPodsToBusyGPUNodes"))
    # Normalisers of BestFit and DotProd: the largest node's CPU and GPU count (0: the cluster's
    # largest, as the published policies' constants are the openb cluster's largest node).
    max_node_milli_cpu: int = field(default=0, metadata=arg(json="maxNodeMilliCPU", ge=0))
    max_node_gpus: int = field(default=0, metadata=arg(ge=0, bits=32))
    # GPUs published as DRA devices (off while ``draDrivers`` is empty): the drivers whose
    # ResourceSlices list one device per GPU, shared through consumable capacity
    # (``allowMultipleAllocations``); ``draShareCapacity``: the capacity whose value is one whole
    # GPU (``memory``, or a ``milli``-like one; a request of it counts as ceil(1000 * request /
    # value) thousandths); ``draModelAttribute``: the attribute naming the GPU model;
    # ``draDeviceClasses``: DeviceClasses that mean "GPU" besides those whose selectors say
    # ``device.driver == "<one of draDrivers>"``. DynamicResources filters and allocates; GPUShare
    # scores and tells its allocator which GPU the policy chose.
    dra_drivers: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    dra_share_capacity: str = field(default="", metadata=arg(omit_empty=True))
    dra_model_attribute: str = DEFAULT_DRA_MODEL_ATTRIBUTE
    dra_device_classes: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))

    def validate(self, path: str) -> None:
        for key, name in (("milliAnnotation", self.milli_annotation), ("countAnnotation", self.count_annotation),
                          ("modelAnnotation", self.model_annotation), ("indexAnnotation", self.index_annotation),
                          ("modelLabel", self.model_label)):
            if not name:
                raise ConfigError(f"{path}.{key}: Required value")
        for key, names in (("wholeGpuResources", self.whole_gpu_resources),
                           ("nodeGpuResources", self.node_gpu_resources)):
            for i, n in enumerate(names):
                if not is_extended_resource(n):
                    raise ConfigError(f"{path}.{key}[{i}]: {n!r} is not an extended resource name (domain/name)")
        if not self.node_gpu_resources:
            raise ConfigError(f"{path}.nodeGpuResources: Required value")
        self._validate_dra(path)
        if self.target_workload == "Stated":
            if not self.classes:
                raise ConfigError(f"{path}.classes: Required value (targetWorkload is Stated)")
            if not sum(c.weight for c in self.classes) > 0:
                raise ConfigError(f"{path}.classes: the weights sum to 0")
            for i, c in enumerate(self.classes):
                if (c.gpu_milli == 0) != (c.gpu_count == 0):
                    raise ConfigError(f"{path}.classes[{i}]: gpuMilli and gpuCount are both 0 or both set")
                if c.gpu_count > 1 and c.gpu_milli != 1000:
                    raise ConfigError(f"{path}.classes[{i}].gpuMilli: must be 1000 when gpuCount > 1")
        elif self.classes:
            raise ConfigError(f"{path}.classes: only with targetWorkload: Stated")

    def _validate_dra(self, path: str) -> None:
        for key, names in (("draDrivers", self.dra_drivers), ("draDeviceClasses", self.dra_device_classes)):
            for i, n in enumerate(names):
                if not isinstance(n, str) or not n:
                    raise ConfigError(f"{path}.{key}[{i}]: must be a non-empty string")
        if not self.dra_drivers:
            for key, set_ in (("draShareCapacity", self.dra_share_capacity),
                              ("draDeviceClasses", self.dra_device_classes)):
                if set_:
                    raise ConfigError(f"{path}.{key}: only with draDrivers")
            return
        if not self.dra_share_capacity:
            raise ConfigError(f"{path}.draShareCapacity: Required value (draDrivers is set): the capacity "
                              f"of each GPU device that is one whole GPU, e.g. memory")
        for key, name in (("draShareCapacity", self.dra_share_capacity),
                          ("draModelAttribute", self.dra_model_attribute)):
            if not _QUALIFIED.match(name):
                raise ConfigError(f"{path}.{key}: {name!r} is not a capacity or attribute name "
                                  f"(a C identifier or DNS label, optionally <domain>/ first)")
