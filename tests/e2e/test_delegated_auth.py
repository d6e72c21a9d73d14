"""Delegated authentication and authorization on the secure port and the extender's bind/preempt.

Real TokenReviews and SubjectAccessReviews against the test API server, real ServiceAccount tokens,
client certificates from the control plane's CA, and the real kube-scheduler answering the same
requests next to pysched so the status codes and bodies are checked against upstream, not guessed.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import aiohttp
import orjson
import pytest

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import ApiError
from pysched.extender.server import ExtenderServer, server_ssl
from pysched.server.delegated_auth import AuthOptions
from pysched.server.delegated_auth import build as build_auth
from pysched_dev.devcluster import KubeSchedulerProcess, free_port
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod

from . import kustomize
from .conftest import REPO, https_get, wait_for

pytestmark = pytest.mark.e2e
RBAC = "/apis/rbac.authorization.k8s.io/v1"
UNAUTHORIZED = ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized",'
                '"reason":"Unauthorized","code":401}\n')


def forbidden(user: str, path: str) -> str:
    msg = json.dumps(f'forbidden: User "{user}" cannot get path "{path}"')
    return ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":' + msg
            + ',"reason":"Forbidden","details":{},"code":403}\n')


async def sa_token(admin, name: str, namespace: str = "default") -> str:
    try:
        await admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", rate_limit=False,
                            body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    except ApiError as exc:
        if not exc.conflict:
            raise
    tr = await admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", rate_limit=False,
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})
    return tr["status"]["token"]


async def grant_metrics_reader(admin, binding: str, subject: dict) -> None:
    """The manifests' pysched-metrics-reader ClusterRole (created once), bound to ``subject``."""
    role = next(o for o in kustomize.build(REPO / "manifests")
                if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "pysched-metrics-reader")
    try:
        await admin.request("POST", f"{RBAC}/clusterroles", body=role, rate_limit=False)
    except ApiError as exc:
        if not exc.conflict:
            raise
    await admin.request("POST", f"{RBAC}/clusterrolebindings", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pysched-metrics-reader"},
        "subjects": [subject]})


def sa_subject(name: str, namespace: str = "default") -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


async def wait_ready(url: str, proc=None, log=lambda: "") -> None:
    async def ready():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited ({proc.returncode}):\n{log()[-3000:]}")
        try:
            return (await https_get(url + "/readyz"))[0] == 200
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False
    await wait_for(ready, 60, what=f"{url}/readyz")


