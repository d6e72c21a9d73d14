"""The manifests applied to a real API server, the scheduler running as their ServiceAccount, and its
metrics and health endpoints scraped over HTTPS."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pysched import __version__
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from . import kustomize
from .conftest import REPO, wait_for

pytestmark = pytest.mark.e2e
COMPONENTS = REPO / "manifests" / "components"


async def allowed(admin, verb, resource, *, group="", namespace="", name="", subresource="",
                  sa_namespace="pysched-system") -> bool:
    attrs = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if name:
        attrs["name"] = name
    if subresource:
        attrs["subresource"] = subresource
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": f"system:serviceaccount:{sa_namespace}:pysched",
                    "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}",
                               "system:authenticated"], "resourceAttributes": attrs}}
    r = await admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=sar, rate_limit=False)
    return bool(r["status"].get("allowed"))


def pod_env(dep: dict, pod_name: str = "pysched-0") -> dict[str, str]:
    """The scheduler container's environment as the kubelet would set it (downward API resolved)."""
    env = {}
    for e in dep["spec"]["template"]["spec"]["containers"][0].get("env") or ():
        ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
        env[e["name"]] = {"metadata.namespace": dep["metadata"]["namespace"], "metadata.name": pod_name}[ref] \
            if ref else e["value"]
    return env


async def sa_kubeconfig(control_plane, admin, namespace: str, name: str = "pysched"):
    tr = await admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                             rate_limit=False, body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                     "spec": {"expirationSeconds": 3600}})
    return control_plane.kubeconfig_for_token(tr["status"]["token"], f"{name}-{namespace}")


