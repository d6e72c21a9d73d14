"""What a pod group asks of the topology: the levels it is placed on and the level it must stay
within (required) or only prefers.

Sources, read together:

* the PodGroup's ``schedulingConstraints.topology[0].key`` (Kubernetes 1.37's TopologyConstraint):
  the group must be placed inside one domain of that key - required;
* Kueue's TAS annotations on the members (a Job's pod template carries them to its pods):
  ``kueue.x-k8s.io/podset-required-topology: <label>`` - required at that level;
  ``kueue.x-k8s.io/podset-preferred-topology: <label>`` - that level and below first, then up
  level by level to every node; ``kueue.x-k8s.io/podset-unconstrained-topology: "true"`` - every
  node at once.

Two required levels: the inner one wins (a rack lies within one block). A required key that is
not one of the configured levels is a hierarchy of its own, as upstream's TopologyPlacementGenerator
reads it: the group goes to one domain of that key (the levels and Kueue's annotations are then
not used for it). A group naming nothing gets the plugin's ``defaultMode``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pysched.framework import PodInfo

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


@dataclass(frozen=True)
class GroupTopology:
    """``levels`` (outermost first) the group is placed on; ``required``: the index of the level
    it must stay within (None: it may spill over to every node); ``unconstrained``: every node at
    once, no domain tried first."""

    levels: tuple[str, ...]
    required: int | None = None
    unconstrained: bool = False


def group_topology(levels: Sequence[str], topology_keys: Sequence[str], members: Sequence[PodInfo],
                   default_unconstrained: bool) -> GroupTopology:
    """The topology ``members`` (this cycle's and the scheduled ones) of a group with
    ``topology_keys`` (its PodGroup's) ask for, on the configured ``levels``."""
    lv = tuple(levels)
    required: list[str] = []
    if topology_keys:
        key = topology_keys[0]
        if key not in lv:
            return GroupTopology((key,), 0)
        required.append(key)
    preferred = unconstrained = False
    for pod in members:
        ann = pod.annotations
        if ann.get(KUEUE_REQUIRED):
            key = ann[KUEUE_REQUIRED]
            if key not in lv:
                if not required:
                    return GroupTopology((key,), 0)
                continue
            required.append(key)
        elif ann.get(KUEUE_PREFERRED):
            preferred = True
        elif ann.get(KUEUE_UNCONSTRAINED, "").lower() == "true":
            unconstrained = True
    if required:
        return GroupTopology(lv, max(lv.index(k) for k in required))
    if preferred:
        return GroupTopology(lv)
    return GroupTopology(lv, unconstrained=unconstrained or default_unconstrained)
