"""Differential check: the same random clusters and pods, judged by kube-scheduler 1.35 and by us.

For each seed a fresh control plane gets a random cluster (zones, labels, taints, cordons,
capacities, extended resources, namespaces with labels, pods already bound with labels, host
ports and anti-affinity, bound PVs with node affinity) and a batch of random pending pods
(requests, nodeSelector, node affinity with every operator - Gt/Lt values such as ``5_0`` or
``0x3`` that the API server accepts and kube-scheduler cannot parse included -, tolerations, host ports, hard
topology spread with minDomains / inclusion policies / matchLabelKeys, required pod affinity and
anti-affinity with namespaces and namespaceSelector, PVC references). A few bound pods are caught
in an in-place resize (``resized_pods``): what they count for follows the release.

Each scheduler runs alone on the API server, with a recording extender: a scheduler calls an
extender's filter verb with exactly the nodes its own plugins found feasible (all of them: fewer
than 100 nodes, ``percentageOfNodesToScore: 100``), so the recording *is* its feasible set. The
extender then rejects every node, which keeps every pod pending and the cluster unchanged for the
next scheduler. Pods for which no node was feasible carry that scheduler's FailedScheduling
message instead. kube-scheduler goes first, then our scheduler process with the same setup.
As a third opinion our engine also evaluates the pods offline on the objects read back from the
API server (the path ``pysched simulate`` uses).

Agreement is counted per pod: schedulable-or-not, the feasible node set when schedulable, and
the reason histogram when not. Run ``python -m tests.differential --seeds 10`` for a report.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from pysched.apis import config as configmod
from pysched.apis.core.resources import accounting, accounting_for
from pysched.client.auth import load_kubeconfig
from pysched.client.rest import KubeClient
from pysched.framework.features import default_gates
from pysched.tools.offline import OfflineScheduler
from pysched_dev.devcluster import ControlPlane, KubeSchedulerProcess, binaries_version, free_port
from pysched_dev.testkit import create_node, create_pods, list_pods, make_node, make_pod

Z = "topology.kubernetes.io/zone"
H = "kubernetes.io/hostname"
PROBE_REASON = "differential probe"
KUBE_PROFILE = "kube-diff"


@dataclass
class PodResult:
    name: str
    kube_feasible: list[str] | None      # None: kube found no feasible node
    ours_feasible: list[str] | None      # our scheduler process, through the same recording extender
    kube_message: str = ""
    ours_message: str = ""
    offline_feasible: list[str] | None = None   # our engine evaluated offline on the same objects

    @property
    def schedulable_agree(self) -> bool:
        return (self.kube_feasible is None) == (self.ours_feasible is None)

    @property
    def feasible_agree(self) -> bool:
        if self.kube_feasible is None or self.ours_feasible is None:
            return self.schedulable_agree
        return sorted(self.kube_feasible) == sorted(self.ours_feasible)

    @property
    def offline_agree(self) -> bool:
        a, b = self.kube_feasible, self.offline_feasible
        return (a is None and b is None) or (a is not None and b is not None and sorted(a) == sorted(b))

    @property
    def message_agree(self) -> bool:
        if self.kube_feasible is not None or self.ours_feasible is not None:
            return True
        # The whole message: FitError reasons and every PostFilter plugin's verdict (DynamicResources'
        # "no new claims to deallocate" before 1.37, or "not found" when an earlier PreFilter
        # rejected the pod; then DefaultPreemption's).
        return self.kube_message == self.ours_message


@dataclass
class SeedResult:
    seed: int
    pods: list[PodResult] = field(default_factory=list)



@functools.cache
def no_claims_verdict() -> str:
    """DynamicResources' PostFilter verdict in the FailedScheduling message of a pod without claims,
    at the control plane's release (both schedulers follow it): 1.35 and 1.36 say "no new claims
    to deallocate, " before DefaultPreemption's, 1.37 nothing."""
    return "no new claims to deallocate, " if binaries_version() < (1, 37) else ""


def strip_postfilter(msg: str) -> str:
    """The FitError part only, without the PostFilter plugins' verdicts after the reason list
    (DefaultPreemption's "preemption: ...", DynamicResources' "no new claims to deallocate")."""
    head = "nodes are available: "
    start = msg.find(head)
    i = msg.find(". ", start + len(head) if start >= 0 else 0)
    return msg[: i + 1] if i >= 0 else msg


# -- random cluster ---------------------------------------------------------------------------

