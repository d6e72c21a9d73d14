"""Runs of a ``Scenario``: ``tools.simulate.Simulation`` over a frozen copy, explained, compared, replayed.

* ``run(state)`` schedules the scenario's pending pods exactly as ``pysched simulate`` schedules
  ``--pods`` over a snapshot of its nodes, bound pods and objects (``ScenarioState.snapshot`` /
  ``to_schedule``), seed ``SEED``: the same scenario always gives the same placements. The
  ``Run`` keeps the frozen ``ScenarioState`` it ran, so explaining or exporting it still works
  after the scenario changed, and its JSON (built once, in the worker thread).
* ``explain(run, pod)`` runs that frozen copy again with ``explain={pod}``: the trace is
  ``simulate --output json --explain ns/name``'s ``explain[pod]`` entry, unchanged, plus a row per
  node (``explain_view``).
* ``compare(a, b)``: the pods that moved, became pending or got placed, and cluster-wide
  utilisation of each.
* ``Replay``: a sequence of steps (``create`` objects, ``failNode``, ``delete`` pods), each applied
  to the scenario before a run.
* ``RunLog``: the runs kept, at most ``limit``, and fewer when their scenarios are large (a byte
  budget, the newest two always kept so they can be compared).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from pysched.apis import config as configmod
from pysched.apis.core import defaults as apidefaults
from pysched.apis.core.quantity import QuantityError, resource_value
from pysched.apis.core.resources import pod_requests
from pysched.runtime.registry import RegistryError
from pysched.tools.offline import natural_key
from pysched.tools.simulate import Placement, Simulation, SimulationResult
from pysched.ui.scenario import (
    FieldError,
    Scenario,
    ScenarioError,
    ScenarioState,
    parse_yaml,
    pod_key,
)
from pysched.util import yamlfile

SEED = 0
MAX_RUNS = 20
KEEP_AT_LEAST = 2      # runs RunLog keeps whatever their size: a change can always be compared


@dataclass
class Run:
    """A run, kept small once its JSON is built: the frozen scenario it ran, each pod's node, the
    cluster-wide utilisation after it, and the JSON of ``GET /api/runs/{id}``."""
    id: int
    label: str
    state: ScenarioState
    nodes: dict[str, str | None]     # pod ns/name -> node (None: not placed), in placement order
    utilisation: dict                # cluster_utilisation of the run's "after"
    duration_ms: int = 0             # the whole run: simulation, quotas, JSON
    simulation_ms: int = 0           # Simulation(...) and Simulation.run alone
    payload: bytes = b""             # the run as JSON
    created: float = field(default_factory=time.time)

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def size(self) -> int:
        """About the bytes it holds: its scenario's objects as JSON (shared with other runs and the
        scenario while unchanged, counted anyway) and its JSON."""
        return self.state.json_bytes + len(self.payload)

    @property
    def placed(self) -> int:
        return sum(1 for n in self.nodes.values() if n)

    @property
    def pending(self) -> int:
        return len(self.nodes) - self.placed

    def summary(self) -> dict:
        return {"id": self.id, "label": self.label, "placed": self.placed, "pending": self.pending,
                "durationMs": self.duration_ms, "version": self.version}


def placement_dict(p: Placement) -> dict:
    return {"pod": p.pod, "node": p.node, "code": p.code, "message": p.message,
            "nominatedNode": p.nominated_node or None, "victims": list(p.victims), "sampling": p.sampling or {}}


def simulate(state: ScenarioState, explain: Iterable[str] = ()) -> SimulationResult:
    """``Simulation(config, seed=SEED).run(snapshot, pending pods, explain=...)`` of a frozen scenario."""
    try:
        sim = Simulation(state.config(), seed=SEED, feature_gates=state.feature_gates)
        return sim.run(state.snapshot(), state.to_schedule(), explain=list(explain))
    except (configmod.ConfigError, RegistryError) as exc:
        raise ScenarioError([FieldError("config", str(exc))]) from None
    except (apidefaults.AdmissionError, yamlfile.YAMLFileError) as exc:
        raise ScenarioError([FieldError("", str(exc))]) from None


def run(scenario: Scenario | ScenarioState, *, run_id: int = 0, label: str = "") -> Run:
    """Run the scenario (frozen now if a ``Scenario`` is given). Raises ``ScenarioError`` when its
    pods cannot be created (a PriorityClass they name is gone)."""
    state = scenario.freeze() if isinstance(scenario, Scenario) else scenario
    t0 = time.perf_counter()
    res = simulate(state)
    out = Run(run_id, label, state, {p.pod: p.node for p in res.placements}, cluster_utilisation(res.after),
              simulation_ms=round((time.perf_counter() - t0) * 1000))
    body = {"id": run_id, "label": label, "version": state.version, "durationMs": 0,
            "simulationMs": out.simulation_ms, "placed": out.placed, "pending": out.pending,
            "placements": [placement_dict(p) for p in res.placements],
            "utilisation": {"before": res.before, "after": res.after}, "groups": res.groups,
            "quotas": quotas(state, res), "config": state.config_yaml, "notes": res.notes}
    out.duration_ms = body["durationMs"] = round((time.perf_counter() - t0) * 1000)
    out.payload = orjson.dumps(body)
    return out


def _amounts(raw: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if isinstance(raw, dict):
        for r, q in raw.items():
            try:
                out[str(r)] = resource_value(str(r), q)
            except (QuantityError, ValueError):
                continue
    return out


def quotas(state: ScenarioState, result: SimulationResult) -> list[dict]:
    """Per ElasticQuota and resource it names: the requests of its namespace's pods on a node after
    the run (bound ones and those the run placed), its ``min`` and ``max`` (None when not named)."""
    eqs = [o for o in state.objects if o.get("kind") == "ElasticQuota"]
    if not eqs:
        return []
    used: dict[str, dict[str, int]] = {}

    def count(pod: dict) -> None:
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        try:
            reqs = pod_requests(pod.get("spec") or {})
        except (QuantityError, ValueError):
            return
        acc = used.setdefault(ns, {})
        for r, v in reqs.items():
            acc[r] = acc.get(r, 0) + v
    for pod in state.bound:
        count(pod)
    placed = {p.pod for p in result.placements if p.node}
    for pod in state.to_schedule():
        if pod_key(pod) in placed:
            count(pod)
    out = []
    for q in eqs:
        meta = q.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        spec = q.get("spec") or {}
        lo, hi = _amounts(spec.get("min")), _amounts(spec.get("max"))
        for r in sorted(set(lo) | set(hi)):
            out.append({"quota": f"{ns}/{meta.get('name')}", "resource": r, "used": used.get(ns, {}).get(r, 0),
                        "min": lo.get(r), "max": hi.get(r)})
    return out


# -- explain ----------------------------------------------------------------------------------

def explain(r: Run, pod: str) -> dict:
    """The run's frozen scenario again with ``explain={pod}``; KeyError when the run did not
    schedule ``pod``."""
    if pod not in r.nodes:
        raise KeyError(pod)
    res = simulate(r.state, explain={pod})
    placement = next(p for p in res.placements if p.pod == pod)
    trace = res.explain.get(pod) or {"pod": pod, "result": placement.code, "message": placement.message}
    view = explain_view(trace, placement)
    group = next(iter(res.explain_groups.values()), None)
    if group is not None:
        # A gang member: its group's last attempt, placement by placement (simulate --explain's
        # ``explainPodGroups`` entry, unchanged).
        view["groupAttempt"] = group
    return view


def explain_view(trace: dict, placement: Placement) -> dict:
    """``trace`` plus ``nodes``: per node its filter verdicts, scores and total, best total first
    (then by name, naturally; nodes without a total last), ``chosen`` and ``victims``."""
    rows: dict[str, dict] = {}

    def row(node: str) -> dict:
        r = rows.get(node)
        if r is None:
            r = rows[node] = {"node": node, "filters": {}, "scores": {}, "total": None}
        return r
    for f in trace.get("filter") or ():
        plugin = f["plugin"]
        for node, verdict in (f.get("nodes") or {}).items():
            row(node)["filters"][plugin] = verdict
    for plugin, per_node in (trace.get("score") or {}).items():
        for node, s in per_node.items():
            row(node)["scores"][plugin] = s
    for node, total in (trace.get("totalScores") or {}).items():
        row(node)["total"] = total
    ordered = sorted(rows.values(), key=lambda r: (r["total"] is None, -(r["total"] or 0), natural_key(r["node"])))
    victims = list((trace.get("preemption") or {}).get("victims") or placement.victims)
    return {**trace, "nodes": ordered, "chosen": placement.node, "victims": victims}


# -- compare ----------------------------------------------------------------------------------

def cluster_utilisation(util: dict) -> dict:
    """Requested and allocatable per resource over every node of a simulate utilisation table."""
    out: dict[str, dict[str, int]] = {r: {"requested": 0, "allocatable": 0} for r in util.get("resources") or ()}
    for n in util.get("nodes") or ():
        for r, v in n["requested"].items():
            out.setdefault(r, {"requested": 0, "allocatable": 0})["requested"] += v
        for r, v in n["allocatable"].items():
            out.setdefault(r, {"requested": 0, "allocatable": 0})["allocatable"] += v
    return out


def compare(a: Run, b: Run) -> dict:
    pa, pb = a.nodes, b.nodes
    pods = sorted(pb, key=natural_key)
    return {"moved": [{"pod": k, "from": pa[k], "to": pb[k]} for k in pods
                      if pa.get(k) and pb[k] and pa[k] != pb[k]],
            "newlyPending": [k for k in pods if not pb[k] and pa.get(k)],
            "newlyPlaced": [{"pod": k, "node": pb[k]} for k in pods if pb[k] and not pa.get(k)],
            "pending": {"a": a.pending, "b": b.pending},
            "utilisation": {"a": a.utilisation, "b": b.utilisation}}


# -- the runs kept ----------------------------------------------------------------------------

class RunLog:
    """The last ``limit`` runs, oldest dropped first, and while more than ``KEEP_AT_LEAST`` are
    kept, while their ``size`` adds up to more than ``max_bytes``; ids count on from 1."""

    def __init__(self, limit: int = MAX_RUNS, max_bytes: int | None = None):
        self.limit = limit
        self.max_bytes = max_bytes
        self.runs: OrderedDict[int, Run] = OrderedDict()
        self._next = 1

    def new_id(self) -> int:
        i = self._next
        self._next += 1
        return i

    def add(self, r: Run) -> list[int]:
        """Keep ``r``; returns the ids dropped."""
        self.runs[r.id] = r
        dropped = []
        total = sum(k.size for k in self.runs.values())
        while len(self.runs) > self.limit or (self.max_bytes is not None and total > self.max_bytes
                                               and len(self.runs) > KEEP_AT_LEAST):
            rid, old = self.runs.popitem(last=False)
            total -= old.size
            dropped.append(rid)
        return dropped

    def get(self, run_id: int) -> Run | None:
        return self.runs.get(run_id)

    def summaries(self) -> list[dict]:
        return [r.summary() for r in self.runs.values()]


# -- replay -----------------------------------------------------------------------------------

@dataclass
class Step:
    at: str
    seconds: float
    action: str                     # create | failNode | delete
    value: Any                      # objects | node name | pod keys
    index: int = 0

    @property
    def description(self) -> str:
        if self.action == "create":
            names = [f"{o.get('kind')} {_name_of(o)}" for o in self.value]
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            return f"create {', '.join(names[:3])}{more}"
        if self.action == "failNode":
            return f"fail node {self.value}"
        return f"delete pod{'s' if len(self.value) > 1 else ''} {', '.join(self.value)}"


def _name_of(obj: dict) -> str:
    raw = obj.get("metadata")
    meta = raw if isinstance(raw, dict) else {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


ACTIONS = ("create", "failNode", "delete")


class Replay:
    """A loaded sequence: ``steps`` in order, ``current`` of them applied."""

    def __init__(self, steps: list[Step]):
        self.steps = steps
        self.current = 0

    @classmethod
    def parse(cls, text: Any) -> Replay:
        """``{"steps": [{"at": "0s", "create": [objects]}, {"at": "30s", "failNode": "n3"},
        {"at": "60s", "delete": "ns/pod"}]}`` (YAML or JSON text); ``ScenarioError`` naming the field."""
        if not isinstance(text, str):
            raise ScenarioError([FieldError("yaml", "expected a string")])
        try:
            doc = parse_yaml(text)
        except yamlfile.YAMLFileError as exc:
            raise ScenarioError([FieldError("", str(exc))]) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list) or not doc["steps"]:
            raise ScenarioError([FieldError("steps", "required: a non-empty list of steps")])
        steps: list[Step] = []
        errors: list[FieldError] = []
        last = 0.0
        for i, raw in enumerate(doc["steps"]):
            where = f"steps[{i}]"
            try:
                step = _parse_step(raw, where, i)
            except ScenarioError as exc:
                errors += exc.errors
                continue
            if step.seconds < last:
                errors.append(FieldError(f"{where}.at", f"{step.at} is before the previous step's time"))
            last = max(last, step.seconds)
            steps.append(step)
        unknown = sorted(set(doc) - {"steps"})
        if unknown:
            errors.append(FieldError(unknown[0], "unknown field (expected only steps)"))
        if errors:
            raise ScenarioError(errors)
        return cls(steps)

    def status(self) -> dict:
        return {"total": len(self.steps), "current": self.current,
                "steps": [{"at": s.at, "description": s.description} for s in self.steps]}

    def apply_next(self, scenario: Scenario) -> Step:
        """Apply the next step to ``scenario`` (all or nothing) and move on; ``ScenarioError`` when
        the step does not apply (the scenario and ``current`` are then unchanged)."""
        if self.current >= len(self.steps):
            raise IndexError("every step has been applied")
        step = self.steps[self.current]
        where = f"steps[{step.index}]"
        if step.action == "create":
            try:
                scenario.apply_objects(step.value, "apply")
            except ScenarioError as exc:
                raise ScenarioError([FieldError(f"{where}.create[{e.document}]" + (f".{e.field}" if e.field else ""),
                                                e.message) for e in exc.errors]) from None
        elif step.action == "failNode":
            if not scenario.delete_node(step.value):
                raise ScenarioError([FieldError(f"{where}.failNode", f"no node named {step.value!r} in the scenario")])
        else:
            docs = []
            for key in step.value:
                ns, _, name = key.partition("/")
                docs.append({"kind": "Pod", "metadata": {"namespace": ns, "name": name}})
            try:
                scenario.apply_objects(docs, "delete")
            except ScenarioError as exc:
                raise ScenarioError([FieldError(f"{where}.delete", e.message) for e in exc.errors]) from None
        self.current += 1
        return step


def _parse_step(raw: Any, where: str, index: int) -> Step:
    if not isinstance(raw, dict):
        raise ScenarioError([FieldError(where, "expected an object")])
    at = raw.get("at", "0s")
    if not isinstance(at, str):
        raise ScenarioError([FieldError(f"{where}.at", f"expected a duration such as \"30s\", got {at!r}")])
    try:
        seconds = configmod.parse_duration(at, f"{where}.at")
    except configmod.ConfigError as exc:
        raise ScenarioError([FieldError(f"{where}.at", str(exc).split(": ", 1)[-1])]) from None
    if seconds < 0:
        raise ScenarioError([FieldError(f"{where}.at", "must not be negative")])
    actions = [a for a in ACTIONS if a in raw]
    unknown = sorted(set(raw) - {"at", *ACTIONS})
    if unknown:
        raise ScenarioError([FieldError(f"{where}.{unknown[0]}", f"unknown field (expected at and one of "
                                                                  f"{', '.join(ACTIONS)})")])
    if len(actions) != 1:
        raise ScenarioError([FieldError(where, f"expected exactly one of {', '.join(ACTIONS)}")])
    action = actions[0]
    value = raw[action]
    if action == "create":
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list) or not value:
            raise ScenarioError([FieldError(f"{where}.create", "expected a non-empty list of objects")])
        for j, obj in enumerate(value):
            if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
                raise ScenarioError([FieldError(f"{where}.create[{j}].kind", "required: an object with a kind")])
    elif action == "failNode":
        if not isinstance(value, str) or not value:
            raise ScenarioError([FieldError(f"{where}.failNode", "expected a node name")])
    else:
        value = [value] if isinstance(value, str) else value
        if (not isinstance(value, list) or not value
                or not all(isinstance(k, str) and k.count("/") == 1 and all(k.split("/")) for k in value)):
            raise ScenarioError([FieldError(f"{where}.delete", "expected a pod namespace/name (or a list of them)")])
    return Step(at, seconds, action, value, index)
