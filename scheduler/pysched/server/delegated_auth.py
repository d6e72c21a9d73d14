"""Delegated authentication and authorization of our HTTPS endpoints, as kube-scheduler does it.

A re-implementation, over our own ``KubeClient``, of k8s.io/apiserver's delegating authenticator
and authorizer (``DelegatingAuthenticationOptions`` / ``DelegatingAuthorizationOptions`` as
kube-scheduler configures them):

Authentication - the first method that succeeds names the user:

* an x509 client certificate that verifies against the client CA (``--client-ca-file``, else the
  ``client-ca-file`` key of ConfigMap ``kube-system/extension-apiserver-authentication``): the
  certificate's CN is the user, its O values the groups. The TLS server requests a certificate but
  does not require one; one that does not verify fails the TLS handshake (OpenSSL verifies during
  the handshake, where Go's server defers it to the authenticator and answers 401);
* ``Authorization: Bearer <token>``, verified by an ``authentication.k8s.io/v1`` TokenReview.
  Answers are cached for ``--authentication-token-webhook-cache-ttl`` (10 s): authenticated and
  plain "not authenticated" answers alike; a review that fails, or that the API server rejects
  with an error (what it does for an unknown token), is not cached - upstream's ``cacheErrs=false``;
* no credentials at all: ``system:anonymous`` in group ``system:unauthenticated``, which only the
  always-allowed paths (or an RBAC grant to that user) let through.

A token that does not authenticate gets 401 with the API's ``Unauthorized`` Status - on every path,
the always-allowed ones included, as upstream authenticates before it authorizes. Authenticated
users (not anonymous) get group ``system:authenticated`` added.

Authorization - the first authorizer that allows wins:

* group ``system:masters`` (upstream's ``AlwaysAllowGroups``);
* ``--authorization-always-allow-paths`` (default ``/healthz,/readyz,/livez``; a trailing ``*``
  matches a prefix) for non-resource requests;
* an ``authorization.k8s.io/v1`` SubjectAccessReview: non-resource (path + lowercase HTTP verb)
  for the secure port, or resource attributes (the extender's ``create pods/binding``). Allowed
  answers are cached for ``--authorization-webhook-cache-authorized-ttl`` and denials for
  ``--authorization-webhook-cache-unauthorized-ttl`` (10 s each); failures are not cached.

Denied: 403 with ``forbidden: User "x" cannot get path "/metrics"``; a review that could not be made
at all: 500. Reviews that fail transiently (connection errors, 429, 5xx) are retried with
upstream's webhook backoff (0.5 s x 1.5, 5 attempts) within a 10 s budget.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pysched.client.auth import Credentials, CredentialsError, load
from pysched.client.rest import ApiError, KubeClient
from pysched.util.logs import kv

if TYPE_CHECKING:   # aiohttp is imported when the server starts, after the first bind (start-up CPU)
    from aiohttp import web

log = logging.getLogger("pysched.server.delegated_auth")

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
PRIVILEGED_GROUPS = ("system:masters",)
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_CACHE_TTL = 10.0
AUTH_CONFIGMAP_NAMESPACE = "kube-system"
AUTH_CONFIGMAP_NAME = "extension-apiserver-authentication"
TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECTACCESSREVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
REVIEW_TIMEOUT = 10.0            # TokenRequestTimeout / authorization ClientTimeout
RETRY_BACKOFF = (0.5, 1.5, 0.2, 5)  # duration, factor, jitter, steps: DefaultAuthWebhookRetryBackoff
RETRYABLE_STATUS = frozenset({0, 429, 500, 503, 504})


class AuthenticationFailed(Exception):
    """The request carried credentials that do not authenticate (HTTP 401)."""


class ReviewError(Exception):
    """A TokenReview or SubjectAccessReview could not be made."""


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS_USER


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


def with_authenticated_group(user: UserInfo) -> UserInfo:
    """Upstream's AuthenticatedGroupAdder: every authenticated user is in system:authenticated."""
    if user.anonymous or AUTHENTICATED_GROUP in user.groups or UNAUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP), user.extra)


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do: a non-resource ``verb`` on ``path``, or a resource verb."""
    verb: str
    path: str = ""
    resource: str = ""
    subresource: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)

    @classmethod
    def non_resource(cls, method: str, path: str) -> Attributes:
        return cls(verb=method.lower(), path=path)


# -- pure helpers --------------------------------------------------------------------------------

def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, parsed as upstream's bearertoken.

    None when there is no header, it is another scheme, or the token is empty (``Bearer  x`` with
    two spaces has an empty token and is ignored, as upstream does).
    """
    auth = (header or "").strip()
    if not auth:
        return None
    parts = auth.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    return parts[1] or None


