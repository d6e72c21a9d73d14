"""kube-scheduler 1.35 and pysched agree on random clusters (see tests/differential.py).

Two seeds run in ``make test``; ``python -m tests.differential --seeds 10`` gives the larger
report quoted in the notes.
"""

import pytest

from tests.differential import run_seed, summarize

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]


@pytest.mark.parametrize("seed", [101, 202])
async def test_feasible_sets_and_reasons_match_kube_scheduler(seed):
    mismatches = []
    result = await run_seed(seed, pods_per_seed=25, log=mismatches.append)
    s = summarize([result])
    assert s["pods"] == 25
    assert s["schedulable_pods"] > 0 and s["unschedulable_pods"] > 0, "the seed should exercise both outcomes"
    assert s["feasible_set_agreement"] == 1.0, "\n".join(mismatches)
    assert s["message_agreement_when_unschedulable"] == 1.0, "\n".join(mismatches)
    assert s["offline_engine_agreement"] == 1.0, "\n".join(mismatches)
