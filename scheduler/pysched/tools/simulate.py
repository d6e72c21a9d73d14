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

Gangs (pods labelled ``scheduling.x-k8s.io/pod-group`` with Coscheduling enabled) go through
Permit: a group is placed all or nothing, and the report gives each group's verdict and the member
that blocks it.

Output: each pod's node or the scheduler's reason, per-node and per-zone utilisation before and
after, how many pods the added nodes took; ``--explain ns/name`` adds every plugin's filter verdict
per node and the raw, normalised and weighted scores; ``--output json`` prints all of it as JSON;
``--report out.html`` writes a self-contained page with utilisation charts (``report.py``).
Exit status (``exitcodes.py``): 0 every pod placed, 1 some not placed, 2 bad input, 3 internal error.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from pysched.apis import config as configmod
from pysched.apis.core import defaults as apidefaults
from pysched.apis.core.quantity import format_resource
from pysched.framework.loadmetrics import LoadMetrics
from pysched.framework.registry import RegistryError
from pysched.profile import default_registry
from pysched.tools.exitcodes import EXIT_ALL_PLACED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_UNSCHEDULABLE
from pysched.tools.offline import OfflineScheduler, Outcome
from pysched.tools.snapshot import Snapshot, SnapshotError, load_pods, load_snapshot

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
# Node labels the report groups utilisation by (instance type; capacity type as CapacityType reads it).
REPORT_LABELS = ("node.kubernetes.io/instance-type", "karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType")
BASE_RESOURCES = ("cpu", "memory", "pods")
MAX_RETRY_PASSES = 10