async def test_manifests_grant_exactly_what_the_scheduler_uses(control_plane, admin, scheduler_factory, tmp_path):
    # The base applies to an API server without the Prometheus Operator's CRDs (nor any other CRD).
    crds = await admin.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    assert not crds["items"]
    objs = await kustomize.apply(admin, REPO / "manifests")
    kinds = {o["kind"] for o in objs}
    assert kinds == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
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

    # A real bound token for the ServiceAccount, the ConfigMap's own configuration and the
    # Deployment's environment (POD_NAMESPACE: the Lease goes to the pod's namespace).
    kubeconfig = await sa_kubeconfig(control_plane, admin, "pysched-system")
    # Load-aware plugins read node usage from metrics-server (metrics.k8s.io) with the same token.
    review = await admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", rate_limit=False, body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:pysched-system:pysched",
                 "groups": ["system:serviceaccounts", "system:serviceaccounts:pysched-system"],
                 "resourceAttributes": {"group": "metrics.k8s.io", "resource": "nodes", "verb": "list"}}})
    assert review["status"]["allowed"], review["status"]
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert "resourceNamespace" not in cfg["leaderElection"]

    await create_nodes(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")])
    await create_pods(admin, [make_pod(f"p{i}", cpu="500m") for i in range(4)] + [make_pod("big", cpu="16")])
    sched = scheduler_factory(cfg, name="sa", kubeconfig=kubeconfig, env={**os.environ, **pod_env(dep)}).start()

    async def settled():
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        ok = all(pods[f"p{i}"]["spec"].get("nodeName") for i in range(4)) and pod_scheduled_condition(pods["big"])
        return pods if ok else None

    await wait_for(settled, 60, what="pods bound and the big one marked")
    lease = await admin.get("/apis/coordination.k8s.io/v1/namespaces/pysched-system/leases/pysched")
    assert lease["spec"]["holderIdentity"]

    async def events():
        evs = (await admin.get("/api/v1/namespaces/default/events"))["items"]
        reasons = {e["reason"] for e in evs}
        return evs if {"Scheduled", "FailedScheduling"} <= reasons else None

    await wait_for(events, 30, what="events recorded with the ServiceAccount")
    # Prometheus' ServiceAccount, bound to the manifests' metrics-reader ClusterRole, scrapes /metrics;
    # the scheduler checks its token and access as its own ServiceAccount (system:auth-delegator).
    prom = await service_account_token(admin, "prometheus")
    assert (await sched.get("/metrics", token=prom))[0] == 403
    await bind_cluster_role(admin, "prometheus", "pysched-metrics-reader")

    async def scraped():
        status, text = await sched.get("/metrics", token=prom)
        return status == 200 and "scheduler_schedule_attempts_total" in text
    await wait_for(scraped, 30, what="metrics scraped once the reader role is bound (after the 10s deny cache)")
    assert (await sched.get("/configz", token=prom))[0] == 403       # the role grants /metrics only
    # Whoever debugs scheduling, bound to the manifests' debug-reader ClusterRole, reads /configz and
    # /debug/explain - and not /metrics.
    oncall = await service_account_token(admin, "oncall")
    await bind_cluster_role(admin, "oncall", "pysched-debug-reader")

    async def debuggable():
        status, text = await sched.get("/configz", token=oncall)
        return status == 200 and "pysched" in text
    await wait_for(debuggable, 30, what="/configz readable once the debug-reader role is bound")
    assert (await sched.get("/debug/explain?pod=default/nope", token=oncall))[0] != 403
    assert (await sched.get("/metrics", token=oncall))[0] == 403
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
                          ("patch", "pods", {"namespace": "default"}),          # GPUShare's GPU indices
                          ("delete", "pods", {"namespace": "default"}),        # preemption victims
                          ("watch", "poddisruptionbudgets", {"group": "policy"}),
                          ("watch", "nodes", {}), ("list", "persistentvolumeclaims", {}),
                          ("create", "events", {"group": "events.k8s.io", "namespace": "default"}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "pysched-system",
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
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "pysched-system",
                                                "name": "other"}),
                          ("create", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system"}),
                          ("get", "configmaps", {"namespace": "kube-system"}),
                          ("get", "configmaps", {"namespace": "kube-system", "name": "kubeadm-config"}),
                          ("list", "configmaps", {"namespace": "kube-system"}),
                          ("watch", "configmaps", {"namespace": "kube-system"}),
                          ("update", "configmaps", {"namespace": "kube-system",
                                                    "name": "extension-apiserver-authentication"}),
                          ("create", "clusterrolebindings", {"group": "rbac.authorization.k8s.io"})]:
        assert not await allowed(admin, verb, res, **kw), f"{verb} {res} {kw} must not be granted"
    # NodeVolumeLimits and DynamicResources read these; nothing more on them
    for res, group in [("csinodes", "storage.k8s.io"), ("volumeattachments", "storage.k8s.io"),
                       ("deviceclasses", "resource.k8s.io"), ("resourceslices", "resource.k8s.io"),
                       ("devicetaintrules", "resource.k8s.io")]:
        assert await allowed(admin, "watch", res, group=group), f"watch {res} should be allowed"
        assert not await allowed(admin, "update", res, group=group), f"update {res} must not be granted"
    # DynamicResources' PreBind writes a claim's finalizer (update) and its allocation and
    # reservation (status); it creates a pod's claim for extended resources backed by DRA and
    # deletes it when the pod cannot use it (DRAExtendedResource, as kube's system:kube-scheduler)
    claims = {"group": "resource.k8s.io", "namespace": "default"}
    assert await allowed(admin, "watch", "resourceclaims", group="resource.k8s.io")
    assert await allowed(admin, "update", "resourceclaims", **claims)
    for verb in ("update", "patch"):
        assert await allowed(admin, verb, "resourceclaims", subresource="status", **claims)
        # and as 1.36+ API servers authorize writes of status.allocation and reservedFor
        assert await allowed(admin, verb, "resourceclaims", subresource="binding", **claims)
    for verb in ("create", "delete"):   # DRAExtendedResource: the claim PreBind creates for a pod
        assert await allowed(admin, verb, "resourceclaims", **claims), f"{verb} resourceclaims should be allowed"
    assert not await allowed(admin, "patch", "resourceclaims", **claims), "patch resourceclaims must not be granted"
    # NodeVolumeLimits (VolumeLimitScaling) and VolumeBinding (storage capacity) read these, as
    # kube's system:kube-scheduler does; nothing more on them
    for res in ("csidrivers", "csistoragecapacities"):
        assert await allowed(admin, "watch", res, group="storage.k8s.io"), f"watch {res} should be allowed"
        assert not await allowed(admin, "update", res, group="storage.k8s.io"), f"update {res} must not be granted"
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
    assert await m("scheduler_framework_extension_point_duration_seconds_count", extension_point="Permit",
                   status="Success", profile="pysched") == 100
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
    await asyncio.sleep(3)
    assert await rejection() == 1        # counted once: not again by another stream of failed pods

    for path in ("/healthz", "/livez", "/readyz"):
        status, body = await sched.get(path)
        assert (status, body) == (200, "ok"), path
    status, body = await sched.get("/configz")
    assert status == 200 and json.loads(body)["componentconfig"]["profiles"][0]["schedulerName"] == "pysched"
    sched.terminate()


