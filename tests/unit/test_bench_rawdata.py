"""Raw benchmark data on disk (``bench.rawdata``): written gzipped as ``gzip -9n`` would, read plain
or gzipped, and ``bench/runs`` keeping every raw file gzipped and readable by its reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bench import rawdata, soakcheck
from bench.run import load_results

RUNS = Path(__file__).resolve().parents[2] / "bench" / "runs"


def test_gzipped_output_is_deterministic_and_never_half_written(tmp_path):
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    rawdata.write_gz(a, '{"x": 1}')
    rawdata.write_gz(b, b'{"x": 1}')
    assert a.read_bytes() == b.read_bytes()                  # no name, no time stamp
    assert a.read_bytes()[4:8] == b"\0\0\0\0"                # mtime 0, as gzip -n
    assert gzip.decompress(a.read_bytes()) == b'{"x": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json.gz", "b.json.gz"]   # no .tmp left


def test_raw_files_are_read_plain_gzipped_or_from_the_gzipped_file_beside(tmp_path):
    meta = {"runs": [{"workload": "W", "repeat": 0}], "repeats": 1}
    rawdata.write_text(tmp_path / "plain.json", json.dumps(meta))
    rawdata.write_text(tmp_path / "packed.json.gz", json.dumps(meta))
    assert (tmp_path / "plain.json").read_text() == json.dumps(meta)
    assert json.loads(gzip.decompress((tmp_path / "packed.json.gz").read_bytes())) == meta
    assert load_results(tmp_path / "plain.json") == load_results(tmp_path / "packed.json.gz") == meta
    assert load_results(tmp_path / "packed.json") == meta    # results.json asked, results.json.gz there


def test_the_soaks_samples_are_read_after_they_are_gzipped(tmp_path):
    samples = tmp_path / "samples.jsonl"
    rows = [{"n": 1, "minute": 1.0}, {"n": 2, "minute": 2.0}]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert soakcheck.read_samples(samples) == rows
    gz = rawdata.compress(samples)                           # as bench.soak does when the run is over
    assert gz == tmp_path / "samples.jsonl.gz" and not samples.exists()
    assert soakcheck.read_samples(gz) == soakcheck.read_samples(samples) == rows


def test_bench_runs_keeps_raw_data_gzipped_and_each_file_reads():
    plain = [p for p in RUNS.rglob("*") if p.is_file() and p.suffix not in (".gz", ".png", ".md")
             and p.name not in ("summary.json", "curves.csv")]   # small summaries meant for reading: a
    # soak's, and pysched trace's mean curves
    assert plain == [], "gzip -9n these (bench.rawdata)"
    packed = sorted(RUNS.rglob("*.gz"))
    assert packed
    for p in packed:
        if p.name.endswith(".jsonl.gz"):
            assert soakcheck.read_samples(p), p
        else:
            doc = load_results(p)
            assert doc["runs"], p
