"""GPUShare: the extension points. PreFilter reads the pod's GPU ask; Filter keeps the nodes of an
accepted model with ``count`` GPUs each holding ``milli`` free; Score is the configured policy;
Reserve chooses the GPUs on the chosen node and holds them (Unreserve gives them back); PreBind
writes their indices on the pod (``indexAnnotation``) for the node's device plugin. As a
``PodWatcher`` it follows bound pods (their GPUs, from that annotation) and learns the target
workload from the pods it sees.

Reads: the pod's annotations and whole-GPU requests; the nodes' GPU count (``nodeGpuResources``),
model label and CPU left (``NodeBatch``). Writes: one annotation per GPU pod, before the bind.
Preemption does not free GPU share in its dry runs (the table is the plugin's own): a pod refused
for want of GPU share is not placed by evicting pods.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from typing import Any

import numpy as np

from pysched.framework import (
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PodInfo,
    PodWatcher,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScorePlugin,
    Status,
)
from pysched.framework.api import CPU
from pysched.plugins.gpushare import policies
from pysched.plugins.gpushare.args import FGD, GPU_CLUSTERING, GPUShareArgs
from pysched.plugins.gpushare.ask import NO_GPU, AskError, GPUAsk, parse_ask, parse_indices
from pysched.plugins.gpushare.devices import DeviceTable, tag_column
from pysched.plugins.gpushare.workload import Fragmentation, Parts, TargetWorkload

log = logging.getLogger("pysched.gpushare")

ASK_KEY = "GPUShare/ask"
DEVICES_KEY = "GPUShare/devices"
NO_GPUS = "node(s) had no GPUs"
WRONG_MODEL = "node(s) didn't have the GPU model the pod asks for"
INSUFFICIENT = "Insufficient GPU share"


class GPUShare(PreFilterPlugin[GPUShareArgs], FilterPlugin[GPUShareArgs], ScorePlugin[GPUShareArgs],
               ReservePlugin[GPUShareArgs], PreBindPlugin[GPUShareArgs], PodWatcher):
    name = "GPUShare"
    pre_filter_reads_other_pods = False

    def __init__(self, args: GPUShareArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.policy = a.policy
        self.whole = tuple(a.whole_gpu_resources)
        self.table = DeviceTable(tuple(a.node_gpu_resources), a.model_label)
        stated = [((c.milli_cpu, c.gpu_milli, c.gpu_count, tuple(sorted(c.models))), c.weight) for c in a.classes]
        self.workload = TargetWorkload(a.target_workload_coverage, a.learning_window, stated)
        self.rng = random.Random()
        self._frag: Fragmentation | None = None
        self._frag_key: tuple[Any, ...] = ()
        # FGD's F per table row, its parts (Fragmentation.parts), and what they were computed from
        # (row generation, CPU left).
        self._f = np.zeros(0)
        self._parts = Parts(np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0), dtype=np.int64),
                            np.zeros(0, dtype=np.int64))
        self._f_gen = np.zeros(0, dtype=np.int64)
        self._f_cpu = np.zeros(0, dtype=np.int64)
        self._scale: tuple[Any, policies.Scale] = (None, policies.Scale(1, 1000))

    # -- what a pod asks -------------------------------------------------------------------------

    def ask_of(self, pod: PodInfo) -> GPUAsk:
        a = self.args
        return parse_ask(pod, a.milli_annotation, a.count_annotation, a.model_annotation, self.whole)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        try:
            ask = self.ask_of(pod)
        except AskError as exc:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(exc))
        state.write(ASK_KEY, ask)
        self.workload.observe(pod.uid, pod.requests.get(CPU, 0), ask)
        self.table.sync(nodes)
        return None, None

    def _ask(self, state: CycleState, pod: PodInfo) -> GPUAsk:
        ask = state.get(ASK_KEY)
        if ask is None:
            try:
                ask = self.ask_of(pod)
            except AskError:
                ask = NO_GPU
        assert isinstance(ask, GPUAsk)
        return ask

    # -- Filter ----------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        ask = self._ask(state, pod)
        if not ask.wants_gpu:
            return FilterResult.all_pass(len(nodes))
        t = self.table
        t.sync(nodes)
        rows = nodes.slots
        count = t.count[rows]
        has = count > 0
        model_ok = np.ones(len(rows), dtype=bool)
        if ask.models:
            codes = [i for i, m in enumerate(t.models) if m in ask.models]
            model_ok = np.isin(t.model[rows], codes)
        share_ok = (t.left[rows] >= ask.milli).sum(axis=1) >= ask.count
        passed = has & model_ok & share_ok
        failures = [(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_GPUS, ~has),
                    (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WRONG_MODEL, has & ~model_ok),
                    (Code.UNSCHEDULABLE, INSUFFICIENT, has & model_ok & ~share_ok)]
        return FilterResult(passed, [f for f in failures if f[2].any()])

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return "any"

    # -- Score -----------------------------------------------------------------------------------

    def node_state(self, nodes: NodeBatch, with_frag: bool) -> policies.NodeState:
        t = self.table
        rows = nodes.slots
        cpu_left = nodes.allocatable(CPU) - nodes.requested(CPU)
        s = policies.NodeState(t.left[rows], t.count[rows], t.model[rows], cpu_left,
                               tags=t.tags[rows] if self.policy == GPU_CLUSTERING else None)
        if with_frag:
            s.frag = self._fragmentation_of(rows, s)
        return s

    def fragmentation(self) -> Fragmentation | None:
        """The measure against the current target workload (None until a pod was seen)."""
        wl = self.workload
        if wl.classes is None:
            return None
        key = (wl.version, len(self.table.models), self.table.key)
        if key != self._frag_key:
            self._frag = Fragmentation(wl.classes, self.table.models)
            self._frag_key = key
            n, u = len(self.table.count), len(self._frag.uniq)
            self._f, self._f_gen, self._f_cpu = np.zeros(n), np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
            self._parts = Parts(np.zeros((n, u), dtype=np.int64), np.zeros((n, u), dtype=np.int64),
                                np.zeros(n, dtype=np.int64))
        return self._frag

    def _fragmentation_of(self, rows: np.ndarray, s: policies.NodeState) -> np.ndarray:
        """F of the nodes of ``s`` (table rows ``rows``), recomputed only for rows changed since; sets
        ``s.parts`` (the parts F is computed from, which FGD's score starts from)."""
        frag = self.fragmentation()
        if frag is None:
            return np.zeros(len(rows))
        stale = (self._f_gen[rows] != self.table.gen[rows]) | (self._f_cpu[rows] != s.cpu_left)
        if stale.any():
            r = rows[stale]
            fresh = frag.parts(s.left[stale])
            self._parts.fits[r], self._parts.small[r], self._parts.lsum[r] = fresh.fits, fresh.small, fresh.lsum
            self._f[r] = frag.combine(s.cpu_left[stale], fresh, s.model[stale])
            self._f_gen[r] = self.table.gen[r]
            self._f_cpu[r] = s.cpu_left[stale]
        s.parts = Parts(self._parts.fits[rows], self._parts.small[rows], self._parts.lsum[rows])
        out: np.ndarray = self._f[rows]
        return out

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        ask = self._ask(state, pod)
        self.table.sync(nodes)
        s = self.node_state(nodes, self.policy == FGD)
        frag = self.fragmentation() if self.policy == FGD else None
        if self.policy == FGD and frag is None:
            return np.full(len(nodes), 50, dtype=np.int64)
        return policies.score(self.policy, s, ask, pod.requests.get(CPU, 0), scale=self.scale(), frag=frag,
                              tag=tag_column(ask), rng=self.rng)

    def scale(self) -> policies.Scale:
        """BestFit's and DotProd's normalisers: the arguments', else the largest node's."""
        if self._scale[0] != self.table.key:
            a, nodes = self.args, self.handle.all_nodes()
            cpu = a.max_node_milli_cpu or int(nodes.allocatable(CPU).max(initial=0)) or 1
            gpus = a.max_node_gpus or int(self.table.count.max(initial=0)) or 1
            self._scale = (self.table.key, policies.Scale(cpu, gpus * 1000))
        return self._scale[1]

    # -- Reserve / Unreserve ---------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        ask = self._ask(state, pod)
        if not ask.wants_gpu:
            return None
        nodes = self.handle.all_nodes()
        self.table.sync(nodes)
        row = self.table.row(node_name)
        if row < 0:
            return Status(Code.ERROR, f"node {node_name} not found in the GPU table")
        one = NodeBatch(nodes.table, np.array([row], dtype=np.int64))
        s = self.node_state(one, self.policy == FGD and ask.sharing)
        devices = policies.choose_devices(self.policy, s, ask, pod.requests.get(CPU, 0),
                                          frag=self.fragmentation(), rng=self.rng)
        if devices is None:
            return Status(Code.UNSCHEDULABLE, f"{INSUFFICIENT} on node {node_name}")
        self.table.hold(pod.uid, node_name, devices, ask)
        state.write(DEVICES_KEY, devices)
        log.debug("GPUs reserved", extra={"pod": pod.key, "node": node_name, "gpus": devices})
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.table.release(pod.uid)

    def devices_of(self, uid: str) -> tuple[int, ...] | None:
        h = self.table.holdings.get(uid)
        return h.devices if h is not None else None

    # -- PreBind ---------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        devices = state.get(DEVICES_KEY)
        if not devices:
            return Status(Code.SKIP)
        client = self.handle.client
        if client is None:
            return None
        value = ",".join(str(d) for d in devices)
        if pod.annotations.get(self.args.index_annotation) == value:
            return None
        body = {"metadata": {"annotations": {self.args.index_annotation: value}}}
        try:
            await client.request("PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}", body=body,
                                 content_type="application/merge-patch+json")
        except Exception as exc:  # noqa: BLE001 - the binding cycle retries the pod
            return Status(Code.ERROR, f"writing {self.args.index_annotation}={value} on the pod: {exc}")
        return None

    # -- PodWatcher ------------------------------------------------------------------------------

    def pod_seen(self, pod: PodInfo) -> None:
        try:
            ask = self.ask_of(pod)
        except AskError:
            return
        if not pod.node_name:
            self.workload.observe(pod.uid, pod.requests.get(CPU, 0), ask)
            return
        if not ask.wants_gpu:
            return
        self.table.sync(self.handle.all_nodes())
        devices = parse_indices(pod.annotations.get(self.args.index_annotation))
        if devices is None:
            held = self.devices_of(pod.uid)
            devices = held if held is not None else self.table.fitting_devices(pod.node_name, ask)
        if devices is not None:
            self.table.hold(pod.uid, pod.node_name, devices, ask)
        else:
            log.warning("bound GPU pod fits none of its node's GPUs; not counted",
                        extra={"pod": pod.key, "node": pod.node_name})

    def pod_gone(self, uid: str) -> None:
        self.table.release(uid)

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete")))
