"""`pysched extender` under hostile input: fuzzed and malformed bodies, nodes sent in requests, bind
checks, slow clients. A real extender server with a real API server behind it."""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
import orjson
import pytest
import pytest_asyncio

from pysched.apis import config as configmod
from pysched.apis.core.quantity import MAX_AMOUNT
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.extender import server as extender_server_mod
from pysched.extender.server import NOT_IN_CACHE, ExtenderServer
from pysched_dev.testkit import create_nodes, create_pods, make_node, make_pod

from .conftest import wait_for
from .test_extender_server import post

pytestmark = pytest.mark.e2e
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
TAINT = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
MAX_BODY = 1024 * 1024


class Problems(logging.Handler):
    """Log records that mean a bug: errors, and anything logged with a traceback."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)

    def text(self) -> str:
        return "\n".join(self.format(r) for r in self.records[:5])


@pytest_asyncio.fixture
async def ext(control_plane, admin):
    await create_nodes(admin, [make_node("n1", cpu="2", labels={ZONE: "a"}),
                               make_node("n2", cpu="2", taints=TAINT, labels={ZONE: "b"})])
    await create_pods(admin, [make_pod("victim", cpu="1500m", node_name="n1", scheduler="other", labels={"app": "v"}),
                              make_pod("parked", cpu="1", node_name="ghost", scheduler="other")])
    app = SchedulerApp(configmod.default_config(), Options(kubeconfig=str(control_plane.kubeconfig), serve=False,
                                                           kopf=False, leader_elect=False),
                       load_kubeconfig(control_plane.kubeconfig))
    await app.start_informers()
    await wait_for(lambda: _now(len(app.cache.pods) == 2), 30, what="pods cached")
    server = ExtenderServer(app, max_body=MAX_BODY, bind_auth=None)  # auth: test_delegated_auth
    await server.start("127.0.0.1", 0, None)
    session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}")
    problems = Problems()
    logging.getLogger("pysched").addHandler(problems)
    try:
        yield app, session, server, problems
    finally:
        logging.getLogger("pysched").removeHandler(problems)
        await session.close()
        await server.stop()
        await app.shutdown()


async def _now(v):
    return v


def victim_uid(app) -> str:
    return next(p.uid for p in app.cache.pods.values() if p.name == "victim")


# -- bodies ---------------------------------------------------------------------------------------

def rich_pod() -> dict:
    """A pod using every field pysched reads, so each gets mutated."""
    term = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["nope"]}]}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fuzz", "namespace": "default", "uid": "uid-fuzz", "resourceVersion": "1",
                     "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "fuzz"},
                     "annotations": {"note": "x"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                                          "controller": True}]},
        "spec": {
            "schedulerName": "pysched", "priority": 10, "priorityClassName": "high",
            "containers": [{"name": "c", "image": "img:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}},
                            "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "0.0.0.0",
                                       "protocol": "TCP"}]}],
            "initContainers": [{"name": "i", "image": "init:1", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "10m"}},
                                "ports": [{"containerPort": 81, "hostPort": 8081}]}],
            "resources": {"requests": {"cpu": "150m"}, "limits": {"memory": "1Gi"}},
            "overhead": {"cpu": "10m"},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
                            {"key": "t", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": term}]},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "v"}}, "topologyKey": ZONE, "namespaces": ["default"]}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["fuzz"]}]},
                    "topologyKey": HOST, "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "matchLabelKeys": ["app"], "mismatchLabelKeys": ["other"]}]},
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "fuzz"}}, "minDomains": 1, "nodeAffinityPolicy": "Honor",
                 "nodeTaintsPolicy": "Ignore", "matchLabelKeys": ["app"]},
                {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}],
        },
        "status": {"phase": "Pending", "nominatedNodeName": "n1",
                   "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "m"}],
                   "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "100m"}},
                                          "allocatedResources": {"cpu": "100m"}}]},
    }


def volume_pod() -> dict:
    p = make_pod("vols", cpu="100m")
    p["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "pvc", "readOnly": False}},
                            {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claim"}]
    p["spec"]["schedulingGates"] = [{"name": "wait"}]
    return p


def full_node(name, **kw) -> dict:
    n = make_node(name, **kw)
    n["metadata"]["uid"] = f"uid-{name}"
    n["status"]["images"] = [{"names": ["img:1", "img@sha256:00"], "sizeBytes": 10**8}]
    return n


def small_pod(name="small", cpu="100m") -> dict:
    p = make_pod(name, cpu=cpu)
    p["metadata"]["uid"] = f"uid-{name}"
    return p


def node_list(*nodes) -> dict:
    return {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": list(nodes)}


def base_bodies(app) -> list[tuple[str, dict]]:
    uid = victim_uid(app)
    victim = {"metadata": {"name": "victim", "namespace": "default", "uid": uid}}
    nodes = node_list(full_node("n1", cpu="2", labels={ZONE: "a"}, taints=TAINT),
                      full_node("ghost", cpu="8", labels={ZONE: "c"}))
    return [
        ("filter", {"Pod": rich_pod(), "NodeNames": ["n1", "n2", "ghost"]}),
        ("prioritize", {"Pod": rich_pod(), "NodeNames": ["n1", "n2", "ghost"]}),
        ("filter", {"Pod": volume_pod(), "NodeNames": ["n1"]}),
        ("filter", {"Pod": small_pod(), "Nodes": nodes}),
        ("prioritize", {"Pod": small_pod(), "Nodes": nodes}),
        ("preempt", {"Pod": small_pod(),
                     "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": uid}], "NumPDBViolations": 0}}}),
        ("preempt", {"Pod": small_pod(), "NodeNameToVictims": {"n1": {"Pods": [victim], "NumPDBViolations": 0}}}),
        ("bind", {"PodName": "fuzz-nobody", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}),
    ]


# Each JSON type, and edge values of some: null, numbers, strings, lists, objects, booleans.
REPLACEMENTS = [None, 0, 7, -1, 1.5, 2**63, 1e300, "x", "", [], ["x"], [{}], {}, {"x": "y"}, True, False]


def paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


def mutated(body, path, value=None, remove=False):
    if not path:
        return value
    copy = orjson.loads(orjson.dumps(body))
    target = copy
    for k in path[:-1]:
        target = target[k]
    if remove:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return copy


ROOTS = {"filter": "ExtenderArgs", "prioritize": "ExtenderArgs", "bind": "ExtenderBindingArgs",
         "preempt": "ExtenderPreemptionArgs"}
_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")


def tokens(location: str) -> list[str]:
    return [a or b for a, b in _TOKEN.findall(location)]


def check_answer(verb, path, status, answer):
    """The invariants of any answer to a body changed at ``path``."""
    where = f"{verb} {'/'.join(map(str, path)) or '<body>'}"
    assert status in (200, 400, 422), (where, status, answer)
    if status == 422:
        # A valid body the framework cannot answer (a plugin's Error status), for verbs without an
        # Error field: e.g. a PreScore error (running PreScore plugin "X": ...).
        assert verb in ("prioritize", "preempt") and answer.startswith("running "), (where, answer)
    elif status == 400:
        assert len(answer) < 2000, (where, answer)
        location = answer.split(": ", 1)[0]
        if location.startswith("request body"):
            return
        got, changed = tokens(location), [ROOTS[verb], *map(str, path)]
        # The error is at the changed value, or on the way to it (a parent that became invalid,
        # a child the new value lacks): never somewhere else.
        n = min(len(got), len(changed))
        assert got[0] == ROOTS[verb] and got[:n] == changed[:n], (where, answer)
    elif verb == "prioritize":
        assert isinstance(answer, list) and all(0 <= h["Score"] <= 10 for h in answer), (where, answer)
    elif verb == "bind":
        assert answer["Error"], (where, answer)       # nothing may be bound by a fuzzed body
    elif verb == "preempt":
        assert isinstance(answer["NodeNameToMetaVictims"], dict), (where, answer)
    else:
        assert set(answer) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}, \
            (where, answer)


# -- tests ----------------------------------------------------------------------------------------

async def test_fuzzed_bodies_get_400_naming_the_field_never_500(ext):
    """Every value of every valid body replaced by each JSON type (and every key removed): each
    answer is a 200 or a 400 naming the changed field or one on its path; no traceback is logged;
    the cache is as before and valid requests still get their answers."""
    app, s, _, problems = ext
    bodies = base_bodies(app)
    before = app.cache.dump()
    cases = []
    for verb, body in bodies:
        for path in paths(body):
            for v in REPLACEMENTS:
                cases.append((verb, path, mutated(body, path, v)))
            if path and isinstance(path[-1], str):
                cases.append((verb, path, mutated(body, path, remove=True)))
    sem = asyncio.Semaphore(8)

    async def one(verb, path, body):
        async with sem:
            status, answer = await post(s, verb, orjson.dumps(body), raw=True)
            check_answer(verb, path, status, answer)
            return status

    statuses = await asyncio.gather(*(one(*c) for c in cases))
    assert len(cases) > 3000 and statuses.count(400) > 1000 and statuses.count(200) > 1000
    assert not problems.records, problems.text()
    assert app.cache.dump() == before
    status, res = await post(s, "filter", {"Pod": small_pod(), "NodeNames": ["n1", "n2"]})
    assert status == 200 and res["NodeNames"] == ["n1"]
    for verb, body in bodies:
        status, answer = await post(s, verb, body)
        assert status == 200, (verb, answer)


def nested(depth: int, leaf=b"1") -> bytes:
    return b"[" * depth + leaf + b"]" * depth


async def test_hostile_bodies(ext):
    """Deep nesting, huge and broken encodings, scalars at the top, duplicate keys: 400 or 413."""
    app, s, server, problems = ext
    pod = orjson.dumps(small_pod())
    deep_pod = small_pod()
    deep_pod["spec"]["unknownField"] = "DEEP"                         # we do not read it: fine
    deep_pod = orjson.dumps({"Pod": deep_pod, "NodeNames": ["n1"]}).replace(b'"DEEP"', nested(300))
    deep_node = full_node("n1", cpu="2", labels={ZONE: "a"})
    deep_node["metadata"]["unknown"] = "DEEP"                         # echoed back: orjson writes <= 254 levels
    deep_nodes = orjson.dumps({"Pod": small_pod(), "Nodes": node_list(deep_node)}).replace(b'"DEEP"', nested(300))
    cases = [
        (nested(100_000), 400, "request body is not valid JSON"),
        (b'{"Pod": ' + nested(2000) + b', "NodeNames": []}', 400, "request body is not valid JSON"),
        (b"\xff\xfe{}", 400, "request body is not valid JSON"),
        (b'{"Pod": ' + pod + b', "NodeNames": ["n\xff1"]}', 400, "request body is not valid JSON"),
        (b'{"Pod": ' + pod + b', "NodeNames": ["n\xed\xa0\x80"]}', 400, "request body is not valid JSON"),  # surrogate
        (b'{"Pod": ' + pod + b', "NodeNames": NaN}', 400, "request body is not valid JSON"),
        (b"1", 400, "ExtenderArgs: expected an object, got number"),
        (b'"x"', 400, "ExtenderArgs: expected an object, got string"),
        (b"null", 400, "ExtenderArgs: expected an object, got null"),
        (b"true", 400, "ExtenderArgs: expected an object, got boolean"),
        (b"[{}]", 400, "ExtenderArgs: expected an object, got list"),
        (b'{"Pod": {}, "Pod": ' + pod + b', "NodeNames": ["n1"]}', 200, None),         # the last one wins, as in Go
        (b'{"Pod": ' + pod + b', "NodeNames": ["n1"], "NodeNames": 5}', 400, "ExtenderArgs.NodeNames"),
        (deep_pod, 200, None),
        (orjson.dumps({"Pod": small_pod(), "Nodes": node_list(full_node("n1"), full_node("n1"))}), 400,
         "ExtenderArgs.Nodes.items[1].metadata.name: 'n1' duplicates items[0]"),
        (b'{"Pod": ' + pod + b', "NodeNames": ["' + b"x" * (MAX_BODY + 1) + b'"]}', 413, "exceeds the limit"),
    ]
    for body, status, text in cases:
        for verb in ("filter", "prioritize"):
            got, answer = await post(s, verb, body, raw=True)
            assert got == status and (text is None or text in answer), (verb, body[:80], got, str(answer)[:300])

    got, answer = await post(s, "filter", deep_nodes, raw=True)            # filter sends the node back
    assert got == 400 and answer.startswith("ExtenderArgs.Nodes.items[0]: cannot be sent back"), answer
    got, answer = await post(s, "prioritize", deep_nodes, raw=True)        # prioritize does not
    assert got == 200 and [h["Host"] for h in answer] == ["n1"], answer

    async def chunks():                                 # no Content-Length: counted as it arrives
        for _ in range(MAX_BODY // 65536 + 2):
            yield b" " * 65536
    async with s.post("/filter", data=chunks()) as r:
        assert r.status == 413 and "exceeds the limit" in await r.text()
    for verb in ("bind", "preempt"):
        got, answer = await post(s, verb, nested(100_000), raw=True)
        assert got == 400, answer
    got, answer = await post(s, "bind", {"PodName": "../../nodes/n1", "PodNamespace": "default", "PodUID": "u",
                                         "Node": "n1"})
    assert got == 400 and "ExtenderBindingArgs.PodName: invalid name" in answer
    assert not problems.records, problems.text()
    status, res = await post(s, "filter", {"Pod": small_pod(), "NodeNames": ["n1", "n2"]})
    assert status == 200 and res["NodeNames"] == ["n1"]


async def test_full_nodes_are_judged_as_sent_and_never_cached(ext):
    """Nodes sent in full are used for that request only: a node we do not know, and a faked
    allocatable on a real node, change neither the cache nor later answers."""
    app, s, _, _ = ext
    before = app.cache.dump()
    real_alloc = dict(app.cache.nodes["n1"].allocatable)
    sent = node_list(full_node("n1", cpu="64", labels={ZONE: "a", "fake": "yes"}),
                     full_node("fakenode", cpu="4", labels={ZONE: "a"}),
                     full_node("ghost", cpu="1500m", labels={ZONE: "c"}))
    status, res = await post(s, "filter", {"Pod": small_pod(cpu="1"), "Nodes": sent})
    assert status == 200 and res["Error"] == ""
    # n1 as sent has room; a node we do not know is judged as sent; ghost, which we do not know
    # either, carries the 1-cpu pod our cache counts on it
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["n1", "fakenode"]
    assert res["FailedNodes"] == {"ghost": "Insufficient cpu"}
    status, res = await post(s, "prioritize", {"Pod": small_pod(cpu="1"), "Nodes": sent})
    assert status == 200 and {h["Host"] for h in res} == {"n1", "fakenode", "ghost"}
    assert app.cache.dump() == before and app.cache.nodes["n1"].allocatable == real_alloc
    assert "fakenode" not in app.cache.nodes
    assert set(app.cache.parked) == {"ghost"}
    # NodeNames mode resolves against the cache: the fake node is unknown, n1 has its real 2 cpu
    status, res = await post(s, "filter", {"Pod": small_pod(cpu="1"), "NodeNames": ["n1", "fakenode"]})
    assert res["NodeNames"] == [] and res["FailedNodes"] == {"n1": "Insufficient cpu", "fakenode": NOT_IN_CACHE}
    # a later full request with the real node sees the real allocatable and the victim's 1.5 cpu
    status, res = await post(s, "filter", {"Pod": small_pod(cpu="1"), "Nodes": node_list(full_node("n1", cpu="2"))})
    assert res["Nodes"]["items"] == [] and res["FailedNodes"] == {"n1": "Insufficient cpu"}


async def test_bind_refuses_before_writing(ext, admin):
    """UID mismatch, a foreign schedulerName, an already bound pod, a node we do not know: refused in
    Error, nothing bound. A pod of kube-scheduler's default profile or of our profile is bound."""
    app, s, _, _ = ext
    await create_pods(admin, [make_pod("mine"), make_pod("kube", scheduler="default-scheduler"),
                              make_pod("foreign", scheduler="someone-else"), make_pod("bound", node_name="n2")])

    async def uid(name):
        return (await admin.get(f"/api/v1/namespaces/default/pods/{name}"))["metadata"]["uid"]

    async def node_of(name):
        return (await admin.get(f"/api/v1/namespaces/default/pods/{name}"))["spec"].get("nodeName")

    async def bind(name, node="n1", pod_uid=None):
        body = {"PodName": name, "PodNamespace": "default", "PodUID": pod_uid or await uid(name), "Node": node}
        status, res = await post(s, "bind", body)
        assert status == 200
        return res["Error"]

    assert "has UID" in await bind("mine", pod_uid="0e7a4c6e-0000-4000-8000-000000000000")
    assert "schedulerName 'someone-else'" in await bind("foreign")
    assert "--bind-scheduler-name" in await bind("foreign")
    assert "already bound to node 'n2'" in await bind("bound", node="n1")
    assert "node 'elsewhere' not found in the extender's cache" in await bind("mine", node="elsewhere")
    assert [await node_of(n) for n in ("mine", "foreign", "bound")] == [None, None, "n2"]
    assert await bind("mine") == "" and await bind("kube") == ""
    assert [await node_of(n) for n in ("mine", "kube")] == ["n1", "n1"]
    # --bind-scheduler-name replaces the defaults
    strict = ExtenderServer(app, bind_scheduler_names=["someone-else"], bind_auth=None)
    await strict.start("127.0.0.1", 0, None)
    try:
        await create_pods(admin, [make_pod("mine2")])
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{strict.port}") as s2:
            for name, refused in (("mine2", "schedulerName 'pysched'"), ("foreign", "")):
                status, res = await post(s2, "bind", {"PodName": name, "PodNamespace": "default",
                                                      "PodUID": await uid(name), "Node": "n1"})
                assert status == 200 and (refused in res["Error"] if refused else res["Error"] == ""), res
    finally:
        await strict.stop()
    assert [await node_of(n) for n in ("mine2", "foreign")] == [None, "n1"]


