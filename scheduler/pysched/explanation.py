"""Explanations of a scheduling cycle for people: the opt-in pod annotation and its summary.

A pod annotated ``pysched.io/explain: "true"`` gets a per-plugin trace of each of its cycles
(served in full at ``/debug/explain?pod=ns/name``) and, written back onto the pod, a compact
summary in ``pysched.io/explanation``: the outcome, how many nodes each filter plugin rejected and
why, and the best nodes with their weighted score per plugin; ``pysched.io/explanation-summary``
says the same in one line short enough for ``kubectl describe`` to print it whole, ending with
the command that prints the full trace (``pysched explain NS/NAME``, ``tools.explain_cmd``).
The PodScheduled condition and the FailedScheduling Event keep kube-scheduler's exact messages.
The JSON summary is bounded (top nodes only, reasons truncated) so it stays far below the API's
256 KiB annotation limit. It is written
through the ``pods/status`` subresource, which may change metadata, so no extra RBAC is needed,
only when it changed since the last write, and only once the cycle has an outcome (the bind
succeeded, or the cycle failed and ``error`` says why), so a ``selectedNode`` without an ``error``
is the node the pod is bound to.

A pod that failed before it asked has no trace yet: adding the annotation re-evaluates it at once
(see ``eventhandlers``), and until that cycle ends ``/debug/explain`` answers with
``reevaluating(...)`` instead of "no explanation".
"""

import json

REQUEST_ANNOTATION = "pysched.io/explain"
RESULT_ANNOTATION = "pysched.io/explanation"
#: The same outcome as one line for people (``kubectl describe pod``), beside the JSON.
SUMMARY_ANNOTATION = "pysched.io/explanation-summary"
TOP_NODES = 5
MAX_REASON = 200
#: ``kubectl describe`` prints an annotation whole up to this many bytes: k8s.io/kubectl's
#: ``printAnnotationsMultiline`` (maxAnnotationLen = 140) puts a value longer than 140 - len(key)
#: - 2 on a line of its own and cuts that line at 140 - 2 bytes, adding "...".
DESCRIBE_LIMIT = 138


def requested(pod) -> bool:
    return (pod.annotations or {}).get(REQUEST_ANNOTATION) == "true"


def reevaluating(pod_key: str, queue: str, gating_plugin: str = "") -> dict:
    """What ``/debug/explain`` serves for a pending pod that asked for an explanation and has no
    traced cycle yet. ``queue``: where the pod waits (active, backoff, unschedulable, inflight)."""
    if gating_plugin:
        message = (f"the pod is held by PreEnqueue plugin {gating_plugin}; it is explained when its "
                   f"first scheduling cycle runs")
    else:
        message = "the pod is being re-evaluated with the trace on; ask again in a moment"
    out = {"pod": pod_key, "reevaluating": True, "queue": queue, "message": message}
    if gating_plugin:
        out["gatingPlugin"] = gating_plugin
    return out


def summary(trace: dict) -> dict:
    """The compact form of ``CycleTrace.to_dict()``."""
    rejected: dict[str, dict[str, int]] = {}
    evaluated = set()
    for f in trace.get("filter") or ():
        for node, verdict in f["nodes"].items():
            evaluated.add(node)
            if verdict != "passed":
                reasons = rejected.setdefault(f["plugin"], {})
                key = verdict[:MAX_REASON]
                reasons[key] = reasons.get(key, 0) + 1
    totals = trace.get("totalScores") or {}
    scores = trace.get("score") or {}
    top = []
    selected = trace.get("selectedNode")
    # Best first; among equal totals the node the tie-break picked leads.
    for node in sorted(totals, key=lambda n: (-totals[n], n != selected, n))[:TOP_NODES]:
        top.append({"node": node, "total": totals[node],
                    "plugins": {p: per[node]["weighted"] for p, per in scores.items() if node in per}})
    out = {"selectedNode": trace.get("selectedNode") or None,
           "feasibleNodes": len(trace.get("feasibleNodes") or ()),
           "evaluatedNodes": len(evaluated),
           "filterRejections": rejected,
           "topNodes": top}
    if trace.get("error"):
        out["error"] = trace["error"][:1000]
    if trace.get("permit"):
        out["permit"] = trace["permit"]   # e.g. a gang member waiting for its group's quorum
    skipped = [p["plugin"] for p in trace.get("preFilter") or () if p.get("status") == "Skip"]
    if skipped:
        out["skippedPlugins"] = skipped
    return out


