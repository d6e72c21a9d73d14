"""The out-of-tree plugin example (``examples/pysched-plugin-example``) as a user would use it.

The package is pip-installed (``--target``, no dependencies: pysched and numpy come from this
virtualenv) into a directory of its own that only the child processes see, through PYTHONPATH,
so pysched finds its ``TeamNodes`` plugin through the ``pysched.plugins`` entry point with no flag
while the test process itself, and every other test in it, never sees the entry point.
Then: the example's own tests pass; ``--write-config-to`` shows the enabled plugin and its
decoded args, and bad args fail naming the field; ``--plugin-module`` loads the same package
without the entry point; and against a real kube-apiserver pods land only where TeamNodes
allows, rejected pods carry its reason, and they are requeued only by the node events its
queueing hints accept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node, make_pod, pod_scheduled_condition
from tests.differential import no_claims_verdict

from .conftest import REPO, scheduler_config, wait_for

EXAMPLE = REPO / "examples" / "pysched-plugin-example"
KEY = "example.com/team"
REASON = "node(s) belong to another team"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"

# Prints how the venv sees the example: where its module is imported from and its entry points.
_PROBE = """
import importlib.metadata as md, json
from pysched.runtime.registry import build_registry
import pysched_example_plugins as pkg
eps = sorted(f"{e.group}:{e.name}={e.value}" for e in md.distribution("pysched-plugin-example").entry_points)
print(json.dumps({"file": pkg.__file__, "eps": eps, "registered": build_registry()["TeamNodes"].__module__}))
"""

# ``pysched`` with the example's entry point hidden: only ``--plugin-module`` can bring TeamNodes in.
_CLI_WITHOUT_ENTRY_POINT = """
import importlib.metadata as md, sys
_all = md.entry_points
md.entry_points = lambda **kw: [e for e in _all(**kw) if not e.value.startswith("pysched_example_plugins")]
from pysched.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _declared_entry_points() -> list[str]:
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    return sorted(f"{group}:{name}={value}" for group, eps in meta["project"]["entry-points"].items()
                  for name, value in eps.items())


