"""The plugin tutorial (docs/tutorial.md) works as written.

Every file the page shows under a title (```python title="src/..."```) is copied from the page into
a package, the package is pip-installed into a directory of its own (seen by the child processes
only, as ``test_plugin_example`` does), its tests - the page's - pass and ``mypy --strict`` accepts
its code; then pysched runs with the page's configuration against a real kube-apiserver and the
page's two pods land where the page says: CostAware changes the placement.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pysched_dev.testkit import create_nodes, list_pods, make_node

from .conftest import REPO, scheduler_config, wait_for

pytestmark = pytest.mark.e2e

PAGE = REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```$', re.S | re.M)


def page_files() -> dict[str, str]:
    """The page's titled code blocks: file name -> content."""
    files = {title: body for _, title, body in BLOCK.findall(PAGE.read_text())}
    assert set(files) == {"pyproject.toml", "src/pysched_cost_aware/__init__.py",
                          "src/pysched_cost_aware/cost_aware.py", "tests/test_cost_aware.py",
                          "scheduler-config.yaml", "pods.yaml"}, sorted(files)
    return files


def run(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, str]]:
    """(the package's folder, the page's files, the environment of a Python that has it installed)."""
    root = tmp_path_factory.mktemp("tutorial") / "pysched-cost-aware"
    files = page_files()
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    site = root.parent / "site"
    installed = run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(root))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    return root, files, env


def test_the_tutorial_package_passes_its_tests_and_mypy_strict(tutorial):
    root, _, env = tutorial
    tests = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio", cwd=root, env=env)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout, tests.stdout
    typed = run(sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
                str(root / "src" / "pysched_cost_aware"),
                env={**env, "MYPYPATH": os.pathsep.join([str(REPO / "scheduler"), str(root / "src")])})
    assert typed.returncode == 0, typed.stdout


async def test_the_tutorial_changes_a_placement_on_a_real_api_server(tutorial, admin, scheduler_factory):
    _, files, env = tutorial
    page = PAGE.read_text()
    # the nodes the page prices with kubectl label, as it describes them
    assert "kubectl label node big-dear example.com/hourly-cost=90" in page
    assert "kubectl label node small-cheap example.com/hourly-cost=10" in page
    await create_nodes(admin, [make_node("big-dear", cpu="16", labels={"example.com/hourly-cost": "90"}),
                               make_node("small-cheap", cpu="4", labels={"example.com/hourly-cost": "10"})])
    cfg = yaml.safe_load(files["scheduler-config.yaml"])
    sched = scheduler_factory(scheduler_config(**cfg), env=env).start()
    await sched.wait_log("caches synced")
    assert "out_of_tree=CostAware:pysched_cost_aware.cost_aware" in sched.log()
    for pod in yaml.safe_load_all(files["pods.yaml"]):
        await admin.request("POST", "/api/v1/namespaces/default/pods", body=pod)

    async def placed():
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, "default")}
        return nodes if all(nodes.get(n) for n in ("priced", "plain")) else None
    nodes = await wait_for(placed, 60, what="both tutorial pods scheduled")
    shown = re.search(r"NAME\s+NODE\n(priced\s+\S+)\n(plain\s+\S+)\n", page)
    assert shown, "the page's kubectl output"
    assert {line.split()[0]: line.split()[1] for line in shown.groups()} == nodes == {
        "priced": "small-cheap", "plain": "big-dear"}
    sched.terminate()