def gen_cluster(rng: random.Random):
    nodes = []
    n_nodes = rng.randint(6, 12)
    for i in range(n_nodes):
        labels = {}
        if rng.random() < 0.9:
            labels[Z] = rng.choice(["a", "b", "c"])
        labels["disk"] = rng.choice(["ssd", "hdd"])
        labels["cores"] = str(rng.choice([2, 4, 8, 16]))
        if rng.random() < 0.5:
            labels["team"] = rng.choice(["red", "blue"])
        taints = []
        if rng.random() < 0.25:
            taints.append({"key": "dedicated", "value": rng.choice(["gpu", "db"]),
                           "effect": rng.choice(["NoSchedule", "NoExecute"])})
        if rng.random() < 0.2:
            taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        extended = {"example.com/dongle": str(rng.randint(0, 2))} if rng.random() < 0.4 else None
        nodes.append(make_node(f"n{i:02d}", cpu=rng.choice(["1", "2", "4"]), memory=rng.choice(["2Gi", "4Gi", "8Gi"]),
                               pods=rng.choice(["4", "8", "110"]), labels=labels, taints=taints or None,
                               unschedulable=rng.random() < 0.1, extended=extended))
    namespaces = {"d1": {"env": "dev"}, "d2": {"env": "prod"}}
    existing = []
    for i in range(rng.randint(5, 15)):
        nd = rng.choice(nodes)
        name = nd["metadata"]["name"]
        ns = rng.choice(["d1", "d2"])
        labels = {"app": rng.choice(["web", "db", "cache"]), "rev": rng.choice(["1", "2"])}
        affinity = None
        if rng.random() < 0.25:
            affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": rng.choice([H, Z]),
                 "labelSelector": {"matchLabels": {"app": rng.choice(["web", "db"])}},
                 **({"namespaceSelector": {}} if rng.random() < 0.3 else {})}]}}
        p = make_pod(f"ex-{i}", namespace=ns, scheduler="already-bound", cpu=rng.choice(["100m", "250m", "500m"]),
                     memory=rng.choice(["64Mi", "256Mi"]), labels=labels, node_name=name, affinity=affinity,
                     host_ports=[8080] if rng.random() < 0.2 else None)
        existing.append(p)
    return nodes, namespaces, existing


def resized_pods(nodes: list[dict], rng: random.Random) -> list[tuple[dict, dict]]:
    """Bound pods caught in an in-place resize, with the status a kubelet would report (a separate
    random stream, so the clusters and pods of a seed stay what they were): ``(pod, status)``.

    * both ways: container c grows (spec = allocated > running), b shrinks (running > spec =
      allocated): kube-scheduler 1.35/1.36 count the larger of each (c's spec + b's running), 1.37
      the largest of the three sums;
    * Infeasible: c's spec is out of reach, the kubelet keeps the old size; b has no status yet:
      1.35/1.36 count b's spec, 1.37 nothing for b;
    * pod-level: ``status.allocatedResources`` and ``status.resources`` above what the containers
      ask (1.37 counts them; a 1.35 API server drops them)."""
    out = []
    for i, kind in enumerate(("both-ways", "infeasible", "pod-level")):
        nd = rng.choice(nodes)["metadata"]["name"]
        small, large = rng.choice([("250m", "750m"), ("500m", "1")])
        p = make_pod(f"rs-{i}", namespace=rng.choice(["d1", "d2"]), scheduler="already-bound", cpu=large,
                     memory=rng.choice(["64Mi", "256Mi"]), labels={"app": "resized"}, node_name=nd)
        b = json.loads(json.dumps(p["spec"]["containers"][0]))
        b["name"] = "b"
        b["resources"] = {"requests": {"cpu": small}}
        p["spec"]["containers"].append(b)

        def cs(name: str, running: str, allocated: str) -> dict:
            return {"name": name, "image": "x", "imageID": "", "ready": False, "restartCount": 0,
                    "state": {"waiting": {}}, "resources": {"requests": {"cpu": running}},
                    "allocatedResources": {"cpu": allocated}}
        if kind == "both-ways":
            status = {"containerStatuses": [cs("c", small, large), cs("b", large, small)]}
        elif kind == "infeasible":
            status = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                                      "message": "Node didn't have enough capacity"}],
                      "containerStatuses": [cs("c", small, small)]}
        else:
            status = {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "2"}}
        out.append((p, status))
    return out


def _expr(rng: random.Random) -> dict:
    key = rng.choice([Z, "disk", "cores", "team", "missing"])
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    values = {Z: ["a", "b", "c"], "disk": ["ssd", "hdd"], "cores": ["2", "4", "8", "16"], "team": ["red", "blue"],
              "missing": ["x"]}[key]
    if op in ("In", "NotIn"):
        return {"key": key, "operator": op, "values": rng.sample(values, rng.randint(1, len(values)))}
    if op in ("Gt", "Lt"):
        return {"key": "cores", "operator": op, "values": [str(rng.choice([1, 3, 5, 9]))]}
    return {"key": key, "operator": op}