def _rejected(s: dict, reasons: bool = True) -> str:
    return "; ".join(f"{sum(rs.values())} by {plugin}" + (f" ({', '.join(sorted(rs))})" if reasons else "")
                     for plugin, rs in sorted(s.get("filterRejections", {}).items()))


def outcome(s: dict) -> str:
    """``summary``'s outcome in one sentence, e.g. ``bound to n1: best of 4 feasible of 6 evaluated
    nodes (total 836, next n2 681); filtered out: 2 by TaintToleration (node(s) had untolerated
    taint(s))``; for a pod that fit nowhere, the filter plugins' verdicts (the condition message
    and the FailedScheduling Event say the rest)."""
    rejected = _rejected(s)
    counts = f"{s.get('feasibleNodes', 0)} feasible of {s.get('evaluatedNodes', 0)} evaluated nodes"
    if s.get("error"):
        if rejected and not s.get("feasibleNodes"):
            return f"not scheduled: 0/{s.get('evaluatedNodes', 0)} nodes fit; filtered out: {rejected}"
        return f"not scheduled: {s['error'][:300]} ({counts})"
    if s.get("permit"):
        return f"waiting at Permit on {s.get('selectedNode')}: {json.dumps(s['permit'])[:300]}"
    top = s.get("topNodes") or []
    best = f" (total {top[0]['total']}" + (f", next {top[1]['node']} {top[1]['total']})" if len(top) > 1 else ")") \
        if top else ""
    rejected = f"; filtered out: {rejected}" if rejected else ""
    return f"bound to {s.get('selectedNode')}: best of {counts}{best}{rejected}"


def short_outcome(s: dict) -> str:
    """``outcome`` in fewer words for ``human_line``: a bound pod's score and runner-up, how many
    nodes fit and the filter plugins that rejected the others, without their reasons (``bound to
    n1 (score 836, next n2 681); 4/6 nodes fit; filtered out: 2 by TaintToleration``)."""
    if s.get("error") or s.get("permit"):
        return outcome(s)
    top = s.get("topNodes") or []
    score = f" (score {top[0]['total']}" + (f", next {top[1]['node']} {top[1]['total']})" if len(top) > 1 else ")") \
        if top else ""
    rejected = _rejected(s, reasons=False)
    rejected = f"; filtered out: {rejected}" if rejected else ""
    return (f"bound to {s.get('selectedNode')}{score}; {s.get('feasibleNodes', 0)}/{s.get('evaluatedNodes', 0)} "
            f"nodes fit{rejected}")


def pointer(pod_key: str) -> str:
    """Where the whole explanation is: the command that prints it."""
    return f"; details: pysched explain {pod_key}"


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes (kubectl counts bytes), ``...`` marking a cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    if limit < 3:
        return ""
    return data[:limit - 3].decode(errors="ignore") + "..."


def human_line(s: dict, pod_key: str) -> str:
    """The one line for ``kubectl describe pod``: ``short_outcome`` cut to fit whole under describe's
    truncation (``DESCRIBE_LIMIT``) and the command that prints the full trace, e.g. ``not
    scheduled: 0/3 nodes fit; filtered out: 3 by NodeResourcesFit (Insufficient cpu); details:
    pysched explain default/late``. Only a namespace and name longer than the limit together
    overflow it (the command is never cut)."""
    tail = pointer(pod_key)
    room = DESCRIBE_LIMIT - len(tail.encode())
    return _cut(short_outcome(s), room) + tail if room > 0 else tail[2:]


def annotations(trace: dict, pod_key: str) -> dict[str, str]:
    """The annotations written onto a pod that asked: the JSON summary and its one-line reading."""
    data = summary(trace)
    return {RESULT_ANNOTATION: json.dumps(data, sort_keys=True, separators=(",", ":")),
            SUMMARY_ANNOTATION: human_line(data, pod_key)}
