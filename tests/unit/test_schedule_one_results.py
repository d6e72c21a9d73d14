"""``Scheduler.last_results`` keeps the most recent outcomes only (a long-running leader must not grow)."""

from __future__ import annotations

from pysched.schedule_one import LAST_RESULTS_LIMIT, Scheduler


def test_the_oldest_outcome_goes_first_and_a_repeat_counts_as_new():
    sched = Scheduler.__new__(Scheduler)   # only the results store is exercised
    sched.last_results = {}
    for i in range(LAST_RESULTS_LIMIT):
        sched._note_result(f"u{i}", {"node": "n"})
    sched._note_result("u0", {"error": "again"})          # u0 is now the newest
    sched._note_result("extra", {"node": "n"})
    assert len(sched.last_results) == LAST_RESULTS_LIMIT
    assert "u1" not in sched.last_results and sched.last_results["u0"] == {"error": "again"}
    assert list(sched.last_results)[-1] == "extra"
