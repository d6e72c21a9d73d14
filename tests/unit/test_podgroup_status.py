"""PodGroup status from member pods: scheduler-plugins' PodGroup controller rules (controllers.podgroup_status)."""

from __future__ import annotations

import pytest

from pysched.controllers.podgroup_status import (
    FAILED,
    FINISHED,
    PENDING,
    RUNNING,
    SCHEDULING,
    next_status,
    occupied_by,
    status_patch,
    step,
)
from pysched.controllers.podgroup_status import pod_counts as counts

NOW = "2026-01-02T03:04:05Z"


def pg(min_member=3, **status) -> dict:
    spec = {} if min_member is None else {"minMember": min_member}
    return {"metadata": {"name": "g", "namespace": "ns"}, "spec": spec, "status": status}


def pod(name, phase="Pending", owner="job-a", created="2026-01-01T00:00:00Z") -> dict:
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created,
            "labels": {"scheduling.x-k8s.io/pod-group": "g"}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "u"}]
    return {"metadata": meta, "status": {"phase": phase}}


def test_new_group_without_enough_pods_is_pending():
    assert next_status(pg(3), [pod("a"), pod("b")], NOW) == {"phase": PENDING}


def test_enough_pods_move_pending_to_scheduling_with_owner_and_start_time():
    s = next_status(pg(3), [pod("a"), pod("b"), pod("c")], NOW)
    assert s == {"phase": SCHEDULING, "occupiedBy": "ns/job-a", "scheduleStartTime": NOW}


@pytest.mark.parametrize("phases,expected", [
    (["Running", "Running", "Pending"], SCHEDULING),           # run+succ < minMember
    (["Running", "Running", "Running"], RUNNING),
    (["Running", "Succeeded", "Running"], RUNNING),            # run+succ >= minMember
    (["Succeeded"] * 3, FINISHED),
    (["Running", "Running", "Failed"], FAILED),                # failed and failed+run+succ >= minMember
    (["Failed", "Pending", "Pending"], SCHEDULING),            # failed, but the sum is below minMember
    (["Succeeded", "Succeeded", "Succeeded", "Failed"], FINISHED),   # Finished wins over Failed
])
def test_phase_rules(phases, expected):
    pods = [pod(f"p{i}", ph) for i, ph in enumerate(phases)]
    assert next_status(pg(3), pods, NOW)["phase"] == expected


def test_counts_by_pod_phase_and_zero_counts_left_out():
    pods = [pod("a", "Running"), pod("b", "Running"), pod("c", "Succeeded"), pod("d", "Failed"), pod("e")]
    assert counts(pods) == (2, 1, 1)
    s = next_status(pg(5), pods, NOW)
    assert (s["running"], s["succeeded"], s["failed"]) == (2, 1, 1)
    s = next_status(pg(2, phase=RUNNING, running=2), [pod("a"), pod("b")], NOW)
    assert "running" not in s and s["phase"] == SCHEDULING


def test_final_phases_never_change():
    for final in (FINISHED, FAILED):
        status = {"phase": final, "succeeded": 3}
        assert next_status(pg(3, **status), [pod("a", "Running")], NOW) == status


def test_losing_members_goes_back_to_pending():
    s = next_status(pg(3, phase=RUNNING, running=3, occupiedBy="ns/job-a"), [pod("a", "Running")], NOW)
    assert s["phase"] == PENDING and s["running"] == 1 and s["occupiedBy"] == "ns/job-a"


def test_one_step_at_a_time_as_upstream():
    """The step rule itself: "" -> Pending, Pending -> Scheduling, then the recount."""
    pods = [pod(f"p{i}", "Running") for i in range(3)]
    s1 = step({}, 3, pods, NOW)
    assert s1["phase"] == PENDING
    s2 = step(s1, 3, pods, NOW)
    assert s2["phase"] == SCHEDULING
    assert step(s2, 3, pods, NOW)["phase"] == RUNNING


def test_schedule_start_time_is_kept_once_set():
    s = next_status(pg(1, phase=PENDING, scheduleStartTime="2025-01-01T00:00:00Z"), [pod("a")], NOW)
    assert s["scheduleStartTime"] == "2025-01-01T00:00:00Z"


def test_occupied_by_sorted_owner_names_of_the_oldest_pod():
    p = pod("a")
    p["metadata"]["ownerReferences"] = [{"name": "z"}, {"name": "b"}]
    assert occupied_by(p) == "ns/b,ns/z"
    pods = [pod("new", owner="later", created="2026-01-01T00:00:09Z"), pod("old", owner="first")]
    assert next_status(pg(2), pods, NOW)["occupiedBy"] == "ns/first"
    assert "occupiedBy" not in next_status(pg(1), [pod("bare", owner=None)], NOW)


def test_absent_min_member_is_zero_but_needs_one_pod_to_leave_pending():
    assert next_status(pg(None), [], NOW) == {"phase": PENDING}
    assert next_status(pg(None), [pod("a", "Running")], NOW)["phase"] == FINISHED   # Go: succeeded 0 >= 0


def test_scheduled_field_of_old_releases_is_dropped():
    s = next_status(pg(1, phase=PENDING, scheduled=4), [pod("a")], NOW)
    assert "scheduled" not in s


def test_status_patch_sets_changes_and_removes_fields():
    old = {"phase": RUNNING, "running": 3, "occupiedBy": "ns/j"}
    new = {"phase": FINISHED, "succeeded": 3, "occupiedBy": "ns/j"}
    assert status_patch(old, new) == {"phase": FINISHED, "succeeded": 3, "running": None}
    assert status_patch(new, dict(new)) == {}
