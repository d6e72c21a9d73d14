"""The release window: pysched follows the API server's kube-scheduler release (1.35-1.37), refuses
one outside it unless ``--emulated-version`` names the release to run as, and resolves feature gates
exactly as that release's kube-scheduler does.

* every gate ``kube-scheduler --help`` lists (the control plane's own binary: 1.37.2, and 1.35.4 in
  make test's second leg) has the stage and default pysched resolves for that release;
* ``pysched run`` against the real API server logs the release it follows;
* against an API server that says it is Kubernetes 1.38 (a stand-in answering ``/version``):
  exit code 2 with the flag to pass, or, with ``--emulated-version=1.37``, a warning and a
  scheduler that runs (and stops on SIGTERM with 0).
"""

from __future__ import annotations

import http.server
import json
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

from pysched.apis.features import defaults
from pysched.apis.features.gates import known_gates, spec_at
from pysched_dev.devcluster import binaries_version, free_port

from .conftest import REPO, scheduler_config, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.oldest_release]

HELP_GATE = re.compile(r"kube:(\w+)=true\|false \((ALPHA|BETA|GA|DEPRECATED) - default=(true|false)\)")


def kube_scheduler_help_gates(bin_dir) -> dict[str, tuple[str, bool]]:
    """name -> (stage, default) as ``kube-scheduler --help`` lists them (GA and locked gates are not listed)."""
    out = subprocess.run([str(bin_dir / "kube-scheduler"), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    gates = {}
    for line in out.splitlines():
        if "kube:" not in line or "if --min-compatibility-version" in line and line.count("kube:") == 0:
            continue
        m = HELP_GATE.search(line)
        if m:
            gates[m.group(1)] = (m.group(2).title(), m.group(3) == "true")
    return gates


def test_every_gate_kube_scheduler_lists_has_its_stage_and_default(control_plane):
    release = binaries_version(control_plane.bin)
    listed = kube_scheduler_help_gates(control_plane.bin)
    assert len(listed) > 100, listed   # the parse found the list
    known = known_gates(release)
    on = defaults(release)
    mismatches = []
    for name, (stage, default) in sorted(listed.items()):
        if name in ("AllAlpha", "AllBeta"):
            continue
        if name not in known:
            mismatches.append(f"{name}: listed by kube-scheduler {release}, unknown to pysched")
            continue
        spec = spec_at(known[name], release)
        if (spec[2], name in on) != (stage, default):
            mismatches.append(f"{name}: kube {stage} default={default}, pysched {spec[2]} default={name in on}")
    assert not mismatches, "\n".join(mismatches)


def _run(args, cwd=REPO, timeout=60):
    return subprocess.run([sys.executable, "-m", "pysched", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


async def test_pysched_follows_the_api_servers_release(control_plane, scheduler_factory):
    release = binaries_version(control_plane.bin)
    proc = scheduler_factory(scheduler_config()).start()
    try:
        await proc.wait_log("following kube-scheduler", 60)
        line = next(x for x in proc.log().splitlines() if "following kube-scheduler" in x)
        assert f"release={release[0]}.{release[1]}" in line and "emulated=False" in line, line
    finally:
        proc.close()


def plain_kubeconfig(path, port: int):
    """A kubeconfig for plain HTTP on loopback ``port``, with a token."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


class _Version(http.server.BaseHTTPRequestHandler):
    git_version = "v1.38.0"

    def do_GET(self):  # noqa: N802 - the http.server API
        if self.path == "/version":
            body = json.dumps({"major": "1", "minor": "38", "gitVersion": self.git_version}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:   # anything else: the informers keep retrying
            body = b'{"kind":"Status","status":"Failure","code":503}'
            self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def newer_api_server(tmp_path):
    """An API server stand-in that says it is Kubernetes v1.38.0 (plain HTTP on loopback)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Version)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    kubeconfig = plain_kubeconfig(tmp_path / "newer.kubeconfig", server.server_port)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(scheduler_config()))
    try:
        yield kubeconfig, cfg
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_outside_the_window_is_refused_with_the_flag_to_pass(newer_api_server):
    kubeconfig, cfg = newer_api_server
    proc = _run(["run", "--config", str(cfg), "--kubeconfig", str(kubeconfig), "--no-serve"])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "the API server is Kubernetes v1.38.0; pysched follows kube-scheduler 1.35 to 1.37" in proc.stderr
    assert "--emulated-version=1.37" in proc.stderr


async def test_emulated_version_runs_against_it_with_a_warning(newer_api_server, tmp_path):
    kubeconfig, cfg = newer_api_server
    log_path = tmp_path / "out.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pysched", "run", "--config", str(cfg), "--kubeconfig",
                                 str(kubeconfig), "--no-serve", "--emulated-version=1.37"],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        async def started():
            text = log_path.read_text(errors="replace")
            return "list failed; retrying" in text or proc.poll() is not None
        await wait_for(started, 60, what="the informers started")
        text = log_path.read_text(errors="replace")
        assert proc.poll() is None, text[-3000:]
        assert "outside the releases pysched follows (1.35 to 1.37); running as kube-scheduler 1.37" in text
        assert "release=1.37" in text and "emulated=True" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text(errors="replace")[-3000:]   # liveness bound
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("flags,message", [
    (["--feature-gates", "NodeDeclaredFeatures=false"],
     "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"),
    (["--feature-gates", "Nope=true"], "unrecognized feature gate: Nope"),
    (["--emulated-version", "1.34"], "--emulated-version 1.34: pysched emulates kube-scheduler 1.35 to 1.37"),
])
def test_bad_flags_exit_2_before_any_api_call(tmp_path, flags, message):
    kubeconfig = plain_kubeconfig(tmp_path / "nowhere.kubeconfig", free_port())
    t = time.monotonic()
    proc = _run(["run", "--kubeconfig", str(kubeconfig), "--no-serve", *flags])
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert time.monotonic() - t < 30   # liveness bound: nothing waited for the (absent) API server
