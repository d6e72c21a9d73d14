"""Effective plugin sets: a profile's plugins with kube-scheduler's default MultiPoint merged in."""

from __future__ import annotations

from collections.abc import Container

from pysched.apis.config.types import EXTENSION_POINT_KEYS, PluginRef, PluginSet, Profile, default_multipoint
from pysched.apis.features import NEWEST, defaults


def merged_plugin_sets(profile: Profile, available: set[str], release: tuple[int, int] = NEWEST,
                       gates: Container[str] | None = None) -> dict[str, PluginSet]:
    """Profile plugins with kube-scheduler's default MultiPoint merged in (``mergePlugins``), the
    default list being that of kube-scheduler ``release`` with ``gates`` (default: its default gates)."""
    gates = defaults(release) if gates is None else gates
    default_mp = PluginSet(enabled=[PluginRef(n, w) for n, w in default_multipoint(release, gates) if n in available])
    out: dict[str, PluginSet] = {}
    for ep in EXTENSION_POINT_KEYS:
        custom = profile.plugins.get(ep, PluginSet())
        default = default_mp if ep == "multiPoint" else PluginSet()
        out[ep] = _merge_plugin_set(default, custom)
    return out


def _merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    disabled = list(custom.disabled) + list(default.disabled)
    disabled_set = set(disabled)
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_set:
        for p in default.enabled:
            if p.name in disabled_set:
                continue
            if p.name in custom_by_name:
                idx, cp = custom_by_name[p.name]
                p = cp
                replaced.add(idx)
            enabled.append(p)
    for i, p in enumerate(custom.enabled):
        if i not in replaced:
            enabled.append(p)
    return PluginSet(enabled=enabled, disabled=disabled)


