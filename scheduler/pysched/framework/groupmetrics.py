"""Deprecated (plugin API 1.3): record through ``Handle.metrics`` (``podgroups_waiting``,
``podgroup_admitted``, ``podgroup_timed_out``). Each call warns; the module goes away in 2.0."""

from __future__ import annotations

import warnings

from pysched.runtime.plugin_metrics import PrometheusPluginMetrics


def _metrics(profile: str, replacement: str) -> PrometheusPluginMetrics:
    warnings.warn(f"pysched.framework.groupmetrics is deprecated: use handle.metrics.{replacement}()",
                  DeprecationWarning, stacklevel=3)
    return PrometheusPluginMetrics(profile)


def set_waiting(profile: str, groups: int) -> None:
    _metrics(profile, "podgroups_waiting").podgroups_waiting(groups)


def admitted(profile: str) -> None:
    _metrics(profile, "podgroup_admitted").podgroup_admitted()


def timed_out(profile: str) -> None:
    _metrics(profile, "podgroup_timed_out").podgroup_timed_out()
