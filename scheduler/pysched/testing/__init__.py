"""Testing helpers for plugin authors: run one plugin against a small, real snapshot.

``PluginTester`` builds the scheduler's own cache from nodes and pods given as API dicts (the
shape ``kubectl get -o yaml`` prints; ``pysched.testing.objects`` has builders), wraps it in a
framework Handle, decodes the plugin's Args from a dict as ``pluginConfig`` would, and calls the
plugin's extension points the way the framework does. Nothing is mocked: the snapshot, the node
table and the pod-count indices are the production ones.

Each ``filter``/``score`` call also checks a property every plugin must have: judging the nodes
one at a time gives the same answer as judging them all at once (a plugin that looked at the
batch's other nodes by mistake fails here).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pysched.backend.cache.cache import SchedulerCache
from pysched.client.objectstore import ObjectStore
from pysched.framework.args import load_args
from pysched.framework.cycle_state import CycleState
from pysched.framework.handle import Handle
from pysched.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, FilterResult, NodeBatch, Plugin
from pysched.framework.loadmetrics import LoadMetrics
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo
from pysched.framework.runtime import integral_scores
from pysched.framework.status import Code, Status
from pysched.testing.objects import PAUSE_IMAGE, make_node, make_pod

UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
UNS = Code.UNSCHEDULABLE

__all__ = ["PAUSE_IMAGE", "PluginTester", "UAU", "UNS", "make_node", "make_pod"]


class PluginTester:
    """One plugin instance over a snapshot of ``nodes`` and ``pods`` (API dicts)."""

    def __init__(self, plugin_cls: type[Plugin], args: dict[str, Any] | None = None, *,
                 nodes: Iterable[dict[str, Any]] = (), pods: Iterable[dict[str, Any]] = (),
                 objects: Iterable[dict[str, Any]] = (),
                 ignored_extended_resources: Iterable[str] = (), load: LoadMetrics | None = None):
        self.cache = SchedulerCache()
        self.objects = ObjectStore()
        for o in objects:
            self.objects.add(o)
        for n in nodes:
            self.cache.upsert_node(NodeSpec.from_dict(n))
        for p in pods:
            self.cache.upsert_pod(PodInfo.from_dict(p))
        self.handle = Handle(snapshot=self.cache, objects=self.objects,
                             ignored_extended_resources=frozenset(ignored_extended_resources), load=load)
        a = load_args(plugin_cls.Args, args, "args") if plugin_cls.Args is not None else None
        self.plugin = plugin_cls(a, self.handle)
        self.status: Status | None = None

    def add_pod(self, pod: dict[str, Any]) -> None:
        """Put a pod on its ``spec.nodeName`` (as the informer would report it)."""
        self.cache.upsert_pod(PodInfo.from_dict(pod))

    def nodes(self) -> NodeBatch:
        """Every node, in the snapshot's order."""
        return self.handle.all_nodes()

    def _state(self, pod: PodInfo, *, prescore: bool = False) -> CycleState:
        state = CycleState()
        pl: Any = self.plugin
        self.status = None
        if not prescore and hasattr(pl, "pre_filter"):
            _, self.status = pl.pre_filter(state, pod, self.nodes())
        if prescore and hasattr(pl, "pre_score"):
            self.status = pl.pre_score(state, pod, self.nodes())
        return state

    def pre_filter(self, raw_pod: dict[str, Any]) -> Status | None:
        """The PreFilter status alone."""
        self._state(PodInfo.from_dict(raw_pod))
        return self.status

    def filter(self, raw_pod: dict[str, Any]) -> dict[str, tuple[Code, tuple[str, ...]] | None]:
        """PreFilter, then Filter over every node: ``{node: None | (code, sorted reasons)}``."""
        pod = PodInfo.from_dict(raw_pod, keep_raw=True)
        state = self._state(pod)
        nodes = self.nodes()
        whole = self._verdicts(self.plugin.filter(state, pod, nodes), nodes)  # type: ignore[attr-defined]
        for i in range(len(nodes)):
            one = nodes.subset(np.arange(len(nodes)) == i)
            alone = self._verdicts(self.plugin.filter(state, pod, one), one)  # type: ignore[attr-defined]
            assert alone == {k: whole[k] for k in alone}, f"filter of {one.names} alone {alone} != in the batch"
        return whole

    @staticmethod
    def _verdicts(res: FilterResult, nodes: NodeBatch) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, name in enumerate(nodes.names):
            st = res.status_at(i)
            out[name] = None if st is None else (st.code, tuple(sorted(st.reasons)))
        return out

    def score(self, raw_pod: dict[str, Any], normalize: bool = True) -> dict[str, int]:
        """PreScore, then Score (and NormalizeScore) over every node: ``{node: score}``."""
        pod = PodInfo.from_dict(raw_pod, keep_raw=True)
        state = self._state(pod, prescore=True)
        nodes = self.nodes()
        pl: Any = self.plugin
        scores = integral_scores(pl.score(state, pod, nodes), self.plugin.name)
        for i in range(len(nodes)):
            one = nodes.subset(np.arange(len(nodes)) == i)
            alone = integral_scores(pl.score(state, pod, one), self.plugin.name)
            assert alone.tolist() == [int(scores[i])], \
                f"score of {one.names} alone {alone.tolist()} != {int(scores[i])}"
        norm = getattr(pl, "normalize_score", None)
        if normalize and norm is not None:
            norm(state, pod, nodes, scores)
        if normalize:
            out = scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)]
            assert not out.size, (f"{self.plugin.name}: score {int(out[0])} is outside [{MIN_NODE_SCORE}, "
                                  f"{MAX_NODE_SCORE}] after normalizing (the scheduler fails the cycle on it)")
        return dict(zip(nodes.names, scores.tolist()))