COMPONENT = COMPONENTS / "coscheduling"


def _without_coscheduling(cfg: dict) -> dict:
    """The component's configuration minus exactly the two Coscheduling entries it adds."""
    cfg = json.loads(json.dumps(cfg))
    plugins = cfg["profiles"][0]["plugins"]
    assert plugins.pop("queueSort") == {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
    enabled = plugins["multiPoint"]["enabled"]
    assert enabled[-1] == {"name": "Coscheduling"}
    enabled.pop()
    return cfg


def _names(objs: list[dict]) -> set[tuple[str, str]]:
    """(kind, name), the generated ConfigMap without its content hash (a component changes it)."""
    def name(o: dict) -> str:
        n = o["metadata"]["name"]
        return "pysched-config" if o["kind"] == "ConfigMap" and n.startswith("pysched-config-") else n
    return {(o["kind"], name(o)) for o in objs}


def test_coscheduling_component_is_the_base_plus_gang_scheduling():
    base = kustomize.build(REPO / "manifests")
    objs = kustomize.build(REPO / "manifests", [COMPONENT])
    assert _names(objs) - _names(base) == {("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),
                                           ("ClusterRole", "pysched-coscheduling"),
                                           ("ClusterRoleBinding", "pysched-coscheduling")}
    base_cfg = yaml.safe_load(next(o for o in base if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    comp_cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert _without_coscheduling(comp_cfg) == base_cfg, "configmap-patch.yaml drifted from manifests/config.yaml"


QUOTAS = COMPONENTS / "capacityscheduling"
QUOTAS_AND_GANGS = COMPONENTS / "capacityscheduling-coscheduling"
QUOTA_OBJECTS = {("CustomResourceDefinition", "elasticquotas.scheduling.x-k8s.io"),
                 ("ClusterRole", "pysched-capacityscheduling"), ("ClusterRoleBinding", "pysched-capacityscheduling")}
GANG_OBJECTS = {("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),
                ("ClusterRole", "pysched-coscheduling"), ("ClusterRoleBinding", "pysched-coscheduling")}


def _without_capacityscheduling(cfg: dict, post_filter_before: tuple[str, ...] = ()) -> dict:
    """The component's configuration minus exactly the CapacityScheduling entries it adds: last in
    multiPoint, and the postFilter list (``post_filter_before`` then CapacityScheduling, "*" disabled)."""
    cfg = json.loads(json.dumps(cfg))
    plugins = cfg["profiles"][0]["plugins"]
    assert plugins.pop("postFilter") == {"enabled": [{"name": n} for n in (*post_filter_before, "CapacityScheduling")],
                                         "disabled": [{"name": "*"}]}
    enabled = plugins["multiPoint"]["enabled"]
    assert enabled[-1] == {"name": "CapacityScheduling"}
    enabled.pop()
    return cfg


def _config(objs: list[dict]) -> dict:
    return yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])


def _framework(cfg: dict):
    """pysched's own parser and framework over a shipped configuration: the pysched profile's plugins."""
    from pysched.apis import config as configmod
    from pysched.tools.offline import OfflineScheduler
    return OfflineScheduler(configmod.parse(cfg)).frameworks["pysched"]


def test_capacityscheduling_component_is_the_base_plus_team_quotas():
    base = kustomize.build(REPO / "manifests")
    objs = kustomize.build(REPO / "manifests", [QUOTAS])
    assert _names(objs) - _names(base) == QUOTA_OBJECTS
    comp_cfg = _config(objs)
    assert _without_capacityscheduling(comp_cfg) == _config(base), \
        "configmap-patch.yaml drifted from manifests/config.yaml"
    fwk = _framework(comp_cfg)      # CapacityScheduling replaces DefaultPreemption, PrioritySort stays
    assert [p.name for p in fwk.post_filter] == ["CapacityScheduling"]
    assert [p.name for p in fwk.queue_sort] == ["PrioritySort"]
    assert "CapacityScheduling" in {p.name for p in fwk.pre_filter} & {p.name for p in fwk.reserve}


def test_capacityscheduling_coscheduling_component_is_both_with_one_configuration():
    """The two components each replace config.yaml, so side by side the last one listed wins; the
    combined component adds both components' objects and one configuration with both plugins."""
    base = kustomize.build(REPO / "manifests")
    side_by_side = kustomize.build(REPO / "manifests", [COMPONENT, QUOTAS])
    assert _config(side_by_side) == _config(kustomize.build(REPO / "manifests", [QUOTAS]))    # no Coscheduling
    objs = kustomize.build(REPO / "manifests", [QUOTAS_AND_GANGS])
    assert _names(objs) - _names(base) == QUOTA_OBJECTS | GANG_OBJECTS
    assert _names(objs) == _names(side_by_side)
    comp_cfg = _config(objs)
    assert _without_coscheduling(_without_capacityscheduling(comp_cfg, ("Coscheduling",))) == _config(base), \
        "capacityscheduling-coscheduling/configmap-patch.yaml drifted from manifests/config.yaml"
    fwk = _framework(comp_cfg)
    # configured [Coscheduling, CapacityScheduling]; a PreemptionGate's PostFilter runs last
    assert [p.name for p in fwk.post_filter] == ["CapacityScheduling", "Coscheduling"]
    assert [p.name for p in fwk.queue_sort] == ["Coscheduling"]
    assert {"Coscheduling", "CapacityScheduling"} <= {p.name for p in fwk.reserve}
    # Listed beside one of the two it includes, its CRD and RBAC would be added twice: refused.
    for other in (COMPONENT, QUOTAS):
        with pytest.raises(AssertionError, match="added twice"):
            kustomize.build(REPO / "manifests", [other, QUOTAS_AND_GANGS])


def test_elasticquota_crd_is_scheduler_plugins_own():
    """crd.yaml is scheduler-plugins' CRD at the release its header names, unchanged (checked where
    that Go module is in the module cache, as hack/scheduler-plugins.sh leaves it)."""
    text = (QUOTAS / "crd.yaml").read_text()
    version = re.search(r"scheduler-plugins (v[0-9.]+)", text).group(1)
    cache = os.environ.get("GOMODCACHE") or (
        subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
        if shutil.which("go") else str(Path.home() / "go" / "pkg" / "mod"))
    upstream = Path(cache) / f"sigs.k8s.io/scheduler-plugins@{version}/config/crd/bases/" \
        "scheduling.x-k8s.io_elasticquotas.yaml"
    if not upstream.is_file():
        pytest.skip(f"{upstream} not in the Go module cache")
    assert [d for d in yaml.safe_load_all(text) if d] == [d for d in yaml.safe_load_all(upstream.read_text()) if d]


async def service_account_token(admin, name: str) -> str:
    """A ServiceAccount ``default/name`` and a bound token for it."""
    await admin.request("POST", "/api/v1/namespaces/default/serviceaccounts", rate_limit=False,
                        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    tr = await admin.request("POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token", rate_limit=False,
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})
    return tr["status"]["token"]


async def bind_cluster_role(admin, account: str, role: str) -> None:
    """ClusterRoleBinding ``account`` -> ``role`` for ServiceAccount ``default/account``."""
    await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]})


