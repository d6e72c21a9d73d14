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

import asyncio
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

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
from pysched.framework.status import Code, Status
from pysched.runtime.framework import integral_scores
from pysched.runtime.plugin_metrics import PrometheusPluginMetrics
from pysched.testing.objects import PAUSE_IMAGE, make_node, make_pod

UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
UNS = Code.UNSCHEDULABLE

__all__ = ["PAUSE_IMAGE", "PluginTester", "ProfileHarness", "UAU", "UNS", "make_node", "make_pod"]


PluginT = TypeVar("PluginT", bound=Plugin[Any])


class PluginTester(Generic[PluginT]):
    """One plugin instance (``plugin``, typed as the class given) over a snapshot of ``nodes`` and
    ``pods`` (API dicts); ``args`` as a profile's ``pluginConfig`` gives them (camelCase);
    ``feature_gates`` the kube feature gates that are on (``Handle.feature_gates``)."""

    def __init__(self, plugin_cls: type[PluginT], args: dict[str, Any] | None = None, *,
                 nodes: Iterable[dict[str, Any]] = (), pods: Iterable[dict[str, Any]] = (),
                 objects: Iterable[dict[str, Any]] = (),
                 ignored_extended_resources: Iterable[str] = (), load: LoadMetrics | None = None,
                 feature_gates: Iterable[str] = ()):
        self.cache = SchedulerCache()
        self.objects = ObjectStore()
        for o in objects:
            self.objects.add(o)
        for n in nodes:
            self.cache.upsert_node(NodeSpec.from_dict(n))
        for p in pods:
            self.cache.upsert_pod(PodInfo.from_dict(p))
        self.handle = Handle(snapshot=self.cache, objects=self.objects,
                             ignored_extended_resources=frozenset(ignored_extended_resources), load=load,
                             metrics=PrometheusPluginMetrics(""), feature_gates=frozenset(feature_gates))
        a = load_args(plugin_cls.Args, args, "args") if plugin_cls.Args is not None else None
        self.plugin: PluginT = plugin_cls(a, self.handle)
        self.status: Status | None = None

    def add_pod(self, pod: dict[str, Any]) -> None:
        """Put a pod on its ``spec.nodeName`` (as the informer would report it)."""
        self.cache.upsert_pod(PodInfo.from_dict(pod))

    def add_node(self, node: dict[str, Any]) -> None:
        """Add a node, or replace the one of that name (as the informer would report it)."""
        self.cache.upsert_node(NodeSpec.from_dict(node))

    def assume(self, pod: dict[str, Any], node: str) -> None:
        """Put a pod on ``node`` as assumed: chosen by a scheduling cycle, its bind not confirmed yet
        (plugins count assumed pods as they count bound ones)."""
        self.cache.assume(PodInfo.from_dict(pod), node)

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

    # -- the later extension points: Reserve/Unreserve, Permit, PostFilter, PreBind/Bind ---------

    def reserve(self, raw_pod: dict[str, Any], node: str) -> Status | None:
        """PreFilter, then Reserve on ``node``: what the framework calls once the node is chosen."""
        result: Status | None = self._after_pre_filter("reserve", raw_pod, node)
        return result

    def unreserve(self, raw_pod: dict[str, Any], node: str) -> None:
        """Unreserve on ``node`` (it must undo ``reserve`` and never fail)."""
        self._after_pre_filter("unreserve", raw_pod, node)

    def permit(self, raw_pod: dict[str, Any], node: str) -> tuple[Status | None, float]:
        """PreFilter, then Permit on ``node``: ``(status, timeout seconds)``; ``Code.WAIT`` holds the pod."""
        result: tuple[Status | None, float] = self._after_pre_filter("permit", raw_pod, node)
        return result

    def post_filter(self, raw_pod: dict[str, Any], diagnosis: Any = None) -> tuple[Any, Status | None]:
        """PreFilter, then PostFilter (as after a cycle no node passed): ``(PostFilterResult, status)``."""
        result: tuple[Any, Status | None] = self._after_pre_filter("post_filter", raw_pod, diagnosis)
        return result

    def pre_bind(self, raw_pod: dict[str, Any], node: str) -> Status | None:
        """PreFilter, then PreBind on ``node``, run to completion (PreBind is a coroutine)."""
        result: Status | None = asyncio.run(self._after_pre_filter("pre_bind", raw_pod, node))
        return result

    def bind(self, raw_pod: dict[str, Any], node: str) -> Status | None:
        """Bind on ``node``, run to completion (Bind is a coroutine)."""
        result: Status | None = asyncio.run(self._after_pre_filter("bind", raw_pod, node))
        return result

    def _after_pre_filter(self, point: str, raw_pod: dict[str, Any], *args: Any) -> Any:
        """``point`` of the plugin for ``raw_pod``, with the CycleState its PreFilter wrote."""
        pod = PodInfo.from_dict(raw_pod, keep_raw=True)
        return self._call(point, self._state(pod), pod, *args)

    def _call(self, point: str, *args: Any) -> Any:
        method = getattr(self.plugin, point, None)
        if method is None:
            raise TypeError(f"{self.plugin.name} does not implement {point}")
        return method(*args)


class ProfileHarness:
    """A whole profile with your plugins, over a snapshot, without an API server.

    ``plugins`` are registered beside the in-tree ones as the ``pysched.plugins`` entry points would
    register them; ``profile`` is one KubeSchedulerConfiguration profile (a dict as in the file:
    ``plugins``, ``pluginConfig``; default: kube-scheduler's default profile). ``schedule(pod)``
    runs the production scheduling cycle - every plugin, Reserve and Permit, the random
    tie-break with ``seed`` - and assumes the pod on its node as the live scheduler does, so the
    next pod sees it. The outcome has ``node``, ``code``, ``message`` and the trace:
    ``scores(outcome)`` gives each Score plugin's weighted score per node.
    """

    def __init__(self, profile: dict[str, Any] | None = None, *, plugins: Iterable[type[Plugin]] = (),
                 nodes: Iterable[dict[str, Any]] = (), pods: Iterable[dict[str, Any]] = (),
                 objects: Iterable[dict[str, Any]] = (), seed: int = 0) -> None:
        from pysched.apis import config as configmod
        from pysched.profile import default_registry
        from pysched.tools.offline import OfflineScheduler

        registry = default_registry()
        for cls in plugins:
            registry.register(cls)
        prof = dict(profile or {})
        prof.setdefault("schedulerName", "pysched")
        cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                               "leaderElection": {"leaderElect": False}, "profiles": [prof]})
        self.engine = OfflineScheduler(cfg, registry=registry, seed=seed)
        for o in objects:
            self.engine.add_object(o)
        for n in nodes:
            self.engine.add_node(n)
        for p in pods:
            self.engine.add_pod(p)

    def schedule(self, raw_pod: dict[str, Any], *, explain: bool = True) -> Any:
        """One scheduling cycle for ``raw_pod`` (its ``schedulerName`` is ignored: the harness's
        profile schedules it); the ``Outcome`` (``node`` None when it fits nowhere, ``message``
        kube-scheduler's)."""
        pod = dict(raw_pod)
        pod["spec"] = {**pod.get("spec", {}), "schedulerName": self.engine.profile}
        return self.engine.schedule(pod, explain=explain)

    @staticmethod
    def scores(outcome: Any) -> dict[str, dict[str, int]]:
        """``{plugin: {node: weighted score}}`` of a traced ``schedule``."""
        trace = outcome.trace or {}
        return {plugin: {node: v["weighted"] for node, v in per_node.items()}
                for plugin, per_node in (trace.get("score") or {}).items()}
