"""pysched ui: the JSON API over real HTTP on loopback (aiohttp's TestServer/TestClient, no mocks)."""

import asyncio
import json
import re

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from pysched.apis import config as configmod
from pysched.testing.objects import make_node, make_pod
from pysched.tools.simulate import Simulation
from pysched.tools.snapshot import Snapshot, load_snapshot
from pysched.ui import runner
from pysched.ui.limits import Limits
from pysched.ui.scenario import DEFAULT_CONFIG, Scenario, json_size
from pysched.ui.server import CSP, MAX_BODY, STATE, make_app

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ZONE = "topology.kubernetes.io/zone"


def config(**fit) -> str:
    """The default profile with NodeResourcesFit's score weight (and args) changed."""
    cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "pysched"}]}
    if "weight" in fit:
        cfg["profiles"][0]["plugins"] = {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": fit["weight"]}]}}
    return yaml.safe_dump(cfg)


def small_cluster(limits: Limits | None = None) -> Scenario:
    """n0 (tainted PreferNoSchedule, empty), n1 (half full), n2 (full); pending pods web-0..2."""
    nodes = [make_node("n0", cpu="4", memory="4Gi", labels={ZONE: "a"},
                       taints=[{"key": "spare", "effect": "PreferNoSchedule"}]),
             make_node("n1", cpu="4", memory="4Gi", labels={ZONE: "b"}),
             make_node("n2", cpu="1", memory="1Gi", labels={ZONE: "b"})]
    bound = [make_pod("existing", cpu="2", memory="2Gi", node_name="n1"),
             make_pod("small", cpu="900m", memory="512Mi", node_name="n2")]
    pending = [make_pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(2)]
    return Scenario.from_snapshot(Snapshot(nodes=nodes, pods=bound), pending, None, limits)


def deployment(name: str, replicas: int, annotations: dict | None = None) -> dict:
    meta: dict = {"labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": meta, "spec": {"schedulerName": "pysched", "containers": [
                         {"name": "c", "resources": {"requests": {"cpu": "10m"}}}]}}}}


@pytest.fixture
async def serve():
    clients = []

    async def start(scenario: Scenario, **kw) -> TestClient:
        client = TestClient(TestServer(make_app(scenario, token=TOKEN, **kw)))
        await client.start_server()
        clients.append(client)
        return client
    yield start
    for c in clients:
        await c.close()


async def call(client, method, path, body=None, status=200, **kw):
    headers = dict(AUTH, **kw.pop("headers", {}))
    if body is not None:
        kw["data"] = json.dumps(body)
        headers.setdefault("Content-Type", "application/json")
    resp = await client.request(method, path, headers=headers, **kw)
    text = await resp.text()
    assert resp.status == status, text
    return json.loads(text) if resp.content_type == "application/json" else text


def placements(run: dict) -> dict:
    return {p["pod"]: p["node"] for p in run["placements"]}


# -- security ---------------------------------------------------------------------------------

