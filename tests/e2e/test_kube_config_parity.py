"""Configuration and profile parity with the control plane's kube-scheduler (1.37.2; 1.35.4 in the second leg).

* kube-scheduler's own configuration (``kube-scheduler --write-config-to``) is accepted by
  ``pysched --config`` unchanged, and builds the same plugin list;
* for a one-line profile (``profiles: [{schedulerName: x}]``) both schedulers' ``--write-config-to``
  give the same MultiPoint plugins (names, weights, order) and the same args for the plugins
  both implement;
* the fields kube writes and we do not act on are validated as kube validates them;
* a preferred node-affinity term with a non-integer ``Gt``/``Lt`` value fails the cycle with
  kube's message; a required one only matches no node;
* a pod with pod-level ``spec.resources`` lands where kube-scheduler puts it (NodeResourcesFit's
  score counts the containers' requests).

``kube-scheduler --write-config-to`` needs a client configuration but never connects:
``--master`` pointing at a closed loopback port is the minimal flag set (no API server).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pysched.apis.config import parse_duration
from pysched_dev.devcluster import KubeSchedulerProcess, binaries_dir, binaries_version
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod, pod_scheduled_condition
from tests.differential import strip_postfilter

from .conftest import REPO, scheduler_config, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
ONE_LINE = {**HEAD, "profiles": [{"schedulerName": "x"}]}
# pysched's TaintToleration takes ``comparisonOperators`` as args (kube-scheduler has the alpha
# TaintTolerationComparisonOperators gate instead, and no TaintTolerationArgs kind to write).
OURS_ONLY_ARGS = {"TaintToleration"}


def kube_write_config(tmp_path: Path, config: dict | None, name: str) -> tuple[int, dict | None, str]:
    """``kube-scheduler [--config] --write-config-to``: (exit code, the written file, its error)."""
    out = tmp_path / f"{name}-kube-written.yaml"
    # --secure-port=0: it may otherwise try to bind 10259 first, which a parallel test can hold
    args = [str(binaries_dir() / "kube-scheduler"), "--master=https://127.0.0.1:1", "--secure-port=0",
            f"--write-config-to={out}"]
    if config is not None:
        src = tmp_path / f"{name}-kube-in.yaml"
        src.write_text(yaml.safe_dump(config))
        args.append(f"--config={src}")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    m = re.search(r'"command failed" err="(.*)"\s*$', proc.stderr, re.M)
    err = m.group(1).replace('\\"', '"') if m else ""
    return proc.returncode, (yaml.safe_load(out.read_text()) if proc.returncode == 0 else None), err


def pysched_write_config(path: Path) -> subprocess.CompletedProcess:
    # Without an API server pysched writes the newest release's profile unless told the release:
    # the control plane's, which is the kube-scheduler binary's compared against.
    major, minor = binaries_version()
    return subprocess.run([sys.executable, "-m", "pysched", "--config", str(path), "--write-config-to", "-",
                           f"--emulated-version={major}.{minor}"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def pysched_config(tmp_path: Path, config: dict, name: str) -> tuple[int, dict | None, str]:
    src = tmp_path / f"{name}-ours-in.yaml"
    src.write_text(yaml.safe_dump(config))
    proc = pysched_write_config(src)
    return proc.returncode, (yaml.safe_load(proc.stdout) if proc.returncode == 0 else None), proc.stderr


def multipoint(profile: dict) -> list[tuple[str, int]]:
    return [(p["name"], p.get("weight", 0)) for p in profile["plugins"]["multiPoint"]["enabled"]]


def other_points(profile: dict) -> dict[str, list]:
    return {ep: (ps or {}).get("enabled") or [] for ep, ps in profile["plugins"].items() if ep != "multiPoint"}


def plugin_args(profile: dict) -> dict[str, dict]:
    return {pc["name"]: pc.get("args") or {} for pc in profile.get("pluginConfig") or ()}


# -- kube's file, read by pysched -------------------------------------------------------------

@pytest.mark.parametrize("given", [None, ONE_LINE], ids=["kube-defaults", "one-line-profile"])
def test_kube_schedulers_written_configuration_is_accepted_unchanged(tmp_path, given):
    """Needs VolumeRestrictions, NodeVolumeLimits and DefaultPreemption (with DefaultPreemptionArgs)
    in the registry: kube's file names them."""
    rc, _, err = kube_write_config(tmp_path, given, "src")
    assert rc == 0, err
    written = tmp_path / "src-kube-written.yaml"
    proc = pysched_write_config(written)
    assert proc.returncode == 0, proc.stderr
    ours = yaml.safe_load(proc.stdout)
    kube = yaml.safe_load(written.read_text())
    for theirs, mine in zip(kube["profiles"], ours["profiles"], strict=True):
        assert mine["schedulerName"] == theirs["schedulerName"]
        assert multipoint(mine) == multipoint(theirs)
        kube_args, our_args = plugin_args(theirs), plugin_args(mine)
        for name, args in kube_args.items():
            assert our_args[name] == args, name
    # the fields we do not act on came through as written
    for key in ("parallelism", "enableProfiling", "enableContentionProfiling", "podInitialBackoffSeconds",
                "podMaxBackoffSeconds", "percentageOfNodesToScore", "delayCacheUntilActive"):
        assert ours.get(key, False) == kube.get(key, False), key
    assert ours["clientConnection"]["contentType"] == kube["clientConnection"]["contentType"]
    assert ours["leaderElection"]["resourceName"] == kube["leaderElection"]["resourceName"]


