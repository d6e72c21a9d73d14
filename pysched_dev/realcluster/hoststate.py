"""What the host looks like, in the respects a real cluster could change it: for the teardown test.

``HostState.capture()`` records the host-wide things: iptables and ip6tables rules (nft and legacy
back ends, counters dropped), the sysctls the kubelet and the CNI bridge plugin would touch, the
network namespaces in /run/netns, and whether the fixed paths a kubelet, containerd or CNI plugin
writes by default exist. None of these is changed by any RealCluster, so two captures around one
cluster's life must be equal even while another RealCluster runs. ``leftovers(...)`` lists what
one cluster, by its work directory, bridge, addresses and cgroup root, left behind.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pysched_dev.realcluster import cgroups, mounts
from pysched_dev.realcluster.procs import pids_referencing

SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
           "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
           "net/ipv6/conf/all/forwarding", "net/bridge/bridge-nf-call-iptables",
           "net/bridge/bridge-nf-call-ip6tables", "net/ipv4/conf/all/route_localnet")
#: Where a kubelet, containerd, CNI plugins or runc write by default.
DEFAULT_PATHS = ("/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/etc/kubernetes",
                 "/usr/libexec/kubernetes", "/run/containerd", "/var/lib/containerd", "/opt/containerd",
                 "/etc/containerd", "/var/lib/cni", "/etc/cni", "/opt/cni", "/run/netns", "/run/runc",
                 "/var/run/netns", "/run/flannel")
RULE_DUMPS = ("iptables-save", "ip6tables-save", "iptables-legacy-save", "ip6tables-legacy-save")


def _rules(cmd: str) -> list[str]:
    if not shutil.which(cmd):
        return []
    out = subprocess.run([cmd], capture_output=True, text=True).stdout
    # comments carry a timestamp; counters change with traffic
    return [line.split(" [", 1)[0] if line.startswith(":") else line
            for line in out.splitlines() if line and not line.startswith("#")]


@dataclass
class HostState:
    rules: dict[str, list[str]] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)
    netns: list[str] = field(default_factory=list)
    paths: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def capture(cls) -> HostState:
        sysctls = {}
        for name in SYSCTLS:
            p = Path("/proc/sys") / name
            if p.exists():
                sysctls[name.replace("/", ".")] = p.read_text().strip()
        netns = sorted(p.name for d in ("/run/netns", "/var/run/netns") if Path(d).is_dir() for p in Path(d).iterdir())
        return cls(rules={c: _rules(c) for c in RULE_DUMPS}, sysctls=sysctls, netns=netns,
                   paths={p: Path(p).exists() for p in DEFAULT_PATHS})

    def diff(self, other: HostState) -> list[str]:
        """What changed from this capture to ``other``, one line each."""
        out = []
        for cmd in RULE_DUMPS:
            a, b = self.rules.get(cmd, []), other.rules.get(cmd, [])
            out += [f"{cmd}: added {r}" for r in b if r not in a]
            out += [f"{cmd}: removed {r}" for r in a if r not in b]
        out += [f"sysctl {k}: {v} -> {other.sysctls.get(k)}" for k, v in self.sysctls.items()
                if other.sysctls.get(k) != v]
        out += [f"netns added: {n}" for n in other.netns if n not in self.netns]
        out += [f"{p}: {'created' if other.paths.get(p) else 'removed'}" for p, v in self.paths.items()
                if other.paths.get(p) != v]
        return out


def leftovers(*, workdir: Path, bridge: str, block: str, cgroup_root: str, pids: list[int]) -> list[str]:
    """What a stopped cluster left: processes (its recorded PIDs, anything naming its work
    directory), mounts in any process's namespace naming the work directory, its bridge, addresses
    in its block, its cgroups, the work directory itself."""
    out = [f"process {pid} still runs" for pid in pids if _running(pid)]
    out += [f"process {pid} names the work directory: {_cmdline(pid)}"
            for pid in pids_referencing(str(workdir)) if pid not in pids]
    seen = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            for m in mounts.mounts_referencing(workdir, proc.name):
                key = (m["mount_point"], m["source"])
                if key not in seen:
                    seen.add(key)
                    out.append(f"mount {m['mount_point']} ({m['fstype']} {m['source']}) in process {proc.name}'s "
                               "namespace")
    links = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, check=True).stdout)
    net = ipaddress.ip_network(block)
    for link in links:
        if link.get("ifname") == bridge:
            out.append(f"link {bridge} still exists")
        for a in link.get("addr_info", ()):
            if a.get("family") == "inet" and ipaddress.ip_address(a["local"]) in net:
                out.append(f"address {a['local']} on {link.get('ifname')}")
    out += [f"cgroup {p}" for p in cgroups.roots(cgroup_root)]
    if workdir.exists():
        out.append(f"work directory {workdir}")
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"
