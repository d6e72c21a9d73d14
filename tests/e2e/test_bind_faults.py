"""Binds that fail mid-burst never lose a pod or bind one twice, judged by the API server's audit log;
gangs whose binds fail end whole; a failed attempt's condition never lands after the pod's binding.

kube-apiserver answers a binding it could not write during an etcd outage with ``409 Operation
cannot be fulfilled on pods/binding ...: rpc error: code = Unavailable``; a 409 is therefore not
proof that the pod is bound. Two ways to get there: a fault proxy that gives that answer to chosen
binds, before forwarding them (the write never happened) or after (it did) - deterministic, every
pod's fate known in advance - and a real etcd kill -9 during a burst, restarted 5 seconds later.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time

import pytest

from pysched.metrics import METRICS
from pysched.podrecovery import ASSUMED_UNBOUND, PodRecovery
from pysched_dev.devcluster import ControlPlane
from pysched_dev.faultproxy import DELAY, LIE, PASS, REFUSE, FaultProxy, etcd_unavailable
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .auditkit import audit_policy, audited_plane, successful_binds
from .conftest import SchedulerProcess, scheduler_config, wait_for
from .inprocess import in_process_app
from .podgroup_kit import LABEL, create_podgroup, install_crd, podgroup
from .preemption_kit import force_delete
from .test_scheduling import assert_no_overcommit

pytestmark = pytest.mark.e2e

BIND_AUDIT = audit_policy(("", ["pods/binding"]), verbs=("create",))
BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
POD_STATUS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/status$")
GPU = "nvidia.com/gpu"


def too_many_requests(name: str) -> tuple[int, dict]:
    return 429, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
                 "details": {"name": name, "kind": "pods/binding", "retryAfterSeconds": 1}, "code": 429}


def internal_error(name: str) -> tuple[int, dict]:
    return 500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": f'Internal error occurred: binding "{name}"', "reason": "InternalError", "code": 500}


@pytest.fixture
def control_plane():
    yield from audited_plane(BIND_AUDIT)


async def assert_every_pod_bound_once(cp: ControlPlane, admin, names: set[str], *,
                                      unanswered_ok: bool = False) -> None:
    """Every pod bound, by exactly one binding the API server answered 2xx. ``unanswered_ok``: during
    an etcd outage a binding can take effect while the API server answers it with an error (the
    write committed after its timeout); such a pod has no 2xx binding but must have had an attempt
    answered with an error, and no second binding may follow it."""
    pods = await list_pods(admin, "default")
    pending = sorted(p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName"))
    assert not pending, f"{len(pending)} pods left Pending: {pending[:10]}"
    per_pod = successful_binds(cp)
    missing = names - set(per_pod)
    if unanswered_ok and missing:
        failed = {e["objectRef"]["name"] for e in cp.audit_events()
                  if (e.get("objectRef") or {}).get("subresource") == "binding"
                  and e.get("stage") == "ResponseComplete" and (e.get("responseStatus") or {}).get("code", 0) >= 400}
        assert missing <= failed, f"bound without any binding the API server recorded: {sorted(missing - failed)}"
        print(f"{len(missing)} binding(s) took effect although the API server answered them with an error")
        missing = set()
    assert set(per_pod) <= names and not missing, sorted(missing)[:10]
    twice = {n: c for n, c in per_pod.items() if c != 1}
    assert not twice, f"pods bound more than once: {twice}"
    await assert_no_overcommit(admin)


async def test_a_409_from_an_etcd_outage_is_retried_and_a_bind_that_took_effect_is_kept(
        control_plane, admin, tmp_path):
    """Every 7th pod's first bind is refused with the etcd-outage 409 (never forwarded): it must be
    bound on a second try. Every 7th+3 pod's first bind goes through but is answered with the same
    409: the scheduler must find it bound and not try again."""
    cp = control_plane
    n_pods = 280
    refused = {f"p-{i:03d}" for i in range(0, n_pods, 7)}
    lied = {f"p-{i:03d}" for i in range(3, n_pods, 7)}
    seen: collections.Counter = collections.Counter()

    def decide(method: str, path: str):
        m = BINDING.match(path)
        if method != "POST" or m is None:
            return PASS, None
        name = m.group(2)
        seen[name] += 1
        if seen[name] == 1 and name in refused:
            return REFUSE, etcd_unavailable(name)
        if seen[name] == 1 and name in lied:
            return LIE, etcd_unavailable(name)
        return PASS, None

    proxy = FaultProxy(cp, decide).start()
    sched = SchedulerProcess(cp, tmp_path, scheduler_config(), kubeconfig=proxy.kubeconfig())
    try:
        await create_nodes(admin, [make_node(f"n{i}", cpu="8", memory="64Gi") for i in range(10)])
        names = {f"p-{i:03d}" for i in range(n_pods)}
        await create_pods(admin, [make_pod(n, cpu="100m") for n in sorted(names)])
        sched.start()

        async def all_bound():
            return all(p["spec"].get("nodeName") for p in await list_pods(admin, "default"))

        await wait_for(all_bound, 120, what="every pod bound")
        await assert_every_pod_bound_once(cp, admin, names)
        # The proxy's count of binding requests per pod: refused ones twice, the rest once - a pod
        # whose bind took effect is not bound again.
        assert {n: seen[n] for n in refused} == dict.fromkeys(refused, 2)
        assert {n: seen[n] for n in names - refused} == dict.fromkeys(names - refused, 1)
        assert await sched.metric("pysched_bind_conflicts_total", profile="pysched",
                                  reason="still_pending") == len(refused)
        assert await sched.metric("pysched_bind_conflicts_total", profile="pysched",
                                  reason="took_effect") == len(lied)
        assert await sched.metric("pysched_pods_recovered_total", reason="not_queued") == 0
        log = sched.log()
        assert "bind failed; will retry" in log and "bind reported an error but took effect" in log
        assert "dropping the pod" not in log
    finally:
        sched.close()
        proxy.stop()


async def test_etcd_killed_mid_burst_every_pod_is_bound_exactly_once(control_plane, admin, scheduler_factory):
    """A real outage: etcd killed (SIGKILL) while a 1,000-pod burst is being bound, started again
    5 seconds later with its data. Whatever the API server answered meanwhile, every pod ends bound,
    once, and no node is over its allocatable."""
    cp = control_plane
    await create_nodes(admin, [make_node(f"n{i:02d}", cpu="16", memory="64Gi") for i in range(20)])
    names = {f"p-{i:04d}" for i in range(1000)}
    await create_pods(admin, [make_pod(n, cpu="100m", memory="128Mi") for n in sorted(names)])
    # Without leader election: the outage plus the API server's recovery can outlast renewDeadline,
    # and a leader that gives up exits for its Deployment to restart it - not what is tested here.
    sched = scheduler_factory(scheduler_config(clientConnection={"qps": 2000, "burst": 2000})).start()

    async def bound():
        return sum(1 for p in await list_pods(admin, "default") if p["spec"].get("nodeName"))

    await wait_for(lambda: _at_least(bound, 100), 90, interval=0.02, what="burst under way")
    cp.kill_etcd()
    killed_at = time.monotonic()
    await asyncio.sleep(5)
    await asyncio.to_thread(cp.restart_etcd)
    print(f"etcd down for {time.monotonic() - killed_at:.1f}s")
    assert sched.proc.poll() is None, "the scheduler must survive an etcd outage"

    async def all_bound():
        try:
            return await bound() == len(names)
        except Exception:  # noqa: BLE001 - the API server may still be reconnecting to etcd
            return False

    await wait_for(all_bound, 240, what="every pod bound after the outage")
    await assert_every_pod_bound_once(cp, admin, names, unanswered_ok=True)
    assert "dropping the pod" not in sched.log()


async def _at_least(fn, n):
    try:
        return await fn() >= n
    except Exception:  # noqa: BLE001
        return False


async def test_the_safety_net_asks_the_api_before_forgetting_an_assumed_pod(control_plane, admin):
    """An assumed pod with no bind under way that the informer shows pending: forgotten and queued
    again only when the API server says it is pending; kept when it is bound (the watch lags)."""
    app = await in_process_app(control_plane, scheduler_config())
    await create_nodes(admin, [make_node("a"), make_node("b")])
    await create_pods(admin, [make_pod("lost"), make_pod("lagging")])
    await app.start_informers()
    try:
        popped = {q.pod.name: q for q in (app.queue.pop_nowait(), app.queue.pop_nowait())}
        app.tasks[1].cancel()   # the pod informer stops here: it never sees what follows
        for q in popped.values():   # binding cycles that "succeeded" without binding
            app.cache.assume(q.pod, "a")
            app.queue.done(q.pod.uid)
        lagging = popped["lagging"].pod
        await admin.bind_pod("default", "lagging", lagging.uid, "a")
        net = PodRecovery(pending=app.handlers.pending, cache=app.cache, queue=app.queue,
                          working=app.scheduler.working, client=app.client, interval=3600)
        before = METRICS.pods_recovered.labels(ASSUMED_UNBOUND).value
        assert await net.check() == 0          # first sighting
        assert await net.check() == 1          # "lost" is pending on the API server: put back
        lost_uid = popped["lost"].pod.uid
        assert not app.cache.is_assumed(lost_uid) and app.queue.get(lost_uid).where == "active"
        assert app.cache.is_assumed(lagging.uid) and lagging.uid not in app.queue   # bound: kept
        assert METRICS.pods_recovered.labels(ASSUMED_UNBOUND).value == before + 1
    finally:
        await app.shutdown()


@pytest.mark.parametrize("compatible", [False, True], ids=["pysched", "schedulerPluginsCompatible"])
async def test_gangs_whose_binds_fail_end_whole(control_plane, admin, tmp_path, compatible):
    """Ten gangs of four onto room for six. The last member's binds of every gang fail - 429, then
    500, then etcd's 409, then they go through - while its siblings bind: a member allowed with
    its group is bound again on its node until it is, so no gang ends part bound, in either mode,
    and no pod is bound twice. (Released instead, the member went back to the queue and other
    gangs took its room: gangs ended 3 of 4 bound.)"""
    cp = control_plane
    gangs, size, nodes = 10, 4, 6
    faults = (too_many_requests, internal_error, etcd_unavailable)
    flaky = {f"g{g}-{size - 1}" for g in range(gangs)}
    seen: collections.Counter = collections.Counter()

    def decide(method: str, path: str):
        m = BINDING.match(path)
        if method != "POST" or m is None or m.group(2) not in flaky:
            return PASS, None
        name = m.group(2)
        seen[name] += 1
        if seen[name] <= len(faults):
            return REFUSE, faults[seen[name] - 1](name)
        return PASS, None

    await install_crd(admin)
    proxy = FaultProxy(cp, decide).start()
    profile: dict = {"schedulerName": "pysched", "plugins": {
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]}},
        "pluginConfig": [{"name": "Coscheduling", "args": {"schedulerPluginsCompatible": compatible}}]}
    sched = SchedulerProcess(cp, tmp_path, scheduler_config(profiles=[profile]), kubeconfig=proxy.kubeconfig())
    try:
        await create_nodes(admin, [make_node(f"n{i}", cpu="64", memory="256Gi", extended={GPU: str(size)})
                                   for i in range(nodes)])
        names = [f"g{g}" for g in range(gangs)]
        await asyncio.gather(*(create_podgroup(admin, podgroup(g, "default", size, scheduleTimeoutSeconds=10))
                               for g in names))
        sched.start()
        await sched.wait_log("caches synced", 60)
        await create_pods(admin, [make_pod(f"{g}-{i}", labels={LABEL: g}, cpu="100m", extended={GPU: "1"})
                                  for g in names for i in range(size)])

        last: dict = {"bound": -1, "since": time.monotonic()}

        async def settled():
            bound = {p["metadata"]["name"] for p in await list_pods(admin, "default") if p["spec"].get("nodeName")}
            now = time.monotonic()
            if len(bound) != last["bound"]:
                last.update(bound=len(bound), since=now)
                return None
            busy = (await sched.metric("scheduler_cache_size", type="assumed_pods")
                    or await sched.metric("pysched_podgroups_waiting"))
            return bound if not busy and now - last["since"] >= 5 else None
        bound = await wait_for(settled, 150, interval=0.5, what="the scheduler settled")
        per_gang = {g: sum(1 for i in range(size) if f"{g}-{i}" in bound) for g in names}
        partial = {g: n for g, n in per_gang.items() if 0 < n < size}
        assert not partial, f"gangs left part bound: {partial}"
        assert sorted(per_gang.values()).count(size) == nodes, per_gang
        retried = {n for n in flaky if n in bound}
        assert retried and all(seen[n] == len(faults) + 1 for n in retried), dict(seen)
        per_pod = successful_binds(cp)
        assert set(per_pod) == bound and all(c == 1 for c in per_pod.values()), per_pod
        assert await sched.metric("pysched_bind_retries_total", profile="pysched") >= len(faults) * len(retried)
        await assert_no_overcommit(admin)
    finally:
        sched.close()
        proxy.stop()


async def test_a_failed_attempts_condition_never_lands_after_the_binding(control_plane, admin, tmp_path):
    """The pod fails (no room) and its PodScheduled=False patch reaches the API server 3 s late;
    room appears at once and the next attempt binds it. The binding waits for the patch already
    sent, so the pod ends bound with PodScheduled=True, as kube-scheduler leaves it (it writes the
    condition before retrying). Sent in the background with no such wait, the False landed after
    the binding and stayed."""
    cp = control_plane
    delay = 3.0
    patched: list[str] = []

    def decide(method: str, path: str):
        m = POD_STATUS.match(path)
        if method == "PATCH" and m is not None and m.group(2) == "p":
            patched.append(m.group(2))
            return DELAY, delay
        return PASS, None

    proxy = FaultProxy(cp, decide).start()
    sched = SchedulerProcess(cp, tmp_path, scheduler_config(), kubeconfig=proxy.kubeconfig())
    try:
        await create_nodes(admin, [make_node("n0", cpu="1", memory="8Gi")])
        await create_pods(admin, [make_pod("hog", cpu="1", node_name="n0")])
        sched.start()
        await sched.wait_log("caches synced", 60)
        await create_pods(admin, [make_pod("p", cpu="1")])

        async def patch_sent():
            return bool(patched)
        await wait_for(patch_sent, 30, interval=0.05, what="p's failed attempt's status patch sent")
        await force_delete(admin, "default", "hog")     # room: the next attempt binds at once

        async def bound():
            pods = {q["metadata"]["name"]: q for q in await list_pods(admin, "default")}
            return pods["p"] if pods["p"]["spec"].get("nodeName") else None
        await wait_for(bound, 30, interval=0.05, what="p bound")
        await asyncio.sleep(delay + 1)                  # whatever was sent has landed
        pod = next(q for q in await list_pods(admin, "default") if q["metadata"]["name"] == "p")
        cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert cond["status"] == "True", cond
    finally:
        sched.close()
        proxy.stop()
