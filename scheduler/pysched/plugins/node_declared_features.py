"""NodeDeclaredFeatures (PreFilter, Filter): keeps a pod off nodes that do not declare the features
its spec needs.

A kubelet publishes the node-level features it supports in ``status.declaredFeatures`` (a sorted
list of names). Some pod fields only work on a node that has the matching feature; PreFilter
infers which of the known features the pod needs, Filter rejects every node whose declared list
lacks one of them. Followed: kube-scheduler 1.37.2's ``nodedeclaredfeatures`` plugin and the
feature registry it consults (``k8s.io/component-helpers/nodedeclaredfeatures`` v0.37.2), in our
own form: ``FEATURES``, a table of the registry's features in its (name) order, each with the pod
fields that require it for scheduling - the registry at 1.37.2 has nine, three of which a pod can
require before it is bound:

* ``RestartAllContainersOnContainerExits``: a container or init container with a
  ``restartPolicyRules`` entry whose ``action`` is ``RestartAllContainers`` (ephemeral
  containers are not looked at, as upstream);
* ``UserNamespacesHostNetworkSupport``: ``hostNetwork: true`` with ``hostUsers: false``;
* ``VolumeBindMountOptions``: a non-empty ``bindMountOptions`` on any volume mount of a container,
  init container or ephemeral container.

The other six (DRANodeAllocatableResources, DRAOptionalNodeOperations - DynamicResources checks
that one itself, on the allocation -, ExtendWebSocketsToKubelet, and the three in-place resize
features, which concern updates of a running pod) are never required for scheduling. A feature
may carry a highest Kubernetes version it matters for (``max_version``: once every supported
kubelet has it, it stops being required); none does at 1.37.2, and the version compared is the
one this plugin follows, ``KUBE_VERSION``. Names a node declares that the table does not know are
ignored.

Verdict: ``node(s) didn't match Pod's required features`` (UnschedulableAndUnresolvable).
A pod that needs no feature is skipped at PreFilter (no Filter runs for it).

Events (EventsToRegister): Node Add and UpdateNodeDeclaredFeature - the hint requeues on an added
node, or when the declared list changed at all (compared as sent, unknown names included); the
pod's own update (upstream's TargetPod Update) - requeued only if the features it needs changed.

Feature gates (``handle.feature_gates``): without ``NodeDeclaredFeatures`` (kube-scheduler 1.35's
default: alpha, off; on from 1.36, GA and locked on in 1.37) the plugin does nothing: PreFilter
skips, Filter passes every node, no event is registered - and node updates that only change
``status.declaredFeatures`` are no cluster event (``eventhandlers``). With
``InPlacePodVerticalScalingSchedulerPreemption`` (alpha, off in 1.37) a pod whose resize is
deferred (condition ``PodResizePending`` with reason ``Deferred``) is skipped as well.

Not carried over: upstream's SignPod (the pod signature of opportunistic batching, which pysched
does not do).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pysched.framework import (
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    NodeSpec,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)

GATE = "NodeDeclaredFeatures"
RESIZE_PREEMPTION_GATE = "InPlacePodVerticalScalingSchedulerPreemption"
REASON = "node(s) didn't match Pod's required features"
STATE_KEY = "PreFilterNodeDeclaredFeatures"
# The Kubernetes version whose plugin this is: features whose ``max_version`` is older are no
# longer required (upstream compares kube-scheduler's own version).
KUBE_VERSION = (1, 37, 2)

Spec = Mapping[str, Any]


def _mounts_with_bind_options(containers: Any) -> bool:
    return any(m.get("bindMountOptions") for c in containers or () for m in c.get("volumeMounts") or ())


def _restart_all_containers(spec: Spec) -> bool:
    return any(rule.get("action") == "RestartAllContainers"
               for key in ("containers", "initContainers")
               for c in spec.get(key) or ()
               for rule in c.get("restartPolicyRules") or ())


def _user_namespaces_host_network(spec: Spec) -> bool:
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def _volume_bind_mount_options(spec: Spec) -> bool:
    return any(_mounts_with_bind_options(spec.get(key)) for key in ("containers", "initContainers",
                                                                     "ephemeralContainers"))


@dataclass(frozen=True)
class DeclaredFeature:
    """One feature of the registry: its name as nodes declare it; ``required_by(spec)``, whether a
    pod with that spec needs it to be scheduled (None: never, the feature concerns updates or the
    node alone); ``max_version``, the last Kubernetes version it is required for (None: all)."""
    name: str
    required_by: Callable[[Spec], bool] | None = None
    max_version: tuple[int, int, int] | None = None


# component-helpers' registry (``features.AllFeatures``) at v0.37.2, in its order (by name).
FEATURES: tuple[DeclaredFeature, ...] = (
    DeclaredFeature("DRANodeAllocatableResources"),
    DeclaredFeature("DRAOptionalNodeOperations"),      # DynamicResources checks it on the allocation
    DeclaredFeature("ExtendWebSocketsToKubelet"),
    DeclaredFeature("InPlacePodLevelResourcesVerticalScaling"),       # resizes of a running pod only
    DeclaredFeature("InPlacePodVerticalScalingInitContainers"),       # resizes of a running pod only
    DeclaredFeature("InPlacePodVerticalScalingMemoryBackedVolumes"),  # resizes of a running pod only
    DeclaredFeature("RestartAllContainersOnContainerExits", _restart_all_containers),
    DeclaredFeature("UserNamespacesHostNetworkSupport", _user_namespaces_host_network),
    DeclaredFeature("VolumeBindMountOptions", _volume_bind_mount_options),
)
_BIT = {f.name: 1 << i for i, f in enumerate(FEATURES)}


def required_features(spec: Spec | None, version: tuple[int, int, int] = KUBE_VERSION) -> int:
    """The features a pod with ``spec`` needs on its node, as a bit set over ``FEATURES``."""
    if not spec:
        return 0
    need = 0
    for f in FEATURES:
        if f.required_by is None or (f.max_version is not None and version > f.max_version):
            continue
        if f.required_by(spec):
            need |= _BIT[f.name]
    return need


def feature_names(bits: int) -> list[str]:
    """The names of the features in a bit set, in the registry's order."""
    return [f.name for f in FEATURES if bits & _BIT[f.name]]


