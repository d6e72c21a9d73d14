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
preferred terms), normalised so the best node gets 100.

Reads: node labels and name, pod ``spec.nodeSelector`` and ``spec.affinity.nodeAffinity``.
"""

from __future__ import annotations

import numpy as np

from pysched.apis.config import ConfigError
from pysched.framework.args import strict
from pysched.framework.interface import (ClusterEvent, ClusterEventWithHint, EnqueueExtensions,
                                           FilterPlugin, FilterResult, PreFilterPlugin,
                                           PreFilterResult, PreScorePlugin, ScorePlugin)
from pysched.framework.status import Code, Status
from pysched.apis.core.model import ObjectError, parse_node_selector, parse_preferred_terms
from pysched.plugins.helper.nodeselect import labels_mask, node_selector_mask, term_mask

from pysched.plugins.helper.normalize import default_normalize

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


class NodeAffinityArgs:
    def __init__(self, added_required=None, added_preferred=(), raw=None):
        self.added_required = added_required
        self.added_preferred = added_preferred
        self.raw = raw or {}

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "NodeAffinityArgs":
        raw = strict(raw, path, ("addedAffinity",))
        added = raw.get("addedAffinity")
        if added is None:
            return cls()
        added = strict(added, f"{path}.addedAffinity", ("requiredDuringSchedulingIgnoredDuringExecution",
                                                         "preferredDuringSchedulingIgnoredDuringExecution"))
        try:
            req_raw = added.get("requiredDuringSchedulingIgnoredDuringExecution")
            req = parse_node_selector(req_raw, f"{path}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution")
            pref = parse_preferred_terms(added.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                         f"{path}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution")
        except ObjectError as exc:
            raise ConfigError(str(exc)) from None
        if req is not None:
            for t in req.terms:
                if not t.valid:
                    raise ConfigError(t.error)
            if not req.terms:
                raise ConfigError(f"{path}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                                  ".nodeSelectorTerms: must have at least one node selector term")
        for t in pref:
            if not t.term.valid:
                raise ConfigError(t.term.error)
        return cls(req, pref, {"addedAffinity": added})

    def to_dict(self) -> dict:
        return dict(self.raw)


def _preferred_score(terms, labels, name) -> int:
    return sum(t.weight for t in terms if t.term.matches(labels, name))


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = "NodeAffinity"
    Args = NodeAffinityArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or NodeAffinityArgs(), handle)

    # -- filter --------------------------------------------------------------------------------

    def pre_filter(self, state, pod, nodes):
        req = pod.required_affinity
        if req is None and self.args.added_required is None and not pod.node_selector:
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

    def filter(self, state, pod, node):
        labels, name = node.labels, node.name
        added = self.args.added_required
        if added is not None and not added.matches(labels, name):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
        sel = pod.node_selector
        if sel:
            for k, v in sel.items():
                if labels.get(k) != v:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        req = pod.required_affinity
        if req is not None and not req.matches(labels, name):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        return None

    def filter_nodes(self, state, pod, nodes):
        table, slots = nodes.table, nodes.slots
        n = len(slots)
        passed = np.ones(n, dtype=bool)
        failures = []
        added = self.args.added_required
        if added is not None:
            ok = node_selector_mask(nodes, added)
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

    def pre_score(self, state, pod, nodes):
        if not pod.preferred_affinity and not self.args.added_preferred:
            return Status(Code.SKIP)
        return None

    def score(self, state, pod, node):
        return (_preferred_score(self.args.added_preferred, node.labels, node.name)
                + _preferred_score(pod.preferred_affinity, node.labels, node.name))

    def score_nodes(self, state, pod, nodes):
        out = np.zeros(len(nodes), dtype=np.int64)
        for t in tuple(self.args.added_preferred) + tuple(pod.preferred_affinity):
            out += term_mask(nodes, t.term).astype(np.int64) * t.weight
        return out

    def normalize_score(self, state, pod, nodes, scores):
        default_normalize(scores, reverse=False)
        return None

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel")))
