"""The pinned build tools of a release: a virtualenv made once from ``build-requirements.txt``.

``python -m build --no-isolation`` runs in it, so the setuptools that builds the wheels is the one
pinned there, not the newest PyPI has that day (build isolation would fetch that): the same commit
built again gives the same archives. The environment lives in the cache outside the repository
(``PYSCHED_CACHE``, else ``$XDG_CACHE_HOME/pysched``, else ``~/.cache/pysched``, as ``hack/lib.sh``),
keyed by the pins and the Python version; it counts as made once its ``.complete`` marker is
written, so an install that failed or was killed is made again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).with_name("build-requirements.txt")


def cache_root() -> Path:
    explicit = os.environ.get("PYSCHED_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pysched"


def python(log=print) -> Path:
    """The interpreter of the build-tools environment, made on first use."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    home = cache_root() / f"release-tools-{key}"
    py = home / "bin" / "python"
    if (home / ".complete").exists():
        return py
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # two releases at once (parallel tests) make it once
        if (home / ".complete").exists():
            return py
        shutil.rmtree(home, ignore_errors=True)
        log(f"making the release build tools in {home} (first run only)")
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, stdout=sys.stderr)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True, stdout=sys.stderr)
        (home / ".complete").write_text(REQUIREMENTS.read_text())
    return py