@dataclass
class Placement:
    pod: str
    node: str | None
    code: str
    message: str
    scheduler_name: str
    nominated_node: str = ""
    victims: tuple[str, ...] = ()
    source: str = "pods"        # "pods": the --pods file; "snapshot": pending in the snapshot
    owner: str = ""             # the workload it was expanded from ("Deployment web"), if any

    def as_dict(self) -> dict:
        out: dict = {"pod": self.pod, "node": self.node, "result": self.code, "message": self.message,
               "schedulerName": self.scheduler_name, "source": self.source}
        if self.owner:
            out["owner"] = self.owner
        if self.nominated_node:
            out["preemption"] = {"nominatedNode": self.nominated_node, "victims": list(self.victims)}
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

    @property
    def all_placed(self) -> bool:
        return all(p.node for p in self.placements)

    def as_dict(self) -> dict:
        return {"profile": self.profile, "seed": self.seed, "placements": [p.as_dict() for p in self.placements],
                "utilisation": {"before": self.before, "after": self.after}, "explain": self.explain,
                "notes": self.notes, "podGroups": self.groups, "addedNodes": self.added_nodes}


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
                 load: LoadMetrics | None = None):
        """``load``: node load for load-aware plugins (``loadmetrics.StaticLoad`` from a metrics file)."""
        self.cfg = cfg or configmod.default_config()
        self.seed = seed
        self.sim = OfflineScheduler(self.cfg, registry=default_registry(plugin_modules), seed=seed, load=load)

    def load(self, snapshot: Snapshot, added_nodes: Sequence[dict] = ()) -> tuple[list[str], list[dict]]:
        """The snapshot into the cache and object store; returns the notes and the snapshot's
        pending pods this simulation schedules (no node, a profile's schedulerName, not gated),
        oldest first."""
        notes = []
        for obj in snapshot.objects:
            self.sim.add_object(obj)
        for node_obj in [*snapshot.nodes, *added_nodes]:
            self.sim.add_node(node_obj)
        pending: list[tuple[str, int, dict]] = []
        foreign = gated = missing = 0
        for i, pod in enumerate(snapshot.pods):
            pod = dict(pod, metadata=dict(pod["metadata"]))
            pod["metadata"].setdefault("uid", f"snapshot-{i:06d}")
            pod["metadata"]["namespace"] = pod["metadata"].get("namespace") or "default"
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                continue
            spec = pod.get("spec") or {}
            node = spec.get("nodeName")
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

    def run(self, snapshot: Snapshot, pods: list[dict], explain: AbstractSet[str] = frozenset(), *,
            objects: Sequence[dict] = (), added_nodes: Sequence[dict] = (), added_from: dict[str, str] | None = None,
            owners: dict[str, str] | None = None) -> SimulationResult:
        """Schedule the snapshot's pending pods and ``pods``. ``objects``: what the pod file's
        workloads brought (ReplicaSets, StatefulSets, PVCs); ``added_nodes``: the --add-nodes
        what-ifs, ``added_from`` maps each to its template; ``owners``: ns/name -> workload."""
        for obj in objects:
            self.sim.add_object(obj)
        notes, pending = self.load(snapshot, list(added_nodes))
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
        sources = ["snapshot"] * len(pending) + ["pods"] * len(created)
        created = pending + created
        groups = _groups_of(created)
        first_of = {key: idx[0] for key, idx in groups.items()}
        order = sorted(range(len(created)), key=lambda i: (-(created[i]["spec"].get("priority") or 0),
                                                           first_of.get(_group_key(created[i]), i), i))
        for key in groups:
            for i in groups[key]:
                self.sim.observe_pending(created[i])
        index_of_uid = {created[i]["metadata"]["uid"]: i for i in range(len(created))}
        outcomes: dict[int, Outcome] = {}
        own_failure: dict[int, str] = {}
        traces: dict[str, dict] = {}
        todo = order
        for _ in range(MAX_RETRY_PASSES):
            failed = []
            for i in todo:
                pod = created[i]
                name = pod["spec"]["schedulerName"]
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if name not in self.sim.frameworks:
                    outcomes[i] = Outcome(key, None, f"no profile for schedulerName {name!r} "
                                          f"(profiles: {', '.join(sorted(self.sim.frameworks))})", "NotHandled")
                    continue
                out = self.sim.schedule(pod, explain=key in explain)
                outcomes[i] = out
                if out.trace is not None:
                    traces[key] = dict(out.trace, pod=key, result=out.code, message=out.message)
                if not out.node and out.code == "Unschedulable":
                    failed.append(i)
                    own_failure.setdefault(i, out.message)
                released = self._apply_settled(outcomes, index_of_uid)
                failed.extend(j for j in released if j not in failed)
            if not failed or len(failed) == len(todo):
                break
            todo = sorted(failed, key=order.index)
        self.sim.expire_waiting()
        self._apply_settled(outcomes, index_of_uid)
        verdicts = self._group_verdicts(groups, created, outcomes, own_failure)
        owners = owners or {}
        placements = [Placement(outcomes[i].pod, outcomes[i].node, outcomes[i].code, outcomes[i].message,
                                created[i]["spec"]["schedulerName"], outcomes[i].nominated_node,
                                outcomes[i].victims, sources[i], owners.get(outcomes[i].pod, ""))
                      for i in range(len(created))]
        missing = sorted(set(explain) - set(traces))
        for key in missing:
            notes.append(f"--explain {key}: no such pod in --pods or pending in the snapshot")
        return SimulationResult(profile, self.seed, placements, before, utilisation(self.sim, resources),
                                traces, notes, verdicts, _added_summary(added_nodes, added_from or {}, placements))

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
                outcomes[i] = Outcome(prev.pod, node, "", "Scheduled", prev.trace)
            else:
                outcomes[i] = Outcome(prev.pod, None, message, "Unschedulable", prev.trace)
                released.append(i)
        self.sim.settled.clear()
        return released

    def _group_verdicts(self, groups: dict[str, list[int]], created: list[dict], outcomes: dict[int, Outcome],
                        own_failure: dict[int, str]) -> list[dict]:
        """Each gang's verdict: placed (all-or-nothing, at least minMember members) or not, and
        the member that blocks it with its own reason; its unplaced members' messages say so."""
        out = []
        for key, idx in groups.items():
            pg = self.sim.objects.get("podgroups", key)
            min_member = int(((pg or {}).get("spec") or {}).get("minMember") or 0)
            placed = [i for i in idx if i in outcomes and outcomes[i].node]
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