def user_from_peercert(peercert: dict | None) -> UserInfo | None:
    """User of a verified client certificate (``ssl.getpeercert()`` form): CN the name, O the groups."""
    if not peercert:
        return None
    cn, orgs = "", []
    for rdn in peercert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName" and not cn:
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    if not cn:
        return None
    return UserInfo(cn, groups=tuple(orgs))


class PathMatcher:
    """``--authorization-always-allow-paths``: exact paths, or prefixes ending in ``*``; the leading
    ``/`` is optional; ``*`` anywhere but last is an error (upstream's path authorizer)."""

    def __init__(self, paths: list[str] | tuple[str, ...]):
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for p in paths:
            p = p.strip()
            p = p[1:] if p.startswith("/") else p
            if p and "*" in p[:-1]:
                raise ValueError(f"--authorization-always-allow-paths: only trailing * allowed in {p!r}")
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def matches(self, path: str) -> bool:
        p = path[1:] if path.startswith("/") else path
        return p in self.exact or any(p.startswith(pre) for pre in self.prefixes)


class ExpiringCache:
    """A bounded map whose entries expire ``ttl`` seconds after they were set (oldest out first)."""

    def __init__(self, max_entries: int = 10000, clock: Callable[[], float] = time.monotonic):
        self.max_entries = max_entries
        self.clock = clock
        self._data: dict[Any, tuple[float, Any]] = {}

    def get(self, key) -> tuple[bool, Any]:
        hit = self._data.get(key)
        if hit is None:
            return False, None
        expires, value = hit
        if self.clock() >= expires:
            del self._data[key]
            return False, None
        return True, value

    def set(self, key, value, ttl: float) -> None:
        if ttl <= 0:
            return
        self._data.pop(key, None)
        while len(self._data) >= self.max_entries:
            del self._data[next(iter(self._data))]
        self._data[key] = (self.clock() + ttl, value)

    def __len__(self) -> int:
        return len(self._data)


def backoff_delays(duration: float, factor: float, jitter: float, steps: int,
                   rnd: Callable[[], float] = random.random) -> list[float]:
    """Sleeps between the ``steps`` attempts of client-go's ``wait.Backoff`` (jittered)."""
    out, d = [], duration
    for _ in range(steps - 1):
        out.append(d + (d * jitter * rnd() if jitter > 0 else 0.0))
        d *= factor
    return out


def forbidden_message(user: UserInfo, attrs: Attributes, reason: str = "") -> str:
    """Upstream's ``forbiddenMessage`` wrapped as ``NewForbidden`` words it."""
    if not attrs.resource_request:
        msg = f"User {json.dumps(user.name)} cannot {attrs.verb} path {json.dumps(attrs.path)}"
    else:
        res = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = (f"in the namespace {json.dumps(attrs.namespace)}" if attrs.namespace else "at the cluster scope")
        msg = (f"User {json.dumps(user.name)} cannot {attrs.verb} resource {json.dumps(res)} "
               f"in API group {json.dumps(attrs.group)} {where}")
    if reason:
        msg = f"{msg}: {reason}"
    if not attrs.resource_request:
        return f"forbidden: {msg}"
    gr = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    return f"{gr} {json.dumps(attrs.name)} is forbidden: {msg}" if attrs.name else f"{gr} is forbidden: {msg}"


def _status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    from aiohttp import web
    return web.Response(status=code, body=json.dumps(body, separators=(",", ":")).encode() + b"\n",
                        headers={"Content-Type": "application/json"})


def unauthorized_response() -> web.Response:
    return _status(401, "Unauthorized", "Unauthorized")


