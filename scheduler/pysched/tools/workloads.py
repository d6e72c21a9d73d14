"""Workloads in a ``pysched simulate --pods`` file expanded into the Pods their controllers create.

* Deployment -> one ReplicaSet ``<deployment>-<pod-template-hash>`` (label and selector
  ``pod-template-hash`` added, as the Deployment controller does) -> ``spec.replicas`` Pods;
* ReplicaSet / ReplicationController -> ``spec.replicas`` Pods ``<owner>-<suffix>``;
* StatefulSet -> Pods ``<name>-<ordinal>`` in ordinal order (labels
  ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index``), and for each
  ``volumeClaimTemplates`` entry a PVC ``<template>-<name>-<ordinal>`` (kept as is when the snapshot
  already holds it; a new one gets the default StorageClass as the API's admission would) mounted
  in place of the pod volume of the same name. Every ordinal is created at once: with the default
  ``OrderedReady`` policy the controller would wait for ordinal N to be Ready before creating N+1,
  so pods after an unschedulable ordinal would not exist yet (the notes say so);
* Job -> the Pods the Job controller creates at once: ``parallelism`` (default 1), at most
  ``completions`` when set, none when ``suspend``; Indexed Jobs get ``<job>-<index>-<suffix>`` and
  the completion-index annotation;
* DaemonSet -> one Pod per node the DaemonSet controller deems eligible (its nodeSelector and
  required node affinity match, every NoSchedule/NoExecute taint tolerated, counting the controller's
  default tolerations), each pinned with the required node affinity ``matchFields metadata.name In
  [node]`` the controller writes (replacing the template's required terms) and carrying those
  default tolerations; the scheduler then decides whether it fits.

Every Pod has the controller ``ownerReference`` (and the owner exists in the simulation's object
store for ReplicaSets and StatefulSets), so PodTopologySpread's system-default constraints and the
selector spreading treat the replicas as one workload.

Generated name suffixes are deterministic so that reruns agree: the pod-template hash is FNV-1a
(32 bit) over the canonical JSON of the pod template, written with the controller's safe alphabet
(``bcdfghjklmnpqrstvwxz2456789``) - the same shape as the Deployment controller's hash, not the
same value (that one hashes a Go struct dump); a Pod suffix is 5 characters of that alphabet taken
from SHA-256 of ``namespace/owner/index``. Owner uids, when the file gives none, are
``simulated-<kind>-<namespace>-<name>``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

from pysched.apis.core.model import find_untolerated_taint, parse_taints, parse_tolerations
from pysched.framework.podinfo import PodInfo

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "Job", "DaemonSet")
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"       # k8s.io/apimachinery/pkg/util/rand
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
# util.AddOrUpdateDaemonPodTolerations (pkg/controller/daemon/util), all "Exists".
DAEMON_TOLERATIONS = (("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
                      ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                      ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                      ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                      ("node.kubernetes.io/unschedulable", "NoSchedule"))
HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", "NoSchedule")
API_VERSIONS = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
                "Job": "batch/v1", "ReplicationController": "v1"}


class WorkloadError(ValueError):
    """A workload that its controller (or the API) would not accept; the message names the field."""


@dataclass
class Expansion:
    """What a set of workloads becomes: Pods in creation order, the intermediate owners
    (ReplicaSets of Deployments, the StatefulSets themselves) and new PVCs for the object store."""
    pods: list[dict] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)      # pod ns/name -> "Deployment web"
    notes: list[str] = field(default_factory=list)


def template_hash(template: dict, collision_count: int = 0) -> str:
    """Deterministic ``pod-template-hash``: FNV-1a 32 of the canonical template, safe-encoded."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    h = 0x811C9DC5
    for b in data + (str(collision_count).encode() if collision_count else b""):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in str(h))


def name_suffix(namespace: str, owner: str, index: int, length: int = 5) -> str:
    digest = hashlib.sha256(f"{namespace}/{owner}/{index}".encode()).digest()
    return "".join(SAFE_ALPHABET[b % len(SAFE_ALPHABET)] for b in digest[:length])


def _where(obj: dict, where: str) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name')} ({where})"


