"""``make release``'s outputs are a consistent release (``pysched_dev.release``).

The release is built once for the module, from a copy of this tree's tracked files committed in a
scratch repository (so uncommitted work is what is tested, and ``dist/release`` is left alone), with
the CHANGELOG's ``## [Unreleased]`` heading named ``## [<version>]`` in that copy when the tree has
no section for its version yet (a release refuses to start without one). Then:

* SHA256SUMS verifies and lists every file; every artifact is there;
* the host's platform wheel and pysched-policy's wheel install in a fresh virtualenv (their
  dependencies from this one's site-packages: no network) and ``pysched --version`` is the
  version; the ``pysched-cel`` the wheel carries answers ``{"op":"version"}`` with the Kubernetes
  release cmd/pysched-cel links, and pysched finds it with no ``PYSCHED_CEL_HELPER`` and nothing on
  ``PATH`` (no fallback error); the arm64 wheel carries an arm64 executable;
* the sdists build a pure install, which reports the missing helper at ERROR level;
* the chart package states the version and renders the image reference the release built;
* the notes are the CHANGELOG's section for the version;
* the image archive (when this machine can build one: ``hack/image.sh``, buildah, root) is named
  as the chart deploys it and its digest is the one written beside it;
* a second build (another umask, no image) gives the same wheels, sdists and chart, byte for byte;
* a planted version disagreement stops the release before anything is built, naming the file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

import pysched
from pysched_dev.release import buildenv, versions, wheels

# the release fixture builds the image (cold: base images, every wheel) and cross-compiles the helper
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
V = pysched.__version__
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _image_skip_reason(tree: Path) -> str | None:
    if not (tree / "hack" / "image.sh").exists():
        return "hack/image.sh is not in this tree yet"
    if shutil.which("buildah") is None:
        return "buildah is not installed"
    if os.geteuid() != 0:
        return "building the image needs root here"
    return None


def _make_tree(src: Path) -> Path:
    listed = run(["git", "-C", REPO, "ls-files", "-z"], check=True).stdout
    for rel in listed.split("\0"):
        path = REPO / rel
        if rel and path.is_file() and not path.is_symlink():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / rel)
    changelog = src / "CHANGELOG.md"
    if V not in versions.changelog_sections(src):
        changelog.write_text(changelog.read_text().replace("## [Unreleased]", f"## [{V}] - 2026-01-01", 1))
    epoch = run(["git", "-C", REPO, "log", "-1", "--format=%ct"], check=True).stdout.strip()
    env = dict(os.environ, GIT_AUTHOR_DATE=f"@{epoch} +0000", GIT_COMMITTER_DATE=f"@{epoch} +0000",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release test"]):
        run(["git", "-C", src, *cmd], check=True, env=env)
    return src


def build(tree: Path, out: Path, *, skip_image: bool, umask: int = 0o022) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSCHED_CEL_HELPER", "SOURCE_DATE_EPOCH")}
    return run([sys.executable, "-m", "pysched_dev.release", "--root", tree, "--out", out]
               + (["--skip-image"] if skip_image else []), env=env, umask=umask, cwd=REPO)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, str | None]:
    """(tree, release directory, why no image was built): built once per run, shared by the
    pytest-xdist workers (the first builds it under a lock, the others read its result)."""
    if shutil.which("git") is None or shutil.which("go") is None:
        pytest.skip("make release needs git and go")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    home = shared / "release-e2e"
    with open(shared / "release-e2e.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = home / "result.json"
        if not result.exists():
            home.mkdir(exist_ok=True)
            tree = _make_tree(home / "src")
            reason = _image_skip_reason(tree)
            proc = build(tree, home / "release", skip_image=reason is not None)
            result.write_text(json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:],
                                          "reason": reason}))
        outcome = json.loads(result.read_text())
    assert outcome["rc"] == 0, outcome["stderr"]
    assert outcome["stdout"].strip().splitlines()[-1] == str(home / "release")
    return home / "src", home / "release", outcome["reason"]


@pytest.fixture
def tree(built) -> Path:
    return built[0]


@pytest.fixture
def release(built) -> tuple[Path, str | None]:
    return built[1], built[2]


def wheel_for(out: Path, arch: str) -> Path:
    (found,) = out.glob(f"pysched-{V}-py3-none-*{wheels.PLATFORMS[arch][0].split('_', 3)[-1]}*.whl")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """make(name) -> a fresh virtualenv whose dependencies come from this one's site-packages (a
    ``.pth`` line: not a site directory, so this environment's editable pysched is not seen)."""

    def make(name: str, *extra_paths: str) -> Path:
        home = tmp_path_factory.mktemp(name)
        run([sys.executable, "-m", "venv", home], check=True)
        purelib = run([home / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      check=True).stdout.strip()
        Path(purelib, "_deps.pth").write_text("\n".join([*extra_paths, sysconfig.get_paths()["purelib"]]) + "\n")
        return home
    return make


def bare_env(home: Path) -> dict[str, str]:
    """No PYSCHED_CEL_* and a PATH without pysched-cel."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSCHED_CEL")}
    env["PATH"] = f"{home / 'bin'}:/usr/bin:/bin"
    assert shutil.which("pysched-cel", path=env["PATH"]) is None
    return env


def test_the_checksums_verify_and_cover_every_file(release):
    out, reason = release
    proc = run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = {line.split("  ", 1)[1] for line in (out / "SHA256SUMS").read_text().splitlines()}
    assert listed == {p.name for p in out.iterdir()} - {"SHA256SUMS"}
    names = {p.name for p in out.iterdir()}
    expected = {f"pysched-{V}.tar.gz", f"pysched_policy-{V}.tar.gz", f"pysched_policy-{V}-py3-none-any.whl",
                f"pysched-{V}.tgz", "RELEASE_NOTES.md", f"pysched-{V}-buildinfo.json", "SHA256SUMS"}
    expected |= {f"pysched-{V}-py3-none-{'.'.join(tags)}.whl" for tags in wheels.PLATFORMS.values()}
    if reason is None:
        expected |= {f"pysched-{V}-{name}" for name in
                     ("image.oci.tar", "image.digest", "image.sbom.cdx.json", "image.scan.json")}
    assert names == expected


@pytest.mark.skipif(HOST_ARCH is None, reason=f"no pysched wheel for {platform.machine()}")
def test_the_wheels_install_and_pysched_uses_the_helper_they_carry(release, venv):
    out, _ = release
    home = venv("wheel-venv")
    proc = run([home / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                wheel_for(out, HOST_ARCH or "amd64"), out / f"pysched_policy-{V}-py3-none-any.whl"])
    assert proc.returncode == 0, proc.stderr
    env = bare_env(home)
    assert run([home / "bin" / "pysched", "--version"], env=env).stdout.strip() == f"pysched {V}"
    code = "import pysched, pysched_policy; print(pysched.__file__, pysched_policy.__version__)"
    where, policy = run([home / "bin" / "python", "-c", code], env=env, check=True).stdout.split()
    assert where.startswith(str(home)) and policy == V
    helper = Path(where).parent / "_bin" / "pysched-cel"
    answer = json.loads(run([helper], input='{"op":"version"}\n', check=True).stdout)
    linked = next(line.split()[1] for line in (REPO / "cmd" / "pysched-cel" / "go.mod").read_text().splitlines()
                  if line.strip().startswith("k8s.io/dynamic-resource-allocation "))
    assert answer["kubernetes"] == linked
    # the profile (DynamicResources on) is built: the engine is chosen and logged then
    proc = run([home / "bin" / "pysched", "--config", REPO / "examples" / "scheduler-config.yaml",
                "--write-config-to", "-"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"helper={helper}" in proc.stderr and "found_by=bundled" in proc.stderr, proc.stderr
    assert "pysched-cel not found" not in proc.stderr and "level=error" not in proc.stderr


def test_each_platform_wheel_carries_its_architectures_helper(release):
    out, _ = release
    for arch in wheels.PLATFORMS:
        with zipfile.ZipFile(wheel_for(out, arch)) as zf:
            info = zf.getinfo(wheels.HELPER_IN_WHEEL)
            assert info.external_attr >> 16 == 0o100755
            head = zf.read(info)[:20]
            tags = [ln for ln in zf.read(f"pysched-{V}.dist-info/WHEEL").decode().splitlines()
                    if ln.startswith("Tag:")]
        assert int.from_bytes(head[18:20], "little") == wheels.ELF_MACHINE[arch]
        assert tags == [f"Tag: py3-none-{t}" for t in wheels.PLATFORMS[arch]]
    with zipfile.ZipFile(out / f"pysched_policy-{V}-py3-none-any.whl") as zf:
        assert not any("_bin" in n for n in zf.namelist())


QEMU = {"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static"}


def qemu_user() -> Path | None:
    """hack/qemu-user.sh's directory of emulators (Debian's qemu-user-static unpacked into the cache),
    or None where apt cannot provide it."""
    res = subprocess.run([str(REPO / "hack" / "qemu-user.sh")], capture_output=True, text=True, timeout=600)
    return Path(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 and res.stdout.strip() else None


def test_every_platform_wheels_helper_answers_on_its_architecture(release, tmp_path):
    """Each wheel's pysched-cel runs and answers: natively for this machine's architecture, under
    qemu-user (Debian's qemu-user-static, unpacked by hack/qemu-user.sh, not installed) for the other."""
    out, _ = release
    qemu = None
    for arch in wheels.PLATFORMS:
        helper = tmp_path / f"pysched-cel-{arch}"
        with zipfile.ZipFile(wheel_for(out, arch)) as zf:
            helper.write_bytes(zf.read(wheels.HELPER_IN_WHEEL))
        helper.chmod(0o755)
        if arch == HOST_ARCH:
            argv = [str(helper)]
        else:
            qemu = qemu or qemu_user()
            if qemu is None:
                pytest.skip(f"no {QEMU[arch]} (hack/qemu-user.sh needs apt-get): the {arch} helper cannot run here")
            argv = [str(qemu / QEMU[arch]), str(helper)]
        res = subprocess.run(argv, input='{"op":"version"}\n', capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.splitlines()[0])["kubernetes"].startswith("v0.37."), res.stdout


def test_the_sdists_build_a_pure_install_that_reports_the_missing_helper(release, venv):
    out, _ = release
    tools = buildenv.python()
    tools_lib = run([tools, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    check=True).stdout.strip()
    home = venv("sdist-venv", tools_lib)     # setuptools and wheel of the release's build tools
    # ensurepip's setuptools (65) would shadow them
    run([home / "bin" / "python", "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"], check=True)
    proc = run([home / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                "--no-build-isolation", out / f"pysched-{V}.tar.gz", out / f"pysched_policy-{V}.tar.gz"])
    assert proc.returncode == 0, proc.stderr
    env = bare_env(home)
    where = run([home / "bin" / "python", "-c", "import pysched; print(pysched.__file__)"], env=env,
                check=True).stdout.strip()
    assert where.startswith(str(home)) and not (Path(where).parent / "_bin").exists()
    proc = run([home / "bin" / "pysched", "--config", REPO / "examples" / "scheduler-config.yaml",
                "--write-config-to", "-"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "level=error" in proc.stderr and "pysched-cel not found" in proc.stderr, proc.stderr
    assert "PYSCHED_CEL_HELPER" in proc.stderr         # the fix is named


def test_the_chart_package_states_the_version_and_deploys_the_released_image(release, tree):
    out, _ = release
    with tarfile.open(out / f"pysched-{V}.tgz") as tar:
        chart = yaml.safe_load(tar.extractfile("pysched/Chart.yaml").read())   # type: ignore[union-attr]
    assert chart["version"] == chart["appVersion"] == V
    helm = os.environ.get("PYSCHED_HELM") or run([REPO / "hack" / "helm.sh"], check=True).stdout.splitlines()[-1]
    rendered = run([helm, "template", "pysched", out / f"pysched-{V}.tgz"], check=True).stdout
    images = {doc_line.split("image:", 1)[1].strip().strip('"') for doc_line in rendered.splitlines()
              if doc_line.strip().startswith("image:")}
    assert images == {versions.image_ref(tree, V)} == {f"ghcr.io/pysched/pysched:{V}"}


def test_the_notes_are_the_changelog_section(release, tree):
    out, _ = release
    text = (out / "RELEASE_NOTES.md").read_text()
    assert text.startswith(f"# pysched {V}\n")
    changelog = (tree / "CHANGELOG.md").read_text()
    body = changelog.split(f"## [{V}]", 1)[1].split("\n", 1)[1]
    first = next(line for line in body.splitlines() if line.strip())
    assert first in text and len(text) > 200
    assert "\n## [" not in text                       # no other section came along
    info = json.loads((out / f"pysched-{V}-buildinfo.json").read_text())
    assert info["version"] == V and info["source_date_epoch"] > 0 and not info["dirty"]


def test_the_image_archive_is_the_reference_the_chart_deploys(release, tree):
    out, reason = release
    if reason:
        pytest.skip(f"no image built: {reason}")
    with tarfile.open(out / f"pysched-{V}-image.oci.tar") as tar:
        index = json.loads(tar.extractfile("index.json").read())   # type: ignore[union-attr]
    (manifest,) = index["manifests"]
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] in (versions.image_ref(tree, V), V)
    assert (out / f"pysched-{V}-image.digest").read_text().strip() == manifest["digest"]


def test_a_second_build_gives_the_same_bytes(release, tree, tmp_path):
    out, _ = release
    again = tmp_path / "again"
    proc = build(tree, again, skip_image=True, umask=0o002)
    assert proc.returncode == 0, proc.stderr[-4000:]

    def digests(d: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()
                if p.name.endswith((".whl", ".tar.gz", ".tgz"))}
    first, second = digests(out), digests(again)
    assert len(first) == 6 and first == second


def test_a_version_disagreement_stops_the_release_naming_the_file(tree, tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(tree, copy)          # the shared tree stays as it is for the other workers
    path = copy / "charts" / "pysched" / "Chart.yaml"
    path.write_text(path.read_text().replace(f"version: {V}", "version: 9.9.9", 1))
    proc = build(copy, tmp_path / "refused", skip_image=True)
    assert proc.returncode == 1
    assert f"charts/pysched/Chart.yaml: version is '9.9.9', the release is '{V}'" in proc.stderr
    assert not (tmp_path / "refused").exists()
