"""CapacityScheduling (scheduler-plugins' team quotas: ElasticQuotas with borrowing and reclaim) and
what only it uses: the plugin (``capacity_scheduling``) and the quota bookkeeping and arithmetic it
checks pods with (``elasticquota``)."""

from pysched.plugins.capacity_scheduling.capacity_scheduling import CapacityScheduling, CapacitySchedulingArgs

__all__ = ["CapacityScheduling", "CapacitySchedulingArgs"]
