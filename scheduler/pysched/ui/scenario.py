"""The what-if scenario ``pysched ui`` edits: nodes, pods, supporting objects and the configuration.

A ``Scenario`` starts from a cluster snapshot (``Scenario.from_snapshot``: what ``pysched simulate``
reads with ``--cluster``, ``--pods`` and ``--config``) and changes only through its methods, each
all or nothing: a change that fails validation raises ``ScenarioError`` (every problem with the
field it concerns) and leaves the scenario as it was; one that succeeds moves ``version`` on.

* Objects (``apply_yaml``/``apply_objects``, mode ``apply`` or ``delete``): Nodes and Pods are held
  to the rules ``pysched simulate`` holds a snapshot to (``tools.snapshot``); a Pod with
  ``spec.nodeName`` is bound there (the node must exist), one without is pending. Workloads
  (Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, ReplicationController) are expanded into
  the pending Pods their controllers would create (``tools.workloads``, deterministic names:
  applying one again replaces its pods, and drops its pending pods the new expansion no longer
  has); deleting one deletes its pods and the ReplicaSets it owns. The supporting kinds a snapshot
  may hold (``tools.snapshot.USED_KINDS``: PodGroups, ElasticQuotas, PDBs, PriorityClasses,
  Namespaces, PVCs/PVs/StorageClasses...) are kept as they are. Deleting a Node makes its pods
  pending (to be scheduled again).
* The configuration (``set_config``) is a KubeSchedulerConfiguration YAML text, checked by
  ``apis.config.parse`` and by building its frameworks, so a bad plugin name or pluginConfig
  fails here, named by its field path.
* Size (``Limits``, ``pysched ui --max-*``): a change that would leave more pods, more nodes or
  more bytes of objects (their JSON size, ``json_bytes``) than the limits is refused whole, at the
  object that passed one. Workloads are counted before they are expanded (their replicas and
  the size of their pod template), so a small request cannot make a large scenario even briefly;
  a snapshot beyond the limits is refused by ``from_snapshot``.

Objects are never changed in place (a change stores a new dict), so ``freeze`` - the
``ScenarioState`` a run works on - only copies references. Runs schedule the pending pods as
``pysched simulate`` schedules ``--pods``: each gets the API server's create-time defaults, in
queue order priority first, then the oldest (``creationTimestamp``; pods without one after those
with one, in the order they were added). Pods with ``schedulingGates`` stay pending and are not
scheduled; a pod whose ``schedulerName`` no profile serves gets a ``NotHandled`` placement.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from pysched.apis import config as configmod
from pysched.apis.core import defaults as apidefaults
from pysched.apis.core.names import dns1123_subdomain_problem
from pysched.apis.core.quantity import QuantityError, resource_value
from pysched.apis.core.resources import pod_requests
from pysched.runtime.registry import RegistryError
from pysched.tools import snapshot as snapmod
from pysched.tools import whatif
from pysched.tools.report_data import NO_ZONE, capacity_type_of, instance_type_of
from pysched.tools.simulate import zone_of
from pysched.tools.snapshot import USED_KINDS, Snapshot, SnapshotError, validate_node, validate_pod
from pysched.tools.workloads import WORKLOAD_KINDS, Expander, WorkloadError, owner_chain
from pysched.ui.limits import Limits
from pysched.util import yamlfile
from pysched.util.logs import kv

log = logging.getLogger("pysched.ui.scenario")

DEFAULT_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pysched
"""
# Kinds kept as they are (workloads are expanded instead).
OBJECT_KINDS = tuple(k for k in USED_KINDS if k not in WORKLOAD_KINDS)
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment",
                            "CSIDriver",
                            "DeviceClass", "ResourceSlice", "PriorityClass"})
