"""The scheduler process: assembled from its builders (``pysched.assembly``), and its lifecycle.

Start-up order, as kube-scheduler's: build every profile's framework (bad configuration fails
here, before any API call) -> start the Node and Pod informers, and one for each low-volume kind
the plugins read, and wait until all have listed (so pods bound by anyone before we started are
counted) -> (with leader election) wait for the
Lease -> run the scheduling loop and the PodGroup and ElasticQuota status controllers. Followers keep
their informers warm and never bind or write PodGroup or ElasticQuota status.

Built in this order, each builder from the earlier ones: the API clients, the write fence and the
elector (``Clients``); the frameworks, the queue, the Scheduler and the event handlers
(``Profiles``); the informers (``Informers``); the status controllers (``Controllers``); the
secure port (``SecureServing``). ``Mode`` holds every difference shadow mode makes. What stays
here is the lifecycle: run, readiness and health, the lost Lease, shutdown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time

from pysched.apis.config import SchedulerConfig
from pysched.apis.core.resources import accounting_for, set_accounting
from pysched.assembly.clients import Clients
from pysched.assembly.controllers import Controllers
from pysched.assembly.informers import Informers
from pysched.assembly.options import Mode, Options
from pysched.assembly.profiles import Profiles
from pysched.assembly.servers import SecureServing
from pysched.client.auth import Credentials
from pysched.client.prefetch import ListPrefetch
from pysched.metrics import METRICS
from pysched.profile import default_registry
from pysched.runtime.registry import Registry
from pysched.server.delegated_auth import ReviewError
from pysched.util import gctune, memtrim
from pysched.util.eventloop import cancel_and_wait, stop_on_signals
from pysched.util.logs import kv, process_uptime

log = logging.getLogger("pysched.app")

TRIM_EVERY_S = 60.0   # seconds between returns of the C heap's free pages to the OS (``memtrim``)
EVENT_FLUSH_ON_SHUTDOWN = 1.0  # seconds of Event posting allowed between the last bind and the handover
# /healthz fails a leader whose Lease has not been renewed for leaseDuration plus this (kube-scheduler's 20s).
LEADER_HEALTH_SLACK = 20.0
# The secure port, bound at start, is served once the scheduler is under way, or this many seconds
# after start-up began.
SERVE_BY_S = 5.0


class SchedulerApp:
    def __init__(self, cfg: SchedulerConfig, options: Options, creds: Credentials,
                 registry: Registry | None = None, prefetch: ListPrefetch | None = None):
        """``prefetch``: the informers' first LISTs, already sent (``client.prefetch``; the command
        line starts it before importing this module)."""
        self.cfg = cfg
        self.options = options
        self.creds = creds
        self.registry = registry if registry is not None else default_registry(options.plugin_modules)
        self.mode = Mode.of(options)
        self.clients = Clients(cfg, options, creds, self.mode, on_lease_lost=self._on_lease_lost,
                               on_new_leader=self._on_new_leader)
        self.prefetch = prefetch
        self.serving = SecureServing(options, creds)
        # The parts the lifecycle, the extender's server and the tests reach for.
        self.client, self.fence, self.elector = self.clients.client, self.clients.fence, self.clients.elector
        self.leader_elect = self.elector is not None
        self._assemble(options)
        # Set once the release to behave as is settled (``settle_release``; at once when it was given).
        self.release_settled = asyncio.Event()
        if not options.discover_release:
            self.release_settled.set()
        self._informers_spawned = False
        self._shutting_down = False
        self.tasks: list[asyncio.Task] = []
        self.stopping = asyncio.Event()
        self.exit_code = 0

    def _assemble(self, options: Options) -> None:
        """The parts that follow the kube-scheduler release (``options.kube_version`` and its gates):
        frameworks, queue, scheduler, informers, status controllers, and the accounting of pods'
        requests under in-place resize (process-wide, ``apis.core.resources.set_accounting``: set
        before the informers parse any pod)."""
        self.options = options
        set_accounting(accounting_for(options.kube_version, options.feature_gates))
        self.profiles = Profiles(self.cfg, options, self.registry, self.clients, self.mode)
        self.informers = Informers(options, self.clients, self.profiles, self.prefetch)
        self.controllers = Controllers(options, self.mode, self.clients, self.profiles.frameworks,
                                       self.profiles.object_kinds)
        p = self.profiles
        self.recorder, self.cache, self.objects, self.load = p.recorder, p.cache, p.objects, p.load
        self.frameworks, self.queue, self.cluster_events, self.extenders = (p.frameworks, p.queue,
                                                                             p.cluster_events, p.extenders)
        self.scheduler, self.shadow, self.handlers, self.recovery = p.scheduler, p.shadow, p.handlers, p.recovery
        self.synced = self.informers.synced
        self.informer_tasks: list[asyncio.Task] = []

    async def settle_release(self) -> bool:
        """Read the API server's version and behave as that kube-scheduler release (``cmd.release``,
        ``apis.features.release``): the parts built for the provisional release are built again
        when it differs. False (exit code 2, the reason logged) when the server is outside the
        window and no ``--emulated-version`` was given, or the flags are refused at that release."""
        from pysched.apis.features import FeatureGateError, ReleaseError, choose, parse_flag, resolve
        from pysched.client.discovery import server_version
        server = await server_version(self.creds, user_agent=self.client.user_agent, stop=self.stopping)
        if server is None:
            return False
        o = self.options
        try:
            release = choose(server, o.emulated_version)
            gates = resolve(release.version, parse_flag(o.feature_gate_flags))
        except (ReleaseError, FeatureGateError) as exc:
            log.error("cannot follow the API server's release", extra=kv(server=server, error=str(exc)))
            self.exit_code = 2
            return False
        if release.warning:
            log.warning(release.warning, extra=kv(server=server))
        version = f"{release.version[0]}.{release.version[1]}"
        log.info("following kube-scheduler", extra=kv(release=version, server=server, emulated=release.emulated,
                                                      feature_gates=gates.describe() or None))
        if (release.version, gates.enabled) != (o.kube_version, o.feature_gates):
            self._assemble(dataclasses.replace(o, kube_version=release.version, feature_gates=gates.enabled))
        self.release_settled.set()
        return True

    def _spawn(self, coro, name: str) -> asyncio.Task:
        t = asyncio.create_task(coro, name=name)
        self.tasks.append(t)
        return t

    async def start_informers(self) -> None:
        self.spawn_informers()
        await self.finish_start()

    def spawn_informers(self) -> None:
        """Start the informers' LISTs (they run as soon as the loop gets control)."""
        if self._informers_spawned:
            return
        self._informers_spawned = True
        self.recorder.start()
        self.informer_tasks = [self._spawn(r.run(), f"{r.name}-informer") for r in self.informers.reflectors]
        self._spawn(self.queue.run_flush_loop(), "queue-flush")
        self._spawn(self._cache_metrics_loop(), "cache-metrics")
        if self.load:
            self._spawn(self.load.run(), "load-metrics")
        if self.shadow is not None:
            self._spawn(self.shadow.run_expiry(), "shadow-expiry")

    async def finish_start(self) -> None:
        """Wait for every informer's LIST."""
        self.spawn_informers()
        await self.informers.wait_synced()
        # Pods were queued as they were listed, some before the objects a QueueSort reads (PodGroups
        # for Coscheduling's order by group): order them again now that everything is known.
        self.queue.resort()
        gctune.freeze()   # the listed cache is long-lived: keep it out of later collections
        log.info("caches synced", extra=kv(since_start_s=round(process_uptime(), 2),
                                            cpu_s=round(time.process_time(), 2), nodes=len(self.cache.nodes),
                                            pods=len(self.cache.pods), pending=len(self.queue)))

    async def _cache_metrics_loop(self) -> None:
        trims = memtrim.TrimSchedule(TRIM_EVERY_S, time.monotonic())
        nodes, pods = self.informers.node_reflector, self.informers.pod_reflector
        while True:
            if trims.due(nodes.lists + pods.lists, time.monotonic()):
                memtrim.trim()
            METRICS.python_heap_blocks.set(sys.getallocatedblocks())
            METRICS.cache_size.labels("nodes").set(len(self.cache.nodes))
            METRICS.cache_size.labels("pods").set(len(self.cache.pods))
            METRICS.cache_size.labels("assumed_pods").set(len(self.cache.assumed))
            self.queue.update_metrics()
            self.load.update_metrics()
            METRICS.asyncio_tasks.set(len(asyncio.all_tasks()))
            await asyncio.sleep(1.0)

    async def run(self) -> int:
        stop_on_signals(self.request_stop)
        try:
            if self.options.serve:
                # The port is bound now (in use: exit at once); it is served once under way.
                try:
                    self.serving.bind()
                except OSError as exc:
                    self._cannot_serve(exc)
                    return self.exit_code
            if self.options.serve:
                self._spawn(self._serve(), "secure-server")
            if not self.release_settled.is_set() and not (
                    await self.until_stopped(self.settle_release()) and self.release_settled.is_set()):
                return self.exit_code   # stopped while waiting for the API server, or its release refused
            self.spawn_informers()
            if not await self.until_stopped(self.finish_start()):
                return self.exit_code   # stopped while starting (e.g. the API server is unreachable)
            stop = asyncio.create_task(self.stopping.wait())
            if self.shadow is not None:
                self.scheduler.under_way.set()   # a shadow binds nothing: serve at once
            if self.elector is not None:
                self.scheduler.under_way.set()   # a replica waiting to lead serves meanwhile
                self._spawn(self.elector.run(), "leader-election")
                leading = asyncio.create_task(self.elector.leading.wait())
                await asyncio.wait([leading, stop], return_when=asyncio.FIRST_COMPLETED)
                leading.cancel()
                if self.stopping.is_set():
                    return self.exit_code
                log.info("started leading; scheduling")
            self.controllers.start()   # leader (or the only replica): the status controllers
            scheduling = self.shadow.run() if self.shadow is not None else self.scheduler.run()
            sched = self._spawn(scheduling, "scheduling-loop")
            if self.recovery is not None:
                self._spawn(self.recovery.run(), "pod-recovery")
            watch = [sched, stop, *self.informer_tasks]   # an informer that ends has failed
            done, _ = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t is not stop and t.done() and not t.cancelled() and t.exception() is not None:
                    log.error("component failed", extra=kv(task=t.get_name(), error=repr(t.exception())))
                    self.exit_code = 1
            stop.cancel()
        finally:
            await self.shutdown()
        return self.exit_code

    async def until_stopped(self, coro) -> bool:
        """Run ``coro`` unless a stop is requested first (then cancel it). True if it completed.

        Start-up can wait indefinitely - informers retry their first LIST until the API server
        answers - and SIGTERM/SIGINT must end it all the same."""
        work = asyncio.ensure_future(coro)
        stop = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait([work, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
                try:
                    await work
                except asyncio.CancelledError:
                    pass
        if work.cancelled():
            return False
        work.result()   # a start-up failure propagates
        return True

    async def _serve(self) -> None:
        """Serve the secure port once the scheduler is under way (``Scheduler.under_way``: its
        first bind answered, an attempt failed, or nothing to schedule), at once for a replica that
        waits to lead, and at the latest ``SERVE_BY_S`` seconds after start-up began, so /healthz
        answers while the informers still wait for an API server. Importing the server (aiohttp)
        and building it cost about 0.1 s of CPU, which on the scheduler's one core would otherwise
        come before the first bind; the port itself was bound at start (``server.listener``), so a
        client that connects meanwhile waits for its answer instead of being refused. A failure
        (delegated authentication, the certificate) stops the process with exit code 1."""
        try:
            async with asyncio.timeout(SERVE_BY_S):
                await self.release_settled.wait()   # the scheduler below is the one that will run
                await self.scheduler.under_way.wait()
        except TimeoutError:
            pass   # still starting (an API server that does not answer): /healthz must answer anyway
        try:
            await self.start_server()
        except ReviewError as exc:
            log.error("cannot set up delegated authentication", extra=kv(error=str(exc)))
        except OSError as exc:
            self._cannot_serve(exc)
        else:
            return
        self.exit_code = 1
        self.request_stop()

    def _cannot_serve(self, exc: OSError) -> None:
        log.error("cannot serve the secure port", extra=kv(address=self.options.bind_address,
                                                            port=self.options.secure_port, error=str(exc)))
        self.exit_code = 1

    async def start_server(self) -> None:
        await self.serving.start(ready=self.ready, healthy=self.healthy, configz=self.configz, explain=self.explain,
                                 stopping=self.stopping, about=self.about)

    def ready(self) -> tuple[bool, str]:
        if self._shutting_down:
            return False, "shutdown"
        if not self.synced.is_set():
            return False, "sched-handler-sync"
        return True, ""

    def healthy(self) -> tuple[bool, str]:
        e = self.elector
        if e is not None and e.is_leader() and e.lease_age() > e.lease_duration + LEADER_HEALTH_SLACK:
            return False, "leaderElection"
        return True, ""

    def configz(self) -> dict:
        from pysched.apis.config import to_dict
        effective = {n: f.plugin_sets for n, f in self.frameworks.items()}
        return {"componentconfig": to_dict(self.cfg, effective_plugins=effective)}

    def explain(self, pod_key: str) -> dict | None:
        return self.scheduler.explanation(pod_key)

    def about(self) -> dict[str, str]:
        """Who answers /debug/explain (``pysched explain`` reads it): the schedulerNames served and,
        with leader election, this replica's identity, whether it leads and who does."""
        out = {"Pysched-Profiles": ",".join(self.frameworks)}
        e = self.elector
        if e is not None:
            out.update({"Pysched-Identity": e.identity, "Pysched-Leading": "true" if e.is_leader() else "false",
                        "Pysched-Leader": e.reported_leader, "Pysched-Lease": f"{e.namespace}/{e.name}"})
        return out

    def _on_new_leader(self, holder: str) -> None:
        log.info("new leader elected", extra=kv(leader=holder))

    def _on_lease_lost(self) -> None:
        self.fence.close("leader election lost")
        self.controllers.cancel()
        if self._shutting_down:
            return
        log.error("leaderelection lost; exiting")
        self.exit_code = 1
        self.scheduler.stop()
        self.scheduler.abort_pending(keep_in_flight=False)  # queued binds are cancelled and forgotten
        self.stopping.set()

    def frameworks_bind_timeout(self) -> float:
        """How long a bind that already went out may take (its request timeout)."""
        first = next(iter(self.frameworks.values()))
        return first.handle.bind_timeout or self.client.timeout

    def request_stop(self) -> None:
        log.info("shutting down")
        self.stopping.set()

    async def shutdown(self) -> None:
        """Hand over quickly: cancel what was not sent, let what was sent finish, flush Events
        briefly, close the fence, and only then release the Lease."""
        self._shutting_down = True
        self.scheduler.stop()
        self.scheduler.abort_pending(keep_in_flight=True)
        self.controllers.cancel()
        await self.scheduler.drain(timeout=float(self.frameworks_bind_timeout()))
        await self.recorder.stop(drain=EVENT_FLUSH_ON_SHUTDOWN)
        self.fence.close("shutting down")
        if self.elector is not None and self.exit_code == 0:
            await self.elector.release()
        await cancel_and_wait(self.tasks)
        await self.recorder.stop(drain=0)
        await self.controllers.stop()
        await self.serving.close()
        for e in self.extenders:
            await e.close()
        await self.clients.close()
