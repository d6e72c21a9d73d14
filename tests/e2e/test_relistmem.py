"""``python -m bench.relistmem`` (the re-list memory experiment in bench/PROFILE.md) runs end to end."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("flag", [[], ["--no-trim"]])
def test_relistmem_prints_rss_after_each_relist(flag):
    r = subprocess.run([sys.executable, "-m", "bench.relistmem", "--nodes", "5", "--pods", "20",
                        "--resync-period", "2", "--rounds", "2", *flag],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = re.findall(r"^\s*([\d.]+) s  rss ([\d.]+) MiB$", r.stdout, re.M)
    assert len(rows) == 2 and all(float(mib) > 20 for _, mib in rows), r.stdout
