"""The soak's verdicts (bench.soakcheck) on made-up samples: each one can fail."""

from __future__ import annotations

import pytest

from bench import soakcheck
from bench.soak import Plan
from pysched.apis.core.quantity import resource_value


def sample(minute, *, rss=200.0, tasks=50, fds=40, leader="a1", standby="b1", p99=0.02):
    def proc(tag, lead):
        return {"slot": tag[0], "incarnation": int(tag[1:]), "leader": lead, "rss_mib": rss if lead else 150.0,
                "tasks": tasks if lead else 20, "fds": fds if lead else 30}
    return {"minute": minute, "pysched": [proc(leader, True), proc(standby, False)],
            "latency": {"pysched": {"count": 100, "p50": p99 / 4, "p99": p99}}}


ENDS = {k: {"judged": True, "ok": True} for k in ("placed_exactly_once", "within_allocatable", "all_placed")}


def test_a_flat_run_passes():
    samples = [sample(m, rss=200 + (m % 2)) for m in range(1, 61)]
    v = soakcheck.judge(samples, ENDS, warmup=5)
    assert v["pass"] and v["all_judged"]
    tenure, standby = v["memory_tasks_fds"]["tenures"]
    assert (tenure["role"], standby["role"]) == ("leader", "standby") and standby["judged"]
    assert tenure["minutes"] == 55 and abs(tenure["rss_drift_pct_per_hour"]) < 1     # minutes 6..60


def test_memory_that_keeps_growing_fails():
    samples = [sample(m, rss=200 + 0.5 * m) for m in range(1, 61)]      # +30 MiB/h on ~215: 14 %/h
    v = soakcheck.judge(samples, ENDS, warmup=5)
    assert not v["pass"] and not v["memory_tasks_fds"]["ok"]
    assert v["memory_tasks_fds"]["tenures"][0]["rss_drift_pct_per_hour"] == pytest.approx(14, abs=1)


def test_warmup_growth_is_not_drift():
    samples = [sample(m, rss=100 + 20 * min(m, 5)) for m in range(1, 61)]   # grows for 5 minutes, then flat
    assert soakcheck.judge(samples, ENDS, warmup=5)["pass"]
    assert not soakcheck.judge(samples, ENDS, warmup=0)["pass"]


@pytest.mark.parametrize("series", ["tasks", "fds"])
def test_leaking_tasks_or_descriptors_fail(series):
    samples = [sample(m, **{series: 40 + m}) for m in range(1, 61)]
    assert not soakcheck.judge(samples, ENDS, warmup=5)["memory_tasks_fds"]["ok"]


def test_each_tenure_is_judged_from_its_own_start():
    """After a handover the new leader's start-up is warm-up again; its own growth is judged."""
    first = [sample(m, rss=200, leader="a1", standby="b1") for m in range(1, 16)]
    second = [sample(m, rss=300 + (m - 15) * 0.01, leader="b1", standby="a2") for m in range(16, 46)]
    v = soakcheck.judge(first + second, ENDS, warmup=3)
    assert [(t["slot"], t["incarnation"], t["role"]) for t in v["memory_tasks_fds"]["tenures"]] == [
        ("a", 1, "leader"), ("b", 1, "standby"), ("b", 1, "leader"), ("a", 2, "standby")]
    assert v["pass"]


def test_a_standby_that_keeps_growing_fails_while_the_leader_is_flat():
    samples = [sample(m) for m in range(1, 61)]
    for s in samples:
        s["pysched"][1]["rss_mib"] = 150.0 + s["minute"] * 2      # the standby: +120 MiB/h
    v = soakcheck.judge(samples, ENDS, warmup=5)
    assert not v["pass"]
    leader, standby = v["memory_tasks_fds"]["tenures"]
    assert leader["ok"] and not standby["ok"] and standby["role"] == "standby"


def test_latency_that_climbs_fails_and_noise_at_milliseconds_does_not():
    climbing = [sample(m, p99=0.02 * (1 + m / 10)) for m in range(1, 61)]
    assert not soakcheck.judge(climbing, ENDS, warmup=5)["latency_flat"]["ok"]
    noisy = [sample(m, p99=0.004 if m % 2 else 0.012) for m in range(1, 61)]
    assert soakcheck.judge(noisy, ENDS, warmup=5)["latency_flat"]["ok"]


def test_a_failed_end_check_fails_the_soak():
    ends = {**ENDS, "placed_exactly_once": {"judged": True, "ok": False}}
    assert not soakcheck.judge([sample(m) for m in range(1, 61)], ends, warmup=5)["pass"]


