"""The Helm chart (charts/pysched): `helm lint`, `helm template` with the default values and with a
values file setting every knob, the rendering compared with manifests/ (same RBAC, same
configuration), and the default rendering applied to a real API server with the scheduler running
from its ConfigMap as its ServiceAccount.

helm comes from PYSCHED_HELM (`make test` sets it) or from hack/helm.sh (cached build)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pysched import __version__
from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition

from . import kustomize
from .conftest import REPO, wait_for

pytestmark = pytest.mark.e2e
CHART = REPO / "charts" / "pysched"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
NS = "pysched-system"          # the release namespace the docs install to
MANIFEST_NS = "pysched-system"  # manifests/'s: the same one (tests/unit/test_manifests_namespace.py)
OTHER_NS = "team-sched"         # a release elsewhere: nothing of the chart may still name NS
RBAC_KINDS = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")


@pytest.fixture(scope="module")
def helm() -> str:
    path = os.environ.get("PYSCHED_HELM")
    if not path:
        out = subprocess.run([str(REPO / "hack" / "helm.sh")], capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, out.stderr
        path = out.stdout.strip().splitlines()[-1]
    assert os.access(path, os.X_OK), f"PYSCHED_HELM={path} is not executable"
    return path


def helm_template(helm: str, *args: str, release: str = "pysched", namespace: str = NS,
                  check: bool = True) -> subprocess.CompletedProcess | list[dict]:
    out = subprocess.run([helm, "template", release, str(CHART), "--namespace", namespace, *args],
                         capture_output=True, text=True, timeout=120)
    if not check:
        return out
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict], kind: str) -> dict:
    found = by_kind(objs, kind)
    assert len(found) == 1, (kind, [o["metadata"]["name"] for o in found])
    return found[0]


def config_of(objs: list[dict]) -> dict:
    return yaml.safe_load(one(objs, "ConfigMap")["data"]["config.yaml"])


def manifest_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifest_config(path: Path) -> dict:
    """A shipped configuration (manifests/config.yaml, or a component's ConfigMap patch), its Lease
    moved to the release namespace."""
    doc = manifest_docs(path)[0]
    cfg = yaml.safe_load(doc["data"]["config.yaml"]) if doc.get("kind") == "ConfigMap" else doc
    cfg["leaderElection"]["resourceNamespace"] = NS
    return cfg


def rbac_view(objs: list[dict], ns_map: dict[str, str]) -> dict:
    """RBAC objects as comparable values: each role's rules flattened to single grants, each
    binding's roleRef and subjects; namespaces mapped through ns_map (manifests -> release)."""
    def ns(v: str) -> str:
        return ns_map.get(v, v)

    out: dict = {}
    for o in objs:
        if o["kind"] not in RBAC_KINDS:
            continue
        key = (o["kind"], o["metadata"]["name"], ns(o["metadata"].get("namespace", "")))
        if o["kind"] in ("ClusterRole", "Role"):
            out[key] = flatten(o["rules"])
        else:
            out[key] = (json.dumps(o["roleRef"], sort_keys=True),
                        sorted((s["kind"], s["name"], ns(s.get("namespace", ""))) for s in o["subjects"]))
    return out


def flatten(rules: list[dict]) -> set[tuple]:
    grants = set()
    for r in rules:
        for verb in r["verbs"]:
            for url in r.get("nonResourceURLs", []):
                grants.add(("url", url, verb))
            for group in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for name in r.get("resourceNames") or ["*any*"]:
                        grants.add((group, res, name, verb))
    return grants


def shipped_servicemonitor() -> dict:
    """The ServiceMonitor manifests/ ships (in the base or in a component)."""
    for path in sorted((REPO / "manifests").rglob("*.yaml")):
        for d in manifest_docs(path):
            if d.get("kind") == "ServiceMonitor":
                return d
    raise AssertionError("no ServiceMonitor under manifests/")


def test_chart_lints(helm):
    for extra in ([], ["--values", str(FULL_VALUES)]):
        out = subprocess.run([helm, "lint", "--strict", str(CHART), "--namespace", NS, *extra],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "0 chart(s) failed" in out.stdout, out.stdout + out.stderr


def test_default_rendering_mirrors_the_manifests(helm):
    objs = helm_template(helm)
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert kinds == sorted([
        ("ServiceAccount", "pysched"), ("ConfigMap", "pysched-config"), ("Deployment", "pysched"),
        ("Service", "pysched"), ("PodDisruptionBudget", "pysched"),
        ("ClusterRole", "pysched"), ("ClusterRoleBinding", "pysched"),
        ("Role", "pysched-leader-election"), ("RoleBinding", "pysched-leader-election"),
        ("ClusterRoleBinding", "pysched:auth-delegator"),
        ("ClusterRole", "pysched:extension-apiserver-authentication-reader"),
        ("ClusterRoleBinding", "pysched:extension-apiserver-authentication-reader"),
        ("ClusterRole", "pysched-metrics-reader"), ("ClusterRole", "pysched-debug-reader"),
        ("ClusterRole", "pysched:explainer")]), \
        "ServiceMonitor, gang scheduling and team quotas are off by default"
    for o in objs:
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            expected = "kube-system" if o["metadata"]["name"].endswith("authentication-reader") else NS
            assert o["metadata"]["namespace"] == expected, o["metadata"]["name"]
    # the chart names no namespace of its own: a release elsewhere has none of NS
    elsewhere = helm_template(helm, namespace=OTHER_NS)
    assert NS not in yaml.safe_dump_all(elsewhere)
    assert {o["metadata"].get("namespace") for o in elsewhere} == {OTHER_NS, None}

    # RBAC: exactly manifests/rbac.yaml, in the release namespace.
    shipped = rbac_view(manifest_docs(REPO / "manifests" / "rbac.yaml"), {MANIFEST_NS: NS})
    assert rbac_view(objs, {}) == shipped

    # The configuration: the shipped ConfigMap's (custom scores on), the Lease in the release namespace.
    assert config_of(objs) == manifest_config(REPO / "manifests" / "config.yaml")

    # The Deployment: the shipped pod spec (non-root 65532, read-only root, emptyDir /tmp, probes, resources).
    dep = one(objs, "Deployment")
    shipped_dep = manifest_docs(REPO / "manifests" / "deployment.yaml")[0]
    pod, shipped_pod = dep["spec"]["template"]["spec"], shipped_dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["strategy"] == shipped_dep["spec"]["strategy"]
    c, sc = dict(pod["containers"][0]), dict(shipped_pod["containers"][0])
    assert c.pop("image") == f"ghcr.io/pysched/pysched:{__version__}" and c.pop("imagePullPolicy") == "IfNotPresent"
    sc.pop("image")
    assert c == sc
    # the pod IP, not pysched's default 127.0.0.1: the kubelet's probes and Prometheus reach it there
    assert "--bind-address=0.0.0.0" in c["args"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    for key in ("securityContext", "volumes", "serviceAccountName", "priorityClassName",
                "terminationGracePeriodSeconds"):
        assert pod[key] == shipped_pod[key], key
    assert pod["securityContext"]["runAsUser"] == 65532 and pod["securityContext"]["runAsNonRoot"] is True
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    # The scrape annotations (a kubernetes_sd_configs pod-role job reads them): the manifests' own.
    scrape = {k: v for k, v in dep["spec"]["template"]["metadata"]["annotations"].items()
              if k.startswith("prometheus.io/")}
    assert scrape == shipped_dep["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true", "prometheus.io/scheme": "https", "prometheus.io/port": "10259",
        "prometheus.io/path": "/metrics"}
    assert one(objs, "Service")["spec"]["selector"] == selector
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}

    # One replica: no budget (minAvailable 1 would block every drain).
    single = helm_template(helm, "--set", "replicaCount=1")
    assert not by_kind(single, "PodDisruptionBudget") and one(single, "Deployment")["spec"]["replicas"] == 1


def test_a_configuration_change_rolls_the_pods(helm):
    """The pod template carries checksum/config, a sha256 of the rendered ConfigMap: `helm upgrade`
    with values that change the configuration changes the template and so rolls the Deployment;
    values that leave the configuration alone leave the checksum alone."""
    def checksum(*args: str) -> str:
        dep = one(helm_template(helm, *args), "Deployment")
        return dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    digest = checksum()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    changed = {checksum("--set", value) for value in (
        "extraConfig.percentageOfNodesToScore=50", "gangScheduling.enabled=true", "leaderElection.leaseDuration=30s")}
    assert len(changed) == 3 and digest not in changed
    assert checksum("--set", "replicaCount=3", "--set", "podAnnotations.team=a") == digest


def test_gang_scheduling_and_servicemonitor_toggles_mirror_the_manifests(helm):
    component = REPO / "manifests" / "components" / "coscheduling"
    objs = helm_template(helm, "--set", "gangScheduling.enabled=true", "--set", "metrics.serviceMonitor.enabled=true",
                         "--include-crds")
    assert config_of(objs) == manifest_config(component / "configmap-patch.yaml")
    # crds/ is not templated: every CRD of the chart (PodGroup, ElasticQuota) whatever the values
    crds = {o["metadata"]["name"]: o for o in by_kind(objs, "CustomResourceDefinition")}
    assert crds.keys() == {"podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io"}
    assert crds["podgroups.scheduling.x-k8s.io"] == manifest_docs(component / "crd.yaml")[0], \
        "charts/pysched/crds drifted from the component's CRD"
    shipped = rbac_view(manifest_docs(REPO / "manifests" / "rbac.yaml") + manifest_docs(component / "rbac.yaml"),
                        {MANIFEST_NS: NS})
    assert rbac_view(objs, {}) == shipped
    # the CRD is in crds/: installed by `helm install`, absent from `helm template` without --include-crds
    assert not by_kind(helm_template(helm, "--set", "gangScheduling.enabled=true"), "CustomResourceDefinition")
    mon, service = one(objs, "ServiceMonitor"), one(objs, "Service")
    assert mon["spec"]["endpoints"] == shipped_servicemonitor()["spec"]["endpoints"]
    assert mon["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


@pytest.mark.parametrize("gang", [False, True])
def test_capacity_scheduling_toggle_mirrors_the_manifests(helm, gang):
    """capacityScheduling.enabled renders what manifests/components/capacityscheduling adds, and with
    gangScheduling.enabled what components/capacityscheduling-coscheduling adds (postFilter: Coscheduling,
    then CapacityScheduling, "*" disabled); pysched parses and builds the configuration."""
    from pysched.apis import config as configmod
    from pysched.tools.offline import OfflineScheduler

    components = REPO / "manifests" / "components"
    quotas = components / "capacityscheduling"
    shipped_config = components / ("capacityscheduling-coscheduling" if gang else "capacityscheduling")
    sets = ["--set", "capacityScheduling.enabled=true", "--set", f"gangScheduling.enabled={str(gang).lower()}"]
    objs = helm_template(helm, *sets, "--include-crds")
    cfg = config_of(objs)
    assert cfg == manifest_config(shipped_config / "configmap-patch.yaml")
    crds = {o["metadata"]["name"]: o for o in by_kind(objs, "CustomResourceDefinition")}
    assert crds["elasticquotas.scheduling.x-k8s.io"] == manifest_docs(quotas / "crd.yaml")[0], \
        "charts/pysched/crds drifted from the component's CRD"
    rbac = manifest_docs(REPO / "manifests" / "rbac.yaml") + manifest_docs(quotas / "rbac.yaml")
    if gang:
        rbac += manifest_docs(components / "coscheduling" / "rbac.yaml")
    assert rbac_view(objs, {}) == rbac_view(rbac, {MANIFEST_NS: NS})
    assert not by_kind(helm_template(helm, *sets), "CustomResourceDefinition")    # crds/: helm install only
    fwk = OfflineScheduler(configmod.parse(cfg)).frameworks["pysched"]
    # run in this order whatever the configured one: a PreemptionGate's PostFilter comes last
    assert [p.name for p in fwk.post_filter] == ["CapacityScheduling"] + (["Coscheduling"] if gang else [])


def test_every_knob(helm, tmp_path):
    objs = helm_template(helm, "--values", str(FULL_VALUES), release="edge", namespace="batch")
    values = yaml.safe_load(FULL_VALUES.read_text())
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert dep["metadata"]["name"] == "edge-pysched" and dep["spec"]["replicas"] == 3
    assert c["image"] == "registry.example.com/team/pysched:1.2.3" and c["imagePullPolicy"] == "Always"
    assert c["resources"] == values["resources"] and c["securityContext"] == values["securityContext"]
    assert pod["securityContext"] == values["podSecurityContext"]
    assert c["args"][-2:] == ["--log-format=logfmt", "--podgroup-controller=off"]
    assert "--secure-port=10261" in c["args"] and c["ports"][0]["containerPort"] == 10261
    assert "--bind-address=0.0.0.0" in c["args"]
    assert c["livenessProbe"]["httpGet"]["port"] == 10261 and c["readinessProbe"]["httpGet"]["port"] == 10261
    for key in ("imagePullSecrets", "nodeSelector", "tolerations", "affinity", "terminationGracePeriodSeconds"):
        assert pod[key] == values[key], key
    assert "priorityClassName" not in pod and pod["serviceAccountName"] == "batch-scheduler"
    assert dep["spec"]["template"]["metadata"]["labels"]["team"] == "batch"
    assert dep["spec"]["template"]["metadata"]["annotations"]["team"] == "batch"
    assert not [k for k in dep["spec"]["template"]["metadata"]["annotations"] if k.startswith("prometheus.io/")]
    sa = one(objs, "ServiceAccount")
    assert sa["metadata"]["name"] == "batch-scheduler" and sa["metadata"]["annotations"] == values["serviceAccount"][
        "annotations"]
    assert one(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 2
    assert one(objs, "Service")["spec"]["ports"][0]["port"] == 10261
    mon = one(objs, "ServiceMonitor")
    assert mon["spec"]["endpoints"][0]["interval"] == "15s" and mon["metadata"]["labels"]["release"] == \
        "kube-prometheus-stack"

    cfg = config_of(objs)
    assert cfg["leaderElection"] == {"leaderElect": True, "leaseDuration": "30s", "renewDeadline": "20s",
                                     "retryPeriod": "4s", "resourceLock": "leases",
                                     "resourceName": "batch-scheduler", "resourceNamespace": "batch"}
    assert cfg["clientConnection"] == {"qps": 100, "burst": 200}
    assert cfg["extenders"] == values["extenders"]
    assert cfg["percentageOfNodesToScore"] == 70 and cfg["podMaxBackoffSeconds"] == 20
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["pysched", "pysched-binpack"]
    first, second = cfg["profiles"]
    assert first["pluginConfig"] == values["profiles"][0]["pluginConfig"]
    assert first["plugins"]["score"] == {"disabled": [{"name": "ImageLocality"}]}
    assert second["percentageOfNodesToScore"] == 50
    for p in cfg["profiles"]:      # gang scheduling and team quotas in every profile, one QueueSort
        assert p["plugins"]["queueSort"] == {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}
        assert p["plugins"]["multiPoint"]["enabled"][-2:] == [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}]
        assert p["plugins"]["postFilter"] == {"enabled": [{"name": "Coscheduling"}, {"name": "CapacityScheduling"}],
                                              "disabled": [{"name": "*"}]}
    assert first["plugins"]["multiPoint"]["enabled"][:2] == [{"name": "GPU", "weight": 2},
                                                             {"name": "CapacityType", "weight": 1}]

    # pysched itself accepts the rendered configuration: every profile and plugin builds.
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "pysched", "--config", str(path), "--write-config-to", "-"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    effective = {p["schedulerName"]: p for p in yaml.safe_load(out.stdout)["profiles"]}
    for name in ("pysched", "pysched-binpack"):
        assert [e["name"] for e in effective[name]["plugins"]["queueSort"]["enabled"]] == ["Coscheduling"]
        assert [e["name"] for e in effective[name]["plugins"]["postFilter"]["enabled"]] == ["Coscheduling",
                                                                                            "CapacityScheduling"]
    assert effective["pysched"]["plugins"]["score"]["disabled"] == [{"name": "ImageLocality"}]
    assert effective["pysched-binpack"]["plugins"]["score"]["disabled"] == [{"name": "NodeResourcesBalancedAllocation"}]
    assert effective["pysched-binpack"]["percentageOfNodesToScore"] == 50
    multipoint = {e["name"]: e["weight"] for e in effective["pysched"]["plugins"]["multiPoint"]["enabled"]}
    assert multipoint["GPU"] == 2 and "Coscheduling" in multipoint and "AZSpread" not in multipoint
    assert "CapacityScheduling" in multipoint
    args = {c["name"]: c["args"] for c in effective["pysched"]["pluginConfig"]}
    assert args["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"

    # RBAC: nothing beyond manifests/rbac.yaml and the gang and quota components'; the lease by its own name;
    # delegated auth off drops exactly its two bindings; Prometheus bound to the metrics reader.
    view = rbac_view(objs, {})
    allowed = set().union(*(flatten(o["rules"]) for o in manifest_docs(REPO / "manifests" / "rbac.yaml")
                            + manifest_docs(REPO / "manifests" / "components" / "coscheduling" / "rbac.yaml")
                            + manifest_docs(REPO / "manifests" / "components" / "capacityscheduling" / "rbac.yaml")
                            if o["kind"] in ("ClusterRole", "Role")))
    lease_role = view.pop(("Role", "edge-pysched-leader-election", "batch"))
    assert ("coordination.k8s.io", "leases", "batch-scheduler", "update") in lease_role
    for key, grants in view.items():
        if key[0] in ("ClusterRole", "Role"):
            assert grants <= allowed, (key, grants - allowed)
    assert not [k for k in view if "auth-delegator" in k[1] or "authentication-reader" in k[1]]
    assert view[("ClusterRoleBinding", "edge-pysched-metrics-reader", "")][1] == [
        ("ServiceAccount", "prometheus-k8s", "monitoring")]
    assert view[("ClusterRoleBinding", "edge-pysched-debug-reader", "")][1] == [("Group", "sre", "")]
    assert view[("ClusterRoleBinding", "edge-pysched:explainer", "")][1] == [("Group", "developers", "")]
    for o in objs:
        for s in o.get("subjects") or ():
            if o["metadata"]["name"] not in ("edge-pysched-metrics-reader", "edge-pysched-debug-reader",
                                             "edge-pysched:explainer"):
                assert (s["name"], s["namespace"]) == ("batch-scheduler", "batch"), o["metadata"]["name"]


@pytest.mark.parametrize("args, field", [
    (["--set", "replicaCount=two"], "replicaCount"),
    (["--set", "replicas=3"], "replicas"),                      # a typo is not silently ignored
    (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
    (["--set", "leaderElection.enabled=false"], "leaderElection.enabled"),   # two replicas, no election
    (["--set-json", 'profiles=[{"schedulerName": ""}]'], "schedulerName"),
    (["--set-json", 'profiles=[{"plugins": {}}]'], "schedulerName"),
    (["--set", "extraConfig.profiles=x"], "extraConfig.profiles"),
    (["--set", "metrics.service.enabled=false", "--set", "metrics.serviceMonitor.enabled=true"],
     "metrics.serviceMonitor.enabled"),
])
def test_bad_values_are_refused_naming_the_field(helm, args, field):
    out = helm_template(helm, *args, check=False)
    assert out.returncode != 0 and field in out.stderr, out.stderr


async def sar(admin, verb, resource, *, group="", namespace="", name="", subresource="") -> bool:
    attrs = {"verb": verb, "resource": resource, "group": group, "namespace": namespace, "name": name,
             "subresource": subresource}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": f"system:serviceaccount:{NS}:pysched",
                     "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
                     "resourceAttributes": {k: v for k, v in attrs.items() if v or k == "group"}}}
    r = await admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body, rate_limit=False)
    return bool(r["status"].get("allowed"))


async def test_default_rendering_runs_the_scheduler_as_its_serviceaccount(helm, control_plane, admin,
                                                                          scheduler_factory):
    objs = helm_template(helm)
    await admin.request("POST", "/api/v1/namespaces", rate_limit=False,
                        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    order = list(kustomize.PATHS)
    for o in sorted(objs, key=lambda o: order.index(o["kind"])):
        await admin.request("POST", kustomize.PATHS[o["kind"]].format(ns=o["metadata"].get("namespace", "")),
                            body=o, rate_limit=False)

    tr = await admin.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/pysched/token", rate_limit=False,
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})
    kubeconfig = control_plane.kubeconfig_for_token(tr["status"]["token"], "pysched-sa")
    cfg = config_of(objs)
    await create_nodes(admin, [make_node("n1", cpu="2"), make_node("n2", cpu="2")])
    await create_pods(admin, [make_pod(f"p{i}", cpu="500m") for i in range(4)] + [make_pod("big", cpu="16")])
    # Prometheus' ServiceAccount bound to the chart's metrics-reader ClusterRole (before the first
    # scrape, so no cached denial); another ServiceAccount stays unbound.
    for sa in ("prometheus", "nobody"):
        await admin.request("POST", "/api/v1/namespaces/default/serviceaccounts", rate_limit=False,
                            body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
    await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "prometheus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pysched-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "default"}]})
    sched = scheduler_factory(cfg, name="chart", kubeconfig=kubeconfig).start()

    async def settled():
        pods = {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}
        ok = all(pods[f"p{i}"]["spec"].get("nodeName") for i in range(4)) and pod_scheduled_condition(pods["big"])
        return pods if ok else None

    await wait_for(settled, 60, what="pods bound and the big one marked unschedulable")
    lease = await admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/pysched")
    assert lease["spec"]["holderIdentity"]

    async def token(sa: str) -> str:
        r = await admin.request("POST", f"/api/v1/namespaces/default/serviceaccounts/{sa}/token", rate_limit=False,
                                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                      "spec": {"expirationSeconds": 3600}})
        return r["status"]["token"]

    prom, nobody = await token("prometheus"), await token("nobody")
    status, text = await sched.get("/metrics", token=prom)
    assert status == 200 and "scheduler_schedule_attempts_total" in text
    assert (await sched.get("/configz", token=prom))[0] == 403       # the reader role grants /metrics only
    assert (await sched.get("/metrics", token=nobody))[0] == 403
    cert = control_plane.issue_cert("cert-user", client=True)      # client CA read from kube-system
    status, body = await sched.get("/metrics", token=None, cert=cert)
    assert status == 403 and json.loads(body)["message"] == 'forbidden: User "cert-user" cannot get path "/metrics"'

    # Gang scheduling and team quotas are off: PodGroups and ElasticQuotas are neither listed nor
    # watched, so nothing is refused.
    log = sched.log()
    assert not re.search(r"\b403\b", log) and "Forbidden" not in log and "cannot list" not in log, log[-3000:]
    assert "cannot look up the client CA" not in log

    for verb, res, kw in [("create", "pods", {"subresource": "binding", "namespace": "default"}),
                          ("patch", "pods", {"subresource": "status", "namespace": "default"}),
                          ("patch", "pods", {"namespace": "default"}),          # GPUShare's GPU indices
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": NS, "name": "pysched"}),
                          ("create", "leases", {"group": "coordination.k8s.io", "namespace": NS}),
                          ("create", "tokenreviews", {"group": "authentication.k8s.io"}),
                          ("get", "configmaps", {"namespace": "kube-system",
                                                 "name": "extension-apiserver-authentication"})]:
        assert await sar(admin, verb, res, **kw), f"{verb} {res} {kw} should be allowed"
    for verb, res, kw in [("update", "pods", {"namespace": "default"}), ("list", "secrets", {}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": NS, "name": "other"}),
                          ("create", "leases", {"group": "coordination.k8s.io", "namespace": "default"}),
                          ("create", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system"}),
                          ("update", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system",
                                                "name": "kube-scheduler"}),
                          ("get", "configmaps", {"namespace": "kube-system"}),
                          ("list", "podgroups", {"group": "scheduling.x-k8s.io"}),
                          ("list", "elasticquotas", {"group": "scheduling.x-k8s.io"})]:
        assert not await sar(admin, verb, res, **kw), f"{verb} {res} {kw} must not be granted"
    assert sched.terminate() == 0


def test_notes_warn_when_the_image_is_a_placeholder(helm, control_plane):
    """``helm install`` prints NOTES: a warning when image.repository is still a placeholder."""
    def notes(*args: str) -> str:
        out = subprocess.run([helm, "install", "pysched", str(CHART), "--namespace", NS, "--dry-run=client",
                              "--kubeconfig", str(control_plane.kubeconfig), *args],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout[out.stdout.index("NOTES:"):]
    released = notes()
    assert "WARNING" not in released and "ClusterRole pysched-debug-reader" in released
    assert "ClusterRole pysched:explainer" in released
    placeholder = notes("--set", "image.repository=ghcr.io/example/pysched")
    assert placeholder.startswith('NOTES:\nWARNING: image.repository is "ghcr.io/example/pysched", a placeholder')
