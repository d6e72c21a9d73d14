"""Registry: plugin name -> plugin class.

The caller hands over the in-tree set (``pysched.profile.default_registry`` passes
``pysched.plugins.IN_TREE``: the framework imports no plugin). Out-of-tree plugins are added without touching
the core, either through the ``pysched.plugins`` entry-point group (each entry point
names a plugin class) or with ``--plugin-module mypackage.plugins``, a module whose import calls
``register()`` or that exposes a ``PLUGINS`` list of classes.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Iterable
from importlib.metadata import entry_points

from pysched.framework.interface import Plugin

ENTRY_POINT_GROUP = "pysched.plugins"

log = logging.getLogger("pysched.registry")


class RegistryError(ValueError):
    pass


class Registry(dict[str, type[Plugin]]):
    """Name -> plugin class, plus the entry points that failed to load (name -> why).

    A broken plugin package installed beside pysched must not take down profiles that do not use
    it: its failure is kept here and reported, naming the entry point, by the profile that enables it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.unloadable: dict[str, str] = {}

    def register(self, cls: type[Plugin], name: str | None = None) -> type[Plugin]:
        name = name or getattr(cls, "name", "")
        if not name:
            raise RegistryError(f"plugin class {cls.__qualname__} has no name")
        if not (isinstance(cls, type) and issubclass(cls, Plugin)):
            raise RegistryError(f"{name}: {cls!r} is not a Plugin subclass")
        if name in self and self[name] is not cls:
            raise RegistryError(f"a plugin named {name!r} already exists")
        if cls.Args is not None and not (isinstance(cls.Args, type) and dataclasses.is_dataclass(cls.Args)):
            raise RegistryError(f"{name}: Args must be a dataclass (see pysched.framework.args), got {cls.Args!r}")
        self[name] = cls
        return cls

    def merge(self, classes: Iterable[type[Plugin]]) -> None:
        for cls in classes:
            self.register(cls)


_EXTRA = Registry()


def register(cls: type[Plugin]) -> type[Plugin]:
    """Decorator for out-of-tree plugins: ``@register`` on the class."""
    return _EXTRA.register(cls)


def load_module(module: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise RegistryError(f"--plugin-module {module}: {exc}") from None
    for cls in getattr(mod, "PLUGINS", ()):
        _EXTRA.register(cls)


def build_registry(modules: Iterable[str] = (), *, in_tree: Iterable[type[Plugin]] = ()) -> Registry:
    """``in_tree`` classes, then the ``pysched.plugins`` entry points, then ``modules``."""
    reg = Registry()
    reg.merge(in_tree)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            reg.register(ep.load(), ep.name)
        except Exception as exc:  # noqa: BLE001 - any import-time failure of a third-party package
            why = f"entry point {ep.name} ({ep.value}): {type(exc).__name__}: {exc}"
            reg.unloadable[ep.name] = why
            log.warning("plugin entry point could not be loaded plugin=%s entry_point=%s error=%r",
                        ep.name, ep.value, str(exc))
    for m in modules:
        load_module(m)
    for name, cls in _EXTRA.items():
        reg.register(cls, name)
    return reg