def forbidden_response(user: UserInfo, attrs: Attributes, reason: str = "") -> web.Response:
    details = {}
    if attrs.resource_request:
        details = {k: v for k, v in (("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource)) if v}
    return _status(403, "Forbidden", forbidden_message(user, attrs, reason), details)


def internal_error_response(request_uri: str, err: Exception) -> web.Response:
    from aiohttp import web
    return web.Response(status=500, text=f"Internal Server Error: {json.dumps(request_uri)}: {err}")


# -- the reviews ---------------------------------------------------------------------------------

async def create_review(client: KubeClient, path: str, body: dict, *, timeout: float = REVIEW_TIMEOUT,
                        backoff: tuple = RETRY_BACKOFF, sleep=asyncio.sleep) -> dict:
    """POST a review, retrying transient failures with upstream's webhook backoff; ReviewError else."""
    deadline = time.monotonic() + timeout
    delays = backoff_delays(*backoff)
    attempt = 0
    while True:
        left = deadline - time.monotonic()
        try:
            return await client.request("POST", path, body=body, timeout=max(0.1, left))
        except ApiError as exc:
            err: Exception = exc
            retry = exc.status in RETRYABLE_STATUS
        except (TimeoutError, OSError) as exc:
            err, retry = exc, True
        if not retry or attempt >= len(delays) or time.monotonic() + delays[attempt] >= deadline:
            raise ReviewError(f"{path.rsplit('/', 1)[-1]}: {err}") from None
        await sleep(delays[attempt])
        attempt += 1


class TokenReviewer:
    """Bearer tokens checked by TokenReview, answers cached as upstream's delegating authenticator."""

    def __init__(self, client: KubeClient, *, cache_ttl: float = DEFAULT_CACHE_TTL,
                 clock: Callable[[], float] = time.monotonic, review=create_review):
        self.client = client
        self.success_ttl = self.failure_ttl = cache_ttl
        self.cache = ExpiringCache(clock=clock)
        self._inflight: dict[str, asyncio.Future] = {}
        self._review = review
        self.reviews = 0   # TokenReviews made (the cache's effect is visible in tests)

    async def authenticate(self, token: str) -> UserInfo:
        """The token's user; AuthenticationFailed when the API server does not accept it."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, user = self.cache.get(key)
        if not hit:
            fut = self._inflight.get(key)
            if fut is None:  # one review per token at a time (upstream's singleflight)
                fut = self._inflight[key] = asyncio.ensure_future(self._lookup(key, token))
                fut.add_done_callback(lambda _f: self._inflight.pop(key, None))
            user = await asyncio.shield(fut)
        if user is None:
            raise AuthenticationFailed("invalid bearer token")
        return user

    async def _lookup(self, key: str, token: str) -> UserInfo | None:
        self.reviews += 1
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            got = await self._review(self.client, TOKENREVIEWS, body)
        except ReviewError as exc:
            log.error("token review failed", extra=kv(error=str(exc)))
            raise AuthenticationFailed(str(exc)) from None
        status = (got or {}).get("status") or {}
        if not status.get("authenticated"):
            if status.get("error"):
                raise AuthenticationFailed(str(status["error"]))   # not cached (cacheErrs=false)
            self.cache.set(key, None, self.failure_ttl)
            return None
        u = status.get("user") or {}
        extra = tuple(sorted((k, tuple(v or ())) for k, v in (u.get("extra") or {}).items()))
        user = UserInfo(u.get("username") or "", u.get("uid") or "", tuple(u.get("groups") or ()), extra)
        self.cache.set(key, user, self.success_ttl)
        return user


class SubjectAccessReviewer:
    """SubjectAccessReviews with upstream's allow/deny caches, keyed by the review's spec."""

    def __init__(self, client: KubeClient, *, allow_ttl: float = DEFAULT_CACHE_TTL,
                 deny_ttl: float = DEFAULT_CACHE_TTL, clock: Callable[[], float] = time.monotonic,
                 review=create_review):
        self.client = client
        self.allow_ttl, self.deny_ttl = allow_ttl, deny_ttl
        self.cache = ExpiringCache(clock=clock)
        self._review = review
        self.reviews = 0

    @staticmethod
    def spec(user: UserInfo, attrs: Attributes) -> dict:
        spec: dict = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if attrs.resource_request:
            ra = {"verb": attrs.verb, "group": attrs.group, "version": attrs.version, "resource": attrs.resource,
                  "subresource": attrs.subresource, "namespace": attrs.namespace, "name": attrs.name}
            spec["resourceAttributes"] = {k: v for k, v in ra.items() if v}
        else:
            spec["nonResourceAttributes"] = {"path": attrs.path, "verb": attrs.verb}
        return spec

    async def review(self, user: UserInfo, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason); ReviewError when no answer could be had."""
        spec = self.spec(user, attrs)
        key = json.dumps(spec, sort_keys=True)
        hit, status = self.cache.get(key)
        if not hit:
            self.reviews += 1
            got = await self._review(self.client, SUBJECTACCESSREVIEWS,
                                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                      "spec": spec})
            status = (got or {}).get("status") or {}
            self.cache.set(key, status, self.allow_ttl if status.get("allowed") else self.deny_ttl)
        if status.get("allowed") and status.get("denied"):
            raise ReviewError("webhook subject access review returned both allow and deny response")
        return bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or "")


# -- options and the whole -----------------------------------------------------------------------

@dataclass
class AuthOptions:
    """The ``--authentication-*`` / ``--authorization-*`` flags (kube-scheduler's names)."""
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    always_allow_paths: list[str] = field(default_factory=lambda: list(DEFAULT_ALWAYS_ALLOW_PATHS))
    client_ca_file: str | None = None
    skip_lookup: bool = False
    tolerate_lookup_failure: bool = True      # kube-scheduler sets this
    token_cache_ttl: float = DEFAULT_CACHE_TTL
    authorized_ttl: float = DEFAULT_CACHE_TTL
    unauthorized_ttl: float = DEFAULT_CACHE_TTL
    insecure_disable: bool = False            # lab only: --insecure-disable-auth

    def validate(self) -> None:
        """Fail before any API call: ValueError naming the flag, CredentialsError for a kubeconfig."""
        PathMatcher(self.always_allow_paths)
        for flag, ttl in (("--authentication-token-webhook-cache-ttl", self.token_cache_ttl),
                          ("--authorization-webhook-cache-authorized-ttl", self.authorized_ttl),
                          ("--authorization-webhook-cache-unauthorized-ttl", self.unauthorized_ttl)):
            if ttl < 0:
                raise ValueError(f"{flag}: must not be negative, got {ttl}s")
        if self.client_ca_file:
            try:
                ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"--client-ca-file {self.client_ca_file}: {exc}") from None
        for flag, path in (("--authentication-kubeconfig", self.authentication_kubeconfig),
                           ("--authorization-kubeconfig", self.authorization_kubeconfig)):
            if path:
                try:
                    load(path)
                except CredentialsError as exc:
                    raise ValueError(f"{flag}: {exc}") from None


