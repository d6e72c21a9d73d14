"""TeamNodes (PreFilter, Filter, PreScore, Score): each team's pods run on its own nodes or on shared ones.

A node labelled ``team=<name>`` belongs to that team; a node without the label is shared. A pod
labelled ``team=<name>`` may run on its team's nodes and on shared nodes; a pod without the
label only on shared nodes. Among the nodes it may use, a pod prefers its team's:
``ownNodeWeight`` against ``sharedNodeWeight``, normalised so that the best node scores 100.
The label key is ``labelKey`` (default ``team``) on both pods and nodes.

Reason: ``node(s) belong to another team`` (UnschedulableAndUnresolvable: evicting pods would
not help). A rejected pod is retried when a node it may use is added or relabelled.

This module is the worked example of pysched's plugin API; every extension point it uses is
imported from ``pysched.framework``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from pysched.framework import (
    MAX_NODE_SCORE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    NodeSpec,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import ConfigError, qualified_name_problem

NAME = "TeamNodes"
REASON = "node(s) belong to another team"
STATE_KEY = f"{NAME}/podTeam"


@dataclass
class TeamNodesArgs:
    """``pluginConfig[].args`` of TeamNodes. Wire names are the camelCase field names (``labelKey``,
    ``ownNodeWeight``, ``sharedNodeWeight``); ``kind: TeamNodesArgs`` may be given."""

    KIND: ClassVar[str] = "TeamNodesArgs"

    label_key: str = "team"
    own_node_weight: int = field(default=3, metadata=arg(ge=0, le=100))
    shared_node_weight: int = field(default=1, metadata=arg(ge=0, le=100))

    def validate(self, path: str) -> None:
        """Rules the field metadata cannot say; called by the decoder after the fields are read."""
        problem = qualified_name_problem(self.label_key)
        if problem:
            raise ConfigError(f"{path}.labelKey: Invalid value {self.label_key!r}: {problem}")
        if self.own_node_weight < self.shared_node_weight:
            raise ConfigError(f"{path}.ownNodeWeight: must be >= sharedNodeWeight ({self.shared_node_weight}), "
                              f"got {self.own_node_weight}")


@dataclass(frozen=True)
class PodTeam:
    """What PreFilter/PreScore computed once for the pod, read by Filter/Score for every node."""
    team: str | None


class TeamNodes(PreFilterPlugin[TeamNodesArgs], FilterPlugin[TeamNodesArgs], PreScorePlugin[TeamNodesArgs],
                ScorePlugin[TeamNodesArgs], EnqueueExtensions):
    """Typed with its args: ``self.args`` is a ``TeamNodesArgs`` (the defaults without a pluginConfig entry)."""

    name = NAME

    def _team_of(self, pod: PodInfo) -> str | None:
        return pod.labels.get(self.args.label_key)

    # -- PreFilter / Filter ----------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        state.write(STATE_KEY, PodTeam(self._team_of(pod)))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        team = state.read(STATE_KEY).team
        owner = nodes.label(self.args.label_key)      # the label's value per node, as integer codes
        allowed = ~owner.exists()                      # shared nodes
        if team is not None:
            allowed |= owner.equals(team)              # and the pod's team's own nodes
        return FilterResult.from_mask(allowed, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    # -- PreScore / Score / NormalizeScore -------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        team = self._team_of(pod)
        state.write(STATE_KEY, PodTeam(team))
        if team is None:
            return Status(Code.SKIP)                   # only shared nodes passed: nothing to prefer
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        team = state.read(STATE_KEY).team
        own = nodes.label(self.args.label_key).equals(team) if team is not None else np.zeros(len(nodes), bool)
        return np.where(own, self.args.own_node_weight, self.args.shared_node_weight).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch,
                        scores: npt.NDArray[np.int64]) -> Status | None:
        """Scale in place so that the best node scores MAX_NODE_SCORE (100)."""
        best = int(scores.max()) if len(scores) else 0
        if best > 0:
            scores[:] = scores * MAX_NODE_SCORE // best
        return None

    # -- EnqueueExtensions -----------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        """A pod this plugin rejected can only be helped by a node it may use: a new one, or one
        whose labels changed. The hint filters out the nodes that still would not take it."""
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), self._node_became_usable),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel"), self._node_became_usable))

    def _node_became_usable(self, pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
        """Queueing hint: requeue ``pod`` only if ``new`` admits it and ``old`` (if any) did not."""
        if new is None:
            return False
        return self._admits(pod, new) and (old is None or not self._admits(pod, old))

    def _admits(self, pod: PodInfo, node: NodeSpec) -> bool:
        owner = node.labels.get(self.args.label_key)
        return owner is None or owner == self._team_of(pod)
