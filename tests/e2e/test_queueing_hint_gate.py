"""The one queueing hint where pysched offered better than upstream before 1.37, measured against kube-scheduler.

A preemptor kept off the only node by an existing low-priority pod's required anti-affinity (not by
its own terms) preempts that pod. Once the victim is gone, upstream's InterPodAffinity hint looks
only at the *preemptor's* terms, finds none, and skips the event: the preemptor waits for an
unrelated event or the unschedulable pool's 5-minute flush. pysched does the same by default
(it decides as kube-scheduler does), and with ``--feature-gates
PyschedExistingAntiAffinityDeleteHint=true`` it requeues the preemptor when the pod whose
anti-affinity matched it is deleted. The seconds from the victim's deletion to the bind are printed
for all three. kube-scheduler 1.37 requeues the preemptor too (its hint now looks at the deleted
pod's own anti-affinity), and so does pysched following 1.37; the gate matters for 1.35 and 1.36.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from pysched_dev.devcluster import KubeSchedulerProcess, binaries_version
from pysched_dev.testkit import create_nodes, create_pods, make_node

from .conftest import scheduler_config
from .preemption_kit import create_priority_classes, force_delete, pods_by_name, prio_pod

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

WAIT = 15.0   # well past any backoff (10 s at most) and any retry: what follows is the 5-minute flush


async def preemptor_after_victim(admin, start_scheduler, scheduler_name: str) -> float | None:
    """Seconds from the victim's deletion to the preemptor's bind, or None if not bound within WAIT."""
    await create_priority_classes(admin, {"low": 1, "high": 1000})
    await create_nodes(admin, [make_node("n1", cpu="4")])
    hates_web = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    loner = prio_pod("loner", "low", 1, cpu="100m", node="n1", labels={"app": "loner"}, scheduler=scheduler_name)
    loner["spec"]["affinity"] = hates_web
    await create_pods(admin, [loner])
    stop = start_scheduler()
    try:
        await create_pods(admin, [prio_pod("web", "high", 1000, cpu="100m", labels={"app": "web"},
                                           scheduler=scheduler_name)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:        # the victim is being evicted (graceful: it lingers)
            pods = await pods_by_name(admin)
            if pods["loner"]["metadata"].get("deletionTimestamp"):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the preemptor did not preempt its blocker")
        await asyncio.sleep(1.0)                  # the preemptor's retry fails while the victim lingers
        await force_delete(admin, "default", "loner")
        gone = time.monotonic()
        while time.monotonic() - gone < WAIT:
            if (await pods_by_name(admin))["web"]["spec"].get("nodeName"):
                return time.monotonic() - gone
            await asyncio.sleep(0.05)
        return None
    finally:
        stop()


def outcome(took: float | None) -> str:
    return f"not bound within {WAIT:.0f}s" if took is None else f"bound after {took:.2f}s"


async def test_kube_scheduler_waits_after_the_anti_affinity_victim_is_gone_before_1_37(control_plane, admin):
    """1.35/1.36 wait; 1.37's hint (isSchedulableAfterAssignedPodChange) requeues the preemptor."""
    def start():
        ks = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": "kube-hint"}]}).start()
        return ks.stop
    took = await preemptor_after_victim(admin, start, "kube-hint")
    print(f"kube-scheduler {binaries_version()}: {outcome(took)}")
    if binaries_version() >= (1, 37):
        assert took is not None and took < WAIT
    else:
        assert took is None


@pytest.mark.parametrize("gate", [False, True], ids=["upstream-default", "gate-on"])
async def test_pysched_waits_as_upstream_unless_the_gate_is_on(control_plane, admin, scheduler_factory, gate):
    args = ["--feature-gates", "PyschedExistingAntiAffinityDeleteHint=true"] if gate else []

    def start():
        proc = scheduler_factory(scheduler_config(), extra_args=args).start()
        return proc.close
    took = await preemptor_after_victim(admin, start, "pysched")
    print(f"pysched {binaries_version()} gate={gate}: {outcome(took)}")
    if gate or binaries_version() >= (1, 37):   # 1.37 does it by default, as upstream
        assert took is not None and took < WAIT
    else:
        assert took is None