async def test_every_request_needs_the_token_and_the_login_link_sets_a_strict_cookie(serve, tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><title>pysched</title>")
    (tmp_path / "app.js").write_text("export {};")
    client = await serve(small_cluster(), static_dir=tmp_path)
    for path in ("/api/scenario", "/api/runs", "/", "/app.js"):
        resp = await client.get(path)
        assert resp.status == 401, path
        assert resp.headers["Content-Security-Policy"] == CSP
    resp = await client.get("/api/scenario")
    assert (await resp.json())["errors"][0]["message"].startswith("unauthorized")
    resp = await client.get("/api/scenario", headers={"Authorization": "Bearer wrong"})
    assert resp.status == 401
    resp = await client.get("/?token=wrong", allow_redirects=False)
    assert resp.status == 401 and "Set-Cookie" not in resp.headers

    resp = await client.get(f"/?token={TOKEN}", allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"] == "/"
    cookie = resp.headers["Set-Cookie"]
    assert re.match(rf"pysched_ui_\d+={TOKEN}", cookie) and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # the client's cookie jar now carries it: the page, its modules and the API answer
    resp = await client.get("/")
    assert resp.status == 200 and resp.content_type == "text/html" and "pysched" in await resp.text()
    resp = await client.get("/app.js")
    assert resp.status == 200 and resp.content_type == "text/javascript"
    resp = await client.get("/api/scenario")
    assert resp.status == 200
    for name, value in (("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                        ("Content-Security-Policy", CSP)):
        assert resp.headers[name] == value
    for path in ("/../secret", "/%2e%2e/secret", "/nothing.js", "/api/nothing"):
        resp = await client.get(path)
        assert resp.status == 404, path


async def test_bodies_must_be_json_and_at_most_16_mib(serve):
    client = await serve(small_cluster())
    resp = await client.post("/api/runs", data="{}", headers=dict(AUTH, **{"Content-Type": "text/plain"}))
    assert resp.status == 415 and "application/json" in (await resp.json())["errors"][0]["message"]
    resp = await client.put("/api/config", data={"yaml": "x"}, headers=AUTH)   # a form
    assert resp.status == 415
    resp = await client.post("/api/objects", data=b"x" * (MAX_BODY + 1),
                             headers=dict(AUTH, **{"Content-Type": "application/json"}))
    assert resp.status == 413 and (await resp.json())["errors"][0]["message"].startswith("request body")
    errors = (await call(client, "POST", "/api/objects", data="{not json", status=400,
                         headers={"Content-Type": "application/json"}))["errors"]
    assert errors[0]["message"].startswith("request body is not valid JSON")
    errors = (await call(client, "POST", "/api/objects", {"yaml": 3}, status=400))["errors"]
    assert errors == [{"field": "yaml", "message": "expected a string, got int"}]
    errors = (await call(client, "POST", "/api/objects", {"yaml": "a: [b"}, status=400))["errors"]
    assert errors[0]["document"] == 0 and errors[0]["message"].startswith("not valid YAML")
    assert (await call(client, "GET", "/api/scenario"))["version"] == 0


async def test_only_requests_for_this_servers_address_are_answered(serve):
    """DNS rebinding: a page of another site whose name now points at 127.0.0.1 sends its own
    name as Host - refused (421) before the token is even looked at."""
    client = await serve(small_cluster(), hosts=["ui.lab"])
    port = client.server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", f"ui.lab:{port}"):
        assert (await call(client, "GET", "/api/scenario", headers={"Host": host}))["version"] == 0, host
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", f"localhost.:{port}",
                 f"127.0.0.1.evil.example:{port}", f"[::1:{port}", f"127.0.0.1:{port}:1", ""):
        resp = await client.get("/api/scenario", headers=dict(AUTH, Host=host))
        assert resp.status == 421, host
        error = (await resp.json())["errors"][0]
        assert error["field"] == "Host" and "DNS rebinding" in error["message"], host
        assert f"127.0.0.1:{port}" in error["message"]
    # before authentication: no 401, no login cookie
    resp = await client.get("/api/scenario", headers={"Host": f"evil.example:{port}"})
    assert resp.status == 421
    resp = await client.get(f"/?token={TOKEN}", headers={"Host": f"evil.example:{port}"}, allow_redirects=False)
    assert resp.status == 421 and "Set-Cookie" not in resp.headers
    assert (await resp.text()).startswith("Host 'evil.example:")
    resp = await client.get(f"/?token={TOKEN}", headers={"Host": f"localhost:{port}"}, allow_redirects=False)
    assert resp.status == 303 and f"pysched_ui_{port}=" in resp.headers["Set-Cookie"]


async def test_a_request_growing_the_scenario_beyond_the_pod_limit_changes_nothing(serve):
    """Issue 50 item 7: twenty 50,000-replica Deployments in one small request (each under the
    per-workload cap) are refused before any is expanded, at the one that passes the limit."""
    client = await serve(small_cluster())
    before = await call(client, "GET", "/api/scenario")
    docs = yaml.safe_dump_all([deployment(f"d{i}", 50_000) for i in range(20)])
    assert len(docs) < 10_000
    errors = (await call(client, "POST", "/api/objects", {"yaml": docs}, status=400))["errors"]
    assert errors == [{"document": 1, "field": "spec.replicas",
                       "message": "the 50,000 pods of this Deployment would make the scenario hold 100,004 pods, "
                                  "more than the limit of 100,000 (pysched ui --max-pods)"}]
    after = await call(client, "GET", "/api/scenario")
    assert after == before and len(after["pods"]) == 4
    assert client.server.app[STATE].scenario.limits == Limits()


async def test_every_way_of_growing_the_scenario_is_held_to_its_limits(serve):
    sc = small_cluster(Limits(max_pods=10, max_nodes=5))
    client = await serve(sc)
    # plain pods: refused at the one that passes the limit, nothing added
    pods = {"kind": "List", "items": [make_pod(f"p{i}") for i in range(8)]}
    errors = (await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(pods)}, status=400))["errors"]
    assert errors == [{"document": 0, "field": "items[6]", "message": "the scenario would hold 11 pods, more than "
                                                                     "the limit of 10 (pysched ui --max-pods)"}]
    # a workload up to the limit is accepted, and applied again it replaces its pods (not counted twice)
    for _ in range(2):
        got = await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(deployment("web", 6))})
        assert len(sc.pods) == 10, got
    # a DaemonSet (one pod per node: counted once expanded)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c"}]}}}}
    await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(deployment("web", 4))})
    assert len(sc.pods) == 8
    errors = (await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(ds)}, status=400))["errors"]
    assert errors == [{"document": 0, "field": "", "message": "the scenario would hold 11 pods, more than the limit "
                                                              "of 10 (pysched ui --max-pods)"}]
    # nodes: added as objects or cloned
    errors = (await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump_all(
        [make_node("n3"), make_node("n4"), make_node("n5")])}, status=400))["errors"]
    assert errors == [{"document": 2, "field": "", "message": "the scenario would hold 6 nodes, more than the limit "
                                                              "of 5 (pysched ui --max-nodes)"}]
    errors = (await call(client, "POST", "/api/nodes/clone", {"node": "n1", "count": 3}, status=400))["errors"]
    assert errors == [{"field": "count", "message": "3 copies of n1 would make the scenario hold 6 nodes, more than "
                                                    "the limit of 5 (pysched ui --max-nodes)"}]
    assert (await call(client, "POST", "/api/nodes/clone", {"node": "n1", "count": 2}))["added"] == [
        "n1-sim-1", "n1-sim-2"]
    # a replay step: refused, the scenario and the replay where they were
    version = sc.version
    seq = {"steps": [{"at": "0s", "create": [deployment("batch", 3)]}]}
    await call(client, "POST", "/api/replay", {"yaml": yaml.safe_dump(seq)})
    errors = (await call(client, "POST", "/api/replay/step", {}, status=400))["errors"]
    assert errors == [{"field": "steps[0].create[0].spec.replicas",
                       "message": "the 3 pods of this Deployment would make the scenario hold 11 pods, more than "
                                  "the limit of 10 (pysched ui --max-pods)"}]
    assert sc.version == version and (await call(client, "GET", "/api/replay"))["current"] == 0
    assert len(sc.pods) == 8 and len(sc.nodes) == 5


