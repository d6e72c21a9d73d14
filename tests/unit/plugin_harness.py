"""Run one plugin's filter/score both ways (batch over the NodeTable, and per node) and compare."""

import numpy as np

from pysched.backend.cache.cache import SchedulerCache
from pysched.framework.cycle_state import CycleState
from pysched.framework.interface import NodeBatch
from pysched.framework.runtime import Handle
from pysched.framework.status import Code
from pysched.framework.nodeinfo import NodeSpec
from pysched.client.objectstore import ObjectStore
from pysched.framework.podinfo import PodInfo


class PluginHarness:
    def __init__(self, plugin_cls, args=None, nodes=(), pods=(), extra=None, objects=()):
        self.cache = SchedulerCache()
        self.objects = ObjectStore()
        for o in objects:
            self.objects.add(o)
        for n in nodes:
            self.cache.upsert_node(NodeSpec.from_dict(n))
        for p in pods:
            self.cache.upsert_pod(PodInfo.from_dict(p))
        handle = Handle(cache=self.cache, extra=extra or {}, objects=self.objects)
        a = plugin_cls.Args.from_dict(args or {}, "args") if plugin_cls.Args is not None else None
        self.plugin = plugin_cls(a, handle)

    def batch(self):
        return NodeBatch(self.cache.table, self.cache.table.order())

    def _state(self, pod, prescore=False):
        state = CycleState()
        pl = self.plugin
        self.status = None
        if hasattr(pl, "pre_filter") and not prescore:
            _, self.status = pl.pre_filter(state, pod, self.batch())
        if prescore and hasattr(pl, "pre_score"):
            self.status = pl.pre_score(state, pod, self.batch())
        return state

    def pre_filter(self, raw_pod):
        """The PreFilter status alone."""
        pod = PodInfo.from_dict(raw_pod)
        self._state(pod)
        return self.status

    def filter(self, raw_pod):
        """{node: None | (code, reasons)} from the batch path, asserting the per-node path agrees."""
        pod = PodInfo.from_dict(raw_pod)
        state = self._state(pod)
        batch = self.batch()
        names = batch.names
        per_node = {}
        for info in batch.infos:
            st = self.plugin.filter(state, pod, info)
            per_node[info.name] = None if st is None or st.is_success() else (st.code, st.reasons)
        fn = getattr(self.plugin, "filter_nodes", None)
        if fn is not None:
            res = fn(state, pod, batch)
            for i, name in enumerate(names):
                st = res.status_at(i)
                got = None if st is None else (st.code, tuple(sorted(st.reasons)))
                want = per_node[name]
                want = None if want is None else (want[0], tuple(sorted(want[1])))
                assert got == want, f"batch and per-node filter disagree on {name}: {got} != {want}"
        return per_node

    def score(self, raw_pod, normalize=True):
        """{node: score}, asserting batch and per-node scoring agree."""
        pod = PodInfo.from_dict(raw_pod)
        state = self._state(pod, prescore=True)
        batch = self.batch()
        per_node = np.array([self.plugin.score(state, pod, i) for i in batch.infos], dtype=np.int64)
        fn = getattr(self.plugin, "score_nodes", None)
        if fn is not None:
            got = np.asarray(fn(state, pod, batch), dtype=np.int64)
            assert got.tolist() == per_node.tolist(), f"batch {got.tolist()} != per-node {per_node.tolist()}"
        scores = per_node.copy()
        norm = getattr(self.plugin, "normalize_score", None)
        if normalize and norm is not None:
            norm(state, pod, batch, scores)
        return dict(zip(batch.names, scores.tolist()))


UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
UNS = Code.UNSCHEDULABLE
