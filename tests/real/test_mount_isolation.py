"""What the kubelet and containerd mount in their namespaces stays there on a host whose mounts are
shared (systemd makes ``/`` rshared at boot; this machine's are private, so the test makes a shared
scratch mount of its own): ``mounts.keep_private`` is what keeps it there, and without it the same
mount reaches the host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pysched_dev.realcluster.mounts import keep_private, mountinfo

pytestmark = pytest.mark.real_node


def _in_namespace(script: str) -> None:
    subprocess.run(["unshare", "-m", "--propagation", "unchanged", "sh", "-ec", script], check=True, timeout=30)


def _host_sees(path: Path) -> bool:
    return any(m["mount_point"] == str(path) for m in mountinfo(1))


@pytest.fixture
def shared_scratch(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounts need root")
    scratch = tmp_path / "shared"
    scratch.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "scratch", str(scratch)], check=True)
    try:
        (scratch / "var-lib").mkdir()
        subprocess.run(["mount", "--make-shared", str(scratch)], check=True)
        yield scratch / "var-lib"
    finally:
        subprocess.run(["umount", "-R", str(scratch)], check=False)


def test_a_mount_in_the_namespace_reaches_a_shared_host_mount_without_keep_private(shared_scratch):
    _in_namespace(f"mount -t tmpfs overlaid '{shared_scratch}'")
    assert _host_sees(shared_scratch)      # what the kubelet's overlays would do on a systemd host
    subprocess.run(["umount", str(shared_scratch)], check=True)


def test_keep_private_keeps_it_in_the_namespace(shared_scratch):
    _in_namespace(keep_private(str(shared_scratch)) + f"mount -t tmpfs overlaid '{shared_scratch}'")
    assert not _host_sees(shared_scratch)
