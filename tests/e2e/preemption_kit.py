"""Shared preemption scenarios for the e2e and differential tests: PriorityClasses, victims that
stay terminating, PDBs with a status, and what a scheduler wrote about a preemption.

The test API server runs without kubelets or controller-manager. A victim deleted gracefully
(``terminationGracePeriodSeconds`` > 0, bound to a node) keeps its object with a
``deletionTimestamp`` until a kubelet confirms it stopped; ``finish_terminating`` plays that
kubelet and deletes such pods with ``gracePeriodSeconds: 0``, as upstream integration tests do
(``podDeletionFinalizer``-free pods are removed by the test itself). Likewise no disruption
controller fills a PDB's status: ``create_pdb`` writes ``disruptionsAllowed`` through /status.
"""

from __future__ import annotations

from pysched.apis.core.errors import ApiError
from pysched_dev.testkit import list_pods, make_pod

GRACE = 30   # victims linger as terminating until the test finalizes them


async def create_priority_classes(admin, classes: dict[str, int], never: tuple[str, ...] = ()) -> None:
    for name, value in classes.items():
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value}
        if name in never:
            body["preemptionPolicy"] = "Never"
        try:
            await admin.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=body, rate_limit=False)
        except ApiError as exc:
            if exc.status != 409:
                raise


def prio_pod(name: str, cls: str, value: int, *, cpu: str, node: str | None = None, labels=None,
             scheduler: str = "pysched", grace: int = GRACE) -> dict:
    p = make_pod(name, cpu=cpu, memory=None, node_name=node, priority=value, labels=labels, scheduler=scheduler)
    p["spec"]["priorityClassName"] = cls
    p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


async def create_pdb(admin, name: str, labels: dict, allowed: int, namespace: str = "default") -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}
    await admin.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body=body,
                        rate_limit=False)
    await admin.request("PATCH", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}/status",
                        body={"status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
                                         "expectedPods": 1, "observedGeneration": 1}},
                        content_type="application/merge-patch+json", rate_limit=False)


async def pods_by_name(admin, namespace: str = "default") -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in await list_pods(admin, namespace)}


async def force_delete(admin, namespace: str, name: str) -> None:
    """Delete now (``gracePeriodSeconds: 0``), as a kubelet does once the containers stopped."""
    try:
        await admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                            body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                            rate_limit=False)
    except ApiError as exc:
        if exc.status != 404:
            raise


async def finish_terminating(admin, namespace: str = "default") -> list[str]:
    """Act as the kubelet: remove every pod that is terminating. Returns their names."""
    gone = [name for name, p in (await pods_by_name(admin, namespace)).items()
            if p["metadata"].get("deletionTimestamp")]
    for name in gone:
        await force_delete(admin, namespace, name)
    return sorted(gone)


async def delete_all_pods(admin, namespace: str = "default") -> None:
    for name in await pods_by_name(admin, namespace):
        await force_delete(admin, namespace, name)


def disruption_target(pod: dict) -> dict | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            return c
    return None


async def events_about(admin, pod: dict, reason: str) -> list[dict]:
    """Events of ``reason`` regarding this very pod (uid: a same-named earlier pod's do not count)."""
    meta = pod["metadata"]
    data = await admin.get(f"/apis/events.k8s.io/v1/namespaces/{meta['namespace']}/events")
    return [e for e in data["items"] if e.get("reason") == reason
            and (e.get("regarding") or {}).get("uid") == meta["uid"]]


def event_shape(ev: dict, preemptor: dict) -> dict:
    """The parts of a Preempted event that must match kube-scheduler's (ids normalised)."""
    uid = preemptor["metadata"]["uid"]
    rel = ev.get("related") or {}
    return {"type": ev.get("type"), "reason": ev.get("reason"), "action": ev.get("action"),
            "note": (ev.get("note") or "").replace(uid, "<preemptor-uid>"),
            "regarding": {k: (ev.get("regarding") or {}).get(k) for k in ("apiVersion", "kind", "namespace", "name")},
            "related": {k: rel.get(k) for k in ("apiVersion", "kind", "namespace", "name")},
            "related_uid_is_preemptor": rel.get("uid") == uid,
            "reportingController": ev.get("reportingController")}


def condition_shape(cond: dict | None) -> dict | None:
    if cond is None:
        return None
    return {k: cond.get(k) for k in ("type", "status", "reason", "message")}
