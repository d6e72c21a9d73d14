"""The ``resources`` list of NodeResourcesFit's scoring strategy and of BalancedAllocation's args.

``ResourceSpec`` is one ``{name, weight}`` entry as a declarative Args type (decoded by
``framework.args.decode_args``); ``default_resource_specs`` is upstream's default (cpu and memory,
weight 1), which an absent or empty list gets; ``validate_resource_specs`` holds the checks both
plugins apply to the list (duplicate names, weight range), with the messages kube-scheduler's
validation gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pysched.framework.api import ConfigError
from pysched.framework.args import arg

DEFAULT_WEIGHT = 1


@dataclass
class ResourceSpec:
    """A resource and its weight; a weight of 0 (or none given) means 1, as upstream's defaulting."""

    name: str = field(default="", metadata=arg(required=True))
    weight: int = DEFAULT_WEIGHT

    def __post_init__(self) -> None:
        if self.weight == 0:
            self.weight = DEFAULT_WEIGHT


def default_resource_specs() -> list[ResourceSpec]:
    """cpu and memory, weight 1 each."""
    return [ResourceSpec("cpu", DEFAULT_WEIGHT), ResourceSpec("memory", DEFAULT_WEIGHT)]


def validate_resource_specs(specs: list[ResourceSpec], path: str, *,
                            weight_range: tuple[int, int] = (1, 100)) -> None:
    """Names must be unique and weights within ``weight_range`` (inclusive); ``path`` names the
    list (``args.scoringStrategy.resources``)."""
    lo, hi = weight_range
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        rp = f"{path}[{i}]"
        if spec.name in seen:
            raise ConfigError(f"{rp}.name: Duplicate value: {spec.name!r}")
        seen.add(spec.name)
        if not lo <= spec.weight <= hi:
            raise ConfigError(f"{rp}.weight: {spec.weight}: resource weight of {spec.name} "
                              f"not in valid range ({lo - 1}, {hi}]")
