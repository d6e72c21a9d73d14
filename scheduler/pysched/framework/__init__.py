"""The scheduling framework: extension points, CycleState, Status, the Handle - the API a plugin is
written against, and only that (the engine that runs it is ``pysched.runtime``).

Everything a plugin needs is importable from here::

    from pysched.framework import FilterPlugin, FilterResult, NodeBatch, ScorePlugin, Status, Code

Modules: ``interface`` (extension points, NodeBatch and its accessors, FilterResult), ``status``
(Status, and Diagnosis / FrameworkError: why a cycle failed), ``cycle_state``, ``handle`` (the typed
Handle and the snapshot protocols), ``podinfo``/``nodeinfo`` (parsed pods and nodes), ``matchers``
(pod matchers for per-node pod counts), ``args`` (declarative plugin Args: dataclasses and one
strict decoder), ``api`` (the object model: selectors, taints, resources). ``registry`` is a
deprecated alias of ``pysched.runtime.registry``."""

import importlib
import warnings
from types import ModuleType

from pysched.framework.args import arg, decode_args, encode_args
from pysched.framework.cycle_state import CycleState
from pysched.framework.handle import GPUSource, Handle, PluginMetrics, QuotaSource
from pysched.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    READS_ANY,
    READS_NONE,
    READS_REQUESTS,
    ArgsT,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    LabelValues,
    NodeBatch,
    NodeEventHint,
    NormalizeScore,
    ObjectEventHint,
    PermitPlugin,
    Placement,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    Plugin,
    PodEventHint,
    PodGroupCycleInfo,
    PodWatcher,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreemptionGate,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPod,
    QueueingHint,
    QueueSortPlugin,
    QuotaStatusSource,
    ReservePlugin,
    ScorePlugin,
    WaitingPod,
    scores_each,
)
from pysched.framework.matchers import MatcherTerm, PodMatcher
from pysched.framework.nodeinfo import NodeInfo, NodeSpec
from pysched.framework.podinfo import PodInfo, PodVolume
from pysched.framework.status import Code, Diagnosis, FrameworkError, Status

#: The plugin API's own version (docs/api.md, "Stability"): a minor bump adds, a major one may remove
#: what was deprecated for at least one minor release. ``tests/unit/test_api_surface.py`` holds the
#: recorded surface of ``pysched.framework`` and ``pysched.testing`` to this version.
PLUGIN_API_VERSION = "1.5"

__all__ = [
    "PLUGIN_API_VERSION", "MAX_NODE_SCORE", "MIN_NODE_SCORE", "READS_ANY", "READS_NONE", "READS_REQUESTS",
    "ArgsT", "BindPlugin", "ClusterEvent", "ClusterEventWithHint", "Code", "CycleState", "Diagnosis",
    "EnqueueExtensions", "FilterPlugin", "FilterResult", "FrameworkError", "Handle", "LabelValues",
    "MatcherTerm", "NodeBatch", "NodeEventHint", "NodeInfo", "NodeSpec", "NormalizeScore", "ObjectEventHint",
    "PermitPlugin", "Plugin", "PodEventHint", "PodInfo", "PodMatcher", "PodVolume", "PodWatcher",
    "PostBindPlugin", "PreemptionGate", "Placement", "PlacementGeneratePlugin", "PlacementScorePlugin",
    "PodGroupCycleInfo", "PluginMetrics", "PostFilterPlugin", "PostFilterResult",
    "PreBindPlugin", "QuotaSource", "GPUSource", "QuotaStatusSource", "PreEnqueuePlugin", "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin", "QueuedPod", "QueueSortPlugin", "QueueingHint", "ReservePlugin", "ScorePlugin", "Status",
    "WaitingPod", "arg", "decode_args", "encode_args", "groupmetrics", "quotametrics", "scores_each",
]


def __getattr__(name: str) -> ModuleType:
    """``groupmetrics`` and ``quotametrics``: deprecated in 1.3 for ``Handle.metrics``, loaded on first use."""
    if name in ("groupmetrics", "quotametrics"):
        warnings.warn(f"pysched.framework.{name} is deprecated: plugins record through handle.metrics",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(f"pysched.framework.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
