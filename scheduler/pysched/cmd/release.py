"""The kube-scheduler release a command starts as, and its feature gates (``--emulated-version``, ``--feature-gates``).

``provisional`` checks both flags before any API call, for the release they name or the newest one
pysched follows: the configuration is checked against it and ``--write-config-to`` writes it. The
scheduler then settles the release from the API server's version (``SchedulerApp.settle_release``).
"""

from __future__ import annotations

from pysched.apis.features import FeatureGates, Release, choose, parse_flag, resolve


def provisional(emulated: str | None, feature_gates: str) -> tuple[Release, FeatureGates]:
    """The release the flags name (default: the newest), and its gates: ReleaseError or FeatureGateError if refused."""
    release = choose(None, emulated)
    return release, resolve(release.version, parse_flag(feature_gates))
