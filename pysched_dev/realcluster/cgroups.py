"""The real node's cgroups: one root of its own in every cgroup v1 hierarchy.

The kubelet runs with ``cgroupRoot: /<name>`` (cgroupfs driver), so its ``kubepods`` tree and every
pod's and container's cgroup live under ``/sys/fs/cgroup/<hierarchy>/<name>``, never at the top
where another kubelet (or another real cluster) would put its own. The root is created before the
kubelet starts (the kubelet refuses a cgroupRoot that does not exist; the cpuset one gets its
parent's CPUs and memory nodes, which a new cpuset cgroup lacks) and removed, deepest first,
after every process in it is gone.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pysched_dev.realcluster.errors import RealClusterError

PIECE = "cgroups"
CGROUP_FS = Path("/sys/fs/cgroup")


def hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (cgroup v1 controllers, the named systemd one and the
    unified v2 mount of a hybrid host, or the single v2 tree), each once."""
    seen: set[str] = set()
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        rf, lf = right.split(), left.split()
        if not rf or rf[0] not in ("cgroup", "cgroup2"):
            continue
        point = Path(lf[4])
        key = lf[2]   # the hierarchy's device number: the same for every mount of it
        if key in seen or not point.is_dir():
            continue
        seen.add(key)
        out.append(point)
    return out


def cgroup_v1() -> bool:
    return not (CGROUP_FS / "cgroup.controllers").exists()


def create_root(name: str) -> list[Path]:
    """``<hierarchy>/<name>`` in every hierarchy; the directories made (fails when one exists)."""
    made = []
    try:
        for h in hierarchies():
            d = h / name
            d.mkdir()
            made.append(d)
            if (h / "cpuset.cpus").exists():
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((h / f).read_text())
            # cgroup v2: hand the controllers the parent gave this cgroup down to the kubelet's
            controllers = (d / "cgroup.controllers").read_text().split() if (d / "cgroup.controllers").exists() else []
            if controllers:
                (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in controllers))
    except OSError as exc:
        remove_root(name)
        raise RealClusterError(PIECE, f"could not create the cgroup root {name}: {exc}") from exc
    return made


def roots(name: str) -> list[Path]:
    return [h / name for h in hierarchies() if (h / name).is_dir()]


def pids_in(name: str) -> set[int]:
    """Every process in the cgroup root's trees."""
    pids: set[int] = set()
    for root in roots(name):
        for procs in root.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return pids


def kill_all(name: str, wait: float = 10.0) -> None:
    """SIGKILL every process in the cgroup root's trees until none is left (at most ``wait`` s)."""
    deadline = time.monotonic() + wait
    while pids := pids_in(name):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RealClusterError(PIECE, f"processes {sorted(pids)[:10]} stay in the cgroups of {name}")
        time.sleep(0.1)


def remove_root(name: str, wait: float = 10.0) -> None:
    """rmdir every cgroup under ``<hierarchy>/<name>`` and the root itself, deepest first; a cgroup
    whose last process is still exiting is retried for ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        left = []
        for root in roots(name):
            dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            for d in [*dirs, root]:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
        if not left:
            return
        if time.monotonic() > deadline:
            raise RealClusterError(PIECE, f"cgroups left behind: {[str(p) for p in left[:5]]}")
        time.sleep(0.1)
