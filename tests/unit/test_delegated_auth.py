"""Pure logic of delegated auth: header parsing, path matching, cache TTLs, retries, messages, flags.

The reviews themselves (TokenReview, SubjectAccessReview against a real API server) are exercised
in tests/e2e/test_delegated_auth.py; here a review is a function returning canned answers so the
caching rules can be driven by a fake clock.
"""

import asyncio

import pytest

from pysched import cli
from pysched.client.rest import ApiError
from pysched.server.delegated_auth import (
    ANONYMOUS,
    Attributes,
    AuthenticationFailed,
    ExpiringCache,
    PathMatcher,
    ReviewError,
    SubjectAccessReviewer,
    TokenReviewer,
    UserInfo,
    backoff_delays,
    bearer_token,
    create_review,
    forbidden_message,
    user_from_peercert,
    with_authenticated_group,
)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.mark.parametrize("header,token", [
    (None, None), ("", None), ("   ", None),
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("  Bearer abc  ", "abc"),
    ("Bearer abc extra", "abc"),          # SplitN(.., 3): the token is the second field
    ("Bearer  abc", None),                # two spaces: an empty token, ignored as upstream does
    ("Basic dXNlcjpwYXNz", None), ("Bearer", None), ("Bearerabc", None),
])
def test_bearer_token_parsing(header, token):
    assert bearer_token(header) == token


def test_always_allow_paths_exact_prefix_and_optional_slash():
    m = PathMatcher(["/healthz", "readyz", "/debug/*", "/"])
    assert m.matches("/healthz") and m.matches("healthz") and m.matches("/readyz")
    assert m.matches("/debug/explain") and m.matches("/debug/")
    assert m.matches("/")
    assert not m.matches("/healthz/extra") and not m.matches("/metrics") and not m.matches("/debug")
    assert not PathMatcher([]).matches("/healthz")
    with pytest.raises(ValueError, match=r"only trailing \* allowed in 'a\*b'"):
        PathMatcher(["/a*b"])


def test_expiring_cache_ttl_and_bound():
    clock = Clock()
    c = ExpiringCache(max_entries=2, clock=clock)
    c.set("a", 1, 10)
    clock.now += 9.9
    assert c.get("a") == (True, 1)
    clock.now += 0.1
    assert c.get("a") == (False, None)
    c.set("zero", 1, 0)
    assert c.get("zero") == (False, None)             # TTL 0 disables caching, as upstream
    c.set("x", 1, 10)
    c.set("y", 2, 10)
    c.set("z", 3, 10)                                 # oldest out
    assert c.get("x") == (False, None) and c.get("z") == (True, 3) and len(c) == 2


def token_review_answers(answers: dict):
    """A review function answering TokenReviews from ``answers``: token -> status dict or an exception."""
    calls = []

    async def review(client, path, body):
        token = body["spec"]["token"]
        calls.append(token)
        got = answers[token]
        if isinstance(got, Exception):
            raise got
        return {"status": got}
    return review, calls


async def test_token_reviews_are_cached_as_upstream():
    clock = Clock()
    review, calls = token_review_answers({
        "good": {"authenticated": True, "user": {"username": "alice", "uid": "u1", "groups": ["g"],
                                                  "extra": {"k": ["v"]}}},
        "unknown": {"authenticated": False},
        "bad": {"authenticated": False, "error": "invalid bearer token"},
        "down": ReviewError("tokenreviews: connection refused"),
    })
    t = TokenReviewer(None, cache_ttl=10, clock=clock, review=review)
    user = await t.authenticate("good")
    assert user == UserInfo("alice", "u1", ("g",), (("k", ("v",)),))
    await t.authenticate("good")
    assert calls == ["good"]                              # cached
    clock.now += 10
    await t.authenticate("good")
    assert calls == ["good", "good"]                      # expired after the TTL

    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            await t.authenticate("unknown")
    assert calls.count("unknown") == 1                    # a plain "not authenticated" is cached too
    for _ in range(2):
        with pytest.raises(AuthenticationFailed, match="invalid bearer token"):
            await t.authenticate("bad")
    assert calls.count("bad") == 2                        # an answer with an error is not (cacheErrs=false)
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            await t.authenticate("down")
    assert calls.count("down") == 2                       # nor is a failed review


