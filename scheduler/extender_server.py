"""``pysched extender``: our plugins served to kube-scheduler as a scheduler extender.

The same profile (plugins, pluginConfig) that the standalone scheduler runs, behind the four
extender verbs, over HTTP or HTTPS (``--tls-cert-file``/``--tls-private-key-file``; with
``--client-ca-file`` the caller must present a certificate from that CA: mTLS):

* ``POST /filter``: PreFilter + Filter over the nodes kube-scheduler sends - full ``Nodes``
  objects, or only ``NodeNames`` (``nodeCacheCapable``), resolved against this process's own
  Node/Pod informer cache. Rejected nodes go to ``FailedNodes`` or, when no preemption could help
  (UnschedulableAndUnresolvable), ``FailedAndUnresolvableNodes``, with our reason strings.
* ``POST /prioritize``: PreScore + Score + NormalizeScore x weight, rescaled to 0-10 and returned
  as a bare ``HostPriorityList``.
* ``POST /bind``: creates the ``pods/binding`` with the pod's UID; failures in ``Error``.
* ``POST /preempt``: keeps the candidate nodes on which the pod fits once the proposed victims
  are gone (evaluated on the cache, no API writes), with the same victims.

``bind`` and ``preempt`` need an authenticated, authorized caller: a client certificate from
``--client-ca-file`` (mTLS), or a bearer token that a TokenReview accepts and whose user a
SubjectAccessReview allows to ``create pods/binding`` in the pod's namespace (``delegated_auth``);
401 or 403 otherwise. ``--insecure-allow-unauthenticated-bind`` (lab only, warned) lifts this.

A body that is not JSON, does not match the wire types, or exceeds ``--max-body-bytes`` gets HTTP
400 with a message naming what is wrong; semantic failures come back in ``Error``. Answers are
computed in memory from the informer cache - no API call per request except bind - so they
arrive well within kube-scheduler's default 5 s ``httpTimeout``. ``/healthz``, ``/readyz`` and
``/metrics`` are served on the same port.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import sys
import time

import numpy as np
import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from .framework.cycle_state import CycleState
from .framework.interface import MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE, NodeBatch
from .framework.status import Code
from .framework.types import Diagnosis, FrameworkError
from . import eventloop
from .extender_wire import WireError, filter_result, parse_args, parse_binding_args, parse_preemption_args
from .kubeclient import ApiError
from .delegated_auth import Attributes, AuthenticationFailed, DelegatedAuth, unauthorized_response, user_from_peercert
from .logs import kv
from .metrics import METRICS
from .podinfo import PodInfo

log = logging.getLogger("scheduler.extender_server")
DEFAULT_MAX_BODY = 10 * 1024 * 1024
NOT_IN_CACHE = "node not found in the extender's cache"
GUARDED_VERBS = ("bind", "preempt")   # they bind pods or plan evictions: callers must be authorized


class BadRequest(Exception):
    pass


class ExtenderServer:
    def __init__(self, app, profile: str | None = None, *, max_body: int = DEFAULT_MAX_BODY,
                 bind_auth: DelegatedAuth | None):
        """``bind_auth``: who may call bind/preempt (None: anyone - --insecure-allow-unauthenticated-bind)."""
        self.app = app
        self.bind_auth = bind_auth
        self.profile = profile or app.cfg.profiles[0].scheduler_name
        if self.profile not in app.frameworks:
            raise ValueError(f"--profile {self.profile!r}: no such profile (have {', '.join(app.frameworks)})")
        self.fwk = app.frameworks[self.profile]
        self.max_body = max_body
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- plumbing ------------------------------------------------------------------------------

    def web_app(self) -> web.Application:
        wa = web.Application(client_max_size=self.max_body * 2)
        for verb, fn in (("filter", self.filter), ("prioritize", self.prioritize), ("bind", self.bind),
                         ("preempt", self.preempt)):
            wa.router.add_post(f"/{verb}", self._wrap(verb, fn))
        wa.router.add_get("/healthz", self._healthz)
        wa.router.add_get("/readyz", self._readyz)
        wa.router.add_get("/metrics", self._metrics)
        return wa

    async def _healthz(self, request):
        return web.Response(text="ok")

    async def _metrics(self, request):
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, address: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
        self._runner = web.AppRunner(self.web_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, address, port, ssl_context=ssl_context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
        log.info("serving extender verbs", extra=kv(address=address, port=self.port, https=ssl_context is not None,
                                                   profile=self.profile))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _readyz(self, request):
        ok = self.app.synced.is_set()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "[-]sched-handler-sync failed")

    def _wrap(self, verb, fn):
        async def handler(request: web.Request) -> web.Response:
            t0 = time.perf_counter()
            code = 200
            try:
                user = None
                if verb in GUARDED_VERBS and self.bind_auth is not None and not _mtls_client(request):
                    try:
                        user = await self.bind_auth.authenticate(request)
                    except AuthenticationFailed:
                        code = 401
                        return unauthorized_response()
                body = await self._body(request)
                if user is not None:
                    _, refusal = await self.bind_auth.check(request, binding_attributes(verb, body), user=user)
                    if refusal is not None:
                        code = refusal.status
                        return refusal
                result = fn(body) if not asyncio.iscoroutinefunction(fn) else await fn(body)
                return web.Response(body=orjson.dumps(result), content_type="application/json")
            except BadRequest as exc:
                code = 400
                return web.Response(status=400, text=str(exc))
            except WireError as exc:
                code = 400
                return web.Response(status=400, text=str(exc))
            except Exception as exc:  # noqa: BLE001 - never a traceback to the caller
                code = 500
                log.exception("extender verb failed", extra=kv(verb=verb))
                return web.Response(status=500, text=f"internal error: {type(exc).__name__}: {exc}")
            finally:
                METRICS.extender_served.labels(verb, str(code)).inc()
                METRICS.extender_served_duration.labels(verb).observe(time.perf_counter() - t0)
        return handler

    async def _body(self, request: web.Request):
        if request.content_length is not None and request.content_length > self.max_body:
            raise BadRequest(f"request body of {request.content_length} bytes exceeds the limit of {self.max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(65536):
            size += len(chunk)
            if size > self.max_body:
                raise BadRequest(f"request body exceeds the limit of {self.max_body} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw:
            raise BadRequest("request body is empty; expected a JSON object")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from None

    # -- verbs ---------------------------------------------------------------------------------

    def _candidates(self, body) -> tuple[PodInfo, list[str], list[dict] | None, list[str]]:
        pod_raw, names, nodes = parse_args(body)
        handlers = self.app.handlers
        if nodes is not None:
            for n in nodes:
                handlers.node_upsert(n)   # fresher than our watch, and exactly what kube-scheduler evaluates
            names = [n["metadata"]["name"] for n in nodes]
        pod = PodInfo.from_dict(pod_raw, keep_raw=True)
        if pod.parse_error:
            raise WireError(f"ExtenderArgs.Pod: {pod.parse_error}")
        known = [n for n in names if n in self.app.cache.nodes]
        return pod, names, nodes, known

    def _run_filters(self, pod: PodInfo, known: list[str]):
        """(passed names, {node: (code, message)}) for the known nodes, or raise FrameworkError."""
        fwk = self.fwk
        table = self.app.cache.table
        state = CycleState()
        all_nodes = NodeBatch(table, table.order())
        res, st, with_nodes = fwk.run_pre_filter(state, pod, all_nodes)
        if st is not None and not st.is_success():
            if not st.is_rejected():
                raise FrameworkError(st)
            return [], {n: (st.code, st.message()) for n in known}, state
        cand = [n for n in known if res is None or res.all_nodes() or n in res.node_names]
        why = f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(with_nodes))}]"
        outside = {n: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why) for n in known if n not in cand}
        batch = NodeBatch(table, np.array([table.slot_by_name[n] for n in cand], dtype=np.int64))
        diagnosis = Diagnosis()
        mask = (fwk.run_filters(state, pod, batch, diagnosis) if fwk.has_filter_plugins() and cand
                else np.ones(len(cand), dtype=bool))
        passed = [n for n, ok in zip(cand, mask.tolist()) if ok]
        failed = dict(outside)
        for node, status in diagnosis.node_statuses():
            failed[node] = (status.code, status.message())
        return passed, failed, state

    def filter(self, body) -> dict:
        pod, names, nodes, known = self._candidates(body)
        try:
            passed, failed, _ = self._run_filters(pod, known)
        except FrameworkError as exc:
            return filter_result(names if nodes is None else None, nodes, [], {}, {}, error=str(exc))
        plain = {n: NOT_IN_CACHE for n in names if n not in self.app.cache.nodes}
        unres = {}
        for node, (code, msg) in failed.items():
            if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                unres[node] = msg
            else:
                plain[node] = msg
        return filter_result(names if nodes is None else None, nodes, passed, plain, unres)

    def prioritize(self, body) -> list[dict]:
        pod, names, _, known = self._candidates(body)
        fwk = self.fwk
        out = [{"Host": n, "Score": 0} for n in names]
        if not known or not fwk.has_score_plugins():
            return out
        table = self.app.cache.table
        batch = NodeBatch(table, np.array([table.slot_by_name[n] for n in known], dtype=np.int64))
        state = CycleState()
        all_nodes = NodeBatch(table, table.order())
        fwk.run_pre_filter(state, pod, all_nodes)  # some scorers reuse PreFilter state
        st = fwk.run_pre_score(state, pod, batch)
        if st is not None and not st.is_success():
            raise FrameworkError(st)
        total = fwk.run_score(state, pod, batch)
        max_total = MAX_NODE_SCORE * sum(fwk.weights[p.name] for p in fwk.score
                                         if p.name not in state.skip_score_plugins) or 1
        scaled = {n: int(t) * MAX_EXTENDER_PRIORITY // max_total for n, t in zip(known, total.tolist())}
        return [{"Host": n, "Score": min(MAX_EXTENDER_PRIORITY, max(0, scaled.get(n, 0)))} for n in names]

    async def bind(self, body) -> dict:
        args = parse_binding_args(body)
        try:
            await self.app.client.bind_pod(args["PodNamespace"], args["PodName"], args["PodUID"], args["Node"])
        except ApiError as exc:
            return {"Error": exc.message}
        log.info("bound pod", extra=kv(pod=f"{args['PodNamespace']}/{args['PodName']}", node=args["Node"]))
        return {"Error": ""}

    def preempt(self, body) -> dict:
        pod_raw, victims = parse_preemption_args(body)
        pod = PodInfo.from_dict(pod_raw, keep_raw=True)
        cache = self.app.cache
        result = {}
        for node, uids in victims.items():
            info = cache.nodes.get(node)
            if info is None or any(uid not in info.pods for uid in uids):
                continue  # unknown node or victims: drop the candidate
            removed = [cache.remove_pod(uid) for uid in uids]
            try:
                passed, _, _ = self._run_filters(pod, [node])
            finally:
                for p in removed:
                    if p is not None:
                        cache.upsert_pod(p)
            if passed:
                result[node] = {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
        return {"NodeNameToMetaVictims": result}


def _mtls_client(request: web.Request) -> bool:
    """The caller presented a certificate that verified against --client-ca-file."""
    transport = request.transport
    return transport is not None and user_from_peercert(transport.get_extra_info("peercert")) is not None


def binding_attributes(verb: str, body) -> Attributes:
    """What bind/preempt amount to: ``create pods/binding`` on the pod, in its namespace."""
    if verb == "bind":
        args = parse_binding_args(body)
        namespace, name = args["PodNamespace"], args["PodName"]
    else:
        meta = parse_preemption_args(body)[0].get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return Attributes(verb="create", group="", version="v1", resource="pods", subresource="binding",
                      namespace=namespace, name=name)


def server_ssl(cert: str | None, key: str | None, client_ca: str | None) -> ssl.SSLContext | None:
    if not cert and not key:
        if client_ca:
            raise ValueError("--client-ca-file needs --tls-cert-file and --tls-private-key-file")
        return None
    if not (cert and key):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


async def serve(args) -> int:
    from . import config as configmod
    from .app import Options, SchedulerApp
    from .framework.registry import build_registry
    from .delegated_auth import AuthOptions
    from .delegated_auth import build as build_auth
    from .kubeauth import load

    cfg = configmod.load_file(args.config) if args.config else configmod.default_config()
    registry = build_registry(args.plugin_module)
    creds = load(args.kubeconfig or cfg.client_connection.kubeconfig or None)
    app = SchedulerApp(cfg, Options(kubeconfig=args.kubeconfig, serve=False, leader_elect=False), creds, registry)
    ctx = server_ssl(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    bind_auth = None
    if args.insecure_allow_unauthenticated_bind:
        log.warning("--insecure-allow-unauthenticated-bind: anyone who can reach the port can bind pods and "
                    "plan preemptions through this extender (lab use only)")
    else:
        bind_auth = await build_auth(AuthOptions(authentication_kubeconfig=args.authentication_kubeconfig,
                                                 authorization_kubeconfig=args.authorization_kubeconfig,
                                                 skip_lookup=True, always_allow_paths=[]), creds)
        if ctx is None:
            log.warning("bind and preempt accept bearer tokens over plain HTTP; serve HTTPS "
                        "(--tls-cert-file/--tls-private-key-file) so tokens are not sent in the clear")
    server = ExtenderServer(app, args.profile, bind_auth=bind_auth)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await app.start_informers()
        await server.start(args.address, args.port, ctx)
        await stop.wait()
    finally:
        await server.stop()
        await app.shutdown()
        if bind_auth is not None:
            await bind_auth.close()
    return 0


def main(args) -> int:
    from .config import ConfigError
    from .framework.registry import RegistryError
    from .kubeauth import CredentialsError
    try:
        return eventloop.run(serve(args))
    except (ConfigError, RegistryError, CredentialsError, ValueError, ssl.SSLError, OSError) as exc:
        print(f"pysched extender: {exc}", file=sys.stderr)
        return 2