@overload
def _int_field(obj: dict, where: str, fld: str, value: Any, default: int) -> int: ...
@overload
def _int_field(obj: dict, where: str, fld: str, value: Any, default: None) -> int | None: ...
def _int_field(obj: dict, where: str, fld: str, value, default: int | None) -> int | None:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WorkloadError(f"{_where(obj, where)}: {fld}: expected a non-negative integer, got {value!r}")
    return value


def _template(obj: dict, where: str) -> dict:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise WorkloadError(f"{_where(obj, where)}: spec: required")
    tmpl = spec.get("template")
    if not isinstance(tmpl, dict) or not isinstance(tmpl.get("spec"), dict):
        raise WorkloadError(f"{_where(obj, where)}: spec.template.spec: required")
    return tmpl


def _selector_matches_template(obj: dict, where: str, tmpl: dict) -> None:
    """The API rejects a workload whose selector does not select its own template."""
    sel = (obj.get("spec") or {}).get("selector")
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    if obj["kind"] == "ReplicationController":
        if sel is None:
            return   # defaulted from the template's labels
        ok = isinstance(sel, dict) and all(labels.get(k) == v for k, v in sel.items())
    elif obj["kind"] == "Job":
        return       # the Job controller generates its selector
    else:
        from pysched.apis.core.model import parse_label_selector
        if not isinstance(sel, dict) or not sel:
            raise WorkloadError(f"{_where(obj, where)}: spec.selector: required")
        try:
            parsed = parse_label_selector(sel, "spec.selector")
        except ValueError as exc:
            raise WorkloadError(f"{_where(obj, where)}: {exc}") from None
        ok = parsed is not None and parsed.matches(labels)
    if not ok:
        raise WorkloadError(f"{_where(obj, where)}: spec.template.metadata.labels: "
                            "`selector` does not match template `labels`")


def owner_ref(obj: dict) -> dict:
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion") or API_VERSIONS.get(obj["kind"], "v1"), "kind": obj["kind"],
            "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def _with_uid(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta["namespace"] = meta.get("namespace") or "default"
    meta.setdefault("uid", f"simulated-{obj['kind'].lower()}-{meta['namespace']}-{meta['name']}")
    obj.setdefault("apiVersion", API_VERSIONS.get(obj["kind"], "v1"))
    return obj


def _pod_from_template(owner: dict, tmpl: dict, name: str, extra_labels: dict | None = None) -> dict:
    meta = copy.deepcopy(tmpl.get("metadata") or {})
    labels = dict(meta.get("labels") or {}, **(extra_labels or {}))
    pod_meta = {"name": name, "namespace": owner["metadata"]["namespace"], "labels": labels,
                "ownerReferences": [owner_ref(owner)]}
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": copy.deepcopy(tmpl["spec"])}


