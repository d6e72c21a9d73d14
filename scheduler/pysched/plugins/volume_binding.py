"""VolumeBinding (PreFilter, Filter, Reserve, PreBind): pods go where their volumes can be.

PreFilter, per PersistentVolumeClaim the pod uses (``persistentVolumeClaim`` and generic
``ephemeral`` volumes; a claim counts as bound once it has a volume name and the PV controller's
``pv.kubernetes.io/bind-completed`` annotation): a missing claim is
``persistentvolumeclaim "x" not found``, a Lost claim or one being deleted is rejected, and an
unbound claim whose StorageClass binds ``Immediate`` (or has no class, or a class that does not
exist) gives ``pod has unbound immediate PersistentVolumeClaims`` - all UnschedulableAndUnresolvable,
waiting for the PV controller (a StorageClass Add requeues the pod too).

Filter, per node: a bound claim's PersistentVolume must exist (``node(s) unavailable due to one
or more pvc(s) bound to non-existent pv(s)``) and its ``spec.nodeAffinity`` must match the node
(``node(s) didn't match PersistentVolume's node affinity``). An unbound ``WaitForFirstConsumer``
claim needs either an Available PersistentVolume (same class, enough capacity, the access modes,
the claim's selector, node affinity matching the node) or dynamic provisioning allowed on the
node (a real provisioner and the class's ``allowedTopologies``); otherwise
``node(s) didn't find available persistent volumes to bind``.

PreBind (only for WaitForFirstConsumer claims): statically matched volumes get the claim in
``spec.claimRef``; claims to provision get ``volume.kubernetes.io/selected-node=<node>``; then
the pod waits (``bindTimeoutSeconds``, default 600) until every claim is Bound, so it is never
bound to a node before its volumes are. Reads: PVCs, PVs and StorageClasses from the ObjectStore
(once per cycle, in PreFilter), node labels and names.
"""

from __future__ import annotations

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
    ReservePlugin,
    Status,
    arg,
)
from pysched.framework.api import NodeSelector, ObjectError, parse_label_selector, parse_node_selector, quantity_value
from pysched.plugins.helper.nodeselect import node_selector_mask
from pysched.plugins.helper.volumes import BINDING_EVENTS, claim_class

REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
KEY = "VolumeBinding/state"
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_NODE = NodeSelector(())   # a malformed PV node affinity: matches no node


@dataclass
class VolumeBindingArgs:
    """``bindTimeoutSeconds``: how long PreBind waits for the claims to be bound. ``shape`` is
    accepted for kube-scheduler configuration files and not used (no StorageCapacityScoring)."""
    KIND = "VolumeBindingArgs"

    bind_timeout_seconds: int = field(default=600, metadata=arg(ge=0))
    shape: list[dict[str, Any]] | None = None


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


@dataclass
class _DelayedClaim:
    """An unbound WaitForFirstConsumer claim, with what does not depend on the node worked out."""
    key: str                                   # namespace/name
    pvc: dict[str, Any]
    candidates: list[tuple[str, NodeSelector | None]]  # Available PVs that fit, smallest first
    provisionable: bool                        # a real provisioner, no selector
    allowed_topologies: list[dict[str, Any]]


@dataclass
class _Assignment:
    """One Filter call's answer for the delayed claims: per claim, per node of ``nodes``, the index
    of the chosen candidate PV (-1: provision); ``ok``: every claim can be satisfied."""
    nodes: NodeBatch
    ok: np.ndarray
    picks: list[np.ndarray]


@dataclass
class _Claims:
    bound: list[tuple[bool, NodeSelector | None]] = field(default_factory=list)  # (PV exists, its node affinity)
    delayed: list[_DelayedClaim] = field(default_factory=list)
    assignments: list[_Assignment] = field(default_factory=list)

    def chosen(self, node_name: str) -> dict[str, str] | None:
        """Claim key -> PV name, or "" to provision, as the latest Filter call that found ``node_name``
        feasible chose (None: no Filter call did)."""
        for a in reversed(self.assignments):
            i = a.nodes.index_of(node_name)
            if i >= 0 and a.ok[i]:
                return {c.key: (c.candidates[int(p[i])][0] if p[i] >= 0 else "") for c, p in zip(self.delayed, a.picks)}
        return None


class VolumeBinding(PreFilterPlugin[VolumeBindingArgs], FilterPlugin[VolumeBindingArgs],
                    ReservePlugin[VolumeBindingArgs], PreBindPlugin[VolumeBindingArgs], EnqueueExtensions):
    name = "VolumeBinding"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)

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
        claims.delayed = [self._delayed_claim(pvc) for pvc in delayed]
        state.write(KEY, claims)
        return None, None

    def _delayed_claim(self, pvc: dict[str, Any]) -> _DelayedClaim:
        """The Available PVs that could take ``pvc`` on some node (class, volume mode, capacity,
        access modes, claim selector, claimRef), smallest first, and whether it can be provisioned."""
        store = self.handle.objects
        meta = pvc["metadata"]
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        spec = pvc.get("spec") or {}
        cls_name = claim_class(pvc)
        try:
            sel = parse_label_selector(spec.get("selector"), "spec.selector")
        except ObjectError:
            return _DelayedClaim(key, pvc, [], False, [])   # a malformed selector: no node can take it
        want = quantity_value(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0"))
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
        return _DelayedClaim(key, pvc, [(n, a) for _, n, a in fits], provisionable,
                             sc.get("allowedTopologies") or [])

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
        failures: list[tuple[Code, str, np.ndarray]] = []
        if missing.any():
            failures.append((UAU, REASON_PV_NOT_EXIST, missing))
        if conflict.any():
            failures.append((UAU, REASON_NODE_CONFLICT, conflict))
        if claims.delayed:
            a = self._assign(claims.delayed, nodes)
            claims.assignments.append(a)
            if not a.ok.all():
                failures.append((UAU, REASON_BIND_CONFLICT, ~a.ok))
            ok &= a.ok
        return FilterResult(ok, failures)

    @staticmethod
    def _assign(delayed: list[_DelayedClaim], nodes: NodeBatch) -> _Assignment:
        """Per node, claim by claim: the smallest fitting PV whose node affinity matches the node
        and that no earlier claim took there, else dynamic provisioning where allowed."""
        n = len(nodes)
        ok = np.ones(n, dtype=bool)
        taken: dict[str, np.ndarray] = {}
        picks = []
        for claim in delayed:
            pick = np.full(n, -1, dtype=np.int64)
            for k, (pv_name, affinity) in enumerate(claim.candidates):
                open_ = pick < 0
                if not open_.any():
                    break
                used = taken.get(pv_name)
                m = open_ & _affinity_mask(nodes, affinity)
                if used is not None:
                    m &= ~used
                pick[m] = k
                taken[pv_name] = m if used is None else (used | m)
            unmatched = pick < 0
            if unmatched.any():
                if claim.provisionable:
                    ok &= ~unmatched | _topology_mask(nodes, claim.allowed_topologies)
                else:
                    ok &= ~unmatched
            picks.append(pick)
        return _Assignment(nodes, ok, picks)

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