MAX_CLONES = whatif.MAX_ADDED
OWNER_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController", "Deployment", "Job", "DaemonSet")
TERMINATED = ("Succeeded", "Failed")
# GET /api/scenario leaves out of a node's labels those that repeat another label of it: the
# deprecated aliases of the GA labels (when equal) and the hostname (when it is the node's name).
HOSTNAME_LABEL = "kubernetes.io/hostname"
LABEL_ALIASES = {"beta.kubernetes.io/arch": "kubernetes.io/arch", "beta.kubernetes.io/os": "kubernetes.io/os",
                 "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
                 "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
                 "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
# The validators' "where" (shown in their messages between parentheses): the message after it is
# ``field: problem``.
_WHERE = "\x00"
_MARK = f"({_WHERE}): "
_LEADING_PATH = re.compile(r"^(\S+) \(")


@dataclass
class FieldError:
    field: str
    message: str
    document: int | None = None

    def __str__(self) -> str:
        where = f"document {self.document}: " if self.document is not None else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"

    def as_dict(self) -> dict:
        out: dict = {"field": self.field, "message": self.message}
        if self.document is not None:
            out = {"document": self.document, **out}
        return out


def json_size(obj: Any) -> int:
    """An object's size as compact JSON (what ``Limits.max_scenario_bytes`` counts)."""
    try:
        return len(orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:                    # an integer beyond 64 bits, a cycle...
        return len(repr(obj))


class ScenarioError(ValueError):
    """A change the scenario refused; ``errors`` name each field (and document) at fault."""

    def __init__(self, errors: Sequence[FieldError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


def split_path(message: str) -> tuple[str, str]:
    """``profiles[0].plugins.score.enabled[1].weight: must not be negative`` -> (path, problem);
    ("", message) when the message does not start with a field path."""
    head, sep, rest = message.partition(": ")
    if sep and head and " " not in head:
        return head, rest
    m = _LEADING_PATH.match(message)
    return (m.group(1), message) if m else ("", message)


def parse_yaml(text: str, *, all_documents: bool = False) -> Any:
    """YAML text as ``util.yamlfile.read_yaml`` reads a file (libyaml when available, the same
    nesting limit, the same error messages); raises ``yamlfile.YAMLFileError``."""
    if yamlfile._CLoader is not None:
        return yamlfile._read_fast(text, all_documents)
    loader = yamlfile._DepthLimitedLoader
    try:
        if all_documents:
            return list(yaml.load_all(text, Loader=loader))
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise yamlfile.YAMLFileError(yamlfile._yaml_message(exc)) from None
    except RecursionError:
        raise yamlfile.YAMLFileError(f"not valid YAML: nested too deeply (limit {yamlfile.MAX_DEPTH} levels)") from None


def dump_yaml(data: Any) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def parse_config(text: str) -> configmod.SchedulerConfig:
    """A KubeSchedulerConfiguration text, checked as ``pysched simulate --config`` checks it (the
    frameworks are built, so plugin names and pluginConfig args are checked too)."""
    if not isinstance(text, str):
        raise ScenarioError([FieldError("yaml", "expected a string")])
    try:
        raw = parse_yaml(text)
    except yamlfile.YAMLFileError as exc:
        raise ScenarioError([FieldError("", str(exc))]) from None
    if raw is None:
        raise ScenarioError([FieldError("", "empty: expected a KubeSchedulerConfiguration")])
    try:
        cfg = configmod.parse(raw)
        from pysched.tools.simulate import Simulation
        Simulation(configmod.parse(raw))     # builds every profile's frameworks (plugin args)
    except (configmod.ConfigError, RegistryError) as exc:
        path, problem = split_path(str(exc))
        raise ScenarioError([FieldError(path, problem)]) from None
    return cfg


def object_key(obj: dict) -> str:
    """``namespace/name`` (namespace defaulted) for namespaced kinds, ``name`` for the others."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") in CLUSTER_SCOPED:
        return str(meta.get("name") or "")
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def is_gated(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def queue_order(pending: Iterable[dict]) -> list[dict]:
    """Pending pods oldest first: by ``creationTimestamp``, the pods without one after, in the
    order given (stable)."""
    def key(p: dict) -> tuple[int, str]:
        ts = (p.get("metadata") or {}).get("creationTimestamp")
        return (0, str(ts)) if ts else (1, "")
    return sorted(pending, key=key)


def unbound(pod: dict) -> dict:
    """A copy of ``pod`` as its controller would recreate it after its node went: no node, no status."""
    out = {k: v for k, v in pod.items() if k != "status"}
    out["spec"] = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    return out


# -- the frozen copy a run works on ------------------------------------------------------------

@dataclass(frozen=True)
class ScenarioState:
    """What a run ran: the scenario at ``version``, by reference (objects are never changed)."""
    version: int
    config_yaml: str
    nodes: tuple[dict, ...]
    bound: tuple[dict, ...]           # pods with spec.nodeName
    pending: tuple[dict, ...]         # queue order (``queue_order``), gated ones included
    objects: tuple[dict, ...]
    ignored: dict[str, int] = field(default_factory=dict)
    json_bytes: int = 0               # the objects' JSON size (``Scenario.json_bytes``)
    feature_gates: frozenset[str] | None = None   # ``pysched ui --feature-gates`` (None: the release's)

    def config(self) -> configmod.SchedulerConfig:
        return configmod.parse(parse_yaml(self.config_yaml))

    def snapshot(self) -> Snapshot:
        return Snapshot(nodes=list(self.nodes), pods=list(self.bound), objects=list(self.objects),
                        ignored=dict(self.ignored))

    def to_schedule(self) -> list[dict]:
        """The pending pods a run schedules (``Simulation.run``'s ``pods``), in queue order. A pod
        the API server admitted already (``spec.priority`` set) keeps its priority when the
        scenario lacks the PriorityClass it names (a snapshot of pods alone), rather than failing
        the run as a new pod naming an unknown class would."""
        known = {o["metadata"]["name"] for o in self.objects if o.get("kind") == "PriorityClass"}
        out = []
        for p in self.pending:
            if is_gated(p):
                continue
            spec = p.get("spec") or {}
            pc = spec.get("priorityClassName")
            if pc and pc not in known and pc not in apidefaults.BUILTIN_PRIORITY_CLASSES and _admitted(spec):
                p = dict(p, spec={k: v for k, v in spec.items() if k != "priorityClassName"})
            out.append(p)
        return out

    def export_yaml(self) -> str:
        """A v1 List of every node, bound pod, object and pending pod (queue order): loaded back
        (``load_snapshot`` + ``Scenario.from_snapshot``) it gives the same scenario and runs."""
        return dump_yaml({"apiVersion": "v1", "kind": "List",
                          "items": [*self.nodes, *self.bound, *self.objects, *self.pending]})


# -- the editable scenario ---------------------------------------------------------------------

class _Stage:
    """A change under way: copies of the scenario's maps (references to the same objects), the
    actions done and the errors met. Committed only when there are no errors."""

    def __init__(self, sc: Scenario):
        self.base = sc.version
        self.nodes = dict(sc.nodes)
        self.pods = dict(sc.pods)
        self.objects = dict(sc.objects)
        self.actions: list[dict] = []
        self.errors: list[FieldError] = []
        self.gone_nodes: set[str] = set()
        self._classes: dict[str, int] | None = None
        self.limits = sc.limits
        self.json_bytes = sc.json_bytes
        self.sizes: dict[tuple[str, str], int | None] = {}     # changed sizes (None: gone), for commit
        self._base_sizes = sc._sizes
        self._base_counts = (len(sc.pods), len(sc.nodes), sc.json_bytes)

    def size_of(self, key: tuple[str, str]) -> int:
        size = self.sizes[key] if key in self.sizes else self._base_sizes.get(key)
        return size or 0

    def _resize(self, key: tuple[str, str], obj: dict | None) -> None:
        new = json_size(obj) if obj is not None else None
        self.json_bytes += (new or 0) - self.size_of(key)
        self.sizes[key] = new

    def over_limit(self) -> str | None:
        """The message for the limit this change passes (a count or size that grew beyond its
        limit), or None."""
        pods, nodes, size = len(self.pods), len(self.nodes), self.json_bytes
        base_pods, base_nodes, base_size = self._base_counts
        return self.limits.over(pods if pods > base_pods else 0, nodes if nodes > base_nodes else 0,
                                size if size > base_size else 0)

    def act(self, kind: str, key: str, action: str) -> None:
        self.actions.append({"kind": kind, "key": key, "action": action})

    def put_node(self, node: dict) -> None:
        name = node["metadata"]["name"]
        self.act("Node", name, "replaced" if name in self.nodes else "created")
        self.nodes[name] = node
        self._resize(("Node", name), node)
        self.gone_nodes.discard(name)

    def put_pod(self, pod: dict) -> None:
        key = pod_key(pod)
        self.act("Pod", key, "replaced" if key in self.pods else "created")
        self.pods[key] = pod
        self._resize(("Pod", key), pod)

    def put_object(self, obj: dict) -> None:
        k = (obj["kind"], object_key(obj))
        self.act(k[0], k[1], "replaced" if k in self.objects else "created")
        self.objects[k] = obj
        self._resize(k, obj)
        if k[0] == "PriorityClass":
            self._classes = None

    def drop_object(self, k: tuple[str, str]) -> None:
        del self.objects[k]
        self._resize(k, None)
        self.act(k[0], k[1], "deleted")
        if k[0] == "PriorityClass":
            self._classes = None

    def drop_node(self, name: str) -> None:
        del self.nodes[name]
        self._resize(("Node", name), None)
        self.gone_nodes.add(name)
        self.act("Node", name, "deleted")

    def drop_pod(self, key: str) -> None:
        del self.pods[key]
        self._resize(("Pod", key), None)
        self.act("Pod", key, "deleted")

    def lookup(self, kind: str, ns: str, name: str) -> dict | None:
        return self.objects.get((kind, f"{ns}/{name}"))

    def classes(self) -> dict[str, int]:
        if self._classes is None:
            self._classes = apidefaults.priority_classes(
                [o for (k, _), o in self.objects.items() if k == "PriorityClass"])[0]
        return self._classes

    def finish(self) -> None:
        """Pods bound to nodes this change deleted become pending."""
        if self.gone_nodes:
            for key, pod in list(self.pods.items()):
                if (pod.get("spec") or {}).get("nodeName") in self.gone_nodes:
                    self.pods[key] = unbound(pod)
                    self._resize(("Pod", key), self.pods[key])


def pod_key(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


class Scenario:
    def __init__(self, config_yaml: str | None = None, limits: Limits | None = None):
        self.nodes: dict[str, dict] = {}
        self.pods: dict[str, dict] = {}                      # ns/name -> Pod, in the order added
        self.objects: dict[tuple[str, str], dict] = {}       # (kind, key) -> object
        self.config_yaml = DEFAULT_CONFIG
        self.version = 0
        self.ignored: dict[str, int] = {}                     # the snapshot's kinds that do not schedule
        self.feature_gates: frozenset[str] | None = None      # --feature-gates (None: the release's)
        self.sources: dict[str, Any] = {}                     # where it was loaded from (the CLI's files)
        self.skipped_terminated = 0
        self.limits = limits or Limits()
        self.json_bytes = 0                                   # the JSON size of every node, pod and object
        self._sizes: dict[tuple[str, str], int] = {}          # ("Node", name) / ("Pod", key) / object key -> size
        if config_yaml is not None:
            parse_config(config_yaml)
            self.config_yaml = config_yaml
        self._node_rows: dict[str, tuple[dict, dict]] = {}
        self._pod_rows: dict[str, tuple[dict, dict, str]] = {}
        self._json: tuple[int, bytes] | None = None
        self._export: tuple[int, str] | None = None

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, pods: list[dict] | None = None,
                      config_yaml: str | None = None, limits: Limits | None = None) -> Scenario:
        """The snapshot's nodes, pods (terminated ones left out) and objects as they are (they were
        checked by ``load_snapshot``), then ``pods`` applied as ``apply_objects`` applies them: Pods
        (pending unless they name a node), workloads (expanded) and supporting objects, checked.
        ``config_yaml``: the KubeSchedulerConfiguration (default: one profile ``pysched`` with
        kube-scheduler's plugins). Raises ``ScenarioError``, also when the snapshot or ``pods``
        pass ``limits``."""
        sc = cls(config_yaml, limits)
        for node in snapshot.nodes:
            sc.nodes[node["metadata"]["name"]] = node
        for pod in snapshot.pods:
            if (pod.get("status") or {}).get("phase") in TERMINATED:
                sc.skipped_terminated += 1
                continue
            sc.pods[pod_key(pod)] = pod
        for obj in snapshot.objects:
            sc.objects[obj["kind"], object_key(obj)] = obj
        problem = sc.limits.over(len(sc.pods), len(sc.nodes), 0, "the snapshot holds")
        if problem is None:
            sizes = sc._sizes
            for name, node in sc.nodes.items():
                sizes["Node", name] = json_size(node)
            for key, pod in sc.pods.items():
                sizes["Pod", key] = json_size(pod)
            for k, obj in sc.objects.items():
                sizes[k] = json_size(obj)
            sc.json_bytes = sum(sizes.values())
            problem = sc.limits.over(0, 0, sc.json_bytes, "the snapshot holds")
        if problem is not None:
            raise ScenarioError([FieldError("", problem)])
        sc.ignored = dict(snapshot.ignored)
        if pods:
            sc.apply_objects(pods, "apply")
        sc.version = 0
        return sc

    # -- reads ---------------------------------------------------------------------------------

    def freeze(self) -> ScenarioState:
        bound: list[dict] = []
        pending: list[dict] = []
        for pod in self.pods.values():
            (bound if (pod.get("spec") or {}).get("nodeName") else pending).append(pod)
        return ScenarioState(self.version, self.config_yaml, tuple(self.nodes.values()), tuple(bound),
                             tuple(queue_order(pending)), tuple(self.objects.values()), dict(self.ignored),
                             self.json_bytes, self.feature_gates)

    def export_yaml(self, state: ScenarioState | None = None) -> str:
        """``ScenarioState.export_yaml`` of the scenario now (or of ``state``, frozen from it
        earlier: safe to call off the event loop), remembered per version."""
        state = state or self.freeze()
        cached = self._export
        if cached is not None and cached[0] == state.version:
            return cached[1]
        text = state.export_yaml()
        self._export = (state.version, text)
        return text

    def to_json(self) -> bytes:
        """``GET /api/scenario``, cached per version."""
        if self._json is None or self._json[0] != self.version:
            self._json = (self.version, orjson.dumps(self.as_dict()))
        return self._json[1]

    def as_dict(self) -> dict:
        classes, global_default = apidefaults.priority_classes(
            [o for (k, _), o in self.objects.items() if k == "PriorityClass"])
        nodes = [self._node_row(n) for n in self.nodes.values()]
        pods = []
        bound = pending = 0
        for key, pod in self.pods.items():
            row, pc = self._pod_row(key, pod)
            if row["state"] == "bound":
                bound += 1
            else:
                pending += 1
            prio = (pod.get("spec") or {}).get("priority")
            if not isinstance(prio, int) or isinstance(prio, bool):
                prio = classes.get(pc, 0) if pc else (global_default or 0)
            pods.append(row if row["priority"] == prio else dict(row, priority=prio))
        objects = [{"kind": k, "key": key} for (k, key) in self.objects]
        inputs = {"sources": self.sources, "seed": 0, "nodes": len(nodes), "boundPods": bound,
                  "pendingPods": pending, "objects": len(objects), "ignoredKinds": self.ignored,
                  "terminatedPodsSkipped": self.skipped_terminated}
        return {"nodes": nodes, "pods": pods, "objects": objects, "config": self.config_yaml, "inputs": inputs,
                "version": self.version}

    def _node_row(self, node: dict) -> dict:
        name = node["metadata"]["name"]
        cached = self._node_rows.get(name)
        if cached is not None and cached[0] is node:
            return cached[1]
        labels = dict(node["metadata"].get("labels") or {})
        shown = {k: v for k, v in labels.items() if not (k == HOSTNAME_LABEL and v == name)
                 and not (k in LABEL_ALIASES and labels.get(LABEL_ALIASES[k]) == v)}
        alloc: dict[str, int] = {}
        for r, q in ((node.get("status") or {}).get("allocatable") or {}).items():
            try:
                alloc[str(r)] = resource_value(str(r), q)
            except (QuantityError, ValueError):
                continue
        info = {"labels": labels}
        row = {"name": name, "labels": shown, "zone": zone_of(labels) or NO_ZONE,
               "instanceType": instance_type_of(info), "capacityType": capacity_type_of(info),
               "allocatable": alloc, "taints": list((node.get("spec") or {}).get("taints") or [])}
        self._node_rows[name] = (node, row)
        return row

    def _pod_row(self, key: str, pod: dict) -> tuple[dict, str]:
        cached = self._pod_rows.get(key)
        if cached is not None and cached[0] is pod:
            return cached[1], cached[2]
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        try:
            requests = {r: v for r, v in pod_requests(spec).items() if v}
        except (QuantityError, ValueError):
            requests = {}
        chain = owner_chain(pod, self._lookup)
        owner = f"{chain[-1][0]}/{chain[-1][1]}" if chain else None
        prio = spec.get("priority")
        row = {"key": key, "namespace": meta.get("namespace") or "default", "name": meta.get("name"),
               "node": spec.get("nodeName") or None, "state": "bound" if spec.get("nodeName") else "pending",
               "requests": requests, "priority": prio if isinstance(prio, int) and not isinstance(prio, bool) else 0,
               "labels": dict(meta.get("labels") or {}), "owner": owner}
        group = (spec.get("schedulingGroup") or {}).get("podGroupName") if isinstance(spec.get("schedulingGroup"),
                                                                                      dict) else None
        if group:   # a member of Kubernetes' own PodGroup (spec.schedulingGroup)
            row["podGroup"] = f"{row['namespace']}/{group}"
        pc = str(spec.get("priorityClassName") or "")
        self._pod_rows[key] = (pod, row, pc)
        return row, pc

    def _lookup(self, kind: str, ns: str, name: str) -> dict | None:
        return self.objects.get((kind, f"{ns}/{name}"))

    # -- changes -------------------------------------------------------------------------------

    def commit(self, stage: _Stage) -> list[dict]:
        """Make a staged change (``stage_*``) the scenario; returns its actions. A stage built on
        an older version than the scenario's is refused (another change came in between)."""
        if stage.base != self.version:
            raise RuntimeError(f"stale change: staged on version {stage.base}, the scenario is at {self.version}")
        stage.finish()
        self.nodes, self.pods, self.objects = stage.nodes, stage.pods, stage.objects
        for k, size in stage.sizes.items():
            if size is None:
                self._sizes.pop(k, None)
            else:
                self._sizes[k] = size
        self.json_bytes = stage.json_bytes
        for gone in [k for k in self._node_rows if k not in self.nodes]:
            del self._node_rows[gone]
        for gone in [k for k in self._pod_rows if k not in self.pods]:
            del self._pod_rows[gone]
        if any(a["kind"] in OWNER_KINDS for a in stage.actions):
            self._pod_rows.clear()      # pods' owners read these
        self.version += 1
        return stage.actions

    def set_config(self, text: str, *, checked: bool = False) -> None:
        """Replace the configuration (``checked``: ``parse_config(text)`` already passed)."""
        if not checked:
            parse_config(text)
        self.config_yaml = text
        self.version += 1

    def stage_yaml(self, text: Any, mode: str = "apply") -> _Stage:
        """Every object in a YAML stream (Lists flattened) applied or deleted: ``stage_objects``."""
        if not isinstance(text, str):
            raise ScenarioError([FieldError("yaml", "expected a string")])
        try:
            docs = parse_yaml(text, all_documents=True)
        except yamlfile.YAMLFileError as exc:
            raise ScenarioError([FieldError("", str(exc), 0)]) from None
        return self.stage_objects(docs, mode)

    def stage_objects(self, docs: Sequence[Any], mode: str = "apply") -> _Stage:
        """``docs`` (objects or Lists; ``None`` skipped) applied (``mode="apply"``) or deleted
        (``"delete"``), all or nothing: the change, for ``commit``, or ``ScenarioError`` naming
        every document and field at fault. Reads the scenario, changes nothing. A change that
        would pass ``limits`` is refused at the object that passes one (workloads before they are
        expanded: ``_preflight``), and no object after it is read."""
        if mode not in ("apply", "delete"):
            raise ScenarioError([FieldError("mode", f"must be apply or delete, got {mode!r}")])
        stage = _Stage(self)
        items = list(_flatten(docs, stage.errors))
        if mode == "apply":
            too_big = _preflight(stage, items)
            if too_big is not None:
                raise ScenarioError([too_big])
        seen: dict[tuple[str, str], tuple[int, str]] = {}
        for obj, doc, prefix in items:
            try:
                kind = obj.get("kind")
                if not isinstance(kind, str) or not kind:
                    raise _Invalid("kind", "required")
                if mode == "apply":
                    _apply_one(stage, obj, kind, doc, prefix, seen)
                    problem = stage.over_limit()
                    if problem is not None:
                        fld = _estimate(obj)[1] if kind in WORKLOAD_KINDS else ""
                        stage.errors.append(FieldError(prefix + fld if fld else prefix.rstrip("."), problem, doc))
                        break
                else:
                    _delete_one(stage, obj, kind)
            except _Invalid as exc:
                stage.errors.append(FieldError(prefix + exc.field if exc.field else prefix.rstrip("."),
                                               exc.message, doc))
            except (SnapshotError, WorkloadError, apidefaults.AdmissionError) as exc:
                stage.errors.append(_field_error(exc, doc, prefix))
            except (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError) as exc:
                # A validator missed a case: still a 400 naming the document, and the traceback for us.
                log.warning("unexpected failure reading an object", exc_info=True,
                            extra=kv(document=doc, kind=obj.get("kind"), error=str(exc)))
                stage.errors.append(FieldError(prefix.rstrip("."), f"cannot read this object: "
                                                                   f"{type(exc).__name__}: {exc}", doc))
        if stage.errors:
            raise ScenarioError(stage.errors)
        return stage

    def apply_yaml(self, text: Any, mode: str = "apply") -> list[dict]:
        return self.commit(self.stage_yaml(text, mode))

    def apply_objects(self, docs: Sequence[Any], mode: str = "apply") -> list[dict]:
        return self.commit(self.stage_objects(docs, mode))

    def stage_clone(self, name: Any, count: Any) -> tuple[_Stage, list[str]]:
        """``count`` copies of node ``name`` (``tools.whatif``'s copy: labels, taints, capacity),
        named ``<name>-sim-<i>`` with ``i`` from 1, skipping names in use."""
        errors = []
        if not isinstance(name, str) or name not in self.nodes:
            errors.append(FieldError("node", f"no node named {name!r} in the scenario"))
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_CLONES:
            errors.append(FieldError("count", f"must be an integer between 1 and {MAX_CLONES}, got {count!r}"))
        if errors:
            raise ScenarioError(errors)
        assert isinstance(name, str) and isinstance(count, int)
        src = self.nodes[name]
        problem = self.limits.over(0, len(self.nodes) + count,
                                   self.json_bytes + count * json_size(whatif._copy(src, f"{name}-sim-{count}")),
                                   f"{count:,} copies of {name} would make the scenario hold")
        if problem is not None:
            raise ScenarioError([FieldError("count", problem)])
        stage = _Stage(self)
        added: list[str] = []
        i = 0
        while len(added) < count:
            i += 1
            new = f"{name}-sim-{i}"
            if new in stage.nodes:
                continue
            problem = dns1123_subdomain_problem(new)
            if problem:
                raise ScenarioError([FieldError("node", f"cannot name a copy of {name!r} {new!r}: {problem}")])
            stage.put_node(whatif._copy(src, new))
            added.append(new)
        return stage, added

    def clone_node(self, name: Any, count: Any) -> list[str]:
        stage, added = self.stage_clone(name, count)
        self.commit(stage)
        return added

    def delete_node(self, name: str) -> bool:
        """Remove a node; its pods become pending. False when there is no such node."""
        if name not in self.nodes:
            return False
        stage = _Stage(self)
        stage.drop_node(name)
        self.commit(stage)
        return True

    def delete_pod(self, key: str) -> bool:
        if key not in self.pods:
            return False
        stage = _Stage(self)
        stage.drop_pod(key)
        self.commit(stage)
        return True


# -- applying one object -------------------------------------------------------------------------

class _Invalid(Exception):
    def __init__(self, fld: str, message: str):
        super().__init__(message)
        self.field, self.message = fld, message


def _field_error(exc: Exception, doc: int, prefix: str, within: str = "") -> FieldError:
    """A validator's message (``: Pod default/web (<where>): spec.x: problem``) as a field error;
    ``within``: where the object's fields sit in the document (a workload's pod template)."""
    msg = str(exc)
    at = msg.find(_MARK)
    rest = msg[at + len(_MARK):] if at >= 0 else msg
    fld, problem = split_path(rest)
    if within and fld:
        fld = within + fld
    full = prefix + fld if fld else prefix.rstrip(".")
    return FieldError(full, problem if fld else rest, doc)


def _flatten(docs: Sequence[Any], errors: list[FieldError]) -> Iterable[tuple[dict, int, str]]:
    """(object, document index, field prefix) for each object; Lists' items get ``items[i].``."""
    for d, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            errors.append(FieldError("", f"expected a Kubernetes object or List, got {type(doc).__name__}", d))
            continue
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                errors.append(FieldError("items", "expected a list", d))
                continue
            item_kind = kind[:-4] if kind != "List" else None
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    errors.append(FieldError(f"items[{i}]", "expected an object", d))
                    continue
                if item_kind and not item.get("kind"):
                    item = dict(item, kind=item_kind)
                yield item, d, f"items[{i}]."
        else:
            yield doc, d, ""


def _admitted(spec: dict) -> bool:
    """The pod carries the priority the API server's admission resolved."""
    prio = spec.get("priority")
    return isinstance(prio, int) and not isinstance(prio, bool)


def _check_priority(stage: _Stage, pod: dict) -> None:
    spec = pod.get("spec") or {}
    pc = spec.get("priorityClassName")
    if pc and pc not in stage.classes() and not _admitted(spec):
        raise _Invalid("spec.priorityClassName", f"no PriorityClass with name {pc} was found")


def _apply_one(stage: _Stage, obj: dict, kind: str, doc: int, prefix: str,
               seen: dict[tuple[str, str], tuple[int, str]]) -> None:
    if kind == "Node":
        validate_node(obj, "", _WHERE)
        key = (kind, obj["metadata"]["name"])
    elif kind == "Pod":
        validate_pod(obj, "", _WHERE)
        key = (kind, pod_key(obj))
    elif kind in WORKLOAD_KINDS:
        snapmod._metadata("", obj, _WHERE, namespaced=True, name_problem=dns1123_subdomain_problem)
        key = (kind, object_key(obj))
    elif kind in OBJECT_KINDS:
        snapmod._metadata("", obj, _WHERE, namespaced=kind not in CLUSTER_SCOPED)
        snapmod._check_supporting("", obj, _WHERE)
        key = (kind, object_key(obj))
    else:
        raise _Invalid("kind", f"unsupported kind {kind!r}; expected Node, Pod, one of "
                               f"{', '.join(WORKLOAD_KINDS)}, one of {', '.join(OBJECT_KINDS)}, or a List")
    if key in seen:
        d, p = seen[key]
        raise _Invalid("metadata.name", f"duplicate of document {d}{' ' + p.rstrip('.') if p else ''}")
    seen[key] = (doc, prefix)
    if kind == "Node":
        stage.put_node(obj)
    elif kind == "Pod":
        node = (obj.get("spec") or {}).get("nodeName")
        if node and node not in stage.nodes:
            raise _Invalid("spec.nodeName", f"no node named {node!r} in the scenario")
        _check_priority(stage, obj)
        stage.put_pod(obj)
    elif kind in WORKLOAD_KINDS:
        _apply_workload(stage, obj, doc, prefix)
    else:
        stage.put_object(obj)


MAX_WORKLOAD_PODS = 50_000     # pods one workload may expand into (a typo'd replicas must not exhaust memory)


def _apply_workload(stage: _Stage, obj: dict, doc: int, prefix: str) -> None:
    kind, ns, name = obj["kind"], obj["metadata"].get("namespace") or "default", obj["metadata"]["name"]
    raw_spec = obj.get("spec")
    spec: dict = raw_spec if isinstance(raw_spec, dict) else {}
    for field_name in ("replicas", "parallelism", "completions"):
        count = spec.get(field_name)
        if isinstance(count, int) and not isinstance(count, bool) and count > MAX_WORKLOAD_PODS:
            stage.errors.append(FieldError(f"{prefix}spec.{field_name}", f"{count} is more than the "
                                           f"{MAX_WORKLOAD_PODS} pods the UI expands one workload into", doc))
            return
    expander = Expander(list(stage.nodes.values()), list(stage.objects.values()))
    expander.expand(obj, _WHERE)
    for pod in expander.out.pods:
        try:
            validate_pod(pod, "", _WHERE)
            _check_priority(stage, pod)
        except SnapshotError as exc:
            stage.errors.append(_field_error(exc, doc, prefix, within="spec.template."))
            return
        except _Invalid as exc:
            stage.errors.append(FieldError(f"{prefix}spec.template.{exc.field}", exc.message, doc))
            return
    new_keys = {pod_key(p) for p in expander.out.pods}
    for key in _owned_pods(stage, kind, ns, name):
        if key not in new_keys and not (stage.pods[key].get("spec") or {}).get("nodeName"):
            stage.drop_pod(key)     # pending ones the new expansion no longer has (fewer replicas)
    # The objects the expansion made (a Deployment's ReplicaSet; a ReplicaSet, StatefulSet or
    # ReplicationController itself, with the uid its pods' ownerReferences name; new claims), as
    # simulate puts them in its object store; the workload as given when it is not one of them.
    made = set()
    for o in expander.out.objects:
        stage.put_object(o)
        made.add((o["kind"], object_key(o)))
    if (kind, object_key(obj)) not in made:
        stage.put_object(obj)
    for pod in expander.out.pods:
        stage.put_pod(pod)


def _estimate(obj: dict) -> tuple[int, str, int]:
    """At least how many pods a workload expands into, the field that says so, and at least how
    many bytes each takes (its pod template's spec, labels and annotations; a StatefulSet's claim
    templates too). A DaemonSet (one pod per matching node) counts 0 here: it is checked once
    expanded. Malformed counts count 0 (the expansion refuses them)."""
    kind, spec = obj.get("kind"), obj.get("spec")
    if not isinstance(spec, dict) or kind == "DaemonSet":
        return 0, "", 0

    def number(value: Any, default: int) -> int:
        if value is None:
            return default
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
    if kind == "Job":
        count, fld = number(spec.get("parallelism"), 1), "spec.parallelism"
        if spec.get("completions") is not None and number(spec.get("completions"), 0) < count:
            count, fld = number(spec.get("completions"), 0), "spec.completions"
        if spec.get("suspend") is True:
            count = 0
    else:
        count, fld = number(spec.get("replicas"), 1), "spec.replicas"
    if count > MAX_WORKLOAD_PODS:      # refused at its field before it is expanded
        return 0, fld, 0
    raw = spec.get("template")
    tmpl: dict = raw if isinstance(raw, dict) else {}
    raw = tmpl.get("metadata")
    meta: dict = raw if isinstance(raw, dict) else {}
    per_pod = json_size([tmpl.get("spec"), meta.get("labels"), meta.get("annotations")])
    if kind == "StatefulSet":
        per_pod += json_size(spec.get("volumeClaimTemplates"))
    return count, fld, per_pod


def _preflight(stage: _Stage, items: Sequence[tuple[dict, int, str]]) -> FieldError | None:
    """Before anything is expanded: the workloads of a change, counted by ``_estimate`` (less the
    pods each owns now, which it replaces), would pass a limit -> the error at the first one that
    does. Counts are lower bounds: what passes is checked again as each object is applied."""
    work = [(obj, doc, prefix, *_estimate(obj)) for obj, doc, prefix in items
            if obj.get("kind") in WORKLOAD_KINDS]
    if not any(count for *_, count, _f, _s in work):
        return None
    first = _first_over(stage, work, None)
    if first is None:
        return None
    # Something passes a limit counting every pod as new: count again, less what each owns now.
    return _first_over(stage, work, _owned_counts(stage))


def _first_over(stage: _Stage, work: list[tuple[dict, int, str, int, str, int]],
                owned: dict[tuple[str, str, str], tuple[int, int]] | None) -> FieldError | None:
    pods, size = len(stage.pods), stage.json_bytes
    for obj, doc, prefix, count, fld, per_pod in work:
        if not count:
            continue
        pods += count
        size += count * per_pod
        if owned is not None:
            raw = obj.get("metadata")
            meta: dict = raw if isinstance(raw, dict) else {}
            had = owned.get((str(obj["kind"]), str(meta.get("namespace") or "default"), str(meta.get("name"))))
            if had:
                pods, size = pods - had[0], size - had[1]
        problem = stage.limits.over(pods if pods > len(stage.pods) else 0, 0,
                                    size if size > stage.json_bytes else 0,
                                    f"the {count:,} pods of this {obj['kind']} would make the scenario hold")
        if problem is not None:
            return FieldError(prefix + fld, problem, doc)
    return None


def _owned_counts(stage: _Stage) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(kind, namespace, name) of each owner in a pod's chain -> the pods it owns and their size."""
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for key, pod in stage.pods.items():
        ns = key.split("/", 1)[0]
        size = stage.size_of(("Pod", key))
        for kind, name in owner_chain(pod, stage.lookup):
            n, b = out.get((kind, ns, name), (0, 0))
            out[kind, ns, name] = (n + 1, b + size)
    return out


def _owned_pods(stage: _Stage, kind: str, ns: str, name: str) -> list[str]:
    out = []
    for key, pod in stage.pods.items():
        if key.split("/", 1)[0] != ns:
            continue
        if (kind, name) in owner_chain(pod, stage.lookup):
            out.append(key)
    return out


def _delete_one(stage: _Stage, obj: dict, kind: str) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise _Invalid("metadata.name", "required")
    name = meta["name"]
    if kind == "Node":
        if name not in stage.nodes:
            raise _Invalid("metadata.name", f"no Node {name} in the scenario")
        stage.drop_node(name)
        return
    if kind == "Pod":
        pkey = pod_key(obj)
        if pkey not in stage.pods:
            raise _Invalid("metadata.name", f"no Pod {pkey} in the scenario")
        stage.drop_pod(pkey)
        return
    if kind not in WORKLOAD_KINDS and kind not in OBJECT_KINDS:
        raise _Invalid("kind", f"unsupported kind {kind!r}")
    if kind == "PriorityClass":
        users = [k for k, p in stage.pods.items() if (p.get("spec") or {}).get("priorityClassName") == name
                 and not (p.get("spec") or {}).get("nodeName")]
        if users:
            raise _Invalid("metadata.name", f"pending pods use PriorityClass {name} (e.g. {users[0]}): delete or "
                                            "change them first, or no run could create them")
    key = (kind, object_key(obj))
    found = key in stage.objects
    pods = _owned_pods(stage, kind, meta.get("namespace") or "default", name) if kind in WORKLOAD_KINDS else []
    if found:
        stage.drop_object(key)
    if kind in WORKLOAD_KINDS:
        ns = meta.get("namespace") or "default"
        for owned in [k for k, o in stage.objects.items()
                      if k[1].startswith(f"{ns}/") and _controlled_by(o, kind, name)]:
            stage.drop_object(owned)
        for p in pods:
            stage.drop_pod(p)
        found = found or bool(pods)
    if not found:
        raise _Invalid("metadata.name", f"no {kind} {key[1]} in the scenario")


def _controlled_by(obj: dict, kind: str, name: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return isinstance(refs, list) and any(isinstance(r, dict) and r.get("kind") == kind and r.get("name") == name
                                          and r.get("controller") for r in refs)
