"""PodGroupPodsCount: prefer the placement that schedules the most of a pod group (Kubernetes 1.37,
TopologyAwareWorkloadScheduling).

A placement scores the group's members already scheduled plus the ones it places; the scores are
then scaled so the best placement gets 100 (``normalize_placement_scores``). A gang placed whole
scores the same everywhere; a basic group, or a gang above its ``minCount``, goes where more of it
fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from pysched.framework import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NodeBatch,
    Placement,
    PlacementScorePlugin,
    PodGroupCycleInfo,
    PodInfo,
    Status,
)

NAME = "PodGroupPodsCount"


class PodGroupPodsCount(PlacementScorePlugin[None]):
    name = NAME

    def score_placement(self, group: PodGroupCycleInfo, placement: Placement, nodes: NodeBatch,
                        assignments: Sequence[tuple[PodInfo, str]]) -> int:
        return len(group.scheduled) + len(assignments)

    def normalize_placement_scores(self, group: PodGroupCycleInfo, scores: list[int]) -> Status | None:
        top = max(scores, default=0)
        if top == 0:
            return Status.as_error("no pods from pod group are assigned to any of the candidate placements")
        for i, s in enumerate(scores):
            scores[i] = MIN_NODE_SCORE + s * (MAX_NODE_SCORE - MIN_NODE_SCORE) // top
        return None
