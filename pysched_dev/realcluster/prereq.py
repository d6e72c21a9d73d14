"""What the real cluster needs from the machine, and where its binaries come from.

``unavailable_reason()`` says why a real node cannot run here at all (not Linux, not root, Debian
packages missing and no apt-get to install them): the only cases where the tests skip. Anything
else that goes wrong is a failure. ``binaries()`` obtains the pieces: the Debian packages
(hack/real-node-deps.sh, installed when missing), the control plane (hack/control-plane.sh,
``PYSCHED_BIN_DIR``), the kubelet and pause image (hack/kubelet.sh, ``PYSCHED_KUBELET_DIR``) and
KWOK (hack/kwok.sh, ``PYSCHED_KWOK``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pysched_dev.devcluster import REPO_ROOT, binaries_dir, hack_output
from pysched_dev.livecluster import kwok_binary
from pysched_dev.realcluster.errors import RealClusterError

DEPS_SCRIPT = REPO_ROOT / "hack" / "real-node-deps.sh"
KUBELET_SCRIPT = REPO_ROOT / "hack" / "kubelet.sh"
#: The Debian packages the node runs on (real-node-deps.sh installs these and the image tools).
NODE_PACKAGES = ("containerd", "runc", "iptables", "conntrack", "containernetworking-plugins", "umoci", "skopeo")
#: Commands the cluster itself runs.
COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "mount", "umount", "unshare")


def missing_packages(packages: tuple[str, ...] = NODE_PACKAGES) -> list[str]:
    if not shutil.which("dpkg-query"):
        return [c for c in COMMANDS if not shutil.which(c)]
    missing = []
    for p in packages:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout
        if out != "install ok installed":
            missing.append(p)
    return missing


def unavailable_reason() -> str | None:
    """Why no real node can run on this machine, or None when one can."""
    if sys.platform != "linux":
        return f"a real node needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "a real node (containerd, runc, a kubelet, a bridge, cgroups, mounts) needs root"
    missing = missing_packages()
    if missing and not shutil.which("apt-get"):
        return f"the Debian packages {', '.join(missing)} are missing and there is no apt-get to install them"
    return None


@dataclass(frozen=True)
class Binaries:
    control_plane: Path   # etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
    kubelet_dir: Path     # kubelet, pause.tar, pause.ref
    kwok: Path

    @property
    def kubelet(self) -> Path:
        return self.kubelet_dir / "kubelet"

    @property
    def pause_archive(self) -> Path:
        return self.kubelet_dir / "pause.tar"

    @property
    def pause_image(self) -> str:
        return (self.kubelet_dir / "pause.ref").read_text().strip()


def install_packages() -> None:
    """hack/real-node-deps.sh: installs the missing Debian packages (a no-op when none is)."""
    proc = subprocess.run([str(DEPS_SCRIPT)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RealClusterError("packages", f"{DEPS_SCRIPT} exited with code {proc.returncode}:\n{proc.stderr[-3000:]}")
    missing = [c for c in COMMANDS if not shutil.which(c)]
    if missing:
        raise RealClusterError("packages", f"not on PATH after installing the packages: {', '.join(missing)}")


def binaries() -> Binaries:
    try:
        return Binaries(control_plane=binaries_dir(),
                        kubelet_dir=hack_output("PYSCHED_KUBELET_DIR", KUBELET_SCRIPT),
                        kwok=kwok_binary())
    except Exception as exc:   # a hack script failed: its output went to stderr
        raise RealClusterError("binaries", str(exc)) from exc