# -- the same one-line profile, written by both -----------------------------------------------

def test_one_line_profile_gives_kube_schedulers_plugin_list(tmp_path):
    """Exact equality of the MultiPoint list (names, weights, order) and of the other extension
    points (empty); needs VolumeRestrictions, NodeVolumeLimits and DefaultPreemption."""
    rc, kube, err = kube_write_config(tmp_path, ONE_LINE, "one")
    assert rc == 0, err
    rc, ours, err = pysched_config(tmp_path, ONE_LINE, "one")
    assert rc == 0, err
    theirs, mine = kube["profiles"][0], ours["profiles"][0]
    assert multipoint(mine) == multipoint(theirs)
    assert {ep: v for ep, v in other_points(theirs).items() if v} == {}
    assert {ep: v for ep, v in other_points(mine).items() if v} == {}
    # every plugin kube writes args for has args here (DefaultPreemptionArgs comes with the plugin)
    assert set(plugin_args(theirs)) - set(plugin_args(mine)) == set()


def test_one_line_profile_gives_kube_schedulers_plugin_args(tmp_path):
    rc, kube, err = kube_write_config(tmp_path, ONE_LINE, "args")
    assert rc == 0, err
    rc, ours, err = pysched_config(tmp_path, ONE_LINE, "args")
    assert rc == 0, err
    theirs, mine = plugin_args(kube["profiles"][0]), plugin_args(ours["profiles"][0])
    both = set(theirs) & set(mine)
    assert {"DynamicResources", "InterPodAffinity", "NodeAffinity", "NodeResourcesBalancedAllocation",
            "NodeResourcesFit", "PodTopologySpread", "VolumeBinding"} <= both
    for name in sorted(both):
        assert mine[name] == theirs[name], name
    assert set(mine) - set(theirs) == OURS_ONLY_ARGS
    # the order kube writes them in: sorted by name when all are defaulted
    common_order = [n for n in (pc["name"] for pc in ours["profiles"][0]["pluginConfig"]) if n in both]
    assert common_order == [n for n in (pc["name"] for pc in kube["profiles"][0]["pluginConfig"]) if n in both]


# -- validation of what we do not act on ------------------------------------------------------

def _profile_args(name: str, args: dict) -> dict:
    return {**HEAD, "profiles": [{"schedulerName": "x", "pluginConfig": [{"name": name, "args": args}]}]}


