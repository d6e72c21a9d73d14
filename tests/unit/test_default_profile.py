"""The default profile is kube-scheduler's of the release pysched follows (1.35, 1.36, 1.37); pysched's
own scores are opt-in; the arguments
kube-scheduler writes for plugins we do not act on are accepted with its validation; and
``--write-config-to`` writes plugins and args the way kube-scheduler does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pysched.apis.config import ConfigError, PluginRef, Profile, load_file, merged_plugin_sets, parse
from pysched.backend.cache.cache import SchedulerCache
from pysched.framework.args import dump_args
from pysched.plugins.dynamic_resources import DynamicResourcesArgs
from pysched.profile import build_frameworks, default_registry
from pysched_dev.testkit import CUSTOM_SCORES

REPO = Path(__file__).resolve().parents[2]
HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}

# pkg/scheduler/apis/config/v1/default_plugins.go at v1.35.4 with 1.35's default feature gates
# (DynamicResourceAllocation GA: DynamicResources, weight 2, before DefaultPreemption).
KUBE_1_35_MULTIPOINT = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2), ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0),
]


def frameworks(raw: dict):
    return build_frameworks(parse({**HEAD, **raw}), default_registry(), cache=SchedulerCache(), client=None,
                            recorder=None)


# v1.36.2: the same list, then NodeDeclaredFeatures (beta, on by default) appended by applyFeatureGates.
KUBE_1_36_MULTIPOINT = KUBE_1_35_MULTIPOINT + [("NodeDeclaredFeatures", 0)]
# v1.37.2: NodeName moved before NodeUnschedulable; NodeDeclaredFeatures GA.
KUBE_1_37_MULTIPOINT = [("SchedulingGates", 0), ("PrioritySort", 0), ("NodeName", 0), ("NodeUnschedulable", 0),
                        *KUBE_1_35_MULTIPOINT[4:], ("NodeDeclaredFeatures", 0)]


@pytest.mark.parametrize("release,expected", [((1, 35), KUBE_1_35_MULTIPOINT), ((1, 36), KUBE_1_36_MULTIPOINT),
                                              ((1, 37), KUBE_1_37_MULTIPOINT)])
def test_default_multipoint_is_kube_schedulers_exactly(release, expected):
    everything = {n for n, _ in KUBE_1_37_MULTIPOINT} | set(CUSTOM_SCORES)
    sets = merged_plugin_sets(Profile("x"), everything, release)
    assert [(r.name, r.weight) for r in sets["multiPoint"].enabled] == expected


def test_default_multipoint_follows_the_gates():
    """applyFeatureGates: an alpha gate turned on adds its plugin where upstream puts it."""
    from pysched.apis.features import parse_flag, resolve
    names = {"DeferredPodScheduling", "GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"}
    everything = {n for n, _ in KUBE_1_37_MULTIPOINT} | names
    gates = resolve((1, 37), parse_flag("InPlacePodVerticalScalingSchedulerPreemption=true,GenericWorkload=true,"
                                        "TopologyAwareWorkloadScheduling=true")).enabled
    got = [r.name for r in merged_plugin_sets(Profile("x"), everything, (1, 37), gates)["multiPoint"].enabled]
    assert got.index("DeferredPodScheduling") == got.index("NodeResourcesFit") - 1
    assert got[-4:] == ["NodeDeclaredFeatures", "GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"]


def test_our_scores_are_opt_in():
    fw = frameworks({"profiles": [{"schedulerName": "x"}]})["x"]
    assert not set(CUSTOM_SCORES) & {p.name for p in fw.score}
    assert not set(CUSTOM_SCORES) & set(fw.plugins)
    on = frameworks({"profiles": [{"schedulerName": "x", "plugins": {"multiPoint": {
        "enabled": [{"name": n, "weight": 1} for n in CUSTOM_SCORES]}}}]})["x"]
    assert [p.name for p in on.score][-4:] == list(CUSTOM_SCORES)
    assert all(on.weights[n] == 1 for n in CUSTOM_SCORES)


@pytest.mark.parametrize("path", ["examples/scheduler-config.yaml", "manifests/config.yaml"])
def test_shipped_configurations_enable_our_scores(path):
    raw = yaml.safe_load((REPO / path).read_text())
    if raw.get("kind") == "ConfigMap":
        raw = yaml.safe_load(raw["data"]["config.yaml"])
    cfg = parse(raw)
    fws = build_frameworks(cfg, default_registry(), cache=SchedulerCache(), client=None, recorder=None)
    for fw in fws.values():
        assert set(CUSTOM_SCORES) <= {p.name for p in fw.score}, path


def test_dynamic_resources_args_as_kube_validates_them():
    fw = frameworks({"profiles": [{"schedulerName": "x", "pluginConfig": [
        {"name": "DynamicResources", "args": {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                              "kind": "DynamicResourcesArgs", "filterTimeout": "0s"}}]}]})["x"]
    assert fw.plugin_args["DynamicResources"].filter_timeout == "0s"
    default = frameworks({"profiles": [{"schedulerName": "x"}]})["x"].plugin_args["DynamicResources"]
    # 1.37's defaults (its binding-condition gates on): bindingTimeout written as kube writes it
    assert dump_args(default) == {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs",
                                  "filterTimeout": "10s", "bindingTimeout": "10m0s"}
    old = build_frameworks(parse({**HEAD, "profiles": [{"schedulerName": "x"}]}), default_registry(),
                           cache=SchedulerCache(), client=None, recorder=None, kube_version=(1, 35))
    assert dump_args(old["x"].plugin_args["DynamicResources"]) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs", "filterTimeout": "10s"}
    with pytest.raises(ConfigError, match=r'^profiles\[0\]\.pluginConfig\[0\]\.args\.filterTimeout: '
                                          r'Invalid value: "-1s": must be zero or positive$'):
        frameworks({"profiles": [{"schedulerName": "x", "pluginConfig": [
            {"name": "DynamicResources", "args": {"filterTimeout": "-1s"}}]}]})
    binding_timeout = {"profiles": [{"schedulerName": "x", "pluginConfig": [
        {"name": "DynamicResources", "args": {"bindingTimeout": "600s"}}]}]}
    with pytest.raises(ConfigError, match=r"^profiles\[0\]\.pluginConfig\[0\]\.args\.bindingTimeout: Forbidden: "
                                          "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate"):
        build_frameworks(parse({**HEAD, **binding_timeout}), default_registry(), cache=SchedulerCache(),
                         client=None, recorder=None,
                         feature_gates=frozenset({"DynamicResourceAllocation"}))   # 1.35's: binding gates off
    on = build_frameworks(parse({**HEAD, **binding_timeout}), default_registry(), cache=SchedulerCache(), client=None,
                          recorder=None, feature_gates=frozenset({"DynamicResourceAllocation",
                                                                  "DRADeviceBindingConditions",
                                                                  "DRAResourceClaimDeviceStatus"}))   # 1.37's
    assert on["x"].plugins["DynamicResources"].binding_timeout == 600.0
    with pytest.raises(ConfigError, match=r"args\.filterTimeout: Invalid value: \"ten\""):
        frameworks({"profiles": [{"schedulerName": "x", "pluginConfig": [
            {"name": "DynamicResources", "args": {"filterTimeout": "ten"}}]}]})
    assert DynamicResourcesArgs().filter_timeout == "10s"


def test_kube_written_top_level_fields_are_accepted():
    cfg = parse({**HEAD, "clientConnection": {"acceptContentTypes": "", "burst": 100, "kubeconfig": "",
                                              "contentType": "application/vnd.kubernetes.protobuf", "qps": 50},
                 "enableContentionProfiling": True, "enableProfiling": True, "parallelism": 16,
                 "percentageOfNodesToScore": 0, "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10,
                 "delayCacheUntilActive": False,
                 "leaderElection": {"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s",
                                    "resourceLock": "leases", "resourceName": "kube-scheduler",
                                    "resourceNamespace": "kube-system", "retryPeriod": "2s"},
                 "profiles": [{"schedulerName": "default-scheduler", "plugins": {
                     ep: {} for ep in ("bind", "filter", "permit", "postBind", "postFilter", "preBind",
                                       "preEnqueue", "preFilter", "preScore", "queueSort", "reserve", "score")}}]})
    assert cfg.client_connection.content_type == "application/vnd.kubernetes.protobuf"
    assert cfg.enable_profiling and cfg.enable_contention_profiling
    # kube writes weight 0 for every plugin it lists
    p = parse({**HEAD, "profiles": [{"schedulerName": "x", "plugins": {"multiPoint": {"enabled": [
        {"name": "NodeName", "weight": 0}]}}}]}).profiles[0]
    assert p.plugins["multiPoint"].enabled == [PluginRef("NodeName", 0)]


def test_write_config_to_lists_plugins_and_args_as_kube_does(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({**HEAD, "profiles": [{"schedulerName": "x", "pluginConfig": [
        {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 30}}]}]}))
    out = subprocess.run([sys.executable, "-m", "pysched", "--config", str(f), "--write-config-to", "-"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    prof = yaml.safe_load(out)["profiles"][0]
    enabled = prof["plugins"]["multiPoint"]["enabled"]
    assert all(set(e) == {"name", "weight"} for e in enabled)            # weight 0 written too
    assert {"name": "DynamicResources", "weight": 2} in enabled
    names = [pc["name"] for pc in prof["pluginConfig"]]
    # The profile's own entries first, then the defaulted ones sorted by name (setDefaults_KubeSchedulerProfile).
    assert names[0] == "VolumeBinding" and names[1:] == sorted(names[1:])
    # 1.37 (StorageCapacityScoring on): the shape defaulted as kube writes it
    assert prof["pluginConfig"][0]["args"] == {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                               "kind": "VolumeBindingArgs", "bindTimeoutSeconds": 30,
                                               "shape": [{"utilization": 0, "score": 10},
                                                         {"utilization": 100, "score": 0}]}
    # 1.35: no shape
    old = subprocess.run([sys.executable, "-m", "pysched", "--config", str(f), "--write-config-to", "-",
                          "--emulated-version", "1.35"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert yaml.safe_load(old)["profiles"][0]["pluginConfig"][0]["args"] == {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "VolumeBindingArgs", "bindTimeoutSeconds": 30}
    # What was written is read back to the same frameworks.
    again = tmp_path / "again.yaml"
    again.write_text(out)
    assert load_file(again).profiles[0].plugin_config["VolumeBinding"]["bindTimeoutSeconds"] == 30
