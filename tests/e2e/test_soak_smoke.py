"""``make soak`` in miniature: the driver builds its living cluster, runs two pysched replicas and
kube-scheduler under every kind of churn (rescaled Deployments, Jobs, a node failure, a leader
handover), samples them, checks every placement at the end and writes its report. The hour-long
result is ``bench/SOAK.md``; this only shows the machinery works end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.soakcheck import read_samples

from .conftest import REPO

pytestmark = pytest.mark.e2e


def test_a_short_soak_churns_samples_and_checks_every_placement(tmp_path):
    out, md = tmp_path / "run", tmp_path / "SOAK.md"
    r = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--minutes", "1.5", "--nodes", "40", "--deployments", "4",
         "--min-replicas", "4", "--max-replicas", "16", "--scale-every", "3", "--job-every", "15",
         "--node-failure-every", "30", "--node-down", "20", "--handover-every", "45", "--sample-every", "10",
         "--warmup", "0", "--out", str(out), "--results-md", str(md), "--charts-dir", str(tmp_path / "charts")],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert (out / "summary.json").exists(), r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    ends = summary["end_checks"]
    assert ends["all_placed"]["ok"], ends["all_placed"]
    assert ends["placed_exactly_once"]["ok"] and ends["placed_exactly_once"]["bindings"] > 20, ends
    assert ends["within_allocatable"]["ok"] and ends["within_allocatable"]["nodes_checked"] == 40, ends
    assert not (out / "samples.jsonl").exists()                 # gzipped when the run is over
    samples = read_samples(out / "samples.jsonl.gz")
    assert len(samples) >= 8
    happened = " ".join(h for s in samples for h in s["happened"])
    assert "failed" in happened and "back" in happened and "started as the standby" in happened, happened
    leaders = [(p["slot"], p["incarnation"]) for s in samples for p in s["pysched"] if p.get("leader")]
    assert len(set(leaders)) == 2, leaders                      # the handover: another replica led after it
    assert all(p["rss_mib"] > 0 and p["fds"] > 0 for s in samples for p in s["pysched"])
    assert any(p.get("tasks") for s in samples for p in s["pysched"] if p.get("leader"))
    assert sum(s["latency"]["pysched"]["count"] for s in samples) > 20
    assert sum((s["latency"].get("kube") or {}).get("count", 0) for s in samples) > 0
    assert r.returncode in (0, 1) and ("PASS" in r.stdout or "FAIL" in r.stdout)
    page = md.read_text()
    assert "make soak SOAK_MINUTES=1.5" in page
    assert "| Every pod bound exactly once (audit log, per pod UID) | pass |" in page
    assert {p.name for p in (tmp_path / "charts").iterdir()} >= {"soak-rss.png", "soak-latency.png", "soak-pods.png"}
