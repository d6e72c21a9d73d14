"""SIGTERM during any start-up step ends the process promptly, and the port is not served once shutdown began.

Each step can wait indefinitely on the API server: the client-CA lookup of the secure port's
authentication (made once the scheduler is under way, or ``SERVE_BY_S`` after start), the
informers' first LIST, the Lease held by another replica. The API server here
is either real (the Lease case) or a black hole that accepts TCP connections and never answers -
the worst case, since nothing ever fails fast.
"""

from __future__ import annotations

import datetime
import signal
import socket
import ssl
import threading
import time

import pytest

from pysched.app import SERVE_BY_S
from pysched_dev.devcluster import free_port, write_kubeconfig

from .conftest import SchedulerProcess, https_get, scheduler_config
from .test_ha import LE

pytestmark = pytest.mark.e2e

# How long the process may take from SIGTERM to exit: the brief asks for a second; the margin is
# the interpreter's own teardown on a loaded CI machine, measured at 0.2-0.4 s here.
EXIT_WITHIN = 1.5


class BlackHole:
    """A TCP server on loopback that accepts connections and never sends a byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.accepted = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted.set()

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def port_serves(port: int) -> bool:
    """Whether HTTPS is served on ``port``: a TLS handshake completes within 0.2 s (the port is
    bound from the start; a connection waits in its backlog until the server takes over)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as raw:
            with ctx.wrap_socket(raw):
                return True
    except (OSError, ssl.SSLError):
        return False


def assert_prompt_stop(sched: SchedulerProcess, step: str, *, watch_port: bool) -> None:
    """SIGTERM: the process exits 0 within EXIT_WITHIN seconds (the port, if watched, is not served)."""
    t = time.monotonic()
    sched.proc.send_signal(signal.SIGTERM)
    while sched.proc.poll() is None:
        assert time.monotonic() - t < 30, "no exit 30 s after SIGTERM:\n" + sched.log()[-3000:]
        if watch_port:
            assert not port_serves(sched.port), "the secure port was served after shutdown began"
        time.sleep(0.02)
    took = time.monotonic() - t
    print(f"{step}: exited {took:.2f}s after SIGTERM")
    assert sched.proc.returncode == 0, sched.log()[-3000:]
    assert took < EXIT_WITHIN, sched.log()[-3000:]


@pytest.fixture
def black_hole(control_plane, tmp_path):
    hole = BlackHole()
    yield hole, write_kubeconfig(tmp_path / "black-hole.kubeconfig", server=f"https://127.0.0.1:{hole.port}",
                                 ca_file=control_plane.ca_file, token="t")
    hole.close()


@pytest.mark.parametrize("step", ["client-ca-lookup", "informer-sync"])
def test_sigterm_while_the_api_server_never_answers(control_plane, tmp_path, black_hole, step):
    hole, kubeconfig = black_hole
    extra = [] if step == "client-ca-lookup" else ["--no-serve"]
    sched = SchedulerProcess(control_plane, tmp_path, scheduler_config(), kubeconfig=kubeconfig, extra_args=extra)
    sched.start()
    try:
        assert hole.accepted.wait(30), sched.log()
        # Every start-up request is out and hanging; the secure port's client-CA lookup goes out
        # SERVE_BY_S after start when the scheduler never got under way (its caches never synced).
        time.sleep(1.0 + (SERVE_BY_S if step == "client-ca-lookup" else 0.0))
        assert sched.proc.poll() is None, sched.log()
        assert not port_serves(sched.port)
        assert_prompt_stop(sched, step, watch_port=step == "client-ca-lookup")
        assert "serving securely" not in sched.log()
    finally:
        sched.close()


async def test_sigterm_while_waiting_for_the_lease(control_plane, admin, tmp_path):
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await admin.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", body={
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "pysched"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600, "acquireTime": now,
                 "renewTime": now}})
    sched = SchedulerProcess(control_plane, tmp_path, scheduler_config(leaderElection=LE))
    sched.start()
    try:
        await sched.wait_log("caches synced", 60)
        await sched.wait_log("attempting to acquire leader lease", 30)
        assert_prompt_stop(sched, "lease wait", watch_port=False)
        assert "started leading" not in sched.log()
    finally:
        sched.close()


def test_black_hole_is_a_black_hole():
    """The fixture itself: a connection is accepted and nothing ever arrives."""
    hole = BlackHole()
    try:
        with socket.create_connection(("127.0.0.1", hole.port), timeout=5) as c:
            c.settimeout(0.5)
            assert hole.accepted.wait(5)
            with pytest.raises(TimeoutError):
                c.recv(1)
    finally:
        hole.close()
    assert free_port() > 0


def test_a_secure_port_in_use_stops_the_process_with_exit_code_1(control_plane, tmp_path):
    """The port is bound at start (and served once the scheduler is under way): when it cannot
    be, the process says why and exits 1 before it schedules anything (it used to end with a
    traceback)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    sched = SchedulerProcess(control_plane, tmp_path, scheduler_config())
    sched.port = taken.getsockname()[1]
    sched.start()
    try:
        assert sched.proc.wait(60) == 1, sched.log()[-3000:]
        log = sched.log()
        assert "cannot serve the secure port" in log and f"port={sched.port}" in log, log[-3000:]
        assert "caches synced" not in log, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
    finally:
        taken.close()
        sched.close()


async def test_the_port_is_bound_at_start_and_a_client_waiting_on_it_is_answered(control_plane, tmp_path,
                                                                                    black_hole):
    """The informers never sync here, so the server comes up SERVE_BY_S after start: a client
    that connected before then waits for its answer instead of being refused."""
    hole, kubeconfig = black_hole
    sched = SchedulerProcess(control_plane, tmp_path, scheduler_config(), kubeconfig=kubeconfig,
                             extra_args=["--authentication-skip-lookup"])
    sched.start()
    try:
        t = time.monotonic()
        while not _connects(sched.port):
            assert time.monotonic() - t < 30 and sched.proc.poll() is None, sched.log()[-3000:]
            time.sleep(0.02)
        assert not port_serves(sched.port)   # bound, not served yet
        status, body = await https_get(sched.url + "/healthz")
        assert (status, body) == (200, "ok")
        assert time.monotonic() - t >= SERVE_BY_S - 1.0
        assert "caches synced" not in sched.log()
    finally:
        sched.close()


def _connects(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
