"""VolumeRestrictions, NodeVolumeLimits, VolumeBinding's missing StorageClass and DynamicResources'
PreEnqueue, against kube 1.35's rules."""

import pytest

from pysched.framework import FrameworkError
from pysched.framework.podinfo import PodInfo
from pysched.plugins.dynamic_resources import DynamicResources
from pysched.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED as MAX_COUNT
from pysched.plugins.node_volume_limits import NodeVolumeLimits
from pysched.plugins.volume_binding import UNBOUND_IMMEDIATE, VolumeBinding
from pysched.plugins.volume_restrictions import ERR_REASON_DISK_CONFLICT as DISK
from pysched.plugins.volume_restrictions import ERR_REASON_RWOP_CONFLICT as RWOP
from pysched.plugins.volume_restrictions import VolumeRestrictions
from pysched.testing import UAU, UNS, PluginTester
from pysched.tools.offline import OfflineScheduler

from .conftest import node, pod

NODES = [node("n1"), node("n2")]
EBS = "ebs.csi.aws.com"


def with_volumes(p, *volumes):
    p["spec"]["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    return p


def pvc(name, *, namespace="default", modes=("ReadWriteOnce",), volume="", cls=None, owner_uid=None):
    meta = {"name": name, "namespace": namespace}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": owner_uid,
                                    "controller": True}]
    spec = {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if cls is not None:
        spec["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def csi_pv(name, driver=EBS, handle=None):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": driver, "volumeHandle": handle or name}}}


def csinode(name, **counts):
    drivers = [{"name": d.replace("_", "."), "nodeID": name, **({"allocatable": {"count": c}} if c is not None else {})}
               for d, c in counts.items()]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": drivers}}


def claim_vol(name):
    return {"persistentVolumeClaim": {"claimName": name}}


# -- VolumeRestrictions -------------------------------------------------------------------------

