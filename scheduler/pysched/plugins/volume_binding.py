"""VolumeBinding (PreFilter, Filter, Reserve, PreBind): pods go where their volumes can be.

PreFilter, per PersistentVolumeClaim the pod uses (``persistentVolumeClaim`` and generic
``ephemeral`` volumes; a claim counts as bound once it has a volume name and the PV controller's
``pv.kubernetes.io/bind-completed`` annotation): a missing claim is ``persistentvolumeclaim "x" not found``, a Lost claim
or one being deleted is rejected, and an unbound claim whose StorageClass binds ``Immediate`` (or
has no class) gives ``pod has unbound immediate PersistentVolumeClaims`` - all
UnschedulableAndUnresolvable, waiting for the PV controller.

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
bound to a node before its volumes are. Reads: PVCs, PVs and StorageClasses from the ObjectStore.
"""

from __future__ import annotations

import time

from pysched.framework.args import get_int, strict
from pysched.framework.interface import (FilterResult, EnqueueExtensions, FilterPlugin,
                                           PreBindPlugin, PreFilterPlugin, ReservePlugin)
from pysched.framework.status import Code, Status
from pysched.plugins.helper.volumes import VOLUME_EVENTS, claim_class
from pysched.apis.core.model import ObjectError, parse_label_selector, parse_node_selector
from pysched.apis.core.quantity import value as qvalue

REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
KEY = "VolumeBinding/state"
class VolumeBindingArgs:
    def __init__(self, bind_timeout_seconds: int = 600):
        self.bind_timeout_seconds = bind_timeout_seconds

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "VolumeBindingArgs":
        raw = strict(raw, path, ("bindTimeoutSeconds", "shape"), kind="VolumeBindingArgs")
        return cls(get_int(raw, "bindTimeoutSeconds", path, 600, lo=0))

    def to_dict(self) -> dict:
        return {"bindTimeoutSeconds": self.bind_timeout_seconds}


def pv_matches_node(pv: dict, labels: dict, name: str) -> bool:
    req = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required"))
    if req is None:
        return True
    try:
        sel = parse_node_selector(req, "spec.nodeAffinity.required")
    except ObjectError:
        return False
    return sel.matches(labels, name)


def _topology_matches(class_: dict, labels: dict) -> bool:
    terms = class_.get("allowedTopologies") or []
    if not terms:
        return True
    for t in terms:
        ok = True
        for e in t.get("matchLabelExpressions") or ():
            if labels.get(e.get("key")) not in (e.get("values") or ()):
                ok = False
                break
        if ok:
            return True
    return False