def kubectl() -> str | None:
    """kubectl: built with the control plane (``hack/control-plane.sh``), else the one on PATH."""
    built = Path(os.environ.get("PYSCHED_BIN_DIR", "/nonexistent")) / "kubectl"
    return str(built) if built.is_file() else shutil.which("kubectl")


def _overlay(tmp_path: Path, components: list[str], namespace: str | None = None, **extra) -> Path:
    """A user's kustomization over a copy of manifests/ (as docs/install.md writes it)."""
    if not (tmp_path / "manifests").exists():
        shutil.copytree(REPO / "manifests", tmp_path / "manifests")
    d = tmp_path / f"overlay-{'-'.join(components) or 'base'}-{namespace or 'default'}"
    d.mkdir()
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["../manifests"],
         "components": [f"../manifests/components/{c}" for c in components]}
    if namespace:
        k["namespace"] = namespace
    (d / "kustomization.yaml").write_text(yaml.safe_dump({**k, **extra}))
    return d


@pytest.mark.parametrize("components,namespace", [
    ([], None), (["coscheduling"], None), (["prometheus-operator"], None), (["extender"], None),
    (["capacityscheduling"], None), (["capacityscheduling-coscheduling"], None),
    ([], "other-ns"), (["coscheduling", "prometheus-operator", "extender"], "other-ns"),
    (["capacityscheduling-coscheduling", "prometheus-operator"], "other-ns")])
