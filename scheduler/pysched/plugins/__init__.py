"""The plugin set: kube-scheduler's in-tree plugins re-implemented in Python, and scheduler-plugins'.

``IN_TREE`` is the registry's starting point (name -> class). Each plugin lives in its own module
with a docstring saying what it checks and what it reads. A plugin with private helpers is a
package of its own, as in scheduler-plugins: ``dynamic_resources`` (allocator and CEL),
``capacity_scheduling`` (quota bookkeeping), ``coscheduling``, ``loadaware`` (three scores and
their metrics reading). Code two or more plugins share is in ``helper``. A plugin imports only
``pysched.framework``, ``pysched.plugins.helper`` and its own package - never another plugin's.
Out-of-tree plugins register through the ``pysched.plugins`` entry point group or
``--plugin-module`` (see ``pysched.runtime.registry``); nothing here needs to change for them.

Upstream semantics (kube-scheduler 1.35): SchedulingGates, PrioritySort, NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity,
NodeResourcesBalancedAllocation, ImageLocality, DefaultBinder, DefaultPreemption, DynamicResources (DRA:
claims allocated from ResourceSlices, as kube-scheduler 1.35 with its default gates); NodeDeclaredFeatures
(kube-scheduler 1.37's, acting only under its feature gate, off in 1.35: a profile enables it);
GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount (Kubernetes' own gangs,
``scheduling.k8s.io`` PodGroups scheduled a whole group per cycle: default under the GenericWorkload
and TopologyAwareWorkloadScheduling gates, as kube-scheduler 1.37); TopologyAwarePlacement (pysched's
own, opt-in in place of TopologyPlacementGenerator: a pod group in the lowest topology domain that
holds it, best fit first; ``topology_aware``); GPUShare (pysched's own, opt-in: GPUs shared device
by device, FGD and the published GPU policies; ``gpushare``). From
scheduler-plugins, opt-in: Coscheduling (gang scheduling of PodGroups), CapacityScheduling (team quotas:
ElasticQuotas with borrowing and reclaim) and the load-aware scores in
``loadaware`` (TargetLoadPacking, LoadVariationRiskBalancing, MetricScore), which need a metrics
source. pysched's own policy plugins (GPU, AZSpread, CapacityType, InstanceType) are not here: they
are the ``pysched-policy`` distribution (the repository's ``plugins/``), loaded through the entry
points like any user's plugin.
"""

from pysched.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from pysched.plugins.capacity_scheduling import CapacityScheduling
from pysched.plugins.coscheduling import Coscheduling
from pysched.plugins.default_binder import DefaultBinder
from pysched.plugins.default_preemption import DefaultPreemption
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.gang_scheduling import GangScheduling
from pysched.plugins.gpushare import GPUShare
from pysched.plugins.image_locality import ImageLocality
from pysched.plugins.inter_pod_affinity import InterPodAffinity
from pysched.plugins.loadaware.load_variation_risk_balancing import LoadVariationRiskBalancing
from pysched.plugins.loadaware.metric_score import MetricScore
from pysched.plugins.loadaware.target_load_packing import TargetLoadPacking
from pysched.plugins.node_affinity import NodeAffinity
from pysched.plugins.node_declared_features import NodeDeclaredFeatures
from pysched.plugins.node_name import NodeName
from pysched.plugins.node_ports import NodePorts
from pysched.plugins.node_resources_fit import NodeResourcesFit
from pysched.plugins.node_unschedulable import NodeUnschedulable
from pysched.plugins.node_volume_limits import NodeVolumeLimits
from pysched.plugins.pod_topology_spread import PodTopologySpread
from pysched.plugins.podgroup_pods_count import PodGroupPodsCount
from pysched.plugins.queue_sort import PrioritySort
from pysched.plugins.scheduling_gates import SchedulingGates
from pysched.plugins.taint_toleration import TaintToleration
from pysched.plugins.topology_aware import TopologyAwarePlacement
from pysched.plugins.topology_placement import TopologyPlacementGenerator
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
    Coscheduling,
    CapacityScheduling,
    TargetLoadPacking,
    LoadVariationRiskBalancing,
    MetricScore,
    DefaultBinder,
    NodeDeclaredFeatures,
    GangScheduling,
    TopologyPlacementGenerator,
    PodGroupPodsCount,
    TopologyAwarePlacement,
    GPUShare,
]

__all__ = ["IN_TREE"]