def gen_pods(rng: random.Random, count: int) -> list[dict]:
    pods = []
    for i in range(count):
        ns = rng.choice(["d1", "d1", "d2"])
        labels = {"app": rng.choice(["web", "db", "cache", "job"]), "rev": rng.choice(["1", "2"])}
        kw: dict = {}
        if rng.random() < 0.3:
            kw["node_selector"] = {rng.choice(["disk", "team"]): rng.choice(["ssd", "hdd", "red"])}
        if rng.random() < 0.35:
            terms = [{"matchExpressions": [_expr(rng) for _ in range(rng.randint(1, 2))]}
                     for _ in range(rng.randint(1, 2))]
            if rng.random() < 0.15:
                terms.append({"matchFields": [{"key": "metadata.name", "operator": "In",
                                               "values": [f"n{rng.randint(0, 11):02d}"]}]})
            kw["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
        if rng.random() < 0.4:
            tol = rng.choice([
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                {"key": "dedicated", "operator": "Exists"},
                {"operator": "Exists"},
                {"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
            ])
            kw["tolerations"] = [tol]
        if rng.random() < 0.3:
            c = {"maxSkew": rng.randint(1, 2), "topologyKey": rng.choice([Z, H]), "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": labels["app"]}}}
            if rng.random() < 0.3:
                c["minDomains"] = rng.randint(2, 4)
            if rng.random() < 0.3:
                c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
            if rng.random() < 0.3:
                c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
            if rng.random() < 0.2:
                c["matchLabelKeys"] = ["rev"]
            kw["spread"] = [c]
        if rng.random() < 0.3:
            term = {"topologyKey": rng.choice([Z, H]),
                    "labelSelector": {"matchLabels": {"app": rng.choice(["web", "db", "cache"])}}}
            r = rng.random()
            if r < 0.2:
                term["namespaces"] = ["d2"]
            elif r < 0.4:
                term["namespaceSelector"] = {"matchLabels": {"env": rng.choice(["dev", "prod"])}}
            elif r < 0.5:
                term["namespaceSelector"] = {}
            kind = rng.choice(["podAffinity", "podAntiAffinity"])
            aff = kw.setdefault("affinity", {})
            aff[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        ext = {"example.com/dongle": "1"} if rng.random() < 0.15 else None
        p = make_pod(f"t-{i:02d}", namespace=ns, scheduler=KUBE_PROFILE,
                     cpu=rng.choice([None, "100m", "500m", "1", "3"]), memory=rng.choice([None, "128Mi", "1Gi", "6Gi"]),
                     labels=labels, extended=ext, host_ports=[8080] if rng.random() < 0.1 else None, **kw)
        if rng.random() < 0.1:
            p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {
                "claimName": rng.choice(["bound-a", "missing", "unbound"])}}]
            p["metadata"]["namespace"] = "d1"
        pods.append(p)
    return pods


VOLUME_OBJECTS = [
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-a"},
     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
              "hostPath": {"path": "/tmp/pv-a"},
              "claimRef": {"namespace": "d1", "name": "bound-a"},
              "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                  {"key": Z, "operator": "In", "values": ["a"]}]}]}}}},
]


async def _bind_claim(admin: KubeClient) -> None:
    """Create a claim and complete its binding the way the PV controller would."""
    await admin.request("POST", "/api/v1/persistentvolumes", body=VOLUME_OBJECTS[0], rate_limit=False)
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "bound-a", "namespace": "d1",
           "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                    "storageClassName": "", "volumeName": "pv-a"}}
    await admin.request("POST", "/api/v1/namespaces/d1/persistentvolumeclaims", body=pvc, rate_limit=False)
    await admin.request("PATCH", "/api/v1/namespaces/d1/persistentvolumeclaims/bound-a/status",
                        body={"status": {"phase": "Bound"}}, content_type="application/merge-patch+json",
                        rate_limit=False)
    unbound = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "unbound", "namespace": "d1"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": ""}}
    await admin.request("POST", "/api/v1/namespaces/d1/persistentvolumeclaims", body=unbound, rate_limit=False)