def test_kubectl_kustomize_renders_what_the_tests_apply(tmp_path, components, namespace):
    """Where kubectl is installed, its kustomize renders the same objects as this test's mini-kustomize."""
    if not kubectl():
        pytest.skip("kubectl not installed: the mini-kustomize alone renders the manifests")
    overlay = _overlay(tmp_path, components, namespace)
    objs = kustomize.build(overlay)
    out = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    real = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout)}
    for o in objs:
        r = real.pop((o["kind"], o["metadata"]["name"]))
        if o["kind"] == "Deployment":      # `images:` rewrites the image; the mini-kustomize ignores it
            assert r["spec"]["template"]["spec"]["containers"][0]["image"] == f"ghcr.io/pysched/pysched:{__version__}"
            r["spec"]["template"]["spec"]["containers"][0]["image"] = "pysched"
        assert r == o, o["metadata"]["name"]
    assert not real
    if namespace:
        assert {o["metadata"].get("namespace") for o in objs} == {namespace, None}
        assert next(o for o in objs if o["kind"] == "Namespace")["metadata"]["name"] == namespace
        subjects = [s for o in objs for s in o.get("subjects") or ()]
        assert subjects and {s["namespace"] for s in subjects} == {namespace}


def test_an_overlay_sets_the_image_of_every_deployment(tmp_path):
    """docs/install.md's install step: one `images:` entry in the overlay sets the scheduler's and the
    extender's image."""
    if not kubectl():
        pytest.skip("kubectl not installed")
    overlay = _overlay(tmp_path, ["extender"], images=[{"name": "ghcr.io/pysched/pysched",
                                                        "newName": "registry.example/pysched", "newTag": "1.2.3"}])
    out = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    deployments = [o for o in yaml.safe_load_all(out.stdout) if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"] for d in deployments} \
        == {"pysched": "registry.example/pysched:1.2.3", "pysched-extender": "registry.example/pysched:1.2.3"}


async def test_prometheus_operator_component_applies_with_the_crd(admin):
    """The ServiceMonitor lives in its own component; with the CRD installed (a minimal fixture),
    base + component apply and the ServiceMonitor selects the scheduler's Service port."""
    base = kustomize.build(REPO / "manifests")
    assert "ServiceMonitor" not in {o["kind"] for o in base}
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        body=kustomize.SERVICEMONITOR_CRD, rate_limit=False)

    async def served():
        try:
            return await admin.get("/apis/monitoring.coreos.com/v1/namespaces/default/servicemonitors")
        except Exception:   # 404 until the CRD is established
            return None
    await wait_for(served, 30, what="ServiceMonitor CRD served")
    objs = await kustomize.apply(admin, REPO / "manifests", [COMPONENTS / "prometheus-operator"])
    assert _names(objs) - _names(base) == {("ServiceMonitor", "pysched")}
    mon = await admin.get("/apis/monitoring.coreos.com/v1/namespaces/pysched-system/servicemonitors/pysched")
    svc = next(o for o in objs if o["kind"] == "Service")
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    ep = mon["spec"]["endpoints"][0]
    assert ep["port"] == svc["spec"]["ports"][0]["name"] and ep["scheme"] == "https" and ep["path"] == "/metrics"
    assert ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


