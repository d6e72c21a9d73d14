"""VolumeBinding (PreFilter, Filter, PreScore, Score, Reserve, PreBind): pods go where their volumes can be.

PreFilter, per PersistentVolumeClaim the pod uses (``persistentVolumeClaim`` and generic
``ephemeral`` volumes; a claim counts as bound once it has a volume name and the PV controller's
``pv.kubernetes.io/bind-completed`` annotation): a missing claim is
``persistentvolumeclaim "x" not found``, a Lost claim or one being deleted is rejected, and an
unbound claim whose StorageClass binds ``Immediate`` (or has no class, or a class that does not
exist) gives ``pod has unbound immediate PersistentVolumeClaims`` - all UnschedulableAndUnresolvable,
waiting for the PV controller (a StorageClass Add requeues the pod too).

Filter, per node: a bound claim's PersistentVolume must exist (``node(s) unavailable due to one
or more pvc(s) bound to non-existent pv(s)``) and its ``spec.nodeAffinity`` must match the node
(``node(s) didn't match PersistentVolume's node affinity``). The unbound ``WaitForFirstConsumer``
claims, smallest request first, each take an Available PersistentVolume (same class, enough
capacity, the access modes, the claim's selector, node affinity matching the node) not taken by
an earlier one; those left need dynamic provisioning allowed on the node (a real provisioner and
the class's ``allowedTopologies``; otherwise ``node(s) didn't find available persistent volumes to
bind``) and, when the provisioner is a CSIDriver with ``storageCapacity: true`` and the claim
requests storage, a CSIStorageCapacity of the class whose ``nodeTopology`` selects the node and
whose ``maximumVolumeSize`` (else ``capacity``) holds the request (otherwise ``node(s) did not have
enough free storage``). The first claim that cannot be provisioned decides which.

Score (kube-scheduler 1.37's StorageCapacityScoring, on by default from 1.37; off: no score and
``shape`` refused): per StorageClass, the requested storage against the capacity - of the
PersistentVolumes chosen on the node when there are any, else of the CSIStorageCapacity found
for the claims to provision -, through the ``shape`` (default ``[{0, 10}, {100, 0}]``: the
emptier the better), averaged over the classes.

PreBind (only for WaitForFirstConsumer claims): statically matched volumes get the claim in
``spec.claimRef``; claims to provision get ``volume.kubernetes.io/selected-node=<node>``; then
the pod waits (``bindTimeoutSeconds``, default 600) until every claim is Bound, so it is never
bound to a node before its volumes are. Reads: PVCs, PVs, StorageClasses, CSIDrivers and
CSIStorageCapacities from the ObjectStore (once per cycle, in PreFilter), node labels and names.
Where several CSIStorageCapacities fit a node, the store's first is used (upstream takes the
informer's, in no defined order).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pysched.framework import (
    READS_NONE,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PodInfo,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import (
    ConfigError,
    LabelSelector,
    NodeSelector,
    ObjectError,
    aggregate_errors,
    parse_label_selector,
    parse_node_selector,
    quantity_value,
)
from pysched.framework.features import STORAGE_CAPACITY_SCORING
from pysched.plugins.helper import shape as fshape
from pysched.plugins.helper.nodeselect import node_selector_mask, requirement_mask
from pysched.plugins.helper.volumes import BINDING_EVENTS, claim_class

REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
KEY = "VolumeBinding/state"
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_NODE = NodeSelector(())   # a malformed PV node affinity: matches no node


@dataclass
class UtilizationShapePoint:
    """A point of the capacity-scoring shape: utilisation (0-100) -> score (0-10)."""
    utilization: int = field(default=0, metadata=arg(bits=32))
    score: int = field(default=0, metadata=arg(bits=32))


def default_shape() -> list[UtilizationShapePoint]:
    """kube's default with StorageCapacityScoring on: the emptier the node's storage, the better."""
    return [UtilizationShapePoint(0, fshape.MAX_CUSTOM_PRIORITY_SCORE),
            UtilizationShapePoint(fshape.MAX_UTILIZATION, 0)]


@dataclass
class VolumeBindingArgs:
    """``bindTimeoutSeconds``: how long PreBind waits for the claims to be bound (not negative).
    ``shape``: the capacity-scoring function, only with StorageCapacityScoring on (defaulted to
    ``[{0, 10}, {100, 0}]`` when absent or empty, then validated as ``validateFunctionShape``); with
    the gate off kube refuses it, even empty."""
    KIND = "VolumeBindingArgs"

    bind_timeout_seconds: int = 600
    shape: list[UtilizationShapePoint] | None = None

    def validate(self, path: str) -> None:
        if self.bind_timeout_seconds < 0:
            raise ConfigError(f"{path}.bindTimeoutSeconds: Invalid value: {self.bind_timeout_seconds}: "
                              "invalid BindTimeoutSeconds, should not be a negative value")

    def apply_feature_gates(self, path: str, gates: frozenset[str]) -> None:
        """``SetDefaults_VolumeBindingArgs`` and ``ValidateVolumeBindingArgsWithOptions``'s shape rules."""
        where = f"{path}.shape"
        if STORAGE_CAPACITY_SCORING in gates:
            if not self.shape:
                self.shape = default_shape()
            errors = fshape.function_shape_errors(self.shape, where)
            if errors:
                raise ConfigError(aggregate_errors(errors))
        elif self.shape is not None:
            raise ConfigError(f"{where}: Invalid value: {fshape.internal_json(self.shape)}: unexpected field "
                              f"`shape`, remove it or turn on the feature gate {STORAGE_CAPACITY_SCORING}")


