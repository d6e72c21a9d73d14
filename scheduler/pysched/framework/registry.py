"""Deprecated alias of ``pysched.runtime.registry`` (plugin API 1.3): the registry is the engine's
side. Importing this module warns; it goes away in plugin API 2.0."""

import warnings

from pysched.runtime.registry import ENTRY_POINT_GROUP, Registry, RegistryError, build_registry, load_module, register

warnings.warn("pysched.framework.registry moved to pysched.runtime.registry", DeprecationWarning, stacklevel=2)

__all__ = ["ENTRY_POINT_GROUP", "Registry", "RegistryError", "build_registry", "load_module", "register"]
