"""KubeSchedulerConfiguration parsing: defaults, and errors that name the field."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pysched.apis.config import ConfigError, default_config, go_duration_ns, load_file, parse, parse_duration
from pysched.backend.cache.cache import SchedulerCache
from pysched.profile import build_frameworks, default_registry

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cfg(**kw):
    return parse({**HEAD, **kw})


def test_defaults():
    c = default_config()
    assert c.profiles[0].scheduler_name == "pysched"
    le = c.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period, le.resource_lock) == (15, 10, 2, "leases")
    assert le.resource_name == "pysched"
    assert (c.client_connection.qps, c.client_connection.burst) == (50, 100)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds, c.percentage_of_nodes_to_score) == (1, 10, 0)


def test_durations():
    assert parse_duration("1m30s", "x") == 90
    assert parse_duration("500ms", "x") == 0.5
    with pytest.raises(ConfigError, match='x: Invalid value: "15 seconds": time: unknown unit " seconds"'):
        parse_duration("15 seconds", "x")


@pytest.mark.parametrize("text,ns", [
    ("0", 0), ("-0", 0), ("1h2m3s4ms5us6ns", 3_723_004_005_006), (".5s", 500_000_000), ("5.s", 5 * 10**9),
    ("-1.5h", -5_400 * 10**9), ("1\u00b5s", 1000), ("1\u03bcs", 1000),
    ("2562047h47m16.854775807s", 2**63 - 1), ("-2562047h47m16.854775808s", -(2**63)),
])
def test_go_durations(text, ns):
    assert go_duration_ns(text) == ns


@pytest.mark.parametrize("text,message", [
    ("99999999999999999999h", 'time: invalid duration "99999999999999999999h"'),   # time.ParseDuration overflow
    ("2562047h47m16.854775808s", "time: invalid duration"),                       # one ns beyond int64
    ("9223372036854775808ns", "time: invalid duration"),
    ("1", 'time: missing unit in duration "1"'),
    ("1x", 'time: unknown unit "x" in duration "1x"'),
    (".s", "time: invalid duration"),
])
def test_go_duration_errors(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        go_duration_ns(text)


@pytest.mark.parametrize("raw,field", [
    ({"bogus": 1}, "bogus: unknown field"),
    ({"profiles": [{"schedulerName": "a", "plugins": {"score": {"enabled": [{"name": "X", "weight": -1}]}}}]},
     r"profiles\[0\].plugins.score.enabled\[0\].weight"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, r"profiles\[1\].schedulerName: Duplicate"),
    ({"profiles": [{"schedulerName": "a"}, {}]}, r"profiles\[1\].schedulerName: Required"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore"),
    ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}, "podMaxBackoffSeconds"),
    ({"leaderElection": {"leaseDuration": "5s", "renewDeadline": "10s"}}, "leaderElection.leaseDuration"),
    ({"leaderElection": {"resourceLock": "endpoints"}}, "leaderElection.resourceLock"),
    ({"leaderElection": {"leaseDuration": "2562047h"}}, "leaderElection.leaseDuration: must be less than 2147483648s"),
    ({"leaderElection": {"leaseDuration": "fifteen"}}, "leaderElection.leaseDuration: Invalid value: \"fifteen\""),
    ({"leaderElection": {"leaseDuration": "99999999999999999999h"}},
     'leaderElection.leaseDuration: Invalid value: "99999999999999999999h": time: invalid duration'),
    ({"profiles": [{"schedulerName": "a", "plugins": {"score": {"enabled": [{"name": "X", "weight": 2**31}]}}}]},
     r"profiles\[0\].plugins.score.enabled\[0\].weight: Invalid value: 2147483648: .* int32"),
    ({"parallelism": 2**31}, "parallelism: Invalid value: .* int32"),
    ({"clientConnection": {"burst": 2**31}}, "clientConnection.burst: Invalid value: .* int32"),
    ({"clientConnection": {"qps": 1e39}}, "clientConnection.qps: Invalid value: .* float32"),
    ({"clientConnection": {"qps": "fast"}}, "clientConnection.qps: expected a number"),
    ({"profiles": [{"schedulerName": "a", "plugins": {"scorez": {}}}]}, r"profiles\[0\].plugins.scorez: unknown field"),
    ({"extenders": [{"urlPrefix": "http://x", "prioritizeVerb": "p"}]}, r"extenders\[0\].weight"),
    ({"extenders": [{"urlPrefix": "ftp://x"}]}, r"extenders\[0\].urlPrefix"),
    ({"extenders": [{"urlPrefix": "http://x", "managedResources": [{"name": "cpu"}]}]},
     r"extenders\[0\].managedResources\[0\].name"),
    ({"extenders": [{"urlPrefix": "http://x", "bindVerb": "b"}, {"urlPrefix": "http://y", "bindVerb": "b"}]},
     "only one extender can implement bind"),
    ({"profiles": [{"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}},
                   {"schedulerName": "b"}]}, r"profiles\[1\].plugins.queueSort"),
])
def test_errors_name_the_field(raw, field):
    with pytest.raises(ConfigError, match=field):
        cfg(**raw)


def test_wrong_api_version_and_kind():
    with pytest.raises(ConfigError, match="apiVersion"):
        parse({"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": "KubeSchedulerConfiguration"})
    with pytest.raises(ConfigError, match="kind"):
        parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "Other"})


def test_malformed_yaml_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("apiVersion: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML.*line"):
        load_file(p)
    with pytest.raises(ConfigError, match="No such file"):
        load_file(tmp_path / "missing.yaml")


VALID_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("content,expected", [
    (("[" * 10000 + "]" * 10000).encode(), "nested deeper than 200 levels"),
    ("".join("  " * i + "-\n" for i in range(10000)).encode(), "nested deeper than 200 levels"),
    (VALID_HEAD.encode() + b"profiles:\n- schedulerName: caf\xe9\n", "not UTF-8 text: byte 0xe9 at offset"),
    ((VALID_HEAD + "leaderElection:\n  leaseDuration: 99999999999999999999h\n").encode(),
     'leaderElection.leaseDuration: Invalid value: "99999999999999999999h": time: invalid duration'),
    ((VALID_HEAD + "profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n"
      "      - name: ImageLocality\n        weight: 100000000000\n").encode(),
     "profiles[0].plugins.score.enabled[0].weight: Invalid value: 100000000000"),
])
def test_malformed_config_exits_2_naming_the_problem(tmp_path, content, expected):
    """As deployed: ``python -m pysched --config bad.yaml`` exits 2 with one line, no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "pysched", "--config", str(bad)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    if "YAML" in expected or "UTF-8" in expected:
        assert str(bad) in proc.stderr