def test_in_line_disk_conflicts_follow_each_kind_rules():
    gce = {"gcePersistentDisk": {"pdName": "disk-1"}}
    gce_ro = {"gcePersistentDisk": {"pdName": "disk-1", "readOnly": True}}
    ebs_ro = {"awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}}
    iscsi = {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2020-01.io.x:t", "lun": 0}}
    rbd = {"rbd": {"monitors": ["m1", "m2"], "image": "img"}}
    existing = [with_volumes(pod("a", node_name="n1"), gce_ro, ebs_ro, iscsi, rbd)]
    hh = PluginTester(VolumeRestrictions, nodes=NODES, pods=existing)
    conflict = {"n1": (UNS, (DISK,)), "n2": None}
    assert hh.filter(with_volumes(pod("p1"), gce)) == conflict            # one writer: conflict
    assert hh.filter(with_volumes(pod("p2"), gce_ro)) == {"n1": None, "n2": None}   # both read-only
    assert hh.filter(with_volumes(pod("p3"), ebs_ro)) == conflict         # EBS: even read-only
    # iSCSI: the same IQN conflicts whatever the LUN
    other_lun = {"iscsi": {"targetPortal": "10.0.0.2:3260", "iqn": "iqn.2020-01.io.x:t", "lun": 3}}
    assert hh.filter(with_volumes(pod("p4"), other_lun)) == conflict
    # RBD: same pool (defaulted "rbd") and image on overlapping monitors
    assert hh.filter(with_volumes(pod("p5"), {"rbd": {"monitors": ["m2"], "pool": "rbd", "image": "img"}})) == conflict
    assert hh.filter(with_volumes(pod("p6"), {"rbd": {"monitors": ["m3"], "image": "img"}})) == {"n1": None,
                                                                                                  "n2": None}
    assert hh.filter(with_volumes(pod("p7"), {"rbd": {"monitors": ["m1"], "pool": "p2", "image": "img"}}))["n1"] is None


def test_pods_without_disks_or_claims_are_skipped():
    hh = PluginTester(VolumeRestrictions, nodes=NODES)
    assert hh.pre_filter(pod("plain")).is_skip()
    assert hh.pre_filter(with_volumes(pod("cm"), {"configMap": {"name": "x"}})).is_skip()


def test_read_write_once_pod_claim_in_use_fails_every_node():
    objects = [pvc("solo", modes=("ReadWriteOncePod",)), pvc("shared")]
    user = with_volumes(pod("user", node_name="n1"), claim_vol("solo"), claim_vol("shared"))
    hh = PluginTester(VolumeRestrictions, nodes=NODES, pods=[user], objects=objects)
    assert hh.filter(with_volumes(pod("second"), claim_vol("solo"))) == {"n1": (UNS, (RWOP,)), "n2": (UNS, (RWOP,))}
    # a ReadWriteOnce claim in use is not this plugin's business; nor is an unused RWOP claim
    assert hh.pre_filter(with_volumes(pod("rwo"), claim_vol("shared"))).is_skip()
    hh2 = PluginTester(VolumeRestrictions, nodes=NODES, objects=objects)
    assert hh2.pre_filter(with_volumes(pod("first"), claim_vol("solo"))).is_skip()
    # a claim in another namespace with the same name is another claim
    other_ns = with_volumes(pod("elsewhere", namespace="other"), claim_vol("solo"))
    hh3 = PluginTester(VolumeRestrictions, nodes=NODES, pods=[user],
                       objects=[*objects, pvc("solo", namespace="other", modes=("ReadWriteOncePod",))])
    assert hh3.pre_filter(other_ns).is_skip()


def test_missing_claim_is_unresolvable_at_prefilter():
    hh = PluginTester(VolumeRestrictions, nodes=NODES)
    st = hh.pre_filter(with_volumes(pod("p"), claim_vol("nope")))
    assert st.code == UAU and st.message() == 'persistentvolumeclaim "nope" not found'


def test_restrictions_requeue_hints():
    pl = PluginTester(VolumeRestrictions, nodes=NODES).plugin
    hints = {(r.event.resource, r.event.action): r.hint for r in pl.events_to_register()}
    waiting = PodInfo.from_dict(with_volumes(pod("w"), {"gcePersistentDisk": {"pdName": "d"}}, claim_vol("c")))
    holder = PodInfo.from_dict(with_volumes(pod("h", node_name="n1"), {"gcePersistentDisk": {"pdName": "d"}}))
    sharer = PodInfo.from_dict(with_volumes(pod("s", node_name="n1"), claim_vol("c")))
    stranger = PodInfo.from_dict(with_volumes(pod("x", node_name="n1"), claim_vol("other")))
    deleted = hints[("Pod", "Delete")]
    assert deleted(waiting, holder, None) and deleted(waiting, sharer, None)
    assert not deleted(waiting, stranger, None)
    added = hints[("PersistentVolumeClaim", "Add")]
    assert added(waiting, None, pvc("c")) and not added(waiting, None, pvc("c", namespace="other"))
    assert ("Node", "Add") in hints


def test_claim_users_are_counted_as_pods_come_and_go():
    hh = PluginTester(VolumeRestrictions, nodes=NODES, objects=[pvc("solo", modes=("ReadWriteOncePod",))])
    user = with_volumes(pod("user", node_name="n1"), claim_vol("solo"))
    hh.add_pod(user)
    assert hh.handle.pvc_in_use("default", "solo")
    hh.cache.remove_pod(user["metadata"]["uid"])
    assert not hh.handle.pvc_in_use("default", "solo")
    assert hh.pre_filter(with_volumes(pod("next"), claim_vol("solo"))).is_skip()


# -- NodeVolumeLimits ---------------------------------------------------------------------------

def limits_tester(existing=(), extra_objects=()):
    nodes = [node("n1"), node("n2"), node("n3")]
    objects = [csinode("n1", ebs_csi_aws_com=1), csinode("n2", ebs_csi_aws_com=2),
               pvc("a", volume="pv-a"), csi_pv("pv-a"), pvc("b", volume="pv-b"), csi_pv("pv-b"), *extra_objects]
    return PluginTester(NodeVolumeLimits, nodes=nodes, pods=existing, objects=objects)


def test_attach_limit_counts_unique_volumes_per_driver():
    on_n1 = with_volumes(pod("old", node_name="n1"), claim_vol("a"))
    hh = limits_tester([on_n1])
    # n1 holds pv-a (limit 1): a second volume does not fit; n2 has room; n3 has no CSINode
    assert hh.filter(with_volumes(pod("p"), claim_vol("b"))) == {"n1": (UNS, (MAX_COUNT,)), "n2": None, "n3": None}
    # the volume already attached there is not counted twice
    assert hh.filter(with_volumes(pod("q"), claim_vol("a")))["n1"] is None
    # two new volumes on n2 (limit 2) fit exactly
    hh.add_pod(with_volumes(pod("more", node_name="n2"), claim_vol("a")))
    assert hh.filter(with_volumes(pod("r"), claim_vol("b")))["n2"] is None


def test_limits_skip_pods_without_countable_volumes_and_ignore_other_drivers():
    hh = limits_tester([with_volumes(pod("old", node_name="n1"), claim_vol("a"))],
                       [pvc("c", volume="pv-c"), csi_pv("pv-c", driver="other.csi.io")])
    assert hh.pre_filter(pod("plain")).is_skip()
    assert hh.pre_filter(with_volumes(pod("csi"), {"csi": {"driver": EBS}})).is_skip()
    assert hh.filter(with_volumes(pod("p"), claim_vol("c")))["n1"] is None


def test_in_tree_volumes_are_counted_against_their_csi_driver():
    inline = {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-123"}}
    in_tree_pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-t"},
                  "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                           "awsElasticBlockStore": {"volumeID": "vol-123"}}}
    hh = limits_tester([with_volumes(pod("old", node_name="n1"), inline)], [pvc("t", volume="pv-t"), in_tree_pv])
    # the in-line volume is ebs.csi.aws.com/vol-123 on n1: a second EBS volume exceeds the limit of 1
    assert hh.filter(with_volumes(pod("p"), claim_vol("a")))["n1"] == (UNS, (MAX_COUNT,))
    # the in-tree PV translates to the same handle: the same volume, it fits
    assert hh.filter(with_volumes(pod("q"), claim_vol("t")))["n1"] is None
    # an Azure disk that is not "Managed" cannot be translated (kube: an error)
    with pytest.raises(FrameworkError, match=r"kind\(Shared\) is not supported in csi migration"):
        limits_tester().filter(with_volumes(pod("az"), {"azureDisk": {"diskName": "d", "diskURI": "uri"}}))
    managed = {"azureDisk": {"diskName": "d", "diskURI": "uri", "kind": "Managed"}}
    assert limits_tester().filter(with_volumes(pod("az2"), managed))["n1"] is None   # no limit for disk.csi.azure.com


def test_unbound_claims_count_against_their_provisioner_and_attachments_count_too():
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ebs"},
          "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"}
    va = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va-1"},
          "spec": {"attacher": EBS, "nodeName": "n2", "source": {"persistentVolumeName": "pv-b"}}}
    hh = limits_tester([], [sc, pvc("late", cls="ebs"), va])
    # n1 is empty (limit 1): one unbound claim fits; n2 (limit 2) has pv-b attached by a VolumeAttachment
    assert hh.filter(with_volumes(pod("p"), claim_vol("late")))["n1"] is None
    assert hh.filter(with_volumes(pod("q"), claim_vol("late"), claim_vol("a"))) == {
        "n1": (UNS, (MAX_COUNT,)), "n2": (UNS, (MAX_COUNT,)), "n3": None}


def test_generic_ephemeral_claims_are_named_after_the_pod_and_must_be_owned():
    p = with_volumes(pod("job"), {"ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    uid = p["metadata"]["uid"]
    hh = limits_tester([with_volumes(pod("old", node_name="n1"), claim_vol("a"))],
                       [pvc("job-v0", volume="pv-e", owner_uid=uid), csi_pv("pv-e")])
    assert hh.filter(p)["n1"] == (UNS, (MAX_COUNT,))
    stolen = limits_tester([], [pvc("job-v0", volume="pv-e", owner_uid="someone-else"), csi_pv("pv-e")])
    with pytest.raises(FrameworkError, match=r"was not created for pod default/job \(pod is not owner\)"):
        stolen.filter(p)


def test_missing_claim_is_unresolvable():
    hh = limits_tester()
    r = hh.filter(with_volumes(pod("p"), claim_vol("nope")))
    assert r["n1"] == (UAU, ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',))


def test_limits_requeue_hints():
    pl = limits_tester().plugin
    hints = {(r.event.resource, r.event.action): r.hint for r in pl.events_to_register()}
    waiting = PodInfo.from_dict(with_volumes(pod("w"), claim_vol("a")))
    up = hints[("CSINode", "Update")]
    assert up(waiting, csinode("n1", ebs_csi_aws_com=1), csinode("n1", ebs_csi_aws_com=2))
    assert not up(waiting, csinode("n1", ebs_csi_aws_com=2), csinode("n1", ebs_csi_aws_com=2))
    deleted = hints[("Pod", "Delete")]
    assert deleted(waiting, PodInfo.from_dict(with_volumes(pod("h", node_name="n1"), claim_vol("a"))), None)
    assert not deleted(waiting, PodInfo.from_dict(pod("plain", node_name="n1")), None)
    assert hints[("PersistentVolumeClaim", "Add")](waiting, None, pvc("a"))
    assert not hints[("PersistentVolumeClaim", "Add")](waiting, None, pvc("zzz"))
    assert ("CSINode", "Add") in hints and ("VolumeAttachment", "Delete") in hints


# -- VolumeBinding: a claim whose StorageClass does not exist ------------------------------------

def test_claim_with_missing_storage_class_is_unbound_immediate():
    """IsDelayBindingMode: a class that cannot be found is not WaitForFirstConsumer, so the claim is an
    unbound Immediate one (UnschedulableAndUnresolvable), not a scheduler error; a StorageClass Add
    requeues the pod."""
    hh = PluginTester(VolumeBinding, nodes=NODES, objects=[pvc("c", cls="nosuch-sc")])
    p = with_volumes(pod("p"), claim_vol("c"))
    st = hh.pre_filter(p)
    assert st.code == UAU and st.reasons == (UNBOUND_IMMEDIATE,)
    # a missing claim still wins, wherever it is listed (podHasPVCs runs first)
    assert hh.pre_filter(with_volumes(pod("q"), claim_vol("c"), claim_vol("nope"))).reasons == (
        'persistentvolumeclaim "nope" not found',)
    hints = {(r.event.resource, r.event.action): r.hint for r in hh.plugin.events_to_register()}
    wffc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "nosuch-sc"},
            "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"}
    assert hints[("StorageClass", "Add")](PodInfo.from_dict(p), None, wffc)
    hh.objects.add(wffc)
    assert hh.pre_filter(p) is None
    # the whole FailedScheduling message, as kube-scheduler's ("not found": DynamicResources' PostFilter)
    sim = OfflineScheduler()
    for n in NODES:
        sim.add_node(n)
    sim.add_object(pvc("c", cls="nosuch-sc"))
    p["spec"]["schedulerName"] = sim.profile
    out = sim.schedule(p, assume=False)
    assert out.node is None and out.code == "Unschedulable"
    assert out.message == "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"


# -- DynamicResources PreEnqueue ----------------------------------------------------------------

def claim(name, namespace="default", owner_uid=None):
    meta = {"name": name, "namespace": namespace, "uid": f"claim-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": owner_uid,
                                    "controller": True}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": {}}


def dra_pod(name, **ref):
    p = pod(name)
    p["spec"]["resourceClaims"] = [{"name": "gpu", **ref}]
    return p


def test_pre_enqueue_holds_pods_until_their_claims_exist():
    hh = PluginTester(DynamicResources, nodes=NODES, objects=[claim("there")])
    pl = hh.plugin
    assert pl.pre_enqueue(PodInfo.from_dict(pod("plain"))) is None
    st = pl.pre_enqueue(PodInfo.from_dict(dra_pod("a", resourceClaimName="missing"), keep_raw=True))
    assert st.code == UAU and st.message() == 'could not find ResourceClaim "default/missing"'
    assert pl.pre_enqueue(PodInfo.from_dict(dra_pod("b", resourceClaimName="there"), keep_raw=True)) is None
    # a template's claim: held until the pod's status names it and the claim, owned by the pod, exists
    t = dra_pod("c", resourceClaimTemplateName="tmpl")
    assert "ResourceClaim not created yet" in pl.pre_enqueue(PodInfo.from_dict(t, keep_raw=True)).message()
    t["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c-gpu-x"}]}
    assert pl.pre_enqueue(PodInfo.from_dict(t, keep_raw=True)) is not None
    hh.objects.add(claim("c-gpu-x", owner_uid="someone-else"))
    assert "pod is not owner" in pl.pre_enqueue(PodInfo.from_dict(t, keep_raw=True)).message()
    hh.objects.add(claim("c-gpu-x", owner_uid=t["metadata"]["uid"]))
    assert pl.pre_enqueue(PodInfo.from_dict(t, keep_raw=True)) is None
    # once its claims exist, PreFilter goes on to allocate (tests/unit/test_plugin_dynamic_resources.py)
    assert hh.pre_filter(dra_pod("b2", resourceClaimName="there")) is None


