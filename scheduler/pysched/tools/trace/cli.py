"""``pysched trace``: replay the openb GPU trace through pysched with each policy, in parallel, and
write the results (per-run curves, tables, plots) to ``--out``. Runs already written are kept, so
an interrupted grid resumes; ``--report-only`` rebuilds the tables and plots from them, or from the
bundle of all runs (``runs.json.gz``) written beside them."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from pysched.apis import config as configmod
from pysched.tools.offline import OfflineScheduler
from pysched.tools.trace import openb, replay, report


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1) if not part.startswith("-") else (part, part)
                seeds = range(int(lo), int(hi) + 1)
                if not seeds:
                    raise argparse.ArgumentTypeError(f"--seeds: {part!r} is an empty range (write it low-high)")
                out.extend(seeds)
            else:
                out.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--seeds: {part!r} is not a seed or a range like 42-51") from None
    if not out:
        raise argparse.ArgumentTypeError("--seeds: no seeds")
    return list(dict.fromkeys(out))       # each seed once, in the order given


def _names(allowed: tuple[str, ...], flag: str, closed: bool = True) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = list(allowed) if text == "all" else [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if (x not in allowed if closed else not x.isalnum())]
        if bad:
            raise argparse.ArgumentTypeError(f"{flag}: unknown {', '.join(bad)} (one of {', '.join(allowed)}, or all)")
        return items
    return parse


def _override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set: {text!r} is not ARG=VALUE")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def add_parser(sub: Any) -> None:
    p = sub.add_parser("trace", help="replay the openb GPU trace through pysched's GPU policies (FGD paper's protocol)",
                       description=__doc__)
    p.add_argument("--data", required=True, type=Path,
                   help="the openb trace directory (openb_node_list_gpu_node.csv, openb_pod_list_<trace>.csv); "
                        "the trace is not shipped with pysched")
    p.add_argument("--traces", default="default", type=_names(openb.TRACES, "--traces", closed=False),
                   help=f"comma-separated names (openb_pod_list_<name>.csv), or all - the 17 published: "
                        f"{', '.join(openb.TRACES)} (default: default)")
    p.add_argument("--policies", default="all", type=_names(replay.POLICIES, "--policies"),
                   help=f"comma-separated, or all (default): {', '.join(replay.POLICIES)}")
    p.add_argument("--seeds", default="42-51", type=_seeds, help="seeds and ranges, e.g. 42-51 (default) or 60,61")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)),
                   help="runs in parallel (default: one per CPU)")
    p.add_argument("--out", type=Path, default=Path("trace-results"), help="results directory (default: trace-results)")
    p.add_argument("--published", type=Path,
                   help="the simulator's analysis_allo_discrete.csv: its means beside ours in the tables and plots")
    p.add_argument("--stop", type=float, default=None, metavar="PERCENT",
                   help="stop each run once this much GPU demand has arrived (default: the whole arrival)")
    p.add_argument("--set", action="append", default=[], metavar="ARG=VALUE", type=_override,
                   help="a GPUShare argument for every GPUShare policy's runs, on top of the policy's (repeatable; "
                        "e.g. tieBreak=Scheduler); write such runs to their own --out")
    p.add_argument("--report-only", action="store_true", help="only rebuild the tables and plots from --out")
    p.add_argument("--plot", action=argparse.BooleanOptionalAction, default=True,
                   help="write a PNG per trace (needs matplotlib; default: on)")


def _one(data: Path, trace: str, policy: str, seed: int, out: Path, stop: float | None,
         overrides: dict[str, Any]) -> dict[str, Any]:
    nodes = openb.read_nodes(data / openb.NODE_FILE)
    pods = openb.read_pods(data / f"openb_pod_list_{trace}.csv")
    run = openb.build_run(pods, nodes, seed)
    result = replay.replay(pods, nodes, run, policy, seed, stop_percent=stop, overrides=overrides)
    return report.save_run(out, trace, policy, seed, result, len(run.order))


def main(args: argparse.Namespace) -> int:
    data: Path = args.data
    for need in [openb.NODE_FILE, *(f"openb_pod_list_{t}.csv" for t in args.traces)]:
        if not (data / need).is_file():
            print(f"pysched trace: --data {data}: {need} not found", file=sys.stderr)
            return 2
    out: Path = args.out
    sample = [openb.TracePod("sample", 1000, 1024, 500, 1, ())]   # a workload for FGD's stated classes
    try:
        for policy in args.policies:   # the profiles as the runs build them, plugin arguments included
            OfflineScheduler(configmod.parse(replay.profile_config(policy, sample, dict(args.set))))
    except configmod.ConfigError as exc:
        print(f"pysched trace: --set: {exc}", file=sys.stderr)
        return 2
    if not args.report_only:
        kept = {(r["trace"], r["policy"], r["seed"]) for r in report.load_runs(out)}
        todo = [(t, p, s) for t in args.traces for p in args.policies for s in args.seeds if (t, p, s) not in kept]
        done, t0 = 0, time.monotonic()
        print(f"{len(todo)} runs to do ({len(args.traces)} traces x {len(args.policies)} policies x "
              f"{len(args.seeds)} seeds, {len(args.traces) * len(args.policies) * len(args.seeds) - len(todo)} "
              f"already in {out}), {args.jobs} at a time", flush=True)
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(_one, data, t, p, s, out, args.stop, dict(args.set)): (t, p, s) for t, p, s in todo}
            for fut in as_completed(futures):
                t, p, s = futures[fut]
                doc = fut.result()
                done += 1
                c = doc["curve"]
                print(f"[{done}/{len(todo)} {time.monotonic() - t0:6.0f}s] {t} {p} seed {s}: "
                      f"100% {c.get('100', '-')}  130% {c.get('130', '-')}  failed {doc['failed']}/{doc['pods']}  "
                      f"{doc['seconds']:.1f}s", flush=True)
    write_report(out, args.traces, args.policies, set(args.seeds), args.published, args.plot)
    return 0


def write_report(out: Path, traces: list[str], policies: list[str], seeds: set[int], published: Path | None,
                 plots: bool) -> None:
    runs = report.fold_into_bundle(out)
    ours = report.summarize(runs, seeds)
    theirs = report.published(published, seeds) if published else {}
    text = [f"# pysched trace: openb, seeds {', '.join(map(str, sorted(seeds)))}", ""]
    for col in report.COLUMNS:
        text += [f"## Allocation ratio at {col} % of the GPUs arrived (mean over seeds"
                 + ("; in brackets: minus the published mean)" if theirs else ")"), "",
                 report.table(ours, theirs, traces, policies, col), ""]
    if theirs:
        for col in report.COLUMNS:
            text += [f"## Checks at {col} %", "", report.checks(ours, theirs, traces, col), ""]
    (out / "summary.md").write_text("\n".join(text))
    report.curves_csv(ours, out / "curves.csv")
    print("\n".join(text))
    if plots:
        for t in traces:
            if report.plot(ours, theirs, t, policies, out / f"{t}.png"):
                print(f"wrote {out / f'{t}.png'}")
