"""The image archive tools on a synthetic two-layer image: ociarchive writes it, imagescan reads it in
memory, ocirootfs extracts it, gobuildinfo reads a Go binary's modules (pysched_dev; hack/image.sh).

The layers exercise what a real image has: a whiteout and an opaque directory in the upper layer, a
merged-/usr ``bin -> usr/bin`` symlink an upper entry goes through, an absolute symlink an upper
layer replaces by a file (extracting must not write through it, out of the rootfs), a setuid file, a
sticky world-writable directory, dpkg status paragraphs of which one is not installed, dist-infos.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from pysched_dev import gobuildinfo, imagescan, ociarchive, ocirootfs

STATUS = """Package: base-files
Status: install ok installed
Architecture: amd64
Version: 12.4+deb12u5
Description: Debian base system
 miscellaneous files

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libpython3.11-minimal
Status: install ok installed
Architecture: amd64
Source: python3.11
Version: 3.11.2-6+deb12u6
"""


def _layer(entries: list[tuple]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, mode, arg in entries:
            ti = tarfile.TarInfo(name)
            ti.mode = mode
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                tar.addfile(ti)
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, arg
                tar.addfile(ti)
            else:
                data = arg if isinstance(arg, bytes) else arg.encode()
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _blob(layout: Path, data: bytes) -> dict:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    p = layout / "blobs/sha256" / digest.partition(":")[2]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def make_image(tmp: Path, outside: Path) -> Path:
    """A layout of two layers, written as an archive by ociarchive; returns the output directory."""
    lower = _layer([
        ("bin", "sym", 0o777, "usr/bin"),
        ("usr", "dir", 0o755, None), ("usr/bin", "dir", 0o755, None),
        ("usr/bin/su", "file", 0o4755, "su"),
        ("usr/bin/pager", "sym", 0o777, str(outside)),   # absolute, like /etc/alternatives/pager
        ("usr/local/bin/gcc", "file", 0o755, "cc"),
        ("tmp", "dir", 0o1777, None),
        ("opt/old/x", "file", 0o644, "x"),
        ("var/lib/dpkg/status", "file", 0o644, STATUS),
        ("usr/lib/python3/dist-packages/pip-23.0.1.dist-info/METADATA", "file", 0o644,
         "Metadata-Version: 2.1\nName: pip\nVersion: 23.0.1\n"),
    ])
    upper = _layer([
        ("usr/local/bin/.wh.gcc", "file", 0o644, ""),
        ("opt/old/.wh..wh..opq", "file", 0o644, ""),
        ("opt/old/new", "file", 0o644, "new"),
        ("bin/hello", "file", 0o755, "hello"),           # through the bin -> usr/bin symlink
        ("usr/bin/pager", "file", 0o755, "pager"),       # replaces the absolute symlink
        ("usr/local/lib/python3.11/dist-packages/pysched-0.2.0.dist-info/METADATA", "file", 0o644,
         "Metadata-Version: 2.4\nName: pysched\nVersion: 0.2.0\n"),
        ("usr/local/bin/pysched-cel", "file", 0o755, go_blob()),
    ])
    layout = tmp / "layout"
    layers = [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **_blob(layout, x)} for x in (lower, upper)]
    config = {"architecture": "amd64", "os": "linux", "config": {
        "User": "65532:65532", "Entrypoint": ["pysched"], "Cmd": ["--config", "/etc/pysched/config.yaml"],
        "Env": ["PATH=/usr/local/bin:/usr/bin", "PYTHONDONTWRITEBYTECODE=1"], "ExposedPorts": {"10259/tcp": {}},
        "Labels": {"org.opencontainers.image.version": "0.2.0"}},
        "rootfs": {"type": "layers", "diff_ids": []}}
    cfg = {"mediaType": "application/vnd.oci.image.config.v1+json", **_blob(layout, json.dumps(config).encode())}
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": cfg, "layers": layers}).encode()
    mdesc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", **_blob(layout, manifest)}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {**mdesc, "annotations": {"org.opencontainers.image.ref.name": "localhost/x:1"}}]}))
    out = tmp / "out"
    ociarchive.write_archive(layout, "localhost/x:1", 1700000000, out)
    return out


def go_blob() -> bytes:
    """Bytes laid out as Go 1.18+ writes its build information (inline strings, 16-byte aligned)."""
    mod = (b"path\texample.com/cel\nmod\texample.com/cel\t(devel)\t\n"
           b"dep\tk8s.io/dynamic-resource-allocation\tv0.37.2\th1:abc=\n"
           b"dep\tgolang.org/x/net\tv0.1.0\th1:def=\n=>\tgolang.org/x/net\tv0.2.0\th1:ghi=\n"
           b"build\tCGO_ENABLED=0\n")
    mod = b"0" * 16 + mod + b"1" * 16
    version = b"go1.26.8"
    head = gobuildinfo.MAGIC + bytes([8, 2]) + b"\0" * 16
    return b"\x7fELF" + b"\0" * 12 + head + bytes([len(version)]) + version + bytes([len(mod) & 0x7F | 0x80,
                                                                                      len(mod) >> 7]) + mod


def test_gobuildinfo_reads_versions_modules_and_replacements():
    info = gobuildinfo.read(go_blob())
    assert info.go_version == "go1.26.8" and info.path == "example.com/cel"
    assert [(m.path, m.version) for m in info.deps] == [("k8s.io/dynamic-resource-allocation", "v0.37.2"),
                                                         ("golang.org/x/net", "v0.1.0")]
    assert info.deps[1].replaced_by is not None and info.deps[1].replaced_by.version == "v0.2.0"
    assert info.settings == {"CGO_ENABLED": "0"}


def test_archive_names_the_image_for_containerd_and_docker(tmp_path):
    out = make_image(tmp_path, tmp_path / "outside")
    with tarfile.open(out / "image.oci.tar") as tar:
        names = tar.getnames()
        index = json.load(tar.extractfile("index.json"))
        docker = json.load(tar.extractfile("manifest.json"))
        entry = index["manifests"][0]
        manifest_bytes = tar.extractfile(f"blobs/sha256/{entry['digest'][7:]}").read()
        assert all(m.uid == 0 and m.mtime == 1700000000 for m in tar.getmembers())
    assert {"oci-layout", "index.json", "manifest.json"} <= set(names)
    assert entry["annotations"] == {"io.containerd.image.name": "localhost/x:1",
                                    "org.opencontainers.image.ref.name": "localhost/x:1"}
    assert (out / "image.digest").read_text().strip() == entry["digest"] == \
        "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    manifest = json.loads(manifest_bytes)
    assert docker[0]["RepoTags"] == ["localhost/x:1"]
    assert docker[0]["Layers"] == [f"blobs/sha256/{x['digest'][7:]}" for x in manifest["layers"]]
    first = (out / "image.oci.tar").read_bytes()
    ociarchive.write_archive(tmp_path / "layout", "localhost/x:1", 1700000000, out)
    assert (out / "image.oci.tar").read_bytes() == first, "the same layout gives the same archive"


def test_scan_merges_layers_with_whiteouts(tmp_path):
    out = make_image(tmp_path, tmp_path / "outside")
    s = imagescan.scan(out / "image.oci.tar")
    assert s["image"] == "localhost/x:1" and s["manifestDigest"] == (out / "image.digest").read_text().strip()
    assert s["config"]["User"] == "65532:65532" and s["config"]["ExposedPorts"] == ["10259/tcp"]
    assert [(p["name"], p["version"]) for p in s["debianPackages"]] == [
        ("base-files", "12.4+deb12u5"), ("libpython3.11-minimal", "3.11.2-6+deb12u6")]
    assert s["debianPackages"][1]["source"] == "python3.11"
    assert [(d["name"], d["version"], d["path"]) for d in s["pythonDistributions"]] == [
        ("pip", "23.0.1", "/usr/lib/python3/dist-packages"),
        ("pysched", "0.2.0", "/usr/local/lib/python3.11/dist-packages")]
    assert s["setuid"] == ["/usr/bin/su"] and s["setgid"] == []
    assert s["worldWritable"] == [{"path": "/tmp", "kind": "dir", "sticky": True}]
    assert s["compilers"] == [], "the whiteout removed usr/local/bin/gcc"
    assert s["pyschedCel"]["present"] and s["pyschedCel"]["goVersion"] == "go1.26.8"
    assert {"path": "k8s.io/dynamic-resource-allocation", "version": "v0.37.2"} in s["pyschedCel"]["modules"]
    assert [x["whiteouts"] for x in s["layers"]] == [0, 2]


def test_scan_finds_compilers_and_a_missing_helper(tmp_path):
    layout = tmp_path / "layout"
    layer = _layer([("usr/bin/x86_64-linux-gnu-gcc-12", "file", 0o755, "x"),
                    ("usr/local/go/bin/go", "file", 0o755, "")])
    desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **_blob(layout, layer)}
    cfg = _blob(layout, json.dumps({"config": {"Env": ["PATH=/usr/bin"]}}).encode())
    m = _blob(layout, json.dumps({"schemaVersion": 2, "config": cfg, "layers": [desc]}).encode())
    (layout / "index.json").write_text(json.dumps({"manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", **m}]}))
    ociarchive.write_archive(layout, "x:1", 0, tmp_path / "out")
    s = imagescan.scan(tmp_path / "out/image.oci.tar")
    assert s["compilers"] == ["/usr/bin/x86_64-linux-gnu-gcc-12", "/usr/local/go/bin/go"]
    assert s["pyschedCel"] == {"present": False}


def test_extract_rootfs_applies_whiteouts_and_stays_inside(tmp_path):
    outside = tmp_path / "outside"
    out = make_image(tmp_path, outside)
    root = tmp_path / "rootfs"
    counts = ocirootfs.extract_rootfs(out / "image.oci.tar", root)
    assert counts["whiteouts"] == 2
    assert not outside.exists(), "a file replacing an absolute symlink was written through it, out of the rootfs"
    assert (root / "usr/bin/pager").read_text() == "pager" and not (root / "usr/bin/pager").is_symlink()
    assert (root / "usr/bin/hello").read_text() == "hello" and (root / "bin").is_symlink()
    assert not (root / "usr/local/bin/gcc").exists()
    assert sorted(p.name for p in (root / "opt/old").iterdir()) == ["new"]
    assert (root / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert (root / "usr/bin/su").stat().st_mode & 0o7777 == 0o4755


def test_resolve_keeps_absolute_and_dotdot_links_inside(tmp_path):
    root = tmp_path / "r"
    (root / "etc").mkdir(parents=True)
    (root / "a").symlink_to("/etc")
    (root / "b").symlink_to("../../../../etc")
    assert ocirootfs.resolve(str(root), "a/passwd") == str(root / "etc/passwd")
    assert ocirootfs.resolve(str(root), "b/passwd") == str(root / "etc/passwd")
    assert ocirootfs.resolve(str(root), "a") == str(root / "a"), "the last component is not followed"