async def test_the_scenario_bytes_and_the_request_bytes_are_limited(serve):
    size = small_cluster().json_bytes
    sc = small_cluster(Limits(max_scenario_bytes=size + 20_000, max_request_bytes=4096))
    client = await serve(sc)
    # 100 pods of a 1 KB template: refused before they are made
    big = deployment("big", 100, annotations={"note": "x" * 1000})
    errors = (await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(big)}, status=400))["errors"]
    assert errors[0]["field"] == "spec.replicas" and errors[0]["message"].startswith(
        "the 100 pods of this Deployment would make the scenario hold ")
    assert errors[0]["message"].endswith("bytes of objects (as JSON), more than the limit of "
                                         f"{size + 20_000:,} bytes (pysched ui --max-scenario-bytes)")
    assert sc.version == 0 and sc.json_bytes == size
    got = await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(deployment("small", 5))})
    assert sc.json_bytes == sum(json_size(o) for o in (*sc.nodes.values(), *sc.pods.values(),
                                                        *sc.objects.values())) > size
    assert got["version"] == 1
    body = json.dumps({"yaml": "x" * 5000})
    resp = await client.post("/api/objects", data=body, headers=dict(AUTH, **{"Content-Type": "application/json"}))
    assert resp.status == 413
    assert (await resp.json())["errors"][0]["message"] == (f"request body of {len(body):,} bytes: the limit is "
                                                           "4,096 bytes (pysched ui --max-request-bytes)")


async def test_kept_runs_are_bounded_by_the_scenario_byte_limit(serve):
    size = small_cluster().json_bytes
    sc = small_cluster(Limits(max_scenario_bytes=size + 1000, max_runs=20))
    client = await serve(sc)
    for _ in range(4):
        await call(client, "POST", "/api/runs", {})
    # each run counts its scenario and its JSON: two of them pass the budget, the newest two stay
    assert [r["id"] for r in await call(client, "GET", "/api/runs")] == [3, 4]
    cmp = await call(client, "GET", "/api/compare?a=3&b=4")
    assert cmp["moved"] == []
    errors = (await call(client, "GET", "/api/runs/1", status=404))["errors"]
    assert "the oldest go first" in errors[0]["message"]
    client = await serve(small_cluster(Limits(max_runs=3)))
    for _ in range(5):
        await call(client, "POST", "/api/runs", {})
    assert [r["id"] for r in await call(client, "GET", "/api/runs")] == [3, 4, 5]


# -- editing ----------------------------------------------------------------------------------

async def test_config_errors_name_the_field_and_change_nothing(serve):
    client = await serve(small_cluster())
    before = await call(client, "GET", "/api/scenario")
    assert before["config"] == DEFAULT_CONFIG and before["version"] == 0
    bad = config(weight=-1)
    errors = (await call(client, "PUT", "/api/config", {"yaml": bad}, status=400))["errors"]
    assert errors == [{"field": "profiles[0].plugins.score.enabled[0].weight",
                       "message": "must not be negative, got -1"}]
    # a pluginConfig problem is found by building the frameworks
    bad_args = DEFAULT_CONFIG + "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n" \
                                "        type: Bogus\n"
    errors = (await call(client, "PUT", "/api/config", {"yaml": bad_args}, status=400))["errors"]
    assert errors[0]["field"] == "profiles[0].pluginConfig[0].args.scoringStrategy.type"
    errors = (await call(client, "PUT", "/api/config", {"yaml": "kind: [oops"}, status=400))["errors"]
    assert errors[0]["field"] == "" and errors[0]["message"].startswith("not valid YAML")
    after = await call(client, "GET", "/api/scenario")
    assert after["config"] == DEFAULT_CONFIG and after["version"] == 0

    good = config(weight=10)
    got = await call(client, "PUT", "/api/config", {"yaml": good})
    assert got == {"config": good, "version": 1}