def _group_key(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(GROUP_LABEL)
    return f"{meta.get('namespace') or 'default'}/{name}" if name else ""


def _groups_of(pods: list[dict]) -> dict[str, list[int]]:
    """Gang members by ``namespace/podgroup`` (Coscheduling's pod label), in file order."""
    out: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        key = _group_key(pod)
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


def format_text(res: SimulationResult) -> str:
    out = [f"profile {res.profile}, seed {res.seed}: {sum(1 for p in res.placements if p.node)}/"
           f"{len(res.placements)} pods placed", ""]
    rows = [["POD", "NODE / REASON"]]
    for p in res.placements:
        text = p.node if p.node else f"{p.code}: {p.message}"
        if p.nominated_node:
            text += f" (would preempt {', '.join(p.victims)} on {p.nominated_node})"
        if p.source == "snapshot":
            text += " (pending in the snapshot)"
        rows.append([p.pod, text])
    out += [_table(rows), ""]
    if res.groups:
        rows = [["POD GROUP", "PLACED", "VERDICT"]]
        for g in res.groups:
            text = g["verdict"]
            if g.get("reason"):
                text += f": blocked by {g.get('blockedBy') or 'missing members'}: {g['reason']}"
            rows.append([g["group"], f"{g['placed']}/{g['members']} (minMember {g['minMember']})", text])
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
    for _key, trace in res.explain.items():
        out += ["", format_explain(trace)]
    if res.notes:
        out += [""] + [f"note: {n}" for n in res.notes]
    return "\n".join(out)


def format_explain(trace: dict) -> str:
    """One pod's cycle: PreFilter statuses, each node's filter verdicts, the score breakdown."""
    head = (trace.get("selectedNode")
            or f"{trace.get('result', 'Unschedulable')}: {trace.get('message') or trace.get('error')}")
    out = [f"Explain {trace.get('pod', '')}: {head}"]
    for pf in trace.get("preFilter") or ():
        out.append(f"  PreFilter {pf['plugin']}: {pf['status']}")
    verdicts: dict[str, list[str]] = {}
    plugins = []
    for f in trace.get("filter") or ():
        plugins.append(f["plugin"])
        for node, v in f["nodes"].items():
            verdicts.setdefault(node, []).append(f"{f['plugin']}: {v}")
    if verdicts:
        out.append("  Filter (each plugin's verdict; a node stops at its first failure):")
        rows = [["    NODE", "VERDICTS"]]
        for node in sorted(verdicts):
            failed = [v for v in verdicts[node] if not v.endswith(": passed")]
            rows.append([f"    {node}", "; ".join(failed) if failed else f"passed {len(verdicts[node])} filter(s)"])
        out.append(_table(rows))
    scores = trace.get("score") or {}
    totals = trace.get("totalScores") or {}
    if scores:
        out.append("  Score (raw / normalised / weighted):")
        names = list(scores)
        rows = [["    NODE", "TOTAL", *names]]
        for node in sorted(totals, key=lambda n: (-totals[n], n)):
            rows.append([f"    {node}", str(totals[node])] + [
                "{raw}/{normalized}/{weighted}".format(**scores[p][node]) if node in scores[p] else "-" for p in names])
        out.append(_table(rows))
    for plugin, notes in (trace.get("scoreNotes") or {}).items():
        out.append(f"  {plugin} read:")
        for node in sorted(notes):
            out.append(f"    {node}: {notes[node]}")
    return "\n".join(out)


# -- entry point ------------------------------------------------------------------------------

def prepare(args) -> tuple[Simulation, Snapshot, list[dict], dict]:
    """Read and check everything the run needs (every error here is bad input)."""
    from pysched.tools.whatif import build_nodes
    from pysched.tools.workloads import Expander
    cfg = configmod.load_file(args.config) if args.config else configmod.default_config()
    snapshot = load_snapshot(args.cluster)
    added, template_of = build_nodes(list(getattr(args, "add_nodes", None) or ()), snapshot.nodes)
    expander = Expander([*snapshot.nodes, *added], snapshot.objects)

    def expand(obj: dict, where: str) -> list[tuple[dict, str]]:
        first = len(expander.out.pods)
        expander.expand(obj, where)
        return [(p, f"{where}, from {obj['kind']} {obj['metadata']['name']} spec.template")
                for p in expander.out.pods[first:]]
    pods = load_pods(args.pods, expand)
    load = None
    if getattr(args, "metrics_file", None):
        from pysched.loadmetrics.static import StaticLoad, load_metrics_file
        try:
            # One clock for the whole run: samples do not age while it simulates.
            load = StaticLoad(load_metrics_file(args.metrics_file), now=time.time())
        except configmod.ConfigError as exc:
            raise SnapshotError(f"--metrics-file: {exc}") from None
    simulation = Simulation(cfg, seed=args.seed, plugin_modules=args.plugin_module, load=load)
    return simulation, snapshot, pods, {"objects": expander.out.objects, "added_nodes": added,
                                        "added_from": template_of, "owners": expander.out.origin,
                                        "notes": expander.out.notes}


def main(args) -> int:
    """``pysched simulate``; returns the exit status (``EXIT_*``)."""
    try:
        try:
            simulation, snapshot, pods, extra = prepare(args)
            notes = extra.pop("notes")
            result = simulation.run(snapshot, pods, explain=set(args.explain), **extra)
            result.notes.extend(notes)
        except (configmod.ConfigError, RegistryError) as exc:
            print(f"pysched simulate: invalid configuration: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except (SnapshotError, apidefaults.AdmissionError) as exc:
            print(f"pysched simulate: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.output == "json":
            print(json.dumps(result.as_dict(), indent=2))
        else:
            print(format_text(result))
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
