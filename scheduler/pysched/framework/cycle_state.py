"""CycleState: per-pod, per-cycle scratch space that plugins share (upstream ``CycleState``).

PreFilter/PreScore write what they computed once for the pod (its requests, its parsed
constraints, counts over the snapshot) and Filter/Score read it for every node. Keys are plain
strings, by convention the plugin's name plus a suffix.
"""

from __future__ import annotations

from typing import Any

# Where the runtime keeps this cycle's ``CycleTrace`` when the pod is being explained.
TRACE_KEY = "pysched/trace"


class CycleState:
    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "record_plugin_metrics",
                 "pods_to_activate", "_bind_until_bound")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.record_plugin_metrics = False
        self.pods_to_activate: set[str] = set()
        self._bind_until_bound = False

    def read(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"{key!r} not found in CycleState") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def explaining(self) -> bool:
        """Whether this cycle is traced for an explanation (worth writing notes for)."""
        return TRACE_KEY in self._data

    def explain(self, plugin: str, notes: dict[str, str]) -> None:
        """Per-node notes from ``plugin`` for the explanation (``scoreNotes``: what a load-aware
        score read and why); a no-op unless ``explaining()``."""
        trace = self._data.get(TRACE_KEY)
        if trace is not None:
            trace.notes.setdefault(plugin, {}).update(notes)

    def bind_until_bound(self) -> None:
        """Asked by a plugin at Reserve or Permit when the pod is admitted as part of a whole (a
        gang): once Permit allows it, a failed bind is not a failed attempt - the binding cycle
        keeps the pod's reservation and binds it again on the same node, backing off, until it is
        bound or deleted, the node goes, or this replica stops leading. (Plugin API 1.2.)"""
        self._bind_until_bound = True

    def binds_until_bound(self) -> bool:
        """Whether a plugin asked for ``bind_until_bound`` in this cycle."""
        return self._bind_until_bound

    def clone(self) -> CycleState:
        c = CycleState()
        c._data = dict(self._data)
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.record_plugin_metrics = self.record_plugin_metrics
        c._bind_until_bound = self._bind_until_bound
        return c