async def test_objects_apply_and_delete_with_workloads_and_malformed_documents(serve):
    client = await serve(small_cluster())
    docs = yaml.safe_dump_all([
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
                  "template": {"metadata": {"labels": {"app": "api"}},
                               "spec": {"schedulerName": "pysched", "priorityClassName": "high",
                                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}},
        {"apiVersion": "v1", "kind": "List", "items": [make_node("n3", labels={ZONE: "c"}),
                                                       make_pod("solo", node_name="n3")]},
    ])
    got = await call(client, "POST", "/api/objects", {"yaml": docs})
    assert got["version"] == 1
    done = {(a["kind"], a["key"]): a["action"] for a in got["applied"]}
    api_pods = sorted(k for kind, k in done if kind == "Pod" and k.startswith("shop/api-"))
    assert len(api_pods) == 3 and all(done["Pod", k] == "created" for k in api_pods)
    assert done["Deployment", "shop/api"] == "created" and done["PriorityClass", "high"] == "created"
    assert any(kind == "ReplicaSet" for kind, _ in done) and done["Node", "n3"] == "created"
    sc = await call(client, "GET", "/api/scenario")
    pods = {p["key"]: p for p in sc["pods"]}
    assert pods[api_pods[0]]["owner"] == "Deployment/api" and pods[api_pods[0]]["priority"] == 1000
    assert pods[api_pods[0]]["state"] == "pending" and pods[api_pods[0]]["requests"] == {"cpu": 100}
    assert pods["default/solo"]["state"] == "bound" and pods["default/solo"]["node"] == "n3"
    assert {"kind": "Deployment", "key": "shop/api"} in sc["objects"]
    n3 = next(n for n in sc["nodes"] if n["name"] == "n3")
    assert n3["zone"] == "c" and n3["allocatable"] == {"cpu": 4000, "memory": 32 * 2**30, "pods": 110}

    # one bad document: nothing at all is applied, every problem named by document and field
    bad = yaml.safe_dump_all([
        make_pod("fine"),
        make_pod("broken", cpu="2x"),
        {"kind": "List", "items": [make_node("n4"), {"kind": "Node", "metadata": {"name": "n5"},
                                                     "status": {"allocatable": {"cpu": "four"}}}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
         "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {
             "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "resources": {
                 "requests": {"memory": "lots"}}}]}}}},
        make_pod("bound-nowhere", node_name="n42"),
        {"kind": "Gadget", "metadata": {"name": "g"}},
    ])
    errors = (await call(client, "POST", "/api/objects", {"yaml": bad}, status=400))["errors"]
    assert [(e["document"], e["field"]) for e in errors] == [
        (1, "spec.containers[0].resources.requests.cpu"), (2, "items[1].status.allocatable.cpu"),
        (3, "spec.template.spec.containers[0].resources.requests.memory"), (4, "spec.nodeName"), (5, "kind")]
    assert errors[0]["message"] == "invalid quantity '2x'"
    after = await call(client, "GET", "/api/scenario")
    assert after["version"] == 1 and len(after["pods"]) == len(sc["pods"]) and len(after["nodes"]) == 4

    # applying the Deployment again with fewer replicas drops the pending pods it no longer has
    fewer = yaml.safe_load_all(docs)
    dep = [d for d in fewer if d and d["kind"] == "Deployment"][0]
    dep["spec"]["replicas"] = 1
    got = await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(dep)})
    assert sum(1 for a in got["applied"] if a["kind"] == "Pod" and a["action"] == "deleted") == 2
    # deleting it deletes its pods and its ReplicaSet
    got = await call(client, "POST", "/api/objects", {"mode": "delete", "yaml": yaml.safe_dump(
        {"kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"}})})
    kinds = sorted(a["kind"] for a in got["applied"])
    assert kinds == ["Deployment", "Pod", "ReplicaSet"] and all(a["action"] == "deleted" for a in got["applied"])
    errors = (await call(client, "POST", "/api/objects", {"mode": "delete", "yaml": yaml.safe_dump(
        {"kind": "Pod", "metadata": {"name": "ghost"}})}, status=400))["errors"]
    assert errors == [{"document": 0, "field": "metadata.name", "message": "no Pod default/ghost in the scenario"}]
    errors = (await call(client, "POST", "/api/objects", {"mode": "remove", "yaml": ""}, status=400))["errors"]
    assert errors[0]["field"] == "mode"