def test_overcommitted_nodes_are_named():
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "3"}}}

    def pod(cpu, phase="Running", node_name="n1"):
        return {"spec": {"nodeName": node_name, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": phase}}
    fits = [pod("500m"), pod("500m"), pod("900m", phase="Succeeded"), pod("2", node_name=None)]
    assert soakcheck.overcommitted([node], fits, resource_value) == []
    assert soakcheck.overcommitted([node], [*fits, pod("1m")], resource_value) == [
        "n1: requests [1001, 0, 3] > allocatable [1000, 1073741824, 3]"]


def test_the_plan_prints_the_command_that_reproduces_it():
    assert Plan().command() == "make soak SOAK_MINUTES=60"
    assert Plan(minutes=90, nodes=2000, handover_every=600).command() == (
        "make soak SOAK_MINUTES=90 SOAK_ARGS='--nodes 2000 --handover-every 600'")


def test_python_heap_blocks_are_reported_beside_the_rss_drift():
    """Objects kept grow the allocator's blocks; fragmentation grows only the RSS. Shown, not judged."""
    samples = [sample(m, rss=200 + 0.5 * m) for m in range(1, 61)]
    for s in samples:
        for p in s["pysched"]:
            p["heap_blocks"] = 1_000_000 + 100 * s["minute"]
    tenure = soakcheck.judge(samples, ENDS, warmup=5)["memory_tasks_fds"]["tenures"][0]
    assert tenure["heap_blocks_drift_pct_per_hour"] == pytest.approx(0.6, abs=0.05)
    assert "heap_blocks_drift_pct_per_hour" not in soakcheck.judge(
        [sample(m) for m in range(1, 61)], ENDS, warmup=5)["memory_tasks_fds"]["tenures"][0]


def test_a_generated_pod_name_used_twice_is_two_pods_each_bound_once_not_one_bound_twice():
    """The soak's hour of churn reused a ReplicaSet's generated pod name (five characters of 27):
    counted by name, two pods each bound once looked like one pod bound twice."""
    from pysched_dev.audit import successful_binds

    def bind(name, uid, code=201):
        return {"stage": "ResponseComplete", "responseStatus": {"code": code},
                "objectRef": {"resource": "pods", "subresource": "binding", "namespace": "soak",
                              "name": name, "uid": uid}}
    events = [bind("p-05-78f9c98776-xlhv2", "uid-1"), bind("p-05-78f9c98776-xlhv2", "uid-2"),
              bind("p-01-5d4c-abcde", "uid-3", code=409)]
    assert successful_binds(events, by_namespace=True)[("soak", "p-05-78f9c98776-xlhv2")] == 2
    per_pod = successful_binds(events, by_uid=True)
    assert per_pod == {("soak", "p-05-78f9c98776-xlhv2", "uid-1"): 1, ("soak", "p-05-78f9c98776-xlhv2", "uid-2"): 1}


def test_rss_drift_is_judged_only_on_tenures_long_enough_to_tell_it_from_noise():
    """A leader's 10 judged minutes between handovers: +1.5 MiB of 139 is +6.5 %/h, while the
    minute-to-minute noise of a flat process is about 0.5 MiB - reported with its standard error,
    not judged. The same slope held for 35 minutes is judged, and fails."""
    def run(minutes):
        return [sample(m, rss=138 + (0.15 * (m - 10) if m > 10 else 0) + (0.5 if m % 2 else -0.5))
                for m in range(1, minutes + 1)]
    short = soakcheck.judge(run(20), ENDS, warmup=10)
    leader = short["memory_tasks_fds"]["tenures"][0]
    assert leader["minutes"] == 10 and not leader["rss_drift_judged"] and leader["ok"]
    assert leader["rss_drift_stderr_pct_per_hour"] > 1.0
    assert short["pass"] and not short["all_judged"] and not short["memory_tasks_fds"]["rss_drift_judged"]
    long = soakcheck.judge(run(45), ENDS, warmup=10)
    leader = long["memory_tasks_fds"]["tenures"][0]
    assert leader["rss_drift_judged"] and leader["rss_drift_pct_per_hour"] > soakcheck.MAX_DRIFT_PCT
    assert not long["pass"]


def test_the_slopes_standard_error_is_zero_on_a_line_and_grows_with_noise():
    xs = [float(x) for x in range(20)]
    assert soakcheck.slope_stderr(xs, [2 * x + 1 for x in xs]) == pytest.approx(0)
    noisy = [2 * x + (1 if x % 2 else -1) for x in xs]
    assert soakcheck.slope(xs, noisy) == pytest.approx(2, abs=0.05)
    assert 0.01 < soakcheck.slope_stderr(xs, noisy) < 0.1


def _summary(handover_every, *, bound_twice=()):
    plan = Plan(handover_every=handover_every)
    from dataclasses import asdict
    ends = {"all_placed": {"judged": True, "ok": True, "count": 0},
            "placed_exactly_once": {"judged": True, "ok": not bound_twice, "bindings": 100,
                                    "pods_bound_twice": list(bound_twice)},
            "within_allocatable": {"judged": True, "ok": True, "nodes_checked": 10, "nodes_over": []}}
    return {"plan": asdict(plan), "command": plan.command(), "end_checks": ends, "happened": [],
            "machine": {"cpus": 2}}


def _samples(minutes, handover_at=None):
    out = []
    for m in range(1, minutes + 1):
        s = sample(m, leader="a1" if handover_at is None or m < handover_at else "b1",
                   standby="b1" if handover_at is None or m < handover_at else "a2")
        s.update(cluster={"pods": 10, "unbound": 0}, kube=None)
        s["latency"]["kube"] = {}
        out.append(s)
    return out


def test_the_report_passes_only_when_some_run_judged_the_rss_drift(tmp_path):
    from bench import soakreport
    handovers = (_summary(900), _samples(30, handover_at=15), [])
    text, ok = soakreport.markdown([handovers], tmp_path / "SOAK.md")
    assert not ok and "RSS drift not judged" in text.splitlines()[2]
    one_leader = (_summary(0), _samples(60), [])
    text, ok = soakreport.markdown([handovers, one_leader], tmp_path / "SOAK.md")
    assert ok and text.splitlines()[2].startswith("**PASS**")
    assert "## Run 1: Leader handovers" in text and "## Run 2: One leader for the hour" in text
    assert "SOAK_ARGS='--handover-every 0'" in text
    # a failure in any run fails the page
    bad = (_summary(0, bound_twice=[["soak", "p", "u"]]), _samples(60), [])
    assert not soakreport.markdown([handovers, bad], tmp_path / "SOAK.md")[1]