class _Claims:
    __slots__ = ("bound", "delay", "chosen")

    def __init__(self):
        self.bound: list[dict] = []
        self.delay: list[dict] = []
        self.chosen: dict[str, dict] = {}  # node -> {claim key: pv name or "" (provision)}


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin, EnqueueExtensions):
    name = "VolumeBinding"
    Args = VolumeBindingArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or VolumeBindingArgs(), handle)

    @property
    def objects(self):
        return getattr(self.handle, "objects", None)

    def pre_filter(self, state, pod, nodes):
        if not pod.pvc_names:
            return None, Status(Code.SKIP)
        store = self.objects
        claims = _Claims()
        immediate = False
        for name, ephemeral in pod.pvc_names:
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{name}") if store else None
            if pvc is None:
                msg = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                       if ephemeral else f'persistentvolumeclaim "{name}" not found')
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
            spec = pvc.get("spec") or {}
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                                    f'"{spec.get("volumeName", "")}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" is being deleted')
            if fully_bound(pvc):
                claims.bound.append(pvc)
                continue
            if spec.get("volumeName"):
                immediate = True  # pre-bound but not completed: the PV controller's job, as upstream
                continue
            cls_name = claim_class(pvc)
            if not cls_name:
                immediate = True
                continue
            sc = store.get("storageclasses", cls_name)
            if sc is None:
                return None, Status(Code.ERROR, f'storageclass.storage.k8s.io "{cls_name}" not found')
            if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                claims.delay.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, UNBOUND_IMMEDIATE)
        state.write(KEY, claims)
        return None, None

    def filter(self, state, pod, nodes):
        if state.get(KEY) is None:
            return FilterResult.all_pass(len(nodes))
        return FilterResult.each(nodes, lambda node: self._filter_node(state, pod, node))

    def _filter_node(self, state, pod, node):
        claims: _Claims | None = state.get(KEY)
        if claims is None:
            return None
        store = self.objects
        reasons = []
        for pvc in claims.bound:
            pv = store.get("persistentvolumes", pvc["spec"]["volumeName"])
            if pv is None:
                reasons.append(REASON_PV_NOT_EXIST)
                break
            if not pv_matches_node(pv, node.labels, node.name):
                reasons.append(REASON_NODE_CONFLICT)
                break
        if claims.delay:
            chosen = self._find(claims.delay, node)
            if chosen is None:
                reasons.append(REASON_BIND_CONFLICT)
            else:
                claims.chosen[node.name] = chosen
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)
        return None

    def _find(self, delay: list[dict], node) -> dict | None:
        """Claim key -> PV name for a static match, or "" to provision; None if impossible."""
        store = self.objects
        used: set[str] = set()
        out: dict[str, str] = {}
        for pvc in delay:
            meta = pvc["metadata"]
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            spec = pvc.get("spec") or {}
            cls_name = claim_class(pvc)
            want = qvalue(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0"))
            modes = set(spec.get("accessModes") or ())
            mode = spec.get("volumeMode") or "Filesystem"
            try:
                sel = parse_label_selector(spec.get("selector"), "spec.selector")
            except ObjectError:
                return None
            best = None
            best_size = None
            for pv_name, pv in store.objects["persistentvolumes"].items():
                ps = pv.get("spec") or {}
                if pv_name in used or (pv.get("metadata") or {}).get("deletionTimestamp"):
                    continue
                ref = ps.get("claimRef")
                if ref and not (ref.get("namespace") == meta.get("namespace") and ref.get("name") == meta.get("name")):
                    continue
                if (pv.get("status") or {}).get("phase") not in (None, "Available", "Pending") and not ref:
                    continue
                if (ps.get("storageClassName") or "") != cls_name or (ps.get("volumeMode") or "Filesystem") != mode:
                    continue
                size = qvalue((ps.get("capacity") or {}).get("storage", "0"))
                if size < want or not modes.issubset(set(ps.get("accessModes") or ())):
                    continue
                if sel is not None and not sel.matches((pv.get("metadata") or {}).get("labels") or {}):
                    continue
                if not pv_matches_node(pv, node.labels, node.name):
                    continue
                if best is None or size < best_size:
                    best, best_size = pv_name, size
            if best is not None:
                used.add(best)
                out[key] = best
                continue
            sc = store.get("storageclasses", cls_name) or {}
            if sel is not None or not sc.get("provisioner") or sc.get("provisioner") == NO_PROVISIONER:
                return None
            if not _topology_matches(sc, node.labels):
                return None
            out[key] = ""
        return out

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name):
        return None

    async def pre_bind(self, state, pod, node_name):
        claims: _Claims | None = state.get(KEY)
        if claims is None or not claims.delay:
            return Status(Code.SKIP)
        chosen = claims.chosen.get(node_name)
        if chosen is None:
            node = self.handle.cache.nodes.get(node_name)
            chosen = self._find(claims.delay, node) if node is not None else None
            if chosen is None:
                return Status(Code.ERROR, f"no volumes can be bound on node {node_name!r} any more")
        client = self.handle.client
        for pvc in claims.delay:
            meta = pvc["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            pv_name = chosen.get(key, "")
            if pv_name:
                ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                       "name": meta["name"], "uid": meta.get("uid", "")}
                await client.request("PATCH", f"/api/v1/persistentvolumes/{pv_name}",
                                     body={"spec": {"claimRef": ref},
                                           "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}}},
                                     content_type="application/merge-patch+json")
            else:
                await client.request("PATCH", f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}",
                                     body={"metadata": {"annotations": {SELECTED_NODE: node_name}}},
                                     content_type="application/merge-patch+json")
        return await self._wait_bound(pod, [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in claims.delay])

    async def _wait_bound(self, pod, keys: list[str]) -> Status | None:
        store = self.objects
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

    def events_to_register(self):
        return VOLUME_EVENTS


def fully_bound(pvc: dict | None) -> bool:
    """``isPVCFullyBound``: a volume name and the PV controller's bind-completed annotation."""
    if pvc is None:
        return False
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    return bool((pvc.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in ann

