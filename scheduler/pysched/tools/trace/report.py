"""Runs to results: each run's curve saved as JSON (``save_run``/``load_runs``), the mean curve
per trace and policy over seeds, the table at 100 % and 130 % of the GPUs arrived beside the
published means (``published``: the simulator's ``analysis_allo_discrete.csv``, one row per trace,
policy and seed), and a plot per trace of the curves beside the published ones."""

from __future__ import annotations

import csv
import gzip
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysched.tools.trace.replay import RunResult, curve

COLUMNS = (100, 130)
PUBLISHED_NAMES = {"01-Random": "Random", "02-DotProd": "DotProd", "03-GpuClustering": "GpuClustering",
                   "04-GpuPacking": "GpuPacking", "05-BestFit": "BestFit", "06-FGD": "FGD"}


def run_path(out: Path, trace: str, policy: str, seed: int) -> Path:
    return out / "runs" / trace / policy / f"seed-{seed}.json"


def save_run(out: Path, trace: str, policy: str, seed: int, result: RunResult, pods: int) -> dict[str, Any]:
    c = curve(result)
    doc = {"trace": trace, "policy": policy, "seed": seed, "pods": pods, "failed": result.failed,
           "seconds": round(result.seconds, 2), "curve": {str(k): v for k, v in sorted(c.items())}}
    path = run_path(out, trace, policy, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    tmp.replace(path)
    return doc


BUNDLE = "runs.json.gz"


def load_runs(out: Path) -> list[dict[str, Any]]:
    """Every run under ``out``: those of the bundle (``write_bundle``), and the per-run files
    written since (a run in both: the file's)."""
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    if (out / BUNDLE).exists():
        for r in json.loads(gzip.decompress((out / BUNDLE).read_bytes()))["runs"]:
            runs[(r["trace"], r["policy"], r["seed"])] = r
    for p in sorted((out / "runs").glob("*/*/seed-*.json")):
        r = json.loads(p.read_text())
        runs[(r["trace"], r["policy"], r["seed"])] = r
    return list(runs.values())


def fold_into_bundle(out: Path) -> list[dict[str, Any]]:
    """Every run under ``out`` into its bundle, the per-run files removed (they are all in it):
    results kept without thousands of small files. Returns the runs."""
    runs = load_runs(out)
    if not (out / "runs").is_dir():
        return runs
    write_bundle(runs, out / BUNDLE)
    for p in sorted((out / "runs").glob("*/*/seed-*.json")):
        p.unlink()
    for d in sorted((out / "runs").glob("**/"), key=lambda d: -len(d.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    return runs


def write_bundle(runs: list[dict[str, Any]], path: Path) -> None:
    """All runs in one gzipped document (``{"runs": [...]}``, byte for byte the same for the same
    runs), for keeping results without thousands of small files."""
    ordered = sorted(runs, key=lambda r: (r["trace"], r["policy"], r["seed"]))
    text = json.dumps({"runs": ordered}, sort_keys=True, separators=(",", ":")) + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    tmp.replace(path)


@dataclass
class Cell:
    """One trace x policy over its seeds: the mean and standard deviation at each column."""
    seeds: list[int]
    mean: dict[int, float]
    sd: dict[int, float]
    low: dict[int, float]
    high: dict[int, float]


def _cell(values: dict[int, list[float]], seeds: list[int]) -> Cell:
    mean = {k: round(statistics.fmean(v), 2) for k, v in values.items() if v}
    sd = {k: round(statistics.stdev(v), 2) if len(v) > 1 else 0.0 for k, v in values.items() if v}
    return Cell(sorted(seeds), mean, sd, {k: min(v) for k, v in values.items() if v},
                {k: max(v) for k, v in values.items() if v})


def summarize(runs: list[dict[str, Any]], seeds: set[int] | None = None) -> dict[tuple[str, str], Cell]:
    """(trace, policy) -> Cell over the runs (of ``seeds`` only, when given), every curve column."""
    acc: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    used: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in runs:
        if seeds is not None and r["seed"] not in seeds:
            continue
        key = (r["trace"], r["policy"])
        used[key].append(r["seed"])
        for col, v in r["curve"].items():
            acc[key][int(col)].append(float(v))
    return {k: _cell(v, used[k]) for k, v in acc.items()}


def published(path: Path, seeds: set[int] | None = None) -> dict[tuple[str, str], Cell]:
    """The simulator's published runs, as ``summarize`` gives ours."""
    runs = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            trace = row["workload"].removeprefix("openb_pod_list_")
            policy = PUBLISHED_NAMES.get(row["sc_policy"], row["sc_policy"])
            seed = int(row.get("seed") or 0)
            cols = {k: float(v) for k, v in row.items() if k.isdigit() and v not in ("", None)}
            runs.append({"trace": trace, "policy": policy, "seed": seed, "curve": cols})
    return summarize(runs, seeds)


def curves_csv(ours: dict[tuple[str, str], Cell], path: Path) -> None:
    """Every mean curve: one row per trace and policy, the columns 0..130 (% of the GPUs arrived)."""
    cols = sorted({k for c in ours.values() for k in c.mean if 0 <= k <= 130})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "policy", "seeds", *cols])
        for (t, p), c in sorted(ours.items()):
            w.writerow([t, p, " ".join(map(str, c.seeds)), *(c.mean.get(k, "") for k in cols)])


def table(ours: dict[tuple[str, str], Cell], theirs: dict[tuple[str, str], Cell], traces: list[str],
          policies: list[str], column: int) -> str:
    """A Markdown table: per trace, each policy's mean at ``column`` (and the published mean and
    the difference where the simulator published the policy)."""
    head = ["trace", *policies]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * len(policies)]
    for t in traces:
        cells = [t]
        for p in policies:
            c = ours.get((t, p))
            v = c.mean.get(column) if c else None
            pub = theirs.get((t, p))
            pv = pub.mean.get(column) if pub else None
            if v is None:
                cells.append("-")
            elif pv is None:
                cells.append(f"{v:.2f}")
            else:
                cells.append(f"{v:.2f} ({v - pv:+.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


BASELINES = ("BestFit", "GpuPacking", "GpuClustering", "DotProd", "Random")
FGD_TOLERANCE = 0.3


def checks(ours: dict[tuple[str, str], Cell], theirs: dict[tuple[str, str], Cell], traces: list[str],
           column: int) -> str:
    """The replay checked against the published runs at ``column``, one row per trace: pysched's
    FGD minus the published FGD mean (within ``FGD_TOLERANCE``: the same policy gives the same
    answer); each baseline's mean inside the published seeds' range or not; pysched's default
    policy minus the published FGD mean and minus its own FGD's."""
    lines = ["| trace | FGD - published | baselines outside the published range | pysched - published FGD "
             "| pysched - FGD |", "|---|---:|---|---:|---:|"]
    for t in traces:
        fgd, pub = ours.get((t, "FGD")), theirs.get((t, "FGD"))
        row = [t]
        d = None
        if fgd and pub and column in fgd.mean and column in pub.mean:
            d = fgd.mean[column] - pub.mean[column]
            row.append(f"{d:+.2f} {'ok' if abs(d) <= FGD_TOLERANCE + 1e-9 else 'MISS'}")
        else:
            row.append("-")
        outside = []
        for b in BASELINES:
            c, p = ours.get((t, b)), theirs.get((t, b))
            if c and p and column in c.mean and column in p.low:
                mean = c.mean[column]
                if not p.low[column] <= mean <= p.high[column]:
                    outside.append(f"{b} {mean:.2f} not in [{p.low[column]:.2f}, {p.high[column]:.2f}]")
        row.append("; ".join(outside) or "none")
        mine = ours.get((t, "pysched"))
        v = mine.mean.get(column) if mine else None
        row.append(f"{v - pub.mean[column]:+.2f}" if v is not None and pub and column in pub.mean else "-")
        row.append(f"{v - fgd.mean[column]:+.2f}" if v is not None and fgd and column in fgd.mean else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(ours: dict[tuple[str, str], Cell], theirs: dict[tuple[str, str], Cell], trace: str,
         policies: list[str], path: Path) -> bool:
    """The allocation-ratio curves of ``trace``: ours solid, the published dashed. False when
    matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(policies):
        color = colors[i % len(colors)]
        for src, style, label in ((ours, "-", p), (theirs, "--", f"{p} (published)")):
            c = src.get((trace, p))
            if c is None:
                continue
            xs = sorted(k for k in c.mean if 60 <= k <= 130)
            ax.plot(xs, [c.mean[k] for k in xs], style, color=color, lw=1.4 if style == "-" else 1.0, label=label)
    ax.set_xlabel("GPU demand arrived (% of the cluster's GPUs)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_title(f"openb {trace}: GPU allocation ratio (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
