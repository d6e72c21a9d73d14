"""``pysched simulate``: the real profiles and plugins over a cluster snapshot, no API server.

The snapshot's nodes, bound pods and supporting objects are loaded into an OfflineScheduler (the
production cache, frameworks and scheduling cycle). ``--pods`` holds Pods and workloads
(Deployments, ReplicaSets, ReplicationControllers, StatefulSets, Jobs, DaemonSets), expanded into
the Pods their controllers would create (``workloads.py``); file pods get the API server's
create-time defaulting (``apidefaults``). ``--add-nodes TEMPLATE:N`` adds what-if nodes first
(``whatif.py``).

Which pods are scheduled, in which order: the ``--pods`` pods, and the snapshot's pending pods
(no ``nodeName``, a ``schedulerName`` one of the profiles serves, no scheduling gates). Queue order
is kube-scheduler's PrioritySort: priority, then the time the pod entered the queue - the pending
ones were created before anything in ``--pods``, so at equal priority they come first (oldest
``creationTimestamp`` first), then the ``--pods`` in file order. Each pod is assumed on its node
exactly as the live scheduler assumes before binding. Pods left unschedulable are retried while a
pass places at least one pod (a later pod can satisfy an earlier pod's affinity or spread, as the
live queue retries on Pod/Add events).

Gangs a pod-group source claims (Kubernetes' own PodGroups with GangScheduling and the
GenericWorkload gate - ``--feature-gates`` -, scheduler-plugins' with Coscheduling) are placed as
the live pod-group cycle places them: when the queue order reaches a group's first member, all its
members still to schedule go into one attempt (``OfflineScheduler.schedule_group``), placed whole
in the best placement (a topology domain with TopologyAwareWorkloadScheduling) or not at all, with
the cycle's messages. Other gangs (Coscheduling's ``schedulerPluginsCompatible``) go member by
member through Permit. The result gives each group's verdict and the member that blocks it;
``--explain podgroup/NS/NAME`` (or a member) adds the group's attempt placement by placement
(``format_group_explain``; ``explainPodGroups`` in JSON).

``--pods`` may also hold the supporting objects those pods need (PodGroups, PriorityClasses,
PodDisruptionBudgets, ElasticQuotas...: ``snapshot.SUPPORTING_KINDS``); they join the snapshot's
and replace one of the same kind and name. A ``--pods`` pod the snapshot already holds (same
namespace/name) is an update of it: the snapshot's copy is dropped (no longer counted on its node)
and the file's is scheduled, with a note. ``--scale KIND/NS/NAME=N`` sets a workload's replicas to
N in total, counting the pods of it the snapshot runs: one in ``--pods`` is expanded with the
difference from the file's template (``workloads.scale_in_file``), one only in the snapshot gets
pods created or removed (``workloads.scale_in_snapshot``); ``--pods`` is optional with it.

Output: each pod's node or the scheduler's reason, per-node and per-zone utilisation before and
after, how many pods the added nodes took; ``--explain`` (a pod ``ns/name``, a glob ``ns/web-*``,
or a workload ``deployment/ns/name``) adds every plugin's filter verdict per node and the raw,
normalised and weighted scores - as text, nodes grouped by verdict (``--explain-nodes all``: every
node); ``--output json`` prints all of it as JSON; ``--report out.html`` writes a self-contained
page with utilisation charts (``report.py``). The JSON and the report record the effective
configuration and the inputs (file names, sha256, flags), and per pod how many candidate nodes
``percentageOfNodesToScore`` left unevaluated and how many nodes tied at the top score.
Exit status (``exitcodes.py``): 0 every pod placed, 1 some not placed, 2 bad input, 3 internal error.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import sys
import time
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched.apis import config as configmod
from pysched.apis.core import defaults as apidefaults
from pysched.apis.core.quantity import format_resource
from pysched.framework.loadmetrics import LoadMetrics
from pysched.profile import default_registry
from pysched.runtime.registry import RegistryError
from pysched.tools.exitcodes import EXIT_ALL_PLACED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_UNSCHEDULABLE
from pysched.tools.offline import OfflineScheduler, Outcome, natural_key
from pysched.tools.snapshot import Snapshot, SnapshotError, load_pods, load_snapshot, validate_pod

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
# Node labels the report groups utilisation by (instance type; capacity type as CapacityType reads it).
REPORT_LABELS = ("node.kubernetes.io/instance-type", "karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType")
BASE_RESOURCES = ("cpu", "memory", "pods")
MAX_RETRY_PASSES = 10
# --metrics-file: the load-aware plugins' metricProvider is never reached offline; one configured
# without an address (or with credential files absent here) is given this one instead.
OFFLINE_METRICS_ADDRESS = "http://metrics-file.invalid"
EXPLAIN_SUMMARY_NODES = 5       # text --explain: nodes named per verdict group, best-scored rows shown
# What workloads bring to the object store (their own ReplicaSet, StatefulSet, claims): replacing the
# snapshot's copy is the point of --scale, not worth a note.
EXPANDED_KINDS = ("ReplicaSet", "StatefulSet", "PersistentVolumeClaim")
NOTES_LISTED = 5                # pods named in one note before "and N more"


@dataclass
class Placement:
    pod: str
    node: str | None
    code: str
    message: str
    scheduler_name: str
    nominated_node: str = ""
    victims: tuple[str, ...] = ()
    source: str = "pods"        # "pods": the --pods file; "snapshot": pending in the snapshot; "scale": --scale
    owner: str = ""             # the workload it was expanded from ("Deployment web"), if any
    sampling: dict | None = None   # offline.SamplingScheduler.cycle: nodes not evaluated, ties at the top

    def as_dict(self) -> dict:
        out: dict = {"pod": self.pod, "node": self.node, "result": self.code, "message": self.message,
               "schedulerName": self.scheduler_name, "source": self.source}
        if self.owner:
            out["owner"] = self.owner
        if self.nominated_node:
            out["preemption"] = {"nominatedNode": self.nominated_node, "victims": list(self.victims)}
        if self.sampling:
            out["sampling"] = self.sampling
        return out


@dataclass
class SimulationResult:
    profile: str
    seed: int
    placements: list[Placement]
    before: dict
    after: dict
    explain: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)    # gangs: verdict and the member blocking it
    added_nodes: list[dict] = field(default_factory=list)   # --add-nodes: template, nodes, pods they took
    config: dict = field(default_factory=dict)     # the effective KubeSchedulerConfiguration (v1 form)
    inputs: dict = field(default_factory=dict)     # files (name, sha256) and flags: what reproduces the run
    # --explain of a gang placed by the pod-group cycle (a member, or podgroup/ns/name): its last
    # attempt placement by placement (``offline.GroupOutcome.trace``), by group key
    explain_groups: dict[str, dict] = field(default_factory=dict)

    @property
    def all_placed(self) -> bool:
        return all(p.node for p in self.placements)

    def sampling_summary(self) -> dict:
        """Across pods: how many had candidate nodes left unevaluated (percentageOfNodesToScore) and
        how many had several nodes tied at the top score (``report_data.sampling_summary``)."""
        from pysched.tools.report_data import sampling_summary
        return sampling_summary(self.placements)

    def as_dict(self) -> dict:
        return {"profile": self.profile, "seed": self.seed, "placements": [p.as_dict() for p in self.placements],
                "utilisation": {"before": self.before, "after": self.after}, "explain": self.explain,
                "explainPodGroups": self.explain_groups,
                "notes": self.notes, "podGroups": self.groups, "addedNodes": self.added_nodes,
                "sampling": self.sampling_summary(), "inputs": self.inputs, "config": self.config}


def zone_of(labels: dict) -> str:
    for key in ZONE_LABELS:
        if labels.get(key):
            return labels[key]
    return ""


def utilisation(sim: OfflineScheduler, resources: list[str]) -> dict:
    """Requested vs allocatable per node and per zone (requests of every pod counted on the node)."""
    nodes: list[dict] = []
    zones: dict[str, dict] = {}
    for name in sorted(sim.cache.nodes):
        info = sim.cache.nodes[name]
        row: dict = {"node": name, "zone": zone_of(info.labels), "allocatable": {}, "requested": {},
               "labels": {k: info.labels[k] for k in REPORT_LABELS if k in info.labels}}
        for r in resources:
            alloc = info.allocatable.get(r, 0)
            used = len(info.pods) if r == "pods" else info.requested.get(r, 0)
            row["allocatable"][r] = alloc
            row["requested"][r] = used
            z = zones.setdefault(row["zone"], {"zone": row["zone"], "nodes": 0, "allocatable": {}, "requested": {}})
            z["allocatable"][r] = z["allocatable"].get(r, 0) + alloc
            z["requested"][r] = z["requested"].get(r, 0) + used
        zones[row["zone"]]["nodes"] += 1
        nodes.append(row)
    return {"resources": resources, "nodes": nodes, "zones": [zones[k] for k in sorted(zones)]}


def _resources_of(nodes: list[dict]) -> list[str]:
    extra = set()
    for n in nodes:
        for name, q in ((n.get("status") or {}).get("allocatable") or {}).items():
            if name not in BASE_RESOURCES and "/" in name and str(q) not in ("0", ""):
                extra.add(name)
    return list(BASE_RESOURCES) + sorted(extra)


class Simulation:
    def __init__(self, cfg: configmod.SchedulerConfig | None = None, *, seed: int = 0, plugin_modules=(),
                 load: LoadMetrics | None = None, feature_gates: frozenset[str] | None = None):
        """``load``: node load for load-aware plugins (``loadmetrics.StaticLoad`` from a metrics file).
        With it, their ``metricProvider`` is not reached: one without an address (or naming token
        or CA files absent here) is accepted (``offline_metric_providers``). ``feature_gates``: the
        gates on (default: the newest release's; ``--feature-gates``)."""
        self.cfg = cfg or configmod.default_config()
        self.seed = seed
        registry = default_registry(plugin_modules)
        self.metrics_notes = offline_metric_providers(self.cfg, registry) if load is not None else []
        self.sim = OfflineScheduler(self.cfg, registry=registry, seed=seed, load=load, feature_gates=feature_gates)

    def effective_config(self) -> dict:
        """The configuration this run used, defaults applied, as ``pysched run --write-config-to``
        writes it (every profile's plugins and their args)."""
        from pysched.framework.args import dump_args
        fws = self.sim.frameworks

        def order(fw) -> list[str]:
            # As kube-scheduler (and the CLI) write them: the profile's own pluginConfig entries as
            # given, then the defaulted ones sorted by name.
            with_args = {n for n, a in fw.plugin_args.items() if a is not None}
            given = [n for n in fw.profile.plugin_config if n in with_args]
            return given + sorted(with_args - set(given))
        args_out = {name: {pn: dump_args(fw.plugin_args[pn]) for pn in order(fw)} for name, fw in fws.items()}
        return configmod.to_dict(self.cfg, args_out, {name: fw.plugin_sets for name, fw in fws.items()})

    def load(self, snapshot: Snapshot, added_nodes: Sequence[dict] = (), *, objects: Sequence[dict] = (),
             replaced: AbstractSet[str] = frozenset(),
             removed: AbstractSet[str] = frozenset()) -> tuple[list[str], list[dict]]:
        """The snapshot into the cache and object store; returns the notes and the snapshot's
        pending pods this simulation schedules (no node, a profile's schedulerName, not gated),
        oldest first. ``objects`` (from the pod file and its workloads) go in after the snapshot's,
        replacing any of the same kind and name; the snapshot's pods named in ``replaced`` (the
        --pods holds them too) or ``removed`` (--scale) are left out."""
        notes = []
        for obj in snapshot.objects:
            self.sim.add_object(obj)
        known = {_object_key(o) for o in snapshot.objects}
        overridden = []
        for obj in objects:
            if _object_key(obj) in known and obj.get("kind") not in EXPANDED_KINDS:
                overridden.append(f"{obj['kind']} {_object_key(obj)[1]}")
            self.sim.add_object(obj)
        if overridden:
            notes.append(f"--pods replaces the snapshot's {_listed(overridden)}")
        for node_obj in [*snapshot.nodes, *added_nodes]:
            self.sim.add_node(node_obj)
        pending: list[tuple[str, int, dict]] = []
        foreign = gated = missing = 0
        updated: list[str] = []
        for i, pod in enumerate(snapshot.pods):
            pod = dict(pod, metadata=dict(pod["metadata"]))
            pod["metadata"].setdefault("uid", f"snapshot-{i:06d}")
            pod["metadata"]["namespace"] = pod["metadata"].get("namespace") or "default"
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed") or key in removed:
                continue
            spec = pod.get("spec") or {}
            node = spec.get("nodeName")
            if key in replaced:
                updated.append(f"{key} (on {node})" if node else f"{key} (pending)")
                continue
            if not node:
                if (spec.get("schedulerName") or "default-scheduler") not in self.sim.frameworks:
                    foreign += 1
                elif spec.get("schedulingGates"):
                    gated += 1
                else:
                    pod["spec"] = dict(spec, schedulerName=spec.get("schedulerName") or "default-scheduler")
                    pending.append((pod["metadata"].get("creationTimestamp") or "", i, pod))
                continue
            if node not in self.sim.cache.nodes:
                missing += 1
            self.sim.add_pod(pod)
        if updated:
            notes.append(f"{len(updated)} pod(s) of --pods are in the snapshot too, treated as updates: the "
                         f"snapshot's copy is dropped (no longer counted on its node) and the --pods one is "
                         f"scheduled anew: {_listed(updated)}")
        if foreign:
            notes.append(f"{foreign} pending pod(s) in the snapshot are not counted (they hold no node and no "
                         "profile here schedules their schedulerName)")
        if gated:
            notes.append(f"{gated} pending pod(s) in the snapshot are not scheduled (schedulingGates)")
        if pending:
            notes.append(f"{len(pending)} pending pod(s) in the snapshot are scheduled too (queue order: priority, "
                         "then creation time; before the --pods of the same priority)")
        if missing:
            notes.append(f"{missing} pod(s) in the snapshot are bound to nodes it does not contain")
        if snapshot.ignored:
            kinds = ", ".join(f"{k} ({n})" for k, n in sorted(snapshot.ignored.items()))
            notes.append(f"ignored objects of kinds that do not affect scheduling: {kinds}")
        return notes, [p for _, _, p in sorted(pending, key=lambda t: (t[0], t[1]))]

    def run(self, snapshot: Snapshot, pods: list[dict], explain: Iterable[str] = frozenset(), *,
            objects: Sequence[dict] = (), added_nodes: Sequence[dict] = (), added_from: dict[str, str] | None = None,
            owners: dict[str, str] | None = None, removed: AbstractSet[str] = frozenset(),
            sources: dict[str, str] | None = None) -> SimulationResult:
        """Schedule the snapshot's pending pods and ``pods``. ``explain``: pods to trace, each a
        ``ns/name``, a glob over them or a workload (``workloads.explain_matches``); ``objects``:
        what the pod file brought (its supporting objects, and its workloads' ReplicaSets,
        StatefulSets, PVCs); ``added_nodes``: the --add-nodes what-ifs, ``added_from`` maps each to
        its template; ``owners``: ns/name -> workload; ``removed``: snapshot pods --scale took away;
        ``sources``: ns/name -> where a pod of ``pods`` came from when not the file ("scale")."""
        keys = [f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}" for p in pods]
        notes, pending = self.load(snapshot, list(added_nodes), objects=objects, replaced=set(keys),
                                   removed=removed)
        notes.extend(self.metrics_notes)
        resources = _resources_of([*snapshot.nodes, *added_nodes])
        before = utilisation(self.sim, resources)
        classes, global_default = apidefaults.priority_classes([*snapshot.objects, *objects])
        profile = self.sim.profile
        created = [apidefaults.apply(p, default_scheduler=profile, classes=classes,
                                     global_default=global_default, seq=i) for i, p in enumerate(pods)]
        # Queue order (PrioritySort): priority, then the time the pod entered the queue. Pods pending
        # in the snapshot were created before the --pods ones: at equal priority they go first, oldest
        # first, then the --pods in file order. A gang's members stay together, at its first member
        # (Coscheduling's QueueSort keeps a group contiguous in the live queue too).
        sources_of = sources or {}
        srcs = ["snapshot"] * len(pending) + [sources_of.get(k, "pods") for k in keys]
        created = pending + created
        # Gangs a pod-group source claims (GangScheduling with GenericWorkload, Coscheduling unless
        # schedulerPluginsCompatible) are placed whole, one group attempt at a time; the others'
        # members go one by one through Permit.
        cycle_of: dict[int, str] = {}
        for i, pod in enumerate(created):
            claim = self.sim.group_of(pod) if pod["spec"]["schedulerName"] in self.sim.frameworks else None
            if claim is not None and claim[1]:
                cycle_of[i] = claim[1]
        groups = _groups_of(created, cycle_of)
        explained, explained_groups, unmatched = self._explained(list(explain), created, groups)
        for pattern in unmatched:
            notes.append(f"--explain {pattern}: no pod scheduled here matches it (the --pods pods and the "
                         "snapshot's pending ones are scheduled; its bound pods are not)")
        first_of = {key: idx[0] for key, idx in groups.items()}
        group_of = {i: key for key, idx in groups.items() for i in idx}
        order = sorted(range(len(created)), key=lambda i: (-(created[i]["spec"].get("priority") or 0),
                                                           first_of.get(group_of.get(i, ""), i), i))
        for key in groups:
            for i in groups[key]:
                self.sim.observe_pending(created[i])
        index_of_uid = {created[i]["metadata"]["uid"]: i for i in range(len(created))}
        outcomes: dict[int, Outcome] = {}
        own_failure: dict[int, str] = {}
        traces: dict[str, dict] = {}
        group_traces: dict[str, dict] = {}
        todo = order
        for _ in range(MAX_RETRY_PASSES):
            failed = []
            attempted: set[str] = set()
            for i in todo:
                pod = created[i]
                name = pod["spec"]["schedulerName"]
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if name not in self.sim.frameworks:
                    outcomes[i] = Outcome(key, None, f"no profile for schedulerName {name!r} "
                                          f"(profiles: {', '.join(sorted(self.sim.frameworks))})", "NotHandled")
                    continue
                gkey = cycle_of.get(i)
                if gkey is not None:
                    # The live queue pops the group's first member and takes every other one it holds.
                    if gkey in attempted:
                        continue
                    attempted.add(gkey)
                    batch = [j for j in todo if cycle_of.get(j) == gkey]
                    got = self.sim.schedule_group([created[j] for j in batch], explain=explained)
                    group_traces[gkey] = got.trace
                    results = list(zip(batch, got.outcomes))
                else:
                    results = [(i, self.sim.schedule(pod, explain=key in explained))]
                for j, out in results:
                    outcomes[j] = out
                    if out.trace is not None:
                        traces[out.pod] = dict(out.trace, pod=out.pod, result=out.code, message=out.message)
                        if gkey is not None:
                            traces[out.pod]["podGroup"] = gkey
                    if not out.node and out.code == "Unschedulable":
                        failed.append(j)
                        own_failure.setdefault(j, out.message)
                released = self._apply_settled(outcomes, index_of_uid)
                failed.extend(j for j in released if j not in failed)
            if not failed or len(failed) == len(todo):
                break
            todo = sorted(failed, key=order.index)
        self.sim.expire_waiting()
        self._apply_settled(outcomes, index_of_uid)
        verdicts = self._group_verdicts(groups, created, outcomes, own_failure, group_traces)
        owners = owners or {}
        placements = [Placement(outcomes[i].pod, outcomes[i].node, outcomes[i].code, outcomes[i].message,
                                created[i]["spec"]["schedulerName"], outcomes[i].nominated_node,
                                outcomes[i].victims, srcs[i], owners.get(outcomes[i].pod, ""), outcomes[i].sampling)
                      for i in range(len(created))]
        summary = _sampling_note(placements)
        if summary:
            notes.append(summary)
        explain_groups = {}
        for key in sorted(explained_groups | {group_of[i] for i in group_of
                                               if created_key(created[i]) in explained}):
            if key in group_traces:
                verdict = next(v for v in verdicts if v["group"] == key)
                explain_groups[key] = dict(group_traces[key], verdict=verdict["verdict"],
                                          membersPlaced=verdict["placed"])
        return SimulationResult(profile, self.seed, placements, before, utilisation(self.sim, resources),
                                traces, notes, verdicts, _added_summary(added_nodes, added_from or {}, placements),
                                explain_groups=explain_groups)

    def _explained(self, patterns: list[str], created: list[dict],
                   groups: dict[str, list[int]]) -> tuple[set[str], set[str], list[str]]:
        """The ns/name of the scheduled pods ``patterns`` name, the gangs they name
        (``podgroup/ns/name``, the name may be a glob), and the patterns naming none."""
        from pysched.tools.workloads import explain_matches, owner_chain
        if not patterns:
            return set(), set(), []
        store = self.sim.objects
        plurals = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
                   "ReplicationController": "replicationcontrollers"}

        def lookup(kind: str, ns: str, name: str) -> dict | None:
            plural = plurals.get(kind)
            return store.get(plural, f"{ns}/{name}") if plural else None
        chains = [owner_chain(p, lookup) for p in created]
        out: set[str] = set()
        out_groups: set[str] = set()
        unmatched = []
        for pattern in dict.fromkeys(patterns):
            if pattern.lower().startswith(GROUP_PATTERN):
                hit_groups = {k for k in groups if fnmatch.fnmatchcase(k, pattern[len(GROUP_PATTERN):])}
                if hit_groups:
                    out_groups |= hit_groups
                    continue
            hits = {created_key(p) for p, chain in zip(created, chains) if explain_matches(pattern, p, chain)}
            if not hits:
                unmatched.append(pattern)
            out |= hits
        return out, out_groups, unmatched

    def _apply_settled(self, outcomes: dict[int, Outcome], index_of_uid: dict[str, int]) -> list[int]:
        """Pods held at Permit that were since allowed or released: their outcomes; returns the
        indices of the released ones (to retry)."""
        released = []
        for uid, (node, message) in self.sim.settled.items():
            i = index_of_uid.get(uid)
            if i is None or i not in outcomes:
                continue
            prev = outcomes[i]
            if node:
                outcomes[i] = Outcome(prev.pod, node, "", "Scheduled", prev.trace, sampling=prev.sampling)
            else:
                outcomes[i] = Outcome(prev.pod, None, message, "Unschedulable", prev.trace, sampling=prev.sampling)
                released.append(i)
        self.sim.settled.clear()
        return released

    def _group_verdicts(self, groups: dict[str, list[int]], created: list[dict], outcomes: dict[int, Outcome],
                        own_failure: dict[int, str], group_traces: dict[str, dict]) -> list[dict]:
        """Each gang's verdict: placed (all-or-nothing, at least minMember members) or not, and
        the member that blocks it with its own reason. A gang of the pod-group cycle
        (``group_traces``) keeps its members' messages (the cycle's) and adds its last attempt:
        ``source``, ``status``, the ``placement`` it went to and every ``placements`` tried; the
        others' unplaced members' messages say what blocks the group."""
        out = []
        for key, idx in groups.items():
            trace = group_traces.get(key)
            placed = [i for i in idx if i in outcomes and outcomes[i].node]
            if trace is not None:
                out.append(self._cycle_verdict(key, idx, placed, trace, created[idx[0]]["spec"]["schedulerName"]))
                continue
            pg = self.sim.objects.get("podgroups", key)
            min_member = int(((pg or {}).get("spec") or {}).get("minMember") or 0)
            ok = pg is not None and len(placed) >= min_member
            verdict = {"group": key, "minMember": min_member, "members": len(idx), "placed": len(placed),
                       "verdict": "placed" if ok else "not placed"}
            if not ok:
                members = set(idx)
                blocker = next((i for i in own_failure if i in members), None)   # the first to fail
                if pg is None:
                    reason = f"PodGroup {key} not found"
                elif blocker is not None:
                    reason = own_failure[blocker]
                elif len(idx) < min_member:
                    reason = f"only {len(idx)} pod(s) of minMember {min_member}"
                else:
                    reason = "timed out waiting at Permit"
                name = created[blocker]["metadata"]["name"] if blocker is not None else ""
                verdict["blockedBy"] = f"{key.split('/')[0]}/{name}" if name else ""
                verdict["reason"] = reason
                for i in idx:
                    o = outcomes.get(i)
                    if o is not None and not o.node and i != blocker:
                        o.message = (f"PodGroup {key} not placed ({len(placed)}/{min_member} members could be "
                                     f"placed), blocked by {verdict['blockedBy'] or 'missing members'}: {reason}")
            out.append(verdict)
        return out

    def _cycle_verdict(self, key: str, idx: list[int], placed: list[int], trace: dict,
                       scheduler_name: str) -> dict:
        """The verdict of a gang the pod-group cycle placed (or not): at least its minimum placed
        (this run's members and those already on a node), else the last attempt's reason - the
        blocking member's own verdict when one fit nowhere, the group's status otherwise."""
        fwk = self.sim.frameworks[scheduler_name]
        source: Any = fwk.plugins.get(trace.get("source", ""))
        pg = source.cycle_podgroup(key) if source is not None else None
        minimum = pg.min_count if pg is not None else int(trace.get("minCount") or 0)
        on_nodes = sum(1 for p in (source.cycle_members(key) if source is not None else ()) if p.node_name)
        ok = pg is not None and len(placed) + on_nodes >= minimum and bool(placed or on_nodes)
        verdict: dict = {"group": key, "source": trace.get("source", ""),
                         "minMember": minimum, "members": len(idx), "placed": len(placed),
                         "verdict": "placed" if ok else "not placed", "status": trace.get("status", ""),
                         "placement": trace.get("placement", ""), "placementsTried": len(trace.get("placements", []))}
        if on_nodes:
            verdict["alreadyOnNodes"] = on_nodes
        if not ok:
            blocker = trace.get("blockedBy", "")
            placement = next((p for p in trace.get("placements", []) if blocker.partition("/")[2] in p["unplaced"]),
                             None) if blocker else None
            verdict["blockedBy"] = blocker
            verdict["reason"] = placement["unplaced"][blocker.partition("/")[2]] if placement else \
                trace.get("status", "")
        return verdict

