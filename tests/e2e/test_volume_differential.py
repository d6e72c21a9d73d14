"""kube-scheduler 1.35 and pysched agree on volume restrictions, CSI attach limits and the DRA hold.

The same objects go to one API server; each scheduler runs alone with the recording extender of
``tests/differential.py`` (its feasible set, or its FailedScheduling message when no node fits),
and our engine also judges the pods offline on the objects read back. Cases: in-line disks
already mounted on a node (GCE PD, AWS EBS, iSCSI, RBD), a ReadWriteOncePod claim in use, CSI
attach limits from CSINodes (bound CSI volumes, in-tree volumes migrated to CSI, unbound claims
counted against their provisioner, VolumeAttachments), a claim whose StorageClass does not exist
(an unbound Immediate claim to both, with word for word the same FailedScheduling message), and a
pod whose ResourceClaim does not exist: both schedulers hold it - no attempt, no PodScheduled
condition, no event.
"""

from __future__ import annotations

import pytest

from pysched.apis import config as configmod
from pysched.tools.offline import OfflineScheduler
from pysched_dev.testkit import create_node, create_pods, list_pods, make_node, make_pod
from tests.differential import KUBE_PROFILE, _judge, strip_postfilter

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]
EBS = "ebs.csi.aws.com"
H = "kubernetes.io/hostname"
NS = "default"


def _pod(name, *volumes, node=None, on=None, claims=None):
    p = make_pod(name, namespace=NS, scheduler="already-bound" if node else KUBE_PROFILE, cpu="10m", memory="10Mi",
                 node_name=node, node_selector=None)
    if volumes:
        p["spec"]["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    if on:
        p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": H, "operator": "In", "values": on}]}]}}}
    if claims:
        p["spec"]["resourceClaims"] = claims
    return p


def gce(pd, ro=False):
    return {"gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def claim(name):
    return {"persistentVolumeClaim": {"claimName": name}}


EXISTING = [
    _pod("ex-gce", gce("pd-1"), node="n1"),
    _pod("ex-rbd", {"rbd": {"monitors": ["m1"], "image": "img"}}, node="n1"),
    _pod("ex-att", claim("att-1"), node="n1"),
    _pod("ex-ebs", {"awsElasticBlockStore": {"volumeID": "vol-0001"}}, node="n2"),
    _pod("ex-rwop", claim("solo"), node="n2"),
    _pod("ex-iscsi", {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2024-01.io.example:t1", "lun": 0}},
         node="n3"),
]

PENDING = [
    _pod("t-gce", gce("pd-1")),                                  # n1: no available disk
    _pod("t-gce-ro", gce("pd-1", ro=True)),                      # n1: the mounted one is read-write
    _pod("t-gce-other", gce("pd-2")),                            # fits everywhere
    _pod("t-ebs", {"awsElasticBlockStore": {"volumeID": "vol-0001", "readOnly": True}}),  # n2 disk, n1 limit
    _pod("t-iscsi", {"iscsi": {"targetPortal": "10.0.0.9:3260", "iqn": "iqn.2024-01.io.example:t1", "lun": 1}}),
    _pod("t-rbd", {"rbd": {"monitors": ["m2", "m1"], "pool": "rbd", "image": "img"}}),
    _pod("t-rwop", claim("solo")),                               # in use by ex-rwop: no node
    _pod("t-disk-only", gce("pd-1"), on=["n1"]),                 # unschedulable: disk + selector
    _pod("t-limit", claim("att-2")),                             # n1 full (1 of 1)
    _pod("t-two", claim("att-2"), claim("att-3")),               # n2: 1 pod volume + 1 attachment + 2 > 3
    _pod("t-many", claim("att-2"), claim("att-3"), claim("att-4"), on=["n1", "n2"]),  # unschedulable: limits
    _pod("t-shared", claim("att-1")),                            # att-1 is on n1 already: not counted twice
    _pod("t-unbound", claim("late")),                            # an unbound claim counts against ebs on n1
    _pod("t-no-sc", claim("no-sc")),                             # its class does not exist: unbound immediate
]

HELD = _pod("t-dra", claims=[{"name": "gpu", "resourceClaimName": "not-yet"}])


def _csinode(name, count):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": EBS, "nodeID": name, "allocatable": {"count": count}}]}}


async def _post(admin, path, body):
    return await admin.request("POST", path, body=body, rate_limit=False)


async def _bound_claim(admin, name, driver=EBS, modes=("ReadWriteOnce",)):
    await _post(admin, "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": list(modes), "storageClassName": "",
                 "csi": {"driver": driver, "volumeHandle": f"h-{name}"},
                 "claimRef": {"namespace": NS, "name": name}}})
    await _post(admin, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "",
                 "volumeName": f"pv-{name}"}})
    await admin.request("PATCH", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}/status",
                        body={"status": {"phase": "Bound"}}, content_type="application/merge-patch+json",
                        rate_limit=False)