def frameworks(raw):
    return build_frameworks(cfg(**raw), default_registry(), cache=SchedulerCache(), client=None, recorder=None)


def test_unknown_plugin_and_plugin_config_errors():
    with pytest.raises(ConfigError, match=r"profiles\[0\].plugins.filter.enabled\[0\]: plugin 'Nope' does not exist"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]})
    with pytest.raises(ConfigError, match=r"profiles\[0\].pluginConfig\[0\].name: plugin 'Nope'"):
        frameworks({"profiles": [{"schedulerName": "a", "pluginConfig": [{"name": "Nope", "args": {}}]}]})
    with pytest.raises(ConfigError, match=r"profiles\[0\].pluginConfig\[0\].args.scoringStrategy.type"):
        frameworks({"profiles": [{"schedulerName": "a", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}]}]})
    with pytest.raises(ConfigError, match="does not implement filter"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {
            "filter": {"enabled": [{"name": "PrioritySort"}]}}}]})


def test_plugin_errors_point_into_the_users_own_list_and_suggest_a_name():
    # The user's list has two entries; merged with kube-scheduler's 19 defaults the typo is the 21st.
    with pytest.raises(ConfigError) as err:
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"multiPoint": {"enabled": [
            {"name": "GPU", "weight": 1}, {"name": "AZSpred", "weight": 1}]}}}]})
    assert str(err.value).startswith("profiles[0].plugins.multiPoint.enabled[1]: plugin 'AZSpred' does not exist; "
                                     "did you mean 'AZSpread'? (known: AZSpread, ")
    with pytest.raises(ConfigError, match=r"pluginConfig\[0\].name: plugin 'nodeaffinity' does not exist; did you "
                                          r"mean 'NodeAffinity'\? \(known: "):
        frameworks({"profiles": [{"schedulerName": "a", "pluginConfig": [{"name": "nodeaffinity", "args": {}}]}]})
    with pytest.raises(ConfigError, match=r"plugin 'Zzz' does not exist \(known: "):   # nothing close
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {"score": {"enabled": [{"name": "Zzz"}]}}}]})


