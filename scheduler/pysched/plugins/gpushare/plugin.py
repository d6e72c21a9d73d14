"""GPUShare: the extension points. PreFilter reads the pod's GPU ask; Filter keeps the nodes of an
accepted model with ``count`` GPUs each holding ``milli`` free; Score is the configured policy;
NormalizeScore breaks ties at the top in a fixed node order (``tieBreak``); Reserve chooses the
GPUs on the chosen node and holds them (Unreserve gives them back), and their indices reach the pod
(``indexAnnotation``, for the node's device plugin) in the Binding (``framework.bindmeta``) or,
with ``indexInBinding: false``, a PreBind patch. As a
``PodWatcher`` it follows bound pods (their GPUs, from that annotation) and learns the target
workload from the pods it sees.

DRA GPUs (``draDrivers``; ``dra``): a node's GPUs are the devices its ResourceSlices publish, and a
pod whose ResourceClaims request such GPUs asks for them. DynamicResources filters such a pod and
allocates its claims; GPUShare scores the nodes with the same policy and, through the cycle's
``DevicePreference`` (``framework.devicepreference``), has the allocator try first the GPU the
policy chose on each node. What the claims hold is counted from their allocations: in the cycle
(DynamicResources' Reserve tells the preference) and, once written, from the store (the claim
deallocated or deleted: released). No index annotation is written for them.

Reads: the pod's annotations and whole-GPU requests; the nodes' GPU count (``nodeGpuResources``),
model label and CPU left (``NodeBatch``); with ``draDrivers``, ResourceSlices, DeviceClasses and
ResourceClaims. Writes: one annotation per GPU pod (not DRA), with the bind or just before it.
Preemption does not free GPU share in its dry runs (the table is the plugin's own): a pod refused
for want of GPU share is not placed by evicting pods.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping, Sequence
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
from pysched.framework.bindmeta import add_bind_annotations, remove_bind_annotations
from pysched.framework.devicepreference import DEVICE_PREFERENCE_KEY, DeviceID
from pysched.plugins.gpushare import policies
from pysched.plugins.gpushare.args import FGD, GPU_CLUSTERING, SCHEDULER, GPUShareArgs
from pysched.plugins.gpushare.ask import FULL, NO_GPU, AskError, GPUAsk, format_indices, parse_ask, parse_indices
from pysched.plugins.gpushare.devices import DeviceTable, tag_column
from pysched.plugins.gpushare.dra import DraInventory
from pysched.plugins.gpushare.workload import Fragmentation, Parts, TargetWorkload

log = logging.getLogger("pysched.gpushare")

ASK_KEY = "GPUShare/ask"
DEVICES_KEY = "GPUShare/devices"
DRA_KEY = "GPUShare/dra"          # the pod's ask is of DRA GPUs
STORE = ""                        # a claim holding read from the store (else: the pod's uid)
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
        self.table = DeviceTable(tuple(a.node_gpu_resources), a.model_label, a.tie_break)
        stated = [((c.milli_cpu, c.gpu_milli, c.gpu_count, tuple(sorted(c.models))), c.weight) for c in a.classes]
        self.workload = TargetWorkload(a.target_workload_coverage, a.learning_window, stated)
        self.rng = random.Random()
        handle.metrics.export_gpus(self)
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
        # DRA GPUs: the inventory, and per claim uid its allocation and whose it is (STORE: the
        # store's; a pod's uid: that pod's Reserve, not yet seen written), laid as holdings
        # "claim/<uid>/<k>" (one per share size).
        self.dra: DraInventory | None = None
        self.claims: dict[str, tuple[str, str, Mapping[str, Any]]] = {}   # uid -> (owner, label, allocation)
        self._claim_keys: dict[str, list[str]] = {}
        self._laid = -1                  # the inventory version the claims were laid on
        if a.dra_drivers:
            self.dra = DraInventory(a.dra_drivers, a.dra_share_capacity, a.dra_model_attribute,
                                    a.dra_device_classes)
            handle.objects.subscribe(self._object_changed)
            for claim in handle.objects.list("resourceclaims"):
                self._object_changed("resourceclaims", None, None, claim)

    # -- the device table ------------------------------------------------------------------------

    def _sync(self, nodes: NodeBatch) -> bool:
        """The table's rows for ``nodes`` (and, with DRA, the slices' GPUs) up to date."""
        dra = self.dra
        if dra is None:
            return self.table.sync(nodes)
        dra.refresh(self.handle.objects)
        if self._laid != dra.version:
            self._laid = dra.version
            for uid in list(self.claims):
                self._lay_claim(uid)       # its devices may have moved, appeared or gone
        return self.table.sync(nodes, dra)

    # -- metrics ---------------------------------------------------------------------------------

    def gpu_summary(self) -> dict[str, float]:
        """The GPUs as ``pysched_gpus`` and the GPU ratios export them (``GPUSource``), as of the
        last cycle: read only (a scrape changes nothing the cycle keeps)."""
        t = self.table
        left, count = t.left, t.count
        valid = np.arange(left.shape[1])[None, :] < count[:, None]
        free = int(((left == FULL) & valid).sum())
        full = int(((left == 0) & valid).sum())
        capacity = int(count.sum()) * FULL
        out: dict[str, float] = {"free": free, "full": full, "partial": int(valid.sum()) - free - full,
                                 "capacity": capacity, "allocated": capacity - int(left.sum())}
        f = self._f
        if self.policy == FGD and self._frag is not None and len(f) == len(count):
            out["fragmented"] = float(f[count > 0].sum())
        return out

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
        self._sync(nodes)
        if self.dra is not None and pod.resource_claims:
            dra_ask = self.dra_ask_of(pod)
            if dra_ask is not None and dra_ask.wants_gpu:
                if ask.wants_gpu:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        "the pod asks for GPUs both through ResourceClaims and through "
                                        f"{self.args.milli_annotation} or a whole-GPU resource")
                ask = dra_ask
                state.write(DRA_KEY, True)
            # written for every pod with claims: whatever its claims get of the GPUs is held
            state.write(DEVICE_PREFERENCE_KEY, GPUPreference(self, pod, ask if state.get(DRA_KEY) else NO_GPU))
        state.write(ASK_KEY, ask)
        self.workload.observe(pod.uid, pod.requests.get(CPU, 0), ask)
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
        if not ask.wants_gpu or state.get(DRA_KEY):
            return FilterResult.all_pass(len(nodes))    # DRA GPUs: DynamicResources' Filter
        t = self.table
        self._sync(nodes)
        rows = nodes.slots
        count = t.count[rows]
        has = count > 0
        if t.dra is not None:
            has &= ~t.dra_row[rows]      # DRA GPUs are for ResourceClaims (DynamicResources allocates them)
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

    # -- Score -----------------------------------------------------------------------------------

    def node_state(self, nodes: NodeBatch, with_frag: bool, own_cpu: int = 0) -> policies.NodeState:
        """The nodes as the policies see them; ``own_cpu``: CPU counted on them that is to be left
        out (Reserve's pod, assumed on its node already)."""
        t = self.table
        rows = nodes.slots
        cpu_left = nodes.allocatable(CPU) - nodes.requested(CPU) + own_cpu
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
        self._sync(nodes)
        s = self.node_state(nodes, self.policy == FGD)
        frag = self.fragmentation() if self.policy == FGD else None
        if self.policy == FGD and frag is None:
            return np.full(len(nodes), 50, dtype=np.int64)
        return policies.score(self.policy, s, ask, pod.requests.get(CPU, 0), scale=self.scale(), frag=frag,
                              tag=tag_column(ask), rng=self.rng)

    def normalize_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> Status | None:
        """Ties at the top broken by the plugin itself (``tieBreak``), so the pick does not depend on
        the scheduler's random one: the preferred node gets one point more than the others tied
        with it (they one less, at 100). A pod asking for no GPU prefers, among them, the nodes
        with the least free GPU share (``cpuPodsToBusyGPUNodes``)."""
        if self.args.tie_break == SCHEDULER or len(scores) < 2:
            return None
        top = scores.max()
        at_top = np.flatnonzero(scores == top)
        if len(at_top) < 2:
            return None
        rows = nodes.slots[at_top]
        keys = [self.table.tie_key[rows]]
        if self.args.cpu_pods_to_busy_gpu_nodes and not self._ask(state, pod).wants_gpu:
            keys.append(self.table.left[rows].sum(axis=1))
        best = at_top[np.lexsort(keys)[0]]
        if top < 100:
            scores[best] += 1
        else:
            scores[at_top] -= 1
            scores[best] += 1
        return None

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
        if not ask.wants_gpu or state.get(DRA_KEY):
            return None      # DRA GPUs: held when DynamicResources' Reserve reports the allocation
        nodes = self.handle.all_nodes()
        self._sync(nodes)
        if self.table.row(node_name) < 0:
            return Status(Code.ERROR, f"node {node_name} not found in the GPU table")
        # The cache counts the pod on the node before Reserve (assumed): the GPUs are chosen on the
        # node as Score saw it, without the pod (FGD's device is the one that gave the node its score).
        info = self.handle.node_info(node_name)
        own = info.pods.get(pod.uid) if info is not None else None
        devices = self.preferred_devices(node_name, ask, pod.requests.get(CPU, 0), nodes,
                                         own.requests.get(CPU, 0) if own else 0)
        if devices is None:
            return Status(Code.UNSCHEDULABLE, f"{INSUFFICIENT} on node {node_name}")
        self.table.hold(pod.uid, node_name, devices, ask)
        state.write(DEVICES_KEY, devices)
        if self.args.index_in_binding:
            add_bind_annotations(state, {self.args.index_annotation: format_indices(devices)})
        log.debug("GPUs reserved", extra={"pod": pod.key, "node": node_name, "gpus": devices})
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.table.release(pod.uid)
        if state.get(DEVICES_KEY):
            state.delete(DEVICES_KEY)
            remove_bind_annotations(state, [self.args.index_annotation])
        self._release_pod_claims(pod.uid)

    def devices_of(self, uid: str) -> tuple[int, ...] | None:
        """The GPU indices pod ``uid`` holds (of DRA GPUs: those its claims' allocations in this
        scheduler's cycles name), or None."""
        h = self.table.holdings.get(uid)
        if h is not None:
            return h.devices
        dra = self.dra
        if dra is None:
            return None
        out: list[int] = []
        for cuid, (owner, _, _) in self.claims.items():
            if owner == uid:
                for key in self._claim_keys.get(cuid, ()):
                    held = self.table.holdings.get(key)
                    if held is not None:
                        out.extend(dra.column[i][1] for i in held.ids if i in dra.column)
        return tuple(sorted(out)) if out else None

    # -- DRA GPUs --------------------------------------------------------------------------------

    def pod_claims(self, pod: PodInfo) -> list[dict[str, Any]] | None:
        """The pod's ResourceClaims from the store; None while one is not there (yet)."""
        out = []
        for name in pod.claim_names():
            claim = self.handle.objects.get("resourceclaims", f"{pod.namespace}/{name}") if name else None
            if claim is None:
                return None
            out.append(claim)
        return out

    def dra_ask_of(self, pod: PodInfo) -> GPUAsk | None:
        """What the pod's claims ask of DRA GPUs (``NO_GPU``: none GPUShare steers); None while a
        claim is missing."""
        assert self.dra is not None
        claims = self.pod_claims(pod)
        if claims is None:
            return None
        return self.dra.dra_ask(claims, self.dra.gpu_classes(self.handle.objects))

    def preferred_devices(self, node_name: str, ask: GPUAsk, cpu: int, nodes: NodeBatch,
                          own_cpu: int = 0) -> tuple[int, ...] | None:
        """The GPU(s) of ``node_name`` the policy gives ``ask`` now (Reserve's choice for an
        annotation pod, the allocator's preference for a DRA one), or None; ``own_cpu``: as
        ``node_state``'s."""
        row = self.table.row(node_name)
        if row < 0 or not ask.wants_gpu:
            return None
        one = NodeBatch(nodes.table, np.array([row], dtype=np.int64))
        s = self.node_state(one, self.policy == FGD and ask.sharing, own_cpu)
        return policies.choose_devices(self.policy, s, ask, cpu, frag=self.fragmentation(), rng=self.rng)

    def claim_allocated(self, owner: str, claim: Mapping[str, Any] | str, allocation: Mapping[str, Any]) -> None:
        """``owner``'s (a pod uid, or STORE) claim got ``allocation``: hold what it takes."""
        uid = claim if isinstance(claim, str) else str((claim.get("metadata") or {}).get("uid") or "")
        if not uid:
            return
        label = "" if isinstance(claim, str) else _label(claim)
        self.claims[uid] = (owner, label, allocation)
        self._lay_claim(uid)

    def _lay_claim(self, uid: str) -> None:
        dra = self.dra
        assert dra is not None
        for key in self._claim_keys.pop(uid, ()):
            self.table.release(key)
        entry = self.claims.get(uid)
        if entry is None:
            return
        groups: dict[tuple[str, int], list[DeviceID]] = {}
        for did, milli in dra.allocated_shares(entry[2]):
            groups.setdefault((dra.column[did][0], milli), []).append(did)
        keys = []
        for k, ((node, milli), ids) in enumerate(sorted(groups.items())):
            key = f"claim/{uid}/{k}"
            self.table.hold(key, node, (), GPUAsk(milli, len(ids)), ids=tuple(ids))
            keys.append(key)
        if keys:
            self._claim_keys[uid] = keys

    def release_claim(self, uid: str) -> None:
        self.claims.pop(uid, None)
        for key in self._claim_keys.pop(uid, ()):
            self.table.release(key)

    def _release_pod_claims(self, pod_uid: str) -> None:
        for uid in [u for u, (owner, _, _) in self.claims.items() if owner == pod_uid]:
            self.release_claim(uid)

    def _object_changed(self, kind: str, typ: str | None, old: dict[str, Any] | None, obj: dict[str, Any]) -> None:
        """A ResourceClaim changed in the store: an allocation there is what the claim holds (it
        replaces the one a Reserve reported); deallocated or deleted, it holds nothing."""
        if kind != "resourceclaims" or self.dra is None:
            return
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if not uid:
            return
        allocation = (obj.get("status") or {}).get("allocation")
        if typ == "DELETED":
            self.release_claim(uid)
        elif allocation:
            self.claim_allocated(STORE, obj, allocation)
        elif uid in self.claims and self.claims[uid][0] == STORE:
            self.release_claim(uid)

    # -- PreBind ---------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        devices = state.get(DEVICES_KEY)
        if not devices or self.args.index_in_binding:
            return Status(Code.SKIP)     # no GPU, or the indices go with the Binding (DefaultBinder)
        client = self.handle.client
        if client is None:
            return None
        value = format_indices(devices)
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
            if self.dra is not None and pod.resource_claims and not ask.wants_gpu:
                dra_ask = self.dra_ask_of(pod)
                if dra_ask is None:
                    return           # a claim not there yet: learnt at PreFilter
                ask = dra_ask
            self.workload.observe(pod.uid, pod.requests.get(CPU, 0), ask)
            return
        if not ask.wants_gpu:
            return
        self._sync(self.handle.all_nodes())
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
        self._release_pod_claims(uid)

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeAllocatable")),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete")))


