"""NodePorts (PreFilter, Filter): a pod's hostPorts must be free on the node.

A wanted (hostIP, protocol, hostPort) conflicts with a port already used on the node when the
protocol and port are equal and either IP is 0.0.0.0 or both IPs are equal (an empty hostIP means
0.0.0.0, an empty protocol TCP). Only regular containers and restartable init containers count,
as upstream. Reads: the pod's container ports; the node's used ports (pods bound or assumed).
Reason: ``node(s) didn't have free ports for the requested pod ports`` (Unschedulable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pysched.framework import (
    READS_ANY,
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    NodeInfo,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)

REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"

HostPort = tuple[str, str, int]   # (hostIP, protocol, hostPort), defaults filled in


def fits_ports(wanted: Iterable[HostPort], used: Mapping[HostPort, int]) -> bool:
    if not used:
        return True
    for ip, proto, port in wanted:
        if ip == ANY_IP:
            for (_uip, uproto, uport) in used:
                if uproto == proto and uport == port:
                    return False
        elif (ANY_IP, proto, port) in used or (ip, proto, port) in used:
            return False
    return True


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodePorts"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, Status(Code.SKIP)
        return None, None

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_ANY if pod.host_ports else READS_NONE   # other pods' host ports

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        wanted = pod.host_ports
        if not wanted:
            return FilterResult.all_pass(len(nodes))

        def check(node: NodeInfo) -> Status | None:
            return None if fits_ports(wanted, node.used_ports) else Status(Code.UNSCHEDULABLE, REASON)

        return FilterResult.each(nodes, check)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete"), _deleted_pod_had_port),
                ClusterEventWithHint(ClusterEvent("Node", "Add")))


def _deleted_pod_had_port(pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
    if old is None or not old.host_ports:
        return False
    used = {p: 1 for p in old.host_ports}
    return not fits_ports(pod.host_ports, used)
