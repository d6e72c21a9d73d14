"""Build a release into one directory: what ``make release`` runs, here and in the release workflow.

In order, each step logged on stderr with its time:

1. the versions (``versions.check``, release mode): every file states the same version and the
   CHANGELOG has its section, or nothing is built;
2. a copy of the tracked files (``git ls-files``: a release is the commit, plus a warning when the
   tree has uncommitted changes) and SOURCE_DATE_EPOCH from the commit (or the environment);
3. the sdists of pysched and pysched-policy from that copy, with the pinned build tools
   (``buildenv``), normalised (``wheels.normalize_tar_gz``);
4. ``pysched-cel`` for linux/amd64 and linux/arm64 (``PYSCHED_CEL_GOARCH=<arch> hack/pysched-cel.sh``);
5. pysched's platform wheels, each built from its sdist with the helper put in
   (``wheels.HELPER_IN_WHEEL``) and retagged; pysched-policy's pure wheel from its sdist;
   ``twine check --strict`` over the four archives;
6. the image: ``IMAGE=<chart repository>:<version> IMAGE_OUT=<dir> hack/image.sh`` (the reference the
   chart and the manifests deploy, ``versions.image_ref``), its OCI archive, digest, SBOM and scan
   copied in as ``pysched-<version>-image.*`` (``--skip-image`` leaves it out, loudly: not a release);
7. the chart: ``helm lint --strict`` and ``helm package charts/pysched`` (helm from ``hack/helm.sh``),
   normalised as the sdists are;
8. ``RELEASE_NOTES.md`` from the CHANGELOG section (``notes``), ``pysched-<version>-buildinfo.json``
   (commit, SOURCE_DATE_EPOCH, Go, Python and build tools), and ``SHA256SUMS`` over every file.

The output directory is emptied first; the work happens in a scratch directory removed at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pysched_dev.release import buildenv, notes, versions, wheels

ROOT = Path(__file__).resolve().parents[2]
IMAGE_FILES = {"image.oci.tar": "image.oci.tar", "image.digest": "image.digest",
               "sbom.cdx.json": "image.sbom.cdx.json", "scan.json": "image.scan.json"}


class ReleaseError(RuntimeError):
    """The release cannot be built; the message says why and names the file."""


def log(message: str) -> None:
    print(f"release: {message}", file=sys.stderr, flush=True)


@dataclass
class Release:
    """One build of the release of the tree at ``root`` into ``out``."""

    root: Path = ROOT
    out: Path = ROOT / "dist" / "release"
    skip_image: bool = False
    arches: tuple[str, ...] = ("amd64", "arm64")
    version: str = ""
    epoch: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    # -- steps -------------------------------------------------------------------------------------

    def run(self) -> Path:
        start = time.monotonic()
        self._step("versions", self.check_versions)
        with tempfile.TemporaryDirectory(prefix="pysched-release.") as scratch:
            work = Path(scratch)
            src = self._step("source", lambda: self.copy_source(work / "src"))
            if self.out.exists():
                shutil.rmtree(self.out)
            self.out.mkdir(parents=True)
            tools = self._step("build tools", lambda: buildenv.python(log))
            sdists = self._step("sdists", lambda: self.sdists(tools, src, work / "sdist"))
            helpers = self._step("pysched-cel", self.helpers)
            self._step("wheels", lambda: self.wheels(tools, sdists, helpers, work))
            image = self._step("image", lambda: self.image(work / "image"))
            self._step("chart", self.chart)
            self._step("notes", lambda: self.notes(image))
        self.checksums()
        total = time.monotonic() - start
        self.timings["total"] = total
        for path in sorted(self.out.iterdir()):
            log(f"  {path.stat().st_size:>12,d}  {path.name}")
        log(f"release {self.version} in {self.out} ({total:.0f} s: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in self.timings.items() if k != "total") + ")")
        return self.out

    def _step(self, name: str, fn: Callable):
        log(f"{name}...")
        t0 = time.monotonic()
        result = fn()
        self.timings[name] = time.monotonic() - t0
        return result

    def check_versions(self) -> None:
        version, problems = versions.check(self.root, release=True)
        if problems or not version:
            raise ReleaseError("the files disagree on the version:\n  " + "\n  ".join(problems))
        self.version = version
        self.image_ref = versions.image_ref(self.root, version)
        log(f"version {version} (image {self.image_ref})")

    def copy_source(self, dst: Path) -> Path:
        """The tracked files (as they are in the tree) copied to ``dst``; SOURCE_DATE_EPOCH set."""
        git = ["git", "-C", str(self.root)]
        try:
            listed = subprocess.run(git + ["ls-files", "-z"], check=True, capture_output=True).stdout
            commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                                    text=True).stdout.strip()
            dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], check=True,
                                   capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ReleaseError(f"{self.root}: not a git checkout ({exc}); a release is built from a commit") from None
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        if not epoch:
            epoch = subprocess.run(git + ["log", "-1", "--format=%ct"], check=True, capture_output=True,
                                   text=True).stdout.strip()
        self.epoch = int(epoch)
        if dirty:
            log("WARNING: the tree has uncommitted changes: these artifacts are not the commit's "
                f"({len(dirty.splitlines())} files differ)")
        self.info.update(commit=commit, dirty=bool(dirty), source_date_epoch=self.epoch)
        for rel in listed.decode().split("\0"):
            src = self.root / rel
            if not rel or not src.is_file() or src.is_symlink():
                continue
            target = dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            target.chmod(0o755 if os.access(src, os.X_OK) else 0o644)
        return dst

    def _env(self) -> dict[str, str]:
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(self.epoch), PYTHONHASHSEED="0", TZ="UTC")
        env.pop("PYSCHED_CEL_HELPER", None)
        return env

    def _build(self, tools: Path, kind: str, project: Path, outdir: Path) -> Path:
        outdir.mkdir(parents=True, exist_ok=True)
        before = set(outdir.iterdir())
        subprocess.run([str(tools), "-m", "build", "--no-isolation", f"--{kind}", "--outdir", str(outdir),
                        str(project)], check=True, stdout=sys.stderr, env=self._env())
        (made,) = set(outdir.iterdir()) - before
        return made

    def sdists(self, tools: Path, src: Path, work: Path) -> dict[str, Path]:
        made = {}
        for name, project in (("pysched", src), ("pysched-policy", src / "plugins")):
            built = self._build(tools, "sdist", project, work / name)
            made[name] = wheels.normalize_tar_gz(built, self.out, self.epoch)
        return made

    def helpers(self) -> dict[str, Path]:
        found = {}
        go = shutil.which("go")
        self.info["go"] = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip() \
            if go else None
        for arch in self.arches:
            proc = subprocess.run([str(self.root / "hack" / "pysched-cel.sh")], stdout=subprocess.PIPE, text=True,
                                  env=dict(self._env(), PYSCHED_CEL_GOARCH=arch))
            if proc.returncode != 0 or not proc.stdout.strip():
                raise ReleaseError(f"hack/pysched-cel.sh for linux/{arch} failed (exit {proc.returncode})")
            path = Path(proc.stdout.strip().splitlines()[-1])
            if wheels.elf_machine(path) != wheels.ELF_MACHINE[arch]:
                raise ReleaseError(f"{path}: not a linux/{arch} executable")
            found[arch] = path
        return found

    def wheels(self, tools: Path, sdists: dict[str, Path], helpers: dict[str, Path], work: Path) -> None:
        made: list[Path] = []
        for arch, helper in helpers.items():
            tree = self._unpack(sdists["pysched"], work / f"wheel-{arch}")
            target = tree / "scheduler" / wheels.HELPER_IN_WHEEL
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(helper, target)
            target.chmod(0o755)
            built = self._build(tools, "wheel", tree, work / f"wheel-{arch}-out")
            made.append(wheels.rewrite_wheel(built, self.out, self.epoch, wheels.PLATFORMS[arch]))
            self._check_helper_in(made[-1], arch)
        tree = self._unpack(sdists["pysched-policy"], work / "wheel-policy")
        built = self._build(tools, "wheel", tree, work / "wheel-policy-out")
        made.append(wheels.rewrite_wheel(built, self.out, self.epoch))
        archives = [*made, *sdists.values()]
        subprocess.run([str(tools), "-m", "twine", "check", "--strict", *map(str, archives)], check=True,
                       stdout=sys.stderr)
        self.info["build_tools"] = [ln for ln in buildenv.REQUIREMENTS.read_text().splitlines()
                                    if ln and not ln.startswith("#")]

    @staticmethod
    def _unpack(sdist: Path, dst: Path) -> Path:
        dst.mkdir(parents=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(dst, filter="data")
        (top,) = dst.iterdir()
        return top

    @staticmethod
    def _check_helper_in(wheel: Path, arch: str) -> None:
        import zipfile
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(wheels.HELPER_IN_WHEEL)
            except KeyError:
                raise ReleaseError(f"{wheel.name}: no {wheels.HELPER_IN_WHEEL} (package-data in pyproject.toml?)") \
                    from None
            if not (info.external_attr >> 16) & 0o100:
                raise ReleaseError(f"{wheel.name}: {wheels.HELPER_IN_WHEEL} is not executable")
            head = zf.read(info)[:20]
        if head[:4] != b"\x7fELF" or int.from_bytes(head[18:20], "little") != wheels.ELF_MACHINE[arch]:
            raise ReleaseError(f"{wheel.name}: {wheels.HELPER_IN_WHEEL} is not a linux/{arch} executable")

    def image(self, work: Path) -> dict | None:
        script = self.root / "hack" / "image.sh"
        if self.skip_image:
            log("WARNING: --skip-image: no image is built; this directory is not a complete release")
            return None
        if not script.exists():
            raise ReleaseError("hack/image.sh not found: the image cannot be built (--skip-image builds the rest)")
        work.mkdir(parents=True)
        proc = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True,
                              # PY: this interpreter (the project's venv, with the SBOM generator), also
                              # when the release is built from a copy of the tree that has no .venv
                              env=dict(self._env(), IMAGE=self.image_ref, IMAGE_OUT=str(work),
                                       PY=os.environ.get("PY", sys.executable)))
        if proc.returncode != 0:
            raise ReleaseError(f"hack/image.sh failed (exit {proc.returncode})")
        made = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else work
        for src, dst in IMAGE_FILES.items():
            if not (made / src).is_file():
                raise ReleaseError(f"hack/image.sh left no {src} in {made}")
            shutil.copyfile(made / src, self.out / f"pysched-{self.version}-{dst}")
        digest = (made / "image.digest").read_text().strip()
        self.info["image"] = {"reference": self.image_ref, "digest": digest}
        return self.info["image"]

    def chart(self) -> None:
        proc = subprocess.run([str(self.root / "hack" / "helm.sh")], stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise ReleaseError("hack/helm.sh failed: no helm")
        helm = proc.stdout.strip().splitlines()[-1]
        chart = self.root / "charts" / "pysched"
        subprocess.run([helm, "lint", "--strict", str(chart)], check=True, stdout=sys.stderr)
        scratch = self.out.parent / f".chart-{self.version}"
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            subprocess.run([helm, "package", str(chart), "--destination", str(scratch)], check=True,
                           stdout=sys.stderr, env=self._env())
            made = scratch / f"pysched-{self.version}.tgz"
            if not made.is_file():
                raise ReleaseError(f"helm package made no pysched-{self.version}.tgz")
            wheels.normalize_tar_gz(made, self.out, self.epoch)   # helm stamps the time of packaging
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def notes(self, image: dict | None) -> None:
        text = notes.render((self.root / versions.CHANGELOG).read_text(), self.version,
                            image["reference"] if image else None, image["digest"] if image else None)
        (self.out / "RELEASE_NOTES.md").write_text(text)
        self.info.update(version=self.version, python=platform.python_version())
        (self.out / f"pysched-{self.version}-buildinfo.json").write_text(json.dumps(self.info, indent=2,
                                                                                    sort_keys=True) + "\n")

    def checksums(self) -> None:
        lines = []
        for path in sorted(self.out.iterdir()):
            if path.name != "SHA256SUMS" and path.is_file():
                lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
        (self.out / "SHA256SUMS").write_text("\n".join(lines) + "\n")
