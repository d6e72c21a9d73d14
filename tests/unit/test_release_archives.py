"""The release's archives (``pysched_dev.release.wheels``) and notes (``pysched_dev.release.notes``):
platform tags set consistently, the same bytes whatever the umask and the clock, the notes taken from
the right CHANGELOG section."""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from pysched_dev.release import notes, wheels

EPOCH = 1_700_000_000


def make_wheel(path: Path, mode: int, stamp: tuple[int, ...]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, m in (("pysched/__init__.py", b"x = 1\n", mode),
                              (wheels.HELPER_IN_WHEEL, b"\x7fELF" + bytes(14) + (62).to_bytes(2, "little"), 0o775),
                              ("pysched-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                                                              b"Tag: py3-none-any\n\n", mode),
                              ("pysched-1.0.dist-info/RECORD", b"", mode)):
            info = zipfile.ZipInfo(name, date_time=stamp)    # type: ignore[arg-type]
            info.external_attr = (0o100000 | m) << 16
            zf.writestr(info, data)
    return path


def test_a_wheel_is_retagged_and_its_record_follows(tmp_path):
    src = make_wheel(tmp_path / "a" / "pysched-1.0-py3-none-any.whl", 0o644, (2024, 1, 1, 0, 0, 0))
    out = tmp_path / "out"
    out.mkdir()
    made = wheels.rewrite_wheel(src, out, EPOCH, wheels.PLATFORMS["amd64"])
    assert made.name == ("pysched-1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64."
                         "musllinux_1_1_x86_64.whl")
    with zipfile.ZipFile(made) as zf:
        meta = zf.read("pysched-1.0.dist-info/WHEEL").decode()
        assert [ln for ln in meta.splitlines() if ln.startswith("Tag:")] == [
            "Tag: py3-none-manylinux_2_17_x86_64", "Tag: py3-none-manylinux2014_x86_64",
            "Tag: py3-none-musllinux_1_1_x86_64"]
        record = dict(line.split(",", 1) for line in zf.read("pysched-1.0.dist-info/RECORD").decode().splitlines())
        assert record["pysched-1.0.dist-info/WHEEL"].endswith(f",{len(meta.encode())}")
        assert zf.namelist()[-1] == "pysched-1.0.dist-info/RECORD"
        helper = zf.getinfo(wheels.HELPER_IN_WHEEL)
        assert helper.external_attr >> 16 == 0o100755             # still executable, normalised
        assert zf.getinfo("pysched/__init__.py").external_attr >> 16 == 0o100644


def test_a_rewritten_wheel_has_the_same_bytes_whatever_the_modes_and_times_it_was_built_with(tmp_path):
    a = make_wheel(tmp_path / "a" / "pysched-1.0-py3-none-any.whl", 0o644, (2024, 1, 1, 0, 0, 0))
    b = make_wheel(tmp_path / "b" / "pysched-1.0-py3-none-any.whl", 0o664, (2025, 6, 1, 12, 0, 0))
    (tmp_path / "oa").mkdir()
    (tmp_path / "ob").mkdir()
    ra = wheels.rewrite_wheel(a, tmp_path / "oa", EPOCH)
    rb = wheels.rewrite_wheel(b, tmp_path / "ob", EPOCH)
    assert ra.name == rb.name == "pysched-1.0-py3-none-any.whl"
    assert ra.read_bytes() == rb.read_bytes()


def make_tar_gz(path: Path, mtime: int, mode: int, owner: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name in ("pkg-1.0/setup.cfg", "pkg-1.0/PKG-INFO"):     # not in name order
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uname = 3, mtime, mode, owner
            tar.addfile(info, io.BytesIO(b"abc"))
    return path


def test_a_normalised_tar_gz_has_the_same_bytes_whatever_the_build(tmp_path):
    a = make_tar_gz(tmp_path / "a" / "pkg-1.0.tar.gz", 1, 0o664, "alice")
    b = make_tar_gz(tmp_path / "b" / "pkg-1.0.tar.gz", 2, 0o644, "bob")
    (tmp_path / "oa").mkdir()
    (tmp_path / "ob").mkdir()
    ra = wheels.normalize_tar_gz(a, tmp_path / "oa", EPOCH)
    rb = wheels.normalize_tar_gz(b, tmp_path / "ob", EPOCH)
    assert ra.read_bytes() == rb.read_bytes()
    with tarfile.open(ra) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["pkg-1.0/PKG-INFO", "pkg-1.0/setup.cfg"]
    assert {(m.mtime, m.mode, m.uid, m.uname) for m in members} == {(EPOCH, 0o644, 0, "")}


def test_the_elf_machine_tells_the_architectures_apart(tmp_path):
    for arch, machine in wheels.ELF_MACHINE.items():
        path = tmp_path / arch
        path.write_bytes(b"\x7fELF\x02\x01" + bytes(12) + machine.to_bytes(2, "little") + bytes(40))
        assert wheels.elf_machine(path) == machine
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert wheels.elf_machine(tmp_path / "script") is None


CHANGELOG = """# Changelog

## [Unreleased]

## [1.1.0] - 2026-02-01

### Added
- the thing

### Fixed
- the other thing

## [1.0.0] - 2026-01-01
- first

[1.1.0]: https://example.com/compare/v1.0.0...v1.1.0
"""


def test_the_notes_are_the_versions_section():
    assert notes.section(CHANGELOG, "1.1.0") == "### Added\n- the thing\n\n### Fixed\n- the other thing"
    assert notes.section(CHANGELOG, "1.0.0") == "- first"        # the link references are not part of it
    text = notes.render(CHANGELOG, "1.1.0", "ghcr.io/pysched/pysched:1.1.0", "sha256:abc")
    assert text.startswith("# pysched 1.1.0\n\nImage: `ghcr.io/pysched/pysched:1.1.0` (`sha256:abc`)\n\n### Added")


@pytest.mark.parametrize("version, message", [("2.0.0", "no '## [2.0.0]' section"),
                                               ("1.1", "no '## [1.1]' section"),
                                               ("Unreleased", "section is empty")])
def test_a_missing_or_empty_section_is_an_error(version, message):
    with pytest.raises(notes.NotesError, match=re.escape(message)):
        notes.section(CHANGELOG, version)
