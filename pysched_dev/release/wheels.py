"""The release's Python archives, made platform-specific where they carry pysched-cel, and reproducible.

**Platform wheels.** pysched is pure Python but for ``pysched-cel`` (kube-scheduler's DRA CEL, a Go
binary). The release builds the ordinary wheel from a copy of the sdist with the helper put at
``pysched/_bin/pysched-cel`` (``HELPER_IN_WHEEL``, where ``cel.BUNDLED`` looks), once per
architecture, and ``retag`` gives it the platform tags of ``PLATFORMS``: ``py3-none-`` (any Python 3,
no ABI: no extension module) and, for the platform, ``manylinux_2_17``/``manylinux2014`` (glibc
Linux; the legacy alias for pip before 20.3) and ``musllinux_1_1`` (Alpine). The helper is built
with ``CGO_ENABLED=0``: a static binary linked against no libc, so it runs on every glibc and musl
Linux of its architecture, and the lowest baselines PyPI accepts are the truthful ones (PyPI refuses
a bare ``linux_x86_64``). Other platforms (macOS, Windows, other CPUs) build the sdist, which has
no helper: pysched then logs an ERROR at start and exports ``pysched_dra_cel_engine{engine="builtin"}``.

**Reproducible.** setuptools stamps wheel entries with SOURCE_DATE_EPOCH and orders them; the
modes it records come from the file system (the umask), and an sdist carries the build's times,
owners and gzip header time, as helm's chart package does. ``rewrite_wheel`` and
``normalize_tar_gz`` set every entry's time to SOURCE_DATE_EPOCH, modes to 0644 (0755 where
executable), owners to root, names in order, so two builds of one commit with the same build tools
give the same bytes (the chart package too).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
import time
import zipfile
from pathlib import Path

HELPER_IN_WHEEL = "pysched/_bin/pysched-cel"
PLATFORMS = {
    "amd64": ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"),
    "arm64": ("manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"),
}
# ELF e_machine of each architecture (the helper must be built for the wheel it goes into)
ELF_MACHINE = {"amd64": 62, "arm64": 183}


def elf_machine(path: Path) -> int | None:
    """The ELF e_machine of a static executable at ``path`` (None when it is not an ELF file)."""
    head = path.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    t = time.gmtime(max(epoch, 315532800))   # the zip format starts in 1980
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def wheel_name(wheel: Path) -> tuple[str, str, str]:
    """(distribution, version, tag) of a wheel file name."""
    dist, version, rest = wheel.name[:-len(".whl")].split("-", 2)
    return dist, version, rest


def rewrite_wheel(wheel: Path, out_dir: Path, epoch: int, platform_tags: tuple[str, ...] | None = None) -> Path:
    """The wheel, normalised (times, modes, order) and, with ``platform_tags``, retagged
    ``py3-none-<tags>`` (WHEEL's ``Tag:`` lines, its RECORD line and the file name follow), into ``out_dir``."""
    dist, version, tag = wheel_name(wheel)
    with zipfile.ZipFile(wheel) as src:
        entries = {info.filename: (info, src.read(info)) for info in src.infolist() if not info.is_dir()}
    info_dir = f"{dist}-{version}.dist-info"
    if platform_tags:
        tag = "py3-none-" + ".".join(platform_tags)
        wheel_meta = entries[f"{info_dir}/WHEEL"][1].decode()
        lines = [ln for ln in wheel_meta.splitlines() if not ln.startswith("Tag:")]
        lines += [f"Tag: py3-none-{p}" for p in platform_tags]
        entries[f"{info_dir}/WHEEL"] = (entries[f"{info_dir}/WHEEL"][0], ("\n".join(lines) + "\n\n").encode())
    record_name = f"{info_dir}/RECORD"
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, (_, data) in sorted(entries.items())
              if name != record_name]
    record.append(f"{record_name},,")
    entries[record_name] = (entries[record_name][0], ("\n".join(record) + "\n").encode())
    target = out_dir / f"{dist}-{version}-{tag}.whl"
    stamp = _zip_time(epoch)
    # dist-info last, RECORD at the very end (as wheel writers do); the rest in name order
    order = sorted(entries, key=lambda n: (n.startswith(info_dir), n == record_name, n))
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name in order:
            old, data = entries[name]
            executable = bool((old.external_attr >> 16) & 0o111)
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
            dst.writestr(info, data, compresslevel=9)
    return target


def normalize_tar_gz(sdist: Path, out_dir: Path, epoch: int) -> Path:
    """The sdist (or the chart package), rewritten with its members in name order, SOURCE_DATE_EPOCH
    times, root owners and 0644/0755 modes, and a gzip header without time or name, into ``out_dir``."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(sdist, "r:gz") as src:
        for member in src.getmembers():
            data = None
            if member.isfile():
                fh = src.extractfile(member)
                assert fh is not None
                data = fh.read()
            members.append((member, data))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member, data in sorted(members, key=lambda m: m[0].name):
            info = tarfile.TarInfo(member.name)
            info.type = member.type
            info.linkname = member.linkname
            info.mtime = epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            executable = member.isdir() or bool(member.mode & 0o111)
            info.mode = 0o755 if executable else 0o644
            if data is not None:
                info.size = len(data)
                dst.addfile(info, io.BytesIO(data))
            else:
                dst.addfile(info)
    target = out_dir / sdist.name
    with target.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch,
                                                 compresslevel=9) as gz:
        gz.write(buf.getvalue())
    return target
