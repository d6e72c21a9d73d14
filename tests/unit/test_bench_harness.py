"""The benchmark harness: run order (ABBA), pinning plan, paced creation, Events counting, drain
figures, other-load arithmetic, the per-mode tables and the targets."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from bench import aggregate, machine, modes, pinning, plan, procstat, report, runner
from bench.events import EventClock, count_scheduled, summarise
from bench.workloads import WORKLOADS, Workload

# -- order --------------------------------------------------------------------------------------

def test_abba_order_reverses_on_odd_repeats():
    assert plan.abba_order(["a", "b"], 0) == ["a", "b"]
    assert plan.abba_order(["a", "b"], 1) == ["b", "a"]
    assert plan.abba_order(["a", "b"], 2) == ["a", "b"]
    assert plan.abba_order(["a", "b", "c"], 3) == ["c", "b", "a"]


def test_run_plan_interleaves_repeats_per_cell_and_skips_the_null_binder_where_meaningless():
    wl = WORKLOADS["SchedulingBasic/500Nodes"]
    got = [(p.mode, p.repeat, p.kind) for p in plan.runs([wl], ["drain", "burst"], [(5000, 5000)],
                                                          ["pysched", "kube-scheduler"], 3)]
    assert got == [("drain", 0, "pysched"), ("drain", 0, "kube-scheduler"),
                   ("drain", 1, "kube-scheduler"), ("drain", 1, "pysched"),
                   ("drain", 2, "pysched"), ("drain", 2, "kube-scheduler"),
                   ("burst", 0, "pysched"), ("burst", 0, "kube-scheduler"),
                   ("burst", 1, "kube-scheduler"), ("burst", 1, "pysched"),
                   ("burst", 2, "pysched"), ("burst", 2, "kube-scheduler")]
    throttled = list(plan.runs([wl], ["burst"], [(50, 100)], ["pysched", "null-binder"], 1))
    assert [p.kind for p in throttled] == ["pysched"]
    gang = WORKLOADS["GangScheduling/100Nodes_150Groups"]
    assert [p.kind for p in plan.runs([gang], ["burst"], [(5000, 5000)], ["null-binder"], 1)] == []
    slugs = {p.slug for p in plan.runs([wl], ["drain"], [(5000, 5000)], ["pysched", "kube-scheduler"], 2)}
    assert len(slugs) == 4                              # every run has its own directory


def test_pysched_profiles_take_pysched_s_place_in_the_abba_order():
    wl = WORKLOADS["SchedulingBasic/500Nodes"]
    got = [(p.repeat, p.kind, p.profile) for p in plan.runs([wl], ["drain"], [(5000, 5000)],
                                                            ["pysched", "kube-scheduler"], 2,
                                                            ["default", "loadaware"])]
    assert got == [(0, "pysched", "default"), (0, "pysched", "loadaware"), (0, "kube-scheduler", ""),
                   (1, "kube-scheduler", ""), (1, "pysched", "loadaware"), (1, "pysched", "default")]
    slugs = {p.slug for p in plan.runs([wl], ["drain"], [(5000, 5000)], ["pysched"], 1, ["default", "loadaware"])}
    assert len(slugs) == 2                              # each profile's run has its own directory
    assert plan.parse_profiles("default,loadaware") == ["default", "loadaware"]
    with pytest.raises(SystemExit, match="--pysched-profile: unknown fast"):
        plan.parse_profiles("default,fast")
    with pytest.raises(SystemExit, match="--pysched-profile: a profile is named twice"):
        plan.parse_profiles("default,default")


def test_profiles_are_cells_of_their_own_compared_with_the_default_run_by_run():
    results = [_run("pysched", repeat=0, cpu=1.0), _run("pysched", repeat=0, cpu=1.2),
               _run("pysched", repeat=1, cpu=1.5), _run("pysched", repeat=1, cpu=1.5),
               _run("pysched", repeat=2, cpu=0.8), _run("pysched", repeat=2, cpu=0.84)]
    for i, r in enumerate(results):
        r["profile"] = "default" if i in (0, 3, 4) else "loadaware"
        r["load_metrics"] = True
    results[2]["metrics"]["load_fallbacks"] = {"LoadVariationRiskBalancing/missing": 3}
    # the machine ran 20 % slower during repeat 0's loadaware run: its Filter took 0.6 ms, not 0.5
    results[1]["metrics"]["extension_point_mean_ms"]["Filter"] = 0.6
    cs = aggregate.cells(results)
    assert [(c.label, c.profile) for c in cs] == [("pysched", "default"), ("pysched (loadaware)", "loadaware")]
    [(other, base)] = aggregate.profile_pairs(cs)
    assert (other.profile, base.profile) == ("loadaware", "default")
    # medians 1.2 vs 1.0 (+20 %), but run by run 1.2, 1.0, 1.05: the median ratio is 1.05
    paired = aggregate.paired_ratio(other, base, "cpu_per_1000")
    assert paired.median == pytest.approx(1.05) and paired.n == 3
    table = report.profiles_table(cs)
    # per Filter call, run by run 1.0, 1.0, 1.05: the first pair's 1.2 was the machine
    assert [aggregate.FIGURES["cpu_per_filter"](r) for r in results] == pytest.approx([2.0, 2.0, 3.0, 3.0, 1.6, 1.68])
    corrected = aggregate.paired_ratio(other, base, "cpu_per_filter")
    assert corrected.median == pytest.approx(1.0) and corrected.n == 3
    assert "| W/5000 | drain | 5000/5000 | loadaware | 1.20 [0.84-1.50] | 1.00 [0.80-1.50] | **1.200** | " \
           "1.050 [1.000-1.200] | 1.000 [1.000-1.050] | 0.500 [0.500-0.600] | 0.500 | 100 |" in table
    assert table.rstrip().endswith("| LoadVariationRiskBalancing/missing 3 | yes |")
    for r in results:       # Prometheus also answered the loadaware queries in every run (the pump's)
        r["load_queries"] = True
    assert report.profiles_table(cs).rstrip().endswith("| yes, and its queries |")
    assert "pysched (loadaware)" in report.drain_table(cs)
    # the targets against kube-scheduler are the default profile's only
    results += [_run("kube-scheduler", repeat=0)]
    assert {t.ours for t in aggregate.evaluate_targets(aggregate.cells(results)) if t.name == "scheduler CPU per pod"} \
        == {1.0}


def test_bad_modes_and_schedulers_name_the_flag():
    with pytest.raises(SystemExit, match="--modes"):
        plan.parse_modes("drain,sprint")
    with pytest.raises(SystemExit, match="--schedulers"):
        plan.parse_schedulers("pysched,kube")
    assert plan.parse_qps("50/100,5000") == [(50.0, 100), (5000.0, 5000)]


# -- pinning ------------------------------------------------------------------------------------

def test_pinning_gives_the_scheduler_the_last_cpu_and_the_rest_everything_else():
    p = pinning.plan("auto", {0, 1, 2, 3})
    assert (p.scheduler_cpus, p.other_cpus, p.active) == ((3,), (0, 1, 2), True)
    assert "CPU 3" in p.describe() and "CPU 0,1,2" in p.describe()
    one = pinning.plan("auto", {0})
    assert not one.active and one.scheduler_preexec() is None and "only 1 CPU" in one.describe()
    off = pinning.plan("off", {0, 1})
    assert not off.active and off.as_dict()["scheduler_cpus"] == []
    with pytest.raises(ValueError, match="--pin"):
        pinning.plan("sometimes", {0, 1})


# -- paced creation -----------------------------------------------------------------------------

def test_steady_creation_follows_the_schedule_not_the_previous_creation():
    log: list[tuple[str, str, float]] = []

    async def main():
        loop = asyncio.get_running_loop()
        start = loop.time()

        async def create(p):
            log.append(("start", p["metadata"]["name"], loop.time() - start))
            if p["metadata"]["name"] == "p0":
                await asyncio.sleep(0.3)        # a slow creation must not push the later ones back
            log.append(("end", p["metadata"]["name"], loop.time() - start))

        pods = [{"metadata": {"name": f"p{i}"}} for i in range(5)]
        return await modes.create_paced(None, pods, rate=50.0, create=create)

    achieved = asyncio.run(main())
    starts = {name: t for kind, name, t in log if kind == "start"}
    for i in range(5):
        assert starts[f"p{i}"] >= i / 50.0 - 1e-3          # never before its slot
    order = [(kind, name) for kind, name, _ in log]
    assert order.index(("start", "p4")) < order.index(("end", "p0"))   # p1..p4 went out while p0 was slow
    assert achieved > 0
    with pytest.raises(ValueError, match="steady-rate"):
        asyncio.run(modes.create_paced(None, [], rate=0))


def test_paced_creation_keeps_at_most_concurrency_in_flight():
    peak = 0
    inflight = 0

    async def main():
        async def create(_):
            nonlocal peak, inflight
            inflight += 1
            peak = max(peak, inflight)
            await asyncio.sleep(0.05)
            inflight -= 1

        await modes.create_paced(None, [{"metadata": {"name": str(i)}} for i in range(12)], rate=10_000.0,
                                 concurrency=3, create=create)

    asyncio.run(main())
    assert peak == 3


# -- events ---------------------------------------------------------------------------------------

def _event(pod, controller="pysched", reason="Scheduled", series=None, kind="Pod"):
    ev = {"reason": reason, "reportingController": controller, "regarding": {"kind": kind, "name": pod}}
    if series is not None:
        ev["series"] = {"count": series}
    return ev


def test_scheduled_events_count_series_and_only_the_schedulers_measured_pods():
    pods = {"measure-0", "measure-1", "measure-2"}
    events = [_event("measure-0"), _event("measure-1", series=3),
              _event("measure-2", controller="default-scheduler"),     # the other scheduler
              _event("measure-2", reason="FailedScheduling"),
              _event("init-0"),                                        # not a measured pod
              _event("measure-2", kind="Node")]
    assert count_scheduled(events, "pysched", pods) == 4
    assert count_scheduled(events, "default-scheduler", pods) == 1
    assert count_scheduled([], "pysched", pods) == 0


def test_event_clock_keeps_the_first_scheduled_event_of_each_pod_from_its_scheduler():
    clock = EventClock("pysched")
    clock.observe(_event("measure-0"), 10.0)
    clock.observe(_event("measure-0", series=2), 12.0)              # a repeat: the first one counts
    clock.observe(_event("measure-1", controller="default-scheduler"), 11.0)
    clock.observe(_event("measure-1", reason="FailedScheduling"), 11.0)
    clock.observe(_event("measure-1", kind="Node"), 11.0)
    assert clock.first == {"measure-0": 10.0}
    clock.bound_pod("measure-0")
    clock.bound_pod("measure-1")
    clock.bound_pod("measure-0")                                       # a pod is bound once
    assert clock.covered == 1


def test_event_clock_is_done_when_every_bound_pod_has_its_event_or_they_stop_coming():
    clock = EventClock("pysched")
    clock.observe(_event("a"), 100.0)                                     # the Event before the bind
    for name in ("a", "b"):
        clock.bound_pod(name)
    assert not clock.done(all_bound_at=100.0, now=101.0)
    assert clock.done(all_bound_at=100.0, now=105.0, stall=5.0)            # nothing new for 5 s
    clock.observe(_event("b"), 104.0)
    assert clock.done(all_bound_at=100.0, now=104.0)
    late = EventClock("pysched")
    for name in ("a", "b"):
        late.bound_pod(name)
    late.observe(_event("a"), 150.0)                                      # still growing, but 60 s passed
    assert late.done(all_bound_at=100.0, now=160.0, stall=5.0, max_wait=60.0)
    assert not late.done(all_bound_at=100.0, now=152.0, stall=5.0, max_wait=60.0)


def test_events_summary_is_the_time_from_the_last_bind_to_the_last_event():
    records = {"a": {"bound": 10.0, "event": 10.5}, "b": {"bound": 12.0, "event": 14.25},
               "c": {"bound": None, "event": None}}
    assert summarise(records) == {"seen": 2, "waited_s": 2.25, "short": False}
    records["b"]["event"] = None
    assert summarise(records) == {"seen": 1, "waited_s": 0.0, "short": True}
    assert summarise({})["waited_s"] is None


def test_other_load_reports_named_processes_cpu_per_second():
    load = machine.OtherLoad.start({"self": os.getpid(), "gone": 2 ** 22 + 7})   # a pid that does not exist
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    out = load.stop()
    assert out["self_cpu_per_s"] > 0
    assert out["gone_cpu_per_s"] is None


# -- drain and load figures -----------------------------------------------------------------------

def test_drain_figures_from_the_fresh_start():
    f = runner.drain_figures(100.0, [102.0, 102.5, 103.0, 104.0, 106.0])
    assert f == {"time_to_first_bind_s": 2.0, "drain_pods_per_s": 1.2, "overall_pods_per_s": 0.8}
    assert runner.drain_figures(100.0, [101.0])["drain_pods_per_s"] is None
    assert runner.drain_figures(100.0, [])["time_to_first_bind_s"] is None


def test_other_cpu_is_busy_minus_own_per_second():
    assert machine.other_cpu(10.0, busy=15.0, own=12.0) == {
        "phase_s": 10.0, "busy_cpu_per_s": 1.5, "own_cpu_per_s": 1.2, "other_cpu_per_s": 0.3}


def test_busy_cpu_from_proc_stat_excludes_idle_and_iowait():
    ticks = procstat._TICKS
    text = f"cpu  {ticks} {ticks} {ticks} {50 * ticks} {7 * ticks} {ticks} {ticks} {ticks} 0 0\ncpu0 1 2 3 4\n"
    assert procstat.busy_cpu_s(text) == pytest.approx(6.0)     # user nice system irq softirq steal
    with pytest.raises(ValueError):
        procstat.busy_cpu_s("intr 1\n")


def test_prelude_defaults_to_nothing():
    assert Workload("x", 1, 0, 1).prelude() == []


# -- report ---------------------------------------------------------------------------------------

def _run(scheduler, mode="drain", repeat=0, nodes=5000, throughput=100.0, cpu=10.0, ttfb=2.0, rss=200.0,
         error="", violations=(), events=None, workload="W/5000", bound=1000):
    return {"workload": workload, "mode": mode, "scheduler": scheduler, "repeat": repeat, "qps": 5000.0,
            "burst": 5000, "nodes": nodes, "error": error, "violations": list(violations),
            "summary": {"bound": bound, "pods": 1000, "avg": throughput, "p50": None, "p90": None, "p99": None,
                        "latency_p50_ms": 10.0, "latency_p90_ms": 20.0, "latency_p99_ms": 30.0},
            "drain": {"drain_pods_per_s": throughput, "overall_pods_per_s": throughput / 2,
                      "time_to_first_bind_s": ttfb} if mode == "drain" else {},
            "cpu_s_per_1000_pods": cpu, "peak_rss_mib": rss, "create_rate": 500.0, "target_rate": None,
            "events": {"posted": bound if events is None else events,
                       "short": (bound if events is None else events) < bound} if scheduler != "null-binder" else {},
            "metrics": {"api_requests_per_pod": 2.0, "attempt_p50_ms": 1.0, "attempt_p99_ms": 5.0,
                        "extension_point_mean_ms": {"Filter": 0.5, "Permit": None}},
            "load": {"loadavg_start": [0.5, 0.4, 0.3], "other_cpu_per_s": 0.05}, "gang": {},
            "bind_offsets": [0.5, 1.0], "seen_offsets": []}


def test_cells_report_median_and_range_and_ratio_of_medians():
    results = [_run("pysched", repeat=0, throughput=300.0), _run("kube-scheduler", repeat=0, throughput=100.0),
               _run("kube-scheduler", repeat=1, throughput=140.0), _run("pysched", repeat=1, throughput=500.0),
               _run("pysched", repeat=2, throughput=400.0), _run("kube-scheduler", repeat=2, throughput=120.0)]
    cs = aggregate.cells(results)
    ours = next(c for c in cs if c.scheduler == "pysched")
    assert ours.fig("throughput").median == 400.0 and (ours.fig("throughput").low, ours.fig("throughput").high) == \
        (300.0, 500.0)
    assert aggregate.ratio_to_kube(cs, ours, "throughput") == pytest.approx(400.0 / 120.0)
    table = report.drain_table(cs)
    assert "| W/5000 | 5000/5000 | pysched | 400 [300-500] | **3.33** |" in table
    assert "| W/5000 | 5000/5000 | kube-scheduler | 120 [100-140] | n/a |" in table
    assert "| 3/3 |" in table
    ext = report.extension_table(cs)
    assert "0.500" in ext and "n/a" in ext          # a point without series shows n/a


def test_failed_repeat_is_left_out_of_the_figures_and_flagged():
    results = [_run("pysched", throughput=300.0), _run("pysched", repeat=1, throughput=0.0, error="only 5/10 bound"),
               _run("pysched", repeat=2, events=990)]
    cs = aggregate.cells(results)
    assert cs[0].fig("throughput").n == 2
    table = report.drain_table(cs)
    assert "**2/3** (only 5/10 bound)" in table          # the short-events repeat still verified
    assert "below bound in 1/3" in table
    assert [r["repeat"] for r in report.failed_runs(results)] == [1]


def test_targets_pass_and_fail_with_the_numbers():
    results = [_run("pysched", throughput=250.0, cpu=3.0, ttfb=1.0, rss=150.0),
               _run("kube-scheduler", throughput=100.0, cpu=10.0, ttfb=2.0, rss=300.0),
               _run("pysched", workload="Small", nodes=500), _run("kube-scheduler", workload="Small", nodes=500),
               _run("pysched", workload="W2/15000", nodes=15000, throughput=150.0, cpu=5.0, ttfb=3.0, rss=400.0),
               _run("kube-scheduler", workload="W2/15000", nodes=15000, throughput=100.0, cpu=10.0, ttfb=2.0,
                    rss=300.0),
               _run("pysched", workload="Alone/5000", nodes=5000)]
    got = {(t.workload, t.name): t for t in aggregate.evaluate_targets(aggregate.cells(results))}
    assert {w for w, _ in got} == {"W/5000", "W2/15000", "Alone/5000"}       # >= 5,000 nodes only
    assert got[("W/5000", "drain throughput")].value == 2.5 and got[("W/5000", "drain throughput")].passed
    assert got[("W/5000", "scheduler CPU per pod")].value == pytest.approx(0.3)
    assert all(got[("W/5000", n)].passed for n in ("scheduler CPU per pod", "time to first bind", "peak RSS"))
    assert not got[("W2/15000", "drain throughput")].passed                   # 1.5x
    assert not got[("W2/15000", "scheduler CPU per pod")].passed              # 0.5x
    assert not got[("W2/15000", "time to first bind")].passed and not got[("W2/15000", "peak RSS")].passed
    assert got[("Alone/5000", "drain throughput")].passed is None              # no kube-scheduler cell
    table = report.targets_table(aggregate.cells(results))
    assert "| W/5000 | 5000 | drain throughput | >= 2.0x kube | 250.0 | 100.0 | 2.50x | PASS |" in table
    assert "| W2/15000 | 5000 | drain throughput | >= 2.0x kube | 150.0 | 100.0 | 1.50x | **FAIL** |" in table


def test_steady_and_burst_tables_and_na_percentiles():
    results = [_run("pysched", mode="steady"), _run("kube-scheduler", mode="steady"),
               _run("pysched", mode="burst"), _run("kube-scheduler", mode="burst")]
    results[0]["target_rate"] = 100.0
    cs = aggregate.cells(results)
    steady = report.steady_table(cs)
    assert "| W/5000 | 5000/5000 | pysched | 100 | 500.0 | 10 | 20 | 30 |" in steady
    burst = report.burst_table(cs)
    assert "| W/5000 | 5000/5000 | pysched | 100 | **1.00** | n/a | n/a | n/a | 500 |" in burst
    titles = [t for t, _ in report.sections(results)]
    assert titles[0].startswith("Steady") and any(t.startswith("Burst") for t in titles)
    assert not any(t.startswith("Drain") for t in titles)


def test_a_figure_missing_in_some_repeats_says_how_many_had_it():
    long, short = _run("pysched", mode="burst"), _run("pysched", mode="burst", repeat=1)
    long["summary"].update(p50=40.0, p90=60.0, p99=80.0)          # >= 10 whole seconds; the other run had fewer
    table = report.burst_table(aggregate.cells([long, short]))
    assert "| 40 (1/2 repeats) | 60 (1/2 repeats) | 80 (1/2 repeats) |" in table


def test_drain_throughput_counting_the_wait_for_events():
    ours = _run("pysched", throughput=500.0)
    ours["bind_offsets"] = [1.0 + i for i in range(11)]            # 11 binds over 10 s
    ours["events"] = {"posted": 11, "short": False, "waited_s": 1.0}  # Events done 1 s after the last bind
    kube = _run("kube-scheduler", throughput=100.0)
    kube["bind_offsets"] = [1.0 + 2 * i for i in range(11)]       # 11 binds over 20 s, Events kept pace
    kube["events"] = {"posted": 11, "short": False, "waited_s": 0.0}
    assert aggregate.FIGURES["with_events"](ours) == 1.0
    assert aggregate.FIGURES["with_events"](kube) == 0.6
    assert aggregate.FIGURES["with_events"](_run("pysched", mode="burst")) is None
    short = dict(kube, events={"posted": 9, "short": True, "waited_s": 5.0})
    assert aggregate.FIGURES["with_events"](short) is None        # not every Event: no figure
    got = {t.name: t for t in aggregate.evaluate_targets(aggregate.cells([ours, kube]))}
    assert got["drain throughput"].passed                              # 5.0x on binds alone
    assert got["throughput incl. Events"].value == pytest.approx(1.0 / 0.6)
    assert not got["throughput incl. Events"].passed


def test_report_from_earlier_results_files(tmp_path):
    import json

    from bench import run

    meta = {"machine": {"cores": 2}, "pinning": {"description": "scheduler alone on CPU 1"}, "repeats": 1,
            "steady_rate": 100.0}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**meta, "command": "make bench A", "runs": [_run("pysched"), _run("kube-scheduler")]}))
    b.write_text(json.dumps({**meta, "command": "make bench B",
                             "runs": [_run("pysched", workload="Other/500", nodes=500, throughput=70.0)]}))
    md = tmp_path / "out" / "RESULTS.md"
    assert run.main(["--report-from", f"{a},{b}", "--results-md", str(md), "--out", str(tmp_path / "o")]) == 0
    text = md.read_text()
    assert "`make bench A`, `make bench B`" in text
    assert "| W/5000 | 5000/5000 | pysched |" in text and "| Other/500 | 5000/5000 | pysched | 70 |" in text
    assert "scheduler alone on CPU 1" in text


def test_report_from_two_series_pairs_each_series_runs(tmp_path):
    import json

    from bench import run

    def series(ratios):
        runs = []
        for rep, ratio in enumerate(ratios):
            runs += [dict(_run("pysched", repeat=rep, cpu=1.0), profile="default"),
                     dict(_run("pysched", repeat=rep, cpu=ratio), profile="loadaware")]
        return {"machine": {"cores": 2}, "pinning": {"description": "pinned"}, "repeats": len(ratios),
                "steady_rate": 100.0, "pysched_profile": "default,loadaware", "command": "make bench", "runs": runs}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(series([1.2, 1.2])))
    b.write_text(json.dumps(series([1.0, 1.0, 1.0])))
    md = tmp_path / "RESULTS.md"
    assert run.main(["--report-from", f"{a},{b}", "--results-md", str(md), "--out", str(tmp_path / "o")]) == 0
    text = md.read_text()
    # five pairs (not three: the second file's repeats 0-1 would overwrite the first's), median 1.0
    assert "**Repeats**: 5 per cell" in text
    assert "| **1.000** | 1.000 [1.000-1.200] |" in text


def test_cycle_benchmark_runs_each_profile_on_fresh_samples(capsys):
    from bench import cycle
    assert cycle.main(["--workload", "SchedulingBasic/500Nodes", "--scale", "40,10,60", "--repeats", "2",
                       "--sample-every", "25"]) == 0
    out = capsys.readouterr().out
    runs = [line for line in out.splitlines() if line.startswith("run=")]
    assert [r.split()[1] for r in runs] == ["profile=default", "profile=loadaware", "profile=loadaware",
                                            "profile=default"]
    assert all("pods=60 scheduled=60 fallbacks=0 " in r for r in runs)   # every load sample used
    filter_ms = [float(r.split("filter_ms=")[1]) for r in runs]
    assert all(0 < f < 1000 for f in filter_ms)                          # Filter timed over the pods measured
    assert "loadaware" in out.split("cycle CPU ms per pod")[1]


def test_results_are_read_plain_or_gzipped(tmp_path):
    import gzip
    import json

    from bench.run import load_results
    meta = {"runs": [{"workload": "W", "repeat": 0}], "repeats": 1}
    (tmp_path / "results.json").write_text(json.dumps(meta))
    (tmp_path / "results.json.gz").write_bytes(gzip.compress(json.dumps(meta).encode()))
    assert load_results(tmp_path / "results.json") == load_results(tmp_path / "results.json.gz") == meta
