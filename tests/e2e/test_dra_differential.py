"""kube-scheduler and pysched allocate the same DRA devices (resource.k8s.io/v1), at the control
plane's release (1.37.2, and 1.35.4 in make test's oldest-release leg; both schedulers follow it).

Each scheduler runs alone on a fresh control plane holding every case of ``dra_kit`` (a fake GPU
driver's DeviceClasses and ResourceSlices, claims, a claim template, pods): kube-scheduler first,
then pysched. Compared per case: the node of each pod (or, for a pod left pending, its
FailedScheduling reason without the PostFilter verdicts), and for each claim its
``status.allocation`` (results sorted by request and device; config and nodeSelector as written),
the pods in ``reservedFor`` and its finalizers. pysched runs as tests/differential.py runs it
(the control plane's admin), and once more as the ServiceAccount of ``manifests/`` (its RBAC).

kube-scheduler's outcome is also checked against the outcome written down by hand in each case:
the cases do what they say. The hand-written outcomes follow the release (``dra_kit.release()``):
from 1.36 every allocation carries ``allocationTimestamp`` (compared as present, not by value); the
PostFilter verdicts that differ (1.35's "still not schedulable", 1.37's none) are only in the whole
messages, compared between the two schedulers. ``python -m pytest tests/e2e/test_dra_differential.py -k does_what -s``
prints kube-scheduler's outcomes (normalized, as compared).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from .dra_kit import CASES, Run, run_cases

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

# One run per scheduler for all the cases (a failed run is remembered too: its error is raised for
# every case instead of running again).
_RUNS: dict[str, Run | BaseException] = {}


async def outcome_of(who: str) -> Run:
    if who not in _RUNS:
        try:
            _RUNS[who] = await run_cases(who)
        except Exception as exc:  # noqa: BLE001 - re-raised below, and for every later case
            _RUNS[who] = exc
        else:
            run = _RUNS[who]
            print(f"\n{who}: {run.seconds:.1f}s, unsettled={run.unsettled}\n"
                  + json.dumps(run.outcomes, indent=1, sort_keys=True))
    run = _RUNS[who]
    if isinstance(run, BaseException):
        raise AssertionError(f"the {who} run failed: {run!r}") from run
    return run


IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_kube_scheduler_does_what_the_case_says(case):
    kube = await outcome_of("kube")
    assert case.name not in kube.unsettled, kube.explain(case.name)
    assert kube.outcomes[case.name] == case.expected(), kube.explain(case.name)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_pysched_allocates_as_kube_scheduler(case):
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched")
    assert ours.outcomes[case.name] == kube.outcomes[case.name], ours.explain(case.name)
    # and every FailedScheduling message whole, PostFilter verdicts included (case i aside: which
    # of its pods fail depends on the order they were taken in)
    if case.name != "i":
        prefix = f"{case.namespace}/"
        assert ({k: v for k, v in ours.messages.items() if k.startswith(prefix)}
                == {k: v for k, v in kube.messages.items() if k.startswith(prefix)})


async def test_pysched_as_its_serviceaccount_allocates_as_kube_scheduler():
    """The same with the ClusterRole of manifests/rbac.yaml: nothing DynamicResources reads or writes
    (claims, their status, classes, slices) is forbidden."""
    kube = await outcome_of("kube")
    ours = await outcome_of("pysched-rbac")
    differ = sorted(c for c in kube.outcomes if ours.outcomes.get(c) != kube.outcomes[c])
    assert differ == [], "\n".join(ours.explain(c) for c in differ[:2])
    assert "forbidden" not in ours.log_tail.lower(), ours.log_tail


@pytest.mark.parametrize("who", ["kube", "pysched"])
async def test_no_device_is_given_twice(who):
    """Over every claim of every case, no device is in two allocations (admin access aside)."""
    run = await outcome_of(who)
    twice = sorted(d for d, n in Counter(run.devices).items() if n > 1)
    assert twice == [], f"{who}: devices allocated more than once: {twice}"
    assert run.devices, f"{who}: allocated nothing"
