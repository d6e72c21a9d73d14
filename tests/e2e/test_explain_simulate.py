"""Explain, simulate and shadow against the real API server (and, for shadow, the real kube-scheduler).

* ``pysched simulate`` over a snapshot of a live cluster places a set of pods exactly where the
  live scheduler, given the same tie-break seed and the same pods in the same order, binds them.
* A pod that opts in gets ``pysched.io/explanation`` once its cycle has an outcome (bound, or
  failed with the reason), never while it is only assumed; ``/debug/explain`` serves the full trace.
* ``--shadow`` beside kube-scheduler predicts, compares and exports agreement, and never binds,
  patches or records anything.
* The simulate HTML report renders its charts in headless Chromium without a script error.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from pysched.framework.status import Code, Status
from pysched_dev.devcluster import KubeSchedulerProcess
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from .conftest import REPO, scheduler_config, wait_for
from .inprocess import PauseBeforeBind, in_process_app, paused_profile

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"
GPU = "nvidia.com/gpu"


def cluster_nodes() -> list[dict]:
    nodes = []
    for i in range(6):
        zone = f"zone-{'abc'[i % 3]}"
        nodes.append(make_node(f"node-{i}", cpu="4", memory="16Gi", labels={ZONE: zone, "pool": "general"}))
    nodes.append(make_node("gpu-0", cpu="16", memory="64Gi", extended={GPU: "4"},
                           labels={ZONE: "zone-a", "pool": "gpu"},
                           taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"}]))
    nodes.append(make_node("tainted-0", labels={ZONE: "zone-b", "pool": "batch"},
                           taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]))
    return nodes


def workload(scheduler: str | None) -> list[dict]:
    """Pods as a user writes them (no namespace defaults applied, limits-only GPU requests)."""
    def p(name, **kw):
        pod = make_pod(name, scheduler=scheduler or "pysched", **kw)
        if scheduler is None:
            del pod["spec"]["schedulerName"]
        return pod
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    pods = [p(f"web-{i}", cpu="500m", memory="1Gi", labels={"app": "web"}, spread=spread) for i in range(6)]
    pods += [p(f"cache-{i}", cpu="1", memory="2Gi", labels={"app": "cache"}, affinity=anti) for i in range(3)]
    pods += [p(f"tiny-{i}", cpu="50m", memory="64Mi") for i in range(6)]  # many ties: the seed decides
    train = p("train", cpu="2", memory="8Gi", tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}])
    train["spec"]["containers"][0]["resources"]["limits"] = {GPU: "2"}  # limits only: the API adds the request
    train["spec"]["priorityClassName"] = "high"
    pods.append(train)
    pods.append(p("batch", cpu="1", memory="1Gi", node_selector={"pool": "batch"},
                  tolerations=[{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]))
    pods.append(p("too-big", cpu="12", memory="1Gi"))
    return pods


async def snapshot(admin, path) -> None:
    """What ``kubectl get nodes,pods,priorityclasses,namespaces -A -o yaml`` prints."""
    items = []
    for kind, url in (("Node", "/api/v1/nodes"), ("Pod", "/api/v1/pods"), ("Namespace", "/api/v1/namespaces"),
                      ("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses")):
        listed, _ = await admin.list_all(url)
        for obj in listed:
            obj["metadata"].pop("managedFields", None)
            items.append({"apiVersion": "scheduling.k8s.io/v1" if kind == "PriorityClass" else "v1", "kind": kind,
                          **obj})
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": items}))


async def setup_cluster(admin) -> None:
    await create_nodes(admin, cluster_nodes())
    await admin.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                        body={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": "high"}, "value": 1000})
    for i, (name, node, cpu) in enumerate((("existing-a", "node-0", "2"), ("existing-b", "node-4", "3"))):
        await admin.request("POST", "/api/v1/namespaces/default/pods",
                            body=make_pod(name, cpu=cpu, memory="2Gi", node_name=node, scheduler="default-scheduler",
                                          labels={"app": "cache" if i == 0 else "db"}))


async def test_simulate_places_pods_where_the_live_scheduler_binds_them(control_plane, admin, scheduler_factory,
                                                                        tmp_path):
    await setup_cluster(admin)
    snap, pods_file = tmp_path / "snapshot.yaml", tmp_path / "pods.yaml"
    await snapshot(admin, snap)
    pods_file.write_text(yaml.safe_dump_all(workload(None)))
    proc = subprocess.run([sys.executable, "-m", "pysched", "simulate", "--cluster", str(snap),
                           "--pods", str(pods_file), "--seed", "7", "--output", "json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # too-big cannot be placed
    simulated = {p["pod"]: p["node"] for p in json.loads(proc.stdout)["placements"]}
    assert simulated["default/too-big"] is None and simulated["default/train"] == "gpu-0"
    assert simulated["default/batch"] == "tainted-0"

    sched = scheduler_factory(scheduler_config(), extra_args=["--seed", "7"]).start()
    await sched.wait_log("caches synced")
    live: dict[str, str | None] = {}
    for raw in workload("pysched"):  # the same pods, one at a time, in file order
        name = raw["metadata"]["name"]
        await admin.request("POST", "/api/v1/namespaces/default/pods", body=raw)

        async def settled(name=name):
            pod = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
            if pod["spec"].get("nodeName"):
                return pod["spec"]["nodeName"]
            cond = pod_scheduled_condition(pod)
            return "unschedulable" if cond and cond.get("reason") == "Unschedulable" else None
        got = await wait_for(settled, 60, what=f"{name} scheduled or rejected")
        live[f"default/{name}"] = None if got == "unschedulable" else got
    assert live == simulated


async def test_explanation_annotation_and_debug_endpoint(control_plane, admin, scheduler_factory):
    await create_nodes(admin, cluster_nodes())
    sched = scheduler_factory(scheduler_config()).start()
    await sched.wait_log("caches synced")
    ask = {"pysched.io/explain": "true"}
    await admin.request("POST", "/api/v1/namespaces/default/pods", body=make_pod("why", cpu="1", annotations=ask))
    await admin.request("POST", "/api/v1/namespaces/default/pods", body=make_pod("why-not", cpu="40", annotations=ask))
    await admin.request("POST", "/api/v1/namespaces/default/pods", body=make_pod("quiet", cpu="1"))

    async def annotated(name):
        pod = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
        value = (pod["metadata"].get("annotations") or {}).get("pysched.io/explanation")
        return (pod, json.loads(value)) if value else None
    pod, why = await wait_for(lambda: annotated("why"), 60, what="explanation on why")
    assert pod["spec"]["nodeName"] == why["selectedNode"]
    assert why["topNodes"][0]["node"] == why["selectedNode"] and "NodeResourcesFit" in why["topNodes"][0]["plugins"]
    assert why["filterRejections"]["TaintToleration"] == {"node(s) had untolerated taint(s)": 2}
    _, why_not = await wait_for(lambda: annotated("why-not"), 60, what="explanation on why-not")
    assert why_not["selectedNode"] is None and why_not["error"].startswith("0/8 nodes are available")
    assert why_not["filterRejections"]["NodeResourcesFit"] == {"Insufficient cpu": 6}
    # Beside the JSON, one sentence for kubectl describe.
    lines = {}
    for name in ("why", "why-not"):
        got = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
        lines[name] = got["metadata"]["annotations"]["pysched.io/explanation-summary"]
    # Short enough for kubectl describe to print it whole, ending with the command for the rest.
    assert lines["why"].startswith(f"bound to {why['selectedNode']} (score ")
    assert "; filtered out: 2 by TaintToleration" in lines["why"]
    assert lines["why-not"].startswith("not scheduled: 0/8 nodes fit; filtered out: 6 by NodeResourcesFit "
                                       "(Insufficient cpu)")
    for name, line in lines.items():
        assert line.endswith(f"; details: pysched explain default/{name}") and len(line.encode()) <= 138, line
    # The condition message stays kube-scheduler's.
    cond = pod_scheduled_condition(await admin.get("/api/v1/namespaces/default/pods/why-not"))
    assert cond["message"].startswith("0/8 nodes are available") and "pysched explain" not in cond["message"]

    status, body = await sched.get("/debug/explain?pod=default/why")
    assert status == 200
    full = json.loads(body)
    assert full["selectedNode"] == why["selectedNode"]
    assert {f["plugin"] for f in full["filter"]} >= {"NodeResourcesFit", "TaintToleration"}
    assert set(full["score"]["NodeResourcesFit"][why["selectedNode"]]) == {"raw", "normalized", "weighted"}

    await wait_for(lambda: _bound(admin, "quiet"), 60, what="quiet bound")
    quiet = await admin.get("/api/v1/namespaces/default/pods/quiet")
    assert "pysched.io/explanation" not in (quiet["metadata"].get("annotations") or {})
    status, _ = await sched.get("/debug/explain?pod=default/quiet")
    assert status == 404


async def test_explanation_is_written_when_the_binding_cycle_ends(control_plane, admin):
    """While the pod is held in PreBind it is only assumed: the trace is served, the pod is not
    annotated. A failed bind annotates the chosen node and the error; the retry that binds replaces it."""
    PauseBeforeBind.reset(outcome=Status(Code.ERROR, "volume not attached yet"))
    app = await in_process_app(control_plane, scheduler_config(profiles=[paused_profile()]), pause=True)
    await create_nodes(admin, [make_node("a"), make_node("b")])
    await create_pods(admin, [make_pod("held", annotations={"pysched.io/explain": "true"})])
    task = asyncio.create_task(app.run())
    try:
        await asyncio.wait_for(PauseBeforeBind.waiting.wait(), 30)
        chosen = PauseBeforeBind.nodes[0]
        assert app.scheduler.traces["default/held"]["selectedNode"] == chosen
        await asyncio.gather(*app.scheduler.api_tasks)  # every write the scheduler started has landed
        pod = await admin.get("/api/v1/namespaces/default/pods/held")
        assert "pysched.io/explanation" not in (pod["metadata"].get("annotations") or {})

        async def explanation():
            pod = await admin.get("/api/v1/namespaces/default/pods/held")
            value = (pod["metadata"].get("annotations") or {}).get("pysched.io/explanation")
            return (pod, json.loads(value)) if value else None

        PauseBeforeBind.release.set()
        pod, why = await wait_for(explanation, 30, what="explanation after the failed bind")
        assert why["selectedNode"] == chosen and "volume not attached yet" in why["error"]
        assert not pod["spec"].get("nodeName")

        PauseBeforeBind.outcome = None  # the retry (after backoff) binds

        async def bound_and_explained():
            got = await explanation()
            return got if got and got[0]["spec"].get("nodeName") and "error" not in got[1] else None
        pod, why = await wait_for(bound_and_explained, 30, what="bound and re-explained")
        assert why["selectedNode"] == pod["spec"]["nodeName"] == PauseBeforeBind.nodes[-1]
    finally:
        app.request_stop()
        await task


async def _bound(admin, name):
    pod = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
    return pod["spec"].get("nodeName")


async def test_shadow_mode_beside_kube_scheduler(control_plane, admin, scheduler_factory):
    await create_nodes(admin, cluster_nodes())
    shadow = scheduler_factory(scheduler_config(), extra_args=["--shadow"]).start()
    await shadow.wait_log("caches synced")
    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": "default-scheduler"}]}).start()
    try:
        pods = [make_pod(f"free-{i}", scheduler="default-scheduler", cpu="200m") for i in range(6)]
        pods += [make_pod(f"pinned-{i}", scheduler="default-scheduler", cpu="200m", node_selector={"pool": "batch"},
                          tolerations=[{"key": "dedicated", "operator": "Exists"}]) for i in range(3)]
        pods += [make_pod("gpu", scheduler="default-scheduler", cpu="1", extended={GPU: "1"},
                          tolerations=[{"key": GPU, "operator": "Exists"}])]
        for p in pods:
            await admin.request("POST", "/api/v1/namespaces/default/pods", body=p)

        async def all_bound():
            items = await list_pods(admin, "default")
            return len(items) == len(pods) and all(p["spec"].get("nodeName") for p in items)
        await wait_for(all_bound, 120, what="kube-scheduler binding every pod")

        async def compared():
            total = 0.0
            for r in ("same_node", "equivalent_node", "feasible_node", "infeasible_node", "unschedulable_here"):
                total += await shadow.metric("pysched_shadow_placements_total", result=r) or 0.0
            return total == len(pods)
        await wait_for(compared, 60, what="every placement compared")
        assert await shadow.metric("pysched_shadow_placements_total", result="same_node") >= 4  # pinned + gpu
        assert (await shadow.metric("pysched_shadow_placements_total", result="infeasible_node") or 0) == 0
        assert (await shadow.metric("pysched_shadow_placements_total", result="unschedulable_here") or 0) == 0
        assert 0.4 <= await shadow.metric("pysched_shadow_agreement_ratio") <= 1.0
        # It never bound, patched or recorded anything.
        assert (await shadow.metric("scheduler_schedule_attempts_total", result="scheduled", profile="pysched")
                or 0) == 0
        events, _ = await admin.list_all("/apis/events.k8s.io/v1/namespaces/default/events")
        assert events and {e["reportingController"] for e in events} == {"default-scheduler"}
        scheduled = {e["regarding"]["name"] for e in events if e["reason"] == "Scheduled"}
        assert scheduled == {p["metadata"]["name"] for p in pods}  # kube-scheduler bound every one
        for p in await list_pods(admin, "default"):
            # The test's own client (user agent pysched) created the pods; nothing else of ours
            # may have written to them: no status patch, no binding.
            writes = [(m.get("manager"), m.get("operation"), m.get("subresource", ""))
                      for m in p["metadata"].get("managedFields") or ()]
            assert [w for w in writes if w[0] == "pysched" and w[2]] == [], writes
    finally:
        kube.stop()


def chromium() -> str | None:
    return os.environ.get("PYSCHED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


async def test_simulate_report_renders_in_headless_chromium(tmp_path):
    browser = chromium()
    if browser is None:
        if os.environ.get("PYSCHED_REQUIRE_CHROMIUM"):
            pytest.fail("no Chromium: hack/chromium.sh could not provide one")
        pytest.skip("no Chromium (make test installs it via hack/chromium.sh)")
    examples = REPO / "examples"
    simulate = examples / "simulate"
    report = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "pysched", "simulate", "--cluster", str(simulate / "snapshot.yaml"),
                           "--pods", str(simulate / "pods.yaml"), "--config", str(examples / "scheduler-config.yaml"),
                           "--explain", "shop/web-0", "--report", str(report)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    dom = await asyncio.to_thread(
        subprocess.run, [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=5000", "--dump-dom",
                         report.as_uri()], capture_output=True, text=True, timeout=120)
    html = dom.stdout
    assert 'data-render="ok"' in html, html[-2000:] + dom.stderr[-2000:]
    snap = yaml.safe_load((simulate / "snapshot.yaml").read_text())
    n_nodes = sum(1 for i in snap["items"] if i["kind"] == "Node")
    # cpu, memory, pods and nvidia.com/gpu, per zone (3) and per node, before and after.
    assert html.count('class="bar after"') == 4 * (3 + n_nodes)
    assert html.count('class="bar before"') == 4 * (3 + n_nodes)
