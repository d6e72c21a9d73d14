"""Plugin API 1.3 moved the registry to the engine (``pysched.runtime.registry``) and plugin metrics
behind ``Handle.metrics``; the old names keep working for the rest of 1.x, each with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest

from pysched.apis.config import parse
from pysched.backend.cache.cache import SchedulerCache
from pysched.framework.handle import NoMetrics
from pysched.metrics import METRICS
from pysched.profile import build_frameworks, default_registry
from pysched.runtime import registry
from pysched.runtime.plugin_metrics import PrometheusPluginMetrics


def test_the_old_registry_module_warns_and_is_the_engine_s():
    sys.modules.pop("pysched.framework.registry", None)
    with pytest.warns(DeprecationWarning, match="pysched.runtime.registry"):
        old = importlib.import_module("pysched.framework.registry")
    assert old.build_registry is registry.build_registry and old.register is registry.register


def test_the_old_group_metrics_warn_and_still_count():
    import pysched.framework as fw
    fw.__dict__.pop("groupmetrics", None)          # loaded by an earlier test: the warning comes on first use
    with pytest.warns(DeprecationWarning, match="handle.metrics"):
        groupmetrics = fw.groupmetrics
    before = METRICS.podgroups_admitted.labels("old-api").value
    with pytest.warns(DeprecationWarning, match="podgroup_admitted"):
        groupmetrics.admitted("old-api")
    assert METRICS.podgroups_admitted.labels("old-api").value == before + 1


def test_each_profile_records_under_its_own_name():
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]})
    frameworks = build_frameworks(cfg, default_registry(), cache=SchedulerCache(), client=None, recorder=None)
    metrics = {name: fw.handle.metrics for name, fw in frameworks.items()}
    assert all(isinstance(m, PrometheusPluginMetrics) for m in metrics.values())
    assert {m.profile for m in metrics.values()} == {"a", "b"}
    before = METRICS.podgroups_timed_out.labels("b").value
    metrics["b"].podgroup_timed_out()
    assert METRICS.podgroups_timed_out.labels("b").value == before + 1


def test_a_bare_handle_records_nothing():
    m = NoMetrics()
    m.podgroups_waiting(3)
    m.quota_victim("ns/q", "reclaim")
