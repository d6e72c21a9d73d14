"""The plugin tutorial's package (docs/tutorial.md) passes ``mypy --strict``.

``test_docs_pages`` runs the page as a reader does, on ``make dev-cluster``; this adds the type
check the page promises (``ScorePlugin[CostAwareArgs]`` typed for ``mypy --strict``): every file the
page shows under a title is copied into a package, the package is pip-installed into a directory of
its own (seen by the child processes only, as ``test_plugin_example`` does), its tests pass and
``mypy --strict`` accepts its code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.e2e

PAGE = REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```$', re.S | re.M)


def page_files() -> dict[str, str]:
    """The page's titled code blocks: file name -> content."""
    files = {title: body for _, title, body in BLOCK.findall(PAGE.read_text())}
    assert set(files) == {"pyproject.toml", "src/pysched_cost_aware/__init__.py",
                          "src/pysched_cost_aware/cost_aware.py", "tests/test_cost_aware.py",
                          "scheduler-config.yaml", "nodes.yaml", "pods.yaml"}, sorted(files)
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
