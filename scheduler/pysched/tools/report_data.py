"""The data behind the simulate HTML report: a ``SimulationResult`` reduced to what the page shows.

Everything the page draws is computed here, once, and embedded as one JSON document: the summary
(pods placed and unschedulable, unschedulable pods per FailedScheduling reason, preemptions, pod
groups), utilisation aggregated by zone, instance type and capacity type (requested/allocatable
before and after the simulated pods), histograms of per-node utilisation, the node and pod tables as
compact rows, and per explained pod a filter/score matrix (the top nodes by score, the failed nodes
grouped by plugin and reason). The page's script only sorts, filters, paginates and draws.

For reproducing a shared result it carries the run's ``inputs`` (each input file's name and
sha256, the flags, the command line) and ``config`` (the effective KubeSchedulerConfiguration), and
per pod how the cycle sampled: how many candidate nodes ``percentageOfNodesToScore`` left
unevaluated, and how many nodes tied at the top score (the seeded tie-break picked one).

Node attributes come from the utilisation rows simulate passes: ``zone`` always; the instance type
and capacity type from the row's ``labels`` (``node.kubernetes.io/instance-type``; capacity type
read as the CapacityType plugin reads it: ``karpenter.sh/capacity-type`` then
``eks.amazonaws.com/capacityType``) or from ``instanceType`` / ``capacityType`` keys when a row has
them. A row without them is grouped under ``(unlabelled)``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

# The node labels the CapacityType and InstanceType policy plugins read by default (pysched_policy;
# the engine does not import it - plugins/tests checks that the two agree).
CAPACITY_TYPE_LABELS = [
    ("karpenter.sh/capacity-type", {"spot": "spot", "on-demand": "on-demand", "reserved": "on-demand"}),
    ("eks.amazonaws.com/capacityType", {"SPOT": "spot", "ON_DEMAND": "on-demand"}),
]
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

UNLABELLED = "(unlabelled)"
NO_ZONE = "(no zone)"
TOP_NODES = 20            # explain matrix: the best-scored nodes shown
SAMPLE_NODES = 8          # explain matrix: node names listed per failure reason
HISTOGRAM_BUCKETS = 10    # per-node utilisation histogram: 0-10 %, ..., 90-100 %
NODE_BARS_UP_TO = 50      # per-node bar charts (the small-cluster view) up to this many nodes
ZONE_BARS_UP_TO = 30      # per-zone bar charts up to this many zones
FIT_ERROR = re.compile(r"^0/(\d+) nodes are available: (.*?)\.(?: (.*))?$", re.S)
REASON_PART = re.compile(r"^(\d+) (.+)$", re.S)


def instance_type_of(row: dict) -> str:
    if row.get("instanceType"):
        return str(row["instanceType"])
    return str((row.get("labels") or {}).get(INSTANCE_TYPE_LABEL) or UNLABELLED)


def capacity_type_of(row: dict) -> str:
    if row.get("capacityType"):
        return str(row["capacityType"])
    labels = row.get("labels") or {}
    for key, values in CAPACITY_TYPE_LABELS:
        if key in labels:
            return values.get(labels[key], str(labels[key]))
    return UNLABELLED


def failure_reasons(code: str, message: str) -> list[str]:
    """The reasons an unplaced pod gives, as kube-scheduler's FailedScheduling message words them:
    each ``<count> <reason>`` of a fit error (or its PreFilter message), else the message itself."""
    if code == "NotHandled":
        return ["no profile for the pod's schedulerName"]
    if message.startswith("PodGroup "):
        return ["pod group not placed (all or nothing)"]
    m = FIT_ERROR.match(message.strip())
    if not m:
        return [message or code]
    parts = re.split(r", (?=\d+ )", m.group(2))
    reasons = []
    for part in parts:
        p = REASON_PART.match(part)
        reasons.append(p.group(2) if p else part)
    return reasons


def _pct(used: int, alloc: int) -> float | None:
    """Per cent to one decimal, rounded down (as the text output's whole per cents are)."""
    return (used * 1000 // alloc) / 10 if alloc else None


def _groups(before: list[dict], after: list[dict], key_of, resources: list[str]) -> list[dict]:
    out: dict[str, dict] = {}
    for b, a in zip(before, after):
        key = key_of(b)
        g = out.setdefault(key, {"key": key, "nodes": 0, "allocatable": Counter(), "before": Counter(),
                                 "after": Counter()})
        g["nodes"] += 1
        for r in resources:
            g["allocatable"][r] += a["allocatable"].get(r, 0)
            g["before"][r] += b["requested"].get(r, 0)
            g["after"][r] += a["requested"].get(r, 0)
    rows = []
    for key in sorted(out, key=lambda k: (k in (UNLABELLED, NO_ZONE), k)):
        g = out[key]
        rows.append({"key": key, "nodes": g["nodes"],
                     "before": {r: _pct(g["before"][r], g["allocatable"][r]) for r in resources},
                     "after": {r: _pct(g["after"][r], g["allocatable"][r]) for r in resources}})
    return rows


def _histograms(before: list[dict], after: list[dict], resources: list[str]) -> dict[str, dict]:
    """Per resource: how many nodes (offering it) sit in each 10 % utilisation bucket."""
    out = {}
    for r in resources:
        counts = {"before": [0] * HISTOGRAM_BUCKETS, "after": [0] * HISTOGRAM_BUCKETS}
        for when, rows in (("before", before), ("after", after)):
            for row in rows:
                alloc = row["allocatable"].get(r, 0)
                if alloc:
                    frac = row["requested"].get(r, 0) / alloc
                    counts[when][min(HISTOGRAM_BUCKETS - 1, max(0, int(frac * HISTOGRAM_BUCKETS)))] += 1
        out[r] = counts
    return out


def _bars(before: list[dict], after: list[dict], limit: int) -> dict | None:
    """Rows for the before/after bar charts, or None past ``limit`` rows (the tables take over)."""
    if not before or len(before) > limit:
        return None
    return {"before": before, "after": after}


def _explain_matrix(trace: dict) -> dict:
    """One pod's cycle as a matrix: plugins x the top nodes by score, and the nodes each filter
    plugin rejected grouped by reason (a node stops at its first failing plugin)."""
    plugins = list(trace.get("score") or {})
    totals = trace.get("totalScores") or {}
    top = sorted(totals, key=lambda n: (-totals[n], n))[:TOP_NODES]
    selected = trace.get("selectedNode")
    if selected in totals and selected not in top:   # a tie broken by the seed: show the winner too
        top = [selected, *top[:-1]]
    scores = trace.get("score") or {}
    rows = [{"node": n, "total": totals[n],
             "cells": [[scores[p][n]["raw"], scores[p][n]["normalized"], scores[p][n]["weighted"]]
                       if n in scores[p] else None for p in plugins]} for n in top]
    failures: dict[tuple[str, str], list[str]] = {}
    evaluated: set[str] = set()
    for f in trace.get("filter") or ():
        for node, verdict in f["nodes"].items():
            evaluated.add(node)
            if verdict != "passed":
                failures.setdefault((f["plugin"], verdict), []).append(node)
    failed = [{"plugin": p, "reason": r, "count": len(ns), "nodes": sorted(ns)[:SAMPLE_NODES]}
              for (p, r), ns in sorted(failures.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return {"pod": trace.get("pod", ""), "selected": trace.get("selectedNode") or None,
            "result": trace.get("result", ""), "message": trace.get("message") or trace.get("error") or "",
            "preFilter": trace.get("preFilter") or [], "plugins": plugins, "top": rows,
            "scored": len(totals), "evaluated": len(evaluated), "feasible": len(trace.get("feasibleNodes") or ()),
            "failed": failed, "failedNodes": sum(f["count"] for f in failed),
            "preemption": trace.get("preemption"), "sampling": trace.get("sampling") or {}}


def sampling_summary(placements: list) -> dict:
    """Across pods: how many scored only part of the candidate nodes (percentageOfNodesToScore) and
    the most left out, and how many had several nodes tied at the top score."""
    sampled = [s for s in (getattr(p, "sampling", None) for p in placements) if s]
    cut = [s for s in sampled if s.get("notEvaluated")]
    tied = [s for s in sampled if (s.get("tiedAtTop") or 0) > 1]
    return {"podsWithNodesNotEvaluated": len(cut),
            "maxNodesNotEvaluated": max((s["notEvaluated"] for s in cut), default=0),
            "podsWithTiesAtTop": len(tied), "maxTiedAtTop": max((s["tiedAtTop"] for s in tied), default=0)}


def build(result: Any) -> dict:
    """The report's data for a ``SimulationResult``."""
    resources: list[str] = list(result.before.get("resources") or [])
    before, after = result.before.get("nodes") or [], result.after.get("nodes") or []
    share = [r for r in resources if r != "pods"]
    nodes = []
    for b, a in zip(before, after):
        pods_b, pods_a = b["requested"].get("pods", 0), a["requested"].get("pods", 0)
        nodes.append([b["node"], b.get("zone") or NO_ZONE, instance_type_of(b), capacity_type_of(b),
                      *[_pct(a["requested"].get(r, 0), a["allocatable"].get(r, 0)) for r in share],
                      pods_a, pods_a - pods_b,
                      *[_pct(b["requested"].get(r, 0), b["allocatable"].get(r, 0)) for r in share]])
    traces = result.explain or {}
    pods: list[list] = []
    reasons: Counter[str] = Counter()
    unplaced: Counter[str] = Counter()
    for p in result.placements:
        ns, _, name = p.pod.partition("/")
        trace = traces.get(p.pod) or {}
        score = (trace.get("totalScores") or {}).get(p.node) if p.node else None
        sampling = getattr(p, "sampling", None) or {}
        pods.append([name, ns, p.node or "", "" if p.node else f"{p.code}: {p.message}", score,
                     p.nominated_node or "", sampling.get("notEvaluated"), sampling.get("tiedAtTop")])
        if not p.node:
            unplaced[p.code] += 1
            for r in dict.fromkeys(failure_reasons(p.code, p.message)):
                reasons[r] += 1
    placed = sum(1 for p in result.placements if p.node)
    preemptions = [{"pod": p.pod, "node": p.nominated_node, "victims": list(p.victims)}
                   for p in result.placements if p.nominated_node]
    return {
        "profile": result.profile, "seed": result.seed, "resources": resources, "shareResources": share,
        "summary": {"pods": len(result.placements), "placed": placed, "unplaced": len(result.placements) - placed,
                    "unplacedByResult": dict(sorted(unplaced.items())),
                    "reasons": [{"reason": r, "pods": n}
                                for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))],
                    "nodes": len(nodes), "preemptions": preemptions, "groups": list(result.groups or []),
                    "sampling": sampling_summary(result.placements)},
        "byZone": _groups(before, after, lambda r: r.get("zone") or NO_ZONE, resources),
        "byInstanceType": _groups(before, after, instance_type_of, resources),
        "byCapacityType": _groups(before, after, capacity_type_of, resources),
        "histograms": _histograms(before, after, share),
        "zoneBars": _bars(result.before.get("zones") or [], result.after.get("zones") or [], ZONE_BARS_UP_TO),
        "nodeBars": _bars(before, after, NODE_BARS_UP_TO),
        "nodeColumns": ["node", "zone", "instance type", "capacity type", *[f"{r} %" for r in share], "pods",
                        "new pods", *[f"{r} % before" for r in share]],
        "nodes": nodes,
        "podColumns": ["pod", "namespace", "node", "reason", "score", "nominated node", "nodes not evaluated",
                       "tied at top"],
        "pods": pods,
        "explain": [_explain_matrix(dict(t, pod=t.get("pod") or key)) for key, t in traces.items()],
        "notes": list(result.notes or []),
        "inputs": dict(getattr(result, "inputs", None) or {}),
        "config": dict(getattr(result, "config", None) or {}),
    }
