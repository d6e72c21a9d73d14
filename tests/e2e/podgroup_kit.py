"""Helpers for the PodGroup e2e tests: install the component's CRD, create groups and members, play
the kubelet (there is none: pod phases are set through the status subresource)."""

from __future__ import annotations

import yaml

from pysched_dev.testkit import ensure_namespace, make_pod

from .conftest import REPO, wait_for

COMPONENT = REPO / "manifests" / "components" / "coscheduling"
LABEL = "scheduling.x-k8s.io/pod-group"
PG_API = "/apis/scheduling.x-k8s.io/v1alpha1"


def crd() -> dict:
    return yaml.safe_load((COMPONENT / "crd.yaml").read_text())


async def install_crd(admin) -> None:
    await admin.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd(),
                        rate_limit=False)
    await wait_for_crd(admin)


async def wait_for_crd(admin) -> None:
    async def established():
        try:
            found = await admin.get(PG_API)
        except Exception:  # noqa: BLE001 - not served yet
            return False
        return any(r["name"] == "podgroups" for r in found.get("resources") or ())
    await wait_for(established, 30, what="PodGroup CRD served")


def podgroup(name: str, namespace: str, min_member: int | None, **spec) -> dict:
    if min_member is not None:
        spec["minMember"] = min_member
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def create_podgroup(admin, pg: dict) -> dict:
    ns = pg["metadata"]["namespace"]
    await ensure_namespace(admin, ns)
    return await admin.request("POST", f"{PG_API}/namespaces/{ns}/podgroups", body=pg, rate_limit=False)


async def get_podgroup(admin, namespace: str, name: str) -> dict:
    return await admin.get(f"{PG_API}/namespaces/{namespace}/podgroups/{name}")


def member(name: str, namespace: str, group: str, *, owner: str = "job", scheduler: str = "nobody") -> dict:
    """A member pod; by default for a scheduler that does not exist, so only the test binds it."""
    return make_pod(name, namespace=namespace, scheduler=scheduler, labels={LABEL: group},
                    owner={"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"{owner}-uid",
                           "controller": True})


async def bind(admin, namespace: str, name: str, node: str) -> None:
    await admin.bind_pod(namespace, name, "", node)


async def set_phase(admin, namespace: str, name: str, phase: str) -> None:
    await admin.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", rate_limit=False,
                        body={"status": {"phase": phase}}, content_type="application/merge-patch+json")


async def wait_status(admin, namespace: str, name: str, timeout: float = 30.0, **expected) -> dict:
    """Wait until the group's status has every ``expected`` field (None: absent) and return it."""
    async def matches():
        status = (await get_podgroup(admin, namespace, name)).get("status") or {}
        return status if all(status.get(k) == v for k, v in expected.items()) else None
    return await wait_for(matches, timeout, what=f"{namespace}/{name} status {expected}")