async def test_extender_component_applies_and_its_args_are_pysched_extenders(admin):
    """The extender Deployment's args parse as `pysched extender` options, its TLS files come from the
    mounted Secret, its Service exposes the port, and the kube-scheduler snippet points at that Service
    with TLS and a client certificate."""
    from pysched.apis.config import parse
    from pysched.cli import build_parser
    base = kustomize.build(REPO / "manifests")
    objs = await kustomize.apply(admin, REPO / "manifests", [COMPONENTS / "extender"])
    assert _names(objs) - _names(base) == {("Deployment", "pysched-extender"), ("Service", "pysched-extender")}
    dep = await admin.get("/apis/apps/v1/namespaces/pysched-system/deployments/pysched-extender")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = build_parser().parse_args(c["args"])
    assert c["args"][0] == "extender" and args.address == "0.0.0.0"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    tls_dir = mounts[next(n for n, v in volumes.items() if "secret" in v)]
    for f in (args.tls_cert_file, args.tls_private_key_file, args.client_ca_file):
        assert f and Path(f).parent == Path(tls_dir), f
    assert Path(args.config).parent == Path(mounts[next(n for n, v in volumes.items() if "configMap" in v)])
    assert c["securityContext"]["readOnlyRootFilesystem"] and mounts[next(n for n, v in volumes.items()
                                                                           if "emptyDir" in v)] == "/tmp"
    assert pod["serviceAccountName"] == "pysched" and pod["securityContext"]["runAsUser"] == 65532
    svc = await admin.get("/api/v1/namespaces/pysched-system/services/pysched-extender")
    assert svc["spec"]["ports"][0]["port"] == args.port
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()

    snippet = yaml.safe_load((COMPONENTS / "extender" / "kube-scheduler-extender.yaml").read_text())
    parse({**snippet, "profiles": [{"schedulerName": "default-scheduler"}]})   # a valid extenders entry
    (ext,) = snippet["extenders"]
    assert ext["urlPrefix"] == f"https://pysched-extender.pysched-system.svc:{args.port}"
    assert ext["enableHTTPS"] and {"caFile", "certFile", "keyFile"} <= ext["tlsConfig"].keys()
    assert (ext["filterVerb"], ext["prioritizeVerb"]) == ("filter", "prioritize")


async def test_namespace_overlay_takes_its_lease_in_that_namespace(control_plane, admin, scheduler_factory, tmp_path):
    """`namespace: other-ns` over the base: every object, binding subject and the Lease follow; the
    scheduler runs as other-ns's ServiceAccount with the Deployment's environment and is refused nothing."""
    objs = await kustomize.apply(admin, _overlay(tmp_path, [], "other-ns"))
    assert {o["metadata"].get("namespace") for o in objs} == {"other-ns", None}
    dep = next(o for o in objs if o["kind"] == "Deployment")
    cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    kubeconfig = await sa_kubeconfig(control_plane, admin, "other-ns")
    await create_nodes(admin, [make_node("n1", cpu="2")])
    await create_pods(admin, [make_pod("p0", cpu="500m")])
    sched = scheduler_factory(cfg, name="other", kubeconfig=kubeconfig, env={**os.environ, **pod_env(dep)}).start()

    async def lease():
        try:
            got = await admin.get("/apis/coordination.k8s.io/v1/namespaces/other-ns/leases/pysched")
        except Exception:   # 404 until the first election
            return None
        return got if got["spec"].get("holderIdentity") else None

    await wait_for(lease, 60, what="Lease pysched in other-ns")

    async def bound():
        return all(p["spec"].get("nodeName") for p in await list_pods(admin, "default"))
    await wait_for(bound, 60, what="pod bound by the other-ns scheduler")
    namespaces = {n["metadata"]["name"] for n in (await admin.get("/api/v1/namespaces"))["items"]}
    assert "pysched-system" not in namespaces
    assert await allowed(admin, "get", "configmaps", namespace="kube-system",
                         name="extension-apiserver-authentication", sa_namespace="other-ns")
    log = sched.log()
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log, log[-3000:]
    assert "cannot look up the client CA" not in log
    sched.terminate()


async def test_coscheduling_component_applies_and_grants_podgroups(control_plane, admin, scheduler_factory):
    from .podgroup_kit import create_podgroup, podgroup, wait_for_crd, wait_status
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
    kubeconfig = await sa_kubeconfig(control_plane, admin, "pysched-system")
    cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert "Coscheduling" in yaml.safe_dump(cfg)
    dep = next(o for o in objs if o["kind"] == "Deployment")
    sched = scheduler_factory(cfg, name="sa", kubeconfig=kubeconfig, env={**os.environ, **pod_env(dep)}).start()
    await create_podgroup(admin, podgroup("pg1", "default", 1))
    await create_pods(admin, [make_pod("m0", scheduler="nobody", labels={"scheduling.x-k8s.io/pod-group": "pg1"})])
    await wait_status(admin, "default", "pg1", timeout=60, phase="Scheduling")
    log = sched.log()
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log, log[-3000:]
    sched.terminate()


ELASTICQUOTAS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/elasticquotas"