def fully_bound(pvc: dict[str, Any] | None) -> bool:
    """``isPVCFullyBound``: a volume name and the PV controller's bind-completed annotation."""
    if pvc is None:
        return False
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    return bool((pvc.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in ann


def pv_node_affinity(pv: dict[str, Any]) -> NodeSelector | None:
    """The PV's ``spec.nodeAffinity.required`` (None: every node; malformed: no node)."""
    req = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if req is None:
        return None
    try:
        return parse_node_selector(req, "spec.nodeAffinity.required") or NO_NODE
    except ObjectError:
        return NO_NODE


def _affinity_mask(nodes: NodeBatch, affinity: NodeSelector | None) -> np.ndarray:
    if affinity is None:
        return np.ones(len(nodes), dtype=bool)
    return node_selector_mask(nodes, affinity)


def _topology_mask(nodes: NodeBatch, allowed_topologies: list[dict[str, Any]]) -> np.ndarray:
    """A StorageClass's ``allowedTopologies`` (terms ORed, expressions ANDed; none: every node)."""
    if not allowed_topologies:
        return np.ones(len(nodes), dtype=bool)
    m = np.zeros(len(nodes), dtype=bool)
    for t in allowed_topologies:
        tm = np.ones(len(nodes), dtype=bool)
        for e in t.get("matchLabelExpressions") or ():
            tm &= nodes.label(e.get("key") or "").isin(e.get("values") or ())
        m |= tm
    return m


def _selector_mask(nodes: NodeBatch, sel: LabelSelector) -> np.ndarray:
    m = np.ones(len(nodes), dtype=bool)
    for r in sel.requirements:
        m &= requirement_mask(nodes, r)
    return m


@dataclass
class _DelayedClaim:
    """An unbound WaitForFirstConsumer claim, with what does not depend on the node worked out."""
    key: str                                   # namespace/name
    pvc: dict[str, Any]
    # Available PVs that fit (name, node affinity, size), smallest first.
    candidates: list[tuple[str, NodeSelector | None, int]]
    provisionable: bool                        # a real provisioner, no selector
    allowed_topologies: list[dict[str, Any]]
    class_name: str = ""
    size: int = 0                              # the storage request (0: none)
    # Storage capacity tracking (``hasEnoughCapacity``): None when nothing is checked (no storage
    # request, no CSIDriver named as the provisioner, or one without ``storageCapacity: true``);
    # else the CSIStorageCapacities of the class whose limit takes the claim, in the store's order,
    # as (capacity, nodeTopology).
    capacities: list[tuple[int, LabelSelector]] | None = None


@dataclass
class _Assignment:
    """One Filter call's answer for the delayed claims: per claim, per node of ``nodes``, the index
    of the chosen candidate PV (-1: provision) and of the CSIStorageCapacity that gives the room to
    provision (-1: none checked); ``ok``: every claim can be satisfied; ``bind_conflict`` and
    ``no_space``: why not, per node (the first claim that fails decides, as upstream)."""
    nodes: NodeBatch
    ok: np.ndarray
    picks: list[np.ndarray]
    caps: list[np.ndarray]
    bind_conflict: np.ndarray
    no_space: np.ndarray


@dataclass
class _Claims:
    bound: list[tuple[bool, NodeSelector | None]] = field(default_factory=list)  # (PV exists, its node affinity)
    delayed: list[_DelayedClaim] = field(default_factory=list)
    assignments: list[_Assignment] = field(default_factory=list)

    def found(self, node_name: str) -> tuple[_Assignment, int] | None:
        """The latest Filter call that found ``node_name`` feasible, and the node's index in it."""
        for a in reversed(self.assignments):
            i = a.nodes.index_of(node_name)
            if i >= 0 and a.ok[i]:
                return a, i
        return None

    def chosen(self, node_name: str) -> dict[str, str] | None:
        """Claim key -> PV name, or "" to provision, as the latest Filter call that found ``node_name``
        feasible chose (None: no Filter call did)."""
        hit = self.found(node_name)
        if hit is None:
            return None
        a, i = hit
        return {c.key: (c.candidates[int(p[i])][0] if p[i] >= 0 else "") for c, p in zip(self.delayed, a.picks)}


class VolumeBinding(PreFilterPlugin[VolumeBindingArgs], FilterPlugin[VolumeBindingArgs],
                    PreScorePlugin[VolumeBindingArgs], ScorePlugin[VolumeBindingArgs],
                    ReservePlugin[VolumeBindingArgs], PreBindPlugin[VolumeBindingArgs], EnqueueExtensions):
    name = "VolumeBinding"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        # The capacity scorer, built only with StorageCapacityScoring on (the Args then hold a shape).
        self.scorer: list[tuple[int, int]] | None = None
        if STORAGE_CAPACITY_SCORING in handle.feature_gates:
            self.scorer = fshape.scaled(self.args.shape or default_shape())

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.pvc_names:
            return None, Status(Code.SKIP)
        store = self.handle.objects
        claims = _Claims()
        delayed: list[dict[str, Any]] = []
        immediate = False
        for name, ephemeral in pod.pvc_names:
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                msg = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                       if ephemeral else f'persistentvolumeclaim "{name}" not found')
                return None, Status(UAU, msg)
            spec = pvc.get("spec") or {}
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return None, Status(UAU, f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                                         f'"{spec.get("volumeName", "")}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status(UAU, f'persistentvolumeclaim "{name}" is being deleted')
            if fully_bound(pvc):
                pv = store.get("persistentvolumes", spec["volumeName"])
                claims.bound.append((False, None) if pv is None else (True, pv_node_affinity(pv)))
                continue
            if spec.get("volumeName"):
                immediate = True  # pre-bound but not completed: the PV controller's job, as upstream
                continue
            # IsDelayBindingMode: only a class that exists and says WaitForFirstConsumer delays
            # binding; no class, or one not found, is Immediate (the PV controller's to resolve).
            cls_name = claim_class(pvc)
            sc = store.get("storageclasses", cls_name) if cls_name else None
            if sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                delayed.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status(UAU, UNBOUND_IMMEDIATE)
        # Smallest request first (findMatchingVolumes sorts them so; stable for equal sizes): the
        # order PVs are matched and provisioning is checked in.
        claims.delayed = sorted((self._delayed_claim(pvc) for pvc in delayed), key=lambda c: c.size)
        state.write(KEY, claims)
        return None, None

    def _delayed_claim(self, pvc: dict[str, Any]) -> _DelayedClaim:
        """The Available PVs that could take ``pvc`` on some node (class, volume mode, capacity,
        access modes, claim selector, claimRef), smallest first, whether it can be provisioned, and
        the storage capacities that would take it."""
        store = self.handle.objects
        meta = pvc["metadata"]
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        spec = pvc.get("spec") or {}
        cls_name = claim_class(pvc)
        requests = (spec.get("resources") or {}).get("requests") or {}
        want = quantity_value(requests.get("storage", "0"))
        try:
            sel = parse_label_selector(spec.get("selector"), "spec.selector")
        except ObjectError:
            # a malformed selector: no node can take it
            return _DelayedClaim(key, pvc, [], False, [], cls_name, want)
        modes = set(spec.get("accessModes") or ())
        mode = spec.get("volumeMode") or "Filesystem"
        fits: list[tuple[int, str, NodeSelector | None]] = []
        for pv in store.list("persistentvolumes"):
            pmeta = pv.get("metadata") or {}
            ps = pv.get("spec") or {}
            if pmeta.get("deletionTimestamp"):
                continue
            ref = ps.get("claimRef")
            if ref and not (ref.get("namespace") == meta.get("namespace") and ref.get("name") == meta.get("name")):
                continue
            if (pv.get("status") or {}).get("phase") not in (None, "Available", "Pending") and not ref:
                continue
            if (ps.get("storageClassName") or "") != cls_name or (ps.get("volumeMode") or "Filesystem") != mode:
                continue
            size = quantity_value((ps.get("capacity") or {}).get("storage", "0"))
            if size < want or not modes.issubset(set(ps.get("accessModes") or ())):
                continue
            if sel is not None and not sel.matches(pmeta.get("labels") or {}):
                continue
            affinity = pv_node_affinity(pv)
            if affinity is NO_NODE:
                continue
            fits.append((size, pmeta.get("name", ""), affinity))
        fits.sort(key=lambda f: f[0])   # stable: equal sizes keep the store's order
        sc = store.get("storageclasses", cls_name) or {}   # deleted since PreFilter: nothing to provision
        provisioner = sc.get("provisioner")
        provisionable = sel is None and bool(provisioner) and provisioner != NO_PROVISIONER
        capacities = self._capacities(str(provisioner or ""), cls_name, want) if "storage" in requests else None
        return _DelayedClaim(key, pvc, [(n, a, size) for size, n, a in fits], provisionable,
                             sc.get("allowedTopologies") or [], cls_name, want, capacities)

    def _capacities(self, provisioner: str, cls_name: str, size: int) -> list[tuple[int, LabelSelector]] | None:
        """``hasEnoughCapacity`` without the node: None when the provisioner's CSIDriver does not opt
        into capacity tracking (or does not exist), else the CSIStorageCapacities of ``cls_name``
        whose ``maximumVolumeSize`` (or, without one, ``capacity``) is at least ``size``, with their
        ``nodeTopology`` (one without a topology is available nowhere, one that does not parse too)."""
        store = self.handle.objects
        driver = store.get("csidrivers", provisioner) if provisioner else None
        if driver is None or (driver.get("spec") or {}).get("storageCapacity") is not True:
            return None
        out = []
        for cap in store.list("csistoragecapacities"):
            if cap.get("storageClassName") != cls_name:
                continue
            limit = cap.get("maximumVolumeSize")
            if limit is None:
                limit = cap.get("capacity")
            if limit is None or quantity_value(limit) < size:
                continue
            try:
                topology = parse_label_selector(cap.get("nodeTopology"), "nodeTopology")
            except ObjectError:
                continue
            if topology is None:
                continue
            out.append((quantity_value(cap.get("capacity") or "0"), topology))
        return out

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        claims: _Claims | None = state.get(KEY)
        if claims is None:
            return FilterResult.all_pass(len(nodes))
        n = len(nodes)
        # Bound claims, in order: the first whose PV is missing or does not fit decides the reason.
        ok = np.ones(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        conflict = np.zeros(n, dtype=bool)
        for exists, affinity in claims.bound:
            if not exists:
                missing |= ok
                ok[:] = False
                break
            m = _affinity_mask(nodes, affinity)
            conflict |= ok & ~m
            ok &= m
        bind_conflict = no_space = None
        if claims.delayed:
            a = self._assign(claims.delayed, nodes)
            claims.assignments.append(a)
            bind_conflict, no_space = a.bind_conflict, a.no_space
            ok &= a.ok
        # FindPodVolumes' order of reasons.
        failures: list[tuple[Code, str, np.ndarray]] = []
        for reason, mask in ((REASON_NODE_CONFLICT, conflict), (REASON_BIND_CONFLICT, bind_conflict),
                             (REASON_NOT_ENOUGH_SPACE, no_space), (REASON_PV_NOT_EXIST, missing)):
            if mask is not None and mask.any():
                failures.append((UAU, reason, mask))
        return FilterResult(ok, failures)

    @staticmethod
    def _assign(delayed: list[_DelayedClaim], nodes: NodeBatch) -> _Assignment:
        """Per node, claim by claim (smallest request first): the smallest fitting PV whose node
        affinity matches the node and that no earlier claim took there; then, for the claims left,
        dynamic provisioning (a real provisioner, the class's allowedTopologies, and - when the
        driver tracks capacity - a CSIStorageCapacity of the class available from the node with
        room for the claim). The first claim that cannot be provisioned decides the reason."""
        n = len(nodes)
        taken: dict[str, np.ndarray] = {}
        picks = []
        for claim in delayed:
            pick = np.full(n, -1, dtype=np.int64)
            for k, (pv_name, affinity, _) in enumerate(claim.candidates):
                open_ = pick < 0
                if not open_.any():
                    break
                used = taken.get(pv_name)
                m = open_ & _affinity_mask(nodes, affinity)
                if used is not None:
                    m &= ~used
                pick[m] = k
                taken[pv_name] = m if used is None else (used | m)
            picks.append(pick)
        bind_conflict = np.zeros(n, dtype=bool)
        no_space = np.zeros(n, dtype=bool)
        caps = []
        for claim, pick in zip(delayed, picks):
            cap = np.full(n, -1, dtype=np.int64)
            need = (pick < 0) & ~bind_conflict & ~no_space
            if need.any():
                if not claim.provisionable:
                    bind_conflict |= need
                    need[:] = False
                else:
                    bad = need & ~_topology_mask(nodes, claim.allowed_topologies)
                    bind_conflict |= bad
                    need &= ~bad
                if claim.capacities is not None and need.any():
                    for k, (_, topology) in enumerate(claim.capacities):
                        m = need & (cap < 0) & _selector_mask(nodes, topology)
                        cap[m] = k
                    no_space |= need & (cap < 0)
            caps.append(cap)
        return _Assignment(nodes, ~(bind_conflict | no_space), picks, caps, bind_conflict, no_space)

    # -- Score (StorageCapacityScoring) --------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        """Skip without the gate (no scorer). With it upstream always scores; a pod without
        delayed claims gets 0 on every node there, which is what skipping adds."""
        claims: _Claims | None = state.get(KEY)
        if self.scorer is None or claims is None or not claims.delayed:
            return Status(Code.SKIP)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        claims: _Claims | None = state.get(KEY)
        out = np.zeros(len(nodes), dtype=np.int64)
        if claims is None or self.scorer is None:
            return out
        for j, name in enumerate(nodes.names):
            hit = claims.found(name)
            if hit is not None:
                out[j] = self._node_score(claims.delayed, *hit)
        return out

    def _node_score(self, delayed: list[_DelayedClaim], a: _Assignment, i: int) -> int:
        """Per class, requested against capacity: the PVs chosen here if there are any (their
        capacities add up), else the claims to provision with a CSIStorageCapacity (the class's
        capacity is the last one's); the shape's score of ``requested * 100 // capacity`` (100 when
        over capacity or none), averaged over the classes and rounded half away from zero."""
        classes: dict[str, list[int]] = {}
        static = [(c, int(p[i])) for c, p in zip(delayed, a.picks) if p[i] >= 0]
        if static:
            for c, k in static:
                r = classes.setdefault(c.class_name, [0, 0])
                r[0] += c.size
                r[1] += c.candidates[k][2]
        else:
            for c, cap, p in zip(delayed, a.caps, a.picks):
                if p[i] >= 0 or cap[i] < 0 or c.capacities is None:
                    continue
                r = classes.setdefault(c.class_name, [0, 0])
                r[0] += c.size
                r[1] = c.capacities[int(cap[i])][0]
        if not classes:
            return 0
        assert self.scorer is not None
        total = 0
        for requested, capacity in classes.values():
            utilization = (fshape.MAX_UTILIZATION if capacity == 0 or requested > capacity
                           else requested * fshape.MAX_UTILIZATION // capacity)
            total += fshape.broken_linear(self.scorer, utilization)
        return int(math.floor(total / len(classes) + 0.5))

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        claims: _Claims | None = state.get(KEY)
        if claims is None or not claims.delayed:
            return Status(Code.SKIP)
        chosen = claims.chosen(node_name)
        if chosen is None:
            chosen = self._choose_now(claims, node_name)
            if chosen is None:
                return Status(Code.ERROR, f"no volumes can be bound on node {node_name!r} any more")
        client = self.handle.client
        if client is None:
            return Status(Code.ERROR, "binding volumes: no API client (an offline run cannot bind volumes)")
        for c in claims.delayed:
            meta = c.pvc["metadata"]
            pv_name = chosen.get(c.key, "")
            if pv_name:
                ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                       "name": meta["name"], "uid": meta.get("uid", "")}
                await client.request("PATCH", f"/api/v1/persistentvolumes/{pv_name}",
                                     body={"spec": {"claimRef": ref},
                                           "metadata": {"annotations": {
                                               "pv.kubernetes.io/bound-by-controller": "yes"}}},
                                     content_type="application/merge-patch+json")
            else:
                await client.request("PATCH",
                                     f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}",
                                     body={"metadata": {"annotations": {SELECTED_NODE: node_name}}},
                                     content_type="application/merge-patch+json")
        return await self._wait_bound(pod, [f"{c.pvc['metadata']['namespace']}/{c.pvc['metadata']['name']}"
                                            for c in claims.delayed])

    def _choose_now(self, claims: _Claims, node_name: str) -> dict[str, str] | None:
        """No Filter call judged ``node_name`` this cycle: choose from the store as it is now."""
        every = self.handle.all_nodes()
        i = every.index_of(node_name)
        if i < 0:
            return None
        fresh = _Claims(delayed=[self._delayed_claim(c.pvc) for c in claims.delayed])
        fresh.assignments.append(self._assign(fresh.delayed, every.subset(np.arange(len(every)) == i)))
        return fresh.chosen(node_name)

    async def _wait_bound(self, pod: PodInfo, keys: list[str]) -> Status | None:
        store = self.handle.objects
        deadline = time.monotonic() + self.args.bind_timeout_seconds
        while True:
            pending = [k for k in keys if not fully_bound(store.get("persistentvolumeclaims", k))]
            if not pending:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return Status(Code.ERROR, f"binding volumes: context deadline exceeded waiting for "
                                          f"PersistentVolumeClaim(s) {', '.join(pending)} to be bound")
            await store.changed(min(left, 5.0))

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return BINDING_EVENTS
