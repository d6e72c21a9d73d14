"""TopologyAwarePlacement (pysched's own PlacementGenerate plugin): a pod group placed whole in the
lowest topology domain - hostname, rack, block, zone, as the args or a Kueue Topology name them -
that can hold it, best fit first. ``args`` (its arguments), ``constraint`` (what a group asks of
the topology: required or preferred, from the PodGroup and Kueue's TAS annotations), ``domains``
(the domains and their room, numpy over the nodes), ``plugin`` (the placements, one tier each)."""

from pysched.plugins.topology_aware.plugin import TopologyAwarePlacement

__all__ = ["TopologyAwarePlacement"]