async def test_secure_port_answers_as_kube_scheduler_does(control_plane, admin, scheduler_factory):
    cp = control_plane
    nobody = await sa_token(admin, "nobody")
    prom = await sa_token(admin, "prom")
    await grant_metrics_reader(admin, "prom-metrics", sa_subject("prom"))
    cert_user = cp.issue_cert("cert-user", client=True)
    cert_admin = cp.issue_cert("cert-admin", client=True, groups=("system:masters",))
    kube_port = free_port()
    kube = KubeSchedulerProcess(cp, {"profiles": [{"schedulerName": "kube-auth"}]}, secure_port=kube_port,
                                extra_args=[f"--authentication-kubeconfig={cp.kubeconfig}",
                                            f"--authorization-kubeconfig={cp.kubeconfig}"]).start()
    sched = scheduler_factory().start()
    try:
        kube_url = f"https://127.0.0.1:{kube_port}"
        await wait_ready(kube_url, kube.proc, lambda: kube.log_path.read_text(errors="replace"))
        await wait_ready(sched.url, sched.proc, sched.log)
        callers = {"no credentials": {}, "garbage token": {"token": "garbage"}, "nobody": {"token": nobody},
                   "prom": {"token": prom}, "admin": {"token": cp.admin_token}, "cert-user": {"cert": cert_user},
                   "cert-admin": {"cert": cert_admin}}
        def want(who: str, path: str) -> tuple[int, str | None]:
            if who == "garbage token":
                return 401, UNAUTHORIZED
            if who in ("admin", "cert-admin") or (who == "prom" and path == "/metrics"):
                return 200, None          # system:masters (token, or O in a certificate); the metrics reader
            user = {"no credentials": "system:anonymous", "cert-user": "cert-user"}.get(
                who, f"system:serviceaccount:default:{who}")   # a certificate's CN, from the ConfigMap's CA
            return 403, forbidden(user, path)

        for path in ("/metrics", "/configz"):
            for who, cred in callers.items():
                ours = await https_get(sched.url + path, **cred)
                theirs = await https_get(kube_url + path, **cred)
                assert ours[0] == theirs[0], (path, who, ours, theirs)
                if ours[0] != 200:
                    assert ours[1] == theirs[1], (path, who)
                code, body = want(who, path)
                assert ours[0] == code and (body is None or ours[1] == body), (path, who, ours)
        # /debug/explain is ours only: the same rules
        assert await https_get(sched.url + "/debug/explain?pod=default/x") == (
            403, forbidden("system:anonymous", "/debug/explain"))
        assert (await https_get(sched.url + "/debug/explain?pod=default/x", token="garbage")) == (401, UNAUTHORIZED)
        assert (await https_get(sched.url + "/debug/explain?pod=default/x", token=nobody))[0] == 403
        assert (await sched.get("/debug/explain?pod=default/x"))[0] == 404     # admin: past auth, no trace

        # Health paths: open to anonymous callers; a bad token is still refused, as upstream.
        for path in ("/healthz", "/livez", "/readyz"):
            for who, cred in callers.items():
                ours = await https_get(sched.url + path, **cred)
                theirs = await https_get(kube_url + path, **cred)
                assert ours[0] == theirs[0], (path, who, ours, theirs)
                assert ours == ((401, UNAUTHORIZED) if who == "garbage token" else (200, "ok")), (path, who)
    finally:
        kube.stop()


async def test_cache_ttl_flags_keep_or_drop_answers(control_plane, admin, scheduler_factory):
    token = await sa_token(admin, "prom")
    await grant_metrics_reader(admin, "prom-metrics", sa_subject("prom"))
    ttl = lambda v: [f"--authentication-token-webhook-cache-ttl={v}",  # noqa: E731
                     f"--authorization-webhook-cache-authorized-ttl={v}",
                     f"--authorization-webhook-cache-unauthorized-ttl={v}"]
    cached = scheduler_factory(name="cached", extra_args=ttl("10m")).start()
    uncached = scheduler_factory(name="uncached", extra_args=ttl("0s")).start()
    for s in (cached, uncached):
        await wait_ready(s.url, s.proc, s.log)
        assert (await s.get("/metrics", token=token))[0] == 200

    await admin.request("DELETE", f"{RBAC}/clusterrolebindings/prom-metrics", rate_limit=False)

    async def denied():
        return (await uncached.get("/metrics", token=token))[0] == 403
    await wait_for(denied, 30, what="the unbound ServiceAccount refused without a cache")
    assert (await cached.get("/metrics", token=token))[0] == 200      # the allowed answer is still cached

    await admin.request("DELETE", "/api/v1/namespaces/default/serviceaccounts/prom", rate_limit=False)

    async def unauthenticated():
        return (await uncached.get("/metrics", token=token))[0] == 401
    await wait_for(unauthenticated, 30, what="the deleted ServiceAccount's token rejected without a cache")
    assert (await cached.get("/metrics", token=token))[0] == 200      # the TokenReview is still cached


