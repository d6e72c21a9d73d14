"""dashboards/pysched.json: a well-formed Grafana dashboard whose queries read only metrics pysched exports.

Every metric name in a panel's PromQL or a template variable's query is checked against the
families in the Prometheus registry once ``pysched.metrics`` is imported (what ``/metrics``
serves), so renaming or dropping a metric fails here instead of leaving an empty panel.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

import pysched.metrics  # noqa: F401  (registers the families)
import pysched.runtime.plugin_metrics  # noqa: F401  (registers the ElasticQuota gauges' collector)

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "pysched.json"
# Series Prometheus itself adds to every scrape target, not exported by the target.
SCRAPE_SERIES = {"up"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                "unless", "inf", "nan"}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def exported_sample_names() -> set[str]:
    """Sample names of every registered family, as the text exposition names them."""
    names: set[str] = set()
    for fam in REGISTRY.collect():
        if fam.type == "counter":
            names.add(fam.name + "_total")
        elif fam.type in ("histogram", "gaugehistogram"):
            names.update(fam.name + s for s in ("_bucket", "_sum", "_count"))
        elif fam.type == "summary":
            names.update((fam.name, fam.name + "_sum", fam.name + "_count"))
        elif fam.type == "info":
            names.add(fam.name + "_info")
        else:
            names.add(fam.name)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (function names, keywords and labels left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)                            # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)                           # range and subquery durations
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for m in re.finditer(rf"(?<![\w:$.]){NAME}", text):
        word = m.group(0)
        after = text[m.end():].lstrip()
        if after.startswith("(") or word.lower() in PROMQL_WORDS:
            continue                                                  # a function or aggregation, a keyword
        names.add(word)
    return names


def panels(dash: dict) -> list[dict]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))                               # panels inside collapsed rows
    return out


def expressions(dash: dict) -> list[str]:
    return [t["expr"] for p in panels(dash) for t in p.get("targets", [])]


def variable_query(var: dict) -> str:
    q = var.get("query")
    return q["query"] if isinstance(q, dict) else q


def test_metric_name_parser():
    assert metric_names('histogram_quantile(0.99, sum by (verb, le) (rate(a_bucket{verb="POST", x=~"$y"}'
                        '[$__rate_interval])))') == {"a_bucket"}
    assert metric_names("sum(rate(a_total[5m])) / sum(rate(b_count[5m])) > bool 0 or on (instance) c") == \
        {"a_total", "b_count", "c"}
    assert metric_names('topk(10, max without (pod) (d{code="<error>"}))') == {"d"}


def test_is_a_grafana_dashboard(dashboard):
    assert isinstance(dashboard["uid"], str) and 0 < len(dashboard["uid"]) <= 40
    assert dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("job", "instance"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    graphs = [p for p in panels(dashboard) if p["type"] != "row"]
    assert len(graphs) >= 20
    for p in graphs:
        where = f"panel {p['id']} {p.get('title')!r}"
        assert p["title"] and p["type"] in ("timeseries", "stat"), where
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and 0 <= g["x"] and g["x"] + g["w"] <= 24, where
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        assert p["targets"], where
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), where
        for t in p["targets"]:
            # every series selector honours the job and instance variables
            for sel in re.findall(r"\{([^}]*)\}", t["expr"]):
                assert 'job=~"$job"' in sel and 'instance=~"$instance"' in sel, (where, t["expr"])


def test_every_queried_metric_is_exported(dashboard):
    exported = exported_sample_names()
    referenced = set()
    for expr in expressions(dashboard):
        referenced |= metric_names(expr)
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            m = re.match(rf"\s*label_values\(\s*({NAME})", variable_query(var))
            assert m, var
            referenced.add(m.group(1))
    assert not referenced - exported - SCRAPE_SERIES, "queried but not exported by pysched"
    # the panels this dashboard promises: kube-scheduler's and ours
    assert {"scheduler_schedule_attempts_total", "scheduler_pod_scheduling_sli_duration_seconds_bucket",
            "scheduler_pod_scheduling_attempts_bucket", "scheduler_pending_pods", "rest_client_requests_total",
            "rest_client_request_duration_seconds_bucket", "rest_client_rate_limiter_duration_seconds_bucket",
            "process_resident_memory_bytes", "process_cpu_seconds_total", "pysched_events_posted_total",
            "pysched_events_aggregated_total", "pysched_events_dropped_total", "pysched_events_backlog",
            "scheduler_preemption_attempts_total", "scheduler_preemption_victims_bucket", "pysched_podgroups_waiting",
            "pysched_podgroups_admitted_total", "pysched_podgroups_timed_out_total", "pysched_fenced_writes_total",
            "leader_election_master_status", "pysched_quota_used", "pysched_quota_min", "pysched_quota_max",
            "pysched_quota_preemption_victims_total"} <= referenced


def test_team_quota_row(dashboard):
    """The ElasticQuota row: used against min and max per quota and resource, and the preemption
    victims by quota and reason (CapacityScheduling's metrics, framework.quotametrics)."""
    top = dashboard["panels"]
    (row,) = [p for p in top if p["type"] == "row" and p["title"] == "Team quotas (ElasticQuota)"]
    start = top.index(row)
    end = next((i for i, p in enumerate(top) if i > start and p["type"] == "row"), len(top))
    exprs = [t["expr"] for p in top[start + 1:end] for t in p["targets"]]
    legends = [t["legendFormat"] for p in top[start + 1:end] for t in p["targets"]]
    for metric in ("pysched_quota_used", "pysched_quota_min", "pysched_quota_max"):
        assert any(metric in e and "by (quota, resource)" in e for e in exprs), metric
    assert any("pysched_quota_preemption_victims_total" in e and "by (quota, reason)" in e for e in exprs)
    assert all("{{quota}}" in legend for legend in legends)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "pysched_quota_used" in variable_query(variables["resource"])
    rows = [p for p in top if p["type"] == "row"]      # rows and their panels stacked without overlap
    ys = [p["gridPos"]["y"] for p in top]
    assert ys == sorted(ys) and len(rows) == len({r["gridPos"]["y"] for r in rows})


def test_a_renamed_metric_would_be_caught(dashboard):
    exprs = expressions(dashboard)
    renamed = [e.replace("rest_client_requests_total", "rest_client_request_total") for e in exprs]
    referenced = set().union(*(metric_names(e) for e in renamed))
    assert "rest_client_request_total" in referenced - exported_sample_names()


def test_no_created_series_in_the_scheduler_or_extender_server():
    """A fresh interpreter that imports a /metrics server (`pysched extender`'s; the scheduler's
    secure server likewise imports pysched.metrics) exports counters and histograms without
    ``*_created``, which prometheus-client adds by default."""
    code = (
        "import pysched.extender.server, pysched.server.secure\n"
        "from prometheus_client import REGISTRY, generate_latest\n"
        "from pysched.metrics import METRICS\n"
        "METRICS.extender_served.labels('filter', '200').inc()\n"
        "METRICS.extender_served_duration.labels('filter').observe(0.01)\n"
        "METRICS.schedule_attempts.labels('scheduled', 'pysched').inc()\n"
        "print(generate_latest(REGISTRY).decode())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 'pysched_extender_server_requests_total{code="200",verb="filter"} 1.0' in out
    assert "pysched_extender_server_request_duration_seconds_count" in out
    assert "_created" not in out
