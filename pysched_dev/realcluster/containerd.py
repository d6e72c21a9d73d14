"""The real node's container runtime: a containerd of the cluster's own (Debian's 1.6, runc).

Its configuration, root, state, socket, CNI configuration and runc state all live under the work
directory. It runs in a mount namespace of its own (``unshare -m --propagation unchanged``, so the
kubelet's rshared root directory still propagates volume mounts to it) in which ``/run`` and
``/var/lib`` are overlays whose writable layers are in the work directory: containerd 1.6 puts its
shims' sockets in ``/run/containerd/s`` whatever its configuration says, and libcni its result
cache in ``/var/lib/cni``; both stay there, not on the host.
Container root file systems and the pods' network-namespace mounts
(``netns_mounts_under_state_dir``) are made in that namespace too, so they go away with
containerd and its shims. ``restrict_oom_score_adj``: without CAP_SYS_RESOURCE runc cannot give
a sandbox the negative OOM score CRI asks for (real-node.md §3.2); it is clamped to containerd's.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.mounts import keep_private
from pysched_dev.realcluster.procs import Daemon, pids_referencing, run

PIECE = "containerd"
NAMESPACE = "k8s.io"   # CRI's containerd namespace

#: Host directories containerd or its children write below fixed paths: an overlay over each in its
#: namespace (containerd 1.6's shim sockets in /run/containerd/s; libcni's result cache in
#: /var/lib/cni, which the CNI plugins containerd runs write).
OVERLAID = ("/run", "/var/lib")
#: $1: the overlays' directory; then containerd's argv.
NAMESPACE_SCRIPT = """
overlays="$1"; shift
""" + keep_private(*OVERLAID) + "".join(f"""
mkdir -p "$overlays/{i}/upper" "$overlays/{i}/work"
mount -t overlay overlay -o "lowerdir={d},upperdir=$overlays/{i}/upper,workdir=$overlays/{i}/work" {d}
""" for i, d in enumerate(OVERLAID)) + """
exec "$@"
"""


class Containerd:
    """containerd under ``root_dir`` (``<workdir>/containerd``)."""

    def __init__(self, root_dir: Path, *, cni_conf_dir: Path, sandbox_image: str, log: Path) -> None:
        self.dir = root_dir
        self.socket = root_dir / "containerd.sock"
        self.config = root_dir / "config.toml"
        self.cni_conf_dir = cni_conf_dir
        self.sandbox_image = sandbox_image
        self.log = log
        self.daemon: Daemon | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def write_config(self) -> Path:
        d = self.dir
        for sub in ("root", "state", "opt"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        self.config.write_text(f"""version = 2
root = "{d / 'root'}"
state = "{d / 'state'}"
oom_score = 0

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'opt'}"

[{cri}]
  sandbox_image = "{self.sandbox_image}"
  restrict_oom_score_adj = true
  # no AppArmor profile loaded into the kernel (CRI would load cri-containerd.apparmor.d and never
  # unload it)
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{d / 'runc'}"

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{self.cni_conf_dir}"
  max_conf_num = 1
""")
        return self.config

    def start(self, timeout: float = 60.0) -> None:
        self.write_config()
        d = self.dir
        argv = ["unshare", "-m", "--propagation", "unchanged", "sh", "-ec", NAMESPACE_SCRIPT, "sh",
                str(d / "ns-overlays"), "containerd", "--config", str(self.config), "--log-level", "warn"]
        self.daemon = Daemon("containerd", argv, self.log).start()
        self.daemon.wait_ready(lambda: self.ctr("version", check=False).returncode == 0, timeout,
                               "serving on its socket")

    # -- ctr ---------------------------------------------------------------------------------

    def ctr(self, *args: str, check: bool = True, timeout: float = 300.0):
        return run(["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args], PIECE,
                   timeout=timeout, check=check)

    def images(self) -> list[str]:
        return self.ctr("images", "ls", "-q").stdout.decode().split()

    def import_image(self, archive: Path) -> list[str]:
        """Import a docker-archive or oci-archive (``ctr images import``, unpacked for CRI); the
        image names it carried, now in containerd's ``k8s.io`` namespace."""
        archive = Path(archive)
        names, oci = archive_names(archive)
        if not names:
            raise RealClusterError(PIECE, f"{archive}: no image name in the archive (docker RepoTags or an "
                                          "OCI org.opencontainers.image.ref.name annotation)")
        if oci:
            # containerd reads an OCI ref.name as a tag only: the repository goes in --base-name
            for repo in sorted({n.rsplit(":", 1)[0] for n in names}):
                self.ctr("images", "import", "--base-name", repo, str(archive))
        else:
            self.ctr("images", "import", str(archive))
        have = set(self.images())
        missing = [n for n in names if normalize(n) not in have]
        if missing:
            raise RealClusterError(PIECE, f"{archive}: imported, but {missing} not among the images: {sorted(have)}")
        return [normalize(n) for n in names]

    # -- teardown ----------------------------------------------------------------------------

    def kill_tasks(self, timeout: float = 20.0) -> None:
        """SIGKILL every task (container) and delete it, so its shim exits."""
        if self.daemon is None or not self.daemon.alive():
            return
        tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.decode().split()
        for t in tasks:
            self.ctr("tasks", "kill", "--all", "--signal", "SIGKILL", t, check=False, timeout=timeout)
        deadline = time.monotonic() + timeout
        while tasks and time.monotonic() < deadline:
            for t in tasks:
                self.ctr("tasks", "delete", "--force", t, check=False, timeout=timeout)
            tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.decode().split()
            if tasks:
                time.sleep(0.2)

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()

    def shim_pids(self) -> list[int]:
        """containerd's shims (started by containerd, in their own sessions), found by our socket."""
        return pids_referencing(str(self.socket))


def normalize(name: str) -> str:
    """A reference as containerd stores it (``docker.io/library/`` added where Docker would)."""
    first, sep, rest = name.partition("/")
    if not sep:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def archive_names(archive: Path) -> tuple[list[str], bool]:
    """The image names an archive carries and whether it is an OCI layout (else docker-archive)."""
    try:
        with tarfile.open(archive) as tar:
            members = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
            if "index.json" in members and "oci-layout" in members:
                index = json.load(io.BytesIO(_read(tar, members["index.json"])))
                names = []
                for m in index.get("manifests", ()):
                    ann = m.get("annotations") or {}
                    name = ann.get("io.containerd.image.name") or ann.get("org.opencontainers.image.ref.name")
                    if name and ("/" in name or ":" in name):
                        names.append(name)
                return names, True
            if "manifest.json" in members:
                manifest = json.load(io.BytesIO(_read(tar, members["manifest.json"])))
                return [t for entry in manifest for t in entry.get("RepoTags") or ()], False
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise RealClusterError(PIECE, f"{archive}: not a readable image archive: {exc}") from exc
    raise RealClusterError(PIECE, f"{archive}: neither a docker-archive nor an oci-archive")


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(member)
    if f is None:
        raise ValueError(f"{member.name} is not a file")
    return f.read()
