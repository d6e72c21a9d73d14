"""kopf, embedded for the PodGroup status controller's two watch streams (``controllers.podgroup``).

kopf is good at keeping watch streams alive (reconnects, 410 relists, backoffs) and at login; it
runs here in standalone mode, cluster-wide, with scanning and event posting disabled, and only
``@kopf.on.event`` handlers - handlers that never patch, annotate or add finalizers to anything.
Its login handler returns our own ``Credentials``, so kopf and our client authenticate the same
way.

It runs in its own thread with its own event loop, as kopf's embedding guide recommends: kopf
cancels every task of its loop when it exits and installs signal handlers in the main thread,
neither of which the scheduler's loop should suffer. Events are handed to the scheduler's loop
with ``call_soon_threadsafe``; the streams watched here carry a handful of events per minute.

The scheduler's own streams (Pods, Nodes and the kinds of ``client.objectstore``) do not go
through kopf: measured against kube-apiserver 1.35 on this machine, kopf's per-event processing
cost 1.03 ms CPU per pod event versus 0.055 ms for ``client.reflector.Reflector``; on a living
cluster (ReplicaSets whose status changes with every pod that turns Ready) kopf's thread was 45 %
of a standby replica's CPU; and importing kopf adds 20 MiB to the process's resident set
(``bench/PROFILE.md``). It is imported only when the PodGroup controller starts.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pysched.client.auth import Credentials
from pysched.util.logs import kv, process_uptime

log = logging.getLogger("pysched.client.kopf_watch")


@dataclass
class WatchSpec:
    group: str          # "" for the core API
    version: str
    plural: str
    on_event: Callable[[str | None, dict], None]  # (type: None for the initial list, object)
    field_selector: str = ""
    label_selector: str = ""


class KopfWatch:
    def __init__(self, creds: Credentials, specs: list[WatchSpec]):
        self.creds = creds
        self.specs = specs
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._main_loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        if not self.specs:
            return
        self._main_loop = asyncio.get_running_loop()
        # Expected here (kopf runs in its own thread); the scheduler handles signals itself.
        logging.getLogger("kopf._core.reactor.running").setLevel(logging.ERROR)
        self._thread = threading.Thread(target=self._run, name="kopf", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._operate())
        except BaseException as exc:  # noqa: BLE001 - report, do not crash the process from a thread
            self.error = exc
            log.error("kopf watcher stopped", exc_info=True)

    async def _operate(self) -> None:
        import kopf

        registry = kopf.OperatorRegistry()
        creds = self.creds
        main_loop = self._main_loop
        assert main_loop is not None, "start() records the loop before the thread runs"
        specs = self.specs
        ready = self._ready

        @kopf.on.login(registry=registry)
        def login(**_):
            return kopf.ConnectionInfo(server=creds.server, ca_path=creds.ca_file, insecure=creds.insecure or None,
                                       scheme="Bearer" if creds.bearer() else None, token=creds.bearer(),
                                       certificate_path=creds.cert_file, private_key_path=creds.key_file)

        @kopf.on.startup(registry=registry)
        def configure(settings: kopf.OperatorSettings, **_):
            configure_settings(settings, specs)
            ready.set()

        first = [True]

        for spec in specs:
            args = (spec.group, spec.version, spec.plural) if spec.group else (spec.version, spec.plural)

            def make(spec=spec):
                async def handler(event, **_):
                    obj = event.get("object") or {}
                    if first[0]:
                        first[0] = False
                        log.info("kopf's watch stream delivering", extra=kv(
                            resource=spec.plural, since_start_s=round(process_uptime(), 2)))
                    main_loop.call_soon_threadsafe(_deliver, spec.on_event, event.get("type"), dict(obj))
                return handler

            kopf.on.event(*args, registry=registry)(make())

        stop_flag = asyncio.Event()

        async def watch_stop():
            while not self._stop.is_set():
                await asyncio.sleep(0.2)
            stop_flag.set()

        waiter = asyncio.create_task(watch_stop())
        try:
            await kopf.operator(registry=registry, standalone=True, clusterwide=True, stop_flag=stop_flag)
        finally:
            waiter.cancel()


def configure_settings(settings, specs: list[WatchSpec]) -> None:
    """kopf's settings for read-only streams: standalone, no scanning, no Events posted, the
    watches' selectors - and no diff base. kopf builds one for every event it processes (a deep
    copy of the body, and a parse of its last-handled annotation) so that ``on.update`` handlers
    can be told what changed; only ``on.event`` handlers run here, which never read it."""
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.chunk_size = 500
    settings.persistence.diffbase_storage = _no_diffbase()
    for spec in specs:
        key = (spec.group, spec.version, spec.plural) if spec.group else (spec.version, spec.plural)
        if spec.field_selector:
            settings.watching.field_selectors[key] = spec.field_selector
        if spec.label_selector:
            settings.watching.label_selectors[key] = spec.label_selector


def _no_diffbase():
    import kopf

    class NoDiffBase(kopf.DiffBaseStorage):
        """A diff base that is never built or stored: every event's diff is empty, which nothing
        here reads (there are no ``on.create``/``on.update`` handlers)."""

        def build(self, *, body, extra_fields=None):
            return None

        def fetch(self, *, body):
            return None

        def store(self, *, body, patch, essence) -> None:
            return None

    return NoDiffBase()


def _deliver(fn, typ, obj) -> None:
    try:
        fn(typ, obj)
    except Exception:  # noqa: BLE001
        meta = obj.get("metadata") or {}
        log.exception("kopf event handler failed", extra={"kv": {
            "object": f"{meta.get('namespace', '')}/{meta.get('name', '')}"}})
