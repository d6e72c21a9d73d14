"""CycleState: per-pod, per-cycle scratch space that plugins share (upstream ``CycleState``).

PreFilter/PreScore write what they computed once for the pod (its requests, its parsed
constraints, counts over the snapshot) and Filter/Score read it for every node. Keys are plain
strings, by convention the plugin's name plus a suffix.
"""

from __future__ import annotations

from typing import Any


class CycleState:
    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "record_plugin_metrics",
                 "pods_to_activate")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.record_plugin_metrics = False
        self.pods_to_activate: set[str] = set()

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

    def clone(self) -> CycleState:
        c = CycleState()
        c._data = dict(self._data)
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.record_plugin_metrics = self.record_plugin_metrics
        return c