async def test_client_ca_file_and_skip_lookup(control_plane, scheduler_factory):
    cp = control_plane
    cert_user = cp.issue_cert("cert-user", client=True)
    cert_admin = cp.issue_cert("cert-admin", client=True, groups=("system:masters",))
    explicit = scheduler_factory(name="explicit", extra_args=[f"--client-ca-file={cp.ca_file}",
                                                              "--authentication-skip-lookup"]).start()
    skipped = scheduler_factory(name="skipped", extra_args=["--authentication-skip-lookup"]).start()
    for s in (explicit, skipped):
        await wait_ready(s.url, s.proc, s.log)
    assert await explicit.get("/metrics", token=None, cert=cert_user) == (403, forbidden("cert-user", "/metrics"))
    assert (await explicit.get("/metrics", token=None, cert=cert_admin))[0] == 200
    # no client CA at all: the certificate is not even asked for, the caller is anonymous
    assert await skipped.get("/metrics", token=None, cert=cert_admin) == (403,
                                                                          forbidden("system:anonymous", "/metrics"))
    assert (await skipped.get("/metrics"))[0] == 200                  # tokens still work


async def test_authentication_and_authorization_kubeconfigs(control_plane, admin, scheduler_factory):
    cp = control_plane
    weak = cp.kubeconfig_for_token(await sa_token(admin, "weak"), "weak")   # may create no reviews
    prom = await sa_token(admin, "prom")
    await grant_metrics_reader(admin, "prom-metrics", sa_subject("prom"))

    authn = scheduler_factory(name="authn", extra_args=[f"--authentication-kubeconfig={weak}"]).start()
    authz = scheduler_factory(name="authz", extra_args=[f"--authorization-kubeconfig={weak}"]).start()
    strict = scheduler_factory(name="strict", extra_args=[f"--authentication-kubeconfig={weak}",
                                                          "--authentication-tolerate-lookup-failure=false"]).start()
    for s in (authn, authz):
        await wait_ready(s.url, s.proc, s.log)
    assert "cannot look up the client CA" in authn.log()          # tolerated, as kube-scheduler does
    # TokenReviews are made as "weak", which may not: no token authenticates
    assert await authn.get("/metrics") == (401, UNAUTHORIZED)
    assert await authn.get("/healthz", token=None) == (200, "ok")
    # SubjectAccessReviews are made as "weak": the review fails (500); system:masters needs none
    assert (await authz.get("/metrics", token=prom))[0] == 500
    assert (await authz.get("/metrics"))[0] == 200

    assert strict.proc.wait(60) == 1
    assert "cannot set up delegated authentication" in strict.log()


async def test_insecure_disable_auth_serves_everyone_and_warns(scheduler_factory):
    sched = scheduler_factory(extra_args=["--insecure-disable-auth"]).start()
    await wait_ready(sched.url, sched.proc, sched.log)
    assert (await sched.get("/metrics", token=None))[0] == 200
    assert (await sched.get("/configz", token="garbage"))[0] == 200
    assert any("level=warning" in line and "--insecure-disable-auth" in line for line in sched.log().splitlines())


