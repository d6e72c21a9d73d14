"""The ``resources`` list of NodeResourcesFit's scoring strategy and BalancedAllocation's args."""

from __future__ import annotations

from pysched.framework.api import ConfigError
from pysched.framework.args import get_int, get_str, strict


def parse_resource_specs(raw_list: list, path: str, *, default: list[tuple[str, int]],
                         weight_range: tuple[int, int] = (1, 100)) -> list[tuple[str, int]]:
    out = []
    seen = set()
    for i, r in enumerate(raw_list):
        rp = f"{path}[{i}]"
        r = strict(r, rp, ("name", "weight"))
        name = get_str(r, "name", rp, "")
        if not name:
            raise ConfigError(f"{rp}.name: Required value")
        if name in seen:
            raise ConfigError(f"{rp}.name: Duplicate value: {name!r}")
        seen.add(name)
        w = get_int(r, "weight", rp, 1) or 1
        lo, hi = weight_range
        if not lo <= w <= hi:
            raise ConfigError(f"{rp}.weight: {w}: resource weight of {name} not in valid range ({lo - 1}, {hi}]")
        out.append((name, w))
    return out or list(default)
