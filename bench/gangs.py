"""Gang workload statistics: groups placed per second and the time to admit a group.

A group is *placed* when every one of its measured pods was seen bound. Its *admit time* is from
the first member seen created to the last member seen bound (watcher timestamps). Groups per
second are placed groups over the time from the first measured pod's creation to the last placed
group's last bind. Partial groups in the final placement are ``verify.check_gangs``' business.
"""

from __future__ import annotations

from collections import defaultdict

from .stats import percentile


def gang_summary(start: float, records: dict[str, dict], group_of: dict[str, str], size: int) -> dict:
    """``records``: pod name -> {"seen", "bound"} (watcher); ``group_of``: pod name -> group."""
    members: dict[str, list[dict]] = defaultdict(list)
    for pod, group in group_of.items():
        members[group].append(records.get(pod) or {})
    placed = {g: rs for g, rs in members.items()
              if len(rs) >= size and all(r.get("bound") is not None for r in rs)}
    admits = sorted((max(r["bound"] for r in rs) - min(r.get("seen", r["bound"]) for r in rs)) * 1000.0
                    for rs in placed.values())
    last = max((max(r["bound"] for r in rs) for rs in placed.values()), default=start)
    elapsed = last - start
    return {"groups": len(members), "group_size": size, "placed": len(placed),
            "groups_per_s": round(len(placed) / elapsed, 2) if placed and elapsed > 0 else 0.0,
            "admit_p50_ms": round(percentile(admits, 50), 1), "admit_p99_ms": round(percentile(admits, 99), 1)}
