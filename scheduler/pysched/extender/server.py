"""``pysched extender``: our plugins served to kube-scheduler as a scheduler extender.

The same profile (plugins, pluginConfig) that the standalone scheduler runs, behind the four
extender verbs, over HTTP or HTTPS (``--tls-cert-file``/``--tls-private-key-file``; with
``--client-ca-file`` the caller must present a certificate from that CA: mTLS):

* ``POST /filter``: PreFilter + Filter over the nodes kube-scheduler sends - full ``Nodes``
  objects, or only ``NodeNames`` (``nodeCacheCapable``), resolved against this process's own
  Node/Pod informer cache. Rejected nodes go to ``FailedNodes`` or, when no preemption could help
  (UnschedulableAndUnresolvable), ``FailedAndUnresolvableNodes``, with our reason strings.
  Full ``Nodes`` are judged as sent - a node we do not know included - with the pods our cache
  counts on them, for that request only: they never enter the informer cache
  (``SchedulerCache.nodes_as_sent``), so a later request cannot see them.
* ``POST /prioritize``: PreScore + Score + NormalizeScore x weight, rescaled to 0-10 and returned
  as a bare ``HostPriorityList`` (nodes as for filter).
* ``POST /bind``: creates the ``pods/binding`` with the pod's UID, after checking - with one GET
  of the pod, before any write - that the pod has that UID, is not bound yet, and has a
  ``schedulerName`` this extender binds for (``--bind-scheduler-name``, default
  ``default-scheduler`` and the served profile's name), and that the node is in our cache.
  Refusals and API failures come back in ``Error``.
* ``POST /preempt``: keeps the candidate nodes on which the pod fits once the proposed victims
  are gone (evaluated on the cache, no API writes), with the same victims.

``bind`` and ``preempt`` need an authenticated, authorized caller: a client certificate from
``--client-ca-file`` (mTLS), or a bearer token that a TokenReview accepts and whose user a
SubjectAccessReview allows to ``create pods/binding`` in the pod's namespace (``delegated_auth``);
401 or 403 otherwise. ``--insecure-allow-unauthenticated-bind`` (lab only, warned) lifts this.

Bad input never gets a 500: a body that is not JSON or does not match the wire types - down to
each Pod and Node field our plugins read (``objectshape``) - gets HTTP 400 naming the field
(``ExtenderArgs.Pod.spec.containers[0].resources.requests: expected an object, got list``); one
over ``--max-body-bytes`` gets 413; one that does not arrive within ``--body-timeout`` gets 408
and the connection is closed, as is a connection that has not delivered a request's headers
within ``--header-timeout`` of opening or of the previous response (slowloris). Connections past
``--max-connections`` (or past a quarter of it from one client) wait unread for a slot and are
served in turn (``ConnectionGuard``): a burst of requests is answered, not reset. A connection
closed while its body is read or its answer written is one warning line per client per minute,
no traceback. HTTP 500 means a bug of ours, logged with its traceback. Semantic failures come
back in ``Error``; prioritize and preempt, whose answers have no ``Error``, answer a plugin's
Error status with 422. Answers are computed in memory from the informer cache - no API call per
request except bind's GET and POST - so they arrive well within kube-scheduler's default 5 s
``httpTimeout``. ``/healthz``, ``/readyz`` and ``/metrics`` are served on the same port.

This module is the server; the process around it (configuration, informers, signals, exit codes)
is ``pysched.cmd.extender``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from contextlib import contextmanager
from urllib.parse import quote

import numpy as np
import orjson
from aiohttp import ClientPayloadError, web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from pysched.client.rest import ApiError
from pysched.extender.wire import WireError, filter_result, parse_args, parse_binding_args, parse_preemption_args
from pysched.framework.cycle_state import CycleState
from pysched.framework.interface import MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE, NodeBatch
from pysched.framework.nodeinfo import NodeSpec
from pysched.framework.podinfo import PodInfo
from pysched.framework.status import Code, Diagnosis, FrameworkError
from pysched.metrics import METRICS
from pysched.podlocation import BOUND, lookup
from pysched.server.connguard import DEFAULT_MAX_CONNECTIONS, ConnectionGuard
from pysched.server.delegated_auth import (
    Attributes,
    AuthenticationFailed,
    DelegatedAuth,
    unauthorized_response,
    user_from_peercert,
)
from pysched.util.logs import kv

log = logging.getLogger("pysched.extender.server")
DEFAULT_MAX_BODY = 10 * 1024 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
KUBE_SCHEDULER_NAME = "default-scheduler"   # kube-scheduler's default profile
NOT_IN_CACHE = "node not found in the extender's cache"
GUARDED_VERBS = ("bind", "preempt")   # they bind pods or plan evictions: callers must be authorized


class RequestError(Exception):
    """The request itself is unacceptable; ``status`` is the HTTP answer."""
    status = 400


class BadRequest(RequestError):
    status = 400


class PayloadTooLarge(RequestError):
    status = 413


class BodyTimeout(RequestError):
    status = 408


class ClientGone(RequestError):
    """The client closed the connection before its body arrived (nginx's 499, for the metrics)."""
    status = 499


class Busy(RequestError):
    """Too many request bodies are in memory already (``ConnectionGuard.body_budget``)."""
    status = 503


class Unprocessable(RequestError):
    """A well-formed request the framework cannot answer (a plugin's Error status), for verbs whose
    answer has no ``Error`` field (prioritize, preempt)."""
    status = 422


def framework_failure(exc: FrameworkError) -> Exception:
    """What a verb without an ``Error`` field raises for ``exc``: a plugin that raised is our bug
    (HTTP 500, its traceback already logged by the framework); a plugin's Error status is not."""
    if exc.status.error is not None:
        return exc
    log.warning("the framework cannot answer this request", extra=kv(error=str(exc)))
    return Unprocessable(str(exc))


@contextmanager
def parsing(where: str):
    """Turn any failure while parsing a request body into ``WireError`` naming ``where``.

    Parsers check types first, so reaching the fallback means one missed a case: the caller still
    gets a 400 (the body is the only input here), and the traceback is logged for us to fix."""
    try:
        yield
    except (WireError, RequestError):
        raise
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError, RecursionError) as exc:
        log.warning("unexpected failure parsing a request body", exc_info=True, extra=kv(where=where))
        raise WireError(f"{where}: cannot parse: {type(exc).__name__}: {exc}") from None


