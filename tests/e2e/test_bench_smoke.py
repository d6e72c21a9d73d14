"""A tiny run of ``make bench`` so the benchmark cannot rot: every scheduler, verification, chart.

No speed is asserted here (speed is what ``make bench`` reports); the test checks that each
scheduler bound every measured pod, that pysched's and kube-scheduler's placements pass the
independent checker, and that the checker is live end to end: the null binder, which ignores
every constraint, is caught violating the GPU/spot workload's taints and resources.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_bench_smoke_run(control_plane, tmp_path):
    out = tmp_path / "bench"
    md = tmp_path / "report" / "RESULTS.md"
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--workloads", "smoke", "--qps", "5000/5000",
                           "--out", str(out), "--results-md", str(md)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {r["scheduler"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(results) == {"pysched", "kube-scheduler", "null-binder"}
    for name, r in results.items():
        assert r["error"] == "", (name, r["error"])
        assert r["summary"]["bound"] == r["summary"]["pods"] == 16, name
        assert len(r["bind_offsets"]) == 16
        assert r["peak_rss_mib"] > 0 and r["summary"]["avg"] > 0
    assert results["pysched"]["violations"] == []
    assert results["kube-scheduler"]["violations"] == []
    assert results["null-binder"]["violations"], "the checker should catch the null binder's blind placements"
    text = md.read_text()
    assert "| Smoke/GPUSpotMix | 5000/5000 | pysched |" in text and "kube-scheduler" in text
    chart = md.parent / "charts" / "Smoke_GPUSpotMix.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