class Expander:
    """Expands workloads against a snapshot (its nodes for DaemonSets, its PVCs and StorageClasses
    for StatefulSets)."""

    def __init__(self, nodes: list[dict], objects: list[dict]):
        self.nodes = nodes
        self.pvcs = {f"{(o['metadata'].get('namespace') or 'default')}/{o['metadata']['name']}"
                     for o in objects if o.get("kind") == "PersistentVolumeClaim"}
        defaults = [o for o in objects if o.get("kind") == "StorageClass"
                    and any((o["metadata"].get("annotations") or {}).get(a) == "true"
                            for a in DEFAULT_CLASS_ANNOTATIONS)]
        # As the DefaultStorageClass admission plugin: the newest default class (then by name).
        defaults.sort(key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]))
        self.default_class = defaults[-1]["metadata"]["name"] if defaults else None
        self.out = Expansion()

    def expand(self, obj: dict, where: str) -> None:
        handlers: dict[str, Callable[[dict, str], None]] = {
            "Deployment": self._deployment, "ReplicaSet": self._replicaset,
            "ReplicationController": self._replicaset, "StatefulSet": self._statefulset,
            "Job": self._job, "DaemonSet": self._daemonset}
        handlers[obj["kind"]](_with_uid(obj), where)

    def _emit(self, pod: dict, origin: str) -> None:
        self.out.pods.append(pod)
        self.out.origin[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = origin

    def _deployment(self, dep: dict, where: str) -> None:
        tmpl = _template(dep, where)
        _selector_matches_template(dep, where, tmpl)
        replicas = _int_field(dep, where, "spec.replicas", dep["spec"].get("replicas"), 1)
        h = template_hash(tmpl, int((dep.get("status") or {}).get("collisionCount") or 0))
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        tmpl = copy.deepcopy(tmpl)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
        sel = copy.deepcopy(dep["spec"]["selector"])
        sel.setdefault("matchLabels", {})["pod-template-hash"] = h
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": f"{name}-{h}", "namespace": ns, "uid": f"simulated-replicaset-{ns}-{name}-{h}",
                           "labels": dict(tmpl["metadata"]["labels"]), "ownerReferences": [owner_ref(dep)]},
              "spec": {"replicas": replicas, "selector": sel, "template": tmpl}}
        self._replicaset(rs, where, origin=f"Deployment {name}")

    def _replicaset(self, rs: dict, where: str, origin: str = "") -> None:
        tmpl = _template(rs, where)
        _selector_matches_template(rs, where, tmpl)
        replicas = _int_field(rs, where, "spec.replicas", rs["spec"].get("replicas"), 1)
        ns, name = rs["metadata"]["namespace"], rs["metadata"]["name"]
        self.out.objects.append(rs)
        origin = origin or f"{rs['kind']} {name}"
        taken: set[str] = set()
        for i in range(replicas or 0):
            j, suffix = i, name_suffix(ns, name, i)
            while suffix in taken:       # a collision: the controller would retry with another name
                j += replicas
                suffix = name_suffix(ns, name, j)
            taken.add(suffix)
            self._emit(_pod_from_template(rs, tmpl, f"{name}-{suffix}"), origin)

    def _statefulset(self, ss: dict, where: str) -> None:
        tmpl = _template(ss, where)
        _selector_matches_template(ss, where, tmpl)
        replicas = _int_field(ss, where, "spec.replicas", ss["spec"].get("replicas"), 1)
        ordinals = ss["spec"].get("ordinals") or {}
        start = _int_field(ss, where, "spec.ordinals.start", ordinals.get("start"), 0) or 0
        ns, name = ss["metadata"]["namespace"], ss["metadata"]["name"]
        claims = ss["spec"].get("volumeClaimTemplates") or []
        if not isinstance(claims, list):
            raise WorkloadError(f"{_where(ss, where)}: spec.volumeClaimTemplates: expected a list")
        for c, claim in enumerate(claims):
            if not isinstance(claim, dict) or not (claim.get("metadata") or {}).get("name"):
                raise WorkloadError(f"{_where(ss, where)}: spec.volumeClaimTemplates[{c}].metadata.name: required")
        self.out.objects.append(ss)
        revision = f"{name}-{template_hash(tmpl)}"
        for ordinal in range(start, start + (replicas or 0)):
            pod_name = f"{name}-{ordinal}"
            pod = _pod_from_template(ss, tmpl, pod_name, {
                "statefulset.kubernetes.io/pod-name": pod_name, "apps.kubernetes.io/pod-index": str(ordinal),
                "controller-revision-hash": revision})
            volumes = [v for v in pod["spec"].get("volumes") or [] if v.get("name") not in
                       {c["metadata"]["name"] for c in claims}]
            for claim in claims:
                tname = claim["metadata"]["name"]
                pvc_name = f"{tname}-{name}-{ordinal}"
                volumes.append({"name": tname, "persistentVolumeClaim": {"claimName": pvc_name}})
                if f"{ns}/{pvc_name}" in self.pvcs:
                    continue     # the claim outlives its pod: reused as is
                spec = copy.deepcopy(claim.get("spec") or {})
                if "storageClassName" not in spec and self.default_class:
                    spec["storageClassName"] = self.default_class
                labels = dict((claim.get("metadata") or {}).get("labels") or {})
                labels.update(((ss["spec"].get("selector") or {}).get("matchLabels")) or {})
                self.pvcs.add(f"{ns}/{pvc_name}")
                self.out.objects.append({
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": pvc_name, "namespace": ns, "labels": labels,
                                 "uid": f"simulated-pvc-{ns}-{pvc_name}"},
                    "spec": spec, "status": {"phase": "Pending"}})
            if volumes:
                pod["spec"]["volumes"] = volumes
            self._emit(pod, f"StatefulSet {name}")
        policy = ss["spec"].get("podManagementPolicy") or "OrderedReady"
        if policy == "OrderedReady" and (replicas or 0) > 1:
            self.out.notes.append(f"StatefulSet {ns}/{name}: OrderedReady - the controller creates ordinal N+1 "
                                  "only once N is Ready; every ordinal is simulated at once")

    def _job(self, job: dict, where: str) -> None:
        tmpl = _template(job, where)
        spec = job["spec"]
        parallelism = _int_field(job, where, "spec.parallelism", spec.get("parallelism"), 1)
        completions = _int_field(job, where, "spec.completions", spec.get("completions"), None)
        count = parallelism if completions is None else min(parallelism or 0, completions)
        if spec.get("suspend") is True:
            count = 0
        indexed = spec.get("completionMode") == "Indexed"
        if indexed and completions is None:
            raise WorkloadError(f"{_where(job, where)}: spec.completions: required when completionMode is Indexed")
        ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                  "controller-uid": uid, "job-name": name}
        for i in range(count or 0):
            pod_name = f"{name}-{i}-{name_suffix(ns, name, i)}" if indexed else f"{name}-{name_suffix(ns, name, i)}"
            extra = dict(labels)
            if indexed:
                extra["batch.kubernetes.io/job-completion-index"] = str(i)
            pod = _pod_from_template(job, tmpl, pod_name, extra)
            if indexed:
                pod["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(i)
            self._emit(pod, f"Job {name}")

    def _daemonset(self, ds: dict, where: str) -> None:
        tmpl = _template(ds, where)
        _selector_matches_template(ds, where, tmpl)
        ns, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        tmpl = copy.deepcopy(tmpl)
        spec = tmpl["spec"]
        tols = list(spec.get("tolerations") or [])
        wanted = list(DAEMON_TOLERATIONS) + ([HOST_NETWORK_TOLERATION] if spec.get("hostNetwork") else [])
        for key, effect in wanted:
            if not any(t.get("key") == key and t.get("effect") == effect for t in tols):
                tols.append({"key": key, "operator": "Exists", "effect": effect})
        spec["tolerations"] = tols
        labels = {"controller-revision-hash": template_hash(tmpl),
                  "pod-template-generation": str(ds["metadata"].get("generation") or 1)}
        probe = PodInfo.from_dict(_pod_from_template(ds, tmpl, f"{name}-probe"))
        if probe.parse_error:
            raise WorkloadError(f"{_where(ds, where)}: spec.template: {probe.parse_error}")
        tolerations = parse_tolerations(tols)
        skipped = created = 0
        for node in self.nodes:
            nmeta = node["metadata"]
            node_name, node_labels = nmeta["name"], nmeta.get("labels") or {}
            if spec.get("nodeName") and spec["nodeName"] != node_name:
                continue
            if probe.node_selector and any(node_labels.get(k) != v for k, v in probe.node_selector.items()):
                skipped += 1
                continue
            if probe.required_affinity is not None and not probe.required_affinity.matches(node_labels, node_name):
                skipped += 1
                continue
            taints = parse_taints((node.get("spec") or {}).get("taints"))
            if find_untolerated_taint(taints, tolerations, ("NoSchedule", "NoExecute")) is not None:
                skipped += 1
                continue
            pod = _pod_from_template(ds, tmpl, f"{name}-{name_suffix(ns, name, created)}", labels)
            created += 1
            affinity = pod["spec"].setdefault("affinity", {})
            node_aff = affinity.setdefault("nodeAffinity", {})
            node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
            self._emit(pod, f"DaemonSet {name}")
        if skipped:
            self.out.notes.append(f"DaemonSet {ns}/{name}: {skipped} node(s) not eligible (node selector, "
                                  "required node affinity or untolerated taints)")


def expand(workloads: list[tuple[dict, str]], nodes: list[dict], objects: list[dict]) -> Expansion:
    """``workloads`` as read from the file (object, where), in file order."""
    ex = Expander(nodes, objects)
    for obj, where in workloads:
        ex.expand(obj, where)
    return ex.out