class DelegatedAuth:
    """Authenticates and authorizes requests; ``middleware()`` guards an aiohttp application."""

    def __init__(self, tokens: TokenReviewer, access: SubjectAccessReviewer, *,
                 always_allow_paths: list[str] | tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS,
                 client_ca_pem: str | None = None, clients: list[KubeClient] | None = None):
        self.tokens = tokens
        self.access = access
        self.always_allow = PathMatcher(always_allow_paths)
        self.client_ca_pem = client_ca_pem
        self._clients = clients or []

    async def close(self) -> None:
        for c in self._clients:
            await c.close()

    async def authenticate(self, request: web.Request) -> UserInfo:
        """The requester; ANONYMOUS without credentials; AuthenticationFailed for bad ones."""
        transport = request.transport
        cert_user = user_from_peercert(transport.get_extra_info("peercert")) if transport is not None else None
        if cert_user is not None:
            return with_authenticated_group(cert_user)
        token = bearer_token(request.headers.get("Authorization"))
        if token is None:
            return ANONYMOUS
        return with_authenticated_group(await self.tokens.authenticate(token))

    async def authorize(self, user: UserInfo, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): privileged groups, then always-allowed paths, then a SubjectAccessReview."""
        if any(g in PRIVILEGED_GROUPS for g in user.groups):
            return True, ""
        if not attrs.resource_request and self.always_allow.matches(attrs.path):
            return True, ""
        return await self.access.review(user, attrs)

    async def check(self, request: web.Request, attrs: Attributes | None = None,
                    user: UserInfo | None = None) -> tuple[UserInfo | None, web.Response | None]:
        """(user, None) when the request may proceed, else (user, the 401/403/500 answer)."""
        attrs = attrs or Attributes.non_resource(request.method, request.path)
        if user is None:
            try:
                user = await self.authenticate(request)
            except AuthenticationFailed as exc:
                log.info("unauthenticated request", extra=kv(path=request.path, remote=request.remote, error=str(exc)))
                return None, unauthorized_response()
        try:
            allowed, reason = await self.authorize(user, attrs)
        except ReviewError as exc:
            log.error("authorization failed", extra=kv(path=request.path, user=user.name, error=str(exc)))
            return user, internal_error_response(request.path_qs, exc)
        if not allowed:
            log.info("forbidden request", extra=kv(path=request.path, user=user.name, verb=attrs.verb))
            return user, forbidden_response(user, attrs, reason)
        return user, None

    def middleware(self):
        from aiohttp import web

        @web.middleware
        async def delegated_auth(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
            _, refusal = await self.check(request)
            return refusal if refusal is not None else await handler(request)
        return delegated_auth


async def read_client_ca_configmap(client: KubeClient) -> str | None:
    """``client-ca-file`` of ConfigMap kube-system/extension-apiserver-authentication (None if absent)."""
    cm = await client.get(f"/api/v1/namespaces/{AUTH_CONFIGMAP_NAMESPACE}/configmaps/{AUTH_CONFIGMAP_NAME}")
    return ((cm or {}).get("data") or {}).get("client-ca-file") or None


async def build(options: AuthOptions, default_creds: Credentials) -> DelegatedAuth | None:
    """The configured authenticator/authorizer, or None with ``--insecure-disable-auth`` (warned).

    Raises ValueError for bad options and ReviewError when the client CA lookup fails and
    ``--authentication-tolerate-lookup-failure=false``.
    """
    if options.insecure_disable:
        log.warning("--insecure-disable-auth: authentication and authorization are OFF; anyone who can reach "
                    "the secure port can read /metrics, /configz and /debug/explain (lab use only)")
        return None
    options.validate()
    authn_creds = load(options.authentication_kubeconfig) if options.authentication_kubeconfig else default_creds
    authz_creds = load(options.authorization_kubeconfig) if options.authorization_kubeconfig else default_creds
    # Upstream sets QPS 200 / burst 400 on these clients: they limit how fast we can answer.
    authn = KubeClient(authn_creds, qps=200, burst=400, max_connections=8, timeout=REVIEW_TIMEOUT)
    authz = authn if authz_creds is authn_creds else KubeClient(authz_creds, qps=200, burst=400, max_connections=8,
                                                                 timeout=REVIEW_TIMEOUT)
    clients = [authn] if authz is authn else [authn, authz]
    ca_pem, source = None, ""
    if options.client_ca_file:
        with open(options.client_ca_file) as f:
            ca_pem, source = f.read(), options.client_ca_file
    elif not options.skip_lookup:
        where = f"configmap/{AUTH_CONFIGMAP_NAME} in {AUTH_CONFIGMAP_NAMESPACE}"
        try:
            ca_pem = await read_client_ca_configmap(authn)
            source = where if ca_pem else ""
        except asyncio.CancelledError:
            for c in clients:   # stopped during start-up
                await c.close()
            raise
        except (TimeoutError, ApiError, OSError) as exc:
            if not options.tolerate_lookup_failure:
                for c in clients:
                    await c.close()
                raise ReviewError(f"looking up the client CA in {where}: {exc}") from None
            log.warning("cannot look up the client CA; client certificate authentication is off (bearer tokens "
                        "still work). To make this fatal, set --authentication-tolerate-lookup-failure=false",
                        extra=kv(configmap=f"{AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}", error=str(exc)))
    log.info("delegated authentication and authorization", extra=kv(
        client_ca=source or "none", authentication_server=authn_creds.server, authorization_server=authz_creds.server,
        always_allow_paths=",".join(options.always_allow_paths)))
    return DelegatedAuth(TokenReviewer(authn, cache_ttl=options.token_cache_ttl),
                         SubjectAccessReviewer(authz, allow_ttl=options.authorized_ttl,
                                               deny_ttl=options.unauthorized_ttl),
                         always_allow_paths=options.always_allow_paths, client_ca_pem=ca_pem, clients=clients)
