"""TaintToleration (Filter, PreScore, Score): taints repel pods that do not tolerate them.

Filter: a node with a ``NoSchedule`` or ``NoExecute`` taint that none of the pod's tolerations
tolerates is rejected with ``node(s) had untolerated taint(s)`` (UnschedulableAndUnresolvable;
the wording of kube-scheduler 1.35, which no longer prints the taint). Toleration matching: an
empty effect matches every effect, an empty key with ``Exists`` matches every taint, ``Equal``
(or no operator) compares values, ``Exists`` ignores them, ``Gt``/``Lt`` compare integers only
when ``comparisonOperators`` is enabled (kube-scheduler's alpha gate, off by default);
``tolerationSeconds`` does not matter for scheduling.

Score: counts the node's ``PreferNoSchedule`` taints the pod does not tolerate (tolerations with
an empty or PreferNoSchedule effect count), normalised in reverse so fewer taints score higher.

Reads: node ``spec.taints`` (via the NodeTable's taint classes: each distinct taint list is
checked once per pod), pod ``spec.tolerations``.
"""

from __future__ import annotations

import numpy as np

from pysched.framework.args import get_bool, strict
from pysched.framework.interface import (ClusterEvent, ClusterEventWithHint,
                                           EnqueueExtensions, FilterPlugin, FilterResult,
                                           PreScorePlugin, ScorePlugin)
from pysched.framework.status import Code, Status
from pysched.apis.core.model import PREFER_NO_SCHEDULE, find_untolerated_taint, tolerates_taint

from pysched.plugins.helper.normalize import default_normalize
from pysched.plugins.helper.taints import FILTER_EFFECTS, per_taint_class, untolerated_mask

REASON = "node(s) had untolerated taint(s)"


class TaintTolerationArgs:
    def __init__(self, comparison_operators: bool = False):
        self.comparison_operators = comparison_operators

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "TaintTolerationArgs":
        raw = strict(raw, path, ("comparisonOperators",))
        return cls(get_bool(raw, "comparisonOperators", path, False))

    def to_dict(self) -> dict:
        return {"comparisonOperators": self.comparison_operators}


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "TaintToleration"
    Args = TaintTolerationArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or TaintTolerationArgs(), handle)
        self.cmp = self.args.comparison_operators

    # -- filter --------------------------------------------------------------------------------

    def filter(self, state, pod, node):
        taint = find_untolerated_taint(node.taints, pod.tolerations, FILTER_EFFECTS, self.cmp)
        if taint is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)
        return None

    def filter_nodes(self, state, pod, nodes):
        ok = ~untolerated_mask(nodes, pod.tolerations, self.cmp)
        return FilterResult.from_mask(ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state, pod, nodes):
        tolerations = tuple(t for t in pod.tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)
        state.write("TaintToleration/preScore", tolerations)
        return None

    def _count(self, taints, tolerations) -> int:
        return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE
                   and not tolerates_taint(tolerations, t, self.cmp))

    def score(self, state, pod, node):
        tolerations = state.get("TaintToleration/preScore")
        if tolerations is None:
            tolerations = tuple(t for t in pod.tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)
        return self._count(node.taints, tolerations)

    def score_nodes(self, state, pod, nodes):
        classes, taint_sets = nodes.taint_classes()
        if len(taint_sets) == 1:
            return np.zeros(len(nodes), dtype=np.int64)
        tolerations = state.get("TaintToleration/preScore") or ()
        per_class = per_taint_class(nodes, "score", self.cmp, tolerations,
                                    lambda taints: self._count(taints, tolerations), np.int64)
        return per_class[classes]

    def normalize_score(self, state, pod, nodes, scores):
        default_normalize(scores, reverse=True)
        return None

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodToleration")))
