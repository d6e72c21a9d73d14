"""``pysched snapshot``: export the cluster objects ``pysched simulate`` reads, as one YAML ``List``.

A synchronous one-shot tool, written with pykube-ng: ``pykube.KubeConfig`` reads the kubeconfig
(token, client certificate, CA, exec plugins, ``--context``), ``pykube.HTTPClient`` talks to the
API server, pykube's built-in object kinds name the collections, ``pykube.object_factory`` the
ones it does not know (StorageClass, CSINode, VolumeAttachment, CSIDriver, CSIStorageCapacity,
ResourceClaim, DeviceClass, ResourceSlice, PriorityClass, PodGroup). Each collection is listed in pages
(``limit``/``continue``, 500 per page as kubectl) - pykube's own ``Query`` fetches a collection in
one response, which on a large cluster is one very large body held three times over (raw bytes,
text, decoded JSON).

Listed: the kinds of ``snapshot.USED_KINDS`` (Nodes, Pods, Namespaces, Services, ReplicaSets,
StatefulSets, ReplicationControllers, PVCs, PVs, StorageClasses, CSINodes, VolumeAttachments,
CSIDrivers, CSIStorageCapacities, ResourceClaims, DeviceClasses, ResourceSlices,
PodDisruptionBudgets, PriorityClasses, Deployments - what ``simulate --scale deployment/...``
reads) and PodGroups and ElasticQuotas when their CRDs are served. A kind whose API
group/version the server does not serve (PodGroup without the CRD, ResourceClaim before
resource.k8s.io/v1) is skipped with a log line. Trimmed:
``metadata.managedFields`` and the ``kubectl.kubernetes.io/last-applied-configuration`` annotation
(nothing schedules on them; they are most of an object's bytes). Pods that finished
(Succeeded/Failed) are kept: simulate skips them.
``--format json`` writes the same List as JSON (a YAML subset simulate reads as well).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pykube
import requests
import yaml

from pysched.util.logs import kv

log = logging.getLogger("pysched.snapshot")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    optional: bool = False       # absent from some clusters: skipped, not an error


# In the order simulate's notes and a reader expect: nodes, pods, then the supporting objects.
KINDS = (Kind("v1", "Node"), Kind("v1", "Pod"), Kind("v1", "Namespace"), Kind("v1", "Service"),
         Kind("apps/v1", "ReplicaSet"), Kind("apps/v1", "StatefulSet"), Kind("v1", "ReplicationController"),
         Kind("v1", "PersistentVolumeClaim"), Kind("v1", "PersistentVolume"),
         Kind("storage.k8s.io/v1", "StorageClass"), Kind("storage.k8s.io/v1", "CSINode"),
         Kind("storage.k8s.io/v1", "VolumeAttachment"),
         Kind("storage.k8s.io/v1", "CSIDriver"), Kind("storage.k8s.io/v1", "CSIStorageCapacity"),
         Kind("resource.k8s.io/v1", "ResourceClaim", optional=True),
         Kind("resource.k8s.io/v1", "DeviceClass", optional=True),
         Kind("resource.k8s.io/v1", "ResourceSlice", optional=True),
         Kind("policy/v1", "PodDisruptionBudget"), Kind("scheduling.k8s.io/v1", "PriorityClass"),
         Kind("scheduling.x-k8s.io/v1alpha1", "PodGroup", optional=True),
         Kind("scheduling.x-k8s.io/v1alpha1", "ElasticQuota", optional=True), Kind("apps/v1", "Deployment"))
BUILTIN = {"Node": pykube.Node, "Pod": pykube.Pod, "Namespace": pykube.Namespace, "Service": pykube.Service,
           "ReplicaSet": pykube.ReplicaSet, "StatefulSet": pykube.StatefulSet,
           "ReplicationController": pykube.ReplicationController,
           "PersistentVolumeClaim": pykube.PersistentVolumeClaim, "PersistentVolume": pykube.PersistentVolume,
           "PodDisruptionBudget": pykube.PodDisruptionBudget, "Deployment": pykube.Deployment}


class ExportError(RuntimeError):
    """The API server could not be reached or refused a list; the message says which."""


def connect(kubeconfig: str | None, context: str | None = None, timeout: float = 60.0) -> pykube.HTTPClient:
    """A pykube client from a kubeconfig file (default ``$KUBECONFIG``, then ``~/.kube/config``;
    in a pod without either, the ServiceAccount). Raises ValueError for an unusable kubeconfig."""
    try:
        if kubeconfig is None and "KUBECONFIG" not in os.environ and not Path("~/.kube/config").expanduser().exists():
            config = pykube.KubeConfig.from_service_account()
        else:
            config = pykube.KubeConfig.from_file(kubeconfig, current_context=context)
    except (pykube.PyKubeError, FileNotFoundError, OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ValueError(f"kubeconfig {kubeconfig or '(default)'}: {exc}") from None
    if context and context not in config.contexts:
        raise ValueError(f"--context {context}: no such context in the kubeconfig "
                         f"(has: {', '.join(sorted(config.contexts)) or 'none'})")
    return pykube.HTTPClient(config, timeout=timeout)


def _collection(api: pykube.HTTPClient, k: Kind):
    """The pykube class for ``k``; None when the server does not serve its group/version."""
    if k.kind in BUILTIN:
        return BUILTIN[k.kind]
    try:
        return pykube.object_factory(api, k.api_version, k.kind)
    except requests.HTTPError as exc:
        if exc.response is not None and exc.response.status_code == 404 and k.optional:
            return None
        raise
    except ValueError:           # the group/version is served without this kind
        if k.optional:
            return None
        raise


def trim(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    ann = meta.get("annotations")
    if ann and LAST_APPLIED in ann:
        ann.pop(LAST_APPLIED)
        if not ann:
            meta.pop("annotations")
    return obj


def list_kind(api: pykube.HTTPClient, cls, page_size: int = 500) -> list[dict]:
    """Every object of ``cls`` across namespaces, page by page (limit/continue)."""
    items: list[dict] = []
    params: dict[str, str] = {"limit": str(page_size)} if page_size else {}
    kind = cls.kind
    while True:
        r = api.get(url=cls.endpoint, version=cls.version, params=params)
        if r.status_code == 410 and "continue" in params:     # the continue token expired: start over
            items.clear()
            params = {"limit": str(page_size)}
            continue
        api.raise_for_status(r)
        data = r.json()
        for item in data.get("items") or ():
            item["apiVersion"], item["kind"] = cls.version, kind
            items.append(trim(item))
        cont = (data.get("metadata") or {}).get("continue")
        if not cont:
            return items
        params = {"limit": str(page_size), "continue": cont}


def export(api: pykube.HTTPClient, page_size: int = 500) -> dict:
    """The snapshot as a ``List`` dict."""
    items: list[dict] = []
    for k in KINDS:
        try:
            cls = _collection(api, k)
            if cls is None:
                log.info("kind not served, skipped", extra=kv(kind=k.kind, apiVersion=k.api_version))
                continue
            got = list_kind(api, cls, page_size)
        except requests.HTTPError as exc:
            code = exc.response.status_code if exc.response is not None else "?"
            raise ExportError(f"list {k.kind} ({k.api_version}): HTTP {code}: {exc}") from None
        except (requests.RequestException, pykube.PyKubeError) as exc:
            raise ExportError(f"list {k.kind} ({k.api_version}): {exc}") from None
        log.info("listed", extra=kv(kind=k.kind, count=len(got)))
        items.extend(got)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def dump(snapshot: dict, out, fmt: str = "yaml") -> None:
    """YAML (block style), or JSON - also valid YAML, and many times faster to write and read at
    thousands of objects."""
    if fmt == "json":
        json.dump(snapshot, out, separators=(",", ":"))
        out.write("\n")
        return
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    yaml.dump(snapshot, out, Dumper=dumper, sort_keys=False, default_flow_style=False)


def main(args) -> int:
    """``pysched snapshot``: 0 written, 1 the API server failed a list, 2 bad flags or kubeconfig."""
    try:
        api = connect(args.kubeconfig, args.context)
    except ValueError as exc:
        print(f"pysched snapshot: {exc}", file=sys.stderr)
        return 2
    try:
        snapshot = export(api, args.page_size)
    except ExportError as exc:
        print(f"pysched snapshot: {exc}", file=sys.stderr)
        return 1
    if args.output == "-":
        dump(snapshot, sys.stdout, args.format)
        return 0
    try:
        with open(args.output, "w") as f:
            dump(snapshot, f, args.format)
    except OSError as exc:
        print(f"pysched snapshot: -o {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    log.info("snapshot written", extra=kv(path=args.output, objects=len(snapshot["items"])))
    return 0