def test_bad_always_allow_path_is_refused_naming_the_flag(control_plane, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pysched", "--kubeconfig", str(control_plane.kubeconfig),
                           "--authorization-always-allow-paths=/a*b"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "--authorization-always-allow-paths" in proc.stderr and "only trailing * allowed" in proc.stderr


# -- the extender's bind and preempt -------------------------------------------------------------

async def start_extender(cp, ssl_context=None):
    app = SchedulerApp(configmod.default_config(), Options(kubeconfig=str(cp.kubeconfig), serve=False, kopf=False,
                                                           leader_elect=False), load_kubeconfig(cp.kubeconfig))
    await app.start_informers()
    auth = await build_auth(AuthOptions(skip_lookup=True, always_allow_paths=[]), load_kubeconfig(cp.kubeconfig))
    server = ExtenderServer(app, bind_auth=auth)
    await server.start("127.0.0.1", 0, ssl_context)
    return app, server, auth


async def stop_extender(app, server, auth):
    await server.stop()
    await app.shutdown()
    await auth.close()


async def call(url: str, verb: str, body: dict, *, token: str | None = None, ssl_context=None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/{verb}", data=orjson.dumps(body), headers=headers, ssl=ssl_context) as r:
            return r.status, await r.text()


async def node_of(admin, name: str) -> str | None:
    return (await admin.get(f"/api/v1/namespaces/default/pods/{name}"))["spec"].get("nodeName")


async def test_extender_bind_and_preempt_need_an_authorized_caller(control_plane, admin):
    cp = control_plane
    await create_nodes(admin, [make_node("n1", cpu="2")])
    pod = (await create_pods(admin, [make_pod("p")]))[0]
    bind = {"PodName": "p", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": "n1"}
    nobody = await sa_token(admin, "nobody")
    binder = await sa_token(admin, "binder")
    await admin.request("POST", f"{RBAC}/namespaces/default/roles", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "binder"},
        "rules": [{"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]})
    await admin.request("POST", f"{RBAC}/namespaces/default/rolebindings", rate_limit=False, body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "binder"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
        "subjects": [sa_subject("binder")]})
    app, server, auth = await start_extender(cp)
    url = f"http://127.0.0.1:{server.port}"
    try:
        status, text = await call(url, "bind", bind)
        assert status == 403 and json.loads(text)["message"] == (
            'pods "p" is forbidden: User "system:anonymous" cannot create resource "pods/binding" '
            'in API group "" in the namespace "default"')
        assert (await call(url, "bind", bind, token="garbage")) == (401, UNAUTHORIZED)
        status, text = await call(url, "bind", bind, token=nobody)
        assert status == 403
        assert 'User "system:serviceaccount:default:nobody" cannot create' in json.loads(text)["message"]
        assert await node_of(admin, "p") is None, "a refused bind must not bind"
        # the same ServiceAccount may bind in "default" only: another namespace is refused
        other = dict(bind, PodNamespace="kube-system")
        assert (await call(url, "bind", other, token=binder))[0] == 403

        status, text = await call(url, "bind", bind, token=binder)
        assert (status, json.loads(text)) == (200, {"Error": ""})
        assert await node_of(admin, "p") == "n1"

        preempt = {"Pod": dict(make_pod("big", cpu="1"), metadata={"name": "big", "namespace": "default",
                                                                  "uid": "uid-big"}),
                   "NodeNameToMetaVictims": {}}
        assert (await call(url, "preempt", preempt))[0] == 403
        assert (await call(url, "preempt", preempt, token=nobody))[0] == 403
        assert (await call(url, "preempt", preempt, token=binder))[0] == 200
        # filter and prioritize stay open: read-only answers from the cache
        assert (await call(url, "filter", {"Pod": make_pod("q"), "NodeNames": ["n1"]}))[0] == 200
    finally:
        await stop_extender(app, server, auth)


async def test_extender_bind_with_a_client_certificate(control_plane, admin):
    cp = control_plane
    await create_nodes(admin, [make_node("n1", cpu="2")])
    pod = (await create_pods(admin, [make_pod("p")]))[0]
    cert, key = cp.issue_cert("extender")
    app, server, auth = await start_extender(cp, server_ssl(str(cert), str(key), str(cp.ca_file)))
    url = f"https://127.0.0.1:{server.port}"
    try:
        client = ssl.create_default_context(cafile=str(cp.ca_file))
        client.load_cert_chain(*map(str, cp.issue_cert("kube-scheduler-client", client=True)))
        status, text = await call(url, "bind", {"PodName": "p", "PodNamespace": "default",
                                                "PodUID": pod["metadata"]["uid"], "Node": "n1"}, ssl_context=client)
        assert (status, json.loads(text)) == (200, {"Error": ""})
        assert await node_of(admin, "p") == "n1"
        with pytest.raises((aiohttp.ClientError, ssl.SSLError, OSError)):     # no certificate: no connection
            await call(url, "bind", {}, ssl_context=ssl.create_default_context(cafile=str(cp.ca_file)))
    finally:
        await stop_extender(app, server, auth)