def test_plugin_config_for_a_plugin_not_enabled_is_reported():
    fw = frameworks({"profiles": [{"schedulerName": "a", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {}},
        {"name": "InstanceType", "args": {"preferences": [{"prefix": "m5.", "score": 100}]}}]}]})["a"]
    assert fw.ignored_plugin_config == [("profiles[0].pluginConfig[1]", "InstanceType")]
    # Its args are validated all the same.
    with pytest.raises(ConfigError, match=r"profiles\[0\].pluginConfig\[0\].args.defaultScore"):
        frameworks({"profiles": [{"schedulerName": "a", "pluginConfig": [
            {"name": "InstanceType", "args": {"defaultScore": 500}}]}]})


def test_startup_log_lists_each_profile_and_warns_of_ignored_plugin_config(caplog):
    import logging

    from pysched.assembly.profiles import log_profile

    fw = frameworks({"profiles": [{"schedulerName": "a", "plugins": {"multiPoint": {"enabled": [
        {"name": "GPU", "weight": 4}]}}, "pluginConfig": [{"name": "AZSpread", "args": {}}]}]})["a"]
    with caplog.at_level(logging.INFO, logger="pysched.app"):
        log_profile(fw)
    info, warning = caplog.records
    assert info.kv["profile"] == "a" and info.kv["plugins"].startswith("SchedulingGates,PrioritySort,")
    assert info.kv["plugins"].endswith(",GPU")
    assert "GPU=4" in info.kv["scores"] and "TaintToleration=3" in info.kv["scores"]
    assert info.kv["out_of_tree"] == "GPU:pysched_policy.gpu"    # the policy plugins come as a user's do
    assert warning.levelname == "WARNING" and warning.kv == {
        "profile": "a", "plugin": "AZSpread", "field": "profiles[0].pluginConfig[0]"}


def test_a_tab_in_the_file_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(VALID_HEAD + "profiles:\n- schedulerName: a\n\tplugins: {}\n")
    with pytest.raises(ConfigError, match=r"line 5, column 1: .*tab.*\(a tab: YAML indents with spaces only\)"):
        load_file(p)


def test_disable_and_reweight():
    fw = frameworks({"profiles": [{"schedulerName": "a", "plugins": {
        "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}],
                       "disabled": [{"name": "TaintToleration"}]},
        "score": {"disabled": [{"name": "NodeAffinity"}]}}}]})["a"]
    assert [p.name for p in fw.filter if p.name != "NodeDeclaredFeatures"] == [
                                           "NodeName", "NodeUnschedulable", "NodeAffinity", "NodePorts",
                                           "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
                                           "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
                                           "DynamicResources"]
    assert "TaintToleration" not in [p.name for p in fw.score] and "NodeAffinity" not in [p.name for p in fw.score]
    assert fw.score[0].name == "NodeResourcesFit" and fw.weights["NodeResourcesFit"] == 7


