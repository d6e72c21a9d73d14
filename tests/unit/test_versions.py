"""The CHANGELOG's top section and the example configurations. That the package, the policy plugins'
package, the chart and the manifests share one version is ``test_release_versions.py``'s (the check
``make release`` and the release workflow run)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pysched import __version__

REPO = Path(__file__).resolve().parents[2]


def test_the_changelog_starts_with_unreleased_or_this_version():
    """Work in progress goes under ``## [Unreleased]``; a release renames it ``## [X.Y.Z] - date``."""
    from pysched_dev.release.versions import changelog_sections

    assert changelog_sections(REPO)[0] in ("Unreleased", __version__)


def test_the_gang_example_configuration_is_the_coscheduling_components():
    """examples/scheduler-config-gang.yaml (for running pysched by hand) holds the same profiles as the
    configuration manifests/components/coscheduling ships."""
    from pysched.apis.config import load_file

    patch = yaml.safe_load((REPO / "manifests" / "components" / "coscheduling" / "configmap-patch.yaml").read_text())
    shipped = yaml.safe_load(patch["data"]["config.yaml"])
    example = yaml.safe_load((REPO / "examples" / "scheduler-config-gang.yaml").read_text())
    assert example["profiles"] == shipped["profiles"]
    assert load_file(REPO / "examples" / "scheduler-config-gang.yaml").profiles[0].scheduler_name == "pysched"