ARGS = "profiles[0].pluginConfig[0].args."
# case -> (configuration, the field our error names, whether kube's whole message is ours too)
REJECTED_BY_BOTH = {
    "dra-negative-filter-timeout": (_profile_args("DynamicResources", {"filterTimeout": "-1s"}),
                                    ARGS + "filterTimeout", True),
    # 1.35: forbidden (its binding-condition gates are off); 1.36+: under one second
    "dra-binding-timeout": (_profile_args("DynamicResources", {"bindingTimeout": "500ms"}),
                            ARGS + "bindingTimeout", True),
    "dra-unknown-field": (_profile_args("DynamicResources", {"timeout": "1s"}), ARGS + "timeout", False),
    "parallelism-zero": ({**ONE_LINE, "parallelism": 0}, "parallelism", False),
    "initial-backoff-zero": ({**ONE_LINE, "podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds", False),
    "max-below-initial-backoff": ({**ONE_LINE, "podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
                                  "podMaxBackoffSeconds", False),
    "fit-unknown-strategy": (_profile_args("NodeResourcesFit", {"scoringStrategy": {"type": "Random"}}),
                             ARGS + "scoringStrategy.type", False),
    "balanced-weight-two": (_profile_args("NodeResourcesBalancedAllocation",
                                          {"resources": [{"name": "cpu", "weight": 2}]}),
                            ARGS + "resources[0].weight", False),
    "spread-bad-defaulting": (_profile_args("PodTopologySpread", {"defaultingType": "Sometimes"}),
                              ARGS + "defaultingType", False),
    "affinity-weight-too-high": (_profile_args("InterPodAffinity", {"hardPodAffinityWeight": 101}),
                                 ARGS + "hardPodAffinityWeight", False),
    "volume-binding-negative": (_profile_args("VolumeBinding", {"bindTimeoutSeconds": -1}),
                                ARGS + "bindTimeoutSeconds", False),
    "percentage-over-100": ({**ONE_LINE, "percentageOfNodesToScore": 101}, "percentageOfNodesToScore", False),
}


@pytest.mark.parametrize("case", sorted(REJECTED_BY_BOTH))
def test_fields_we_do_not_act_on_are_validated_as_kube_does(tmp_path, case):
    config, field, same_words = REJECTED_BY_BOTH[case]
    rc, _, kube_err = kube_write_config(tmp_path, config, case)
    assert rc != 0, "kube-scheduler accepts it: the case is wrong"
    rc, _, our_err = pysched_config(tmp_path, config, case)
    assert rc != 0, f"pysched accepts what kube-scheduler refuses: {kube_err}"
    assert f"invalid configuration: {field}: " in our_err, (kube_err, our_err)
    if same_words:
        assert kube_err in our_err, (kube_err, our_err)


@pytest.mark.parametrize("config", [
    _profile_args("DynamicResources", {"filterTimeout": "0s"}),
    _profile_args("DynamicResources", {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                       "kind": "DynamicResourcesArgs", "filterTimeout": "90000ms"}),
    {**ONE_LINE, "clientConnection": {"contentType": "application/vnd.kubernetes.protobuf"},
     "enableProfiling": False, "delayCacheUntilActive": True, "parallelism": 4},
], ids=["dra-zero", "dra-typed", "top-level"])
def test_what_kube_accepts_is_accepted(tmp_path, config):
    rc, kube, err = kube_write_config(tmp_path, config, "ok")
    assert rc == 0, err
    rc, ours, err = pysched_config(tmp_path, config, "ok")
    assert rc == 0, err
    dra_kube = plugin_args(kube["profiles"][0])["DynamicResources"]
    dra_ours = plugin_args(ours["profiles"][0])["DynamicResources"]
    # kube writes the duration normalised ("1m30s"), pysched as given: the same duration either way
    assert parse_duration(dra_ours["filterTimeout"], "x") == parse_duration(dra_kube["filterTimeout"], "x")
    assert dra_ours["kind"] == dra_kube["kind"] == "DynamicResourcesArgs"


# -- scheduling: Gt/Lt values, pod-level resources --------------------------------------------

KUBE = "kube-parity"
Z = "topology.kubernetes.io/zone"


def _affinity(kind: str, value: str) -> dict:
    expr = {"key": "cores", "operator": "Gt", "values": [value]}
    if kind == "preferred":
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [expr]}}]}}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}