def _child_env(site: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def _probe(env: dict[str, str]) -> tuple[dict | None, str]:
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode:
        return None, r.stderr
    return json.loads(r.stdout), ""


@pytest.fixture(scope="module")
def example_env(tmp_path_factory) -> dict[str, str]:
    """The environment of a Python that has the example installed (built from this checkout).

    Installed into a module-private directory, not into this virtualenv: an install in the running
    interpreter's site-packages leaves its entry point visible to this process without its module
    importable (the path a .pth adds is read only at start-up)."""
    site = tmp_path_factory.mktemp("example-site")
    # built from a copy: setuptools writes build/ and *.egg-info next to the sources, and the
    # checkout must stay as it is (tests/e2e/test_image_entrypoint.py watches it while others run)
    source = tmp_path_factory.mktemp("example-source") / EXAMPLE.name
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                        str(source)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"installing {EXAMPLE} failed:\n{r.stdout}\n{r.stderr}"
    env = _child_env(site)
    seen, err = _probe(env)
    assert seen is not None, err
    assert seen["file"].startswith(str(site)) and seen["eps"] == _declared_entry_points(), seen
    assert seen["registered"] == "pysched_example_plugins.team_nodes", seen
    return env


def team_profile(**args) -> dict:
    """The default profile plus TeamNodes at every extension point it implements."""
    return {"schedulerName": "pysched",
            "plugins": {"multiPoint": {"enabled": [{"name": "TeamNodes"}]}},
            "pluginConfig": [{"name": "TeamNodes", "args": {"labelKey": KEY, **args}}]}


def run_cli(env: dict[str, str], tmp_path, cfg: dict, *cli: str,
            script: str | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    head = ["-c", script] if script else ["-m", "pysched"]
    return subprocess.run([sys.executable, *head, "--config", str(path), *cli],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


# -- the package ----------------------------------------------------------------------------------


def test_the_examples_own_tests_pass(example_env):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio"],
                       cwd=EXAMPLE, capture_output=True, text=True, timeout=300, env=example_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^\d+ passed", r.stdout.splitlines()[-1]), r.stdout


def test_write_config_shows_the_plugin_found_through_its_entry_point(example_env, tmp_path):
    cfg = scheduler_config(profiles=[team_profile(ownNodeWeight=4)])
    r = run_cli(example_env, tmp_path, cfg, "--write-config-to", "-")
    assert r.returncode == 0, r.stderr
    prof = yaml.safe_load(r.stdout)["profiles"][0]
    assert "TeamNodes" in [p["name"] for p in prof["plugins"]["multiPoint"]["enabled"]]
    args = {c["name"]: c.get("args") for c in prof["pluginConfig"]}["TeamNodes"]
    assert args == {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "TeamNodesArgs",   # as kube writes args
                    "labelKey": KEY, "ownNodeWeight": 4, "sharedNodeWeight": 1}   # the defaults filled in


def test_bad_args_fail_at_startup_naming_the_field(example_env, tmp_path):
    # a plain start: the profiles are built, and their args decoded, before the cluster is contacted
    r = run_cli(example_env, tmp_path, scheduler_config(profiles=[team_profile(ownNodeWeight=1, sharedNodeWeight=2)]))
    assert r.returncode == 2
    assert ("pysched: invalid configuration: profiles[0].pluginConfig[0].args.ownNodeWeight: "
            "must be >= sharedNodeWeight (2), got 1") in r.stderr
    cfg = scheduler_config(profiles=[team_profile(labelkey="team")])
    r = run_cli(example_env, tmp_path, cfg, "--write-config-to", "-")
    assert r.returncode == 2 and "profiles[0].pluginConfig[0].args.labelkey: unknown field" in r.stderr


def test_plugin_module_loads_the_package_without_its_entry_point(example_env, tmp_path):
    cfg = scheduler_config(profiles=[team_profile()])
    r = run_cli(example_env, tmp_path, cfg, "--write-config-to", "-", script=_CLI_WITHOUT_ENTRY_POINT)
    assert r.returncode == 2 and "plugin 'TeamNodes' does not exist" in r.stderr   # the entry point is hidden
    r = run_cli(example_env, tmp_path, cfg, "--plugin-module", "pysched_example_plugins", "--write-config-to", "-",
                script=_CLI_WITHOUT_ENTRY_POINT)
    assert r.returncode == 0, r.stderr
    enabled = yaml.safe_load(r.stdout)["profiles"][0]["plugins"]["multiPoint"]["enabled"]
    assert "TeamNodes" in [p["name"] for p in enabled]


# -- scheduling against the API server ------------------------------------------------------------


async def metric_sum(sched, name: str, **labels: str) -> float:
    """The sum of a metric's samples with these labels (every other label summed over)."""
    _, text = await sched.get("/metrics")
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


async def test_team_pods_land_on_allowed_nodes_and_rejected_ones_wait_for_a_usable_node(
        example_env, admin, scheduler_factory):
    await create_nodes(admin, [make_node("red-1", labels={KEY: "red"}), make_node("blue-1", labels={KEY: "blue"})])
    sched = scheduler_factory(scheduler_config(profiles=[team_profile()]), env=example_env).start()
    await sched.wait_log("caches synced")
    await create_pods(admin, [make_pod("red-a", labels={KEY: "red"}), make_pod("red-b", labels={KEY: "red"}),
                              make_pod("blue-a", labels={KEY: "blue"}), make_pod("plain"),
                              make_pod("green-a", labels={KEY: "green"})])

    async def pods() -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in await list_pods(admin, "default")}

    def node_of(p: dict) -> str | None:
        return p["spec"].get("nodeName")

    async def settled():
        got = await pods()
        done = all(node_of(got[n]) for n in ("red-a", "red-b", "blue-a")) and all(
            (pod_scheduled_condition(got[n]) or {}).get("reason") == "Unschedulable" for n in ("plain", "green-a"))
        return got if done else None

    got = await wait_for(settled, 60, what="team pods placed, the others rejected")
    assert {n: node_of(got[n]) for n in ("red-a", "red-b", "blue-a")} == {"red-a": "red-1", "red-b": "red-1",
                                                                          "blue-a": "blue-1"}
    message = (f"0/2 nodes are available: 2 {REASON}. {no_claims_verdict()}"
               "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    for name in ("plain", "green-a"):
        cond = pod_scheduled_condition(got[name])
        assert (cond["status"], cond["message"]) == ("False", message), cond

    async def failed_event():
        items, _ = await admin.list_all(EVENTS)
        return [e for e in items if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "green-a"]
    (event,) = await wait_for(failed_event, 30, what="the FailedScheduling event")
    assert event["note"] == message and event["type"] == "Warning"

    # Both pods parked as unschedulable. A node of a third team helps neither: the queueing hint
    # keeps them parked (without it, every node event would requeue them for another failed try).
    async def parked():
        return await metric_sum(sched, "scheduler_pending_pods", queue="unschedulable") == 2
    await wait_for(parked, 30, what="both rejected pods in the unschedulable queue")
    moved_by_node_adds = await metric_sum(sched, "scheduler_queue_incoming_pods_total", event="NodeAdd")
    attempts = await metric_sum(sched, "scheduler_schedule_attempts_total", result="unschedulable")

    await create_nodes(admin, [make_node("purple-1", labels={KEY: "purple"})])

    async def cached(n: int):
        return await metric_sum(sched, "scheduler_cache_size", type="nodes") == n
    await wait_for(lambda: cached(3), 30, what="purple-1 in the scheduler's cache")
    assert await metric_sum(sched, "scheduler_queue_incoming_pods_total", event="NodeAdd") == moved_by_node_adds
    assert await metric_sum(sched, "scheduler_pending_pods", queue="unschedulable") == 2

    # The green team's node: the green pod, and only it, is requeued and scheduled there.
    await create_nodes(admin, [make_node("green-1", labels={KEY: "green"})])

    async def green_placed():
        return node_of((await pods())["green-a"])
    assert await wait_for(green_placed, 60, what="green-a scheduled") == "green-1"
    assert await metric_sum(sched, "scheduler_queue_incoming_pods_total", event="NodeAdd") == moved_by_node_adds + 1
    assert node_of((await pods())["plain"]) is None

    # purple-1 loses its team label and becomes shared: the unlabelled pod goes there.
    await admin.request("PATCH", "/api/v1/nodes/purple-1", body={"metadata": {"labels": {KEY: None}}},
                        content_type="application/merge-patch+json")

    async def plain_placed():
        return node_of((await pods())["plain"])
    assert await wait_for(plain_placed, 60, what="plain scheduled") == "purple-1"
    # each rejected pod failed exactly once: no requeue the hints did not ask for
    assert await metric_sum(sched, "scheduler_schedule_attempts_total", result="unschedulable") == attempts

    # Score: a red pod may use red-1 or the now shared purple-1, and prefers its own team's node
    # although red-1 already runs two pods and purple-1 one.
    await create_pods(admin, [make_pod("red-c", labels={KEY: "red"})])

    async def red_c_placed():
        return node_of((await pods())["red-c"])
    assert await wait_for(red_c_placed, 60, what="red-c scheduled") == "red-1"
    sched.terminate()
