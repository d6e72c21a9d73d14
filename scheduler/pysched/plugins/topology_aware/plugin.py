"""TopologyAwarePlacement: a pod group placed whole in the lowest topology domain that can hold
it, the one it fragments least first (pysched's own PlacementGenerate plugin; upstream's
TopologyPlacementGenerator makes one placement per domain of one key and picks among those the
group fits in by score).

Levels come from the args (``levels``, outermost first) or from a Kueue ``Topology``
(``kueueTopology``: its ``spec.levels[].nodeLabel``, read from the object store). What the group
asks for is ``constraint.group_topology``'s: required or preferred, from the PodGroup's
TopologyConstraint and Kueue's TAS annotations.

The placements, one per tier, so the pod-group cycle simulates them one at a time, in this order,
and keeps the first the group fits in:

1. the domains of the lowest level (e.g. hostname, then rack), best fit first (``domains``): only
   those whose free capacity and member slots could hold every member, at most
   ``maxDomainsPerLevel`` of them;
2. the same for each level above, up to the required level (whose domains need only hold the
   group's ``minCount``) or, when nothing is required, up to the outermost level;
3. when nothing is required: every node of the parent placement.

Already scheduled members (bound or assumed) pin each level to their domain; members in two
domains of a level rule that level out (at the required level it is upstream's error: "more than 1
domain found for pod group"). A required group no domain could hold is still tried in the roomiest
domain of its level, so it fails with the filters' reasons rather than "0/0 placements".
"""

from __future__ import annotations

import logging

from pysched.framework import (
    FrameworkError,
    Handle,
    NodeBatch,
    Placement,
    PlacementGeneratePlugin,
    PodGroupCycleInfo,
    PodInfo,
    Status,
)
from pysched.plugins.topology_aware.args import UNCONSTRAINED, TopologyAwarePlacementArgs
from pysched.plugins.topology_aware.constraint import GroupTopology, group_topology
from pysched.plugins.topology_aware.domains import Levels, best_domains, demand_of, room_of, roomiest_domain

NAME = "TopologyAwarePlacement"
KUEUE_TOPOLOGIES = "kueuetopologies"
IMPOSSIBLE = "\x00"   # a pin no domain name equals: the scheduled members rule the level out

log = logging.getLogger("pysched.plugins")


class TopologyAwarePlacement(PlacementGeneratePlugin[TopologyAwarePlacementArgs]):
    name = NAME

    def __init__(self, args: TopologyAwarePlacementArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        if self.args.kueue_topology:
            self.object_kinds = (KUEUE_TOPOLOGIES,)
        self._warned = False

    def levels(self) -> tuple[str, ...]:
        """The configured levels, or the Kueue Topology's (none while it does not exist)."""
        if self.args.levels:
            return tuple(self.args.levels)
        objects = self.handle.objects
        obj = objects.get(KUEUE_TOPOLOGIES, self.args.kueue_topology) if objects is not None else None
        levels = tuple(lv.get("nodeLabel", "") for lv in ((obj or {}).get("spec") or {}).get("levels") or ()
                       if isinstance(lv, dict) and lv.get("nodeLabel"))
        if not levels and not self._warned:
            self._warned = True
            log.warning("Kueue Topology not found or without levels: groups are placed as without topology "
                        "levels", extra={"plugin": NAME, "topology": self.args.kueue_topology})
        elif levels:
            self._warned = False
        return levels

    def generate_placements(self, group: PodGroupCycleInfo, parent: Placement,
                            nodes: NodeBatch) -> list[Placement]:
        pg = group.pod_group
        topo = group_topology(self.levels(), pg.topology_keys, [*group.members, *group.scheduled],
                              self.args.default_mode == UNCONSTRAINED)
        if topo.unconstrained or not topo.levels or not group.members:
            return [parent]
        pins = self._pins(topo, group.scheduled)
        minimum = (pg.min_count if pg.gang else 1) - len(group.scheduled)
        demand = demand_of(group.members, minimum)
        room = room_of(nodes, demand)
        levels = Levels(nodes, topo.levels)
        out: list[Placement] = []
        top = topo.required if topo.required is not None else 0
        for level in range(len(topo.levels) - 1, top - 1, -1):
            final = level == topo.required
            found = best_domains(levels, level, room, demand, whole_only=not final, pinned=pins[level],
                                 limit=self.args.max_domains_per_level)
            if final and not found and not out:
                fallback = roomiest_domain(levels, level, room, pins[level])
                found = [fallback] if fallback is not None else []
            for d in found:
                out.append(Placement(d.name, parent.slots[levels.ids[level] == d.id], len(out)))
        if topo.required is None:
            out.append(Placement("", parent.slots, len(out)))
        return out

    def _pins(self, topo: GroupTopology, scheduled: list[PodInfo]) -> list[str | None]:
        """Per level: the domain the scheduled members are in (None: no member scheduled yet;
        ``IMPOSSIBLE``: they are not all in one). At the required level, upstream's errors."""
        pins: list[str | None] = [None] * len(topo.levels)
        if not scheduled:
            return pins
        snapshot_pods = self.handle.snapshot.pods
        paths: list[list[str | None]] = []
        for pod in scheduled:
            placed = snapshot_pods.get(pod.uid)
            node_name = (placed.node_name if placed is not None else "") or pod.node_name
            info = self.handle.node_info(node_name) if node_name else None
            if info is None:
                raise FrameworkError(Status.as_error(f"cannot determine domain for already scheduled pods: "
                                                     f"getting node for pod {pod.key}: node {node_name!r} "
                                                     f"not found"))
            paths.append([info.labels.get(k) for k in topo.levels])
        for level in range(len(topo.levels)):
            names: list[str] = []
            for pod, path in zip(scheduled, paths, strict=True):
                if any(v is None for v in path[:level + 1]):
                    if level == topo.required:
                        raise FrameworkError(Status.as_error(
                            f"cannot determine domain for already scheduled pods: no topology domain found "
                            f"for pod {pod.key}"))
                    names = [IMPOSSIBLE]
                    break
                name = "/".join(str(v) for v in path[:level + 1])
                if names and name != names[0]:
                    if level == topo.required:
                        raise FrameworkError(Status.as_error(
                            f"cannot determine domain for already scheduled pods: more than 1 domain found "
                            f"for pod group: {names[0]}, {name}"))
                    names = [IMPOSSIBLE]
                    break
                names = [name]
            pins[level] = names[0] if names else None
        return pins
