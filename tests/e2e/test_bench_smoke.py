"""A tiny run of ``make bench`` so the benchmark cannot rot: every mode, repeats in ABBA order,
both schedulers, the Events wait, the /metrics scrapes, verification, charts and the report.

No speed is asserted here (speed is what ``make bench`` reports); the test checks that in every
run each scheduler bound every measured pod, that the placements pass the independent checker,
that each posted a Scheduled Event per bound pod before the end sample, that both schedulers'
/metrics were scraped, and that the checker is live end to end: the null binder, which ignores
every constraint, is caught violating the GPU/spot workload's taints and resources.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run import load_results

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.run", "--workloads", "smoke", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=1500)


def test_bench_smoke_run(control_plane, tmp_path):
    out = tmp_path / "bench"
    md = tmp_path / "report" / "RESULTS.md"
    proc = bench("--modes", "drain,steady,burst", "--repeats", "2", "--schedulers", "pysched,kube-scheduler",
                 "--out", str(out), "--results-md", str(md))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = load_results(out / "results.json.gz")
    runs = doc["runs"]
    # ABBA: per mode, repeat 0 in the given order, repeat 1 reversed.
    order = [(r["mode"], r["repeat"], r["scheduler"]) for r in runs]
    assert order == [(m, r, s) for m in ("drain", "steady", "burst")
                     for r, ss in ((0, ("pysched", "kube-scheduler")), (1, ("kube-scheduler", "pysched")))
                     for s in ss]
    cpus = sorted(os.sched_getaffinity(0))
    for r in runs:
        what = (r["mode"], r["repeat"], r["scheduler"])
        assert r["error"] == "", (what, r["error"])
        assert r["summary"]["bound"] == r["summary"]["pods"] == 16, what
        assert len(r["bind_offsets"]) == 16, what
        assert r["violations"] == [], what
        assert r["events"]["posted"] == 16 and not r["events"]["short"], (what, r["events"])
        assert r["metrics"]["attempts"] and r["metrics"]["attempts"] > 0, (what, r["metrics"])
        assert r["metrics"]["api_requests_per_pod"] > 0, (what, r["metrics"])
        assert r["cpu_s"] is not None and r["peak_rss_mib"] > 0, what
        assert "other_cpu_per_s" in r["load"] and r["load"]["loadavg_start"], what
        if len(cpus) >= 2:
            assert r["affinity"]["scheduler"] == str(cpus[-1]), (what, r["affinity"])
        if r["mode"] == "drain":
            assert r["drain"]["time_to_first_bind_s"] > 0, what
            assert r["summary"]["latency_p50_ms"] is None, what
        else:
            assert r["summary"]["latency_p50_ms"] > 0, what
        if r["mode"] == "steady":
            assert r["target_rate"] == 100.0 and r["create_rate"] > 0, what
    assert doc["pinning"]["mode"] == "auto" and doc["repeats"] == 2
    text = md.read_text()
    for title in ("## Method", "## Drain", "## Drain: extension-point means", "## Steady", "## Burst",
                  "## Other load on the machine"):
        assert title in text, title
    assert "| Smoke/GPUSpotMix | 5000/5000 | pysched |" in text and "| 2/2 |" in text
    assert "Pinning" in text and "ABBA" in text
    chart = md.parent / "charts" / "Smoke_GPUSpotMix.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_catches_the_null_binders_violations(control_plane, tmp_path):
    out = tmp_path / "bench"
    proc = bench("--modes", "burst", "--repeats", "1", "--schedulers", "null-binder", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]   # its violations are expected
    (r,) = load_results(out / "results.json.gz")["runs"]
    assert r["scheduler"] == "null-binder" and r["error"] == ""
    assert r["summary"]["bound"] == 16
    assert r["violations"], "the checker should catch the null binder's blind placements"
    assert r["events"] == {} and r["metrics"] == {}


def test_bench_compares_pysched_profiles_on_the_same_machine_load(control_plane, tmp_path):
    out = tmp_path / "bench"
    proc = bench("--modes", "drain", "--repeats", "2", "--schedulers", "pysched",
                 "--pysched-profile", "default,loadaware", "--load-metrics", "all", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = load_results(out / "results.json.gz")["runs"]
    assert [(r["repeat"], r["profile"]) for r in runs] == [(0, "default"), (0, "loadaware"),
                                                           (1, "loadaware"), (1, "default")]
    for r in runs:
        assert r["error"] == "" and r["violations"] == [] and r["summary"]["bound"] == 16, r["profile"]
        assert r["load_metrics"] is True, r["profile"]      # Prometheus beside every run, not only loadaware's
        assert r["load_queries"] is True, r["profile"]      # ... answering the loadaware queries in every run
        # the driver waits until every query answers for every node: no cycle measured on a fallback
        assert r["metrics"]["load_fallbacks"] == {}, (r["profile"], r["metrics"]["load_fallbacks"])
    assert "## pysched's profiles against its default profile" in proc.stdout
    row = next(line for line in proc.stdout.splitlines()
               if line.startswith("| Smoke/GPUSpotMix | drain | 5000/5000 | loadaware |"))
    assert row.rstrip().endswith("| yes, and its queries |")


def test_bench_on_a_living_cluster(tmp_path):
    """--cluster living: the smoke workload's pods come from Deployments on KWOK nodes, go Running,
    and the report counts the pod status updates that brought and the informer events pysched handled."""
    out, md = tmp_path / "bench", tmp_path / "report" / "RESULTS.md"
    proc = bench("--modes", "drain", "--repeats", "1", "--schedulers", "pysched,kube-scheduler",
                 "--cluster", "bare,living", "--out", str(out), "--results-md", str(md))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = load_results(out / "results.json.gz")["runs"]
    assert sorted((r["workload"], r["scheduler"]) for r in runs) == [
        ("Smoke/GPUSpotMix", "kube-scheduler"), ("Smoke/GPUSpotMix", "pysched"),
        ("Smoke/GPUSpotMix+living", "kube-scheduler"), ("Smoke/GPUSpotMix+living", "pysched")]
    for r in runs:
        what = (r["workload"], r["scheduler"])
        assert r["error"] == "" and r["violations"] == [] and r["summary"]["bound"] == 16, (what, r["error"])
        if r["cluster"] == "living":
            assert r["living"]["status_updates_per_pod"] >= 1, (what, r["living"])   # KWOK ran them
            assert r["living"]["ready_tail_s"] >= 0 and r["living"]["ready_tail_cpu_s"] >= 0, (what, r["living"])
            if r["scheduler"] == "pysched":
                assert r["living"]["informer_events_per_pod"] > 1, (what, r["living"])
        else:
            assert r["cluster"] == "bare" and r["living"] == {}
    assert "## Living cluster" in md.read_text() and "| Smoke/GPUSpotMix+living | pysched |" in md.read_text()


def test_bench_startup_times_first_binds_in_abba_order(tmp_path):
    """``python -m bench.startup`` (time to first bind, repeated): each start is timed to a bind
    of its own backlog, the backlog is refilled, and pysched's start-up milestones are read."""
    out = tmp_path / "startup.json"
    proc = subprocess.run([sys.executable, "-m", "bench.startup", "--nodes", "20", "--init", "10", "--backlog", "30",
                           "--repeats", "2", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [r["repeat"] for r in doc["runs"]["pysched"]] == [0, 1]
    assert [r["repeat"] for r in doc["runs"]["kube-scheduler"]] == [0, 1]
    for row in doc["runs"]["pysched"]:
        assert 0 < row["ttfb_s"] and row["peak_rss_mib"] > 0
        assert row["nodes"] <= row["caches"] and row["pods"] <= row["caches"] and row["cpu"] > 0
    assert set(doc["summary"]) == {"pysched", "kube-scheduler"}
