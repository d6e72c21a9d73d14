"""Feature gates as kube-scheduler resolves them: a release's defaults, then ``--feature-gates``.

A gate's state at a release is the last entry of its history (``kube_gates.GATES``) whose release
is not newer than the emulated one and whose minimum compatibility version, if it has one, is met
(the minimum compatibility version is the release before the emulated one, as in
``component-base/featuregate``); a gate that did not exist yet is "PreAlpha": off, and refused if
set. ``--feature-gates`` overrides the defaults with upstream's syntax (``Name=true,Other=false``)
and upstream's rules and messages: an unknown name, a value that is not a bool, changing a gate
locked to its default, setting a PreAlpha gate, and a gate left on while one it depends on is off
are errors. ``AllAlpha`` and ``AllBeta`` switch every alpha or beta gate not set by name.

pysched's own gates (``framework.features``) are part of the same set, so one flag sets both.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from pysched.apis.features.kube_gates import DEPENDENCIES, GATES, LAST_RELEASE, Spec

log = logging.getLogger("pysched.features")

Version = tuple[int, int]

ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"
PRE_ALPHA: Spec = ((0, 0), False, "PreAlpha", False, None)

# pysched's own gates: behaviours beyond kube-scheduler's, off unless asked (framework.features).
PYSCHED_GATES: dict[str, tuple[Spec, ...]] = {
    "PyschedExistingAntiAffinityDeleteHint": (((1, 35), False, "Alpha", False, None),),
}


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value kube-scheduler would refuse; the message is upstream's."""


def known_gates(release: Version | None = None) -> dict[str, tuple[Spec, ...]]:
    """The gates kube-scheduler ``release`` knows (all of the window's when None), and pysched's own."""
    gates = GATES if release is None else {n: h for n, h in GATES.items() if LAST_RELEASE.get(n, release) >= release}
    return {**gates, **PYSCHED_GATES}


def spec_at(history: tuple[Spec, ...], emulated: Version, min_compat: Version | None = None) -> Spec:
    """The spec in force at ``emulated`` (``featureSpecAtEmulationAndMinCompatVersion``)."""
    min_compat = min_compat if min_compat is not None else (emulated[0], emulated[1] - 1)
    for spec in reversed(history):
        if spec[0] > emulated:
            continue
        if spec[4] is not None and min_compat < spec[4]:
            continue
        return spec
    return PRE_ALPHA


def parse_flag(text: str) -> dict[str, bool]:
    """``--feature-gates`` text -> {name: value}, in upstream's syntax (``ParseBool`` values)."""
    out: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        v = value.strip()
        if v in ("1", "t", "T", "TRUE", "true", "True"):
            out[name] = True
        elif v in ("0", "f", "F", "FALSE", "false", "False"):
            out[name] = False
        else:
            raise FeatureGateError(f"invalid value of {name}={v}, err: "
                                   f'strconv.ParseBool: parsing "{v}": invalid syntax')
    return out


@dataclass(frozen=True)
class FeatureGates:
    """The gates in force for one emulated release: ``enabled`` holds the names of those that are on."""

    release: Version
    enabled: frozenset[str]
    overrides: tuple[tuple[str, bool], ...] = ()

    def __contains__(self, name: object) -> bool:
        return name in self.enabled

    def describe(self) -> str:
        """``Name=bool`` for every gate set on the command line, for the start-up log line."""
        return ",".join(f"{k}={str(v).lower()}" for k, v in self.overrides)


def resolve(release: Version, overrides: Mapping[str, bool] | None = None) -> FeatureGates:
    """The gates at ``release`` with ``overrides`` applied, checked as ``SetFromMap`` checks them."""
    known = known_gates(release)
    overrides = dict(overrides or {})
    errors: list[str] = []
    state: dict[str, bool] = {}
    for name, value in overrides.items():
        if name in (ALL_ALPHA, ALL_BETA):
            stage = "Alpha" if name == ALL_ALPHA else "Beta"
            for gate, gate_history in known.items():
                spec = spec_at(gate_history, release)
                if spec[2] == stage and gate not in overrides and not spec[3]:
                    state[gate] = value
            continue
        history = known.get(name)
        if history is None:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        spec = spec_at(history, release)
        if spec[3] and spec[1] != value:
            errors.append(f"cannot set feature gate {name} to {str(value).lower()}, "
                          f"feature is locked to {str(spec[1]).lower()}")
            continue
        if spec[2] == "PreAlpha":
            errors.append(f"cannot set feature gate {name} to {str(value).lower()}, feature is PreAlpha at "
                          f"emulated version {release[0]}.{release[1]}, min compatibility version "
                          f"{release[0]}.{release[1] - 1}")
            continue
        if spec[2] in ("GA", "Deprecated"):
            log.warning("setting %s feature gate; it will be removed in a future release", spec[2],
                        extra={"featureGate": name, "value": value})
        state[name] = value
    if errors:
        raise FeatureGateError(", ".join(errors) if len(errors) == 1 else "[" + ", ".join(errors) + "]")

    def on(name: str) -> bool:
        if name in state:
            return state[name]
        found = known.get(name)
        return found is not None and spec_at(found, release)[1]

    enabled = frozenset(name for name in known if on(name))
    for name in sorted(DEPENDENCIES):
        if name in enabled:
            off = [d for d in DEPENDENCIES[name] if d not in enabled]
            if off:
                errors.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    if errors:
        raise FeatureGateError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return FeatureGates(release, enabled, tuple(overrides.items()))


@functools.lru_cache(maxsize=8)
def defaults(release: Version) -> frozenset[str]:
    """The gates on by default at ``release``."""
    return resolve(release).enabled
