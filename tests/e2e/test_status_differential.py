"""PodGroup and ElasticQuota status against scheduler-plugins' own status controller (``cmd/controller``,
built by ``hack/scheduler-plugins.sh``): the same PodGroups, ElasticQuotas and pods observed once by
upstream's controller and once by pysched's (which runs in the scheduler process: a profile enabling
Coscheduling and CapacityScheduling, ``test_capacity_scheduling.quota_config``), one after the
other on one API server, each run in namespaces of its own, the first controller stopped before
the second starts.

No scheduler serves the pods (``schedulerName: nobody``): the test plays scheduler and kubelet,
binding pods through the binding subresource and setting phases through the status subresource
(``podgroup_kit``). After each step the status of every object is read once nothing has changed for
``QUIET`` seconds. PodGroups (``groups`` namespace; every member owned by the Job ``<group>-job``):

====  =====================================  ==========================================================
step  what happens                           upstream's status (``EXPECTED_UPSTREAM``)
====  =====================================  ==========================================================
1     groups a, b, d (minMember 2), c (3)    all Pending
2     a0, c0, c1 created                     all Pending (fewer members than minMember)
3     a1, b0, b1, d0, d1 created             a, b, d Scheduling, occupiedBy ``groups/<g>-job``
4     a0 a1 b0 b1 d0 d1 c0 Running           a, b, d Running (running 2); c Pending (counts untouched)
5     a0 Succeeded; d1 deleted               a Running (running 1, succeeded 1); d Pending (running 1)
6     a1 Succeeded; d0 deleted               a Finished (succeeded 2); d unchanged
7     b1 Failed                              b Failed (running 1, failed 1)
8     b0 Succeeded                           b unchanged (Failed is final)
====  =====================================  ==========================================================

ElasticQuotas, in the same steps: ``quota`` (min cpu 2, memory 2Gi; max cpu 4, memory 4Gi,
nvidia.com/gpu 2) with pods q0 (300m, 300Mi), q1 (100m, 100Mi), q2 (1500m, 1Gi, 1 GPU) and q3
(250m, ephemeral-storage 1Gi, no memory), all created unbound in step 2; q1 q2 q3 Running in 3;
q0 bound but left Pending in 4, Running in 5; q1 Succeeded in 6; q2 Failed in 7; q3 deleted in 8.
``decimal`` (min cpu 1, memory 1G): d0 (100m, 100M) and d1 (0.5, 250M), Running from step 3.
``overhead`` (min cpu 1, memory 1Gi): o0 (100m, 100Mi) of a RuntimeClass whose overhead is 250m
and 64Mi (the admission plugin copies it into ``spec.overhead``), Running from step 3.

Upstream writes ``status.used`` as ``quota.Add`` of Quantities: a zero (``"0"``) for every
resource ``min`` or ``max`` names, plus every resource a Running pod requests - ``cpu`` in
millicores unless whole (``"1850m"``, ``"2"``), binary memory in its largest exact binary suffix
(``"1124Mi"``, ``"1Gi"``), decimal memory with a decimal suffix (``"350M"``); a key only pods
brought (``ephemeral-storage``) goes away with them. pysched agrees on all of it - key set and
strings - for Running pods, except:

* **PodGroup ``scheduleStartTime``**: upstream never writes it; pysched sets it when the group first
  reaches Scheduling (a, b, d from step 3; c never). Compared by presence only.
* **PodGroup counts while Pending**: upstream counts pods only outside Pending, so c (Pending, one
  member Running) has no ``running`` upstream and ``running: 1`` in pysched from step 4; and d,
  back in Pending with its last member deleted in step 6, keeps upstream's stale ``running: 1``
  where pysched drops it. (Both documented in ``controllers/podgroup_status``.)
* **Pending-but-bound pods**: upstream counts Running pods only; pysched every pod on a node and
  not terminated, so in step 4 pysched's ``quota`` reads cpu ``2150m``, memory ``1424Mi`` where
  upstream still reads ``1850m``, ``1124Mi`` (q0 bound, not yet Running). From step 5 they agree.
* **Decimal memory**: the same amount, formatted differently: upstream ``"350M"``, pysched
  ``"350000000"`` (pysched formats memory with binary suffixes or as plain bytes).
* **Pod overhead**: upstream leaves ``spec.overhead`` out (its ``quota.Add(result, overhead)``
  drops the sum), pysched counts it: ``overhead`` reads cpu ``100m``, memory ``100Mi`` upstream
  and ``350m``, ``164Mi`` in pysched.
"""

