"""The plugin set: kube-scheduler's in-tree plugins re-implemented in Python, plus our own.

``IN_TREE`` is the registry's starting point (name -> class). Each plugin lives in its own module
with a docstring saying what it checks and what it reads. Out-of-tree plugins register through
the ``pysched.plugins`` entry point group or ``--plugin-module`` (see
``scheduler.framework.registry``); nothing here needs to change for them.

Upstream semantics (kube-scheduler 1.35): SchedulingGates, PrioritySort, NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, VolumeZone,
PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality,
DefaultBinder; DynamicResources refuses DRA pods explicitly. The brief's own scores: GPU,
AZSpread, CapacityType, InstanceType.
"""

from .az_spread import AZSpread
from .balanced_allocation import NodeResourcesBalancedAllocation
from .capacity_type import CapacityType
from .default_binder import DefaultBinder
from .dynamic_resources import DynamicResources
from .gpu import GPU
from .image_locality import ImageLocality
from .instance_type import InstanceType
from .inter_pod_affinity import InterPodAffinity
from .node_affinity import NodeAffinity
from .node_name import NodeName
from .node_ports import NodePorts
from .node_resources_fit import NodeResourcesFit
from .node_unschedulable import NodeUnschedulable
from .pod_topology_spread import PodTopologySpread
from .queue_sort import PrioritySort
from .scheduling_gates import SchedulingGates
from .taint_toleration import TaintToleration
from .volume_binding import VolumeBinding
from .volume_zone import VolumeZone

IN_TREE = [
    SchedulingGates,
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
    DynamicResources,
    NodeResourcesBalancedAllocation,
    ImageLocality,
    GPU,
    AZSpread,
    CapacityType,
    InstanceType,
    DefaultBinder,
]

__all__ = ["IN_TREE"]
