"""The scheduling side of the process: a framework per profile (``pysched.profile``, shared with
simulate and the extender), the queue, the Scheduler, and what feeds them.

Built in this order, each from what came before: the Event recorder; the cache and the object
store (the low-volume kinds the plugins read); the load metrics collector; every profile's
framework, each logged (``log_profile``: bad configuration failed earlier, in the command line's
check); which framework handles a pod (``Mode.routing``); the queue and the cluster events that
move pods in it; the extenders; the Scheduler and, in shadow mode, the ``ShadowRecorder`` that runs
in place of its loop; the event handlers the informers deliver to; the pod-recovery safety net.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pysched.apis.config import SchedulerConfig
from pysched.assembly.clients import Clients
from pysched.assembly.options import Mode, Options
from pysched.backend.cache.cache import SchedulerCache
from pysched.client.events import DEFAULT_LIMIT, EventRecorder
from pysched.client.objectstore import KINDS as OBJECT_KINDS
from pysched.client.objectstore import OPTIONAL, ObjectStore
from pysched.eventhandlers import ClusterEvents, EventHandlers, EventRegistry
from pysched.loadmetrics import LoadCollector
from pysched.podrecovery import PodRecovery
from pysched.profile import build_frameworks, build_queue, waiting_room
from pysched.runtime.framework import Framework
from pysched.runtime.registry import Registry
from pysched.schedule_one import Scheduler, max_binds_for
from pysched.shadow import ShadowRecorder
from pysched.util.logs import kv

if TYPE_CHECKING:
    from pysched.extender.client import HTTPExtender

log = logging.getLogger("pysched.app")   # the process's start-up lines keep their logger's name


def log_profile(fwk) -> None:
    """At start-up, what a profile runs: its plugins in order, the score weights, and where each
    out-of-tree plugin came from; a warning for each ``pluginConfig`` of a plugin it does not enable."""
    out_of_tree = {name: type(pl).__module__ for name, pl in fwk.plugins.items()
                   if not type(pl).__module__.startswith("pysched.plugins")}
    fields = {"profile": fwk.profile_name, "plugins": ",".join(fwk.plugins),
              "scores": ",".join(f"{n}={w}" for n, w in fwk.weights.items())}
    if out_of_tree:
        fields["out_of_tree"] = ",".join(f"{n}:{m}" for n, m in out_of_tree.items())
    log.info("profile", extra=kv(**fields))
    for where, name in fwk.ignored_plugin_config:
        log.warning("pluginConfig for a plugin this profile does not enable: its args are ignored", extra=kv(
            profile=fwk.profile_name, plugin=name, field=where))


def object_kinds(frameworks: dict[str, Framework]) -> list[str]:
    """The low-volume kinds to list and watch: every required one, and the optional ones (CRDs such
    as PodGroups) only when an enabled plugin reads them (``Plugin.object_kinds``), so a scheduler
    without gang scheduling needs neither the CRD nor RBAC for it."""
    wanted = {k for fw in frameworks.values() for pl in fw.plugins.values() for k in pl.object_kinds}
    return [k for k in OBJECT_KINDS if k not in OPTIONAL or k in wanted]


class Profiles:
    def __init__(self, cfg: SchedulerConfig, options: Options, registry: Registry, clients: Clients, mode: Mode):
        cc = cfg.client_connection
        self.recorder = EventRecorder(clients.event_client, limit=options.event_backlog_limit or DEFAULT_LIMIT)
        self.cache = SchedulerCache(expect_rebinding=mode.shadow)  # a shadow's assumptions are only predictions
        self.objects = ObjectStore()
        # Load metrics for load-aware plugins, fetched in the background (read-only: every replica
        # keeps them, so a new leader scores on fresh data at once).
        self.load = LoadCollector(clients.client)
        self.frameworks = build_frameworks(cfg, registry, cache=self.cache, client=clients.client,
                                           recorder=self.recorder, objects=self.objects,
                                           bind_timeout=clients.bind_timeout, load=self.load,
                                           feature_gates=options.feature_gates,
                                           kube_version=options.kube_version)
        for fwk in self.frameworks.values():
            log_profile(fwk)
        self.object_kinds = object_kinds(self.frameworks)
        self.routing = mode.routing(self.frameworks)
        self.queue = build_queue(cfg, self.routing)
        self.cluster_events = ClusterEvents(self.queue, EventRegistry(self.frameworks.values()))
        self.objects.subscribe(self.cluster_events.object_event)
        self.extenders: list[HTTPExtender] = []
        if cfg.extenders:
            from pysched.extender.client import HTTPExtender  # aiohttp's client: only with extenders
            self.extenders = [HTTPExtender(e, fence=clients.fence) for e in cfg.extenders]
        client = clients.client
        self.scheduler = Scheduler(cache=self.cache, queue=self.queue, frameworks=self.routing,
                                   recorder=self.recorder if mode.writes else None,
                                   client=client if mode.writes else None,
                                   percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score,
                                   extenders=self.extenders if mode.writes else [], seed=options.seed,
                                   fence=clients.fence, explain_all=options.explain_all,
                                   max_binds_outstanding=max_binds_for(cc.qps, clients.bind_timeout or client.timeout,
                                                                         client.max_connections),
                                   on_cluster_event=self.cluster_events.move)
        self.recorder.defer_while(self.scheduler.backlogged)   # binds first while there is a backlog
        # Shadow mode never binds, patches or records: only predictions, metrics, logs and /debug/explain.
        self.shadow = ShadowRecorder(self.scheduler) if mode.shadow else None
        self.handlers = EventHandlers(self.cache, self.queue, set(self.routing), self.cluster_events,
                                      keep_node_raw=any(not e.node_cache_capable for e in self.extenders),
                                      observer=self.shadow, waiting_pods=waiting_room(self.frameworks))
        cluster_events = self.cluster_events
        self.recovery = PodRecovery(
            pending=self.handlers.pending, cache=self.cache, queue=self.queue, working=self.scheduler.working,
            client=client, interval=options.pod_recovery_interval,
            on_recovered=lambda pod: cluster_events.move("Pod", {"Delete"}, pod, None)) if mode.writes else None
