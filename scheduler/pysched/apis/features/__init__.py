"""Kubernetes releases and feature gates: which kube-scheduler pysched behaves as, with which gates on.

``release`` picks the release (the API server's, inside the window 1.35-1.37, or
``--emulated-version``); ``gates`` resolves that release's feature-gate defaults and the
``--feature-gates`` flag with kube's own names, syntax and rules; ``kube_gates`` is the gate
table generated from Kubernetes' source (``hack/gen_kube_gates.py``).
"""

from pysched.apis.features.gates import FeatureGateError, FeatureGates, defaults, parse_flag, resolve
from pysched.apis.features.release import NEWEST, OLDEST, WINDOW, Release, ReleaseError, choose, parse_version

__all__ = ["FeatureGateError", "FeatureGates", "defaults", "parse_flag", "resolve", "NEWEST", "OLDEST", "WINDOW",
           "Release", "ReleaseError", "choose", "parse_version"]
