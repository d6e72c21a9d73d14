"""Faults on a real control plane: API server restart, 409 on bind, node deleted mid-cycle, bad config."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from pysched.apis import config as configmod
from pysched.metrics import METRICS
from pysched_dev.devcluster import free_port
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod

from .conftest import REPO, scheduler_config, wait_for
from .inprocess import PauseBeforeBind, in_process_app, paused_profile
from .test_scheduling import assert_no_overcommit

pytestmark = pytest.mark.e2e


async def test_apiserver_restart_mid_burst_loses_nothing(control_plane, admin, scheduler_factory):
    await create_nodes(admin, [make_node(f"n{i}", cpu="8", memory="64Gi") for i in range(10)])
    await create_pods(admin, [make_pod(f"p-{i:03d}", cpu="100m") for i in range(600)])
    # Without leader election: a leader would rightly give up after renewDeadline of outage and exit
    # for its Deployment to restart it; here the point is reconnecting and relisting.
    cfg = scheduler_config(clientConnection={"qps": 60, "burst": 60})
    sched = scheduler_factory(cfg).start()

    async def bound():
        return sum(1 for p in await list_pods(admin, "default") if p["spec"].get("nodeName"))

    await wait_for(lambda: _at_least(bound, 100), 60, interval=0.05, what="burst under way")
    await asyncio.to_thread(control_plane.restart_apiserver, 120.0, 1.0)
    assert sched.proc.poll() is None, "the scheduler must survive an API server restart"
    await wait_for(lambda: _at_least(bound, 600), 180, what="all pods bound after the restart")
    pods = await list_pods(admin, "default")
    assert len(pods) == 600 and all(p["spec"].get("nodeName") for p in pods)
    await assert_no_overcommit(admin)
    log = sched.log()
    assert "watch interrupted; resuming" in log or "list failed; retrying" in log
    sched.terminate()


async def test_node_deleted_before_bind_pod_goes_elsewhere(control_plane, admin):
    PauseBeforeBind.reset()
    app = await in_process_app(control_plane, scheduler_config(profiles=[paused_profile()]), pause=True)
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                             "values": ["doomed"]}]}}]}}
    await create_nodes(admin, [make_node("doomed"), make_node("spare")])
    await create_pods(admin, [make_pod("p", affinity=prefer)])
    task = asyncio.create_task(app.run())
    await asyncio.wait_for(PauseBeforeBind.waiting.wait(), 30)
    assert PauseBeforeBind.nodes == ["doomed"] and app.cache.is_assumed(next(iter(app.cache.assumed)))
    await admin.request("DELETE", "/api/v1/nodes/doomed")
    await wait_for(lambda: _true("doomed" not in app.cache.nodes), 20, what="cache saw the node deletion")
    PauseBeforeBind.release.set()

    async def node_of_p():
        p = await admin.get("/api/v1/namespaces/default/pods/p")
        return p["spec"].get("nodeName")

    assert await wait_for(node_of_p, 30, what="p bound") == "spare"
    assert PauseBeforeBind.nodes[:2] == ["doomed", "spare"]
    app.request_stop()
    await task


async def test_bind_answered_409_for_a_pod_another_client_bound_is_not_retried(control_plane, admin):
    app = await in_process_app(control_plane, scheduler_config())
    await create_nodes(admin, [make_node("a"), make_node("b")])
    await create_pods(admin, [make_pod("p")])
    await app.start_informers()
    try:
        qpi = app.queue.pop_nowait()
        assert qpi is not None and qpi.pod.name == "p"
        fwk = app.frameworks["pysched"]
        assumed = app.cache.assume(qpi.pod, "b")
        # Another client binds the pod first.
        await admin.bind_pod("default", "p", qpi.pod.uid, "a")
        before = METRICS.bind_conflicts.labels("pysched", "already_bound").value
        from pysched.framework.cycle_state import CycleState
        await app.scheduler.binding_cycle(fwk, CycleState(), qpi, assumed, "b", 0.0, False, 0.0)
        assert METRICS.bind_conflicts.labels("pysched", "already_bound").value == before + 1
        assert "p" not in [q.pod.name for q in app.queue.pending()]
        await wait_for(lambda: _true(app.cache.pods.get(qpi.pod.uid) is not None
                                     and app.cache.pods[qpi.pod.uid].node_name == "a"), 10, what="cache shows p on a")
        assert not app.cache.is_assumed(qpi.pod.uid)
        assert "default/p" not in {p.key for p in app.cache.nodes["b"].pods.values()}
        events = (await admin.get("/api/v1/namespaces/default/events"))["items"]
        assert not [e for e in events if e.get("reason") == "FailedScheduling"]
    finally:
        await app.shutdown()


BAD_CONFIGS = {
    "unknown-field": ("profiles:\n- schedulerName: x\n  plugin: {}\n", "profiles[0].plugin: unknown field"),
    "bad-weight": ("profiles:\n- schedulerName: x\n  plugins:\n    score:\n      enabled:\n"
                   "      - {name: NodeResourcesFit, weight: -3}\n",
                   "profiles[0].plugins.score.enabled[0].weight"),
    "bad-type": ("percentageOfNodesToScore: lots\n", "percentageOfNodesToScore: expected an integer"),
    "unknown-plugin": ("profiles:\n- schedulerName: x\n  plugins:\n    filter:\n      enabled:\n      - {name: Nope}\n",
                       "plugin 'Nope' does not exist"),
    "bad-args": ("profiles:\n- schedulerName: x\n  pluginConfig:\n  - name: InterPodAffinity\n"
                 "    args: {hardPodAffinityWeight: 500}\n",
                 "profiles[0].pluginConfig[0].args.hardPodAffinityWeight"),
    "not-yaml": ("profiles: [\n", "not valid YAML"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_malformed_config_exits_nonzero_naming_the_field(tmp_path, case):
    body, expected = BAD_CONFIGS[case]
    path = tmp_path / "bad.yaml"
    head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    path.write_text(head + body if case != "not-yaml" else body)
    proc = subprocess.run([sys.executable, "-m", "pysched", "--config", str(path), "--kubeconfig", "/nonexistent"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr, proc.stderr


def test_write_config_to_prints_effective_defaults(tmp_path):
    out = tmp_path / "eff.yaml"
    proc = subprocess.run([sys.executable, "-m", "pysched", "--write-config-to", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    eff = configmod.parse(yaml.safe_load(out.read_text()))
    assert eff.leader_election.lease_duration == 15 and eff.profiles[0].scheduler_name == "pysched"
    text = out.read_text()
    assert "NodeResourcesFit" in text and "LeastAllocated" in text and "hardPodAffinityWeight: 1" in text


@pytest.mark.parametrize("command", ["run", "extender"])
def test_sigterm_while_the_api_server_is_unreachable_at_start_up(tmp_path, command):
    """pysched retries its first request (the server's version) forever against a closed port; SIGTERM still ends the
    process, with exit code 0 (a requested stop, not a failure)."""
    kubeconfig = tmp_path / "unreachable.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{free_port()}\n"
        "    insecure-skip-tls-verify: true\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(scheduler_config()))
    args = [sys.executable, "-m", "pysched", command, "--config", str(cfg), "--kubeconfig", str(kubeconfig)]
    args += ["--no-serve"] if command == "run" else ["--port", str(free_port())]
    log_path = tmp_path / "out.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "failed; retrying" not in log_path.read_text(errors="replace"):   # /version or the first LIST
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text(errors="replace")   # liveness bound
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def _at_least(fn, n):
    v = await fn()
    return v if v >= n else None


async def _true(v):
    return v
