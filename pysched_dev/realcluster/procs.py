"""Daemons of the real cluster: started with their own PID recorded, stopped by that PID.

Each daemon is the direct child ``subprocess.Popen`` starts, in a session (and process group) of its
own, with stdout and stderr appended to ``<workdir>/logs/<name>.log``. A command that must set
things up first (the kubelet's and containerd's mount namespaces) ends in ``exec``, so the PID
recorded is the daemon's, never a wrapper shell's (real-node.md §3: a ``nohup`` subshell's PID
left a containerd running). Processes the cluster did not start itself (containerd's shims) are
found by what their command line references (``pids_referencing``), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pysched_dev.devcluster import terminate_process
from pysched_dev.realcluster.errors import RealClusterError


@dataclass
class Daemon:
    """One long-running process of the cluster."""

    name: str
    argv: Sequence[str]
    log: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Daemon:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            try:
                self.proc = subprocess.Popen(list(self.argv), stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             env=self.env)
            except OSError as exc:
                raise RealClusterError(self.name, f"could not start {self.argv[0]}: {exc}") from exc
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, ready: Callable[[], bool], timeout: float, what: str = "ready") -> None:
        """Poll ``ready()`` until it is true; fail naming this daemon (with its log) when it exits
        first or ``timeout`` seconds pass. ``ready`` may raise OSError (not listening yet)."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            if not self.alive():
                code = self.proc.returncode if self.proc is not None else None
                raise RealClusterError(self.name, f"exited with code {code} before it was {what}", self.log)
            try:
                if ready():
                    return
            except (OSError, ValueError) as exc:
                last = f" (last error: {exc})"
            if time.monotonic() > deadline:
                raise RealClusterError(self.name, f"not {what} after {timeout:.0f} s{last}", self.log)
            time.sleep(0.2)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to its process group, SIGKILL after ``grace`` seconds; waits for it to exit."""
        proc = self.proc
        if proc is None:
            return
        terminate_process(proc, grace)
        # the group may hold children that outlived the leader
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def pids_referencing(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (a work directory's path), this one excepted."""
    needle = text.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry.name))
    return found


def kill_pids(pids: Sequence[int], sig: int = signal.SIGKILL, wait: float = 5.0) -> None:
    """Send ``sig`` to each PID and wait until they are gone (at most ``wait`` seconds)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in pids):
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def run(argv: Sequence[str], piece: str, *, timeout: float = 120.0, input: bytes | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    """A short command; on failure a RealClusterError for ``piece`` quoting its output."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, timeout=timeout, input=input)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealClusterError(piece, f"{' '.join(argv)}: {exc}") from exc
    if check and proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode(errors="replace")[-3000:]
        raise RealClusterError(piece, f"{' '.join(argv)} exited with code {proc.returncode}:\n{out}")
    return proc