async def test_clone_nodes_and_delete_node_makes_its_pods_pending(serve):
    client = await serve(small_cluster())
    got = await call(client, "POST", "/api/nodes/clone", {"node": "n1", "count": 3})
    assert got == {"added": ["n1-sim-1", "n1-sim-2", "n1-sim-3"], "version": 1}
    got = await call(client, "POST", "/api/nodes/clone", {"node": "n1", "count": 1})
    assert got["added"] == ["n1-sim-4"]
    sc = await call(client, "GET", "/api/scenario")
    clone = next(n for n in sc["nodes"] if n["name"] == "n1-sim-2")
    assert clone["zone"] == "b" and clone["labels"][ZONE] == "b"
    assert "kubernetes.io/hostname" not in clone["labels"]      # it is the node's name: not repeated
    for body, fld in (({"node": "n1", "count": 0}, "count"), ({"node": "n1", "count": 10001}, "count"),
                      ({"node": "nope", "count": 1}, "node"), ({"node": "n1", "count": "2"}, "count")):
        errors = (await call(client, "POST", "/api/nodes/clone", body, status=400))["errors"]
        assert errors[0]["field"] == fld

    assert (await call(client, "DELETE", "/api/nodes/n1")) == {"version": 3}
    sc = await call(client, "GET", "/api/scenario")
    existing = next(p for p in sc["pods"] if p["key"] == "default/existing")
    assert existing["state"] == "pending" and existing["node"] is None
    assert "n1" not in {n["name"] for n in sc["nodes"]}
    await call(client, "DELETE", "/api/nodes/n1", status=404)
    assert (await call(client, "DELETE", "/api/pods/default/small")) == {"version": 4}
    await call(client, "DELETE", "/api/pods/default/small", status=404)
    run = await call(client, "POST", "/api/runs", {"label": "after the failure"})
    assert placements(run)["default/existing"] is not None     # placed again (on a clone)


# -- runs -------------------------------------------------------------------------------------

async def test_a_run_places_pods_and_is_kept(serve):
    sc = small_cluster()
    client = await serve(sc)
    run = await call(client, "POST", "/api/runs", {"label": "first"})
    assert run["id"] == 1 and run["label"] == "first" and run["version"] == 0 and run["config"] == DEFAULT_CONFIG
    by = placements(run)
    assert by == {"default/web-0": "n1", "default/web-1": "n1"}     # n0 carries a PreferNoSchedule taint
    first = run["placements"][0]
    assert set(first) == {"pod", "node", "code", "message", "nominatedNode", "victims", "sampling"}
    assert first["code"] == "Scheduled" and first["victims"] == []
    after = {n["node"]: n for n in run["utilisation"]["after"]["nodes"]}
    assert after["n1"]["requested"]["cpu"] == 4000
    assert set(run) >= {"id", "label", "version", "durationMs", "placements", "utilisation", "groups", "quotas",
                        "config"}
    assert await call(client, "GET", "/api/runs") == [
        {"id": 1, "label": "first", "placed": 2, "pending": 0, "durationMs": run["durationMs"], "version": 0}]
    assert (await call(client, "GET", "/api/runs/1"))["placements"] == run["placements"]
    await call(client, "GET", "/api/runs/7", status=404)
    await call(client, "GET", "/api/runs/x", status=400)
    # a pod that does not fit anywhere stays pending with the scheduler's reason
    await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(make_pod("huge", cpu="64"))})
    run = await call(client, "POST", "/api/runs", {})
    huge = next(p for p in run["placements"] if p["pod"] == "default/huge")
    assert huge["node"] is None and huge["code"] == "Unschedulable" and "Insufficient cpu" in huge["message"]
    assert run["id"] == 2 and run["version"] == 1


async def test_the_session_names_this_process_for_links_to_its_runs(serve):
    """Run ids count from 1 in every process: ``/api/session`` gives the id a link to a run carries
    (``#/run/3?ui=SESSION``), another for another server, and how many runs are kept; the token
    is needed as for the rest."""
    one = await serve(small_cluster())
    two = await serve(small_cluster(Limits(max_runs=5)))
    a = await call(one, "GET", "/api/session")
    b = await call(two, "GET", "/api/session")
    assert re.fullmatch(r"[0-9a-f]{8}", a["session"]) and a["maxRuns"] == 20
    assert b["session"] != a["session"] and b["maxRuns"] == 5
    assert await call(one, "GET", "/api/session") == a
    resp = await one.get("/api/session")
    assert resp.status == 401


async def test_runs_keep_at_most_twenty(serve):
    client = await serve(small_cluster())
    for _ in range(22):
        await call(client, "POST", "/api/runs", {})
    ids = [r["id"] for r in await call(client, "GET", "/api/runs")]
    assert ids == list(range(3, 23))
    await call(client, "GET", "/api/runs/2", status=404)


