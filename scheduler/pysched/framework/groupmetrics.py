"""Metrics of pod groups (gang scheduling) for the plugins that hold gangs at Permit.

Plugins import only the framework; this module is their way to the process's Prometheus metrics
(``pysched_podgroups_waiting``, ``pysched_podgroups_admitted_total``,
``pysched_podgroups_timed_out_total``), labelled by profile.
"""

from __future__ import annotations

from pysched.metrics import METRICS


def set_waiting(profile: str, groups: int) -> None:
    """How many groups have members waiting at Permit now."""
    METRICS.podgroups_waiting.labels(profile).set(groups)


def admitted(profile: str) -> None:
    """A group reached its quorum: its waiting members were allowed together."""
    METRICS.podgroups_admitted.labels(profile).inc()


def timed_out(profile: str) -> None:
    """A group's Permit wait expired before quorum: its waiting members were rejected together."""
    METRICS.podgroups_timed_out.labels(profile).inc()
