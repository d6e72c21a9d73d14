"""``pysched plugin new``: the package it writes installs, its tests pass, mypy --strict accepts it
and its tests (and so does a bare ``mypy`` in it, from its pyproject), and pysched loads the plugin
through its entry point and runs it in a profile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

pytestmark = pytest.mark.e2e


def run(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("points", ["filter,score", "score"])
def test_a_new_plugin_installs_passes_its_tests_and_loads(tmp_path, points):
    made = run(sys.executable, "-m", "pysched", "plugin", "new", "TeamTiers", "--points", points,
               "--dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    root = tmp_path / "pysched-team-tiers"
    site = tmp_path / "site"
    installed = run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(root))
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "scheduler")])}

    tests = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=root, env=env)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert f"{len(points.split(',')) + 1} passed" in tests.stdout

    # mypy --strict over the plugin and its tests, as the README's `mypy` runs it ([tool.mypy]: files
    # src and tests, strict); pysched comes from the checkout, silent as an installed package is
    typed = run(sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
                str(root / "src"), str(root / "tests"), cwd=root,
                env={**env, "MYPYPATH": os.pathsep.join([str(REPO / "scheduler"), str(root / "src")])})
    assert typed.returncode == 0, typed.stdout
    assert "no issues found in 3 source files" in typed.stdout     # __init__, the plugin, its tests
    configured = run(sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental", cwd=root,
                     env={**env, "MYPYPATH": str(REPO / "scheduler")})
    assert configured.returncode == 0 and "no issues found in 3 source files" in configured.stdout, configured.stdout

    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "pysched", "plugins": {"multiPoint": {"enabled": [{"name": "TeamTiers"}]}},
                      "pluginConfig": [{"name": "TeamTiers", "args": {"preferred": "slow"}}]}]}))
    written = run(sys.executable, "-m", "pysched", "--config", str(cfg), "--write-config-to", "-", env=env)
    assert written.returncode == 0, written.stderr
    profile = yaml.safe_load(written.stdout)["profiles"][0]
    assert "TeamTiers" in [p["name"] for p in profile["plugins"]["multiPoint"]["enabled"]]
    (args,) = [c["args"] for c in profile["pluginConfig"] if c["name"] == "TeamTiers"]
    assert args == {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "TeamTiersArgs",
                    "labelKey": "example.com/tier", "preferred": "slow"}


def test_bad_names_and_points_are_refused(tmp_path):
    for args, message in ((["teamTiers"], "must be a CamelCase Python identifier"),
                          (["TeamTiers", "--points", "bind"], "--points: bind: choose from filter, score")):
        out = run(sys.executable, "-m", "pysched", "plugin", "new", *args, "--dir", str(tmp_path))
        assert out.returncode == 2 and message in out.stderr, out.stderr
    assert run(sys.executable, "-m", "pysched", "plugin", "new", "TeamTiers", "--dir", str(tmp_path)).returncode == 0
    again = run(sys.executable, "-m", "pysched", "plugin", "new", "TeamTiers", "--dir", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stderr
