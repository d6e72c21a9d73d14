"""TopologyAwarePlacement on the living API: Kubernetes 1.37's PodGroups (``scheduling.k8s.io/v1beta1``,
API server with GenericWorkload) placed by pysched (in-process, gates GenericWorkload and
TopologyAwareWorkloadScheduling, the plugin in place of TopologyPlacementGenerator, levels
zone/block/rack).

Nodes of 4 cpu:

====  =====  ====  =====
zone  block  rack  nodes
====  =====  ====  =====
z1    b1     r1    2
z1    b1     r2    3
z1    b2     r3    4
z2    b3     r4    3
====  =====  ====  =====

1. ``fit``: 4 members of 2 cpu, ``schedulingConstraints.topology: [{key: zone}]``. Upstream's
   generator makes one placement per zone and, inside the zone chosen, the members go where the
   node scores send them (LeastAllocated spreads them over z1's racks). pysched tries the racks
   first and takes the one the gang fills exactly: all four on r1.
2. ``spill``: 5 members of 4 cpu with Kueue's ``podset-preferred-topology: rack``. With r1 full no
   rack (12, 16, 12 cpu left) nor block holds 20 cpu; the gang goes up to zone z1 (28 left) and
   spans r2 and r3 - never z2.

Skipped when the API server is older than 1.37 (no ``scheduling.k8s.io/v1beta1``).
"""

from __future__ import annotations

import asyncio

import pytest

from pysched.apis import config as configmod
from pysched.app import Options, SchedulerApp
from pysched.client.auth import load_kubeconfig
from pysched.framework.features import parse_feature_gates
from pysched_dev.devcluster import ControlPlane
from pysched_dev.testkit import create_nodes, create_pods, ensure_namespace, list_pods, make_node, make_pod

from .conftest import scheduler_config, wait_for
from .test_node_declared_features_differential import apiserver_version

pytestmark = pytest.mark.e2e

GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
V = "scheduling.k8s.io/v1beta1"
ZONE, BLOCK, RACK = "topology.kubernetes.io/zone", "cloud.example.com/block", "cloud.example.com/rack"
LAYOUT = {("z1", "b1", "r1"): 2, ("z1", "b1", "r2"): 3, ("z1", "b2", "r3"): 4, ("z2", "b3", "r4"): 3}
NS = "tas"


@pytest.fixture
def control_plane():
    version = apiserver_version()
    if version < (1, 37):
        pytest.skip(f"kube-apiserver {version[0]}.{version[1]} does not serve {V}")
    cp = ControlPlane(extra_apiserver_args=["--feature-gates=GenericWorkload=true",
                                            f"--runtime-config={V}=true"])
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def _ours(cp: ControlPlane) -> SchedulerApp:
    profile = {"schedulerName": "pysched",
               "plugins": {"placementGenerate": {"enabled": [{"name": "TopologyAwarePlacement"}],
                                                 "disabled": [{"name": "TopologyPlacementGenerator"}]}},
               "pluginConfig": [{"name": "TopologyAwarePlacement", "args": {"levels": [ZONE, BLOCK, RACK]}}]}
    cfg = configmod.parse(scheduler_config(profiles=[profile]))
    options = Options(kubeconfig=str(cp.kubeconfig), serve=False, kopf=False, seed=1, kube_version=(1, 37),
                      feature_gates=parse_feature_gates(GATES, (1, 37)))
    return SchedulerApp(cfg, options, load_kubeconfig(cp.kubeconfig), None)


def _podgroup(name: str, min_count: int, key: str | None = None) -> dict:
    spec: dict = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": V, "kind": "PodGroup", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _members(group: str, n: int, cpu: str, annotations: dict | None = None) -> list[dict]:
    out = []
    for i in range(n):
        p = make_pod(f"{group}-{i}", namespace=NS, scheduler="pysched", cpu=cpu, memory="100Mi",
                     annotations=annotations)
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(p)
    return out


async def _bound(admin, group: str, n: int) -> dict[str, str]:
    async def all_bound():
        got = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_pods(admin, NS)
               if p["metadata"]["name"].startswith(f"{group}-")}
        return got if len(got) == n and all(got.values()) else None
    try:
        return await wait_for(all_bound, 60, what=f"every member of {group} bound")
    except AssertionError:
        for p in await list_pods(admin, NS):   # shown on a failure
            print(p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("conditions"))
        raise


async def test_gangs_go_to_the_best_fit_rack_and_spill_up_when_none_holds_them(control_plane, admin):
    nodes, where = [], {}
    for (zone, block, rack), count in LAYOUT.items():
        for i in range(count):
            name = f"{rack}-{i}"
            where[name] = (zone, block, rack)
            nodes.append(make_node(name, cpu="4", memory="16Gi", labels={ZONE: zone, BLOCK: block, RACK: rack}))
    await create_nodes(admin, nodes)
    await ensure_namespace(admin, NS)
    app = _ours(control_plane)
    task = asyncio.create_task(app.run())
    try:
        await admin.request("POST", f"/apis/{V}/namespaces/{NS}/podgroups", body=_podgroup("fit", 4, ZONE))
        await create_pods(admin, _members("fit", 4, "2"))
        fit = await _bound(admin, "fit", 4)
        assert {where[n][2] for n in fit.values()} == {"r1"}, fit   # the rack the gang fills exactly

        # The members first, their PodGroup once the scheduler knows all five (members arriving one
        # by one while the group exists are, today, tried before the last of them is queued).
        await create_pods(admin, _members("spill", 5, "4", {"kueue.x-k8s.io/podset-preferred-topology": RACK}))
        await asyncio.sleep(2)
        await admin.request("POST", f"/apis/{V}/namespaces/{NS}/podgroups", body=_podgroup("spill", 5))
        spill = await _bound(admin, "spill", 5)
        assert {where[n][0] for n in spill.values()} == {"z1"}, spill
        assert {where[n][2] for n in spill.values()} == {"r2", "r3"}, spill

        groups, _ = await admin.list_all(f"/apis/{V}/namespaces/{NS}/podgroups")
        conds = {g["metadata"]["name"]: [(c["type"], c["status"]) for c in g.get("status", {}).get("conditions", [])]
                 for g in groups}
        assert all(("PodGroupInitiallyScheduled", "True") in c for c in conds.values()), conds
    finally:
        app.request_stop()
        await task