def _label(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class GPUPreference:
    """GPUShare's ``DevicePreference`` for one pod's cycle: on each node, the GPU the policy
    chose for a pod sharing one (FGD: the GPU of the node's best score; the others: the tightest
    that fits) is tried first; whole GPUs keep the allocator's order (lowest index first, as
    GPUShare gives them). Reserve's allocations are held as the pod's until the store shows them."""

    def __init__(self, plugin: GPUShare, pod: PodInfo, ask: GPUAsk) -> None:
        self.plugin, self.pod, self.ask = plugin, pod, ask
        self._orders: dict[str, list[int] | None] = {}
        self._nodes: NodeBatch | None = None

    def order(self, node_name: str, devices: Sequence[DeviceID]) -> Sequence[int] | None:
        if not self.ask.sharing:
            return None
        if node_name not in self._orders:
            self._orders[node_name] = self._order(node_name)
        cols = self._orders[node_name]
        dra = self.plugin.dra
        if not cols or dra is None:
            return None
        gpus = dra.by_node.get(node_name) or []
        at = {d: i for i, d in enumerate(devices)}
        return [at[gpus[c].id] for c in cols if c < len(gpus) and gpus[c].id in at]

    def _order(self, node_name: str) -> list[int] | None:
        p = self.plugin
        if self._nodes is None:
            self._nodes = p.handle.all_nodes()
            p._sync(self._nodes)
        chosen = p.preferred_devices(node_name, self.ask, self.pod.requests.get(CPU, 0), self._nodes)
        return list(chosen) if chosen else None

    def allocated(self, node_name: str, claim_uid: str, allocation: Mapping[str, Any]) -> None:
        self.plugin.claim_allocated(self.pod.uid, claim_uid, allocation)
