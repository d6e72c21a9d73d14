"""Profiles: the registry, one framework per profile, and the scheduling queue, built from configuration.

The live scheduler (``app``), the offline engine behind ``pysched simulate`` (``tools.offline``)
and the extender server all build their frameworks here, so the three run the same plugins with
the same arguments. The in-tree plugin set (``pysched.plugins``) is handed to the registry here:
the framework itself knows no plugin. Building a profile that enables DynamicResources also exports
which CEL engine evaluates its device selectors (``pysched_dra_cel_engine``).
"""

from __future__ import annotations

from collections.abc import Iterable

from pysched.apis.config import SchedulerConfig
from pysched.apis.features import NEWEST
from pysched.backend.queue.scheduling_queue import SchedulingQueue
from pysched.client.objectstore import ObjectStore
from pysched.framework.features import DRA_CONSUMABLE_CAPACITY, default_gates
from pysched.framework.handle import APIClient, EventRecorder, Handle, SnapshotView
from pysched.framework.loadmetrics import LoadMetrics
from pysched.metrics import METRICS
from pysched.plugins import IN_TREE
from pysched.plugins.dynamic_resources import cel
from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine
from pysched.plugins.dynamic_resources.cel_go import GoEngine
from pysched.runtime.framework import Framework
from pysched.runtime.plugin_metrics import PrometheusPluginMetrics
from pysched.runtime.registry import Registry, build_registry

DRA_PLUGIN = "DynamicResources"


def default_registry(plugin_modules: Iterable[str] = ()) -> Registry:
    """The in-tree plugins, entry points of group ``pysched.plugins``, and ``--plugin-module`` modules."""
    return build_registry(plugin_modules, in_tree=IN_TREE)


def build_frameworks(cfg: SchedulerConfig, registry: Registry, *, cache: SnapshotView, client: APIClient | None,
                     recorder: EventRecorder | None, objects: ObjectStore | None = None,
                     bind_timeout: float | None = None, load: LoadMetrics | None = None,
                     feature_gates: frozenset[str] | None = None,
                     kube_version: tuple[int, int] = NEWEST) -> dict[str, Framework]:
    """One framework per profile; all share the snapshot, the object store, the Permit waiting room
    and the load metrics (``load``: the live collector; default none, so load-aware plugins fall back).
    ``kube_version``: the kube-scheduler release to behave as, ``feature_gates`` the gates on
    (default: that release's defaults)."""
    gates = default_gates(kube_version) if feature_gates is None else feature_gates
    waiting: dict = {}
    out = {}
    objects = objects if objects is not None else ObjectStore()
    ignored = frozenset(ignored_extended_resources(cfg))
    for prof in cfg.profiles:
        handle = Handle(snapshot=cache, objects=objects, client=client, recorder=recorder,
                        profile_name=prof.scheduler_name, waiting_pods=waiting, bind_timeout=bind_timeout,
                        ignored_extended_resources=ignored, load=load, feature_gates=gates,
                        kube_version=kube_version,
                        metrics=PrometheusPluginMetrics(prof.scheduler_name))
        out[prof.scheduler_name] = Framework(prof, registry, handle)
    if any(DRA_PLUGIN in fw.plugins for fw in out.values()):
        export_cel_engine(cel.describe(DRA_CONSUMABLE_CAPACITY in gates))
    return out


def export_cel_engine(name: str) -> None:
    """``pysched_dra_cel_engine``: 1 for the engine in use, 0 for the other, so an alert on
    ``{engine="builtin"} == 1`` finds a replica without pysched-cel (docs/operations.md)."""
    for engine in (GoEngine.name, BuiltinEngine.name):
        METRICS.dra_cel_engine.labels(engine).set(1 if engine == name else 0)


def waiting_room(frameworks: dict[str, Framework]) -> dict:
    """The Permit waiting room every profile's framework shares (``build_frameworks``)."""
    return next(iter(frameworks.values())).handle.waiting_pods


def ignored_extended_resources(cfg: SchedulerConfig) -> list[str]:
    return [m.name for e in cfg.extenders for m in e.managed_resources if m.ignored_by_scheduler]


def build_queue(cfg: SchedulerConfig, frameworks: dict[str, Framework]) -> SchedulingQueue:
    first = next(iter(frameworks.values()))

    def pre_enqueue(pod):
        fwk = frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else None

    running = [pl.is_running_preemption for fwk in frameworks.values() for pl in fwk.post_filter
               if hasattr(pl, "is_running_preemption")]

    def hold(pod) -> bool:
        return any(r(pod.uid) for r in running)

    queue = SchedulingQueue(sort_key=first.queue_sort_key(), pre_enqueue=pre_enqueue,
                            initial_backoff=float(cfg.pod_initial_backoff_seconds),
                            max_backoff=float(cfg.pod_max_backoff_seconds), hold=hold if running else None)
    for fwk in frameworks.values():
        fwk.handle.nominator = queue.nominator
        fwk.handle.activate = queue.activate
        fwk.handle.regate = queue.regate
    return queue
