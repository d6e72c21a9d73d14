"""pysched's own feature gates (``--feature-gates Name=true,...``): behaviours that differ from
kube-scheduler 1.35, off by default so that pysched decides as upstream does unless asked.

* ``PyschedExistingAntiAffinityDeleteHint`` - InterPodAffinity's queueing hint also requeues a pod
  when a bound pod whose *own* required anti-affinity matched it is deleted. Upstream only looks
  at the waiting pod's terms, so a pod kept out by another pod's anti-affinity (a preemptor whose
  victim was that pod, typically) waits for the next unrelated event or the 5-minute flush of the
  unschedulable pool after its blocker is gone (docs/queueing-hints.md).
"""

from __future__ import annotations

EXISTING_ANTI_AFFINITY_DELETE_HINT = "PyschedExistingAntiAffinityDeleteHint"

# name -> default
GATES: dict[str, bool] = {
    EXISTING_ANTI_AFFINITY_DELETE_HINT: False,
}


class FeatureGateError(ValueError):
    """A --feature-gates value that names an unknown gate or is not Name=bool."""


def parse_feature_gates(text: str) -> frozenset[str]:
    """``Name=true,Other=false`` -> the gates enabled (defaults applied)."""
    enabled = {name for name, on in GATES.items() if on}
    for i, item in enumerate(p.strip() for p in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"--feature-gates item {i} {item!r}: expected Name=true|false")
        if name not in GATES:
            raise FeatureGateError(f"--feature-gates: unknown feature gate {name!r}; pysched knows "
                                   f"{', '.join(sorted(GATES))} (kube-scheduler's gates are fixed at 1.35's defaults)")
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise FeatureGateError(f"--feature-gates {name}: expected true or false, got {value!r}")
        (enabled.add if v == "true" else enabled.discard)(name)
    return frozenset(enabled)