def _within(where: str, problem: str) -> str:
    """``ExtenderArgs.Pod`` + ``spec.x: bad`` -> ``ExtenderArgs.Pod.spec.x: bad``."""
    if problem.split(".", 1)[0] in ("metadata", "spec", "status"):
        return f"{where}.{problem}"
    return f"{where}: {problem}"


class ExtenderServer:
    def __init__(self, app, profile: str | None = None, *, max_body: int = DEFAULT_MAX_BODY,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, body_timeout: float = DEFAULT_BODY_TIMEOUT,
                 bind_scheduler_names: list[str] | None = None, bind_auth: DelegatedAuth | None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS):
        """``bind_auth``: who may call bind/preempt (None: anyone - --insecure-allow-unauthenticated-bind);
        ``max_connections``: connections served at once (``ConnectionGuard``; more wait for a slot)."""
        self.app = app
        self.bind_auth = bind_auth
        self.profile = profile or app.cfg.profiles[0].scheduler_name
        if self.profile not in app.frameworks:
            raise ValueError(f"--profile {self.profile!r}: no such profile (have {', '.join(app.frameworks)})")
        self.fwk = app.frameworks[self.profile]
        if max_body <= 0 or header_timeout <= 0 or body_timeout <= 0:
            raise ValueError("--max-body-bytes, --header-timeout and --body-timeout must be greater than zero")
        self.max_body = max_body
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        # kube-scheduler calls our bind for pods of its own profiles: by default its default
        # profile's name, and our profile's name (pods that name us directly).
        self.bind_scheduler_names = frozenset(bind_scheduler_names or (KUBE_SCHEDULER_NAME, self.profile))
        self._runner: web.AppRunner | None = None
        self.port = 0
        # Memory under hostile clients: connections x header budget, and request bodies being
        # read at once (two maximal bodies; a single one is always let through).
        # A connection past the caps waits for a slot (unread) for at most the header timeout.
        self.guard = ConnectionGuard("extender", max_connections=max_connections, body_budget=2 * max_body,
                                     queue_timeout=header_timeout, logger=log)

    # -- plumbing ------------------------------------------------------------------------------

    def web_app(self) -> web.Application:
        wa = web.Application(client_max_size=self.max_body * 2, middlewares=[self.guard.middleware])
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
        # aiohttp's keep-alive timer starts when a connection opens and again after each response,
        # and closes the connection if no complete request head has arrived when it fires: that
        # is the header timeout (an idle kept-alive connection goes after the same time, as with
        # Go's http.Server when only ReadHeaderTimeout is set). The body timeout is ours (_body).
        self._runner = web.AppRunner(self.web_app(), access_log=None, keepalive_timeout=self.header_timeout,
                                     **self.guard.runner_kwargs())
        await self._runner.setup()
        self.guard.install(self._runner)
        site = web.TCPSite(self._runner, address, port, ssl_context=ssl_context)
        await site.start()
        server = site._server  # noqa: SLF001
        assert server is not None, "set by site.start()"
        # typeshed's AbstractServer has no `sockets`; asyncio's and uvloop's Server both have it.
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
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
                size = min(self.max_body, request.content_length if request.content_length is not None
                           else self.max_body)
                if not self.guard.take_body(size):
                    raise Busy(f"{self.guard.body_in_use} bytes of request bodies are being handled already "
                               f"(limit {self.guard.body_budget}); try again soon")
                try:
                    body = await self._body(request)
                    if user is not None:
                        assert self.bind_auth is not None, "user is only set by bind_auth"
                        _, refusal = await self.bind_auth.check(request, binding_attributes(verb, body), user=user)
                        if refusal is not None:
                            code = refusal.status
                            return refusal
                    result = fn(body) if not asyncio.iscoroutinefunction(fn) else await fn(body)
                    del body
                finally:
                    self.guard.give_body(size)
                payload = result if isinstance(result, bytes) else orjson.dumps(result)
                return web.Response(body=payload, content_type="application/json")
            except RequestError as exc:
                code = exc.status
                return await self._refuse(request, exc)
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

    async def _refuse(self, request: web.Request, exc: RequestError) -> web.Response:
        resp = web.Response(status=exc.status, text=str(exc))
        if exc.status == 413:
            resp.force_close()   # aiohttp drains the rest for up to its lingering time, then closes
        elif exc.status == 408:
            # A stalled sender gets no lingering: answer, then close at once.
            resp.force_close()
            try:
                await resp.prepare(request)
                await resp.write_eof()
            except ConnectionError:
                pass
            request.protocol.force_close()
        return resp

    async def _body(self, request: web.Request):
        if request.content_length is not None and request.content_length > self.max_body:
            raise PayloadTooLarge(f"request body of {request.content_length} bytes exceeds the limit "
                                  f"of {self.max_body} bytes")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.content.iter_chunked(65536):
                    size += len(chunk)
                    if size > self.max_body:
                        raise PayloadTooLarge(f"request body exceeds the limit of {self.max_body} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            log.warning("request body not received in time; closing the connection",
                        extra=kv(peer=request.remote, received=size, timeout=self.body_timeout))
            raise BodyTimeout(f"request body not received within {self.body_timeout:g}s") from None
        except (ConnectionError, ClientPayloadError) as exc:
            self.guard.closed_under(request, "reading the request body", exc)
            raise ClientGone("client closed the connection") from None
        except RuntimeError as exc:
            # aiohttp's "Connection closed.": the body is read from a connection this server has
            # closed already (shutting down, or a 408 answered). Not a bug of ours: one quiet line.
            if request.transport is not None:
                raise
            self.guard.closed_under(request, "reading the request body", exc)
            raise ClientGone("connection closed") from None
        except web.RequestPayloadError as exc:
            raise BadRequest(f"request body cannot be read: {exc}") from None
        raw = b"".join(chunks)
        if not raw:
            raise BadRequest("request body is empty; expected a JSON object")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from None

    # -- verbs ---------------------------------------------------------------------------------

    def _pod(self, pod_raw: dict, where: str) -> PodInfo:
        with parsing(where):
            pod = PodInfo.from_dict(pod_raw, keep_raw=True)
        if pod.parse_error:
            raise WireError(_within(where, pod.parse_error))
        return pod

    def _parse_args(self, body) -> tuple[PodInfo, list[str], list[dict] | None, list[NodeSpec]]:
        """ExtenderArgs -> (pod, node names, node objects as sent or None, their parsed specs)."""
        with parsing("ExtenderArgs"):
            pod_raw, names, nodes = parse_args(body)
        pod = self._pod(pod_raw, "ExtenderArgs.Pod")
        specs: list[NodeSpec] = []
        if nodes is not None:
            for i, n in enumerate(nodes):
                where = f"ExtenderArgs.Nodes.items[{i}]"
                with parsing(where):
                    spec = NodeSpec.from_dict(n)
                if spec.parse_error:
                    raise WireError(_within(where, spec.parse_error))
                specs.append(spec)
            names = [sp.name for sp in specs]
        assert names is not None, "parse_args requires Nodes or NodeNames"
        return pod, names, nodes, specs

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

    def filter(self, body) -> dict | bytes:
        pod, names, nodes, specs = self._parse_args(body)
        cache = self.app.cache
        with cache.nodes_as_sent(specs):
            known = [n for n in names if n in cache.nodes]
            try:
                passed, failed, _ = self._run_filters(pod, known)
            except FrameworkError as exc:
                return filter_result(names if nodes is None else None, nodes, [], {}, {}, error=str(exc))
        plain = {n: NOT_IN_CACHE for n in names if n not in known}
        unres = {}
        for node, (code, msg) in failed.items():
            if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                unres[node] = msg
            else:
                plain[node] = msg
        result = filter_result(names if nodes is None else None, nodes, passed, plain, unres)
        if nodes is None:
            return result
        try:
            return orjson.dumps(result)
        except orjson.JSONEncodeError:
            # Passing nodes go back as sent; orjson loads 1024 levels but writes only 254.
            for i, n in enumerate(nodes):
                try:
                    orjson.dumps(n)
                except orjson.JSONEncodeError as exc:
                    raise WireError(f"ExtenderArgs.Nodes.items[{i}]: cannot be sent back: {exc}") from None
            raise

    def prioritize(self, body) -> list[dict]:
        pod, names, _, specs = self._parse_args(body)
        fwk = self.fwk
        out = [{"Host": n, "Score": 0} for n in names]
        cache = self.app.cache
        with cache.nodes_as_sent(specs):
            known = [n for n in names if n in cache.nodes]
            if not known or not fwk.has_score_plugins():
                return out
            table = cache.table
            batch = NodeBatch(table, np.array([table.slot_by_name[n] for n in known], dtype=np.int64))
            state = CycleState()
            all_nodes = NodeBatch(table, table.order())
            try:
                fwk.run_pre_filter(state, pod, all_nodes)  # some scorers reuse PreFilter state
                st = fwk.run_pre_score(state, pod, batch)
                if st is not None and not st.is_success():
                    raise FrameworkError(st)
                total = fwk.run_score(state, pod, batch)
            except FrameworkError as exc:
                raise framework_failure(exc) from None
        max_total = MAX_NODE_SCORE * sum(fwk.weights[p.name] for p in fwk.score
                                         if p.name not in state.skip_score_plugins) or 1
        scaled = {n: int(t) * MAX_EXTENDER_PRIORITY // max_total for n, t in zip(known, total.tolist())}
        return [{"Host": n, "Score": min(MAX_EXTENDER_PRIORITY, max(0, scaled.get(n, 0)))} for n in names]

    async def bind(self, body) -> dict:
        with parsing("ExtenderBindingArgs"):
            args = parse_binding_args(body)
        ns, name, uid, node = args["PodNamespace"], args["PodName"], args["PodUID"], args["Node"]
        refusal = await self._bind_refusal(ns, name, uid, node)
        if refusal:
            log.warning("refused to bind", extra=kv(pod=f"{ns}/{name}", node=node, reason=refusal))
            return {"Error": refusal}
        try:
            await self.app.client.bind_pod(ns, name, uid, node)
        except (ApiError, OSError) as exc:
            # The answer may hide a bind that took effect (a timeout, a 409 written while etcd was
            # failing over): kube-scheduler would then forget a pod that is bound. Ask once.
            where = await lookup(self.app.client, ns, name, uid)
            if where.state != BOUND or where.node != node:
                log.warning("bind failed", extra=kv(pod=f"{ns}/{name}", node=node, error=str(exc) or type(exc).__name__,
                                                    found=where.state, found_node=where.node or None))
                return {"Error": getattr(exc, "message", "") or str(exc) or type(exc).__name__}
            log.info("bind reported an error but took effect", extra=kv(pod=f"{ns}/{name}", node=node, error=str(exc)))
        log.info("bound pod", extra=kv(pod=f"{ns}/{name}", node=node))
        return {"Error": ""}

    async def _bind_refusal(self, ns: str, name: str, uid: str, node: str) -> str:
        """Why this binding must not be made ("" if it may): checked before any API write."""
        if node not in self.app.cache.nodes:
            return f"node {node!r} not found in the extender's cache"
        try:
            live = await self.app.client.get(f"/api/v1/namespaces/{quote(ns)}/pods/{quote(name)}")
        except ApiError as exc:
            return exc.message
        meta = live.get("metadata") or {}
        spec = live.get("spec") or {}
        if meta.get("uid") != uid:
            return (f"pod {ns}/{name} has UID {meta.get('uid')!r}, not {uid!r}: "
                    "it was deleted and created again since it was scheduled")
        if spec.get("nodeName"):
            return f"pod {ns}/{name} is already bound to node {spec['nodeName']!r}"
        sched = spec.get("schedulerName") or KUBE_SCHEDULER_NAME
        if sched not in self.bind_scheduler_names:
            return (f"pod {ns}/{name} has schedulerName {sched!r}; this extender binds pods of "
                    f"{', '.join(sorted(self.bind_scheduler_names))} (--bind-scheduler-name)")
        return ""

    def preempt(self, body) -> dict:
        with parsing("ExtenderPreemptionArgs"):
            pod_raw, victims = parse_preemption_args(body)
        pod = self._pod(pod_raw, "ExtenderPreemptionArgs.Pod")
        cache = self.app.cache
        result = {}
        for node, uids in victims.items():
            info = cache.nodes.get(node)
            if info is None or any(uid not in info.pods for uid in uids):
                continue  # unknown node or victims: drop the candidate
            removed = [cache.remove_pod(uid) for uid in uids]
            try:
                passed, _, _ = self._run_filters(pod, [node])
            except FrameworkError as exc:
                raise framework_failure(exc) from None
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
