"""Control planes started ahead of the test that needs them, and stopped behind it.

Every test still gets an etcd + kube-apiserver of its own: nothing is shared between tests and
nothing is cleaned up in between, so no test can see another's nodes. What moves off the test's
path is the waiting: starting a control plane takes about 3 s of wall time (2.6 s of CPU) and a
graceful stop about 1 s. While a test runs, the pool starts the next test's control plane when the
next test asks for one (pytest says which test comes next), and a used control plane is stopped in
the background. A control plane that failed to start is started again in the test's own path, so
its error is the test's error.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from pysched_dev.devcluster import ControlPlane


class ControlPlanePool:
    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cp-pool")
        self._spare: Future[ControlPlane] | None = None
        self._stopping: list[Future[None]] = []
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Start one control plane in the background for the next ``take`` (no-op when one is warming)."""
        with self._lock:
            if self._spare is None:
                self._spare = self._executor.submit(lambda: ControlPlane().start())

    def take(self) -> ControlPlane:
        """A started control plane: the warm one when there is one, else one started now."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            try:
                return spare.result()
            except Exception:   # noqa: BLE001 - started again below, so the error is this test's
                pass
        return ControlPlane().start()

    def give_back(self, cp: ControlPlane) -> None:
        """Stop ``cp`` in the background (its processes are killed by PID, its directory removed)."""
        self._stopping = [f for f in self._stopping if not f.done()]
        self._stopping.append(self._executor.submit(cp.stop))

    def close(self) -> None:
        """Stop everything: the warm spare and every control plane still stopping."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            try:
                spare.result().stop()
            except Exception:   # noqa: BLE001 - a spare that never started has nothing to stop
                pass
        for f in self._stopping:
            f.result()
        self._executor.shutdown(wait=True)