async def test_non_integer_gt_lt_fails_like_kube_scheduler(control_plane, admin, scheduler_factory):
    await create_nodes(admin, [make_node("n1", cpu="4", labels={"cores": "4"}),
                               make_node("n2", cpu="4", labels={"cores": "16"})])
    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": KUBE}]}).start()
    scheduler_factory(scheduler_config()).start()
    try:
        cases = [(kind, v) for kind in ("preferred", "required") for v in ("5_0", "0x3", "1e2")]
        pods = []
        for i, (kind, value) in enumerate(cases):
            for who in (KUBE, "pysched"):
                pods.append(make_pod(f"{who}-{i}", scheduler=who, cpu="100m", affinity=_affinity(kind, value)))
        pods.append(make_pod("kube-fine", scheduler=KUBE, cpu="100m", affinity=_affinity("preferred", "5")))
        pods.append(make_pod("pysched-fine", scheduler="pysched", cpu="100m", affinity=_affinity("preferred", "5")))
        await create_pods(admin, pods)

        async def judged():
            got = {}
            for p in pods:
                name = p["metadata"]["name"]
                live = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
                cond = pod_scheduled_condition(live)
                if live["spec"].get("nodeName"):
                    got[name] = ("bound", live["spec"]["nodeName"])
                elif cond and cond.get("status") == "False":
                    got[name] = (cond.get("reason"), cond.get("message", ""))
                else:
                    return None
            return got
        got = await wait_for(judged, 90, what="every pod bound or failed")
    finally:
        kube.stop()
    assert got["kube-fine"] == got["pysched-fine"] == ("bound", "n2")
    for i, (kind, value) in enumerate(cases):
        theirs, mine = got[f"{KUBE}-{i}"], got[f"pysched-{i}"]
        if kind == "preferred":
            assert theirs[0] == "SchedulerError", theirs
            assert mine == theirs, (value, mine, theirs)
            assert f'Invalid value: "{value}"' in mine[1]
        else:
            assert theirs[0] == mine[0] == "Unschedulable", (theirs, mine)
            # the FitError part (PostFilter verdicts differ until DefaultPreemption is merged)
            assert strip_postfilter(mine[1]) == strip_postfilter(theirs[1]), (value, mine, theirs)


async def test_pod_level_resources_land_where_kube_scheduler_puts_them(control_plane, admin, scheduler_factory):
    """NodeResourcesFit's score counts the pod's containers (100m / 200Mi when they state none),
    BalancedAllocation the pod-level requests: kube picks ``roomy``; scoring the pod-level
    requests in both would pick ``cpu-rich``."""
    await create_nodes(admin, [make_node("roomy", cpu="4", memory="16Gi"),
                               make_node("cpu-rich", cpu="8", memory="1Gi")])
    await create_pods(admin, [make_pod("used-roomy", scheduler="other", cpu="1500m", memory="1Gi", node_name="roomy"),
                              make_pod("used-cpu-rich", scheduler="other", cpu="500m", memory="512Mi",
                                       node_name="cpu-rich")])

    def pod_level(name: str, scheduler: str) -> dict:
        p = make_pod(name, scheduler=scheduler, cpu=None, memory=None)
        p["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
        return p

    async def bound(name):
        live = await admin.get(f"/api/v1/namespaces/default/pods/{name}")
        return live["spec"].get("nodeName")

    kube = KubeSchedulerProcess(control_plane, {"profiles": [{"schedulerName": KUBE}]}).start()
    try:
        await create_pods(admin, [pod_level("kube-pl", KUBE)])
        kube_node = await wait_for(lambda: bound("kube-pl"), 60, what="kube-scheduler binds its pod")
    finally:
        kube.stop()
    await admin.request("DELETE", "/api/v1/namespaces/default/pods/kube-pl", body={"gracePeriodSeconds": 0})
    sched = scheduler_factory(scheduler_config()).start()
    await create_pods(admin, [pod_level("ours-pl", "pysched")])
    our_node = await wait_for(lambda: bound("ours-pl"), 60, what="pysched binds its pod")
    sched.terminate()
    assert kube_node == "roomy"
    assert our_node == kube_node
