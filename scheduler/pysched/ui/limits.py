"""How large ``pysched ui`` lets its scenario grow: ``Limits``, set by ``pysched ui --max-*``.

A module of its own, without dependencies, because the CLI's parser reads the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 2**20


@dataclass(frozen=True)
class Limits:
    """How large the scenario may grow (``pysched ui --max-pods`` ...): a change that would pass a
    limit is refused whole. ``max_scenario_bytes`` bounds the objects' JSON size (nodes, pods,
    supporting objects; in memory they take a few times that); ``max_request_bytes`` an API
    request's body; ``max_runs`` the runs kept (fewer when their scenarios are large, see
    ``runner.RunLog``)."""
    max_pods: int = 100_000
    max_nodes: int = 20_000
    max_scenario_bytes: int = 512 * MiB
    max_request_bytes: int = 16 * MiB
    max_runs: int = 20

    def over(self, pods: int, nodes: int, size: int, what: str = "the scenario would hold") -> str | None:
        """The message for the first limit ``pods``, ``nodes`` or ``size`` (bytes) passes, or None."""
        if pods > self.max_pods:
            return f"{what} {pods:,} pods, more than the limit of {self.max_pods:,} (pysched ui --max-pods)"
        if nodes > self.max_nodes:
            return f"{what} {nodes:,} nodes, more than the limit of {self.max_nodes:,} (pysched ui --max-nodes)"
        if size > self.max_scenario_bytes:
            return (f"{what} {format_bytes(size)} of objects (as JSON), more than the limit of "
                    f"{format_bytes(self.max_scenario_bytes)} (pysched ui --max-scenario-bytes)")
        return None


def format_bytes(n: int) -> str:
    return f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"
