"""The manifests applied to a real API server, the scheduler running as their ServiceAccount, and its
metrics and health endpoints scraped over HTTPS."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import yaml

from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from . import kustomize
from .conftest import REPO, wait_for

pytestmark = pytest.mark.e2e
SA_USER = "system:serviceaccount:scheduler-lab:pysched"


async def allowed(admin, verb, resource, *, group="", namespace="", name="", subresource="") -> bool:
    attrs = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if name:
        attrs["name"] = name
    if subresource:
        attrs["subresource"] = subresource
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": SA_USER, "groups": ["system:serviceaccounts", "system:serviceaccounts:scheduler-lab",
                                                "system:authenticated"], "resourceAttributes": attrs}}
    r = await admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=sar, rate_limit=False)
    return bool(r["status"].get("allowed"))


async def test_manifests_grant_exactly_what_the_scheduler_uses(control_plane, admin, scheduler_factory, tmp_path):
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        body=kustomize.SERVICEMONITOR_CRD, rate_limit=False)
    await asyncio.sleep(2)  # CRD established
    objs = await kustomize.apply(admin, REPO / "manifests")
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "ServiceAccount", "ClusterRole", "Role", "ConfigMap", "Deployment", "Service",
            "PodDisruptionBudget", "ServiceMonitor"} <= kinds
    for o in objs:
        if o["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            # no binding to system:kube-scheduler; system:auth-delegator is what delegated auth needs
            assert not o["roleRef"]["name"].startswith("system:") or o["roleRef"]["name"] == "system:auth-delegator"
        if o["kind"] in ("ClusterRole", "Role"):
            for rule in o["rules"]:
                assert "*" not in rule["verbs"] and "*" not in rule.get("resources", [])
                assert not any("*" in url for url in rule.get("nonResourceURLs", []))
    dep = next(o for o in objs if o["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert dep["spec"]["replicas"] == 2
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 65532
    assert c["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"

    # A real bound token for the ServiceAccount, and the ConfigMap's own configuration.
    tr = await admin.request("POST", "/api/v1/namespaces/scheduler-lab/serviceaccounts/pysched/token", rate_limit=False,
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})
    kubeconfig = control_plane.kubeconfig_for_token(tr["status"]["token"], "pysched-sa")
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg["leaderElection"]["resourceNamespace"] == "scheduler-lab"

    await create_nodes(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")])
    await create_pods(admin, [make_pod(f"p{i}", cpu="500m") for i in range(4)] + [make_pod("big", cpu="16")])
    sched = scheduler_factory(cfg, name="sa", kubeconfig=kubeconfig).start()

    async def settled():
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        ok = all(pods[f"p{i}"]["spec"].get("nodeName") for i in range(4)) and pod_scheduled_condition(pods["big"])
        return pods if ok else None

    await wait_for(settled, 60, what="pods bound and the big one marked")
    lease = await admin.get("/apis/coordination.k8s.io/v1/namespaces/scheduler-lab/leases/pysched")
    assert lease["spec"]["holderIdentity"]

    async def events():
        evs = (await admin.get("/api/v1/namespaces/default/events"))["items"]
        reasons = {e["reason"] for e in evs}
        return evs if {"Scheduled", "FailedScheduling"} <= reasons else None

    await wait_for(events, 30, what="events recorded with the ServiceAccount")
    # Prometheus' ServiceAccount, bound to the manifests' metrics-reader ClusterRole, scrapes /metrics;
    # the scheduler checks its token and access as its own ServiceAccount (system:auth-delegator).
    mon = next(o for o in objs if o["kind"] == "ServiceMonitor")
    assert mon["spec"]["endpoints"][0]["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    await admin.request("POST", "/api/v1/namespaces/default/serviceaccounts", rate_limit=False,
                        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus"}})
    prom = (await admin.request("POST", "/api/v1/namespaces/default/serviceaccounts/prometheus/token", rate_limit=False,
                                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                      "spec": {"expirationSeconds": 3600}}))["status"]["token"]
    assert (await sched.get("/metrics", token=prom))[0] == 403
    await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "prometheus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pysched-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "default"}]})

    async def scraped():
        status, text = await sched.get("/metrics", token=prom)
        return status == 200 and "scheduler_schedule_attempts_total" in text
    await wait_for(scraped, 30, what="metrics scraped once the reader role is bound (after the 10s deny cache)")
    assert (await sched.get("/configz", token=prom))[0] == 403       # the role grants /metrics only
    # client certificates: the CA was read from kube-system/extension-apiserver-authentication
    cert = control_plane.issue_cert("cert-user", client=True)
    status, body = await sched.get("/metrics", token=None, cert=cert)
    assert status == 403 and json.loads(body)["message"] == 'forbidden: User "cert-user" cannot get path "/metrics"'

    log = sched.log()
    # (\b: ports and timestamps in the log may contain the digits 403)
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log and "cannot list" not in log, log[-3000:]
    assert "cannot look up the client CA" not in log

    for verb, res, kw in [("create", "pods", {"subresource": "binding", "namespace": "default"}),
                          ("patch", "pods", {"subresource": "status", "namespace": "default"}),
                          ("delete", "pods", {"namespace": "default"}),        # preemption victims
                          ("watch", "poddisruptionbudgets", {"group": "policy"}),
                          ("watch", "nodes", {}), ("list", "persistentvolumeclaims", {}),
                          ("create", "events", {"group": "events.k8s.io", "namespace": "default"}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "scheduler-lab",
                                                "name": "pysched"}),
                          ("create", "tokenreviews", {"group": "authentication.k8s.io"}),
                          ("create", "subjectaccessreviews", {"group": "authorization.k8s.io"}),
                          ("get", "configmaps", {"namespace": "kube-system",
                                                 "name": "extension-apiserver-authentication"})]:
        assert await allowed(admin, verb, res, **kw), f"{verb} {res} {kw} should be allowed"
    for verb, res, kw in [("update", "pods", {"namespace": "default"}),
                          ("create", "pods", {"namespace": "default"}), ("get", "secrets", {"namespace": "default"}),
                          ("list", "secrets", {}), ("patch", "nodes", {}), ("delete", "nodes", {}),
                          ("create", "pods", {"subresource": "eviction", "namespace": "default"}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system",
                                                "name": "kube-scheduler"}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "scheduler-lab",
                                                "name": "other"}),
                          ("create", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system"}),
                          ("get", "configmaps", {"namespace": "kube-system"}),
                          ("get", "configmaps", {"namespace": "kube-system", "name": "kubeadm-config"}),
                          ("update", "configmaps", {"namespace": "kube-system",
                                                    "name": "extension-apiserver-authentication"}),
                          ("create", "clusterrolebindings", {"group": "rbac.authorization.k8s.io"})]:
        assert not await allowed(admin, verb, res, **kw), f"{verb} {res} {kw} must not be granted"
    # NodeVolumeLimits and DynamicResources' PreEnqueue read these; nothing more on them
    for res, group in [("csinodes", "storage.k8s.io"), ("volumeattachments", "storage.k8s.io"),
                       ("resourceclaims", "resource.k8s.io")]:
        assert await allowed(admin, "watch", res, group=group), f"watch {res} should be allowed"
        assert not await allowed(admin, "update", res, group=group), f"update {res} must not be granted"
    assert not await allowed(admin, "list", "csidrivers", group="storage.k8s.io")   # read only under an alpha gate
    sched.terminate()


async def test_metrics_and_health_over_https(admin, scheduler_factory):
    from .conftest import scheduler_config
    await create_nodes(admin, [make_node(f"n{i}", cpu="4") for i in range(5)])
    await create_pods(admin, [make_pod(f"p{i:03d}", cpu="100m") for i in range(100)]
                      + [make_pod(f"huge{i}", cpu="64") for i in range(3)])
    cfg = scheduler_config(leaderElection={"leaderElect": True, "resourceNamespace": "default"})
    sched = scheduler_factory(cfg).start()

    async def settled():
        pods = await list_pods(admin, "default")
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        marked = sum(1 for p in pods if not p["spec"].get("nodeName") and pod_scheduled_condition(p))
        return (bound, marked) if bound == 100 and marked == 3 else None

    await wait_for(settled, 60, what="100 bound, 3 unschedulable")

    async def pending_unsched():
        v = await sched.metric("scheduler_pending_pods", queue="unschedulable")
        return v if v == 3 else None

    await wait_for(pending_unsched, 10, what="pending_pods gauge refreshed")
    m = sched.metric
    assert await m("scheduler_schedule_attempts_total", result="scheduled", profile="pysched") == 100
    assert await m("scheduler_schedule_attempts_total", result="unschedulable", profile="pysched") >= 3
    assert await m("scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 100
    assert await m("scheduler_pod_scheduling_attempts_count") == 100
    assert await m("scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 103
    assert await m("scheduler_framework_extension_point_duration_seconds_count", extension_point="Filter",
                   status="Success", profile="pysched") >= 100
    assert await m("scheduler_scheduling_attempt_duration_seconds_bucket", result="scheduled", profile="pysched",
                   le="16.384") == 100           # kube-scheduler's buckets: 1ms x2, 15 of them
    assert await m("scheduler_cache_size", type="nodes") == 5
    assert await m("leader_election_master_status", name="pysched") == 1
    assert await m("pysched_bind_conflicts_total", profile="pysched", reason="already_bound") in (None, 0)
    _, text = await sched.get("/metrics")
    assert "scheduler_plugin_execution_duration_seconds_bucket" in text

    # a kubelet rejection of a pod we bound (the kubelet would set exactly this)
    await admin.request("PATCH", "/api/v1/namespaces/default/pods/p000/status",
                        content_type="application/merge-patch+json",
                        body={"status": {"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected"}})

    async def rejection():
        return await m("pysched_kubelet_rejections_total", reason="OutOfcpu")

    assert await wait_for(rejection, 20, what="kubelet rejection counted") == 1

    for path in ("/healthz", "/livez", "/readyz"):
        status, body = await sched.get(path)
        assert (status, body) == (200, "ok"), path
    status, body = await sched.get("/configz")
    assert status == 200 and json.loads(body)["componentconfig"]["profiles"][0]["schedulerName"] == "pysched"
    sched.terminate()


COMPONENT = REPO / "manifests" / "components" / "coscheduling"


def _without_coscheduling(cfg: dict) -> dict:
    """The component's configuration minus exactly the two Coscheduling entries it adds."""
    cfg = json.loads(json.dumps(cfg))
    plugins = cfg["profiles"][0]["plugins"]
    assert plugins.pop("queueSort") == {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    enabled = plugins["multiPoint"]["enabled"]
    assert enabled[-1] == {"name": "Coscheduling"}
    enabled.pop()
    return cfg


def test_coscheduling_component_is_the_base_plus_gang_scheduling(tmp_path):
    base = kustomize.build(REPO / "manifests")
    objs = kustomize.build(REPO / "manifests", [COMPONENT])
    added = {(o["kind"], o["metadata"]["name"]) for o in objs} - {(o["kind"], o["metadata"]["name"]) for o in base}
    assert added == {("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),
                     ("ClusterRole", "pysched-coscheduling"), ("ClusterRoleBinding", "pysched-coscheduling")}
    base_cfg = yaml.safe_load(next(o for o in base if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    comp_cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert _without_coscheduling(comp_cfg) == base_cfg, "configmap-patch.yaml drifted from manifests/configmap.yaml"
    # Where kubectl is installed, its kustomize renders the same objects as this test's mini-kustomize.
    import shutil
    import subprocess
    if shutil.which("kubectl"):
        shutil.copytree(REPO / "manifests", tmp_path / "manifests")
        (tmp_path / "overlay").mkdir()
        (tmp_path / "overlay" / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": ["../manifests"], "components": ["../manifests/components/coscheduling"]}))
        out = subprocess.run(["kubectl", "kustomize", str(tmp_path / "overlay")], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        real = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout)}
        for o in objs:
            r = real.pop((o["kind"], o["metadata"]["name"]))
            if o["kind"] == "Deployment":      # `images:` rewrites the image; the mini-kustomize ignores it
                r["spec"]["template"]["spec"]["containers"][0]["image"] = "pysched"
            assert r == o, o["metadata"]["name"]
        assert not real


async def test_coscheduling_component_applies_and_grants_podgroups(control_plane, admin, scheduler_factory):
    from .podgroup_kit import create_podgroup, podgroup, wait_for_crd, wait_status
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        body=kustomize.SERVICEMONITOR_CRD, rate_limit=False)
    await asyncio.sleep(2)  # CRD established
    objs = await kustomize.apply(admin, REPO / "manifests", [COMPONENT])
    await wait_for_crd(admin)
    for verb, res, sub in [("list", "podgroups", ""), ("watch", "podgroups", ""), ("get", "podgroups", ""),
                           ("patch", "podgroups", "status"), ("update", "podgroups", "status")]:
        assert await allowed(admin, verb, res, group="scheduling.x-k8s.io", subresource=sub), (verb, res, sub)
    for verb in ("create", "update", "patch", "delete"):
        assert not await allowed(admin, verb, "podgroups", group="scheduling.x-k8s.io"), verb
    assert not await allowed(admin, "create", "customresourcedefinitions", group="apiextensions.k8s.io")

    # The scheduler as the ServiceAccount, with the component's own configuration (Coscheduling on,
    # so the PodGroup informer and the status controller run), works with exactly these rights.
    tr = await admin.request("POST", "/api/v1/namespaces/scheduler-lab/serviceaccounts/pysched/token", rate_limit=False,
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})
    kubeconfig = control_plane.kubeconfig_for_token(tr["status"]["token"], "pysched-sa")
    cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert "Coscheduling" in yaml.safe_dump(cfg)
    sched = scheduler_factory(cfg, name="sa", kubeconfig=kubeconfig).start()
    await create_podgroup(admin, podgroup("pg1", "default", 1))
    await create_pods(admin, [make_pod("m0", scheduler="nobody", labels={"scheduling.x-k8s.io/pod-group": "pg1"})])
    await wait_status(admin, "default", "pg1", timeout=60, phase="Scheduling")
    log = sched.log()
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log, log[-3000:]
    sched.terminate()