# -- the recording extender -------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.feasible: dict[str, list[str]] = {}

    async def filter(self, request: web.Request) -> web.Response:
        args = await request.json()
        pod = args.get("Pod") or {}
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        names = args.get("NodeNames") or [n["metadata"]["name"] for n in ((args.get("Nodes") or {}).get("items") or [])]
        self.feasible.setdefault(key, list(names))
        return web.json_response({"NodeNames": [], "FailedNodes": {n: PROBE_REASON for n in names},
                                  "FailedAndUnresolvableNodes": {}, "Error": ""})


# -- one seed ---------------------------------------------------------------------------------

# Gt/Lt values the API server accepts (valid label values) that strconv.ParseInt(v, 10, 64)
# refuses - the term then matches no node - and one it parses ("05").
ODD_INTEGERS = ("5_0", "0x3", "1e2", "05")


def odd_integers(pods: list[dict], rng: random.Random) -> None:
    """Replace some required Gt/Lt values with ``ODD_INTEGERS`` (a separate random stream, so the
    clusters and pods of a seed stay what they were)."""
    for p in pods:
        required = ((p["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}
        for term in required.get("nodeSelectorTerms") or ():
            for e in term.get("matchExpressions") or ():
                if e["operator"] in ("Gt", "Lt") and rng.random() < 0.5:
                    e["values"] = [rng.choice(ODD_INTEGERS)]


async def run_seed(seed: int, pods_per_seed: int = 25, log=print) -> SeedResult:
    rng = random.Random(seed)
    nodes, namespaces, existing = gen_cluster(rng)
    pods = gen_pods(rng, pods_per_seed)
    odd_integers(pods, random.Random(seed * 16 + 1))
    resized = resized_pods(nodes, random.Random(seed * 16 + 2))
    with ControlPlane() as cp:
        admin = KubeClient(load_kubeconfig(cp.kubeconfig), qps=0, burst=1)
        try:
            return await _run(cp, admin, seed, nodes, namespaces, existing, pods, log, resized)
        finally:
            await admin.close()


async def _run(cp, admin, seed, nodes, namespaces, existing, pods, log, resized=()) -> SeedResult:
    for ns, labels in namespaces.items():
        await admin.request("POST", "/api/v1/namespaces", rate_limit=False,
                            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    for n in nodes:
        await create_node(admin, n)
    await _bind_claim(admin)
    await create_pods(admin, existing)
    await create_pods(admin, [p for p, _ in resized])
    for p, status in resized:
        meta = p["metadata"]
        await admin.request("PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                            body={"status": status}, content_type="application/merge-patch+json", rate_limit=False)

    names = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
    kube_rec, kube_msgs = await _judge(cp, admin, names, "kube", pods=pods)
    ours_rec, ours_msgs = await _judge(cp, admin, names, "ours")

    # Our engine on the same objects, read back from the API server, counting pods' requests as
    # the control plane's release does (the scheduler process settles that from the API server).
    release = binaries_version(cp.bin)
    with accounting(accounting_for(release, default_gates(release))):
        return await _offline(admin, seed, release, kube_rec, kube_msgs, ours_rec, ours_msgs, log)


async def _offline(admin, seed, release, kube_rec, kube_msgs, ours_rec, ours_msgs, log) -> SeedResult:
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": KUBE_PROFILE}]})
    ours = OfflineScheduler(cfg, kube_version=release, feature_gates=default_gates(release))
    items, _ = await admin.list_all("/api/v1/nodes")
    for n in items:
        ours.add_node(n)
    for path in ("/api/v1/namespaces", "/api/v1/persistentvolumeclaims", "/api/v1/persistentvolumes",
                 "/apis/storage.k8s.io/v1/storageclasses"):
        objs, _ = await admin.list_all(path)
        kind = {"namespaces": "Namespace", "persistentvolumeclaims": "PersistentVolumeClaim",
                "persistentvolumes": "PersistentVolume", "storageclasses": "StorageClass"}[path.rsplit("/", 1)[1]]
        for o in objs:
            o["kind"] = kind
            ours.add_object(o)
    live = await list_pods(admin)
    for p in live:
        if p["spec"].get("nodeName"):
            ours.add_pod(p)
    result = SeedResult(seed)
    all_names = [n["metadata"]["name"] for n in items]
    for p in live:
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        if p["spec"].get("schedulerName") != KUBE_PROFILE:
            continue
        offline = [n for n in all_names if ours.filter_status(p, n) is None] or None
        out = ours.schedule(p, assume=False)
        r = PodResult(key, kube_rec.get(key), ours_rec.get(key), kube_msgs.get(key, ""),
                      ours_msgs.get(key, "") if key not in ours_rec else "", offline)
        result.pods.append(r)
        if offline is None and not r.ours_message:
            r.ours_message = out.message
        if not (r.feasible_agree and r.message_agree and r.offline_agree):
            log(f"seed {seed} {key}: kube={sorted(r.kube_feasible or [])} ours={sorted(r.ours_feasible or [])} "
                f"offline={sorted(offline or [])}\n  kube: {r.kube_message}\n"
                f"  ours: {r.ours_message}\n"
                f"  spec: {json.dumps(p['spec'], sort_keys=True)[:1500]}")
    return result


async def _judge(cp, admin, names: set[str], who: str, pods=None) -> tuple[dict, dict]:
    """Run one scheduler (kube-scheduler or ours) with a recording extender until it judged every pod."""
    rec = Recorder()
    app = web.Application()
    app.router.add_post("/filter", rec.filter)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    common = {"percentageOfNodesToScore": 100, "podInitialBackoffSeconds": 300, "podMaxBackoffSeconds": 300,
              "clientConnection": {"qps": 1000, "burst": 1000}, "leaderElection": {"leaderElect": False},
              "profiles": [{"schedulerName": KUBE_PROFILE}],
              "extenders": [{"urlPrefix": f"http://127.0.0.1:{port}", "filterVerb": "filter",
                             "nodeCacheCapable": True}]}
    if who == "kube":
        proc = KubeSchedulerProcess(cp, common).start()
        stop = proc.stop
    else:
        # kube-scheduler's PodScheduled conditions go first: a message read afterwards is ours
        # (messages that agree word for word could not tell the two apart otherwise).
        for key in names:
            ns, name = key.split("/", 1)
            await admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                                body={"status": {"conditions": [{"type": "PodScheduled", "$patch": "delete"}]}},
                                content_type="application/strategic-merge-patch+json")
        import subprocess

        import yaml
        path = cp.workdir / "ours-diff.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND, **common}))
        logf = open(cp.workdir / "ours-diff.log", "ab")
        p = subprocess.Popen([sys.executable, "-m", "pysched", "--config", str(path),
                              "--kubeconfig", str(cp.kubeconfig), "--no-serve"],
                             stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                             cwd=str(Path(__file__).resolve().parents[1]))

        def stop():
            import os
            import signal
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(20)
            logf.close()
    try:
        if pods is not None:
            await create_pods(admin, pods)
        deadline = time.monotonic() + 90
        messages: dict[str, str] = {}
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            messages = {}
            for pod in await list_pods(admin):
                key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if key not in names:
                    continue
                for c in (pod.get("status") or {}).get("conditions") or ():
                    if c.get("type") == "PodScheduled" and c.get("status") == "False":
                        msg = c.get("message", "")
                        # a pod whose feasible nodes the probe extender rejected is judged by the recording
                        if PROBE_REASON not in strip_postfilter(msg):
                            messages[key] = msg
            if all(k in rec.feasible or k in messages for k in names):
                break
        else:
            missing = sorted(k for k in names if k not in rec.feasible and k not in messages)
            raise AssertionError(f"{who} did not judge every pod: {missing}")
    finally:
        stop()
        await runner.cleanup()
    return rec.feasible, messages


def summarize(results: list[SeedResult]) -> dict:
    pods = [p for r in results for p in r.pods]
    n = len(pods)
    sched = [p for p in pods if p.kube_feasible is not None and p.ours_feasible is not None]
    unsched = [p for p in pods if p.kube_feasible is None and p.ours_feasible is None]
    return {
        "seeds": len(results),
        "pods": n,
        "schedulable_agreement": sum(p.schedulable_agree for p in pods) / n if n else 1.0,
        "feasible_set_agreement": sum(p.feasible_agree for p in pods) / n if n else 1.0,
        "message_agreement_when_unschedulable": ((sum(p.message_agree for p in unsched) / len(unsched))
                                                 if unsched else 1.0),
        "offline_engine_agreement": sum(p.offline_agree for p in pods) / n if n else 1.0,
        "schedulable_pods": len(sched),
        "unschedulable_pods": len(unsched),
    }


async def main_async(seeds: list[int], pods_per_seed: int) -> dict:
    results = []
    for s in seeds:
        results.append(await run_seed(s, pods_per_seed))
        print(json.dumps({"seed": s, **summarize([results[-1]])}), file=sys.stderr)
    return summarize(results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--pods", type=int, default=25)
    a = ap.parse_args()
    summary = asyncio.run(main_async(list(range(a.first_seed, a.first_seed + a.seeds)), a.pods))
    print(json.dumps(summary, indent=2))
    agree = summary["feasible_set_agreement"] == 1.0 and summary["message_agreement_when_unschedulable"] == 1.0
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
