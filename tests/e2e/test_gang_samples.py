"""scheduler-plugins' documented Coscheduling samples (examples/gang/) apply and schedule with the
coscheduling component's CRD and profile.

There is no controller-manager in the test control plane, so the test creates the pods the
Deployment and Job controllers would (their templates, owned by them). The Deployment follows the
upstream walk-through: two replicas of a group of three stay unbound, the third binds all three.
Needs the Coscheduling plugin (issue 17, scheduling side).
"""

from __future__ import annotations

import asyncio
import copy

import pytest
import yaml

from pysched_dev.testkit import create_nodes, create_pods, list_pods, make_node

from . import kustomize
from .conftest import REPO, wait_for
from .podgroup_kit import COMPONENT, LABEL, PG_API, wait_for_crd

pytestmark = pytest.mark.e2e
EXAMPLES = REPO / "examples" / "gang"
APPLY = {"Deployment": "/apis/apps/v1/namespaces/default/deployments", "Job": "/apis/batch/v1/namespaces/default/jobs",
         "PodGroup": f"{PG_API}/namespaces/default/podgroups"}


def component_config() -> dict:
    cm = next(o for o in kustomize.build(REPO / "manifests", [COMPONENT]) if o["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg["leaderElection"] = {"leaderElect": False}
    return cfg


def pod_from(owner: dict, i: int) -> dict:
    """The pod a workload controller would create from ``owner``'s template."""
    tpl = copy.deepcopy(owner["spec"]["template"])
    meta = tpl.setdefault("metadata", {})
    meta.update(name=f"{owner['metadata']['name']}-{i}", namespace="default")
    meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", **tpl}


async def bound(admin, group: str) -> list[str]:
    pods = await list_pods(admin, "default", labelSelector=f"{LABEL}={group}")
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))


async def test_documented_samples_apply_and_schedule(admin, scheduler_factory):
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        body=yaml.safe_load((COMPONENT / "crd.yaml").read_text()), rate_limit=False)
    await wait_for_crd(admin)
    created = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            created[(doc["kind"], doc["metadata"]["name"])] = await admin.request(
                "POST", APPLY[doc["kind"]], body=doc, rate_limit=False)
    assert {k for k, _ in created} == {"PodGroup", "Deployment", "Job"}
    await create_nodes(admin, [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)])
    sched = scheduler_factory(component_config()).start()
    await sched.wait_log("caches synced", 60)     # fails at once, with the reason, if the profile is refused

    deploy, job = created[("Deployment", "pause")], created[("Job", "trainer")]
    await create_pods(admin, [pod_from(deploy, i) for i in range(2)])          # replicas: 2 of minMember 3
    await create_pods(admin, [pod_from(job, i) for i in range(job["spec"]["parallelism"])])
    assert await wait_for(lambda: _all(bound(admin, "trainer"), 4), 60, what="the job's gang bound")
    await asyncio.sleep(3)
    assert await bound(admin, "pg1") == [], "two of a group of three must not bind"
    await create_pods(admin, [pod_from(deploy, 2)])                           # kubectl scale --replicas=3
    await wait_for(lambda: _all(bound(admin, "pg1"), 3), 60, what="all three pause pods bound together")


async def _all(names, n):
    got = await names
    return got if len(got) == n else None