@pytest.mark.parametrize("component", ["capacityscheduling", "capacityscheduling-coscheduling"])
async def test_capacityscheduling_component_applies_and_grants_elasticquotas(control_plane, admin, scheduler_factory,
                                                                             component):
    objs = await kustomize.apply(admin, REPO / "manifests", [COMPONENTS / component])

    async def served():
        try:
            found = await admin.get("/apis/scheduling.x-k8s.io/v1alpha1")
        except Exception:   # 404 until the CRDs are established
            return False
        names = {r["name"] for r in found.get("resources") or ()}
        return {"elasticquotas"} | ({"podgroups"} if "coscheduling" in component else set()) <= names
    await wait_for(served, 30, what="CRDs served")
    grants = [("list", "elasticquotas", ""), ("watch", "elasticquotas", ""), ("get", "elasticquotas", ""),
              ("patch", "elasticquotas", "status"), ("update", "elasticquotas", "status")]
    if "coscheduling" in component:
        grants += [("list", "podgroups", ""), ("watch", "podgroups", ""), ("patch", "podgroups", "status")]
    for verb, res, sub in grants:
        assert await allowed(admin, verb, res, group="scheduling.x-k8s.io", subresource=sub), (verb, res, sub)
    for verb in ("create", "update", "patch", "delete"):
        assert not await allowed(admin, verb, "elasticquotas", group="scheduling.x-k8s.io"), verb

    # The scheduler as the ServiceAccount with the component's own configuration: the ElasticQuota
    # informer and, once it leads, the status controller writing status.used, with exactly these rights.
    kubeconfig = await sa_kubeconfig(control_plane, admin, "pysched-system")
    cfg = yaml.safe_load(next(o for o in objs if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert cfg["profiles"][0]["plugins"]["postFilter"]["enabled"][-1] == {"name": "CapacityScheduling"}
    await admin.request("POST", ELASTICQUOTAS, rate_limit=False, body={
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "default"}, "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}}})
    await create_nodes(admin, [make_node("n1", cpu="4")])
    await create_pods(admin, [make_pod("q0", cpu="500m")])
    dep = next(o for o in objs if o["kind"] == "Deployment")
    sched = scheduler_factory(cfg, name="sa", kubeconfig=kubeconfig, env={**os.environ, **pod_env(dep)}).start()

    async def used():
        eq = await admin.get(f"{ELASTICQUOTAS}/team-a")
        return (eq.get("status") or {}).get("used", {}).get("cpu") == "500m"
    await wait_for(used, 60, what="ElasticQuota status.used written by the scheduler")
    assert (await list_pods(admin, "default"))[0]["spec"]["nodeName"] == "n1"
    assert await sched.metric("pysched_quota_used", quota="default/team-a", resource="cpu") == 0.5
    assert await sched.metric("pysched_quota_max", quota="default/team-a", resource="cpu") == 2
    log = sched.log()
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log, log[-3000:]
    sched.terminate()


def _rendered(directory: Path) -> list[dict]:
    """The kustomization in ``directory`` as the mini-kustomize renders it, checked against
    ``kubectl kustomize`` where kubectl is installed (the same objects, generated names included)."""
    objs = kustomize.build(directory)
    if kubectl():
        out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        real = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout)}
        assert set(real) == {(o["kind"], o["metadata"]["name"]) for o in objs}
        for o in objs:
            if o["kind"] in ("ConfigMap", "Deployment"):
                r = real[o["kind"], o["metadata"]["name"]]
                assert r.get("data") == o.get("data")
                assert (r.get("spec") or {}).get("template", {}).get("spec", {}).get("volumes") == \
                    (o.get("spec") or {}).get("template", {}).get("spec", {}).get("volumes")
    return objs


def _templates(objs: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"]["template"] for o in objs if o["kind"] == "Deployment"}


def _config_volume(template: dict) -> str:
    (vol,) = [v for v in template["spec"]["volumes"] if v["name"] == "config"]
    return vol["configMap"]["name"]


def test_an_overlay_replaces_the_scheduler_configuration(tmp_path):
    """docs/install.md's overlay: a configMapGenerator with behavior: replace swaps config.yaml; the
    ConfigMap keeps its content hash in its name and the Deployment mounts it by that name."""
    mine = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: team-a\n")
    overlay = _overlay(tmp_path, [], configMapGenerator=[
        {"name": "pysched-config", "namespace": "pysched-system", "behavior": "replace", "files": ["config.yaml"]}])
    (overlay / "config.yaml").write_text(mine)
    objs = _rendered(overlay)
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    assert cm["data"] == {"config.yaml": mine}
    assert cm["metadata"]["name"] == f"pysched-config-{kustomize.config_map_hash(cm)}"
    assert _config_volume(_templates(objs)["pysched"]) == cm["metadata"]["name"]


def test_a_configuration_change_rolls_the_deployments(tmp_path):
    """`kubectl apply -k` of a changed configuration rolls the scheduler: the ConfigMap's name carries
    a hash of its content (configMapGenerator), so the Deployments' pod templates change with it -
    the base's config.yaml edited, a component's patch, and the docs' overlay with another file. The
    same configuration renders the same pod template (no roll)."""
    def base_with(name: str, extra: str) -> Path:
        copy = tmp_path / name / "manifests"
        shutil.copytree(REPO / "manifests", copy)
        (copy / "config.yaml").write_text((copy / "config.yaml").read_text() + extra)
        (copy.parent / "kustomization.yaml").write_text(yaml.safe_dump({
            "resources": ["manifests"], "components": ["manifests/components/extender"]}))
        return copy.parent
    before = _templates(_rendered(base_with("a", "")))
    again = _templates(_rendered(base_with("b", "")))
    after = _templates(_rendered(base_with("c", "percentageOfNodesToScore: 50\n")))
    assert before == again
    assert set(before) == set(after) == {"pysched", "pysched-extender"}
    for name in before:                       # the scheduler and the extender both mount it
        assert before[name] != after[name], name
        assert _config_volume(before[name]) != _config_volume(after[name])
        assert _config_volume(before[name]).startswith("pysched-config-")
    # a component that patches the configuration: its hash, not the base's
    with_gangs = _templates(_rendered(_overlay(tmp_path, ["coscheduling"])))
    assert _config_volume(with_gangs["pysched"]) != _config_volume(before["pysched"])
    # the documented overlay, two different files
    seen = set()
    for i, percentage in enumerate((30, 60)):
        overlay = _overlay(tmp_path, [], f"ns-{i}", configMapGenerator=[
            {"name": "pysched-config", "namespace": "pysched-system", "behavior": "replace",
             "files": ["config.yaml"]}])
        (overlay / "config.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: "
                                             f"KubeSchedulerConfiguration\npercentageOfNodesToScore: {percentage}\n")
        seen.add(_config_volume(_templates(_rendered(overlay))["pysched"]))
    assert len(seen) == 2


def test_an_overlay_over_a_component_replaces_its_configuration(tmp_path):
    """docs/install.md: a component's patch runs after the generators of the kustomization listing it,
    so it wins over a `behavior: replace` there; in a kustomization over that one, the user's file
    wins, and its hash names the ConfigMap the Deployment mounts."""
    mine = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "percentageOfNodesToScore: 7\n")
    replace = [{"name": "pysched-config", "namespace": "pysched-system", "behavior": "replace",
                "files": ["config.yaml"]}]
    same = _overlay(tmp_path, ["coscheduling"], "same", configMapGenerator=replace)
    (same / "config.yaml").write_text(mine)
    (cm,) = [o for o in _rendered(same) if o["kind"] == "ConfigMap"]
    assert "Coscheduling" in cm["data"]["config.yaml"]                     # the component's, not mine
    with_gangs = _overlay(tmp_path, ["coscheduling"])
    over = tmp_path / "my-overlay"
    over.mkdir()
    (over / "config.yaml").write_text(mine)
    (over / "kustomization.yaml").write_text(yaml.safe_dump({"resources": [f"../{with_gangs.name}"],
                                                             "configMapGenerator": replace}))
    objs = _rendered(over)
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    assert cm["data"] == {"config.yaml": mine}
    assert ("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io") in _names(objs)
    assert _config_volume(_templates(objs)["pysched"]) == cm["metadata"]["name"] \
        == f"pysched-config-{kustomize.config_map_hash(cm)}"


@pytest.mark.parametrize("components", [[], ["extender"], ["capacityscheduling-coscheduling", "prometheus-operator"]])
def test_rendered_deployments_listen_on_the_pod_ip(tmp_path, components):
    """Every Deployment kustomize renders serves on 0.0.0.0, not pysched's default 127.0.0.1 for a
    process run by hand: the kubelet's probes and Prometheus reach the pod IP."""
    objs = _rendered(_overlay(tmp_path, components))
    for dep in (o for o in objs if o["kind"] == "Deployment"):
        (c,) = dep["spec"]["template"]["spec"]["containers"]
        flag = "--address=0.0.0.0" if c["args"][0] == "extender" else "--bind-address=0.0.0.0"
        assert flag in c["args"], dep["metadata"]["name"]
