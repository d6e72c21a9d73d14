"""Framework: one profile's plugins wired into the extension points, and the code that runs them.

Built from a profile of the configuration the way kube-scheduler builds ``frameworkImpl``:
default MultiPoint plugins merged with the profile's (``merged_plugin_sets``), MultiPoint
expanded into every extension point a plugin implements (specific extension point settings
win), one instance per plugin shared by all its extension points, score weights defaulting to 1.

Filters run in order over the whole candidate batch; each node's status is that of the first
filter that rejects it, as upstream's per-node loop would give. Batch-capable plugins get the
batch at once, the others are called per node. Scores are computed per plugin, normalised,
range-checked (0..100) and weighted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np

from pysched import metrics
from pysched.apis.config import ConfigError, PluginSet, Profile, merged_plugin_sets
from pysched.apis.core.errors import ApiError
from pysched.framework.args import load_args
from pysched.framework.cycle_state import TRACE_KEY, CycleState
from pysched.framework.handle import Handle
from pysched.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    READS_ANY,
    BindPlugin,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    OverlayBatch,
    PermitPlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    Plugin,
    PodWatcher,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreemptionGate,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    WaitingPod,
)
from pysched.framework.podgroups import PodGroupSource
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Diagnosis, FrameworkError, Status
from pysched.util.goduration import go_duration
from pysched.util.logs import kv

REQUEST_VECTOR_CACHE = 50_000   # request rows kept for on-paper evaluation (cleared when full)
log = logging.getLogger("pysched.framework.runtime")



class CycleTrace:
    """Per-plugin, per-node record of one cycle (for --explain and /debug/explain)."""

    def __init__(self) -> None:
        self.pre_filter: list[tuple[str, str]] = []
        self.filters: list[tuple[str, dict[str, str]]] = []  # plugin -> {node: "passed"|reason}
        self.scores: dict[str, dict[str, dict[str, int]]] = {}  # plugin -> node -> raw/normalized/weighted
        self.totals: dict[str, int] = {}
        self.extenders: list[dict[str, Any]] = []
        self.selected: str = ""
        self.feasible: list[str] = []
        self.error: str = ""
        self.nominated: dict[str, Any] | None = None   # preemption: {"node": ..., "victims": [ns/name]}
        self.permit: dict[str, Any] | None = None      # Permit's verdict: {"status": ..., "message": ...}
        self.notes: dict[str, dict[str, str]] = {}     # plugin -> node -> what it read (CycleState.explain)

    def to_dict(self) -> dict[str, Any]:
        out = {"preFilter": [{"plugin": p, "status": s} for p, s in self.pre_filter],
               "filter": [{"plugin": p, "nodes": n} for p, n in self.filters],
               "score": self.scores, "totalScores": self.totals, "extenders": self.extenders,
               "feasibleNodes": self.feasible, "selectedNode": self.selected, "error": self.error}
        if self.nominated is not None:
            out["preemption"] = self.nominated
        if self.permit is not None:
            out["permit"] = self.permit
        if self.notes:
            out["scoreNotes"] = self.notes
        return out


P = TypeVar("P", bound=Plugin)


def _of(kind: type[P], plugins: list[Plugin]) -> list[P]:
    """``plugins`` as implementers of ``kind`` (``_expand`` only lists plugins that implement it)."""
    return [p for p in plugins if isinstance(p, kind)]


def _implements(plugin: Plugin, ep: str) -> bool:
    return isinstance(plugin, EXTENSION_POINTS[ep])


def _user_path(profile: Profile, ep: str, ref: Any) -> str:
    """Where ``ref`` is written in the user's file: its index in the profile's own list for ``ep``
    (not in the list merged with kube-scheduler's defaults), or the defaults' when it came from them."""
    own = profile.plugins.get(ep)
    if own is not None:
        for i, mine in enumerate(own.enabled):
            if mine is ref:
                return f"{profile.path}.plugins.{ep}.enabled[{i}]"
    return f"{profile.path}.plugins.{ep} (kube-scheduler's default {ref.name})"


def _unknown_hint(name: str, registry: Any) -> str:
    """``; did you mean 'X'?`` when a registered name is close, then every known name."""
    import difflib

    known = sorted(registry)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75) or [
        k for k in known if k.lower() == name.lower()]
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (known: {', '.join(known)})"


def integral_scores(result: Any, name: str) -> np.ndarray:
    """A Score plugin's answer as int64. Integers pass as they are (the hot path: no copy for an
    int64 array); floats only when every one is a whole number - ``np.full(n, 0.5)`` must not
    silently become a row of zeros."""
    arr = np.asarray(result)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (arr == np.floor(arr))
        if whole.all():
            return arr.astype(np.int64)
        bad = float(arr[~whole][0])
        raise FrameworkError(Status(Code.ERROR, f"plugin {name!r} returned a score that is not an integer ({bad!r}): "
                                                f"scores are integers in [0, 100]; scale and round, e.g. "
                                                f"np.rint(x * 100).astype(np.int64)", plugin=name))
    raise FrameworkError(Status(Code.ERROR, f"plugin {name!r} returned scores of type {arr.dtype} "
                                            f"({type(result).__name__}); expected integers in [0, 100]", plugin=name))


class Framework:
    def __init__(self, profile: Profile, registry: dict[str, type[Plugin]], handle: Handle):
        self.profile = profile
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self.handle = handle
        path = profile.path
        sets = merged_plugin_sets(profile, set(registry), handle.kube_version, handle.feature_gates)
        self.plugin_sets = sets

        needed: dict[str, str] = {}
        for ep, ps in sets.items():
            for ref in ps.enabled:
                where = _user_path(profile, ep, ref)
                if ref.name not in registry:
                    if broken := getattr(registry, "unloadable", {}).get(ref.name):
                        raise ConfigError(f"{where}: plugin {ref.name!r} could not be loaded: {broken}")
                    raise ConfigError(f"{where}: plugin {ref.name!r} does not exist{_unknown_hint(ref.name, registry)}")
                needed.setdefault(ref.name, where)
        names = list(profile.plugin_config)
        for i, name in enumerate(names):
            if name not in registry:
                if broken := getattr(registry, "unloadable", {}).get(name):
                    raise ConfigError(f"{path}.pluginConfig[{i}].name: plugin {name!r} could not be loaded: {broken}")
                raise ConfigError(f"{path}.pluginConfig[{i}].name: plugin {name!r} does not exist"
                                  f"{_unknown_hint(name, registry)}")
        #: pluginConfig entries for plugins this profile does not enable: kube-scheduler ignores their
        #: args; they are reported (``ignored_plugin_config``) so that a typo in plugins: is noticed.
        self.ignored_plugin_config = [(f"{path}.pluginConfig[{i}]", name) for i, name in enumerate(names)
                                      if name not in needed]
        for field, name in self.ignored_plugin_config:
            # Validated all the same, as kube-scheduler validates every pluginConfig entry: enabling
            # the plugin later must not be the moment a typo in its args is found.
            cls, raw_args = registry[name], profile.plugin_config.get(name)
            if cls.Args is not None:
                load_args(cls.Args, raw_args, f"{field}.args", handle.feature_gates)
            elif raw_args:
                raise ConfigError(f"{field}.args: plugin {name} takes no arguments")

        handle.framework = self
        self.plugins: dict[str, Plugin] = {}
        self.plugin_args: dict[str, Any] = {}
        for name in needed:
            cls = registry[name]
            raw_args = profile.plugin_config.get(name)
            apath = (f"{path}.pluginConfig[{names.index(name)}].args" if name in names
                     else f"{path}.pluginConfig[{name}].args")
            args = None
            if cls.Args is not None:
                args = load_args(cls.Args, raw_args, apath, handle.feature_gates)
            elif raw_args:
                raise ConfigError(f"{apath}: plugin {name} takes no arguments")
            try:
                self.plugins[name] = cls(args, handle)
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - a plugin's constructor rejected its args
                raise ConfigError(f"{apath}: {name}: {exc}") from None
            self.plugin_args[name] = args

        self.weights: dict[str, int] = {}
        self.placement_weights: dict[str, int] = {}
        ordered = {ep: self._expand(ep, sets) for ep in EXTENSION_POINTS}
        self.pre_enqueue: list[PreEnqueuePlugin] = _of(PreEnqueuePlugin, ordered["preEnqueue"])
        self.queue_sort: list[QueueSortPlugin] = _of(QueueSortPlugin, ordered["queueSort"])
        self.pre_filter: list[PreFilterPlugin] = _of(PreFilterPlugin, ordered["preFilter"])
        self.filter: list[FilterPlugin] = _of(FilterPlugin, ordered["filter"])
        # A PreemptionGate's own PostFilter (Coscheduling's release of the waiting members) runs
        # after the others: the gate judges a preemption by the state before that PostFilter
        # changes it, so ``postFilter: [Coscheduling, CapacityScheduling]`` reclaims for a gang as
        # ``[CapacityScheduling, Coscheduling]`` does. Otherwise the configured order.
        post_filter = _of(PostFilterPlugin, ordered["postFilter"])
        self.post_filter: list[PostFilterPlugin] = (
            [p for p in post_filter if not isinstance(p, PreemptionGate)]
            + [p for p in post_filter if isinstance(p, PreemptionGate)])
        self.pre_score: list[PreScorePlugin] = _of(PreScorePlugin, ordered["preScore"])
        self.score: list[ScorePlugin] = _of(ScorePlugin, ordered["score"])
        self.reserve: list[ReservePlugin] = _of(ReservePlugin, ordered["reserve"])
        self.permit: list[PermitPlugin] = _of(PermitPlugin, ordered["permit"])
        self.pre_bind: list[PreBindPlugin] = _of(PreBindPlugin, ordered["preBind"])
        self.bind: list[BindPlugin] = _of(BindPlugin, ordered["bind"])
        self.post_bind: list[PostBindPlugin] = _of(PostBindPlugin, ordered["postBind"])
        # The pod-group cycle (GenericWorkload): GangScheduling's PlacementFeasible, and with
        # TopologyAwareWorkloadScheduling the placement plugins.
        self.placement_generate: list[PlacementGeneratePlugin] = _of(PlacementGeneratePlugin,
                                                                     ordered["placementGenerate"])
        self.placement_score: list[PlacementScorePlugin] = _of(PlacementScorePlugin, ordered["placementScore"])
        for placement_scorer in self.placement_score:
            name = placement_scorer.name
            self.placement_weights[name] = self.placement_weights.get(name) or 1
        # The plugins whose gangs go through the pod-group cycle (framework.podgroups.PodGroupSource):
        # GangScheduling with GenericWorkload on; Coscheduling unless schedulerPluginsCompatible.
        self.group_sources: list[PodGroupSource] = [
            p for p in self.plugins.values() if getattr(p, "group_cycle", False)   # type: ignore[misc]
            and (p.name != "GangScheduling" or "GenericWorkload" in handle.feature_gates)]
        if len(self.queue_sort) != 1:
            raise ConfigError(f"{path}.plugins.queueSort: only one queue sort plugin can be enabled, "
                              f"got {len(self.queue_sort)}")
        if not self.bind:
            raise ConfigError(f"{path}.plugins.bind: at least one bind plugin is needed")
        total = 0
        for pl in self.score:
            w = self.weights.get(pl.name) or 1
            self.weights[pl.name] = w
            total += w * MAX_NODE_SCORE
            if total > 2**63 - 1:
                raise ConfigError(f"{path}.plugins.score: total score of Score plugins could overflow")
        # Plugins that watch pods themselves, and those that may veto a preemption (gangs).
        self.pod_watchers: list[PodWatcher] = [p for p in self.plugins.values() if isinstance(p, PodWatcher)]
        self.preemption_gates: list[PreemptionGate] = [p for p in self.plugins.values()
                                                       if isinstance(p, PreemptionGate)]
        self._batch_filter = {pl.name: pl.filter for pl in self.filter}
        # On-paper evaluation (OverlayBatch): pods' request rows, and the nominated pods found for
        # the cycle in progress.
        self._request_vectors: dict[tuple[str, str, int], np.ndarray] = {}
        self._nominated_found: tuple[str, dict[str, list[PodInfo]]] = ("", {})
        # What run_score needs of each Score plugin, looked up once: (name, score, normalize_score
        # or None, weight).
        self._score_steps = [(pl.name, pl.score, getattr(pl, "normalize_score", None), self.weights[pl.name])
                             for pl in self.score]

    # -- construction --------------------------------------------------------------------------

    def _expand(self, ep: str, sets: dict[str, PluginSet]) -> list[Plugin]:
        specific = sets.get(ep, PluginSet())
        enabled_names = [r.name for r in specific.enabled]
        for r in specific.enabled:
            pl = self.plugins[r.name]
            if not _implements(pl, ep):
                raise ConfigError(f"{self.profile.path}.plugins.{ep}: plugin {r.name!r} does not implement {ep}")
            if ep == "score" and r.weight:
                self.weights[r.name] = r.weight
            if ep == "placementScore" and r.weight:
                self.placement_weights[r.name] = r.weight
        disabled = set(specific.disabled)
        if "*" in disabled:
            return [self.plugins[n] for n in enabled_names]
        multi_enabled: list[str] = []
        overrides: list[str] = []
        for r in sets.get("multiPoint", PluginSet()).enabled:
            pl = self.plugins[r.name]
            if not _implements(pl, ep) or r.name in disabled:
                continue
            if r.name in enabled_names:
                overrides.append(r.name)
                continue
            if r.name in multi_enabled:
                raise ConfigError(f"{self.profile.path}.plugins.multiPoint: "
                                  f"plugin {r.name!r} already registered as {ep}")
            multi_enabled.append(r.name)
            if ep == "score" and r.name not in self.weights and r.weight:
                self.weights[r.name] = r.weight
            if ep == "placementScore" and r.name not in self.placement_weights and r.weight:
                self.placement_weights[r.name] = r.weight
        out = [n for n in enabled_names if n in overrides]
        out += multi_enabled
        out += [n for n in enabled_names if n not in overrides]
        return [self.plugins[n] for n in out]

    def preemption_blocked(self, pod: PodInfo) -> str:
        """Why ``pod`` may not preempt (a ``PreemptionGate`` said so), or ""."""
        for gate in self.preemption_gates:
            why = gate.preemption_blocked(pod)
            if why:
                return why
        return ""

    def has_filter_plugins(self) -> bool:
        return bool(self.filter)

    def has_score_plugins(self) -> bool:
        return bool(self.score)

    # -- queue side ----------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        for pl in self.pre_enqueue:
            st = pl.pre_enqueue(pod)
            if st is not None and not st.is_success():
                return st.with_plugin(pl.name)
        return None

    # -- scheduling cycle ----------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo,
                       nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """As ``RunPreFilterPlugins``: (node restriction, status, plugins that restricted nodes)."""
        t0 = time.perf_counter()
        result: PreFilterResult | None = None
        with_nodes: set[str] = set()
        status: Status | None = None
        trace = state.get(TRACE_KEY)
        try:
            for pl in self.pre_filter:
                tp = time.perf_counter()
                try:
                    res, st = pl.pre_filter(state, pod, nodes)
                except Exception as exc:  # noqa: BLE001 - a plugin bug must not kill the scheduler
                    log.exception("prefilter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                    res, st = None, Status.as_error(exc)
                if state.record_plugin_metrics:
                    metrics.plugin_duration(pl.name, "PreFilter", st, time.perf_counter() - tp)
                if trace is not None:
                    trace.pre_filter.append((pl.name, "Skip" if st is not None and st.is_skip() else
                                             (st.message() if st is not None and not st.is_success() else "passed")))
                if st is not None and st.is_skip():
                    state.skip_filter_plugins.add(pl.name)
                    continue
                if st is not None and not st.is_success():
                    st.with_plugin(pl.name)
                    if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        status = st
                        return None, st, set()
                    if st.code in (Code.UNSCHEDULABLE, Code.PENDING):
                        status = st
                        continue
                    status = wrap_error(st, f'running PreFilter plugin "{pl.name}": ', pl.name)
                    return None, status, set()
                if res is not None and not res.all_nodes():
                    with_nodes.add(pl.name)
                result = res if result is None else result.merge(res)
                if result is not None and not result.all_nodes() and not result.node_names:
                    names = sorted(with_nodes)
                    msg = (f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1 else
                           f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously")
                    status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
                    return result, status, with_nodes
            return result, status, with_nodes
        finally:
            metrics.extension_point("PreFilter", status, self.profile_name, time.perf_counter() - t0)

    def run_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch, diagnosis: Diagnosis | None) -> np.ndarray:
        """Boolean mask over ``batch``: nodes that pass every filter.

        Nodes with nominated pods of equal or higher priority (preemptors waiting for their
        victims to leave) are checked one by one with those pods counted and without
        (``filter_with_nominated``); all the others - every node when nothing is nominated - in
        one batch."""
        if self.handle.nominator:
            special = self._nominated_positions(pod, batch)
            if special is not None:
                return self._run_filters_split(state, pod, batch, diagnosis, special)
        return self._run_filters_batch(state, pod, batch, diagnosis)

    def _run_filters_batch(self, state: CycleState, pod: PodInfo, batch: NodeBatch,
                           diagnosis: Diagnosis | None) -> np.ndarray:
        t0 = time.perf_counter()
        n = len(batch)
        keep_idx = np.arange(n)
        cur = batch
        trace = state.get(TRACE_KEY)
        record = state.record_plugin_metrics
        code = Code.SUCCESS
        try:
            for pl in self.filter:
                if not len(cur):
                    break
                if pl.name in state.skip_filter_plugins:
                    continue
                tp = time.perf_counter() if record else 0.0
                try:
                    res = self._batch_filter[pl.name](state, pod, cur)
                except FrameworkError as exc:
                    raise FrameworkError(filter_error(exc.status, pl.name)) from exc
                except Exception as exc:  # noqa: BLE001
                    log.exception("filter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                    raise FrameworkError(filter_error(Status.as_error(exc, pl.name), pl.name)) from exc
                if record:
                    metrics.plugin_duration(pl.name, "Filter", None, time.perf_counter() - tp)
                if trace is not None:
                    names = cur.names
                    trace.filters.append((pl.name, {names[i]: _verdict(res, i) for i in range(len(names))}))
                if not res.passed.all():
                    if diagnosis is not None:
                        diagnosis.add_batch(pl.name, _names_of(cur), res)
                    cur = cur.subset(res.passed)
                    keep_idx = keep_idx[res.passed]
        except FrameworkError:
            code = Code.ERROR
            raise
        finally:
            metrics.extension_point_code("Filter", code, self.profile_name, time.perf_counter() - t0)
        mask = np.zeros(n, dtype=bool)
        mask[keep_idx] = True
        return mask

    # -- nominated pods and what-if evaluation (RunFilterPluginsWithNominatedPods) ---------------

    def _nominated_positions(self, pod: PodInfo, batch: NodeBatch) -> np.ndarray | None:
        """Positions in ``batch`` of the nodes where equal-or-higher-priority pods are nominated."""
        nom = self.handle.nominator
        assert nom is not None
        table = batch.table
        by_name = table.slot_by_name
        found: dict[str, list[PodInfo]] = {}
        for n in nom.node_names():
            if n in by_name:
                pods = self.nominated_pods_to_add(pod, n)
                if pods:
                    found[n] = pods
        self._nominated_found = (pod.uid, found)   # for _nominated_on_paper, this cycle
        if not found:
            return None
        pos = np.flatnonzero(np.isin(batch.slots, np.array([by_name[n] for n in found], dtype=np.int64)))
        return pos if len(pos) else None

    def _run_filters_split(self, state: CycleState, pod: PodInfo, batch: NodeBatch, diagnosis: Diagnosis | None,
                           special: np.ndarray) -> np.ndarray:
        n = len(batch)
        rest = np.ones(n, dtype=bool)
        rest[special] = False
        mask = np.zeros(n, dtype=bool)
        if rest.any():
            mask[rest] = self._run_filters_batch(state, pod, batch.subset(rest), diagnosis)
        infos = batch.table.infos
        if self.on_paper(state, pod) and self._nominated_on_paper(state, pod, batch, special, mask, diagnosis):
            return mask
        for i in special.tolist():
            name = infos[int(batch.slots[i])].spec.name
            _settle(mask, i, name, self.filter_with_nominated(state, pod, name, simulated=False), diagnosis)
        return mask

    def _nominated_on_paper(self, state: CycleState, pod: PodInfo, batch: NodeBatch, special: np.ndarray,
                            mask: np.ndarray, diagnosis: Diagnosis | None) -> bool:
        """``filter_with_nominated`` for every node of ``special`` at once: the nominated pods'
        requests added on paper, then the nodes as they are. False (nothing done) when a nominated
        pod cannot be counted on paper."""
        table = batch.table
        slots = batch.slots[special]
        width = table.req.shape[1]
        d_req = np.zeros((len(slots), width), dtype=np.int64)
        d_pods = np.zeros(len(slots), dtype=np.int64)
        infos = table.infos
        names = [infos[int(s)].spec.name for s in slots.tolist()]
        uid, found = self._nominated_found
        for j, name in enumerate(names):
            for p in (found.get(name, ()) if uid == pod.uid else self.nominated_pods_to_add(pod, name)):
                vec = self.request_vector(p)
                if vec is None:
                    return False
                d_req[j] += vec
                d_pods[j] += 1
        with_nominated = self.first_failures(state, pod, OverlayBatch(table, slots, d_req, d_pods))
        as_is = self.first_failures(state, pod, NodeBatch(table, slots))
        for j, i in enumerate(special.tolist()):
            _settle(mask, i, names[j], with_nominated[j] or as_is[j], diagnosis)
        return True

    def nominated_pods_to_add(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        """``addGENominatedPods``: the pods nominated for ``node_name`` with a priority at least
        ``pod``'s, other than ``pod`` itself (and not already counted on a node)."""
        nom = self.handle.nominator
        if not nom:
            return []
        counted = self.handle.snapshot.pods
        return [p for p in nom.pods_for_node(node_name)
                if p.priority >= pod.priority and p.uid != pod.uid and p.uid not in counted]

    def filter_with_nominated(self, state: CycleState, pod: PodInfo, node_name: str, *,
                              simulated: bool) -> Status | None:
        """Every filter on one node, twice when pods are nominated there: first as if the
        equal-or-higher-priority nominated pods ran on it, then as it is; None when both pass,
        else the first rejection (or an Error status).

        ``simulated``: the snapshot is in a what-if state (preemption removed victims), so
        ``state`` - computed by PreFilter on the real snapshot - is stale and PreFilter runs again.
        """
        stable = self.pre_filter_state_stable(state)
        nominated = self.nominated_pods_to_add(pod, node_name)
        if nominated:
            moves = self.handle.snapshot.what_if()
            try:
                for p in nominated:
                    moves.add(p.with_node(node_name))
                st = self._filter_node(state, pod, node_name) if stable else self._filter_fresh(pod, node_name)
            finally:
                moves.restore()
            if st is not None:
                return st
        if simulated and not stable:
            return self._filter_fresh(pod, node_name)
        return self._filter_node(state, pod, node_name)

    # -- pods moved on paper (OverlayBatch) -----------------------------------------------------

    def on_paper(self, state: CycleState, pod: PodInfo) -> bool:
        """Whether ``pod``'s Filters can judge a changed pod set on paper: PreFilter's state holds
        on any pod set, and every Filter that runs reads a node's pods at most through
        ``requested``/``pod_count`` (``FilterPlugin.reads_pods``)."""
        if not self.pre_filter_state_stable(state):
            return False
        skipped = state.skip_filter_plugins
        return all(pl.name in skipped or pl.reads_pods(state, pod) != READS_ANY for pl in self.filter)

    def request_vector(self, pod: PodInfo) -> np.ndarray | None:
        """The pod's requests as a row of the node table's ``req`` (None: it requests a resource the
        table has no column for yet - then it cannot be counted on paper)."""
        table = self.handle.snapshot.table
        width = table.req.shape[1]
        key = (pod.uid, pod.resource_version, width)
        cache = self._request_vectors
        vec = cache.get(key)
        if vec is not None:
            return vec
        vec = np.zeros(width, dtype=np.int64)
        index = table.res_index
        for name, q in pod.requests.items():
            i = index.get(name)
            if i is None:
                return None
            vec[i] += q
        if len(cache) >= REQUEST_VECTOR_CACHE:
            cache.clear()
        cache[key] = vec
        return vec

    def first_failures(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> list[Status | None]:
        """Every Filter in order over ``batch`` (an OverlayBatch, typically): per node None, or the
        status of the first plugin that rejected it - what ``run_filters_on_node`` gives node by node."""
        n = len(batch)
        out: list[Status | None] = [None] * n
        idx = np.arange(n)
        cur = batch
        skipped = state.skip_filter_plugins
        for pl in self.filter:
            if not len(cur):
                break
            if pl.name in skipped:
                continue
            try:
                res = self._batch_filter[pl.name](state, pod, cur)
            except FrameworkError as exc:
                err = filter_error(exc.status, pl.name)
                return [err if o is None else o for o in out]
            except Exception as exc:  # noqa: BLE001
                log.exception("filter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                err = filter_error(Status.as_error(exc, pl.name), pl.name)
                return [err if o is None else o for o in out]
            passed = res.passed
            if passed.all():
                continue
            for j in np.flatnonzero(~passed).tolist():
                st = res.status_at(j, pl.name)
                if st is not None:
                    out[int(idx[j])] = filter_error(st, pl.name) if st.code == Code.ERROR else st
            cur = cur.subset(passed)
            idx = idx[passed]
        return out

    def pre_filter_state_stable(self, state: CycleState) -> bool:
        """Whether ``state``'s PreFilter results hold on any pod set: every PreFilter plugin that
        did not skip says it does not read other pods (``pre_filter_reads_other_pods``)."""
        skipped = state.skip_filter_plugins
        return all(pl.name in skipped or not pl.pre_filter_reads_other_pods for pl in self.pre_filter)

    def _filter_fresh(self, pod: PodInfo, node_name: str) -> Status | None:
        """PreFilter on a new CycleState over the snapshot as it is now, then every filter on the node."""
        state = CycleState()
        table = self.handle.snapshot.table
        all_nodes = NodeBatch(table, table.order())
        result: PreFilterResult | None = None
        for pl in self.pre_filter:
            try:
                res, st = pl.pre_filter(state, pod, all_nodes)
            except Exception as exc:  # noqa: BLE001
                log.exception("prefilter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                return Status.as_error(exc, pl.name)
            if st is not None and st.is_skip():
                state.skip_filter_plugins.add(pl.name)
                continue
            if st is not None and not st.is_success():
                return st.with_plugin(pl.name)
            if res is not None and not res.all_nodes():
                result = res if result is None else result.merge(res)
        if result is not None and result.node_names is not None and node_name not in result.node_names:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin(s) PreFilter")
        return self._filter_node(state, pod, node_name)

    def _filter_node(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        info = self.handle.snapshot.nodes.get(node_name)
        if info is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"node {node_name!r} not found")
        one = NodeBatch(self.handle.snapshot.table, np.array([info.slot], dtype=np.int64))
        try:
            return self.run_filters_on_node(state, pod, one)
        except FrameworkError as exc:
            return exc.status
        except Exception as exc:  # noqa: BLE001
            log.exception("filter plugin failed pod=%s node=%s", pod.key, node_name)
            return Status.as_error(exc)

    def run_filters_on_node(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        """Every filter on a batch of one node, stopping at the first rejection (its Status)."""
        for pl in self.filter:
            if pl.name in state.skip_filter_plugins:
                continue
            try:
                res = self._batch_filter[pl.name](state, pod, nodes)
            except FrameworkError as exc:
                return filter_error(exc.status, pl.name)
            st = res.status_at(0, pl.name)
            if st is not None:
                return filter_error(st, pl.name) if st.code == Code.ERROR else st
        return None

    def run_post_filter(self, state: CycleState, pod: PodInfo,
                        diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        t0 = time.perf_counter()
        fold = _PostFilterFold()
        for pl in self.post_filter:
            try:
                r, st = pl.post_filter(state, pod, diagnosis)
            except Exception as exc:  # noqa: BLE001
                log.exception("postfilter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                r, st = None, Status.as_error(exc, pl.name)
            if fold.add(pl.name, r, st):
                break
        return fold.outcome(self.profile_name, t0)

    async def run_post_filter_async(self, state: CycleState, pod: PodInfo,
                                    diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """``run_post_filter`` for a cycle that may await (extenders configured): a plugin with a
        ``post_filter_async`` method (preemption asking preempt extenders) is awaited."""
        t0 = time.perf_counter()
        fold = _PostFilterFold()
        for pl in self.post_filter:
            try:
                fn = getattr(pl, "post_filter_async", None)
                r, st = await fn(state, pod, diagnosis) if fn is not None else pl.post_filter(state, pod, diagnosis)
            except Exception as exc:  # noqa: BLE001
                log.exception("postfilter plugin failed plugin=%s pod=%s", pl.name, pod.key)
                r, st = None, Status.as_error(exc, pl.name)
            if fold.add(pl.name, r, st):
                break
        return fold.outcome(self.profile_name, t0)

    def run_pre_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> Status | None:
        t0 = time.perf_counter()
        status = None
        for pl in self.pre_score:
            try:
                st = pl.pre_score(state, pod, batch)
            except Exception as exc:  # noqa: BLE001
                log.exception("prescore plugin failed plugin=%s pod=%s", pl.name, pod.key)
                st = Status.as_error(exc, pl.name)
            if st is not None and st.is_skip():
                state.skip_score_plugins.add(pl.name)
                continue
            if st is not None and not st.is_success():
                # kube-scheduler's RunPreScorePlugins wording: running PreScore plugin "Name": ...
                status = Status(Code.ERROR, f'running PreScore plugin "{pl.name}": {st.message()}',
                                plugin=pl.name, error=st.error)
                break
        metrics.extension_point("PreScore", status, self.profile_name, time.perf_counter() - t0)
        return status

    def run_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> np.ndarray:
        """Weighted total per node of ``batch`` (int64). Raises FrameworkError on a plugin error.

        Every plugin scores and normalizes first; then the scores are checked against [0, 100] and
        summed all at once (one range check and one sum over a plugins x nodes array, not two
        reductions and an add per plugin), as kube-scheduler checks the range after all ran."""
        t0 = time.perf_counter()
        n = len(batch)
        trace = state.get(TRACE_KEY)
        record = state.record_plugin_metrics
        code = Code.SUCCESS
        skip = state.skip_score_plugins
        rows: list[np.ndarray] = []
        ran: list[tuple[str, int]] = []
        try:
            for name, score, norm, w in self._score_steps:
                if skip and name in skip:
                    continue
                tp = time.perf_counter() if record else 0.0
                try:
                    scores = integral_scores(score(state, pod, batch), name)
                    raw = scores.copy() if trace is not None else None
                    if norm is not None:
                        st = norm(state, pod, batch, scores)
                        if st is not None and not st.is_success():
                            raise FrameworkError(wrap_error(st, f'running Normalize on Score plugins: plugin "{name}" '
                                                                'failed with: ', name))
                except FrameworkError as exc:
                    raise FrameworkError(wrap_error(exc.status, score_prefix(name), name)) from exc
                except Exception as exc:  # noqa: BLE001
                    log.exception("score plugin failed plugin=%s pod=%s", name, pod.key)
                    raise FrameworkError(wrap_error(Status.as_error(exc, name), score_prefix(name), name)) from exc
                if scores.shape != (n,):
                    raise FrameworkError(Status(Code.ERROR, f"plugin {name!r} returns {scores.size} scores "
                                                f"for {n} nodes", plugin=name))
                rows.append(scores)
                ran.append((name, w))
                if record:
                    metrics.plugin_duration(name, "Score", None, time.perf_counter() - tp)
                if trace is not None:
                    names = batch.names
                    assert raw is not None
                    trace.scores[name] = {names[i]: {"raw": int(raw[i]), "normalized": int(scores[i]),
                                                     "weighted": int(scores[i] * w)} for i in range(n)}
            if not rows or not n:
                return np.zeros(n, dtype=np.int64)
            table = np.array(rows)
            if (np.minimum.reduce(table, axis=None) < MIN_NODE_SCORE
                    or np.maximum.reduce(table, axis=None) > MAX_NODE_SCORE):
                raise FrameworkError(self._invalid_score(rows, ran))
            weights = [w for _, w in ran]
            if any(w != 1 for w in weights):
                table *= np.array(weights, dtype=np.int64)[:, None]
            total: np.ndarray = np.add.reduce(table, axis=0)
            return total
        except FrameworkError:
            code = Code.ERROR
            raise
        finally:
            metrics.extension_point_code("Score", code, self.profile_name, time.perf_counter() - t0)

    @staticmethod
    def _invalid_score(rows: list[np.ndarray], ran: list[tuple[str, int]]) -> Status:
        """The error for the first plugin (in score order) with a score outside [0, 100]."""
        for scores, (name, _) in zip(rows, ran, strict=True):
            out = (scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)
            if out.any():
                return Status(Code.ERROR, f'applying score defaultWeights on Score plugins: plugin "{name}" returns '
                                          f"an invalid score {int(scores[out][0])}, it should in the range of "
                                          f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing", plugin=name)
        raise AssertionError("no score out of range")

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        t0 = time.perf_counter()
        status = None
        for pl in self.reserve:
            try:
                st = pl.reserve(state, pod, node)
            except Exception as exc:  # noqa: BLE001
                log.exception("reserve plugin failed plugin=%s pod=%s node=%s", pl.name, pod.key, node)
                st = Status.as_error(exc, pl.name)
            if st is not None and not st.is_success():
                status = st.with_plugin(pl.name)
                break
        metrics.extension_point("Reserve", status, self.profile_name, time.perf_counter() - t0)
        return status

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for pl in reversed(self.reserve):
            try:
                pl.unreserve(state, pod, node)
            except Exception:  # noqa: BLE001
                log.exception("unreserve plugin failed plugin=%s pod=%s node=%s", pl.name, pod.key, node)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status | None, float]:
        t0 = time.perf_counter()
        status, timeout = self._permit(state, pod, node)
        metrics.extension_point("Permit", status, self.profile_name, time.perf_counter() - t0)
        return status, timeout

    def _permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status | None, float]:
        wait_plugins: dict[str, float] = {}
        waits: list[str] = []
        for pl in self.permit:
            try:
                st, timeout = pl.permit(state, pod, node)
            except Exception as exc:  # noqa: BLE001
                log.exception("permit plugin failed plugin=%s pod=%s node=%s", pl.name, pod.key, node)
                return Status.as_error(exc, pl.name), 0.0
            if st is None or st.is_success():
                continue
            if st.is_wait():
                wait_plugins[pl.name] = max(0.0, min(float(timeout or 0.0), 900.0))
                waits.extend(r for r in st.reasons if r)
                continue
            trace = state.get(TRACE_KEY)
            if trace is not None:
                trace.permit = {"status": st.code.upstream, "plugins": [pl.name], "message": st.message()}
            return st.with_plugin(pl.name), 0.0
        if wait_plugins:
            wp = WaitingPod(pod=pod, pending=set(wait_plugins), timeouts=dict(wait_plugins))
            self.handle.waiting_pods[pod.uid] = wp
            trace = state.get(TRACE_KEY)
            if trace is not None:
                trace.permit = {"status": "Wait", "plugins": sorted(wait_plugins),
                                "message": "; ".join(waits) or "waiting on permit"}
            return (Status(Code.WAIT, *(waits or ["waiting on permit"]), plugin=",".join(sorted(wait_plugins))),
                    min(wait_plugins.values()))
        return None, 0.0

    async def wait_on_permit(self, pod: PodInfo, timeout: float) -> Status | None:
        wp = self.handle.waiting_pods.get(pod.uid)
        if wp is None:
            return None
        loop = asyncio.get_running_loop()
        wp.future = loop.create_future()
        if wp.rejection is not None:
            wp.future.set_result(wp.rejection)   # rejected before the wait began
        elif not wp.pending:
            wp.future.set_result(None)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):   # not wait_for: it can lose a cancel on 3.11
                res = await wp.future
        except TimeoutError:
            # As upstream's per-plugin timers: the plugin whose wait ran out first (the shortest
            # still pending) rejects, and the message gives the wait it asked for.
            plugin = min(sorted(wp.pending), key=lambda p: wp.timeouts.get(p, timeout), default="")
            waited = wp.timeouts.get(plugin, timeout)
            res = Status(Code.UNSCHEDULABLE, f"rejected due to timeout after waiting {go_duration(waited)} at plugin "
                                             f"{plugin}", plugin=plugin)
        finally:
            self.handle.waiting_pods.pop(pod.uid, None)
        metrics.permit_wait(res, time.perf_counter() - started)
        return res

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        t0 = time.perf_counter()
        status = None
        for pl in self.pre_bind:
            st = await _binding_call("prebind", pl, pl.pre_bind, state, pod, node)
            if st is not None and st.is_skip():
                continue
            if st is not None and not st.is_success():
                if st.is_rejected():
                    status = st.with_plugin(pl.name)
                else:   # RunPreBindPlugins wraps an error in the plugin's name
                    status = Status(Code.ERROR, f'running PreBind plugin "{pl.name}": {st.message()}',
                                    plugin=pl.name, error=st.error)
                break
        metrics.extension_point("PreBind", status, self.profile_name, time.perf_counter() - t0)
        return status

    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        t0 = time.perf_counter()
        status: Status | None = Status(Code.SKIP)
        for pl in self.bind:
            st = await _binding_call("bind", pl, pl.bind, state, pod, node)
            if st is not None and st.is_skip():
                continue
            status = st.with_plugin(pl.name) if st is not None else None
            break
        metrics.extension_point("Bind", status, self.profile_name, time.perf_counter() - t0)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for pl in self.post_bind:
            try:
                pl.post_bind(state, pod, node)
            except Exception:  # noqa: BLE001
                log.exception("postbind plugin failed plugin=%s pod=%s node=%s", pl.name, pod.key, node)

    def queue_sort_key(self) -> Callable[[Any], tuple[Any, ...]]:
        pl = self.queue_sort[0]
        return pl.sort_key


async def _binding_call(what: str, pl: Plugin, call: Callable[[CycleState, PodInfo, str], Awaitable[Status | None]],
                        state: CycleState, pod: PodInfo, node: str) -> Status | None:
    """``pl``'s PreBind or Bind ``call``, an exception turned into an Error status: an API answer
    (or the write fence) is one warning line, anything else a plugin bug with its traceback."""
    try:
        return await call(state, pod, node)
    except ApiError as exc:  # an API answer (or the write fence), not a bug in the plugin
        if not exc.local:
            log.warning("API request failed", extra=kv(plugin=pl.name, pod=pod.key, node=node, error=str(exc)))
        return Status.as_error(exc, pl.name)
    except Exception as exc:  # noqa: BLE001
        log.exception("%s plugin failed plugin=%s pod=%s node=%s", what, pl.name, pod.key, node)
        return Status.as_error(exc, pl.name)


class _PostFilterFold:
    """``RunPostFilterPlugins``' bookkeeping: the first success wins, a status other than
    Unschedulable stops the loop, the reasons of the others are joined."""

    __slots__ = ("result", "status", "reasons")

    def __init__(self) -> None:
        self.result: PostFilterResult | None = None
        self.status: Status | None = Status(Code.UNSCHEDULABLE)
        self.reasons: list[str] = []

    def add(self, plugin: str, r: PostFilterResult | None, st: Status | None) -> bool:
        """One plugin's answer; True when the loop must stop."""
        if st is None or st.is_success():
            # A success may say what it did (1.37's preemption): it becomes the Diagnosis' PostFilterMsg.
            self.result, self.status = r, (st if st is not None and st.message() else None)
            return True
        if st.code != Code.UNSCHEDULABLE:
            self.status = st.with_plugin(plugin)
            return True
        if st.reasons:
            self.reasons.append(st.message())
        self.result = r
        return False

    def outcome(self, profile: str, t0: float) -> tuple[PostFilterResult | None, Status | None]:
        status = self.status
        if status is not None and status.code == Code.UNSCHEDULABLE and self.reasons:
            status = Status(Code.UNSCHEDULABLE, *self.reasons)
        metrics.extension_point("PostFilter", status, profile, time.perf_counter() - t0)
        return self.result, status


def _verdict(res: FilterResult, i: int) -> str:
    st = res.status_at(i)
    return "passed" if st is None else st.message()


def _names_of(batch: NodeBatch) -> Callable[[], list[str]]:
    """The batch's node names, computed only if a Diagnosis is ever read (preemption, explain)."""
    return lambda: batch.names


def wrap_error(status: Status, prefix: str, plugin: str) -> Status:
    """An Error status in kube-scheduler's words for where it happened (``running PreFilter plugin
    "X": ...``); a message the runtime already wrapped keeps its words."""
    status.with_plugin(plugin)
    if status.message().startswith("running ") or status.message().startswith("applying "):
        return status
    return Status(Code.ERROR, prefix + status.message(), plugin=status.plugin, error=status.error)


def score_prefix(plugin: str) -> str:
    return f'running Score plugins: plugin "{plugin}" failed with: '


def filter_error(status: Status, plugin: str) -> Status:
    """RunFilterPlugins' wrapping of a Filter plugin's Error: ``running "X" filter plugin: ...``."""
    return wrap_error(status, f'running "{plugin}" filter plugin: ', plugin)


def _settle(mask: np.ndarray, i: int, name: str, st: Status | None, diagnosis: Diagnosis | None) -> None:
    """One node's Filter verdict into the batch's mask (fits) or the diagnosis (does not);
    an Error status stops the cycle as kube-scheduler's does."""
    if st is None:
        mask[i] = True
        return
    if st.code == Code.ERROR:
        raise FrameworkError(st)
    if diagnosis is not None:
        diagnosis.add_node_status(name, st)