def test_star_disables_defaults_at_a_point():
    fw = frameworks({"profiles": [{"schedulerName": "a", "plugins": {
        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}}}]})["a"]
    assert [p.name for p in fw.filter] == ["NodeResourcesFit"]


def test_specific_point_overrides_multipoint_order_and_weight():
    fw = frameworks({"profiles": [{"schedulerName": "a", "plugins": {
        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5},
                              {"name": "TaintToleration", "weight": 1}]}}}]})["a"]
    # VolumeBinding scores (weight 1) wherever kube's expansion lists it: after NodeAffinity
    assert [p.name for p in fw.score][:6] == ["NodeResourcesFit", "TaintToleration", "NodeAffinity",
                                               "VolumeBinding", "PodTopologySpread", "InterPodAffinity"]
    assert (fw.weights["NodeResourcesFit"], fw.weights["TaintToleration"], fw.weights["NodeAffinity"]) == (5, 1, 2)


def test_file_roundtrip(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        leaderElection:
          leaderElect: true
          leaseDuration: 20s
          renewDeadline: 15s
          retryPeriod: 3s
          resourceName: mine
          resourceNamespace: pysched-system
        profiles:
        - schedulerName: one
        - schedulerName: two
          percentageOfNodesToScore: 30
    """))
    c = load_file(p)
    assert [x.scheduler_name for x in c.profiles] == ["one", "two"]
    assert c.profiles[1].percentage_of_nodes_to_score == 30
    assert c.leader_election.lease_duration == 20 and c.leader_election.resource_namespace == "pysched-system"


def test_lease_namespace_defaults_to_the_pods_own(tmp_path, monkeypatch):
    """No leaderElection.resourceNamespace (manifests/config.yaml names none): POD_NAMESPACE (the
    Deployment's downward API), else the ServiceAccount's namespace file, else kube-system."""
    import pysched.apis.config.decode as decode
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "leaderElection": {"leaderElect": True}}
    sa_file = tmp_path / "namespace"
    monkeypatch.setattr(decode, "SA_NAMESPACE_FILE", str(sa_file))
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert parse(cfg).leader_election.resource_namespace == "kube-system"
    sa_file.write_text("from-sa\n")
    assert parse(cfg).leader_election.resource_namespace == "from-sa"
    monkeypatch.setenv("POD_NAMESPACE", "from-pod")
    assert parse(cfg).leader_election.resource_namespace == "from-pod"
    explicit = {**cfg, "leaderElection": {"leaderElect": True, "resourceNamespace": "pinned"}}
    assert parse(explicit).leader_election.resource_namespace == "pinned"


def test_the_pod_group_extension_points_of_1_37_are_accepted_and_written():
    """kube-scheduler 1.36/1.37's placementGenerate, placementScore and podGroupPostFilter: read and
    written back as kube-scheduler does (pysched runs no pod-group cycle; their plugins are built)."""
    from pysched.apis.config import to_dict
    raw = {"profiles": [{"schedulerName": "a", "plugins": {
        "placementScore": {"enabled": [{"name": "NodeResourcesFit", "weight": 1}]},
        "podGroupPostFilter": {"enabled": [{"name": "DefaultPreemption"}]},
        "placementGenerate": {}}}]}
    fws = frameworks(raw)
    assert "NodeResourcesFit" in fws["a"].plugins
    written = to_dict(parse({**HEAD, **raw}))
    plugins = written["profiles"][0]["plugins"]
    assert plugins["placementScore"] == {"enabled": [{"name": "NodeResourcesFit", "weight": 1}]}
    assert plugins["podGroupPostFilter"] == {"enabled": [{"name": "DefaultPreemption", "weight": 0}]}
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.plugins\.placementScore\.enabled\[0\]: plugin 'Nope'"):
        frameworks({"profiles": [{"schedulerName": "a", "plugins": {
            "placementScore": {"enabled": [{"name": "Nope"}]}}}]})