def _object_key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return str(obj.get("kind")), f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _listed(items: Sequence[str], limit: int = NOTES_LISTED) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def _sampling_note(placements: Sequence[Placement]) -> str:
    """One note for the pods whose feasible-node search stopped early (percentageOfNodesToScore)."""
    cut = [p.sampling for p in placements if p.sampling and p.sampling.get("notEvaluated")]
    if not cut:
        return ""
    most = max(cut, key=lambda s: s["notEvaluated"])
    return (f"percentageOfNodesToScore: {len(cut)} pod(s) were scheduled from a sample - the search stopped at "
            f"{most['numFeasibleNodesToFind']} feasible node(s), leaving up to {most['notEvaluated']} of "
            f"{most['candidates']} candidate node(s) unevaluated (per pod: sampling.notEvaluated in --output json)")


def offline_metric_providers(cfg: configmod.SchedulerConfig, registry) -> list[str]:
    """With ``--metrics-file``, the load-aware plugins (those whose args have a ``metricProvider``)
    read the file, never their provider: give each enabled or configured one a provider that passes
    validation - ``OFFLINE_METRICS_ADDRESS`` where a Prometheus provider has no address (or none at
    all), no token or CA file. ``cfg``'s profiles are changed in place; returns notes."""
    from pysched.apis.config.defaults import merged_plugin_sets
    from pysched.framework.loadmetrics import PROMETHEUS
    notes = []
    for profile in cfg.profiles:
        sets = merged_plugin_sets(profile, set(registry))
        names = dict.fromkeys([*(r.name for ps in sets.values() for r in ps.enabled), *profile.plugin_config])
        for name in names:
            args_cls = getattr(registry.get(name), "Args", None)
            if not (dataclasses.is_dataclass(args_cls) and any(f.name == "metric_provider"
                                                                for f in dataclasses.fields(args_cls))):
                continue
            raw = dict(profile.plugin_config.get(name) or {})
            provider = dict(raw.get("metricProvider") or {})
            changed = []
            if provider.get("type", PROMETHEUS) == PROMETHEUS and not provider.get("address"):
                provider["address"] = OFFLINE_METRICS_ADDRESS
                changed.append("no address needed")
            for key in ("bearerTokenFile", "caFile"):
                if provider.pop(key, None):
                    changed.append(f"{key} not read")
            if not changed and raw.get("metricProvider"):
                continue
            raw["metricProvider"] = provider
            profile.plugin_config = {**profile.plugin_config, name: raw}
            notes.append(f"{profile.scheduler_name}: {name} reads its load from --metrics-file; its metricProvider "
                         f"is not contacted ({', '.join(changed)})")
    return notes