from __future__ import annotations

import asyncio
import copy
import time

import pytest

from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, make_node, make_pod

from .conftest import wait_for
from .podgroup_kit import PG_API, bind, create_podgroup, install_crd, member, podgroup, set_phase
from .preemption_kit import force_delete
from .scheduler_plugins_kit import pysched_controllers_starter, upstream_controller_starter
from .test_capacity_scheduling import EQ_API, create_quota, install_quota_crd, quota_config

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]
GPU = "nvidia.com/gpu"
NODE = "n0"
QUIET = 1.5           # seconds without a status change before a step's result is read
GROUPS = {"a": 2, "b": 2, "c": 3, "d": 2}      # PodGroup -> minMember
QUOTAS = {"quota": ({"cpu": "2", "memory": "2Gi"}, {"cpu": "4", "memory": "4Gi", GPU: "2"}),
          "decimal": ({"cpu": "1", "memory": "1G"}, {}),
          "overhead": ({"cpu": "1", "memory": "1Gi"}, {})}
RUNTIME_CLASS = "with-overhead"
OVERHEAD = {"cpu": "250m", "memory": "64Mi"}


class Run:
    """One controller's run: its namespaces (``<kind>-<run>``) and the test's scheduler/kubelet acts."""

    def __init__(self, admin, name: str):
        self.admin, self.name = admin, name

    def ns(self, kind: str) -> str:
        return f"{kind}-{self.name}"

    async def members(self, *names: str) -> None:
        await create_pods(self.admin, [member(n, self.ns("groups"), n[0], owner=f"{n[0]}-job") for n in names])

    async def quota_pod(self, kind: str, name: str, cpu: str, memory: str | None, runtime_class: str | None = None,
                        **extended: str) -> None:
        pod = make_pod(name, namespace=self.ns(kind), scheduler="nobody", cpu=cpu, memory=memory,
                       extended=extended or None)
        if runtime_class:
            pod["spec"]["runtimeClassName"] = runtime_class
        await create_pods(self.admin, [pod])

    async def phase(self, kind: str, names: str, phase: str, *, bind_first: bool = True) -> None:
        """Bind each pod (when ``bind_first``) and set its phase, as a scheduler and a kubelet would."""
        for name in names.split():
            if bind_first:
                await bind(self.admin, self.ns(kind), name, NODE)
            if phase != "Pending":
                await set_phase(self.admin, self.ns(kind), name, phase)

    async def delete(self, kind: str, *names: str) -> None:
        for name in names:
            await force_delete(self.admin, self.ns(kind), name)


async def step1(r: Run) -> None:
    for group, minimum in GROUPS.items():
        await create_podgroup(r.admin, podgroup(group, r.ns("groups"), minimum))
    for kind, (lo, hi) in QUOTAS.items():
        await create_quota(r.admin, r.ns(kind), lo, hi)


async def step2(r: Run) -> None:
    await r.members("a0", "c0", "c1")
    await r.quota_pod("quota", "q0", "300m", "300Mi")
    await r.quota_pod("quota", "q1", "100m", "100Mi")
    await r.quota_pod("quota", "q2", "1500m", "1Gi", **{GPU: "1"})
    await r.quota_pod("quota", "q3", "250m", None, **{"ephemeral-storage": "1Gi"})
    await r.quota_pod("decimal", "d0", "100m", "100M")
    await r.quota_pod("decimal", "d1", "0.5", "250M")
    await r.quota_pod("overhead", "o0", "100m", "100Mi", runtime_class=RUNTIME_CLASS)


async def step3(r: Run) -> None:
    await r.members("a1", "b0", "b1", "d0", "d1")
    await r.phase("quota", "q1 q2 q3", "Running")
    await r.phase("decimal", "d0 d1", "Running")
    await r.phase("overhead", "o0", "Running")


async def step4(r: Run) -> None:
    await r.phase("groups", "a0 a1 b0 b1 d0 d1 c0", "Running")
    await r.phase("quota", "q0", "Pending")


async def step5(r: Run) -> None:
    await r.phase("groups", "a0", "Succeeded", bind_first=False)
    await r.delete("groups", "d1")
    await r.phase("quota", "q0", "Running", bind_first=False)


async def step6(r: Run) -> None:
    await r.phase("groups", "a1", "Succeeded", bind_first=False)
    await r.delete("groups", "d0")
    await r.phase("quota", "q1", "Succeeded", bind_first=False)