async def test_concurrent_reviews_of_one_token_share_one_call():
    gate = asyncio.Event()
    calls = []

    async def review(client, path, body):
        calls.append(1)
        await gate.wait()
        return {"status": {"authenticated": True, "user": {"username": "bob"}}}

    t = TokenReviewer(None, review=review)
    waiting = [asyncio.create_task(t.authenticate("tok")) for _ in range(5)]
    await asyncio.sleep(0)
    gate.set()
    users = await asyncio.gather(*waiting)
    assert len(calls) == 1 and {u.name for u in users} == {"bob"}


async def test_subject_access_reviews_cache_allow_and_deny_separately():
    clock = Clock()
    verdict = {"/metrics": {"allowed": True}, "/configz": {"allowed": False, "reason": "no rule"}}
    specs = []

    async def review(client, path, body):
        specs.append(body["spec"])
        return {"status": verdict[body["spec"]["nonResourceAttributes"]["path"]]}

    r = SubjectAccessReviewer(None, allow_ttl=30, deny_ttl=5, clock=clock, review=review)
    alice = UserInfo("alice", "u1", ("g", "system:authenticated"))
    assert await r.review(alice, Attributes.non_resource("GET", "/metrics")) == (True, "")
    assert await r.review(alice, Attributes.non_resource("GET", "/configz")) == (False, "no rule")
    assert specs[0] == {"user": "alice", "uid": "u1", "groups": ["g", "system:authenticated"],
                        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    clock.now += 5
    await r.review(alice, Attributes.non_resource("GET", "/metrics"))
    await r.review(alice, Attributes.non_resource("GET", "/configz"))
    assert len(specs) == 3                                # the denial expired, the allowance did not
    await r.review(UserInfo("bob"), Attributes.non_resource("GET", "/metrics"))
    assert len(specs) == 4                                # another user: another review
    verdict["/both"] = {"allowed": True, "denied": True}
    with pytest.raises(ReviewError, match="both allow and deny"):
        await r.review(alice, Attributes.non_resource("GET", "/both"))


def test_resource_attributes_in_the_review_spec():
    attrs = Attributes(verb="create", version="v1", resource="pods", subresource="binding", namespace="ns", name="p")
    spec = SubjectAccessReviewer.spec(UserInfo("x", groups=("g",)), attrs)
    assert spec == {"user": "x", "groups": ["g"], "resourceAttributes": {
        "verb": "create", "version": "v1", "resource": "pods", "subresource": "binding", "namespace": "ns",
        "name": "p"}}


class FlakyClient:
    def __init__(self, failures):
        self.failures = list(failures)
        self.calls = 0

    async def request(self, method, path, body=None, timeout=None):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"status": {"allowed": True}}


async def test_reviews_retry_transient_failures_only():
    slept = []

    async def sleep(d):
        slept.append(d)

    c = FlakyClient([ApiError(500, "InternalError"), ConnectionResetError("reset"), ApiError(429, "TooManyRequests")])
    assert await create_review(c, "/x/subjectaccessreviews", {}, sleep=sleep) == {"status": {"allowed": True}}
    assert c.calls == 4 and len(slept) == 3
    c = FlakyClient([ApiError(403, "Forbidden", "cannot create subjectaccessreviews")])
    with pytest.raises(ReviewError, match="subjectaccessreviews: 403 Forbidden"):
        await create_review(c, "/x/subjectaccessreviews", {}, sleep=sleep)
    assert c.calls == 1                                   # not retried
    c = FlakyClient([ApiError(503, "ServiceUnavailable")] * 10)
    with pytest.raises(ReviewError):
        await create_review(c, "/x/tokenreviews", {}, sleep=sleep)
    assert c.calls == 5                                   # upstream's 5 steps


