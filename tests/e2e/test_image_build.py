"""``make image`` as it ships: hack/image.sh builds the image (buildah or docker, local base images when
no registry is reachable) and its OCI archive, digest, SBOM and scan are checked here.

The script runs once per session (cached by its inputs: a few seconds when nothing changed, a few
minutes cold) and everything is read from what it wrote, not from an engine's store:

* the config (``scan.json``, read from the archive by pysched_dev.imagescan): uid/gid 65532, the
  Dockerfile's ENTRYPOINT, CMD and ENV, port 10259, the OCI labels (version = ``__version__``,
  revision = a commit of this repository);
* the Python distributions: pysched and pysched-policy at ``__version__``, every requirements.lock
  pin at its locked version, none missing;
* the SBOM (CycloneDX 1.6, from cyclonedx-py, dpkg-query and ``go version -m`` on the extracted
  rootfs) agrees with the scan on the Debian packages, Python distributions and the Go modules of
  pysched-cel, k8s.io/dynamic-resource-allocation at cmd/pysched-cel/go.mod's version among them;
* no compiler or Go toolchain, no setuid/setgid file, only sticky world-writable directories;
* image.digest is the archive's manifest digest, and the index names the image for containerd and
  podman (tests/real imports it into the real node's containerd under the chart's name);
* from the extracted rootfs, as uid 65532 on a read-only root with only /tmp writable (a private
  mount namespace and chroot, as root): the image's pysched-cel answers ``{"op":"version"}``, and
  ``pysched --version`` and ``--help`` run with the image's environment.

Skipped only where no image can be built: no working Docker engine and not root with buildah.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from pysched import __version__
from pysched_dev import ocirootfs

from .conftest import REPO
from .test_image_entrypoint import final_stage

pytestmark = pytest.mark.timeout(1800)   # a cold build: base images, the Go helper, every wheel
DEFAULT_IMAGE = f"ghcr.io/pysched/pysched:{__version__}"   # what the chart and manifests deploy


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _engine_reason() -> str | None:
    """Why no image can be built here, or None."""
    if shutil.which("docker"):
        try:
            if subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0:
                return None
        except subprocess.TimeoutExpired:
            pass
    if not shutil.which("buildah"):
        return "no Docker engine answers and buildah is not installed (apt-get install buildah mmdebstrap)"
    if os.geteuid() != 0:
        return "no Docker engine answers and buildah's private storage needs root"
    return None


def run_image_sh(log: Path) -> tuple[Path, str, float]:
    t0 = time.monotonic()
    env = {**os.environ, "PY": sys.executable}
    env.pop("IMAGE", None)
    env.pop("IMAGE_OUT", None)
    res = subprocess.run([str(REPO / "hack/image.sh")], env=env, capture_output=True, text=True)
    log.write_text(res.stderr)
    assert res.returncode == 0, f"hack/image.sh failed ({res.returncode}):\n{res.stderr[-6000:]}"
    return Path(res.stdout.strip().splitlines()[-1]), res.stderr, time.monotonic() - t0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    reason = _engine_reason()
    if reason:
        pytest.skip(f"cannot build the image: {reason}")
    out, stderr, seconds = run_image_sh(tmp_path_factory.mktemp("image") / "image.log")
    print(f"hack/image.sh: {seconds:.0f} s -> {out}", file=sys.stderr)
    return out


@pytest.fixture(scope="module")
def scan(built):
    return json.loads((built / "scan.json").read_text())


@pytest.fixture(scope="module")
def sbom(built):
    return json.loads((built / "sbom.cdx.json").read_text())


@pytest.fixture(scope="module")
def rootfs(built, tmp_path_factory):
    dest = tmp_path_factory.mktemp("rootfs") / "root"
    ocirootfs.extract_rootfs(built / "image.oci.tar", dest)
    return dest


def _source(component: dict) -> str:
    return next((p["value"] for p in component.get("properties", []) if p["name"] == "pysched:source"), "")


def test_output_directory_holds_the_four_files(built):
    for name in ("image.oci.tar", "image.digest", "sbom.cdx.json", "scan.json"):
        assert (built / name).stat().st_size > 0, name


def test_config_is_the_dockerfiles(scan):
    stage = final_stage((REPO / "Dockerfile").read_text())
    cfg = scan["config"]
    assert cfg["User"] == stage["user"] == "65532:65532"
    assert cfg["Entrypoint"] == stage["entrypoint"] == ["pysched"]
    assert cfg["Cmd"] == stage["cmd"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert {k: env.get(k) for k in stage["env"]} == stage["env"]
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1" and env["HOME"] == "/tmp"
    assert cfg["ExposedPorts"] == ["10259/tcp"]
    assert scan["image"] == DEFAULT_IMAGE and scan["os"] == "linux"


def test_oci_labels(scan):
    labels = scan["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    revision = labels["org.opencontainers.image.revision"]
    commit = revision.removesuffix("-dirty")
    assert re.fullmatch(r"[0-9a-f]{40}", commit), revision
    assert subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode == 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_python_distributions_are_the_lock(scan):
    installed = {}
    for d in scan["pythonDistributions"]:
        if d["path"].startswith("/usr/local/"):   # pip's installs; the base's own pip/setuptools/wheel aside
            assert _canon(d["name"]) not in installed, f"{d['name']} installed twice"
            installed[_canon(d["name"])] = d["version"]
    assert installed.pop("pysched") == __version__
    assert installed.pop("pysched-policy") == __version__
    lock = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            lock[_canon(name.split("[")[0])] = version.split(";")[0].strip()
    wrong = {n: (v, installed.get(n)) for n, v in lock.items() if installed.get(n) != v}
    assert not wrong, f"lock pins not installed at their version (locked, installed): {wrong}"
    assert set(installed) == set(lock), f"installed beyond the lock: {set(installed) - set(lock)}"


def test_sbom_agrees_with_the_scan(scan, sbom):
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.6"
    root = sbom["metadata"]["component"]
    assert root["type"] == "container" and scan["manifestDigest"].partition(":")[2] in root["purl"]
    comps = sbom["components"]
    deb = {(c["name"], c["version"]) for c in comps if _source(c) == "dpkg"}
    assert deb == {(p["name"], p["version"]) for p in scan["debianPackages"]}
    assert all(c["purl"].startswith("pkg:deb/debian/") for c in comps if _source(c) == "dpkg")
    py = {(_canon(c["name"]), c["version"]) for c in comps if _source(c) == "python"}
    assert py == {(_canon(d["name"]), d["version"]) for d in scan["pythonDistributions"]}
    assert all(c["purl"].startswith("pkg:pypi/") for c in comps if _source(c) == "python")
    go = {(c["name"], c["version"]) for c in comps if _source(c) == "go" and c["type"] == "library"}
    cel = scan["pyschedCel"]
    assert go == {(m["path"], m["version"]) for m in cel["modules"]} | {("stdlib", cel["goVersion"])}
    gomod = (REPO / "cmd/pysched-cel/go.mod").read_text()
    dra = re.search(r"k8s\.io/dynamic-resource-allocation (v\S+)", gomod)
    assert dra and ("k8s.io/dynamic-resource-allocation", dra.group(1)) in go
    assert len(deb) > 50 and len(py) > 40 and len(go) > 20


def test_no_toolchain_no_setuid_no_open_directories(scan):
    assert scan["compilers"] == []
    names = {p["name"] for p in scan["debianPackages"]}
    toolchain = re.compile(r"(gcc|cpp|g\+\+|clang)(-[\d.]+)?|golang.*|binutils.*|libc6?-dev|python3[\d.]*-dev")
    assert not {n for n in names if toolchain.fullmatch(n)}
    assert scan["setuid"] == [] and scan["setgid"] == []
    assert all(d["sticky"] for d in scan["worldWritable"] if d["kind"] == "dir"), scan["worldWritable"]
    assert [d for d in scan["worldWritable"] if d["kind"] == "file"] == []
    assert scan["pyschedCel"]["present"] and scan["pyschedCel"]["path"] == "/usr/local/bin/pysched-cel"


def test_digest_is_the_archives_manifest(built, scan):
    digest = (built / "image.digest").read_text().strip()
    with tarfile.open(built / "image.oci.tar") as tar:
        index = json.load(tar.extractfile("index.json"))
        (entry,) = index["manifests"]
        blob = tar.extractfile(f"blobs/sha256/{digest.partition(':')[2]}").read()
    assert digest == entry["digest"] == scan["manifestDigest"] == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert entry["annotations"]["io.containerd.image.name"] == DEFAULT_IMAGE
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == DEFAULT_IMAGE
    if shutil.which("skopeo"):   # the same file read as an OCI archive and as a docker-archive (docker load)
        for transport in ("oci-archive", "docker-archive"):
            res = subprocess.run(["skopeo", "inspect", "--config", f"{transport}:{built / 'image.oci.tar'}"],
                                 capture_output=True, text=True)
            assert res.returncode == 0, f"{transport}: {res.stderr}"
            assert json.loads(res.stdout)["config"]["User"] == "65532:65532"


def test_unchanged_tree_reuses_the_result(built, tmp_path):
    out, stderr, _ = run_image_sh(tmp_path / "again.log")
    assert out == built and f"cached: {built}" in stderr


JAIL = r"""
set -eu
R=$1; shift
mount --bind "$R" "$R"
mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
mount --rbind /dev "$R/dev"
mount -t proc proc "$R/proc"
mount -o remount,bind,ro "$R"
exec chroot --userspec=65532:65532 "$R" /usr/bin/env -i "$@"
"""


def in_image(rootfs: Path, scan: dict, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """argv in the image's root filesystem, read-only, as 65532 with the image's environment."""
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", JAIL, "jail", str(rootfs),
                           *scan["config"]["Env"], *argv], input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def jail_ok():
    missing = [t for t in ("unshare", "chroot", "mount") if not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"running the image's programs needs root and {', '.join(missing) or 'mount namespaces'}")


def test_image_programs_run_as_65532_on_a_read_only_root(jail_ok, rootfs, scan):
    res = in_image(rootfs, scan, "pysched-cel", stdin='{"op":"version"}\n')
    assert res.returncode == 0, res.stderr
    gomod = (REPO / "cmd/pysched-cel/go.mod").read_text()
    assert json.loads(res.stdout.splitlines()[0])["kubernetes"] == re.search(r"k8s\.io/api (v\S+)", gomod).group(1)
    entry = scan["config"]["Entrypoint"]
    res = in_image(rootfs, scan, *entry, "--version")
    assert res.returncode == 0 and __version__ in res.stdout + res.stderr, res.stderr
    res = in_image(rootfs, scan, *entry, "--help")
    assert res.returncode == 0 and "usage: pysched" in res.stdout and "--version" in res.stdout, res.stderr
    res = in_image(rootfs, scan, "sh", "-c", "id -u; id -g; touch /x 2>&1 || true; touch /tmp/y && echo tmp-ok")
    assert res.stdout.splitlines()[:2] == ["65532", "65532"] and "Read-only file system" in res.stdout
    assert "tmp-ok" in res.stdout

