"""Mounts of the real cluster in the host's mount namespace, all under its work directory.

The kubelet's root directory is made an rshared bind mount of itself before the kubelet and
containerd start (each in a mount namespace of its own that keeps it shared), so a volume the
kubelet mounts there reaches containerd and the host. Every other mount the node makes lives in
those two private namespaces and goes away with their processes. Teardown unmounts whatever is
still under the work directory, deepest first.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.procs import run

PIECE = "mounts"


def keep_private(*paths: str) -> str:
    """Shell lines, for the start of a namespace script (``unshare -m --propagation unchanged``), that
    make the mounts holding ``paths`` private in that namespace, each on its own (not recursively).

    With ``--propagation unchanged`` the namespace's copy of a host mount stays in the host's peer
    group when the host made it shared (systemd makes ``/`` rshared at boot): an overlay or a bind
    mounted on a directory of it would appear on the host too. Made private, the mounts holding the
    overlaid directories and the shadowed ``/proc/sys`` files keep what is mounted on them inside
    the namespace; the kubelet directory's own rshared bind mount, not touched, still carries the
    volumes to containerd."""
    quoted = " ".join(f"'{p}'" for p in paths)
    return f"""
for p in {quoted}; do
  mount --make-private "$(findmnt -n -o TARGET -T "$p")"
done
"""


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def mountinfo(pid: int | str = "self") -> list[dict[str, str]]:
    """The mounts a process sees: mount point, file-system type, source and options of each."""
    rows: list[dict[str, str]] = []
    try:
        text = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 3:
            continue
        rows.append({"mount_point": _unescape(lf[4]), "root": _unescape(lf[3]), "fstype": rf[0],
                     "source": _unescape(rf[1]), "options": rf[2] + "," + lf[5],
                     "optional": " ".join(lf[6:])})
    return rows


def mounts_referencing(path: Path, pid: int | str = "self") -> list[dict[str, str]]:
    """Mounts whose mount point, source, root or options name ``path`` (an overlay's upperdir...)."""
    p = str(path)
    return [m for m in mountinfo(pid) if any(p in m[k] for k in ("mount_point", "source", "root", "options"))]


def mounts_under(path: Path) -> list[str]:
    """Mount points at or under ``path`` in this namespace, deepest (last mounted) first."""
    p = str(path).rstrip("/")
    points = [m["mount_point"] for m in mountinfo() if m["mount_point"] == p or m["mount_point"].startswith(p + "/")]
    return list(reversed(points))


def make_rshared(path: Path) -> None:
    """Bind ``path`` onto itself and make it rshared (mount propagation to and from its peers)."""
    path.mkdir(parents=True, exist_ok=True)
    run(["mount", "--bind", str(path), str(path)], PIECE)
    run(["mount", "--make-rshared", str(path)], PIECE)


def unmount_all(path: Path, attempts: int = 20) -> None:
    """Unmount everything at or under ``path``, deepest first; lazily when a mount stays busy."""
    for attempt in range(attempts):
        points = mounts_under(path)
        if not points:
            return
        lazy = attempt >= attempts // 2
        for point in points:
            subprocess.run(["umount", *(["-l"] if lazy else []), point], capture_output=True)
        time.sleep(0.1 * (attempt > 0))
    left = mounts_under(path)
    if left:
        raise RealClusterError(PIECE, f"{len(left)} mounts under {path} would not go: {left[:5]}")
