"""One version for a release (``pysched_dev.release.versions``): the repository states one, and a
disagreement planted in any of the files that state it fails, naming that file - the check ``make
release`` and the release workflow's ``verify`` job run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import pysched
from pysched_dev.release import versions

REPO = Path(__file__).resolve().parents[2]
FILES = (*versions.PACKAGES, versions.CHART, versions.VALUES, *versions.KUSTOMIZATIONS, versions.CHANGELOG,
         "docs/install.md", "README.md")
V = pysched.__version__


@pytest.fixture
def tree(tmp_path):
    """The files that state the version, copied, with the CHANGELOG's section named for the release."""
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, tmp_path / rel)
    changelog = tmp_path / versions.CHANGELOG
    text = changelog.read_text()
    if re.search(rf"^## \[{re.escape(V)}\]", text, re.M):
        # released already, work since under Unreleased: those notes join the release's section
        text = re.sub(r"^## \[Unreleased\]\n\n", "", text, count=1, flags=re.M)
    heading = re.compile(rf"^## \[(?:Unreleased|{re.escape(V)})\][^\n]*$", re.M)
    changelog.write_text(heading.sub(f"## [{V}] - 2026-01-01", text, count=1))
    return tmp_path


def test_the_repository_states_one_version():
    version, problems = versions.check(REPO, release=False)
    assert problems == [] and version == V
    found, _ = versions.collect(REPO)
    paths = {f.path for f in found}
    # every kind of place is read (docs/install.md pins the image in its examples)
    assert set(FILES) - {versions.CHANGELOG, versions.VALUES, "README.md"} <= paths


def test_the_image_the_release_builds_is_the_one_the_chart_and_manifests_deploy():
    assert versions.image_ref(REPO, V) == f"ghcr.io/pysched/pysched:{V}"


def test_a_copy_with_the_changelog_section_is_releasable(tree):
    assert versions.check(tree, release=True) == (V, [])


@pytest.mark.parametrize("rel, old, new", [
    ("scheduler/pysched/__init__.py", f'__version__ = "{V}"', '__version__ = "9.9.9"'),
    ("plugins/src/pysched_policy/__init__.py", f'__version__ = "{V}"', '__version__ = "9.9.9"'),
    ("charts/pysched/Chart.yaml", f"version: {V}", "version: 9.9.9"),
    ("charts/pysched/Chart.yaml", f'appVersion: "{V}"', 'appVersion: "9.9.9"'),
    ("charts/pysched/values.yaml", 'tag: ""', 'tag: "9.9.9"'),
    ("manifests/kustomization.yaml", f'newTag: "{V}"', 'newTag: "9.9.9"'),
    ("manifests/components/extender/kustomization.yaml", f'newTag: "{V}"', 'newTag: "9.9.9"'),
    ("docs/install.md", f"ghcr.io/pysched/pysched:{V}", "ghcr.io/pysched/pysched:9.9.9"),
    ("CHANGELOG.md", f"## [{V}]", "## [9.9.9]"),
])
def test_a_planted_disagreement_fails_naming_the_file(tree, rel, old, new):
    path = tree / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))
    version, problems = versions.check(tree, release=True)
    assert version == V                       # what the other files say: the planted one is named
    assert problems and all(p.startswith(rel) for p in problems), problems


def test_the_manifests_must_deploy_the_charts_repository(tree):
    path = tree / "manifests" / "kustomization.yaml"
    path.write_text(path.read_text().replace("newName: ghcr.io/pysched/pysched", "newName: quay.io/x/pysched"))
    _, problems = versions.check(tree)
    assert any(p.startswith("manifests/kustomization.yaml: images[pysched].newName") for p in problems)


def test_a_development_tree_needs_only_an_unreleased_section(tree):
    path = tree / versions.CHANGELOG
    path.write_text(path.read_text().replace(f"## [{V}] - 2026-01-01", "## [Unreleased]", 1))
    assert versions.check(tree, release=False) == (V, [])
    _, problems = versions.check(tree, release=True)
    assert len(problems) == 1 and problems[0].startswith(f"CHANGELOG.md: no '## [{V}]' section"), problems


def test_the_command_line_checks_the_tag(tree, capsys):
    assert versions.main(["--root", str(tree), "--tag", f"v{V}"]) == 0
    assert capsys.readouterr().out.strip() == V
    assert versions.main(["--root", str(tree), "--tag", "v9.9.9", "--github"]) == 1
    out = capsys.readouterr().out
    assert f"::error file=scheduler/pysched/__init__.py::__version__ is '{V}', the release is '9.9.9'" in out
    assert "::error file=charts/pysched/Chart.yaml::appVersion" in out
    assert versions.main(["--root", str(tree), "--tag", V]) == 1    # no v


def test_the_release_workflow_runs_the_same_check_and_make_release():
    workflow = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert "python -m pysched_dev.release.versions --tag" in workflow
    assert "make release" in workflow
