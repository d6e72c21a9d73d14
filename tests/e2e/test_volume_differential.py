"""kube-scheduler and pysched agree on volume restrictions, CSI attach limits, storage capacity,
capacity scoring and the DRA hold, on the release the control plane runs (1.37 and 1.35).

The same objects go to one API server; each scheduler runs alone with the recording extender of
``tests/differential.py`` (its feasible set, or its FailedScheduling message when no node fits),
and our engine also judges the pods offline on the objects read back. Cases: in-line disks
already mounted on a node (GCE PD, AWS EBS, iSCSI, RBD), a ReadWriteOncePod claim in use, CSI
attach limits from CSINodes (bound CSI volumes, in-tree volumes migrated to CSI, unbound claims
counted against their provisioner, VolumeAttachments), a claim whose StorageClass does not exist
(an unbound Immediate claim to both, with word for word the same FailedScheduling message),
claims to provision from a CSI driver that tracks storage capacity (CSIStorageCapacity per node:
room on one node, on none), CSI drivers that ask for pods to stay off nodes without them
(``preventPodSchedulingIfMissing``: VolumeLimitScaling, on from 1.37; the 1.35 API server drops the
field), and a pod whose ResourceClaim does not exist: both schedulers hold it - no attempt, no
PodScheduled condition, no event.

From 1.37 (StorageCapacityScoring) each scheduler also places pods by VolumeBinding's score alone
(identical nodes, one pod per StorageClass): by the capacity of CSIStorageCapacities for claims to
provision and by the size of the PersistentVolumes for claims bound statically, with the default
``shape`` and with one that packs; the node each chose is read from what its PreBind wrote (the
claim's selected-node annotation, the volume's claimRef). And ``VolumeBindingArgs`` are defaulted
and validated as that release's kube-scheduler does (``--write-config-to``).
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from pysched.apis import config as configmod
from pysched.framework.features import default_gates
from pysched.tools.offline import OfflineScheduler
from pysched_dev.devcluster import KubeSchedulerProcess, binaries_dir, binaries_version
from pysched_dev.testkit import create_node, create_pods, list_pods, make_node, make_pod
from tests.differential import KUBE_PROFILE, _judge, strip_postfilter

from .conftest import REPO, scheduler_config, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]
EBS = "ebs.csi.aws.com"
CAP = "cap.csi.example.com"          # tracks storage capacity
STRICT = "strict.csi.example.com"    # preventPodSchedulingIfMissing, on n2's CSINode
ABSENT = "absent.csi.example.com"    # preventPodSchedulingIfMissing, on no node
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
    _pod("t-cap", claim("cap-5")),                               # room for 5Gi on n1 only
    _pod("t-cap-none", claim("cap-50")),                         # 50Gi: no room anywhere
    _pod("t-strict", claim("strict")),                           # 1.37: only n2 has the driver
    _pod("t-absent", claim("absent")),                           # 1.37: no node has the driver
]

HELD = _pod("t-dra", claims=[{"name": "gpu", "resourceClaimName": "not-yet"}])


def _csinode(name, count, *others):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": EBS, "nodeID": name, "allocatable": {"count": count}},
                                 *({"name": d, "nodeID": name} for d in others)]}}


def _csi_driver(name, **spec):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"attachRequired": False, **spec}}


def _capacity(name, cls, node, size):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": name, "namespace": NS}, "storageClassName": cls,
            "nodeTopology": {"matchLabels": {H: node}}, "capacity": size}


def _wffc_class(name, provisioner):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}


def _unbound_claim(name, cls, size):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                     "storageClassName": cls}}


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
    await _post(admin, "/apis/storage.k8s.io/v1/csinodes", _csinode("n2", 3, STRICT))
    for name in ("att-1", "att-2", "att-3", "att-4", "va"):
        await _bound_claim(admin, name)
    # Storage capacity: room for 10Gi on n1, 2Gi on n2, nothing published for n3.
    await _post(admin, "/apis/storage.k8s.io/v1/csidrivers", _csi_driver(CAP, storageCapacity=True))
    await _post(admin, "/apis/storage.k8s.io/v1/storageclasses", _wffc_class("cap", CAP))
    await _post(admin, f"/apis/storage.k8s.io/v1/namespaces/{NS}/csistoragecapacities",
                _capacity("cap-n1", "cap", "n1", "10Gi"))
    await _post(admin, f"/apis/storage.k8s.io/v1/namespaces/{NS}/csistoragecapacities",
                _capacity("cap-n2", "cap", "n2", "2Gi"))
    for name, size in (("cap-5", "5Gi"), ("cap-50", "50Gi")):
        await _post(admin, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", _unbound_claim(name, "cap", size))
    # Drivers that keep pods off nodes without them (the 1.35 API server drops the field).
    for driver in (STRICT, ABSENT):
        await _post(admin, "/apis/storage.k8s.io/v1/csidrivers",
                    _csi_driver(driver, preventPodSchedulingIfMissing=True))
    await _bound_claim(admin, "strict", driver=STRICT)
    await _bound_claim(admin, "absent", driver=ABSENT)
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
    release = binaries_version()
    ours = OfflineScheduler(cfg, kube_version=release, feature_gates=default_gates(release))
    nodes, _ = await admin.list_all("/api/v1/nodes")
    for n in nodes:
        ours.add_node(n)
    kinds = {"/api/v1/persistentvolumeclaims": "PersistentVolumeClaim",
             "/api/v1/persistentvolumes": "PersistentVolume",
             "/apis/storage.k8s.io/v1/storageclasses": "StorageClass",
             "/apis/storage.k8s.io/v1/csinodes": "CSINode",
             "/apis/storage.k8s.io/v1/volumeattachments": "VolumeAttachment",
             "/apis/storage.k8s.io/v1/csidrivers": "CSIDriver",
             "/apis/storage.k8s.io/v1/csistoragecapacities": "CSIStorageCapacity"}
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
    assert kube["t-cap"] == ["n1"]
    assert kube["t-cap-none"] == "0/3 nodes are available: 3 node(s) did not have enough free storage."
    if binaries_version() >= (1, 37):
        assert kube["t-strict"] == ["n2"]
        assert kube["t-absent"] == f"0/3 nodes are available: 3 {ABSENT} CSI driver is not installed on the node."
    else:
        assert kube["t-strict"] == kube["t-absent"] == ["n1", "n2", "n3"]


# -- capacity scoring (1.37) -------------------------------------------------------------------

SCORE_PROFILES = {"vb-default": {}, "vb-packed": {"shape": [{"utilization": 0, "score": 0},
                                                              {"utilization": 100, "score": 10}]}}
# per case: the size each node offers (CSIStorageCapacity or PersistentVolume), the claim's request
DYNAMIC = {"n1": "10Gi", "n2": "40Gi", "n3": "20Gi"}
STATIC = {"n1": "4Gi", "n2": "16Gi", "n3": "8Gi"}


async def _scoring_objects(admin, who: str) -> list[dict]:
    """A StorageClass per (profile, kind) for ``who``'s pods, with its capacities or volumes; the pods."""
    pods = []
    for prof in SCORE_PROFILES:
        dyn, local = f"{who}-{prof}-dyn", f"{who}-{prof}-local"
        await _post(admin, "/apis/storage.k8s.io/v1/storageclasses", _wffc_class(dyn, CAP))
        await _post(admin, "/apis/storage.k8s.io/v1/storageclasses", _wffc_class(local, "kubernetes.io/no-provisioner"))
        for node, size in DYNAMIC.items():
            await _post(admin, f"/apis/storage.k8s.io/v1/namespaces/{NS}/csistoragecapacities",
                        _capacity(f"{dyn}-{node}", dyn, node, size))
        for node, size in STATIC.items():
            await _post(admin, "/api/v1/persistentvolumes", {
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{local}-{node}"},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": local,
                         "local": {"path": "/mnt/disk"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": H, "operator": "In", "values": [node]}]}]}}}})
            # Available, as the PV controller (not running here) would mark it: kube binds no other
            await admin.request("PATCH", f"/api/v1/persistentvolumes/{local}-{node}/status",
                                body={"status": {"phase": "Available"}}, content_type="application/merge-patch+json",
                                rate_limit=False)
        for cls, size in ((dyn, "5Gi"), (local, "2Gi")):
            await _post(admin, f"/api/v1/namespaces/{NS}/persistentvolumeclaims", _unbound_claim(cls, cls, size))
            p = make_pod(cls, namespace=NS, scheduler=prof, cpu="10m", memory="10Mi", node_selector=None)
            p["spec"]["volumes"] = [{"name": "data", **claim(cls)}]
            pods.append(p)
    return pods


async def _chosen(admin, who: str) -> dict[str, str]:
    """Claim -> the node ``who``'s PreBind chose: the selected-node annotation of a claim to
    provision, the node of the volume whose claimRef names a claim bound statically."""
    out = {}
    claims, _ = await admin.list_all(f"/api/v1/namespaces/{NS}/persistentvolumeclaims")
    for c in claims:
        node = ((c["metadata"].get("annotations") or {}).get("volume.kubernetes.io/selected-node"))
        if c["metadata"]["name"].startswith(who) and node:
            out[c["metadata"]["name"]] = node
    pvs, _ = await admin.list_all("/api/v1/persistentvolumes")
    for pv in pvs:
        ref = pv["spec"].get("claimRef") or {}
        if ref.get("name", "").startswith(who):
            out[ref["name"]] = pv["metadata"]["name"].rsplit("-", 1)[1]
    return out


def _score_config() -> dict:
    return {"percentageOfNodesToScore": 100, "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": prof, **({"pluginConfig": [{"name": "VolumeBinding", "args": args}]}
                                                     if args else {})}
                         for prof, args in SCORE_PROFILES.items()]}


async def test_capacity_scoring_places_pods_as_kube_scheduler(control_plane, admin, scheduler_factory):
    if binaries_version() < (1, 37):
        pytest.skip("StorageCapacityScoring is off before 1.37: VolumeBinding does not score")
    for name in ("n1", "n2", "n3"):
        await create_node(admin, make_node(name, cpu="64", memory="256Gi"))
    await _post(admin, "/apis/storage.k8s.io/v1/csidrivers", _csi_driver(CAP, storageCapacity=True))
    kube_pods = await _scoring_objects(admin, "kube")
    kube = KubeSchedulerProcess(control_plane, _score_config()).start()
    try:
        await create_pods(admin, kube_pods)
        theirs = await _wait_chosen(admin, "kube")
    finally:
        kube.stop()
    for p in kube_pods:
        await admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}",
                            params={"gracePeriodSeconds": "0"})
    our_pods = await _scoring_objects(admin, "ours")
    scheduler_factory({**scheduler_config(), **_score_config()}).start()
    await create_pods(admin, our_pods)
    mine = await _wait_chosen(admin, "ours")
    assert {k.removeprefix("ours-"): v for k, v in mine.items()} == {k.removeprefix("kube-"): v
                                                                      for k, v in theirs.items()}
    # the cases do what they say (kube's own choices): the emptiest node by default, the fullest packed
    assert theirs == {"kube-vb-default-dyn": "n2", "kube-vb-default-local": "n2",
                      "kube-vb-packed-dyn": "n1", "kube-vb-packed-local": "n1"}


