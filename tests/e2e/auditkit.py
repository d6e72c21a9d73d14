"""Judging a test by the API server's own record: a control plane that writes the audit log, and the
readers of ``pysched_dev.audit`` over it."""

from __future__ import annotations

import collections
from collections.abc import Iterator

from pysched_dev import audit
from pysched_dev.audit import audit_policy, ok
from pysched_dev.devcluster import ControlPlane

__all__ = ["audit_policy", "audited_plane", "ok", "successful_binds"]


def audited_plane(policy: str, **kw) -> Iterator[ControlPlane]:
    """For a fixture: ``yield from audited_plane(policy)`` starts and stops the control plane."""
    cp = ControlPlane(audit_policy=policy, **kw)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def successful_binds(cp: ControlPlane) -> collections.Counter:
    """Per pod name, the bindings the API server answered 2xx."""
    return audit.successful_binds(cp.audit_events())