def declared_bits(declared: tuple[str, ...]) -> int:
    """A node's declared features as a bit set; names the registry does not know are dropped."""
    bits = 0
    for name in declared:
        bits |= _BIT.get(name, 0)
    return bits


def _spec_of(pod: PodInfo) -> Spec | None:
    raw = pod.raw
    return raw.get("spec") if raw is not None else None


def resize_deferred(pod: PodInfo) -> bool:
    """The pod's ``PodResizePending`` condition says Deferred (component-helpers' IsPodResizeDeferred)."""
    raw = pod.raw
    for c in ((raw or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodResizePending":
            return bool(c.get("reason") == "Deferred")
    return False


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodeDeclaredFeatures"
    pre_filter_reads_other_pods = False

    def __init__(self, args: None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.enabled = GATE in handle.feature_gates
        self.skip_deferred_resizes = RESIZE_PREEMPTION_GATE in handle.feature_gates
        # Each node's declared features as bits, by table slot; -1 where not read yet. Valid while
        # the node table's version is ``_key`` (a node added, changed or removed starts over).
        self._key: tuple[int, int, int] | None = None
        self._by_slot = np.zeros(0, dtype=np.int64)

    def _skips(self, pod: PodInfo) -> bool:
        return not self.enabled or (self.skip_deferred_resizes and resize_deferred(pod))

    # -- PreFilter / Filter --------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if self._skips(pod):
            return None, Status(Code.SKIP)
        need = required_features(_spec_of(pod))
        if not need:
            return None, Status(Code.SKIP)
        state.write(STATE_KEY, need)
        return None, None

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # the node's declared features only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        n = len(nodes)
        if self._skips(pod):
            return FilterResult.all_pass(n)
        need: int | None = state.get(STATE_KEY)
        if need is None:
            need = required_features(_spec_of(pod))
        if not need:
            return FilterResult.all_pass(n)
        declared = self._declared(nodes)
        return FilterResult.from_mask((declared & need) == need, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def _declared(self, nodes: NodeBatch) -> np.ndarray:
        """Each node's declared features (bits) for the batch, read once per node per table version."""
        key = nodes.nodes_version
        if key != self._key:
            self._key, self._by_slot = key, np.full(nodes.slot_count, -1, dtype=np.int64)
        got = nodes.take(self._by_slot)
        unread = got < 0
        if unread.any():
            fresh = nodes.subset(unread)
            bits = np.fromiter((declared_bits(i.spec.declared_features) for i in fresh.infos),
                               dtype=np.int64, count=len(fresh))
            self._by_slot[fresh.slots] = bits
            got[unread] = bits
        return got

    # -- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        if not self.enabled:
            return ()
        return (ClusterEventWithHint(ClusterEvent("Node", "Add"), schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeDeclaredFeature"), schedulable_after_node_change),
                ClusterEventWithHint(ClusterEvent("Pod", "Update"), schedulable_after_pod_update))


def schedulable_after_node_change(pod: PodInfo, old: NodeSpec | None, new: NodeSpec | None) -> bool:
    """Upstream's isSchedulableAfterNodeChange: an added node, or one whose declared list changed."""
    if new is None:
        return False
    return old is None or old.declared_features != new.declared_features


def schedulable_after_pod_update(pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
    """Upstream's isSchedulableAfterTargetPodUpdate: the pod itself, when the features it needs changed."""
    if old is None or new is None or new.uid != pod.uid:
        return False
    return required_features(_spec_of(old)) != required_features(_spec_of(new))
