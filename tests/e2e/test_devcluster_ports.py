"""The control-plane fixture survives its picked port being taken before the server binds it.

``free_port()`` can only say a port was free a moment ago; in a full test run another process
sometimes binds it first (etcd then exits with "bind: address already in use"). Here the first
port each server is given is one this test holds open, so both etcd and kube-apiserver must be
started again on fresh ports.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import urllib.request

from pysched_dev import devcluster


def test_servers_start_again_on_fresh_ports_when_the_picked_one_is_taken(monkeypatch):
    with contextlib.closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = taken.getsockname()[1]
        real = devcluster.free_port
        picks: list[int] = []

        me = threading.current_thread()

        def picked() -> int:
            if threading.current_thread() is not me:
                return real()   # the fixtures' pool warming the next test's control plane meanwhile
            # etcd's first client port and the API server's first port are the taken one.
            n = len(picks)
            port = taken_port if n in (0, 4) else real()
            picks.append(port)
            return port

        monkeypatch.setattr(devcluster, "free_port", picked)
        cp = devcluster.ControlPlane()
        cp.start()
        try:
            assert picks.count(taken_port) == 2 and len(picks) == 6, picks
            assert cp.apiserver_port != taken_port
            assert not cp.etcd_url.endswith(f":{taken_port}")
            req = urllib.request.Request(f"{cp.url}/api/v1/namespaces/default")
            req.add_header("Authorization", f"Bearer {cp.admin_token}")
            ctx = ssl.create_default_context(cafile=str(cp.ca_file))
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                assert json.load(resp)["metadata"]["name"] == "default"
            log = (cp.workdir / "etcd.log").read_text()
            assert "address already in use" in log
        finally:
            cp.stop()


def test_free_port_is_outside_the_range_outgoing_connections_draw_from():
    low, high = devcluster._ephemeral_ports()
    ports = {devcluster.free_port() for _ in range(50)}
    assert all(not low <= p <= high for p in ports), sorted(ports)
    assert len(ports) > 1  # random, so two fixtures starting together rarely pick the same one
    for port in ports:
        with contextlib.closing(socket.socket()) as s:
            s.bind(("127.0.0.1", port))
