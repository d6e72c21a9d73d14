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
import fnmatch
import hashlib
import json
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
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

    def expand(self, obj: dict, where: str, *, count: int | None = None,
               taken: AbstractSet[str] = frozenset()) -> None:
        """The pods ``obj``'s controller creates. ``count`` (a Deployment, ReplicaSet or
        ReplicationController) creates that many instead of ``spec.replicas``, named apart from
        ``taken`` (pod names): ``--scale`` of one whose other pods the snapshot already runs."""
        obj = _with_uid(obj)
        if obj["kind"] == "Deployment":
            self._deployment(obj, where, count=count, taken=taken)
        elif obj["kind"] in ("ReplicaSet", "ReplicationController"):
            self._replicaset(obj, where, count=count, taken=taken)
        else:
            handlers: dict[str, Callable[[dict, str], None]] = {
                "StatefulSet": self._statefulset, "Job": self._job, "DaemonSet": self._daemonset}
            handlers[obj["kind"]](obj, where)

    def _emit(self, pod: dict, origin: str) -> None:
        self.out.pods.append(pod)
        self.out.origin[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = origin

    def _deployment(self, dep: dict, where: str, *, count: int | None = None,
                    taken: AbstractSet[str] = frozenset()) -> None:
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
        self._replicaset(rs, where, origin=f"Deployment {name}", count=count, taken=taken)

    def _replicaset(self, rs: dict, where: str, origin: str = "", *, count: int | None = None,
                    taken: AbstractSet[str] = frozenset()) -> None:
        """``count`` pods (default ``spec.replicas``) named apart from ``taken`` (pod names)."""
        tmpl = _template(rs, where)
        _selector_matches_template(rs, where, tmpl)
        replicas = _int_field(rs, where, "spec.replicas", rs["spec"].get("replicas"), 1)
        ns, name = rs["metadata"]["namespace"], rs["metadata"]["name"]
        self.out.objects.append(rs)
        origin = origin or f"{rs['kind']} {name}"
        count = replicas if count is None else count
        used: set[str] = set(taken)
        for i in range(count or 0):
            j, pod_name = i, f"{name}-{name_suffix(ns, name, i)}"
            while pod_name in used:      # a collision: the controller would retry with another name
                j += max(count, 1)
                pod_name = f"{name}-{name_suffix(ns, name, j)}"
            used.add(pod_name)
            self._emit(_pod_from_template(rs, tmpl, pod_name), origin)

    def _statefulset(self, ss: dict, where: str, only: AbstractSet[int] | None = None) -> None:
        """Every ordinal, or ``only`` those (``--scale``: the ones the snapshot lacks)."""
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
            if only is not None and ordinal not in only:
                continue
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
        if policy == "OrderedReady" and (replicas or 0) > 1 and (only is None or len(only) > 1):
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
        selector = spec.get("nodeSelector")
        if selector is not None and not (isinstance(selector, dict)
                                         and all(isinstance(v, str) for v in selector.values())):
            raise WorkloadError(f"{_where(ds, where)}: spec.template.spec.nodeSelector: expected a map of label "
                                f"names to strings, got {selector!r}")
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


# -- naming workloads on the command line (--explain, --scale) ------------------------------------

# kubectl's names for the workload kinds (singular, plural, short), lower case.
KIND_ALIASES = {alias: kind for kind, aliases in {
    "Deployment": ("deployment", "deployments", "deploy"),
    "ReplicaSet": ("replicaset", "replicasets", "rs"),
    "ReplicationController": ("replicationcontroller", "replicationcontrollers", "rc"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"),
    "Job": ("job", "jobs"),
    "DaemonSet": ("daemonset", "daemonsets", "ds"),
}.items() for alias in aliases}
SCALABLE_KINDS = ("Deployment", "ReplicaSet", "ReplicationController", "StatefulSet")
MAX_REPLICAS = 2**31 - 1        # spec.replicas is an int32
GLOB_CHARS = "*?["


def parse_workload_ref(text: str) -> tuple[str, str, str] | None:
    """``KIND/NAMESPACE/NAME`` or ``KIND/NAME`` (namespace ``default``) -> (Kind, namespace, name),
    KIND as kubectl spells it (``deployment``, ``deploy``, ``sts``...); None when the first segment
    is not a workload kind (then the text names pods: ``NAMESPACE/NAME``, or a glob)."""
    parts = text.split("/")
    kind = KIND_ALIASES.get(parts[0].lower())
    if kind is None or len(parts) not in (2, 3) or not all(parts[1:]):
        return None
    ns, name = (parts[1], parts[2]) if len(parts) == 3 else ("default", parts[1])
    return kind, ns, name


def _controller(meta: dict) -> dict | None:
    refs = [r for r in meta.get("ownerReferences") or () if isinstance(r, dict)]
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)


def owner_chain(pod: dict, lookup: Callable[[str, str, str], dict | None]) -> list[tuple[str, str]]:
    """The controllers above a pod, nearest first: ``[("ReplicaSet", "web-7d9f"), ("Deployment",
    "web")]``. ``lookup(kind, namespace, name)`` finds an owner object to follow its own owner;
    a ReplicaSet not found is tied to its Deployment by the ``pod-template-hash`` naming rule."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    chain: list[tuple[str, str]] = []
    ref = _controller(meta)
    while ref is not None and ref.get("kind") and ref.get("name") and len(chain) < 4:
        kind, name = str(ref["kind"]), str(ref["name"])
        chain.append((kind, name))
        owner = lookup(kind, ns, name)
        if owner is None:
            h = (meta.get("labels") or {}).get("pod-template-hash")
            if kind == "ReplicaSet" and h and name.endswith(f"-{h}") and len(chain) == 1:
                chain.append(("Deployment", name[:-len(h) - 1]))
            break
        ref = _controller(owner.get("metadata") or {})
    return chain


def explain_matches(pattern: str, pod: dict, chain: Iterable[tuple[str, str]]) -> bool:
    """Whether ``--explain PATTERN`` names ``pod``: a workload (``deployment/ns/name``, its name may
    be a glob), a glob over ``namespace/name`` (``shop/web-*``), or the pod's ``namespace/name``."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    key = f"{ns}/{meta.get('name')}"
    ref = parse_workload_ref(pattern)
    if ref is not None:
        kind, want_ns, want = ref
        if ns == want_ns and any(k == kind and fnmatch.fnmatchcase(n, want) for k, n in chain):
            return True
        # ``job/x`` is also the pod x of a namespace named job
    if any(c in pattern for c in GLOB_CHARS):
        return fnmatch.fnmatchcase(key, pattern)
    return key == pattern


# -- --scale: what if this workload had N replicas -----------------------------------------------

@dataclass
class ScaleTarget:
    kind: str
    namespace: str
    name: str
    replicas: int
    text: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def parse_scale(text: str) -> ScaleTarget:
    """``KIND/NAMESPACE/NAME=N`` (KIND: deployment, statefulset, replicaset, replicationcontroller)."""
    ref_text, sep, count = text.rpartition("=")
    ref = parse_workload_ref(ref_text) if sep else None
    if ref is None or ref[0] not in SCALABLE_KINDS:
        raise WorkloadError(f"--scale {text}: expected KIND/NAMESPACE/NAME=REPLICAS with KIND one of deployment, "
                            "statefulset, replicaset, replicationcontroller")
    try:
        replicas = int(count)
    except ValueError:
        replicas = -1
    if replicas < 0:
        raise WorkloadError(f"--scale {text}: replicas: expected a non-negative integer, got {count!r}")
    if replicas > MAX_REPLICAS:
        raise WorkloadError(f"--scale {text}: replicas: at most {MAX_REPLICAS} (spec.replicas is an int32), "
                            f"got {count}")
    return ScaleTarget(ref[0], ref[1], ref[2], replicas, text)


@dataclass
class Scaled:
    """What scaling a snapshot workload comes to: new Pods (and owners/PVCs in ``expander.out``),
    the snapshot pods that go (``removed``: namespace/name), and a note saying so."""
    pods: list[dict] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    note: str = ""


def _revision(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    rev = (meta.get("annotations") or {}).get("deployment.kubernetes.io/revision") or ""
    return (int(rev) if rev.isdigit() else -1, meta.get("creationTimestamp") or "",
            int((obj.get("spec") or {}).get("replicas") or 0), meta.get("name") or "")


def deletion_order(pods: list[dict]) -> list[dict]:
    """The order scaling down removes pods, roughly the ReplicaSet controller's preference: pods not
    yet on a node first, then the newest (``creationTimestamp``, later first; name as the last key)."""
    def newest(p: dict) -> tuple[str, str]:
        meta = p.get("metadata") or {}
        return meta.get("creationTimestamp") or "", meta.get("name") or ""
    ordered = sorted(pods, key=newest, reverse=True)
    ordered.sort(key=lambda p: bool((p.get("spec") or {}).get("nodeName")))   # stable: newest first within
    return ordered


def _live(p: dict) -> bool:
    return (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _owned_by(pods: list[dict], ns: str, kind: str, names: AbstractSet[str]) -> list[dict]:
    out = []
    for p in pods:
        meta = p.get("metadata") or {}
        ref = _controller(meta)
        if ((meta.get("namespace") or "default") == ns and ref is not None and ref.get("kind") == kind
                and ref.get("name") in names and _live(p)):
            out.append(p)
    return out


def _key(p: dict) -> str:
    return f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}"


def scale_in_snapshot(target: ScaleTarget, pods: list[dict], objects: list[dict], expander: Expander,
                      other_keys: AbstractSet[str] = frozenset()) -> Scaled:
    """Scale a workload of the snapshot (``pods``, ``objects``) to ``target.replicas`` in total.

    * Deployment: its ReplicaSets (controller owner reference) hold its pods; pods are added to the
      newest (``deployment.kubernetes.io/revision``, then creation time) from its template, and
      removed across all of them by ``deletion_order``. With no ReplicaSet in the snapshot, the
      Deployment itself (if the snapshot holds it) is expanded with N replicas.
    * ReplicaSet / ReplicationController: pods added from its template (names apart from every
      existing pod), removed by ``deletion_order``.
    * StatefulSet: the ordinals ``start .. start+N-1``; missing ones are created (claims reused),
      pods with other ordinals (the highest, scaling down) removed.
    New pods are named apart from the snapshot's and from ``other_keys`` (namespace/name of the
    --pods pods). Raises ``WorkloadError`` when the snapshot holds no such workload."""
    ns, kind, name, n = target.namespace, target.kind, target.name, target.replicas

    def find(k: str, nm: str) -> dict | None:
        return next((o for o in objects if o.get("kind") == k and o["metadata"].get("name") == nm
                     and (o["metadata"].get("namespace") or "default") == ns), None)

    taken = {k.split("/", 1)[1] for k in [*map(_key, pods), *other_keys] if k.startswith(f"{ns}/")}
    where = f"--scale {target.text}"
    out = Scaled()
    first = len(expander.out.pods)
    if kind == "Deployment":
        owned = [o for o in objects if o.get("kind") == "ReplicaSet"
                 and (o["metadata"].get("namespace") or "default") == ns
                 and (_controller(o["metadata"]) or {}).get("kind") == "Deployment"
                 and (_controller(o["metadata"]) or {}).get("name") == name]
        if not owned:
            dep = find("Deployment", name)
            if dep is None:
                raise WorkloadError(f"{where}: no Deployment {ns}/{name} in --pods, nor it or a ReplicaSet of it "
                                    "in --cluster")
            dep = _replicas(dep, n)
            expander.expand(dep, where)
            out.pods = expander.out.pods[first:]
            out.note = (f"{where}: Deployment {ns}/{name} has no ReplicaSet in the snapshot: its {n} pod(s) are "
                        "created from its template")
            return out
        newest = max(owned, key=_revision)
        existing = _owned_by(pods, ns, "ReplicaSet", {o["metadata"]["name"] for o in owned})
        grow_from = newest
        label = f"Deployment {ns}/{name} (ReplicaSet {newest['metadata']['name']})"
        origin = f"Deployment {name}"
    elif kind in ("ReplicaSet", "ReplicationController"):
        found = find(kind, name)
        if found is None:
            raise WorkloadError(f"{where}: no {kind} {ns}/{name} in --pods or --cluster")
        grow_from = found
        existing = _owned_by(pods, ns, kind, {name})
        label, origin = f"{kind} {ns}/{name}", ""
        parent = _controller(grow_from["metadata"]) or {}
        if parent.get("kind") == "Deployment":
            origin = f"Deployment {parent.get('name')}"
    else:
        ss = find("StatefulSet", name)
        if ss is None:
            raise WorkloadError(f"{where}: no StatefulSet {ns}/{name} in --pods or --cluster")
        ss = _replicas(_with_uid(ss), n)
        start = int(((ss["spec"].get("ordinals") or {}).get("start")) or 0)
        have = _by_ordinal(name, _owned_by(pods, ns, "StatefulSet", {name}))
        wanted = set(range(start, start + n))
        gone = sorted((o for o in have if o not in wanted), reverse=True)
        out.removed = [_key(have[o]) for o in gone]
        expander._statefulset(ss, where, only=wanted - set(have))
        out.pods = expander.out.pods[first:]
        out.note = (f"{where}: StatefulSet {ns}/{name} had {len(have)} pod(s) in the snapshot; "
                    + _change_words(len(out.pods), out.removed, n))
        return out
    grow = n - len(existing)
    if grow > 0:
        mine = [p for p in existing if (_controller(p["metadata"]) or {}).get("name") == grow_from["metadata"]["name"]]
        rs = _replicas(_with_uid(grow_from), n if kind != "Deployment" else len(mine) + grow)
        expander._replicaset(rs, where, origin=origin, count=grow, taken=taken)
        out.pods = expander.out.pods[first:]
    elif grow < 0:
        out.removed = [_key(p) for p in deletion_order(existing)[:-grow]]
    out.note = f"{where}: {label} had {len(existing)} pod(s) in the snapshot; " + _change_words(
        len(out.pods), out.removed, n)
    return out


def _by_ordinal(name: str, pods: list[dict]) -> dict[int, dict]:
    """A StatefulSet ``name``'s pods by ordinal (``<name>-<ordinal>``; other names are not its)."""
    have: dict[int, dict] = {}
    for p in pods:
        suffix = p["metadata"]["name"][len(name) + 1:]
        if p["metadata"]["name"].startswith(f"{name}-") and suffix.isdigit():
            have[int(suffix)] = p
    return have


def running_pods_of(kind: str, ns: str, name: str, pods: list[dict], objects: list[dict]) -> list[dict]:
    """The snapshot's live pods (not Succeeded or Failed) a workload owns, directly or through its
    ReplicaSets (``owner_chain``: a Deployment's ReplicaSet absent from the snapshot is recognised by
    its ``pod-template-hash`` name)."""
    def lookup(k: str, lns: str, nm: str) -> dict | None:
        return next((o for o in objects if o.get("kind") == k and o["metadata"].get("name") == nm
                     and (o["metadata"].get("namespace") or "default") == lns), None)
    return [p for p in pods if _live(p) and ((p.get("metadata") or {}).get("namespace") or "default") == ns
            and (kind, name) in owner_chain(p, lookup)]


def scale_in_file(target: ScaleTarget, obj: dict, where: str, pods: list[dict], objects: list[dict],
                  expander: Expander) -> Scaled:
    """Scale a workload of the ``--pods`` file (``obj``, found at ``where``) to ``target.replicas``
    in total. The pods of it the snapshot (``pods``, ``objects``) already runs count toward the
    total: they stay, the difference is created from the file's template (it is the spec asked
    about), named apart from the snapshot's pods, and a surplus is removed as ``scale_in_snapshot``
    removes it (``deletion_order``; a StatefulSet's ordinals outside ``start .. start+N-1``). With
    none running, the file's workload is expanded with N replicas."""
    ns = (obj.get("metadata") or {}).get("namespace") or "default"
    kind, name, n = target.kind, target.name, target.replicas
    if not isinstance(obj.get("spec"), dict):
        raise WorkloadError(f"{_where(obj, where)}: spec: required")
    said = obj["spec"].get("replicas", 1)
    existing = running_pods_of(kind, ns, name, pods, objects)
    out = Scaled()
    first = len(expander.out.pods)
    scaled = _replicas(obj, n)
    if kind == "StatefulSet":
        start = int(((scaled["spec"].get("ordinals") or {}).get("start")) or 0)
        have = _by_ordinal(name, existing)
        wanted = set(range(start, start + n))
        out.removed = [_key(have[o]) for o in sorted((o for o in have if o not in wanted), reverse=True)]
        expander._statefulset(_with_uid(scaled), where, only=wanted - set(have))
        running = len(have)
    else:
        grow = n - len(existing)
        if grow < 0:
            out.removed = [_key(p) for p in deletion_order(existing)[:-grow]]
        taken = {p["metadata"]["name"] for p in pods if (p["metadata"].get("namespace") or "default") == ns}
        expander.expand(scaled, where, count=max(grow, 0), taken=taken)
        running = len(existing)
    out.pods = expander.out.pods[first:]
    label = f"--scale {target.text}: {kind} {ns}/{name} from --pods"
    if not running:
        out.note = f"{label}: {len(out.pods)} pod(s) created (the file says {said} replica(s))"
    else:
        out.note = f"{label} already has {running} pod(s) in the snapshot; " + _change_words(
            len(out.pods), out.removed, n, "from the --pods template ")
    return out


def _replicas(obj: dict, n: int) -> dict:
    """A copy of a workload with ``spec.replicas: n`` (a missing spec is left for ``_template`` to name)."""
    obj = copy.deepcopy(obj)
    spec = obj.get("spec")
    obj["spec"] = dict(spec if isinstance(spec, dict) else {}, replicas=n)
    return obj


def _change_words(added: int, removed: list[str], n: int, source: str = "") -> str:
    if added:
        return f"{added} pod(s) created {source}to make {n}"
    if removed:
        shown = ", ".join(removed[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
        return f"{len(removed)} removed to make {n} (not yet on a node first, then the newest): {shown}"
    return f"unchanged at {n}"
