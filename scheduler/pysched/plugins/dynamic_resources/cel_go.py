"""DRA device selectors evaluated by ``pysched-cel``: kube-scheduler's own CEL code, in a helper process.

``cmd/pysched-cel`` links ``k8s.io/dynamic-resource-allocation/cel`` at the Kubernetes version
pysched follows, so a selector compiles, evaluates and fails exactly as in kube-scheduler: the
whole Kubernetes CEL environment (optional types, the strings, lists, sets, regex, quantity, semver,
IP/CIDR, URL and format libraries, ``cel.bind``), the runtime cost limit, and upstream's error
texts. One helper process serves the scheduler for its lifetime; requests and answers are JSON
lines on its stdin/stdout (the protocol is in ``cmd/pysched-cel/main.go``).

A round trip costs about 70 us on this machine, so the allocator asks for many devices at once
(``evaluate`` takes a list) and remembers every answer per device version. The scheduling cycle
waits for the answer: a helper that does not answer within ``ANSWER_TIMEOUT`` is killed and started
again, and the selector fails with an error naming that.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
import time
from typing import Any

import orjson

from pysched.plugins.dynamic_resources.celerrors import SelectorError

log = logging.getLogger("pysched.plugins.dra.cel")

ANSWER_TIMEOUT = 10.0


class HelperError(RuntimeError):
    """The helper process could not be started or did not answer."""


class GoEngine:
    """The ``pysched-cel`` helper at ``path``; started on first use, restarted after a failure."""

    name = "pysched-cel"
    exact = True

    def __init__(self, path: str, *, consumable_capacity: bool = False):
        self.path = path
        self.args = [path] + (["--consumable-capacity"] if consumable_capacity else [])
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._lock = threading.Lock()   # simulate and explain may share the engine with the loop
        self.requests = 0

    # -- the engine API ---------------------------------------------------------------------------

    def compile(self, expression: str) -> str:
        """The program handle is the expression itself: the helper compiles and caches it."""
        answer = self._ask(b'{"op":"compile","expr":' + orjson.dumps(expression) + b"}\n")
        if answer.get("compileError"):
            raise SelectorError(answer["compileError"])
        return expression

    def evaluate(self, program: Any, expression: str, devices: list[Any]) -> list[bool | SelectorError]:
        if not devices:
            return []
        payload = b"".join((b'{"op":"eval","expr":', orjson.dumps(expression), b',"devices":[',
                            b",".join(d.wire for d in devices), b"]}\n"))
        answer = self._ask(payload)
        if answer.get("compileError"):
            err = SelectorError(answer["compileError"])
            return [err] * len(devices)
        results = answer.get("results") or []
        if len(results) != len(devices):
            raise SelectorError(f"pysched-cel answered {len(results)} results for {len(devices)} devices")
        return [SelectorError(r["error"]) if r.get("error") else bool(r.get("match")) for r in results]

    def version(self) -> dict[str, Any]:
        return self._ask(b'{"op":"version"}\n')

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -- the process ------------------------------------------------------------------------------

    def _ask(self, payload: bytes) -> dict[str, Any]:
        with self._lock:
            for attempt in (1, 2):
                try:
                    proc = self._start()
                    assert proc.stdin is not None
                    proc.stdin.write(payload)
                    proc.stdin.flush()
                    answer = orjson.loads(self._read_line(proc, time.monotonic() + ANSWER_TIMEOUT))
                    self.requests += 1
                    if answer.get("error"):
                        raise SelectorError(f"pysched-cel refused the request: {answer['error']}")
                    return answer
                except (OSError, HelperError, orjson.JSONDecodeError) as exc:
                    log.error("pysched-cel failed; starting it again", extra={"kv": {
                        "path": self.path, "attempt": attempt, "error": str(exc) or type(exc).__name__}})
                    self._stop()
                    if attempt == 2:
                        raise SelectorError(f"the CEL helper pysched-cel failed: {exc}") from None
        raise AssertionError("unreachable")

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        try:
            self._proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=None, bufsize=0, close_fds=True)
        except OSError as exc:
            raise HelperError(f"cannot start {self.path}: {exc}") from None
        self._buf = b""
        return self._proc

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HelperError(f"no answer within {ANSWER_TIMEOUT:g}s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise HelperError(f"the helper exited (code {proc.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        self._buf = b""
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
