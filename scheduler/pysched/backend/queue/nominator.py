"""Nominator: pending pods expected on a node (``status.nominatedNodeName``), per node.

kube-scheduler's ``backend/queue/nominator.go``: a pod is nominated when preemption picks a node
for it (we record that at once, before the status patch comes back through the informer), or
when the informer reports a pending pod of ours that already carries ``nominatedNodeName``. Filter
then checks a pod against each node twice - as if the equal-or-higher-priority pods nominated
there were already running, and as it is - so a second preemptor does not take the room freed
for the first (``Framework.run_filters``).

A pod leaves when it is deleted, bound or assumed, or when its nomination is cleared; an update
that drops the field while we still hold a nomination keeps it (our patch may not have arrived
yet), as upstream's ``UpdateNominatedPod``. ``nodes`` is empty when nothing is nominated: the
filter's hot path checks only that.
"""

from __future__ import annotations

from pysched.framework.podinfo import PodInfo


class Nominator:
    __slots__ = ("nodes", "node_of")

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, PodInfo]] = {}   # node name -> uid -> nominated pod
        self.node_of: dict[str, str] = {}                 # uid -> node name

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def __len__(self) -> int:
        return len(self.node_of)

    def add(self, pod: PodInfo, node: str | None = None) -> None:
        """Nominate ``pod`` for ``node`` (None: the pod's own ``nominatedNodeName``, if any; an
        empty string clears the nomination)."""
        self.delete(pod.uid)
        name = pod.nominated_node if node is None else node
        if not name or pod.node_name:
            return
        self.node_of[pod.uid] = name
        self.nodes.setdefault(name, {})[pod.uid] = pod

    def update(self, old: PodInfo | None, new: PodInfo) -> None:
        """An informer update of a pending pod: keep our nomination when neither version names one."""
        held = self.node_of.get(new.uid)
        if held and not new.nominated_node and (old is None or not old.nominated_node):
            self.add(new, held)
            return
        self.add(new)

    def delete(self, uid: str) -> None:
        name = self.node_of.pop(uid, None)
        if name is None:
            return
        pods = self.nodes.get(name)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self.nodes[name]

    def nominated_node(self, uid: str) -> str:
        return self.node_of.get(uid, "")

    def node_names(self) -> list[str]:
        return list(self.nodes)

    def pods_for_node(self, node: str) -> list[PodInfo]:
        """The pods nominated for ``node``, in nomination order."""
        pods = self.nodes.get(node)
        return list(pods.values()) if pods else []
