"""The documentation site (``make docs``) built strictly and rendered in headless Chromium.

MkDocs builds ``docs/`` with ``--strict`` into a temporary directory (a broken link, anchor or
snippet fails the build); a loopback HTTP server serves it and Chromium renders the home page, the
configuration reference and the living-cluster page: the navigation lists every section, the
landing text included from README.md is there, the pages' headings render, no script error is
logged, and the plugin API reference holds the extension points' contracts from their docstrings.
"""

from __future__ import annotations

import asyncio
import functools
import http.server
import os
import subprocess
import sys
import threading

import pytest

from .conftest import REPO
from .test_report_render import browse, chromium

pytestmark = pytest.mark.e2e
SECTIONS = ("Getting started", "Install", "Configuration reference", "Plugin reference", "Gang scheduling",
            "Operations", "Compatibility", "Writing a plugin", "Plugin API reference", "Benchmark", "Changelog")


@pytest.fixture
def site(tmp_path):
    out = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_the_site_renders_with_its_navigation(site, tmp_path):
    browser = chromium()
    for path, heading in (("/", "pysched"), ("/configuration/", "Configuration"),
                          ("/living-cluster/", "A living cluster")):
        proc = await asyncio.to_thread(browse, browser, tmp_path, site + path, "--dump-dom")
        dom = proc.stdout
        assert "<h1" in dom and heading in dom, (path, dom[-2000:])
        for section in SECTIONS:
            assert section in dom, (path, section)
        errors = [line for line in proc.stderr.splitlines() if "Uncaught" in line]
        assert not errors, errors
    home = (await asyncio.to_thread(browse, browser, tmp_path, site + "/", "--dump-dom")).stdout
    assert "secondary Kubernetes scheduler written in Python" in home   # README.md's intro, included
    # The API reference is generated from the extension points' docstrings.
    api = (await asyncio.to_thread(browse, browser, tmp_path, site + "/api/", "--dump-dom")).stdout
    for point in ("PreFilterPlugin", "ScorePlugin", "PermitPlugin", "PluginTester"):
        assert f'id="pysched.framework.interface.{point}"' in api or f'id="pysched.testing.{point}"' in api, point
    assert "every score must be in [0, 100]" in api
