"""A benchmark subprocess: its own process group, its log in the run directory, optionally pinned.

``BenchError`` is raised when a run cannot complete (a process died, pods were left unbound).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    """A run could not complete (a process died, pods were left unbound past the timeout)."""


class Process:
    """A subprocess whose output goes to ``log``; ``preexec`` runs in the child before exec."""

    def __init__(self, args: list[str], log: Path, cwd: Path = REPO,
                 preexec: Callable[[], None] | None = None, metrics_port: int = 0):
        self.log_path = log
        self.metrics_port = metrics_port   # the secure port serving /metrics (0: none)
        self._log = open(log, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(args, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, preexec_fn=preexec)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self, what: str) -> None:
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise BenchError(f"{what} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        """SIGTERM the process group and wait (SIGKILL after 20 s)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