def file_digest(path: str | None) -> dict | None:
    """An input file as the report records it: the name given and the sha256 of its contents."""
    if not path:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {"file": path, "sha256": None}
    return {"file": path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def run_inputs(args) -> dict:
    """What reproduces a run: each input file (name, sha256) and the flags that change the result,
    with the command line that replays them."""
    files = {"cluster": args.cluster, "pods": args.pods, "config": getattr(args, "config", None),
             "metricsFile": getattr(args, "metrics_file", None)}
    flags = {"seed": args.seed, "addNodes": list(getattr(args, "add_nodes", None) or ()),
             "scale": list(getattr(args, "scale", None) or ()), "explain": list(getattr(args, "explain", None) or ()),
             "featureGates": getattr(args, "feature_gates", None) or "",
             "pluginModules": list(getattr(args, "plugin_module", None) or ())}
    digests = {k: file_digest(v) for k, v in files.items() if v}
    for i, spec in enumerate(flags["addNodes"]):     # a template may be a Node YAML file
        template = spec.rpartition(":")[0]
        if template and Path(template).is_file():
            digests[f"addNodes[{i}]"] = file_digest(template)
    cmd = ["pysched", "simulate", "--cluster", args.cluster, *(["--pods", args.pods] if args.pods else [])]
    for flag, value in (("--config", files["config"]), ("--metrics-file", files["metricsFile"])):
        if value:
            cmd += [flag, value]
    for flag, values in (("--add-nodes", flags["addNodes"]), ("--scale", flags["scale"]),
                         ("--plugin-module", flags["pluginModules"])):
        for v in values:
            cmd += [flag, v]
    for v in flags["explain"]:
        cmd += ["--explain", v]
    if flags["featureGates"]:
        cmd += ["--feature-gates", flags["featureGates"]]
    cmd += ["--seed", str(args.seed)]
    import shlex

    from pysched import __version__
    return {"pyschedVersion": __version__,
            "files": digests,
            "flags": flags, "command": " ".join(shlex.quote(c) for c in cmd)}


def _added_summary(added: Sequence[dict], template_of: dict[str, str], placements: list[Placement]) -> list[dict]:
    """Per --add-nodes template: the nodes added and how many of the simulated pods they took."""
    out: dict[str, dict] = {}
    for node in added:
        name = node["metadata"]["name"]
        entry = out.setdefault(template_of.get(name, ""), {"template": template_of.get(name, ""), "nodes": [],
                                                            "podsPlaced": 0})
        entry["nodes"].append(name)
    where = {name: e for e in out.values() for name in e["nodes"]}
    for p in placements:
        if p.node in where:
            where[p.node]["podsPlaced"] += 1
    for e in out.values():
        e["count"] = len(e["nodes"])
    return list(out.values())


GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GROUP_PATTERN = "podgroup/"     # --explain podgroup/NS/NAME: a gang, by its PodGroup


def created_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"


def _group_key(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(GROUP_LABEL)
    return f"{meta.get('namespace') or 'default'}/{name}" if name else ""


def _groups_of(pods: list[dict], cycle_of: dict[int, str] | None = None) -> dict[str, list[int]]:
    """Gang members by ``namespace/podgroup``, in file order: the group a pod-group source claims
    the pod for (``cycle_of``), else Coscheduling's pod label."""
    out: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        key = (cycle_of or {}).get(i) or _group_key(pod)
        if key:
            out.setdefault(key, []).append(i)
    return out


# -- text output ------------------------------------------------------------------------------

def _pct(used: int, alloc: int) -> str:
    return f"{used * 100 // alloc}%" if alloc else "-"


def _amount(r: str, v: int) -> str:
    return str(v) if r == "pods" else format_resource(r, v)


def _pct_change(r: str, b: dict, a: dict) -> str:
    return f"{_pct(b['requested'][r], b['allocatable'][r])} -> {_pct(a['requested'][r], a['allocatable'][r])}"


def _change(r: str, b: dict, a: dict) -> str:
    if not a["allocatable"][r] and not a["requested"][r]:
        return "-"
    return f"{_pct_change(r, b, a)} ({_amount(r, a['requested'][r])}/{_amount(r, a['allocatable'][r])})"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def format_text(res: SimulationResult, explain_nodes: str = "summary") -> str:
    """The result as text; ``explain_nodes``: ``summary`` groups each explained pod's nodes by
    verdict, ``all`` lists every node (``format_explain``)."""
    out = [f"profile {res.profile}, seed {res.seed}: {sum(1 for p in res.placements if p.node)}/"
           f"{len(res.placements)} pods placed", ""]
    rows = [["POD", "NODE / REASON"]]
    for p in res.placements:
        text = p.node if p.node else f"{p.code}: {p.message}"
        if p.nominated_node:
            text += f" (would preempt {', '.join(p.victims)} on {p.nominated_node})"
        if p.source == "snapshot":
            text += " (pending in the snapshot)"
        elif p.source == "scale":
            text += " (--scale)"
        rows.append([p.pod, text])
    out += [_table(rows), ""]
    if res.groups:
        rows = [["POD GROUP", "PLACED", "VERDICT"]]
        for g in res.groups:
            text = g["verdict"]
            if g["verdict"] == "placed" and g.get("placement") and g["placement"] != "all nodes":
                text += f" in {g['placement']}"
            if g.get("reason"):
                text += f": blocked by {g.get('blockedBy') or 'missing members'}: {g['reason']}"
            minimum = "minCount" if g.get("source") == "GangScheduling" else "minMember"
            rows.append([g["group"], f"{g['placed']}/{g['members']} ({minimum} {g['minMember']})", text])
        out += [_table(rows), ""]
    resources = res.before["resources"]
    out.append("Utilisation by node, requested/allocatable (before -> after):")
    rows = [["NODE", "ZONE", *[r.upper() if r in BASE_RESOURCES else r for r in resources]]]
    for b, a in zip(res.before["nodes"], res.after["nodes"]):
        rows.append([b["node"], b["zone"] or "-"] + [_change(r, b, a) for r in resources])
    out += [_table(rows), "", "Utilisation by zone (before -> after):"]
    rows = [["ZONE", "NODES", *[r.upper() if r in BASE_RESOURCES else r for r in resources]]]
    for b, a in zip(res.before["zones"], res.after["zones"]):
        rows.append([b["zone"] or "(no zone)", str(b["nodes"])] + [_pct_change(r, b, a) for r in resources])
    out.append(_table(rows))
    if res.added_nodes:
        out += ["", "Added nodes (--add-nodes):"]
        rows = [["TEMPLATE", "NODES", "PODS PLACED ON THEM"]]
        for a in res.added_nodes:
            rows.append([a["template"], str(a["count"]), str(a["podsPlaced"])])
        out.append(_table(rows))
    for _key, group in res.explain_groups.items():
        out += ["", format_group_explain(group)]
    for _key, trace in res.explain.items():
        out += ["", format_explain(trace, explain_nodes)]
    if res.notes:
        out += [""] + [f"note: {n}" for n in res.notes]
    return "\n".join(out)


def format_explain(trace: dict, nodes: str = "summary", nodes_flag: str = "--explain-nodes") -> str:
    """One pod's cycle: PreFilter statuses, the filter verdicts, the score breakdown, what the
    sampling left out and the tie at the top. ``nodes="summary"`` (the default) groups the nodes by
    verdict, each group naming a few (naturally sorted: n2 before n10), and shows the best-scored
    nodes; ``"all"`` gives every node's verdicts and scores. ``nodes_flag``: the flag the summary
    names for the second form (``pysched explain`` has its own). Also the live scheduler's traces
    (``pysched explain``)."""
    head = (trace.get("selectedNode")
            or f"{trace.get('result', 'Unschedulable')}: {trace.get('message') or trace.get('error')}")
    out = [f"Explain {trace.get('pod', '')}: {head}"]
    if trace.get("podGroup"):
        where = f" on placement {trace['groupPlacement']}" if trace.get("groupPlacement") else ""
        out.append(f"  (its cycle{where} in pod group {trace['podGroup']}'s attempt)")
    skipped = []
    for pf in trace.get("preFilter") or ():
        if pf["status"] == "Skip":
            skipped.append(pf["plugin"])
        else:
            out.append(f"  PreFilter {pf['plugin']}: {pf['status']}")
    if skipped:
        out.append(f"  PreFilter Skip (nothing to check for this pod; their Filter is not run): {', '.join(skipped)}")
    verdicts: dict[str, list[str]] = {}
    for f in trace.get("filter") or ():
        for node, v in f["nodes"].items():
            verdicts.setdefault(node, []).append(f"{f['plugin']}: {v}")
    scores = trace.get("score") or {}
    totals = trace.get("totalScores") or {}
    selected = trace.get("selectedNode")
    if verdicts and nodes == "all":
        out.append("  Filter (each plugin's verdict; a node stops at its first failure):")
        rows = [["    NODE", "VERDICTS"]]
        for node in sorted(verdicts, key=natural_key):
            failed = [v for v in verdicts[node] if not v.endswith(": passed")]
            rows.append([f"    {node}", "; ".join(failed) if failed else f"passed {len(verdicts[node])} filter(s)"])
        out.append(_table(rows))
    elif verdicts:
        out.append(f"  Filter: {len(verdicts)} node(s) by verdict (a node stops at its first failure; "
                   f"{nodes_flag} all lists each):")
        out += [f"    {line}" for line in _verdict_groups(verdicts, totals, selected, trace.get("sampling") or {})]
    if scores:
        ranked = sorted(totals, key=lambda n: (-totals[n], natural_key(n)))
        shown = ranked if nodes == "all" else ranked[:EXPLAIN_SUMMARY_NODES]
        if selected in totals and selected not in shown:
            shown = [*shown, selected]
        more = "" if len(shown) == len(ranked) else f", the best {len(shown)} of {len(ranked)} scored"
        out.append(f"  Score (raw / normalised / weighted{more}):")
        names = list(scores)
        rows = [["    NODE", "TOTAL", *names]]
        for node in shown:
            rows.append([f"    {node}", str(totals[node])] + [
                "{raw}/{normalized}/{weighted}".format(**scores[p][node]) if node in scores[p] else "-" for p in names])
        out.append(_table(rows))
    else:
        shown = list(totals)
    out += _sampling_lines(trace.get("sampling") or {}, None if nodes == "all" else EXPLAIN_SUMMARY_NODES)
    listed = set(shown) if nodes != "all" else None
    for plugin, notes in (trace.get("scoreNotes") or {}).items():
        keep = [n for n in sorted(notes, key=natural_key) if listed is None or n in listed or n not in totals]
        if not keep:
            continue
        out.append(f"  {plugin} read:")
        for node in keep:
            out.append(f"    {node}: {notes[node]}")
    return "\n".join(out)


def format_group_explain(group: dict) -> str:
    """A gang's last attempt in the pod-group cycle, placement by placement (one per topology
    domain with TopologyAwareWorkloadScheduling, else every node as one): its nodes, whether the
    gang fits there or why not, the members placed where and not, the placement scores, and the
    placement chosen (``*``)."""
    minimum = "minCount" if group.get("source") == "GangScheduling" else "minMember"
    placements = group.get("placements") or []
    fitting = sum(1 for p in placements if p["fits"])
    if group.get("result") == "Scheduled":
        head = f"placed in {group.get('placement') or 'all nodes'}"
        if fitting > 1:
            head += f" (best of {fitting} placements that fit)"
    else:
        head = f"{group.get('result', 'Unschedulable')}: {group.get('status', '')}"
    out = [f"Explain pod group {group['group']} ({group.get('source', '')}, {minimum} {group.get('minCount', '?')}, "
           f"{group.get('inAttempt', 0)} of {group.get('members', 0)} pod(s) tried in its last attempt): {head}"]
    if group.get("inAttempt", 0) < group.get("members", 0) and group.get("inAttempt", 0) == 0:
        out.append("  no member was tried: PreEnqueue holds them back")
    if placements:
        tiers = sorted({p.get("tier", 0) for p in placements})
        more = f" in {len(tiers)} tiers, lowest first" if len(tiers) > 1 else ""
        chosen = "; * chosen" if any(p.get("chosen") for p in placements) else "; none chosen"
        out.append(f"  Placements tried ({len(placements)}{more}{chosen}):")
    for p in placements:
        mark = "*" if p.get("chosen") else " "
        verdict = "fits" if p["fits"] else (p.get("message") or "does not fit")
        tier = f", tier {p['tier']}" if len(placements) > 1 and p.get("tier") else ""
        line = f"  {mark} {p['placement']} ({p['nodes']} node{'s' if p['nodes'] != 1 else ''}{tier}): {verdict}"
        if p.get("scores"):
            total = sum(p["scores"].values())
            line += f"; score {total} (" + ", ".join(f"{k} {v}" for k, v in sorted(p["scores"].items())) + ")"
        out.append(line)
        placed = p.get("placed") or {}
        if placed:
            out.append("      placed: " + ", ".join(f"{pod} -> {node}" for pod, node in
                                               sorted(placed.items(), key=lambda kv: natural_key(kv[0]))))
        for pod, why in sorted((p.get("unplaced") or {}).items(), key=lambda kv: natural_key(kv[0])):
            out.append(f"      not placed: {pod}: {why}")
    for pod, node in sorted((group.get("nominated") or {}).items()):
        out.append(f"  nominated: {pod} -> {node} (PodGroupPostFilter: waiting for its victims to go)")
    return "\n".join(out)


def _verdict_groups(verdicts: dict[str, list[str]], totals: dict[str, int], selected: str | None,
                    sampling: dict) -> list[str]:
    """``412 nodes: NodeResourcesFit: Insufficient cpu (n1, n2, ...)`` lines, the largest group
    first; the passing nodes split into scored (with the best score and node) and passed but not
    scored (percentageOfNodesToScore cut the search before them)."""
    groups: dict[str, list[str]] = {}
    for node, vs in verdicts.items():
        failed = [v for v in vs if not v.endswith(": passed")]
        if failed:
            key = "; ".join(failed)
        elif not totals or node in totals:
            key = "passed"
        else:
            key = "passed, not scored (percentageOfNodesToScore: the search had found enough feasible nodes)"
        groups.setdefault(key, []).append(node)
    lines = []
    for key, members in sorted(groups.items(), key=lambda kv: (kv[0] != "passed", -len(kv[1]), kv[0])):
        members.sort(key=natural_key)
        text = key
        if key == "passed" and totals:
            top = max(totals.get(n, -1) for n in members)
            winners = [n for n in members if totals.get(n) == top]
            best = selected if selected in winners else winners[0]
            tie = f", tied with {len(winners) - 1} more" if len(winners) > 1 else ""
            text = f"passed, best score {top} ({best}{tie})"
            if selected and selected not in winners:
                text += f", picked {selected} ({totals.get(selected)})"
        elif key == "passed" and selected:
            text = f"passed (picked {selected}, unscored: the only feasible node)" if len(members) == 1 else \
                f"passed (picked {selected})"
        more = len(members) - EXPLAIN_SUMMARY_NODES
        names = ", ".join(members[:EXPLAIN_SUMMARY_NODES]) + (f", +{more} more" if more > 0 else "")
        lines.append(f"{len(members)} node{'s' if len(members) != 1 else ''}: {text}  [{names}]")
    if sampling.get("notEvaluated") and not any(k.startswith("passed, not scored") for k in groups):
        lines.append(f"{sampling['notEvaluated']} node(s): not evaluated (percentageOfNodesToScore)")
    return lines


def _sampling_lines(sampling: dict, names: int | None) -> list[str]:
    """``Sampling:`` (nodes percentageOfNodesToScore left out) and ``Tie:`` (nodes at the top
    score, up to ``names`` of them named) lines."""
    out = []
    if sampling.get("notEvaluated"):
        out.append(f"  Sampling: percentageOfNodesToScore stops the search at {sampling['numFeasibleNodesToFind']} "
                   f"feasible node(s): {sampling['notEvaluated']} of {sampling['candidates']} candidate node(s) "
                   "are not evaluated (filtered here for the explanation only, never scored)")
    if (sampling.get("tiedAtTop") or 0) > 1:
        tied = (sampling.get("tied") or [])[:names]
        more = sampling["tiedAtTop"] - len(tied)
        out.append(f"  Tie: {sampling['tiedAtTop']} node(s) share the top score {sampling['topScore']} "
                   f"({', '.join(tied)}{f' and {more} more' if more > 0 else ''}); the seeded tie-break picked "
                   f"{sampling['picked']}")
    return out


# -- entry point ------------------------------------------------------------------------------

def prepare(args) -> tuple[Simulation, Snapshot, list[dict], dict]:
    """Read and check everything the run needs (every error here is bad input)."""
    from pysched.tools.whatif import build_nodes
    from pysched.tools.workloads import Expander, WorkloadError, parse_scale, scale_in_file, scale_in_snapshot
    cfg = configmod.load_file(args.config) if args.config else configmod.default_config()
    try:
        targets = _scale_targets(getattr(args, "scale", None) or (), parse_scale)
    except WorkloadError as exc:
        raise SnapshotError(str(exc)) from None
    if not args.pods and not targets:
        raise SnapshotError("--pods: required (the pods or workloads to schedule), unless --scale "
                            "KIND/NS/NAME=N names a workload of --cluster to scale")
    snapshot = load_snapshot(args.cluster)
    added, template_of = build_nodes(list(getattr(args, "add_nodes", None) or ()), snapshot.nodes)
    expander = Expander([*snapshot.nodes, *added], snapshot.objects)
    by_ref = {(t.kind, t.namespace, t.name): t for t in targets}
    in_file: set[tuple[str, str, str]] = set()     # scale targets found in --pods
    workloads_in_file: list[dict] = []
    notes: list[str] = []
    removed: set[str] = set()

    def expand(obj: dict, where: str) -> list[tuple[dict, str]]:
        first = len(expander.out.pods)
        ref = (obj["kind"], obj["metadata"].get("namespace") or "default", obj["metadata"]["name"])
        target = by_ref.get(ref)
        if target is not None:
            # N in total, counting the pods of it the snapshot already runs (one note says how many)
            scaled = scale_in_file(target, obj, where, snapshot.pods, snapshot.objects, expander)
            in_file.add(ref)
            removed.update(scaled.removed)
            notes.append(scaled.note)
        else:
            workloads_in_file.append(obj)
            expander.expand(obj, where)
        return [(p, f"{where}, from {obj['kind']} {obj['metadata']['name']} spec.template")
                for p in expander.out.pods[first:]]
    supporting: list[dict] = []
    pods = load_pods(args.pods, expand, supporting, allow_empty=bool(targets)) if args.pods else []
    notes[:0] = expander.out.notes
    notes += _workloads_already_running(workloads_in_file, snapshot)
    sources: dict[str, str] = {}
    keys = {f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}" for p in pods}
    for t in targets:
        if (t.kind, t.namespace, t.name) in in_file:
            continue
        first = len(expander.out.pods)
        try:
            scaled = scale_in_snapshot(t, snapshot.pods, snapshot.objects, expander, keys)
        except WorkloadError as exc:
            raise SnapshotError(str(exc)) from None
        for j, pod in enumerate(scaled.pods):
            validate_pod(pod, f"--scale {t.text}", f"pod {j}")
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            keys.add(key)
            sources[key] = "scale"
            pods.append(pod)
        del expander.out.pods[first:]
        removed.update(scaled.removed)
        notes.append(scaled.note)
    load = None
    if getattr(args, "metrics_file", None):
        from pysched.loadmetrics.static import StaticLoad, load_metrics_file
        try:
            # One clock for the whole run: samples do not age while it simulates.
            load = StaticLoad(load_metrics_file(args.metrics_file), now=time.time())
        except configmod.ConfigError as exc:
            raise SnapshotError(f"--metrics-file: {exc}") from None
    gates = None
    if getattr(args, "feature_gates", ""):
        from pysched.apis.features import NEWEST, FeatureGateError, parse_flag, resolve
        try:
            gates = resolve(NEWEST, parse_flag(args.feature_gates)).enabled
        except FeatureGateError as exc:
            raise SnapshotError(f"--feature-gates: {exc}") from None
    simulation = Simulation(cfg, seed=args.seed, plugin_modules=args.plugin_module, load=load, feature_gates=gates)
    return simulation, snapshot, pods, {"objects": [*supporting, *expander.out.objects], "added_nodes": added,
                                        "added_from": template_of, "owners": expander.out.origin,
                                        "notes": notes, "removed": removed, "sources": sources}


def _scale_targets(texts: Iterable[str], parse) -> list:
    """``--scale`` values parsed (``workloads.parse_scale``); one workload named twice (``deploy/a/b=2
    --scale deployment/a/b=3``) is an error naming both."""
    from pysched.tools.workloads import WorkloadError
    seen: dict[tuple[str, str, str], str] = {}
    out = []
    for text in texts:
        t = parse(text)
        ref = (t.kind, t.namespace, t.name)
        if ref in seen:
            raise WorkloadError(f"--scale {text}: {t.label} is already scaled by --scale {seen[ref]}")
        seen[ref] = text
        out.append(t)
    return out


def _workloads_already_running(workloads: list[dict], snapshot: Snapshot) -> list[str]:
    """A note per --pods workload whose pods the snapshot already runs: the file's pods come in
    addition (--scale sets the total instead)."""
    from pysched.tools.workloads import SCALABLE_KINDS, owner_chain

    def lookup(kind: str, ns: str, name: str) -> dict | None:
        return next((o for o in snapshot.objects if o.get("kind") == kind and o["metadata"].get("name") == name
                     and (o["metadata"].get("namespace") or "default") == ns), None)
    wanted = {(w["kind"], w["metadata"].get("namespace") or "default", w["metadata"]["name"]): 0 for w in workloads
              if w["kind"] in SCALABLE_KINDS}
    if not wanted:
        return []
    for pod in snapshot.pods:
        ns = pod["metadata"].get("namespace") or "default"
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for kind, name in owner_chain(pod, lookup):
            if (kind, ns, name) in wanted:
                wanted[kind, ns, name] += 1
    return [f"{kind} {ns}/{name} in --pods already has {n} pod(s) in the snapshot: the file's pods are placed in "
            f"addition to them (--scale {kind.lower()}/{ns}/{name}=N asks for N in total instead)"
            for (kind, ns, name), n in wanted.items() if n]


def main(args) -> int:
    """``pysched simulate``; returns the exit status (``EXIT_*``)."""
    try:
        try:
            simulation, snapshot, pods, extra = prepare(args)
            notes = extra.pop("notes")
            result = simulation.run(snapshot, pods, explain=list(args.explain), **extra)
            result.notes.extend(notes)
            result.config = simulation.effective_config()
            result.inputs = run_inputs(args)
        except (configmod.ConfigError, RegistryError) as exc:
            hint = ""
            if ".metricProvider" in str(exc) and not getattr(args, "metrics_file", None):
                hint = " (with --metrics-file the load-aware plugins read the file, and need no metricProvider address)"
            print(f"pysched simulate: invalid configuration: {exc}{hint}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except (SnapshotError, apidefaults.AdmissionError) as exc:
            print(f"pysched simulate: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.output == "json":
            print(json.dumps(result.as_dict(), indent=2))
        else:
            print(format_text(result, getattr(args, "explain_nodes", None) or "summary"))
        if args.report:
            from pysched.tools.report import write_report
            try:
                write_report(result, args.report)
            except OSError as exc:
                print(f"pysched simulate: --report: cannot write {args.report}: {exc.strerror or exc}",
                      file=sys.stderr)
                return EXIT_BAD_INPUT
            if args.output != "json":
                print(f"\nreport: {args.report}")
        return EXIT_ALL_PLACED if result.all_placed else EXIT_UNSCHEDULABLE
    except Exception:   # noqa: BLE001 - anything else is our bug: say so, distinctly from bad input
        import traceback
        print("pysched simulate: internal error (please report it with the traceback below)", file=sys.stderr)
        traceback.print_exc()
        return EXIT_INTERNAL