async def test_explain_is_simulates_trace_for_that_pod(serve):
    sc = small_cluster()
    client = await serve(sc)
    await call(client, "POST", "/api/runs", {})
    got = await call(client, "GET", "/api/runs/1/explain?pod=default/web-1")
    # the same scenario through Simulation.run directly, as pysched simulate --explain runs it
    nodes = [make_node("n0", cpu="4", memory="4Gi", labels={ZONE: "a"},
                       taints=[{"key": "spare", "effect": "PreferNoSchedule"}]),
             make_node("n1", cpu="4", memory="4Gi", labels={ZONE: "b"}),
             make_node("n2", cpu="1", memory="1Gi", labels={ZONE: "b"})]
    bound = [make_pod("existing", cpu="2", memory="2Gi", node_name="n1"),
             make_pod("small", cpu="900m", memory="512Mi", node_name="n2")]
    res = Simulation(configmod.default_config(), seed=0).run(
        Snapshot(nodes=nodes, pods=bound), [make_pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(2)],
        explain={"default/web-1"})
    expected = json.loads(json.dumps(res.explain["default/web-1"]))
    extra = {k: got.pop(k) for k in ("nodes", "chosen", "victims")}
    assert got == expected
    assert extra["chosen"] == "n1" and extra["victims"] == []
    rows = extra["nodes"]
    assert [r["node"] for r in rows] == ["n1", "n0", "n2"]         # best total first, the failed node last
    assert rows[0]["total"] == expected["totalScores"]["n1"] and rows[2]["total"] is None
    assert rows[0]["scores"]["NodeResourcesFit"] == expected["score"]["NodeResourcesFit"]["n1"]
    assert rows[2]["filters"]["NodeResourcesFit"] == "Insufficient cpu, Insufficient memory"
    assert all(v == "passed" for v in rows[0]["filters"].values())
    again = await call(client, "GET", "/api/runs/1/explain?pod=default/web-1")     # cached
    assert again["totalScores"] == expected["totalScores"]
    await call(client, "GET", "/api/runs/1/explain?pod=default/nobody", status=404)
    await call(client, "GET", "/api/runs/1/explain", status=400)


async def test_explain_and_export_of_an_old_run_survive_edits(serve):
    client = await serve(small_cluster())
    first = await call(client, "POST", "/api/runs", {})
    await call(client, "DELETE", "/api/nodes/n1")
    await call(client, "PUT", "/api/config", {"yaml": config(weight=10)})
    got = await call(client, "GET", "/api/runs/1/explain?pod=default/web-0")
    assert got["chosen"] == placements(first)["default/web-0"] == "n1"
    old = await call(client, "GET", "/api/export?run=1")
    assert old["config"] == DEFAULT_CONFIG and "name: n1\n" in old["scenario"]
    now = await call(client, "GET", "/api/export")
    assert "name: n1\n" not in now["scenario"]


async def test_compare_after_a_weight_change_shows_the_moved_pods(serve):
    client = await serve(small_cluster())
    a = await call(client, "POST", "/api/runs", {"label": "default weights"})
    await call(client, "PUT", "/api/config", {"yaml": config(weight=10)})
    b = await call(client, "POST", "/api/runs", {"label": "NodeResourcesFit x10"})
    # With NodeResourcesFit (LeastAllocated) weighing 10, the empty tainted n0 outscores n1.
    assert placements(a) == {"default/web-0": "n1", "default/web-1": "n1"}
    assert placements(b)["default/web-0"] == "n0"
    cmp = await call(client, "GET", f"/api/compare?a={a['id']}&b={b['id']}")
    assert {"pod": "default/web-0", "from": "n1", "to": "n0"} in cmp["moved"]
    assert cmp["newlyPending"] == [] and cmp["newlyPlaced"] == [] and cmp["pending"] == {"a": 0, "b": 0}
    assert cmp["utilisation"]["a"]["cpu"] == {"requested": 4900, "allocatable": 9000}
    assert cmp["utilisation"]["b"]["cpu"]["requested"] == 4900
    await call(client, "GET", "/api/compare?a=1&b=99", status=404)
    await call(client, "GET", "/api/compare?a=1", status=400)


async def test_one_run_at_a_time(serve):
    nodes = [make_node(f"n{i}", cpu="8", memory="16Gi") for i in range(100)]
    sc = Scenario.from_snapshot(Snapshot(nodes=nodes), [make_pod(f"p{i}", cpu="100m") for i in range(2500)])
    client = await serve(sc)
    state = client.server.app[STATE]
    first = asyncio.create_task(call(client, "POST", "/api/runs", {"label": "slow"}))
    for _ in range(5000):
        if state.running:
            break
        await asyncio.sleep(0.001)
    assert state.running
    errors = (await call(client, "POST", "/api/runs", {}, status=409))["errors"]
    assert "under way" in errors[0]["message"]
    # the server keeps answering meanwhile
    assert (await call(client, "GET", "/api/scenario"))["version"] == 0
    run = await first
    assert run["placed"] == 2500 and not state.running
    assert (await call(client, "POST", "/api/runs", {}))["id"] == 2


