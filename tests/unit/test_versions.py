"""One version for the whole release: the package, the policy plugins' package (plugins/), the chart's
version and appVersion, and the image tag the manifests deploy (the release workflow refuses a tag
that differs from them)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pysched import __version__

REPO = Path(__file__).resolve().parents[2]


def test_package_chart_and_manifests_share_one_version():
    import pysched_policy

    chart = yaml.safe_load((REPO / "charts" / "pysched" / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == __version__ == pysched_policy.__version__
    values = yaml.safe_load((REPO / "charts" / "pysched" / "values.yaml").read_text())
    for kustomization in (REPO / "manifests" / "kustomization.yaml",
                          REPO / "manifests" / "components" / "extender" / "kustomization.yaml"):
        (image,) = yaml.safe_load(kustomization.read_text())["images"]
        assert image["newTag"] == __version__, kustomization
        assert image["newName"] == values["image"]["repository"], kustomization   # one registry path
    release = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert "__version__" in release and "appVersion" in release    # the workflow checks the tag against them
    assert "plugins/src/pysched_policy/__init__.py" in release and "build --outdir dist plugins" in release


def test_changelog_has_an_unreleased_section():
    assert "## [Unreleased]" in (REPO / "CHANGELOG.md").read_text()


def test_the_gang_example_configuration_is_the_coscheduling_components():
    """examples/scheduler-config-gang.yaml (for running pysched by hand) holds the same profiles as the
    configuration manifests/components/coscheduling ships."""
    from pysched.apis.config import load_file

    patch = yaml.safe_load((REPO / "manifests" / "components" / "coscheduling" / "configmap-patch.yaml").read_text())
    shipped = yaml.safe_load(patch["data"]["config.yaml"])
    example = yaml.safe_load((REPO / "examples" / "scheduler-config-gang.yaml").read_text())
    assert example["profiles"] == shipped["profiles"]
    assert load_file(REPO / "examples" / "scheduler-config-gang.yaml").profiles[0].scheduler_name == "pysched"
