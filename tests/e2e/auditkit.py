"""Judging a test by the API server's own record: an audit policy, a control plane that writes the
audit log, and readers of it (which writes succeeded, each pod's successful bindings)."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator

from pysched_dev.devcluster import ControlPlane


def audit_policy(*resources: tuple[str, list[str]], verbs: tuple[str, ...] = ("create", "update", "patch")) -> str:
    """Metadata-level audit of ``verbs`` on the given (API group, [resources]); nothing else."""
    listed = "".join(f"  - group: {json.dumps(group)}\n    resources: {json.dumps(names)}\n"
                     for group, names in resources)
    return ('apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: ["RequestReceived"]\nrules:\n'
            f"- level: Metadata\n  verbs: {json.dumps(list(verbs))}\n  resources:\n{listed}- level: None\n")


def audited_plane(policy: str, **kw) -> Iterator[ControlPlane]:
    """For a fixture: ``yield from audited_plane(policy)`` starts and stops the control plane."""
    cp = ControlPlane(audit_policy=policy, **kw)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def ok(event: dict) -> bool:
    """The request completed with a 2xx answer."""
    return event.get("stage") == "ResponseComplete" and 200 <= (event.get("responseStatus") or {}).get("code", 0) < 300


def successful_binds(cp: ControlPlane) -> collections.Counter:
    """Per pod name, the bindings the API server answered 2xx."""
    return collections.Counter(e["objectRef"]["name"] for e in cp.audit_events()
                               if (e.get("objectRef") or {}).get("subresource") == "binding" and ok(e))
