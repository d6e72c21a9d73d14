"""Gang workload statistics: groups placed per second, the time to admit a group, where groups went.

A group is *placed* when every one of its measured pods was seen bound. Its *admit time* is from
the first member seen created to the last member seen bound (watcher timestamps). Groups per
second are placed groups over the time from the first measured pod's creation to the last placed
group's last bind. Partial groups in the final placement are ``verify.check_gangs``' business.
``domains`` counts the groups bound whole and those inside one topology domain (one rack, one
block); ``attempts_per_group`` divides a scheduler's attempt counters by the groups.
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


def domains(group_of: dict[str, str], hosts: dict[str, str | None], node_labels: dict[str, dict],
            size: int, keys: dict[str, str]) -> dict:
    """``whole``: groups with at least ``size`` members bound (final placement: ``hosts``, pod name
    -> node or None); ``one_<name>`` for each ``keys`` item (name -> node label): how many whole
    groups have every bound member on nodes with one value of that label (a node without it makes
    the group count as spread)."""
    nodes: dict[str, list[str]] = defaultdict(list)
    for pod, group in group_of.items():
        host = hosts.get(pod)
        if host:
            nodes[group].append(host)
    whole = [hs for hs in nodes.values() if len(hs) >= size]
    out = {"whole": len(whole)}
    for name, label in keys.items():
        out[f"one_{name}"] = sum(1 for hs in whole
                                 if len({node_labels.get(h, {}).get(label) for h in hs}) == 1
                                 and node_labels.get(hs[0], {}).get(label) is not None)
    return out


def attempts_per_group(metrics: dict, groups: int) -> dict:
    """Pod scheduling attempts (``scheduler_schedule_attempts_total``, every result) and pod-group
    attempts (``scheduler_podgroup_schedule_attempts_total``, where the scheduler exports it) per
    group; None when not exported or no groups."""
    def per(key: str) -> float | None:
        v = metrics.get(key)
        return round(v / groups, 2) if v is not None and groups else None
    return {"pod_attempts_per_group": per("attempts_all_results"),
            "group_attempts_per_group": per("podgroup_attempts")}
