"""NodeAffinity (PreFilter, Filter, PreScore, Score): nodeSelector and node affinity.

Filter: the node must carry every ``spec.nodeSelector`` label, and match at least one term of
``requiredDuringSchedulingIgnoredDuringExecution`` (terms ORed; a term's ``matchExpressions`` and
``matchFields`` ANDed; operators In, NotIn, Exists, DoesNotExist, Gt, Lt; ``matchFields`` on
``metadata.name``). Reason ``node(s) didn't match Pod's node affinity/selector``. A profile's
``addedAffinity`` (pluginConfig) applies to every pod first, reason ``node(s) didn't match
scheduler-enforced node affinity``. Both are UnschedulableAndUnresolvable.

PreFilter: when every required term names nodes with ``matchFields metadata.name In``, only
those nodes are evaluated; terms that name no common node give ``pod affinity terms conflict``.

Score: the sum of the weights of matching ``preferredDuringScheduling`` terms (plus the added
preferred terms), normalised so the best node gets 100. A preferred term upstream cannot parse
(a ``Gt``/``Lt`` value that is not a base-10 int64, such as ``5_0``, ``0x3`` or ``1e2``, which
the API server accepts) fails PreScore with upstream's message, so the cycle fails and the pod is
not bound, as with kube-scheduler; a required term that cannot be parsed only matches no node.

Reads: node labels and name, pod ``spec.nodeSelector`` and ``spec.affinity.nodeAffinity``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pysched.framework import (
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import (
    ConfigError,
    NodeSelector,
    ObjectError,
    PreferredTerm,
    aggregate_errors,
    parse_node_selector,
    parse_preferred_terms,
)
from pysched.framework.nodeinfo import NodeSpec
from pysched.plugins.helper.nodeselect import labels_mask, node_selector_mask, term_mask
from pysched.plugins.helper.normalize import default_normalize

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass
class AddedAffinity:
    """``addedAffinity``: a ``v1.NodeAffinity`` applied to every pod of the profile. The selector
    and terms stay API-shaped here; ``parse`` turns them into the matching types (and rejects bad
    ones when the configuration is decoded)."""

    required: dict[str, Any] | None = field(default=None, metadata=arg(json=REQUIRED))
    preferred: list[dict[str, Any]] | None = field(default=None, metadata=arg(json=PREFERRED))

    def parse(self, path: str) -> tuple[NodeSelector | None, tuple[PreferredTerm, ...]]:
        """(required selector or None, preferred terms); ConfigError naming the field if invalid."""
        try:
            req = parse_node_selector(self.required, f"{path}.{REQUIRED}")
            pref = parse_preferred_terms(self.preferred, f"{path}.{PREFERRED}")
        except ObjectError as exc:
            raise ConfigError(str(exc)) from None
        if req is not None:
            for t in req.terms:
                if not t.valid:
                    raise ConfigError(t.error)
            if not req.terms:
                raise ConfigError(f"{path}.{REQUIRED}.nodeSelectorTerms: must have at least one node selector term")
        for p in pref:
            if not p.term.valid:
                raise ConfigError(p.term.error)
        return req, pref

    def validate(self, path: str) -> None:
        self.parse(path)


@dataclass
class NodeAffinityArgs:
    KIND = "NodeAffinityArgs"

    added_affinity: AddedAffinity | None = None


class NodeAffinity(PreFilterPlugin[NodeAffinityArgs], FilterPlugin[NodeAffinityArgs], PreScorePlugin[NodeAffinityArgs],
                   ScorePlugin[NodeAffinityArgs], EnqueueExtensions):
    name = "NodeAffinity"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def __init__(self, args: NodeAffinityArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        added = self.args.added_affinity
        self.added_required: NodeSelector | None = None
        self.added_preferred: tuple[PreferredTerm, ...] = ()
        if added is not None:
            self.added_required, self.added_preferred = added.parse("addedAffinity")

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        req: NodeSelector | None = pod.required_affinity
        if req is None and self.added_required is None and not pod.node_selector:
            return None, Status(Code.SKIP)
        if req is None or not req.terms:
            return None, None
        names: set[str] | None = None
        for t in req.terms:
            term_names: set[str] | None = None
            for f in t.fields:
                if f.operator == "In":
                    s = {f.value}
                    term_names = s if term_names is None else term_names & s
            if term_names is None:
                return None, None
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        if names:
            return PreFilterResult(names), None
        return None, None

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        n = len(nodes)
        passed = np.ones(n, dtype=bool)
        failures: list[tuple[Code, str, np.ndarray]] = []
        if self.added_required is not None:
            ok = node_selector_mask(nodes, self.added_required)
            if not ok.all():
                failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED, ~ok))
                passed &= ok
        ok = np.ones(n, dtype=bool)
        if pod.node_selector:
            ok &= labels_mask(nodes, pod.node_selector)
        if pod.required_affinity is not None:
            ok &= node_selector_mask(nodes, pod.required_affinity)
        bad = passed & ~ok
        if bad.any():
            failures.append((Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD, bad))
            passed &= ok
        return FilterResult(passed, failures)

    # -- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        for t in pod.preferred_affinity:
            if t.errors:
                # NewPreferredSchedulingTerms refuses the pod's terms: the cycle fails.
                return Status(Code.ERROR, aggregate_errors(e for p in pod.preferred_affinity for e in p.errors))
        if not pod.preferred_affinity and not self.added_preferred:
            return Status(Code.SKIP)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.int64)
        terms: tuple[PreferredTerm, ...] = self.added_preferred + tuple(pod.preferred_affinity)
        for t in terms:
            out += term_mask(nodes, t.term).astype(np.int64) * t.weight
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch,
                        scores: np.ndarray) -> Status | None:
        default_normalize(scores, reverse=False)
        return None

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), self.schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel"), self.schedulable_after_node_change))

    def schedulable_after_node_change(self, pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
        """Upstream's isSchedulableAfterNodeChange: the node (added, or updated) now matches the
        profile's ``addedAffinity`` and the pod's nodeSelector and required affinity, and did not
        before (an added node did not exist before)."""
        if new is None:
            return False
        if self.added_required is not None and not self.added_required.matches(new.labels, new.name):
            return False
        if not _required_match(pod, new):
            return False
        return old is None or not _required_match(pod, old)


def _required_match(pod: PodInfo, node: NodeSpec) -> bool:
    """The pod's nodeSelector and required node affinity on one node (GetRequiredNodeAffinity)."""
    labels = node.labels
    if pod.node_selector and any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    req = pod.required_affinity
    return req is None or req.matches(labels, node.name)
