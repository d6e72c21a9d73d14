"""The PodGroup status controller against a real API server: the component's CRD, member pods bound
and moved through their phases by the test (as a scheduler and a kubelet would), namespaces kept
apart, an absent CRD tolerated, and only the leader writing - judged by the API server's audit log."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from pysched.apis.core.errors import ApiError
from pysched_dev.testkit import create_nodes, create_pods, make_node

from . import auditkit
from .auditkit import audit_policy
from .conftest import scheduler_config, wait_for
from .podgroup_kit import (
    bind,
    create_podgroup,
    get_podgroup,
    install_crd,
    member,
    podgroup,
    set_phase,
    wait_status,
)
from .test_ha import LE, _holder_is
from .test_ha import holder as _holder

pytestmark = pytest.mark.e2e

AUDIT_POLICY = audit_policy(("scheduling.x-k8s.io", ["podgroups", "podgroups/status"]),
                            ("coordination.k8s.io", ["leases"]))


async def test_crd_schema_is_scheduler_plugins(admin):
    await install_crd(admin)
    # minMember's minimum is 1; quantities in minResources are validated
    for bad in (podgroup("zero", "default", 0), podgroup("q", "default", 1, minResources={"cpu": "lots"})):
        with pytest.raises(ApiError) as exc:
            await create_podgroup(admin, bad)
        assert exc.value.status == 422, exc.value
    # an old manifest with status.scheduled (removed upstream) still applies
    old = podgroup("old", "default", 2, minResources={"cpu": "2", "nvidia.com/gpu": 4}, scheduleTimeoutSeconds=30)
    old["status"] = {"scheduled": 1, "phase": "Running"}
    created = await create_podgroup(admin, old)
    assert created["spec"] == {"minMember": 2, "minResources": {"cpu": "2", "nvidia.com/gpu": 4},
                               "scheduleTimeoutSeconds": 30}
    assert "scheduled" not in (created.get("status") or {})


async def test_status_follows_member_pods_per_namespace(admin, scheduler_factory):
    await create_nodes(admin, [make_node("n1"), make_node("n2")])
    # ``on``: the controller whatever the profiles (``auto`` runs it only beside Coscheduling).
    sched = scheduler_factory(scheduler_config(), extra_args=["--podgroup-controller=on"]).start()
    # No CRD yet: the scheduler starts all the same and says why the controller waits.
    await sched.wait_log("podgroup controller waiting", 60)
    await sched.wait_log("caches synced", 60)
    await install_crd(admin)
    await sched.wait_log("podgroup controller started", 60)

    await create_podgroup(admin, podgroup("train", "team-a", 3, scheduleTimeoutSeconds=30))
    await create_podgroup(admin, podgroup("train", "team-b", 2))      # same name, other namespace
    await create_podgroup(admin, podgroup("flaky", "team-a", 2))
    await wait_status(admin, "team-a", "train", phase="Pending")
    await create_pods(admin, [member(f"a{i}", "team-a", "train", owner="train-job") for i in range(3)]
                      + [member("b0", "team-b", "train")] + [member(f"f{i}", "team-a", "flaky") for i in range(2)])

    s = await wait_status(admin, "team-a", "train", phase="Scheduling", occupiedBy="team-a/train-job")
    start = datetime.datetime.fromisoformat(s["scheduleStartTime"].replace("Z", "+00:00"))
    assert abs((datetime.datetime.now(datetime.UTC) - start).total_seconds()) < 120
    await bind(admin, "team-a", "a0", "n1")
    await bind(admin, "team-a", "a1", "n2")
    await set_phase(admin, "team-a", "a0", "Running")
    await set_phase(admin, "team-a", "a1", "Running")
    await wait_status(admin, "team-a", "train", phase="Scheduling", running=2)
    await bind(admin, "team-a", "a2", "n1")
    await set_phase(admin, "team-a", "a2", "Running")
    await wait_status(admin, "team-a", "train", phase="Running", running=3, succeeded=None)
    for i in range(3):
        await set_phase(admin, "team-a", f"a{i}", "Succeeded")
    await wait_status(admin, "team-a", "train", phase="Finished", succeeded=3, running=None)

    await bind(admin, "team-a", "f0", "n1")
    await bind(admin, "team-a", "f1", "n2")
    await set_phase(admin, "team-a", "f0", "Running")
    await set_phase(admin, "team-a", "f1", "Failed")
    await wait_status(admin, "team-a", "flaky", phase="Failed", running=1, failed=1)

    # team-b/train has one pod of two: merged with team-a's three it would have left Pending long ago.
    other = (await get_podgroup(admin, "team-b", "train"))["status"]
    assert other == {"phase": "Pending"}, other
    # A Finished group is final: a pod failing afterwards changes nothing.
    await set_phase(admin, "team-a", "a0", "Failed")
    await wait_status(admin, "team-a", "flaky", phase="Failed")
    assert (await get_podgroup(admin, "team-a", "train"))["status"]["phase"] == "Finished"
    assert sched.terminate() == 0, sched.log()[-3000:]     # SIGTERM: the controller's watcher stops too


async def test_controller_off_writes_nothing(admin, scheduler_factory):
    await install_crd(admin)
    sched = scheduler_factory(scheduler_config(), extra_args=["--podgroup-controller=off"]).start()
    await sched.wait_log("caches synced", 60)
    await create_podgroup(admin, podgroup("g", "default", 1))
    await create_pods(admin, [member("m0", "default", "g")])
    # the same setup gets a status within seconds when the controller runs (test above)
    await asyncio.sleep(5)
    assert not (await get_podgroup(admin, "default", "g")).get("status")
    assert "podgroup controller" not in sched.log()
    sched.terminate()


@pytest.fixture
def audited_plane():
    yield from auditkit.audited_plane(AUDIT_POLICY, extra_users=["r1", "r2"])


def _ts(event: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


async def test_only_the_leader_writes_podgroup_status(audited_plane, tmp_path):
    from pysched.client.auth import load_kubeconfig
    from pysched.client.rest import KubeClient

    from .conftest import SchedulerProcess

    cp = audited_plane
    admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
    cfg = scheduler_config(leaderElection=LE)
    r1, r2 = (SchedulerProcess(cp, tmp_path, cfg, n, kubeconfig=cp.kubeconfig_for_user(n),
                               extra_args=["--identity", n, "--podgroup-controller=on"]) for n in ("r1", "r2"))
    try:
        await install_crd(admin)
        await create_nodes(admin, [make_node("n1")])
        r1.start()
        assert await wait_for(lambda: _holder(admin), 60, what="r1 leads") == "r1"
        r2.start()
        await r2.wait_log("caches synced", 60)
        await r1.wait_log("podgroup controller started", 60)

        await create_podgroup(admin, podgroup("g", "default", 2))
        await create_pods(admin, [member(f"m{i}", "default", "g") for i in range(2)])
        await wait_status(admin, "default", "g", phase="Scheduling")
        for i in range(2):
            await bind(admin, "default", f"m{i}", "n1")
            await set_phase(admin, "default", f"m{i}", "Running")
        await wait_status(admin, "default", "g", phase="Running", running=2)
        assert "podgroup controller" not in r2.log()      # a follower does not even watch

        r1.kill()
        assert await wait_for(lambda: _holder_is(admin, "r2"), 40, interval=0.1, what="r2 takes over") == "r2"
        await r2.wait_log("podgroup controller started", 30)
        await set_phase(admin, "default", "m0", "Succeeded")
        await set_phase(admin, "default", "m1", "Succeeded")
        await wait_status(admin, "default", "g", phase="Finished", succeeded=2, running=None)

        events = cp.audit_events()
        writes = [e for e in events if (e.get("objectRef") or {}).get("resource") == "podgroups"
                  and e.get("stage") == "ResponseComplete" and e["user"]["username"] in ("r1", "r2")]
        assert all((e["objectRef"].get("subresource") == "status" and e["verb"] == "patch") for e in writes), writes
        leases = [e for e in events if (e.get("objectRef") or {}).get("resource") == "leases"
                  and e.get("stage") == "ResponseComplete"
                  and 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300]
        r2_acquired = min(_ts(e) for e in leases if e["user"]["username"] == "r2")
        by_r1 = [e for e in writes if e["user"]["username"] == "r1"]
        by_r2 = [e for e in writes if e["user"]["username"] == "r2"]
        assert by_r1 and by_r2, (len(by_r1), len(by_r2))
        assert all(_ts(e) >= r2_acquired for e in by_r2), "the follower wrote PodGroup status before it led"
    finally:
        for r in (r1, r2):
            r.close()
        await admin.close()
