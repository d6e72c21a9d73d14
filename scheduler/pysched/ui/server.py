"""The ``pysched ui`` web server: the JSON API over a ``Scenario`` and the static page, on loopback.

``make_app(scenario, token=...)`` builds the aiohttp application; ``serve(...)`` runs it.

Security: a request must name this server in its ``Host`` header - ``127.0.0.1:PORT``,
``localhost:PORT``, ``[::1]:PORT``, the address it listens on or the one the connection reached,
or a name given to ``make_app(hosts=...)`` (``--allow-host``) - or it gets a 421 before anything
else is looked at: a page on another site cannot reach the UI by pointing its own name at
127.0.0.1 (DNS rebinding). Then every request needs the session token - ``Authorization: Bearer
<token>`` or the cookie ``pysched_ui`` (HttpOnly, SameSite=Strict) that ``GET /?token=<token>``
sets before redirecting to ``/``; 401 otherwise (JSON for ``/api/*``, a short text page for the
rest). Every response carries ``Cache-Control: no-store``, ``X-Content-Type-Options: nosniff``
and a ``Content-Security-Policy`` allowing only this origin (no inline script or style), plus
``Referrer-Policy: no-referrer`` and ``X-Frame-Options: DENY``. POST and PUT need
``Content-Type: application/json`` (415 otherwise; a DELETE only when it has a body), bodies are
at most ``Limits.max_request_bytes`` (16 MiB by default; 413), and a body that is not JSON, or
YAML in it that does not parse, is a 400 ``{"errors": [{"field", "message"}]}`` - the shape of
every error answer of the API. A change that would make the scenario larger than its ``Limits``
(pods, nodes, bytes) is a 400 naming the limit and the object, and changes nothing.

Changes to the scenario are serialised (one at a time), checked off the event loop where they
are heavy (YAML parsing, validation, node copies) and committed on it; a run or an explain works
on a frozen copy in a worker thread (``asyncio.to_thread``), so the server keeps answering; one
run at a time (409 while one is under way). Memory kept besides the scenario is bounded: the runs
(``runner.RunLog``: ``max_runs``, fewer when large), the explanations (``EXPLAIN_CACHE`` and
``EXPLAIN_CACHE_BYTES``) and the exports of runs (``EXPORTS_KEPT``). Runs and errors are logged
as ``key=value`` fields.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from pysched.ui import runner as runmod
from pysched.ui.limits import Limits
from pysched.ui.scenario import FieldError, Scenario, ScenarioError, ScenarioState, parse_config
from pysched.util import gctune
from pysched.util.logs import kv

log = logging.getLogger("pysched.ui.server")

MAX_BODY = Limits().max_request_bytes     # the default request body limit
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
COOKIE = "pysched_ui"
STATIC_DIR = Path(__file__).with_name("static")
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'"
SECURITY_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP,
                    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
EXPLAIN_CACHE = 32          # explanations kept (run, pod), least recently used dropped
EXPLAIN_CACHE_BYTES = 64 * 1024 * 1024     # ... and while they add up to more than this
EXPORTS_KEPT = 2            # runs' scenario YAML texts kept (GET /api/export?run=)
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                 ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
                 ".png": "image/png", ".ico": "image/x-icon", ".woff2": "font/woff2", ".txt": "text/plain"}
_STATIC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")
UNAUTHORIZED_API = ("unauthorized: send the session token (Authorization: Bearer <token>, or the cookie set by "
                    "/?token=<token>)")
UNAUTHORIZED_PAGE = ("401 Unauthorized\n\nThis is a pysched ui session. Open the address `pysched ui` printed when it "
                     "started (it carries the session token: http://HOST:PORT/?token=...). A link into the page "
                     "(http://HOST:PORT/#/run/3/pod/...) opens once this browser has done so, or at once with its "
                     "#/... appended to the printed address.\n")


class ApiError(Exception):
    """An answer other than 200: ``status`` and the errors, as ``{"errors": [...]}``."""

    def __init__(self, status: int, errors: list[FieldError] | str, fld: str = ""):
        self.status = status
        self.errors = [FieldError(fld, errors)] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(e.message for e in self.errors))


class UIState:
    def __init__(self, scenario: Scenario, token: str, static_dir: Path, hosts: frozenset[str]):
        self.scenario = scenario
        self.token = token
        self.static_dir = static_dir
        self.hosts = hosts                   # Host names served besides loopback and the socket's own address
        self.limits = scenario.limits
        self.runs = runmod.RunLog(self.limits.max_runs, self.limits.max_scenario_bytes)
        self.running = False                 # a run (or a replay step's run) is under way
        self.changing = asyncio.Lock()       # scenario changes, one at a time
        self.replay: runmod.Replay | None = None
        self.explained: OrderedDict[tuple[int, str], bytes] = OrderedDict()
        self.explaining: dict[tuple[int, str], asyncio.Future[bytes]] = {}
        self.exports: OrderedDict[int, str] = OrderedDict()        # run id -> its scenario YAML
        self.session = secrets.token_hex(4)  # names this process's runs in links (ids start at 1 in each)


STATE = web.AppKey("pysched_ui", UIState)


def make_app(scenario: Scenario, *, token: str, static_dir: str | Path | None = None,
             hosts: Iterable[str] = ()) -> web.Application:
    """The application serving ``scenario`` (within ``scenario.limits``); ``token`` is the session
    secret every request needs; ``hosts``: names a ``Host`` header may carry besides the loopback
    ones and the address the connection reached (the port must be the one it reached)."""
    if not token:
        raise ValueError("a session token is required")
    app = web.Application(client_max_size=scenario.limits.max_request_bytes, middlewares=[_errors, _host, _auth])
    app[STATE] = UIState(scenario, token, Path(static_dir) if static_dir is not None else STATIC_DIR,
                         frozenset(_host_name(h) for h in hosts))
    app.on_response_prepare.append(_security_headers)
    r = app.router
    r.add_get("/api/session", get_session)
    r.add_get("/api/scenario", get_scenario)
    r.add_put("/api/config", put_config)
    r.add_post("/api/objects", post_objects)
    r.add_post("/api/nodes/clone", post_clone)
    r.add_delete("/api/nodes/{name}", delete_node)
    r.add_delete("/api/pods/{namespace}/{name}", delete_pod)
    r.add_post("/api/runs", post_run)
    r.add_get("/api/runs", get_runs)
    r.add_get("/api/runs/{id}", get_run)
    r.add_get("/api/runs/{id}/explain", get_explain)
    r.add_get("/api/compare", get_compare)
    r.add_get("/api/export", get_export)
    r.add_post("/api/replay", post_replay)
    r.add_post("/api/replay/step", post_replay_step)
    r.add_get("/api/replay", get_replay)
    r.add_get("/", get_static)
    r.add_get("/{path:.+}", get_static)
    return app


async def serve(scenario: Scenario, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                static_dir: str | Path | None = None, on_ready: Callable[[str], Any] | None = None,
                stop: asyncio.Event | None = None, gc_tuning: bool = True, allow_hosts: Iterable[str] = ()) -> None:
    """Serve ``scenario`` until ``stop`` is set (or the task is cancelled). ``token``: the session
    secret (a random one by default); ``on_ready(url)`` is called with the address that logs a
    browser in (``http://HOST:PORT/?token=...``) once the port is bound (``port=0``: any free one).
    ``gc_tuning``: ``tune_gc()`` first (this process serves the UI and nothing else).
    ``allow_hosts``: more names the ``Host`` header may carry (``host`` itself always may)."""
    token = token or secrets.token_urlsafe(24)
    if gc_tuning:
        tune_gc()
    if host not in ("127.0.0.1", "::1", "localhost"):
        log.warning("serving the what-if UI beyond loopback: anyone who can reach the port and learns the token can "
                    "use it", extra=kv(host=host))
    runner = web.AppRunner(make_app(scenario, token=token, static_dir=static_dir, hosts=(host, *allow_hosts)),
                           access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server  # noqa: SLF001
        assert server is not None, "set by site.start()"
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}/?token={token}"
        log.info("serving the what-if UI", extra=kv(address=f"http://{shown}:{bound}/", nodes=len(scenario.nodes),
                                                    pods=len(scenario.pods)))
        if on_ready is not None:
            on_ready(url)
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()


def tune_gc() -> None:
    """The collector settings of the scheduler process (``util.gctune``), for the same reason: the
    loaded scenario is a large long-lived graph (frozen out of later collections) and each run
    builds a large short-lived one (a larger young generation). At 5,000 nodes and 10,000 pending
    pods a run's CPU time drops from 7.5-9 s to 6 s once a few runs are kept."""
    gctune.configure()
    gctune.freeze()


# -- plumbing ---------------------------------------------------------------------------------

def _is_api(request: web.Request) -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def _json(data: Any, status: int = 200) -> web.Response:
    body = data if isinstance(data, bytes) else orjson.dumps(data)
    return web.Response(body=body, status=status, content_type="application/json")


def _error_response(request: web.Request, status: int, errors: list[FieldError]) -> web.Response:
    if _is_api(request):
        resp = _json({"errors": [e.as_dict() for e in errors]}, status)
    else:
        resp = web.Response(status=status, text="\n".join(e.message for e in errors) + "\n")
    if status == 413:
        resp.force_close()      # the rest of the body is not read
    return resp


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for k, v in SECURITY_HEADERS.items():
        response.headers[k] = v


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    try:
        return await handler(request)
    except ApiError as exc:
        _refused(request, exc.status, exc.errors)
        return _error_response(request, exc.status, exc.errors)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 413:
            message = _too_large(request)
        else:
            message = exc.reason
        errors = [FieldError("", message)]
        _refused(request, exc.status, errors)
        resp = _error_response(request, exc.status, errors)
        for h in ("Allow",):
            if h in exc.headers:
                resp.headers[h] = exc.headers[h]
        return resp
    except Exception as exc:  # noqa: BLE001 - never a traceback to the page
        log.exception("request failed", extra=kv(method=request.method, path=request.path))
        return _error_response(request, 500, [FieldError("", f"internal error: {type(exc).__name__}: {exc}")])


def _refused(request: web.Request, status: int, errors: list[FieldError]) -> None:
    first = errors[0] if errors else FieldError("", "")
    log.info("request refused", extra=kv(method=request.method, path=request.path, status=status,
                                         field=first.field, error=first.message, errors=len(errors)))


def _too_large(request: web.Request, size: int | None = None) -> str:
    limit = request.app[STATE].limits.max_request_bytes
    what = f"request body of {size:,} bytes" if size is not None else "request body too large"
    return f"{what}: the limit is {limit:,} bytes (pysched ui --max-request-bytes)"


def _host_name(host: str) -> str:
    """A host as a ``Host`` header names it, lower case, IPv6 without brackets."""
    return host.strip().lower().removeprefix("[").removesuffix("]")


def _split_host(header: str) -> tuple[str, int | None] | None:
    """``name:port`` / ``[v6]:port`` / ``name`` -> (name, port or None); None when malformed."""
    header = header.strip()
    if header.startswith("["):
        name, sep, rest = header[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, _, port = header.partition(":")
        if ":" in port:
            return None
    if not name:
        return None
    if not port:
        return name.lower(), None
    if not port.isdigit() or len(port) > 5:
        return None
    return name.lower(), int(port)


def _host_problem(request: web.Request) -> str | None:
    """Why the request's ``Host`` is not this server's address (None: it is)."""
    header = request.headers.get("Host")
    transport = request.transport
    sock = transport.get_extra_info("sockname") if transport is not None else None
    if not isinstance(sock, tuple) or len(sock) < 2:
        return None          # not a TCP socket (a Unix socket in tests): nothing to compare with
    local, port = str(sock[0]), int(sock[1])
    parsed = _split_host(header) if header else None
    if parsed is not None:
        name, given_port = parsed
        if (given_port or 80) == port and (name in LOOPBACK_HOSTS or name == _host_name(local)
                                           or name in request.app[STATE].hosts):
            return None
    shown = "no Host header" if not header else f"Host {header[:100] + '...' if len(header) > 100 else header!r}"
    return (f"{shown} is not this server's address: pysched ui answers only requests for 127.0.0.1:{port}, "
            f"localhost:{port} or [::1]:{port} (or the address it listens on, or an --allow-host name); this "
            "guards against DNS rebinding")


@web.middleware
async def _host(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    problem = _host_problem(request)
    if problem is not None:
        errors = [FieldError("Host", problem)]
        _refused(request, 421, errors)
        return _error_response(request, 421, errors)
    return await handler(request)


def _same(given: str, token: str) -> bool:
    try:
        raw = given.encode()
    except UnicodeEncodeError:       # undecodable bytes in a header: not the token
        return False
    return hmac.compare_digest(raw, token.encode())


def _cookie_name(request: web.Request) -> str:
    """Per port: browsers scope cookies by host, not port, and two UIs on one machine must not
    overwrite each other's session."""
    port = request.url.port
    return f"{COOKIE}_{port}" if port else COOKIE


def _authorized(request: web.Request, token: str) -> bool:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer " and _same(auth[7:].strip(), token):
        return True
    cookie = request.cookies.get(_cookie_name(request))
    return cookie is not None and _same(cookie, token)


@web.middleware
async def _auth(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    st = request.app[STATE]
    if request.path == "/" and "token" in request.query and request.method in ("GET", "HEAD"):
        if not _same(request.query["token"], st.token):
            log.info("login refused: wrong token", extra=kv(peer=request.remote))
            return web.Response(status=401, text=UNAUTHORIZED_PAGE)
        resp = web.Response(status=303, headers={"Location": "/"})
        resp.set_cookie(_cookie_name(request), st.token, httponly=True, samesite="Strict", path="/")
        return resp
    if not _authorized(request, st.token):
        if _is_api(request):
            resp = _json({"errors": [{"field": "", "message": UNAUTHORIZED_API}]}, 401)
            resp.headers["WWW-Authenticate"] = 'Bearer realm="pysched ui"'
            return resp
        return web.Response(status=401, text=UNAUTHORIZED_PAGE)
    return await handler(request)


async def _body(request: web.Request) -> dict:
    """The JSON object a POST/PUT/DELETE carries ({} for none)."""
    limit = request.app[STATE].limits.max_request_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, _too_large(request, request.content_length))
    has_body = request.body_exists
    if (request.method in ("POST", "PUT") or has_body) and request.content_type != "application/json":
        raise ApiError(415, f"Content-Type must be application/json, got {request.content_type or 'none'!r}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, _too_large(request)) from None
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"request body: expected a JSON object, got {type(body).__name__}")
    return body


def _string(body: dict, key: str, *, required: bool = True, default: str = "") -> str:
    value = body.get(key)
    if value is None and not required:
        return default
    if not isinstance(value, str):
        raise ApiError(400, "required: a string" if value is None else f"expected a string, got {type(value).__name__}",
                       key)
    return value


def _scenario_error(exc: ScenarioError) -> ApiError:
    return ApiError(400, exc.errors)


def _run_id(request: web.Request, value: str | None, name: str = "id") -> runmod.Run:
    st = request.app[STATE]
    if value is None or value == "":
        raise ApiError(400, "required: a run id", name)
    try:
        rid = int(value)
    except ValueError:
        raise ApiError(400, f"expected a run id (an integer), got {value!r}", name) from None
    r = st.runs.get(rid)
    if r is None:
        raise ApiError(404, f"no run {rid} (the last {st.runs.limit} runs are kept, fewer of a large scenario; "
                            "the oldest go first)", name)
    return r


# -- session ----------------------------------------------------------------------------------

async def get_session(request: web.Request) -> web.Response:
    """This process's session id (run ids count from 1 in every process: a link to a run carries
    the id of the session it was made in) and how many runs it keeps."""
    st = request.app[STATE]
    return _json({"session": st.session, "maxRuns": st.runs.limit})


# -- scenario ---------------------------------------------------------------------------------

async def get_scenario(request: web.Request) -> web.Response:
    return _json(request.app[STATE].scenario.to_json())


async def put_config(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await _body(request)
    text = _string(body, "yaml")
    async with st.changing:
        try:
            await asyncio.to_thread(parse_config, text)
        except ScenarioError as exc:
            raise _scenario_error(exc) from None
        st.scenario.set_config(text, checked=True)
    log.info("configuration changed", extra=kv(version=st.scenario.version))
    return _json({"config": st.scenario.config_yaml, "version": st.scenario.version})


async def post_objects(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await _body(request)
    text = _string(body, "yaml")
    mode = _string(body, "mode", required=False, default="apply")
    if mode not in ("apply", "delete"):
        raise ApiError(400, f"must be apply or delete, got {mode!r}", "mode")
    async with st.changing:
        try:
            stage = await asyncio.to_thread(st.scenario.stage_yaml, text, mode)
        except ScenarioError as exc:
            raise _scenario_error(exc) from None
        actions = st.scenario.commit(stage)
    log.info("objects changed", extra=kv(mode=mode, actions=len(actions), version=st.scenario.version))
    return _json({"applied": actions, "version": st.scenario.version})


async def post_clone(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await _body(request)
    async with st.changing:
        try:
            stage, added = await asyncio.to_thread(st.scenario.stage_clone, body.get("node"), body.get("count"))
        except ScenarioError as exc:
            raise _scenario_error(exc) from None
        st.scenario.commit(stage)
    log.info("nodes cloned", extra=kv(node=body.get("node"), count=len(added), version=st.scenario.version))
    return _json({"added": added, "version": st.scenario.version})


async def delete_node(request: web.Request) -> web.Response:
    st = request.app[STATE]
    await _body(request)
    name = request.match_info["name"]
    async with st.changing:
        if not st.scenario.delete_node(name):
            raise ApiError(404, f"no node named {name!r} in the scenario", "name")
    log.info("node deleted", extra=kv(node=name, version=st.scenario.version))
    return _json({"version": st.scenario.version})


async def delete_pod(request: web.Request) -> web.Response:
    st = request.app[STATE]
    await _body(request)
    key = f"{request.match_info['namespace']}/{request.match_info['name']}"
    async with st.changing:
        if not st.scenario.delete_pod(key):
            raise ApiError(404, f"no pod {key} in the scenario", "pod")
    log.info("pod deleted", extra=kv(pod=key, version=st.scenario.version))
    return _json({"version": st.scenario.version})


# -- runs -------------------------------------------------------------------------------------

async def _run(st: UIState, state: ScenarioState, label: str) -> runmod.Run:
    """Run ``state`` in a worker thread (the caller holds ``st.running``) and keep it."""
    run_id = st.runs.new_id()
    t0 = time.perf_counter()
    try:
        r = await asyncio.to_thread(runmod.run, state, run_id=run_id, label=label)
    except ScenarioError as exc:
        log.info("run failed", extra=kv(run=run_id, version=state.version, error=str(exc)))
        raise _scenario_error(exc) from None
    for dropped in st.runs.add(r):
        st.exports.pop(dropped, None)
        for k in [k for k in st.explained if k[0] == dropped]:
            del st.explained[k]
    log.info("run finished", extra=kv(run=r.id, label=label, version=r.version, pods=len(r.nodes),
                                      placed=r.placed, pending=r.pending, simulation_ms=r.simulation_ms,
                                      duration_ms=r.duration_ms,
                                      wall_ms=round((time.perf_counter() - t0) * 1000)))
    return r


def _busy() -> ApiError:
    return ApiError(409, "a run is under way; try again when it has finished")


async def post_run(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await _body(request)
    label = _string(body, "label", required=False)
    if st.running:
        raise _busy()
    st.running = True
    try:
        r = await _run(st, st.scenario.freeze(), label)
    finally:
        st.running = False
    return _json(r.payload)


async def get_runs(request: web.Request) -> web.Response:
    return _json(request.app[STATE].runs.summaries())


async def get_run(request: web.Request) -> web.Response:
    return _json(_run_id(request, request.match_info["id"]).payload)


async def get_explain(request: web.Request) -> web.Response:
    st = request.app[STATE]
    r = _run_id(request, request.match_info["id"])
    pod = request.query.get("pod", "")
    if "/" not in pod:
        raise ApiError(400, "required: a pod namespace/name", "pod")
    if pod not in r.nodes:
        raise ApiError(404, f"run {r.id} did not schedule pod {pod}", "pod")
    key = (r.id, pod)
    cached = st.explained.get(key)
    if cached is not None:
        st.explained.move_to_end(key)
        return _json(cached)
    task = st.explaining.get(key)
    if task is None:      # one computation per (run, pod), however many ask meanwhile
        task = st.explaining[key] = asyncio.create_task(_explain(st, r, pod))
        task.add_done_callback(lambda _t: st.explaining.pop(key, None))
    return _json(await asyncio.shield(task))


async def _explain(st: UIState, r: runmod.Run, pod: str) -> bytes:
    t0 = time.perf_counter()
    try:
        view = await asyncio.to_thread(runmod.explain, r, pod)
    except ScenarioError as exc:
        raise _scenario_error(exc) from None
    payload = await asyncio.to_thread(orjson.dumps, view)
    if r.id in st.runs.runs:
        st.explained[(r.id, pod)] = payload
        total = sum(len(v) for v in st.explained.values())
        while st.explained and (len(st.explained) > EXPLAIN_CACHE or total > EXPLAIN_CACHE_BYTES):
            total -= len(st.explained.popitem(last=False)[1])
    log.info("pod explained", extra=kv(run=r.id, pod=pod, nodes=len(view["nodes"]), bytes=len(payload),
                                       duration_ms=round((time.perf_counter() - t0) * 1000)))
    return payload


async def get_compare(request: web.Request) -> web.Response:
    a = _run_id(request, request.query.get("a"), "a")
    b = _run_id(request, request.query.get("b"), "b")
    return _json(runmod.compare(a, b))


async def get_export(request: web.Request) -> web.Response:
    st = request.app[STATE]
    which = request.query.get("download")
    if which not in (None, "scenario", "config"):
        raise ApiError(400, f"must be scenario or config, got {which!r}", "download")
    if "run" in request.query:
        r = _run_id(request, request.query["run"], "run")
        config = r.state.config_yaml
        text = st.exports.get(r.id)
        if text is None and which != "config":
            text = st.exports[r.id] = await asyncio.to_thread(r.state.export_yaml)
            while len(st.exports) > EXPORTS_KEPT:
                st.exports.popitem(last=False)
        elif text is not None:
            st.exports.move_to_end(r.id)
        name = f"run-{r.id}"
    else:
        sc = st.scenario
        config = sc.config_yaml
        text = None
        if which != "config":
            text = await asyncio.to_thread(sc.export_yaml, sc.freeze())
        name = "scenario"
    if which is None:
        return _json({"scenario": text, "config": config})
    filename = f"{name}.yaml" if which == "scenario" else f"{name}-config.yaml"
    return web.Response(text=text if which == "scenario" else config, content_type="application/yaml",
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})


# -- replay -----------------------------------------------------------------------------------

async def post_replay(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await _body(request)
    text = _string(body, "yaml")
    try:
        replay = await asyncio.to_thread(runmod.Replay.parse, text)
    except ScenarioError as exc:
        raise _scenario_error(exc) from None
    st.replay = replay
    log.info("replay loaded", extra=kv(steps=len(replay.steps)))
    return _json(replay.status())


async def get_replay(request: web.Request) -> web.Response:
    replay = request.app[STATE].replay
    return _json(replay.status() if replay is not None else {"total": 0, "current": 0, "steps": []})


async def post_replay_step(request: web.Request) -> web.Response:
    st = request.app[STATE]
    await _body(request)
    replay = st.replay
    if replay is None:
        raise ApiError(409, "no replay loaded (POST /api/replay first)")
    if replay.current >= len(replay.steps):
        raise ApiError(409, f"the replay is over: all {len(replay.steps)} steps were applied")
    if st.running:
        raise _busy()
    st.running = True
    try:
        async with st.changing:
            try:
                step = replay.apply_next(st.scenario)
            except ScenarioError as exc:
                raise _scenario_error(exc) from None
            state = st.scenario.freeze()
        log.info("replay step applied", extra=kv(step=replay.current, total=len(replay.steps), at=step.at,
                                                 description=step.description, version=state.version))
        try:
            r = await _run(st, state, f"replay {replay.current}/{len(replay.steps)} at {step.at}: "
                                      f"{step.description}")
        except ApiError as exc:
            # The step was applied (the scenario changed): say so, with why its run failed.
            return _json({"current": replay.current, "total": len(replay.steps), "run": None,
                          "errors": [{"field": "", "message": str(exc)}]})
    finally:
        st.running = False
    head = orjson.dumps({"current": replay.current, "total": len(replay.steps)})
    return _json(head[:-1] + b',"run":' + r.payload + b"}")


# -- the page ---------------------------------------------------------------------------------

async def get_static(request: web.Request) -> web.StreamResponse:
    st = request.app[STATE]
    name = request.match_info.get("path") or "index.html"
    if _is_api(request):
        raise ApiError(404, f"no such API path: {request.path}")
    if name.startswith("static/"):
        name = name[len("static/"):]
    if not _STATIC_NAME.fullmatch(name) or ".." in name.split("/"):
        raise ApiError(404, "not found")
    root = st.static_dir.resolve()
    path = (root / name).resolve()
    if root not in path.parents or not path.is_file():
        if name == "index.html":
            raise ApiError(404, f"the page is not installed ({path} is missing)")
        raise ApiError(404, "not found")
    ctype = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
    return web.FileResponse(path, headers={"Content-Type": ctype + ("; charset=utf-8" if ctype.startswith("text/")
                                                                     else "")})