async def test_huge_node_quantities_saturate(ext, admin):
    """A node with 1E cpu registers through the informer (saturated at int64) and fits pods, as
    sent in full or by name."""
    app, s, _, problems = ext
    await create_nodes(admin, [make_node("huge", cpu="1E", memory="8Ei", labels={ZONE: "a"})])
    await wait_for(lambda: _now("huge" in app.cache.nodes), 30, what="huge node cached")
    assert app.cache.nodes["huge"].allocatable["cpu"] == MAX_AMOUNT
    status, res = await post(s, "filter", {"Pod": small_pod(cpu="1000000"), "NodeNames": ["huge", "n1"]})
    assert status == 200 and res["NodeNames"] == ["huge"]
    nodes = node_list(full_node("huge2", cpu="1E", memory="8Ei", labels={ZONE: "a"}))
    status, res = await post(s, "filter", {"Pod": small_pod(cpu="1E"), "Nodes": nodes})
    assert status == 200 and [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["huge2"]
    status, res = await post(s, "prioritize", {"Pod": small_pod(cpu="1E"), "Nodes": nodes})
    assert status == 200
    assert not problems.records, problems.text()


async def test_parse_slips_are_400_and_our_bugs_are_500(ext, monkeypatch):
    """A parser failure the type checks did not foresee is still the body's fault (400, logged);
    a failure while evaluating a well-formed request is ours (500, logged with its traceback)."""
    app, s, _, problems = ext

    def broken_parse(body):
        raise KeyError("surprise")
    monkeypatch.setattr(extender_server_mod, "parse_args", broken_parse)
    status, text = await post(s, "filter", {"Pod": small_pod(), "NodeNames": ["n1"]})
    assert status == 400 and text.startswith("ExtenderArgs: cannot parse: KeyError")
    assert problems.records and problems.records[-1].levelno == logging.WARNING
    monkeypatch.undo()

    def broken_filters(*args):
        raise RuntimeError("a bug of ours")
    monkeypatch.setattr(ExtenderServer, "_run_filters", broken_filters)
    status, text = await post(s, "filter", {"Pod": small_pod(), "NodeNames": ["n1"]})
    assert status == 500 and "RuntimeError: a bug of ours" in text
    assert problems.records[-1].levelno == logging.ERROR and problems.records[-1].exc_info


async def test_slow_clients_are_cut_off(ext):
    """A client that sends nothing, stalls in its headers or stalls mid-body is disconnected after
    the configured time (408 for the body); the server keeps serving others."""
    app, s, _, problems = ext
    slow = ExtenderServer(app, header_timeout=1.0, body_timeout=1.0, bind_auth=None)
    await slow.start("127.0.0.1", 0, None)
    try:
        async def stalled(first: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", slow.port)
            try:
                writer.write(first)
                await writer.drain()
                return await asyncio.wait_for(reader.read(), 30)   # liveness bound: returns at EOF
            finally:
                writer.close()

        assert await stalled(b"") == b""
        assert await stalled(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Ty") == b""
        answer = await stalled(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"Pod\": ")
        assert answer.startswith(b"HTTP/1.1 408") and b"request body not received within 1s" in answer
        # a client that hangs up mid-body is no error of ours
        _, writer = await asyncio.open_connection("127.0.0.1", slow.port)
        writer.write(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
        await asyncio.sleep(0.3)
        assert not problems.records, problems.text()
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{slow.port}/filter",
                                    data=orjson.dumps({"Pod": small_pod(), "NodeNames": ["n1"]})) as r:
                assert r.status == 200 and (await r.json())["NodeNames"] == ["n1"]
    finally:
        await slow.stop()


# -- many connections at once ---------------------------------------------------------------------

async def test_a_burst_of_1000_requests_from_one_client_is_answered_in_full(ext):
    """kube-scheduler under a burst: 1,000 concurrent /filter calls from 127.0.0.1, each on a
    connection of its own - 30 times the per-client share of 32 connections. The connections past
    the share wait for a slot and are served in turn: every call is answered 200 with its result,
    none is reset; once with the connections kept alive, once closed after each answer."""
    app, _, server, problems = ext
    body = orjson.dumps({"Pod": small_pod(), "NodeNames": ["n1", "n2"]})
    peak = 0

    async def sample():
        nonlocal peak
        while True:
            peak = max(peak, server.guard.queued)
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        for force_close in (False, True):
            connector = aiohttp.TCPConnector(limit=0, force_close=force_close)
            async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}", connector=connector) as s:
                async def one():
                    async with s.post("/filter", data=body) as r:
                        return r.status, await r.read()

                # liveness bound only: the burst takes a few seconds
                results = await asyncio.wait_for(
                    asyncio.gather(*(one() for _ in range(1000)), return_exceptions=True), 120)
            failed = [r for r in results if isinstance(r, BaseException)]
            assert not failed, (force_close, len(failed), failed[:3])
            wrong = [r for r in results if r[0] != 200 or orjson.loads(r[1])["NodeNames"] != ["n1"]]
            assert not wrong, (force_close, len(wrong), wrong[:3])
    finally:
        sampler.cancel()
    assert peak > 0, "the burst never went past the per-client share: it tests nothing"
    assert server.guard.queued == 0
    assert not problems.records, problems.text()


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


async def test_a_connection_closed_under_a_request_is_one_quiet_warning(ext, monkeypatch):
    """The server closes connections whose request head it has read - before their body is read,
    or before the answer is written - and clients hang up mid-body: no error, no traceback, and
    one warning line for the client per log interval, however many."""
    app, s, server, problems = ext
    warnings = Warnings()
    logging.getLogger("pysched").addHandler(warnings)
    read_body = ExtenderServer._body
    run_filters = ExtenderServer._run_filters

    async def closed_before_the_body(self, request):
        request.protocol.force_close()
        return await read_body(self, request)

    def closed_before_the_answer(self, *args):
        result = run_filters(self, *args)
        for proto in list(server._runner.server._connections):   # noqa: SLF001
            if proto.transport is not None:
                proto.transport.close()   # closing: the answer cannot be written
        return result

    async def request(head: bytes, body: bytes, hang_up: bool = False) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(head + body)
            await writer.drain()
            if hang_up:
                await asyncio.sleep(0.05)
                return b""
            return await asyncio.wait_for(reader.read(), 30)   # liveness bound: returns at EOF
        finally:
            writer.close()

    valid = orjson.dumps({"Pod": small_pod(), "NodeNames": ["n1"]})
    head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
    try:
        monkeypatch.setattr(ExtenderServer, "_body", closed_before_the_body)
        for _ in range(20):
            assert await request(head % len(valid), valid[:10]) == b""
        monkeypatch.setattr(ExtenderServer, "_body", read_body)
        monkeypatch.setattr(ExtenderServer, "_run_filters", closed_before_the_answer)
        for _ in range(20):
            assert await request(head % len(valid), valid) == b""
        monkeypatch.undo()
        for _ in range(20):
            await request(head % len(valid), valid[:10], hang_up=True)
        await asyncio.sleep(0.5)
    finally:
        logging.getLogger("pysched").removeHandler(warnings)
    assert not problems.records, problems.text()
    closed = [r for r in warnings.records if r.getMessage().startswith("connection closed")]
    assert len(closed) == 1 and closed[0].levelno == logging.WARNING, [r.getMessage() for r in warnings.records]
    assert not any(r.exc_info for r in warnings.records)
    # every one of them was noted - the 20 closed before the body, the 20 before the answer - and
    # all but the first held back for the interval
    _, suppressed = server.guard.quiet._last["127.0.0.1", "closed"]   # noqa: SLF001
    assert suppressed >= 39, suppressed
    status, res = await post(s, "filter", {"Pod": small_pod(), "NodeNames": ["n1", "n2"]})
    assert status == 200 and res["NodeNames"] == ["n1"]
