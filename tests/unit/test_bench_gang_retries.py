"""bench.gang_retries: what it counts from a scheduler's /metrics, the table it writes, and that it
refuses a scheduler it does not know."""

from __future__ import annotations

from bench import gang_retries, prom

METRICS = """\
scheduler_schedule_attempts_total{profile="gangs",result="scheduled"} 4
scheduler_schedule_attempts_total{profile="gangs",result="unschedulable"} 120
scheduler_schedule_attempts_total{profile="gangs",result="error"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 7
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 1
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 4
"""


def test_counts_failed_attempts_and_patches_only():
    assert gang_retries.counts(prom.parse(METRICS)) == (123.0, 8.0)


def test_table_gives_the_median_and_every_run():
    rows = [{"scheduler": "a", "failed_attempts": f, "patches": p, "first_whole_s": 0.2, "loser_bound": 0}
            for f, p in ((10, 1), (30, 3), (20, 2))]
    text = gang_retries.table(rows, 12)
    assert "| a | 20 (10, 30, 20) | 2 | 0.20 | 0 |" in text.splitlines()


def test_an_unknown_scheduler_is_refused(capsys):
    assert gang_retries.main(["--schedulers", "pysched,nosuch"]) == 2
    assert "unknown ['nosuch']" in capsys.readouterr().err


def test_the_compatible_profile_sets_scheduler_plugins_rules():
    assert "pluginConfig" not in gang_retries.profile("pysched")
    assert gang_retries.profile("pysched-compatible")["pluginConfig"] == [
        {"name": "Coscheduling", "args": {"schedulerPluginsCompatible": True}}]
