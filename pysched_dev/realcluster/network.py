"""The real node's network: one bridge of the cluster's own, private addresses, no forwarding.

A /22 of 10.0.0.0/8 that no address or route on the host touches is split in four /24s:

* the pod network P (``<P>.1`` on the bridge: the pods' gateway address and the node's InternalIP);
* the Service range S: ``<S>.1``, the ``kubernetes`` Service's ClusterIP, is also put on the bridge
  (a /32) and kube-apiserver listens there on 443. A packet to a local address is delivered, not
  forwarded, so pods reach the API server at the ClusterIP through their route to S via ``<P>.1``,
  and stock in-cluster configuration (``KUBERNETES_SERVICE_HOST``, port 443) works without
  kube-proxy; host-side clients use the same address;
* two /24s (one /23) for KWOK's fake nodes and pods (addresses in their status only, never routed).

The CNI configuration is Debian's bridge + host-local, without the gateway mode: ``isGateway: true``
would make the bridge plugin turn on ``net.ipv4.ip_forward`` host-wide (real-node.md §3.4), so the
bridge address is ours, added before the kubelet starts. No IP masquerading (``ipMasq`` false):
pods reach the host and each other, nothing beyond. No portmap plugin: for a pod with a
``hostPort`` it adds a nat table and CNI-HOSTPORT-* chains to the host's iptables that outlive the
pod (checked), so host ports are not forwarded on the real node (the pod still runs).
"""

from __future__ import annotations

import ipaddress
import json
import random
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.procs import run

PIECE = "network"


@dataclass(frozen=True)
class Subnets:
    """The cluster's address plan (see the module docstring)."""

    block: ipaddress.IPv4Network        # the /22 checked free on the host
    pods: ipaddress.IPv4Network         # P
    services: ipaddress.IPv4Network     # S
    kwok: ipaddress.IPv4Network         # KWOK's fake pod addresses

    @property
    def gateway(self) -> str:
        """``<P>.1``: on the bridge; the pods' gateway to S and the node's InternalIP."""
        return str(self.pods.network_address + 1)

    @property
    def api_address(self) -> str:
        """``<S>.1``: the ``kubernetes`` Service's ClusterIP, where kube-apiserver listens."""
        return str(self.services.network_address + 1)

    @property
    def kwok_node_ip(self) -> str:
        return str(self.kwok.network_address + 1)

    @classmethod
    def of(cls, block: ipaddress.IPv4Network) -> Subnets:
        quarters = list(block.subnets(new_prefix=24))
        return cls(block=block, pods=quarters[0], services=quarters[1],
                   kwok=ipaddress.IPv4Network(f"{quarters[2].network_address}/23"))


def host_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network an address or a route on the host covers (the default route excepted)."""
    nets: list[ipaddress.IPv4Network] = []
    for link in _ip_json("-4", "addr"):
        for a in link.get("addr_info", ()):
            if a.get("family", "inet") == "inet":
                nets.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for r in _ip_json("-4", "route", "show", "table", "all"):
        dst = r.get("dst", "default")
        if dst == "default":
            continue
        try:
            nets.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
        except ValueError:
            continue
    return nets


def pick_subnets(taken: list[ipaddress.IPv4Network] | None = None, rng: random.Random | None = None) -> Subnets:
    """A random /22 in 10.100.0.0-10.250.255.255 overlapping nothing in ``taken`` (the host's)."""
    taken = host_networks() if taken is None else taken
    rng = rng or random.Random()
    candidates = [(a, b) for a in range(100, 251) for b in range(0, 256, 4)]
    rng.shuffle(candidates)   # two clusters starting together rarely try the same block first
    for a, b in candidates:
        block = ipaddress.IPv4Network(f"10.{a}.{b}.0/22")
        if not any(block.overlaps(n) for n in taken):
            return Subnets.of(block)
    raise RealClusterError(PIECE, "no free /22 in 10.100.0.0/16-10.250.255.255 on this host")


def bridge_name() -> str:
    """A fresh bridge name (15 characters at most, Linux's limit)."""
    return f"psched-{secrets.token_hex(3)}"


def create_bridge(name: str, subnets: Subnets) -> None:
    """The bridge, up, with ``<P>.1/24`` and ``<S>.1/32``. Fails when the name is taken."""
    run(["ip", "link", "add", name, "type", "bridge"], PIECE)
    try:
        run(["ip", "addr", "add", f"{subnets.gateway}/{subnets.pods.prefixlen}", "dev", name], PIECE)
        run(["ip", "addr", "add", f"{subnets.api_address}/32", "dev", name], PIECE)
        run(["ip", "link", "set", name, "up"], PIECE)
    except RealClusterError:
        delete_bridge(name)
        raise


def delete_bridge(name: str) -> None:
    """Remove the bridge (and so its addresses and routes); nothing when it is gone already."""
    if link_exists(name):
        run(["ip", "link", "del", name], PIECE)


def link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def cni_conflist(path: Path, *, network: str, bridge: str, subnets: Subnets, ipam_dir: Path) -> Path:
    """The CNI network configuration containerd reads (bridge + host-local)."""
    conf = {
        "cniVersion": "1.0.0",
        "name": network,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": False, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local",
                      "ranges": [[{"subnet": str(subnets.pods), "gateway": subnets.gateway}]],
                      "routes": [{"dst": str(subnets.services), "gw": subnets.gateway}],
                      "dataDir": str(ipam_dir)}},
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return path


def _ip_json(*args: str) -> list[dict]:
    out = run(["ip", "-j", *args], PIECE).stdout
    return json.loads(out or b"[]")
