"""Deprecated (plugin API 1.3): record through ``Handle.metrics`` (``export_quotas``,
``quota_victim``). Each call warns; the module goes away in 2.0."""

from __future__ import annotations

import warnings

from pysched.framework.handle import QuotaSource
from pysched.runtime import plugin_metrics
from pysched.runtime.plugin_metrics import UNLIMITED

__all__ = ["UNLIMITED", "register", "victim"]


def _warn(replacement: str) -> None:
    warnings.warn(f"pysched.framework.quotametrics is deprecated: use handle.metrics.{replacement}()",
                  DeprecationWarning, stacklevel=3)


def register(plugin: QuotaSource) -> None:
    _warn("export_quotas")
    plugin_metrics.register(plugin)


def victim(quota: str, reason: str) -> None:
    _warn("quota_victim")
    plugin_metrics.PrometheusPluginMetrics("").quota_victim(quota, reason)
