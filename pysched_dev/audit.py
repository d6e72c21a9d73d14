"""Judging a run by the API server's own record: an audit policy and readers of the audit log it
writes (which writes succeeded, each pod's successful bindings). Used by the end-to-end tests and
by the soak (``bench.soak``): a pod bound twice, or a binding that took effect behind an error
answer, shows here whatever the scheduler believes."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any


def audit_policy(*resources: tuple[str, list[str]], verbs: tuple[str, ...] = ("create", "update", "patch")) -> str:
    """Metadata-level audit of ``verbs`` on the given (API group, [resources]); nothing else."""
    listed = "".join(f"  - group: {json.dumps(group)}\n    resources: {json.dumps(names)}\n"
                     for group, names in resources)
    return ('apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: ["RequestReceived"]\nrules:\n'
            f"- level: Metadata\n  verbs: {json.dumps(list(verbs))}\n  resources:\n{listed}- level: None\n")


#: Every pod binding (the scheduler's write), and nothing else.
BINDINGS_POLICY = audit_policy(("", ["pods/binding"]), verbs=("create",))


def apiserver_flags(policy_file: Path, log_file: Path) -> list[str]:
    """kube-apiserver's flags to audit by ``policy_file`` into ``log_file`` (JSON lines, written before
    each answer: blocking mode, so a test reads every request it made)."""
    return [f"--audit-policy-file={policy_file}", f"--audit-log-path={log_file}", "--audit-log-format=json",
            "--audit-log-mode=blocking"]


def ok(event: dict[str, Any]) -> bool:
    """The request completed with a 2xx answer."""
    return event.get("stage") == "ResponseComplete" and 200 <= (event.get("responseStatus") or {}).get("code", 0) < 300


def successful_binds(events: list[dict[str, Any]], *, by_namespace: bool = False,
                     by_uid: bool = False) -> collections.Counter[Any]:
    """Per pod name (``(namespace, name)`` with ``by_namespace``; with ``by_uid`` the pod's UID
    too: ``(namespace, name, uid)``), the bindings answered 2xx.

    By name alone, two pods that had the same name one after the other count as one pod bound
    twice: a ReplicaSet's generated names (five characters of 27) repeat within an hour of churn.
    The audit event's ``objectRef.uid`` is the Binding's ``metadata.uid``, which kube-scheduler and
    pysched set to the pod's UID (empty for a binder that sends none)."""
    out: collections.Counter[Any] = collections.Counter()
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("subresource") == "binding" and ok(e):
            if by_uid:
                out[(ref.get("namespace"), ref["name"], ref.get("uid") or "")] += 1
            else:
                out[(ref.get("namespace"), ref["name"]) if by_namespace else ref["name"]] += 1
    return out