async def _setup(admin):
    for name in ("n1", "n2", "n3"):
        await create_node(admin, make_node(name))
    # n1 attaches at most 1 EBS volume, n2 3; n3 has no CSINode (no limit).
    await _post(admin, "/apis/storage.k8s.io/v1/csinodes", _csinode("n1", 1))
    await _post(admin, "/apis/storage.k8s.io/v1/csinodes", _csinode("n2", 3))
    for name in ("att-1", "att-2", "att-3", "att-4", "va"):
        await _bound_claim(admin, name)
    await _bound_claim(admin, "solo", driver="csi.example.com", modes=("ReadWriteOncePod",))
    # A volume attached to n2 that no pod accounts for still takes a slot.
    await _post(admin, "/apis/storage.k8s.io/v1/volumeattachments", {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va-n2"},
        "spec": {"attacher": EBS, "nodeName": "n2", "source": {"persistentVolumeName": "pv-va"}}})
    await _post(admin, "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ebs-late"},
        "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"})
    await _post(admin, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "late"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "storageClassName": "ebs-late"}})
    await _post(admin, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "no-sc"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "storageClassName": "nosuch-sc"}})
    await create_pods(admin, EXISTING)


async def _assert_held(admin, who):
    pods = {p["metadata"]["name"]: p for p in await list_pods(admin, NS)}
    held = pods[HELD["metadata"]["name"]]
    assert not held["spec"].get("nodeName")
    conds = [c for c in (held.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"]
    assert conds == [], f"{who}: a held pod gets no PodScheduled condition: {conds}"
    events = await admin.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    about = [e for e in events.get("items") or () if (e.get("regarding") or {}).get("name") == "t-dra"]
    assert about == [], f"{who}: a held pod gets no event: {about}"


async def _offline(admin, pods):
    cfg = configmod.parse({"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
                           "profiles": [{"schedulerName": KUBE_PROFILE}]})
    ours = OfflineScheduler(cfg)
    nodes, _ = await admin.list_all("/api/v1/nodes")
    for n in nodes:
        ours.add_node(n)
    kinds = {"/api/v1/persistentvolumeclaims": "PersistentVolumeClaim",
             "/api/v1/persistentvolumes": "PersistentVolume",
             "/apis/storage.k8s.io/v1/storageclasses": "StorageClass",
             "/apis/storage.k8s.io/v1/csinodes": "CSINode",
             "/apis/storage.k8s.io/v1/volumeattachments": "VolumeAttachment"}
    for path, kind in kinds.items():
        objs, _ = await admin.list_all(path)
        for o in objs:
            o["kind"] = kind
            assert ours.add_object(o)
    live = await list_pods(admin, NS)
    for p in live:
        if p["spec"].get("nodeName"):
            ours.add_pod(p)
    names = [n["metadata"]["name"] for n in nodes]
    out = {}
    for p in live:
        if p["metadata"]["name"] in pods:
            feasible = sorted(n for n in names if ours.filter_status(p, n) is None)
            out[p["metadata"]["name"]] = feasible or strip_postfilter(ours.schedule(p, assume=False).message)
    return out


async def test_volume_restrictions_limits_and_dra_hold_match_kube_scheduler(control_plane, admin):
    await _setup(admin)
    await create_pods(admin, [HELD])   # before either scheduler starts: first in line
    names = {f"{NS}/{p['metadata']['name']}" for p in PENDING}
    kube_rec, kube_msgs = await _judge(control_plane, admin, names, "kube", pods=PENDING)
    await _assert_held(admin, "kube-scheduler")
    ours_rec, ours_msgs = await _judge(control_plane, admin, names, "ours")
    await _assert_held(admin, "pysched")
    offline = await _offline(admin, {p["metadata"]["name"] for p in PENDING})

    def verdict(rec, msgs, key):
        return sorted(rec[key]) if key in rec else strip_postfilter(msgs[key])

    kube = {k.split("/")[1]: verdict(kube_rec, kube_msgs, k) for k in names}
    ours = {k.split("/")[1]: verdict(ours_rec, ours_msgs, k) for k in names}
    assert ours == kube
    assert offline == kube
    # the whole message, PostFilter verdicts included (DynamicResources' "not found")
    assert ours_msgs[f"{NS}/t-no-sc"] == kube_msgs[f"{NS}/t-no-sc"] == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found")
    # The cases do what they say (kube's own verdicts): a check on the scenario, not on us.
    assert kube["t-gce"] == ["n2", "n3"] and kube["t-ebs"] == ["n3"] and kube["t-gce-other"] == ["n1", "n2", "n3"]
    assert kube["t-iscsi"] == ["n1", "n2"] and kube["t-rbd"] == ["n2", "n3"] and kube["t-two"] == ["n3"]
    assert kube["t-limit"] == ["n2", "n3"] and kube["t-shared"] == ["n1", "n2", "n3"]
    assert kube["t-unbound"] == ["n2", "n3"]
    assert kube["t-rwop"] == ("0/3 nodes are available: 3 node(s) unavailable due to PersistentVolumeClaim with "
                              "ReadWriteOncePod access mode already in-use by another pod.")
    assert kube["t-many"] == ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                              "2 node(s) exceed max volume count.")
    assert kube["t-disk-only"] == ("0/3 nodes are available: 1 node(s) had no available disk, "
                                   "2 node(s) didn't match Pod's node affinity/selector.")