# -- export and replay ------------------------------------------------------------------------

async def test_export_round_trips(serve, tmp_path):
    sc = small_cluster()
    client = await serve(sc)
    await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump_all([
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                  "template": {"metadata": {"labels": {"app": "api"}},
                               "spec": {"schedulerName": "pysched", "priorityClassName": "high",
                                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "api"},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}}},
    ])})
    await call(client, "POST", "/api/nodes/clone", {"node": "n2", "count": 2})
    await call(client, "PUT", "/api/config", {"yaml": config(weight=10)})
    run = await call(client, "POST", "/api/runs", {})
    exported = await call(client, "GET", "/api/export")
    assert exported["config"] == config(weight=10)
    resp = await client.get("/api/export?download=scenario", headers=AUTH)
    assert resp.status == 200 and 'attachment; filename="scenario.yaml"' == resp.headers["Content-Disposition"]
    assert await resp.text() == exported["scenario"]
    resp = await client.get("/api/export?download=config", headers=AUTH)
    assert await resp.text() == exported["config"]

    path = tmp_path / "scenario.yaml"
    path.write_text(exported["scenario"])
    again = Scenario.from_snapshot(load_snapshot(path), None, exported["config"])
    assert len(again.pods) == len(sc.pods) and len(again.nodes) == 5
    client2 = await serve(again)
    run2 = await call(client2, "POST", "/api/runs", {})
    assert placements(run2) == placements(run) and len(placements(run)) == 4
    assert runner.run(again).payload is not None
    assert (await call(client2, "GET", "/api/export"))["scenario"] == exported["scenario"]


async def test_replay_steps_create_fail_node_and_delete(serve):
    client = await serve(small_cluster())
    assert await call(client, "GET", "/api/replay") == {"total": 0, "current": 0, "steps": []}
    await call(client, "POST", "/api/replay/step", {}, status=409)
    seq = {"steps": [
        {"at": "0s", "create": [make_node("n3", cpu="4", memory="4Gi"), make_pod("late", cpu="1", memory="1Gi")]},
        {"at": "30s", "failNode": "n1"},
        {"at": "1m", "delete": "default/late"},
    ]}
    got = await call(client, "POST", "/api/replay", {"yaml": yaml.safe_dump(seq)})
    assert got == {"total": 3, "current": 0, "steps": [
        {"at": "0s", "description": "create Node n3, Pod default/late"},
        {"at": "30s", "description": "fail node n1"},
        {"at": "1m", "description": "delete pod default/late"}]}
    step = await call(client, "POST", "/api/replay/step", {})
    assert step["current"] == 1 and step["total"] == 3
    assert placements(step["run"])["default/late"] is not None
    step = await call(client, "POST", "/api/replay/step", {})
    by = placements(step["run"])
    assert by["default/existing"] not in (None, "n1")      # n1 failed: its pod is scheduled again
    assert "n1" not in by.values()
    step = await call(client, "POST", "/api/replay/step", {})
    assert "default/late" not in placements(step["run"]) and step["current"] == 3
    assert (await call(client, "GET", "/api/replay"))["current"] == 3
    await call(client, "POST", "/api/replay/step", {}, status=409)
    runs = await call(client, "GET", "/api/runs")
    assert [r["label"] for r in runs] == ["replay 1/3 at 0s: create Node n3, Pod default/late",
                                         "replay 2/3 at 30s: fail node n1", "replay 3/3 at 1m: delete pod default/late"]

    for bad, fld in (({"steps": []}, "steps"), ({"steps": [{"at": "soon", "failNode": "n0"}]}, "steps[0].at"),
                     ({"steps": [{"at": "1s", "failNode": "n0", "delete": "a/b"}]}, "steps[0]"),
                     ({"steps": [{"at": "1s", "delete": "nobody"}]}, "steps[0].delete"),
                     ({"steps": [{"at": "2s", "failNode": "n0"}, {"at": "1s", "failNode": "n2"}]}, "steps[1].at")):
        errors = (await call(client, "POST", "/api/replay", {"yaml": yaml.safe_dump(bad)}, status=400))["errors"]
        assert errors[0]["field"] == fld, bad
    # a step that does not apply changes nothing and can be fixed by loading another replay
    await call(client, "POST", "/api/replay", {"yaml": yaml.safe_dump({"steps": [{"failNode": "ghost"}]})})
    version = (await call(client, "GET", "/api/scenario"))["version"]
    errors = (await call(client, "POST", "/api/replay/step", {}, status=400))["errors"]
    assert errors == [{"field": "steps[0].failNode", "message": "no node named 'ghost' in the scenario"}]
    assert (await call(client, "GET", "/api/replay"))["current"] == 0
    assert (await call(client, "GET", "/api/scenario"))["version"] == version


# -- the rest of a run, serving, logs ---------------------------------------------------------

