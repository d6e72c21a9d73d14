"""The plugin set: kube-scheduler's in-tree plugins re-implemented in Python, plus our own.

``IN_TREE`` is the registry's starting point (name -> class). Each plugin lives in its own module
with a docstring saying what it checks and what it reads. Out-of-tree plugins register through
the ``pysched.plugins`` entry point group or ``--plugin-module`` (see
``pysched.framework.registry``); nothing here needs to change for them. Upstream plugins are
modules here; the brief's own are in ``custom``; code shared between plugins is in ``helper``.
A plugin module imports only ``pysched.framework`` and ``pysched.plugins.helper``.

Upstream semantics (kube-scheduler 1.35): SchedulingGates, PrioritySort, NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity,
NodeResourcesBalancedAllocation, ImageLocality, DefaultBinder, DefaultPreemption, DynamicResources (DRA:
claims allocated from ResourceSlices, as kube-scheduler 1.35 with its default gates). The brief's own
scores: GPU, AZSpread, CapacityType, InstanceType - registered here, but not in the default profile
(which is exactly kube-scheduler's): a profile enables them (``manifests/configmap.yaml`` does).
Coscheduling (scheduler-plugins' gang scheduling of PodGroups) is registered and likewise opt-in,
as are the load-aware scores in ``loadaware`` (TargetLoadPacking, LoadVariationRiskBalancing,
MetricScore), which need a metrics source.
"""

from pysched.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from pysched.plugins.coscheduling import Coscheduling
from pysched.plugins.custom.az_spread import AZSpread
from pysched.plugins.custom.capacity_type import CapacityType
from pysched.plugins.custom.gpu import GPU
from pysched.plugins.custom.instance_type import InstanceType
from pysched.plugins.default_binder import DefaultBinder
from pysched.plugins.default_preemption import DefaultPreemption
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.image_locality import ImageLocality
from pysched.plugins.inter_pod_affinity import InterPodAffinity
from pysched.plugins.loadaware.load_variation_risk_balancing import LoadVariationRiskBalancing
from pysched.plugins.loadaware.metric_score import MetricScore
from pysched.plugins.loadaware.target_load_packing import TargetLoadPacking
from pysched.plugins.node_affinity import NodeAffinity
from pysched.plugins.node_name import NodeName
from pysched.plugins.node_ports import NodePorts
from pysched.plugins.node_resources_fit import NodeResourcesFit
from pysched.plugins.node_unschedulable import NodeUnschedulable
from pysched.plugins.node_volume_limits import NodeVolumeLimits
from pysched.plugins.pod_topology_spread import PodTopologySpread
from pysched.plugins.queue_sort import PrioritySort
from pysched.plugins.scheduling_gates import SchedulingGates
from pysched.plugins.taint_toleration import TaintToleration
from pysched.plugins.volume_binding import VolumeBinding
from pysched.plugins.volume_restrictions import VolumeRestrictions
from pysched.plugins.volume_zone import VolumeZone

IN_TREE = [
    SchedulingGates,
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeRestrictions,
    NodeVolumeLimits,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
    DynamicResources,
    DefaultPreemption,
    NodeResourcesBalancedAllocation,
    ImageLocality,
    GPU,
    AZSpread,
    CapacityType,
    InstanceType,
    Coscheduling,
    TargetLoadPacking,
    LoadVariationRiskBalancing,
    MetricScore,
    DefaultBinder,
]

__all__ = ["IN_TREE"]