def test_held_pod_is_released_when_its_claim_is_created():
    sim = OfflineScheduler()
    sim.add_node(node("n1"))
    held = dra_pod("held", resourceClaimName="gpu-claim")
    held["spec"]["schedulerName"] = sim.profile
    uid = held["metadata"]["uid"]
    sim.add_pod(held)
    qpi = sim.queue.get(uid)
    assert qpi is not None and qpi.gated and qpi.gating_plugin == "DynamicResources"
    sim.add_object(claim("unrelated"))
    assert sim.queue.get(uid).gated, "another claim does not release it"
    sim.add_object(claim("gpu-claim"))
    qpi = sim.queue.get(uid)
    assert not qpi.gated and qpi.where == "active"
    assert sim.queue.counts["gated"] == 0


def test_prefilter_state_follows_pods_added_or_removed_for_preemption():
    objects = [pvc("solo", modes=("ReadWriteOncePod",))]
    user = with_volumes(pod("user", node_name="n1"), claim_vol("solo"))
    hh = PluginTester(VolumeRestrictions, nodes=NODES, pods=[user], objects=objects)
    state = hh._state(PodInfo.from_dict(with_volumes(pod("second"), claim_vol("solo"))))
    s = state.get("PreFilterVolumeRestrictions")
    assert s.conflicting_claims == 1
    s.update_with_pod(PodInfo.from_dict(user), -1)   # the user as a preemption victim
    assert s.conflicting_claims == 0
    s.update_with_pod(PodInfo.from_dict(pod("plain", node_name="n2")), 1)
    assert s.conflicting_claims == 0