async def test_runs_report_quotas_and_gangs(serve):
    nodes = [make_node("n0", cpu="4", memory="8Gi")]
    team = [make_pod("old", namespace="team", cpu="500m", memory="1Gi", node_name="n0"),
            make_pod("new", namespace="team", cpu="1", memory="1Gi")]
    gang = [make_pod(f"g{i}", cpu="100m", labels={"scheduling.x-k8s.io/pod-group": "gang"}) for i in range(2)]
    objects = [
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
         "metadata": {"name": "quota", "namespace": "team"}, "spec": {"min": {"cpu": "1"}, "max": {"cpu": "3",
                                                                                               "memory": "4Gi"}}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "gang"},
         "spec": {"minMember": 2}}]
    sc = Scenario.from_snapshot(Snapshot(nodes=nodes, pods=team[:1]), [*objects, team[1], *gang])
    client = await serve(sc)
    run = await call(client, "POST", "/api/runs", {})
    assert run["quotas"] == [
        {"quota": "team/quota", "resource": "cpu", "used": 1500, "min": 1000, "max": 3000},
        {"quota": "team/quota", "resource": "memory", "used": 2 * 2**30, "min": None, "max": 4 * 2**30}]
    assert [(g["group"], g["placed"], g["minMember"]) for g in run["groups"]] == [("default/gang", 2, 2)]
    errors = (await call(client, "POST", "/api/objects", {"yaml": yaml.safe_dump(
        {"kind": "ElasticQuota", "metadata": {"name": "q2", "namespace": "team"},
         "spec": {"max": {"cpu": "lots"}}})}, status=400))["errors"]
    assert errors == [{"document": 0, "field": "spec.max.cpu", "message": "invalid quantity 'lots'"}]


async def test_serve_logs_in_with_the_printed_address_and_logs_runs(tmp_path, caplog):
    import aiohttp

    from pysched.ui.server import serve as serve_ui
    (tmp_path / "index.html").write_text("<!doctype html><title>ui</title>")
    stop = asyncio.Event()
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_ui(small_cluster(), port=0, static_dir=tmp_path, stop=stop,
                                        on_ready=ready.set_result, gc_tuning=False))
    url = await asyncio.wait_for(ready, 10)
    assert url.startswith("http://127.0.0.1:") and "/?token=" in url
    caplog.set_level("INFO", logger="pysched.ui.server")
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(url) as resp:                      # follows the redirect with the cookie
            assert resp.status == 200 and "<title>ui</title>" in await resp.text()
            assert str(resp.url).endswith("/") and "token" not in str(resp.url)
        base = url.split("/?")[0]
        async with http.post(f"{base}/api/runs", json={"label": "logged"}) as resp:
            assert resp.status == 200
        async with http.put(f"{base}/api/config", json={"yaml": "kind: Nope"}) as resp:
            assert resp.status == 400
    stop.set()
    await asyncio.wait_for(task, 10)
    finished = next(r for r in caplog.records if r.getMessage() == "run finished")
    assert finished.kv["run"] == 1 and finished.kv["label"] == "logged" and finished.kv["placed"] == 2
    refused = next(r for r in caplog.records if r.getMessage() == "request refused")
    assert refused.kv["status"] == 400 and refused.kv["path"] == "/api/config" and refused.kv["field"] == "apiVersion"


async def test_review_fixes_workload_cap_token_bytes_and_priorityclass(tmp_path):
    """A huge replicas is refused at its field; a header token that is not UTF-8 is refused (401,
    not 500); a PriorityClass pending pods use cannot be deleted."""
    from aiohttp.test_utils import TestClient, TestServer

    from pysched.ui.scenario import MAX_WORKLOAD_PODS, Scenario
    from pysched.ui.server import make_app

    sc = Scenario()
    app = make_app(sc, token="t0ken")
    async with TestClient(TestServer(app)) as c:
        auth = {"Authorization": "Bearer t0ken"}
        big = (f"kind: Deployment\nmetadata: {{name: big}}\nspec:\n  replicas: {MAX_WORKLOAD_PODS + 1}\n"
               "  selector: {matchLabels: {a: b}}\n"
               "  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}")
        r = await c.post("/api/objects", json={"yaml": big}, headers=auth)
        assert r.status == 400 and (await r.json())["errors"][0]["field"] == "spec.replicas"
        r = await c.get("/api/scenario", headers={"Authorization": "Bearer \udcff"})
        assert r.status == 401
        docs = ("kind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\nkind: Node\nmetadata: {name: n1}\n"
                "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n---\nkind: Pod\n"
                "metadata: {name: p, namespace: default}\nspec: {priorityClassName: high, containers: "
                "[{name: c, image: x}]}")
        assert (await c.post("/api/objects", json={"yaml": docs}, headers=auth)).status == 200
        r = await c.post("/api/objects", json={"yaml": "kind: PriorityClass\nmetadata: {name: high}\n",
                                               "mode": "delete"}, headers=auth)
        assert r.status == 400 and "default/p" in (await r.json())["errors"][0]["message"]
