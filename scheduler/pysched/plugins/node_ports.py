"""NodePorts (PreFilter, Filter): a pod's hostPorts must be free on the node.

A wanted (hostIP, protocol, hostPort) conflicts with a port already used on the node when the
protocol and port are equal and either IP is 0.0.0.0 or both IPs are equal (an empty hostIP means
0.0.0.0, an empty protocol TCP). Only regular containers and restartable init containers count,
as upstream. Reads: the pod's container ports; the node's used ports (pods bound or assumed).
Reason: ``node(s) didn't have free ports for the requested pod ports`` (Unschedulable).
"""

from __future__ import annotations

from pysched.framework.interface import (FilterResult, ClusterEvent, ClusterEventWithHint, EnqueueExtensions, FilterPlugin,
                                           PreFilterPlugin)
from pysched.framework.status import Code, Status

REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def fits_ports(wanted, used: dict) -> bool:
    if not used:
        return True
    for ip, proto, port in wanted:
        if ip == ANY_IP:
            for (uip, uproto, uport) in used:
                if uproto == proto and uport == port:
                    return False
        elif (ANY_IP, proto, port) in used or (ip, proto, port) in used:
            return False
    return True


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodePorts"

    def pre_filter(self, state, pod, nodes):
        if not pod.host_ports:
            return None, Status(Code.SKIP)
        return None, None

    def filter(self, state, pod, nodes):
        if not pod.host_ports:
            return FilterResult.all_pass(len(nodes))
        return FilterResult.each(nodes, lambda node: self._filter_node(state, pod, node))

    def _filter_node(self, state, pod, node):
        if pod.host_ports and not fits_ports(pod.host_ports, node.used_ports):
            return Status(Code.UNSCHEDULABLE, REASON)
        return None

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete"), _deleted_pod_had_port),
                ClusterEventWithHint(ClusterEvent("Node", "Add")))


def _deleted_pod_had_port(pod, old, new) -> bool:
    if old is None or not old.host_ports:
        return False
    used = {p: 1 for p in old.host_ports}
    return not fits_ports(pod.host_ports, used)