async def _all_chosen(admin, who: str) -> dict[str, str] | None:
    got = await _chosen(admin, who)
    return got if len(got) == 2 * len(SCORE_PROFILES) else None


async def _wait_chosen(admin, who: str) -> dict[str, str]:
    try:
        return await wait_for(lambda: _all_chosen(admin, who), 90, what=f"{who}'s PreBind on each claim")
    except AssertionError as exc:
        conds = {p["metadata"]["name"]: [(c.get("reason"), c.get("message")) for c in
                                         (p.get("status") or {}).get("conditions") or ()]
                 for p in await list_pods(admin, NS) if p["metadata"]["name"].startswith(who)}
        raise AssertionError(f"{exc}; chosen so far {await _chosen(admin, who)}; pods {conds}") from None


# -- VolumeBindingArgs, as that release's kube-scheduler writes and refuses them ----------------

def _write(tmp_path, args: dict | None, who: str, release: str) -> tuple[int, dict | None, str]:
    cfg = {"apiVersion": configmod.API_VERSION, "kind": configmod.KIND,
           "profiles": [{"schedulerName": "x", **({"pluginConfig": [{"name": "VolumeBinding", "args": args}]}
                                                  if args is not None else {})}]}
    src, out = tmp_path / f"{who}-in.yaml", tmp_path / f"{who}-out.yaml"
    src.write_text(yaml.safe_dump(cfg))
    if who == "kube":
        cmd = [str(binaries_dir() / "kube-scheduler"), "--master=https://127.0.0.1:1", f"--write-config-to={out}",
               f"--config={src}"]
    else:
        cmd = [sys.executable, "-m", "pysched", "--config", str(src), "--write-config-to", str(out),
               "--emulated-version", release]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path if who == "kube" else REPO)
    if proc.returncode:
        return proc.returncode, None, proc.stderr
    written = yaml.safe_load(out.read_text())["profiles"][0]["pluginConfig"]
    return 0, next(pc["args"] for pc in written if pc["name"] == "VolumeBinding"), ""


@pytest.mark.parametrize("args", [
    None, {"bindTimeoutSeconds": 30}, {"shape": []}, {"shape": [{"utilization": 20, "score": 4}]},
    {"shape": [{"utilization": 101, "score": 3}]}, {"shape": [{"utilization": 10, "score": 3}, {"utilization": 5}]},
    {"shape": [{"utilization": 50, "score": 11}, {"utilization": 40, "score": -1}]}, {"bindTimeoutSeconds": -1},
], ids=["defaults", "timeout", "empty-shape", "shape", "over-100", "unsorted", "three-errors", "negative-timeout"])
def test_volume_binding_args_are_defaulted_and_validated_as_kube_does(tmp_path, args):
    release = "{}.{}".format(*binaries_version())
    kube_rc, kube_args, kube_err = _write(tmp_path, args, "kube", release)
    rc, ours, err = _write(tmp_path, args, "ours", release)
    assert (rc == 0) == (kube_rc == 0), (kube_err, err)
    if kube_rc == 0:
        assert ours == kube_args
    else:
        m = re.search(r'"command failed" err="(.*)"\s*$', kube_err, re.M)
        assert m, kube_err
        assert m.group(1).replace('\\"', '"') in err, (kube_err, err)
