"""TopologyAwarePlacement's arguments: the topology levels (node labels, outermost first) or the
Kueue Topology to read them from, how many domains of a level the pod-group cycle may simulate,
and what a group that names no topology gets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pysched.framework import arg
from pysched.framework.api import ConfigError

DEFAULT_MAX_DOMAINS_PER_LEVEL = 4
PREFERRED, UNCONSTRAINED = "Preferred", "Unconstrained"


@dataclass
class TopologyAwarePlacementArgs:
    KIND: ClassVar[str] = "TopologyAwarePlacementArgs"
    # Node label keys, outermost first (zone, block, rack, hostname); or, instead, the name of a
    # kueue.x-k8s.io Topology whose spec.levels[].nodeLabel are read as they are.
    levels: list[str] = field(default_factory=list, metadata=arg(omit_empty=True))
    kueue_topology: str = field(default="", metadata=arg(omit_empty=True))
    # Domains of one level simulated per cycle (the best fits), after the ones that cannot hold
    # the group are left out.
    max_domains_per_level: int = field(default=DEFAULT_MAX_DOMAINS_PER_LEVEL, metadata=arg(ge=1, bits=32))
    # A group that names no topology: Preferred (lowest level first, then up to every node) or
    # Unconstrained (every node, as without this plugin).
    default_mode: str = field(default=PREFERRED, metadata=arg(choices=(PREFERRED, UNCONSTRAINED)))

    def validate(self, path: str) -> None:
        if self.levels and self.kueue_topology:
            raise ConfigError(f"{path}.kueueTopology: set levels or kueueTopology, not both")
        if not self.levels and not self.kueue_topology:
            raise ConfigError(f"{path}.levels: Required value (or kueueTopology: the name of a Kueue Topology)")
        seen: set[str] = set()
        for i, key in enumerate(self.levels):
            if not key:
                raise ConfigError(f"{path}.levels[{i}]: Required value")
            if key in seen:
                raise ConfigError(f"{path}.levels[{i}]: Duplicate value: {key!r}")
            seen.add(key)