async def step7(r: Run) -> None:
    await r.phase("groups", "b1", "Failed", bind_first=False)
    await r.phase("quota", "q2", "Failed", bind_first=False)


async def step8(r: Run) -> None:
    await r.phase("groups", "b0", "Succeeded", bind_first=False)
    await r.delete("quota", "q3")


P, S, R, F, X = "Pending", "Scheduling", "Running", "Finished", "Failed"
# step -> the phase of each group, what the run waits for before it waits for quiet
STEPS = [(step1, dict(a=P, b=P, c=P, d=P)), (step2, dict(a=P, b=P, c=P, d=P)), (step3, dict(a=S, b=S, c=P, d=S)),
         (step4, dict(a=R, b=R, c=P, d=R)), (step5, dict(a=R, b=R, c=P, d=P)), (step6, dict(a=F, b=R, c=P, d=P)),
         (step7, dict(a=F, b=X, c=P, d=P)), (step8, dict(a=F, b=X, c=P, d=P))]


def _job(g: str) -> str:
    return f"groups/{g}-job"


ZERO = {"cpu": "0", "memory": "0"}
EXPECTED_UPSTREAM = [
    {"groups": {g: {"phase": P} for g in GROUPS},
     "used": {"quota": {**ZERO, GPU: "0"}, "decimal": ZERO, "overhead": ZERO}},
    {"groups": {g: {"phase": P} for g in GROUPS},
     "used": {"quota": {**ZERO, GPU: "0"}, "decimal": ZERO, "overhead": ZERO}},
    {"groups": {"a": {"phase": S, "occupiedBy": _job("a")}, "b": {"phase": S, "occupiedBy": _job("b")},
                "c": {"phase": P}, "d": {"phase": S, "occupiedBy": _job("d")}},
     "used": {"quota": {"cpu": "1850m", "ephemeral-storage": "1Gi", "memory": "1124Mi", GPU: "1"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
    {"groups": {"a": {"phase": R, "occupiedBy": _job("a"), "running": 2},
                "b": {"phase": R, "occupiedBy": _job("b"), "running": 2},
                "c": {"phase": P}, "d": {"phase": R, "occupiedBy": _job("d"), "running": 2}},
     "used": {"quota": {"cpu": "1850m", "ephemeral-storage": "1Gi", "memory": "1124Mi", GPU: "1"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
    {"groups": {"a": {"phase": R, "occupiedBy": _job("a"), "running": 1, "succeeded": 1},
                "b": {"phase": R, "occupiedBy": _job("b"), "running": 2},
                "c": {"phase": P}, "d": {"phase": P, "occupiedBy": _job("d"), "running": 1}},
     "used": {"quota": {"cpu": "2150m", "ephemeral-storage": "1Gi", "memory": "1424Mi", GPU: "1"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
    {"groups": {"a": {"phase": F, "occupiedBy": _job("a"), "succeeded": 2},
                "b": {"phase": R, "occupiedBy": _job("b"), "running": 2},
                "c": {"phase": P}, "d": {"phase": P, "occupiedBy": _job("d"), "running": 1}},
     "used": {"quota": {"cpu": "2050m", "ephemeral-storage": "1Gi", "memory": "1324Mi", GPU: "1"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
    {"groups": {"a": {"phase": F, "occupiedBy": _job("a"), "succeeded": 2},
                "b": {"phase": X, "occupiedBy": _job("b"), "running": 1, "failed": 1},
                "c": {"phase": P}, "d": {"phase": P, "occupiedBy": _job("d"), "running": 1}},
     "used": {"quota": {"cpu": "550m", "ephemeral-storage": "1Gi", "memory": "300Mi", GPU: "0"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
    {"groups": {"a": {"phase": F, "occupiedBy": _job("a"), "succeeded": 2},
                "b": {"phase": X, "occupiedBy": _job("b"), "running": 1, "failed": 1},
                "c": {"phase": P}, "d": {"phase": P, "occupiedBy": _job("d"), "running": 1}},
     "used": {"quota": {"cpu": "300m", "memory": "300Mi", GPU: "0"},
              "decimal": {"cpu": "600m", "memory": "350M"}, "overhead": {"cpu": "100m", "memory": "100Mi"}}},
]


def pysched_differences(step: int) -> dict:
    """What pysched shows instead of upstream after step ``step`` (1-based; None: field absent) - the
    differences of the module docstring, nothing else."""
    diff: dict = {"groups": {}, "used": {}}
    if step >= 3:
        for g in ("a", "b", "d"):
            diff["groups"][g] = {"scheduleStartTime": True}
        diff["used"]["decimal"] = {"memory": "350000000"}
        diff["used"]["overhead"] = {"cpu": "350m", "memory": "164Mi"}
    if step >= 4:
        diff["groups"]["c"] = {"running": 1}
    if step == 4:
        diff["used"]["quota"] = {"cpu": "2150m", "memory": "1424Mi"}
    if step >= 6:
        diff["groups"]["d"]["running"] = None
    return diff


def patched(observed: dict, diff: dict) -> dict:
    out = copy.deepcopy(observed)
    for section, objects in diff.items():
        for name, fields in objects.items():
            target = out[section].setdefault(name, {})
            for k, v in fields.items():
                if v is None:
                    target.pop(k, None)
                else:
                    target[k] = v
    return out


async def read(r: Run) -> tuple[tuple, dict]:
    """(resourceVersions, normalised statuses) of the run's PodGroups and ElasticQuotas."""
    versions, groups, used = [], {}, {}
    pgs, _ = await r.admin.list_all(f"{PG_API}/namespaces/{r.ns('groups')}/podgroups")
    for pg in pgs:
        versions.append(pg["metadata"]["resourceVersion"])
        status = dict(pg.get("status") or {})
        if "scheduleStartTime" in status:
            status["scheduleStartTime"] = True
        if "occupiedBy" in status:
            status["occupiedBy"] = status["occupiedBy"].replace(f"{r.ns('groups')}/", "groups/")
        groups[pg["metadata"]["name"]] = status
    for kind in QUOTAS:
        eqs, _ = await r.admin.list_all(f"{EQ_API}/namespaces/{r.ns(kind)}/elasticquotas")
        for eq in eqs:
            versions.append(eq["metadata"]["resourceVersion"])
            used[kind] = (eq.get("status") or {}).get("used")
    return tuple(sorted(versions)), {"groups": groups, "used": used}


async def settle(r: Run, phases: dict[str, str]) -> dict:
    """The statuses once every group shows its expected phase and nothing changed for ``QUIET`` s."""
    async def reached():
        _, seen = await read(r)
        return all(seen["groups"].get(g, {}).get("phase") == p for g, p in phases.items())
    await wait_for(reached, 30, interval=0.1, what=f"{r.name}: phases {phases}")
    last, since = None, time.monotonic()
    deadline = since + 30
    while time.monotonic() < deadline:
        versions, seen = await read(r)
        if versions != last:
            last, since = versions, time.monotonic()
        elif time.monotonic() - since >= QUIET:
            return seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"{r.name}: statuses still changing after 30 s: {seen}")


async def observe(admin, name: str, start) -> list[dict]:
    r = Run(admin, name)
    await ensure_namespace(admin, r.ns("groups"))
    stop = await start()
    try:
        results = []
        for act, phases in STEPS:
            await act(r)
            results.append(await settle(r, phases))
        return results
    finally:
        await stop()


async def test_podgroup_and_elasticquota_status_match_scheduler_plugins(control_plane, admin, scheduler_factory):
    await install_crd(admin)
    await install_quota_crd(admin)
    await create_nodes(admin, [make_node(NODE, cpu="64", memory="256Gi", extended={GPU: "8"})])
    await admin.request("POST", "/apis/node.k8s.io/v1/runtimeclasses", rate_limit=False,
                        body={"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                              "metadata": {"name": RUNTIME_CLASS}, "handler": "runc",
                              "overhead": {"podFixed": OVERHEAD}})

    theirs = await observe(admin, "upstream", upstream_controller_starter(control_plane))
    ours = await observe(admin, "pysched", pysched_controllers_starter(scheduler_factory, quota_config()))

    for step, (t, o) in enumerate(zip(theirs, ours, strict=True), 1):   # shown on a failure
        print(f"step {step}\n  scheduler-plugins: {t}\n  pysched:           {o}")
    for step, (seen, expected) in enumerate(zip(theirs, EXPECTED_UPSTREAM, strict=True), 1):
        assert seen == expected, f"scheduler-plugins after step {step}"
    for step, (seen, upstream) in enumerate(zip(ours, theirs, strict=True), 1):
        assert seen == patched(upstream, pysched_differences(step)), f"pysched after step {step}"
