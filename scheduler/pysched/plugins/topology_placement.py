"""TopologyPlacementGenerator: one placement per domain of a pod group's topology key (Kubernetes
1.37, TopologyAwareWorkloadScheduling).

A PodGroup with ``schedulingConstraints.topology: [{key: K}]`` is placed whole inside one domain of
node label ``K`` (the first key; upstream reads no other): each distinct value of ``K`` among the
parent placement's nodes is a placement, nodes without the label in none. Once some members are
scheduled (bound or assumed) the group is held to their domain; members scheduled in two domains
are an error (``more than 1 domain found for pod group: a, b``). A group without the constraint
gets the parent placement back.
"""

from __future__ import annotations

from pysched.framework import (
    FrameworkError,
    NodeBatch,
    Placement,
    PlacementGeneratePlugin,
    PodGroupCycleInfo,
    Status,
)

NAME = "TopologyPlacementGenerator"


class TopologyPlacementGenerator(PlacementGeneratePlugin[None]):
    name = NAME

    def generate_placements(self, group: PodGroupCycleInfo, parent: Placement,
                            nodes: NodeBatch) -> list[Placement]:
        keys = group.pod_group.topology_keys
        if not keys:
            return [parent]
        key = keys[0]
        required = self._scheduled_domain(key, group)
        values = nodes.label(key)
        out: list[Placement] = []
        for code, value in enumerate(values.vocabulary):
            if value is None or (required is not None and value != required):
                continue
            mask = values.codes == code
            if mask.any():
                out.append(Placement(value, parent.slots[mask]))
        return out

    def _scheduled_domain(self, key: str, group: PodGroupCycleInfo) -> str | None:
        domain: str | None = None
        for pod in group.scheduled:
            info = self.handle.node_info(pod.node_name) if pod.node_name else None
            node_name = pod.node_name
            if info is None:
                raise FrameworkError(Status.as_error(f"cannot determine domain for already scheduled pods: "
                                                  f"getting node for pod {pod.key}: node {node_name!r} not found"))
            value = info.labels.get(key)
            if value is None:
                raise FrameworkError(Status.as_error(f"cannot determine domain for already scheduled pods: "
                                                  f"no topology domain found for pod {pod.key}"))
            if domain is not None and domain != value:
                raise FrameworkError(Status.as_error(f"cannot determine domain for already scheduled pods: "
                                                  f"more than 1 domain found for pod group: {domain}, {value}"))
            domain = value
        return domain

