"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``): strict parsing, defaults, validation.

The file kube-scheduler accepts is accepted here with the same defaults (``defaults.go``) and the
same rules (``validation.go``): profiles with unique ``schedulerName`` s sharing one queueSort,
plugins enabled/disabled per extension point or through ``multiPoint``, ``pluginConfig`` args,
``percentageOfNodesToScore`` in [0, 100], backoff seconds, ``leaderElection``,
``clientConnection`` and ``extenders``.

Decoding is strict like kube-scheduler's: an unknown field, a wrong type or a bad value raises
``ConfigError`` whose message starts with the field path
(``profiles[0].plugins.score.enabled[1].weight: ...``), and the process exits non-zero before
touching the cluster.

Defaults that differ from kube-scheduler's on purpose, because this runs beside it: the default
``schedulerName`` is ``pysched`` and the default Lease is ``pysched`` in the namespace the
scheduler runs in, so the two never fight over ``kube-system/kube-scheduler``.

The package is split by job: ``types`` (the dataclasses and constants), ``fields`` (strict field
readers and Go durations), ``decode`` (file -> SchedulerConfig, with validation), ``defaults``
(effective plugin sets) and ``encode`` (SchedulerConfig -> v1 dict). The names below are the
public surface.
"""

from pysched.apis.config.decode import default_config, load_file, own_namespace, parse
from pysched.apis.config.defaults import merged_plugin_sets
from pysched.apis.config.encode import to_dict
from pysched.apis.config.fields import format_duration, go_duration_ns, parse_duration
from pysched.apis.config.types import (
    API_VERSION,
    DEFAULT_LEASE_NAME,
    DEFAULT_MULTIPOINT,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINT_KEYS,
    KIND,
    SA_NAMESPACE_FILE,
    ClientConnection,
    ConfigError,
    ExtenderConfig,
    LeaderElection,
    ManagedResource,
    PluginRef,
    PluginSet,
    Profile,
    SchedulerConfig,
    TLSConfig,
)

__all__ = [
    "API_VERSION",
    "ClientConnection",
    "ConfigError",
    "DEFAULT_LEASE_NAME",
    "DEFAULT_MULTIPOINT",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINT_KEYS",
    "ExtenderConfig",
    "KIND",
    "LeaderElection",
    "ManagedResource",
    "PluginRef",
    "PluginSet",
    "Profile",
    "SA_NAMESPACE_FILE",
    "SchedulerConfig",
    "TLSConfig",
    "default_config",
    "format_duration",
    "go_duration_ns",
    "load_file",
    "merged_plugin_sets",
    "own_namespace",
    "parse",
    "parse_duration",
    "to_dict",
]