def test_backoff_delays_grow_by_the_factor_within_the_jitter():
    assert backoff_delays(0.5, 1.5, 0.0, 5) == [0.5, 0.75, 1.125, 1.6875]
    jittered = backoff_delays(0.5, 1.5, 0.2, 5, rnd=lambda: 1.0)
    assert jittered == pytest.approx([0.6, 0.9, 1.35, 2.025])


def test_forbidden_messages_as_upstream_words_them():
    assert forbidden_message(ANONYMOUS, Attributes.non_resource("GET", "/metrics")) == \
        'forbidden: User "system:anonymous" cannot get path "/metrics"'
    assert forbidden_message(UserInfo("u"), Attributes.non_resource("POST", "/x"), "no rule") == \
        'forbidden: User "u" cannot post path "/x": no rule'
    bind = Attributes(verb="create", resource="pods", subresource="binding", namespace="ns", name="p")
    assert forbidden_message(UserInfo("u"), bind) == \
        'pods "p" is forbidden: User "u" cannot create resource "pods/binding" in API group "" in the namespace "ns"'
    cluster = Attributes(verb="list", resource="leases", group="coordination.k8s.io")
    assert forbidden_message(UserInfo("u"), cluster) == ('leases.coordination.k8s.io is forbidden: User "u" cannot '
                                                         'list resource "leases" in API group "coordination.k8s.io" '
                                                         'at the cluster scope')


def test_authenticated_group_and_certificate_users():
    assert with_authenticated_group(UserInfo("a", groups=("g",))).groups == ("g", "system:authenticated")
    assert with_authenticated_group(UserInfo("a", groups=("system:authenticated",))).groups == ("system:authenticated",)
    assert with_authenticated_group(ANONYMOUS) == ANONYMOUS
    cert = {"subject": ((("organizationName", "system:masters"),), (("organizationName", "ops"),),
                        (("commonName", "alice"),))}
    assert user_from_peercert(cert) == UserInfo("alice", groups=("system:masters", "ops"))
    assert user_from_peercert({"subject": ((("organizationName", "ops"),),)}) is None   # no CN: no user
    assert user_from_peercert(None) is None and user_from_peercert({}) is None


def test_flags_as_kube_scheduler_spells_them():
    args = cli.parse_args(["--authorization-always-allow-paths=/healthz,/debug/*",
                           "--authorization-always-allow-paths", "/x", "--authentication-skip-lookup",
                           "--authentication-tolerate-lookup-failure=false",
                           "--authentication-token-webhook-cache-ttl=1m",
                           "--authorization-webhook-cache-unauthorized-ttl=500ms"])
    o = cli.auth_options(args)
    assert o.always_allow_paths == ["/healthz", "/debug/*", "/x"]
    assert o.skip_lookup is True and o.tolerate_lookup_failure is False
    assert (o.token_cache_ttl, o.authorized_ttl, o.unauthorized_ttl) == (60.0, 10.0, 0.5)
    assert not o.insecure_disable
    d = cli.auth_options(cli.parse_args([]))
    assert d.always_allow_paths == ["/healthz", "/readyz", "/livez"] and d.tolerate_lookup_failure is True
    assert not d.skip_lookup and d.client_ca_file is None
    assert (d.token_cache_ttl, d.authorized_ttl, d.unauthorized_ttl) == (10.0, 10.0, 10.0)   # upstream's
    assert cli.auth_options(cli.parse_args(["--authorization-always-allow-paths="])).always_allow_paths == []
    assert cli.auth_options(cli.parse_args(["--insecure-disable-auth"])).insecure_disable
    with pytest.raises(SystemExit):
        cli.parse_args(["--authentication-skip-lookup=maybe"])
