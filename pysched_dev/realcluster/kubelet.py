"""The real node's kubelet, kept off every host-wide setting.

It runs with the cgroupfs driver on cgroup v1 (``failCgroupV1: false``; this kind of host has no
cgroup v2 controllers and no systemd) under a cgroup root of the cluster's own, serves on the node
address only (``<P>.1``, on the cluster's bridge), creates no iptables chains
(``makeIPTablesUtilChains: false``: in kubelet 1.35 that flag alone guards the KUBE-IPTABLES-HINT,
KUBE-FIREWALL and KUBE-KUBELET-CANARY chains, pkg/kubelet/kubelet_network_linux.go), keeps its
FlexVolume directory in the work directory, and starts in a mount namespace of its own
(``unshare -m --propagation unchanged``: its rshared root directory still propagates volume mounts
to containerd and the host) where

* the six kernel tunables it would otherwise rewrite host-wide (``vm.overcommit_memory``,
  ``vm.panic_on_oom``, ``kernel.panic``, ``kernel.panic_on_oops``, ``kernel.keys.root_maxkeys`` and
  ``root_maxbytes``; container_manager_linux.go's setupKernelTunables) are files holding the values
  it wants, bind-mounted over ``/proc/sys`` (real-node.md §3.3);
* ``/var/lib`` and ``/var/log`` are overlays whose writable layers are in the work directory: the
  device-plugin socket (``/var/lib/kubelet/device-plugins``) and the container log links
  (``/var/log/containers``) are fixed paths in kubelet 1.35, and they land there, not on the host.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pysched_dev.realcluster.mounts import keep_private

#: What setupKernelTunables (kubelet 1.35) sets, as ``/proc/sys`` paths.
KERNEL_TUNABLES = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
#: Host directories the kubelet writes below fixed paths: an overlay over each in its namespace.
OVERLAID = ("/var/lib", "/var/log")

KUBELET_PORT = 10250
HEALTHZ_PORT = 10248

# $1: the directory of tunable files (named as sysctl names them: vm.overcommit_memory), $2: the
# overlays' directory; then the kubelet's argv.
NAMESPACE_SCRIPT = """
tunables="$1"; overlays="$2"; shift 2
""" + keep_private(*OVERLAID, *(f"/proc/sys/{t}" for t in KERNEL_TUNABLES)) + """
for f in "$tunables"/*; do
  mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"
done
""" + "".join(f"""
mkdir -p "$overlays/{i}/upper" "$overlays/{i}/work"
mount -t overlay overlay -o "lowerdir={d},upperdir=$overlays/{i}/upper,workdir=$overlays/{i}/work" {d}
""" for i, d in enumerate(OVERLAID)) + """
exec "$@"
"""


def config(path: Path, *, node_ip: str, endpoint: str, cgroup_root: str, ca: Path, tls: tuple[Path, Path],
           pod_logs: Path, volume_plugins: Path) -> Path:
    """The KubeletConfiguration."""
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": node_ip,
        "healthzPort": HEALTHZ_PORT,
        "containerRuntimeEndpoint": endpoint,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "podLogsDir": str(pod_logs),
        "volumePluginDir": str(volume_plugins),
        "tlsCertFile": str(tls[0]),
        "tlsPrivateKeyFile": str(tls[1]),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca)}},
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": False,
        # a busy shared disk must not evict the cluster's own pods
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 95,
        "shutdownGracePeriod": "0s",
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def write_tunables(directory: Path) -> Path:
    """One file per kernel tunable, holding the value the kubelet wants (mounted over the real one)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in KERNEL_TUNABLES.items():
        (directory / name.replace("/", ".")).write_text(value + "\n")
    return directory


def argv(binary: Path, *, ns_dir: Path, config_file: Path, kubeconfig: Path, root_dir: Path, node_name: str,
         node_ip: str) -> list[str]:
    """The kubelet's command line, wrapped in its mount namespace (the recorded PID is the kubelet's:
    ``unshare`` without ``--fork`` and the shell both exec)."""
    tunables = write_tunables(ns_dir / "sysctl")
    return ["unshare", "-m", "--propagation", "unchanged", "sh", "-ec", NAMESPACE_SCRIPT, "sh",
            str(tunables), str(ns_dir / "overlays"),
            str(binary), f"--config={config_file}", f"--kubeconfig={kubeconfig}", f"--root-dir={root_dir}",
            f"--cert-dir={root_dir / 'pki'}", f"--hostname-override={node_name}", f"--node-ip={node_ip}",
            "--v=1"]
