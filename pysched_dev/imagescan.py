"""What a container image holds, read from its OCI archive alone (no daemon, nothing extracted).

``python -m pysched_dev.imagescan image.oci.tar -o scan.json`` (hack/image.sh writes ``scan.json``
beside the archive). The layers are merged in memory as a runtime would stack them (whiteouts and
opaque directories respected: ``ocirootfs``) and the final file system is reported:

* ``config``: User, Entrypoint, Cmd, Env, ExposedPorts, Labels, WorkingDir; architecture, os, created;
* ``layers``: digest, media type, compressed size, entries and bytes of each, and the totals;
* ``debianPackages``: installed packages from ``var/lib/dpkg/status`` (and ``status.d/``);
* ``pythonDistributions``: name and version from each ``*.dist-info/METADATA`` (``*.egg-info/PKG-INFO``),
  with the directory it is in;
* ``setuid``, ``setgid``: regular files with those bits; ``worldWritable``: directories and files
  anyone may write (with the sticky bit noted), symlinks aside;
* ``compilers``: files named like a compiler or the Go toolchain (gcc, cc, clang, go, rustc, ...);
* ``pyschedCel``: whether ``pysched-cel`` is on the image's PATH, its size, Go version and modules
  (``gobuildinfo``).
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from pysched_dev import gobuildinfo
from pysched_dev.ocirootfs import OciImage, norm, whiteout_target

COMPILER = re.compile(r"^(?:.*-)?(?:gcc|g\+\+|clang|clang\+\+)(?:-[\d.]+)?$"
                      r"|^(?:cc|c\+\+|cc1|cc1plus|go|gofmt|rustc|tcc)$")
CEL_NAME = "pysched-cel"


@dataclass
class Entry:
    kind: str      # file, dir, symlink, hardlink, device, fifo
    mode: int
    uid: int
    gid: int
    size: int
    linkname: str
    layer: int


def _kind(ti: tarfile.TarInfo) -> str:
    if ti.isdir():
        return "dir"
    if ti.issym():
        return "symlink"
    if ti.islnk():
        return "hardlink"
    if ti.ischr() or ti.isblk():
        return "device"
    if ti.isfifo():
        return "fifo"
    return "file"


def _interesting(path: str, cel_paths: set[str]) -> bool:
    return (path == "var/lib/dpkg/status" or path.startswith("var/lib/dpkg/status.d/")
            or path.endswith(".dist-info/METADATA") or path.endswith(".egg-info/PKG-INFO")
            or path in cel_paths)


def merge_layers(image: OciImage, cel_paths: set[str]) -> tuple[dict[str, Entry], dict[str, bytes], list[dict]]:
    """The final file table, the contents of the files scanned, and per-layer statistics."""
    files: dict[str, Entry] = {}
    contents: dict[str, bytes] = {}
    stats = []
    for i, (desc, layer) in enumerate(image.layers()):
        written: dict[str, Entry] = {}
        removals: list[tuple[str, bool]] = []
        n = nbytes = 0
        for ti in layer:
            path = norm(ti.name)
            if not path:
                continue
            wo = whiteout_target(path)
            if wo is not None:
                removals.append(wo)
                continue
            n += 1
            nbytes += ti.size if ti.isreg() else 0
            written[path] = Entry(_kind(ti), ti.mode, ti.uid, ti.gid, ti.size, ti.linkname, i)
            if ti.isreg() and _interesting(path, cel_paths):
                f = layer.extractfile(ti)
                assert f is not None
                contents[path] = f.read()
            elif ti.islnk() and _interesting(path, cel_paths):
                target = norm(ti.linkname)
                if target in contents:
                    contents[path] = contents[target]
        for path, opaque in removals:
            prefix = path + "/"
            gone = [p for p in files if p.startswith(prefix) or (not opaque and p == path)]
            for p in gone:
                files.pop(p, None)
                contents.pop(p, None) if p not in written else None
        files.update(written)
        stats.append({"digest": desc["digest"], "mediaType": desc.get("mediaType", ""), "size": desc["size"],
                      "entries": n, "bytes": nbytes, "whiteouts": len(removals)})
    for p in [p for p in contents if p not in files]:
        del contents[p]
    return files, contents, stats


def parse_dpkg_status(text: str) -> list[dict[str, str]]:
    """Installed packages of a dpkg status file (paragraphs whose Status ends in ``installed``)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in para.splitlines():
            if line[:1] in (" ", "\t"):
                continue   # continuation (Description, Conffiles)
            key, sep, value = line.partition(":")
            if sep:
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            pkg = {"name": fields["Package"], "version": fields.get("Version", ""),
                   "architecture": fields.get("Architecture", "")}
            if fields.get("Source"):
                pkg["source"] = fields["Source"].split(" ")[0]
            out.append(pkg)
    return sorted(out, key=lambda p: p["name"])


def parse_metadata(data: bytes) -> tuple[str, str]:
    msg = email.parser.BytesHeaderParser().parsebytes(data)
    return str(msg.get("Name", "")), str(msg.get("Version", ""))


def path_dirs(env: list[str]) -> list[str]:
    for item in env:
        key, _, value = item.partition("=")
        if key == "PATH":
            return [norm(d) for d in value.split(":") if d]
    return ["usr/local/bin", "usr/bin", "bin"]


def scan(archive: str | Path) -> dict:
    with OciImage(archive) as image:
        cfg = image.config.get("config", {})
        cel_paths = {f"{d}/{CEL_NAME}" for d in path_dirs(cfg.get("Env") or [])}
        files, contents, layers = merge_layers(image, cel_paths)
        result: dict = {
            "image": image.ref_name,
            "manifestDigest": image.descriptor["digest"],
            "configDigest": image.manifest["config"]["digest"],
            "architecture": image.config.get("architecture"),
            "os": image.config.get("os"),
            "created": image.config.get("created"),
            "config": {k: cfg.get(k) for k in ("User", "Entrypoint", "Cmd", "Env", "WorkingDir", "Labels")},
        }
        result["config"]["ExposedPorts"] = sorted(cfg.get("ExposedPorts") or {})
    result["layers"] = layers
    result["size"] = {"compressed": sum(x["size"] for x in layers),
                      "uncompressed": sum(e.size for e in files.values() if e.kind == "file"),
                      "files": sum(1 for e in files.values() if e.kind in ("file", "hardlink"))}
    debs: list[dict[str, str]] = []
    for path in sorted(p for p in contents if p.startswith("var/lib/dpkg/status")):
        debs += parse_dpkg_status(contents[path].decode("utf-8", "replace"))
    result["debianPackages"] = debs
    dists = []
    for path in sorted(p for p in contents if p.endswith(("/METADATA", "/PKG-INFO"))):
        name, version = parse_metadata(contents[path])
        dist_dir = path.rpartition("/")[0]
        dists.append({"name": name, "version": version, "path": "/" + dist_dir.rpartition("/")[0],
                      "metadata": "/" + path})
    result["pythonDistributions"] = sorted(dists, key=lambda d: (d["name"].lower(), d["path"]))
    regular = {p: e for p, e in files.items() if e.kind == "file"}
    result["setuid"] = sorted("/" + p for p, e in regular.items() if e.mode & 0o4000)
    result["setgid"] = sorted("/" + p for p, e in regular.items() if e.mode & 0o2000)
    result["worldWritable"] = sorted(
        ({"path": "/" + p, "kind": e.kind, "sticky": bool(e.mode & 0o1000)}
         for p, e in files.items() if e.kind in ("dir", "file") and e.mode & 0o002), key=lambda d: d["path"])
    result["compilers"] = sorted("/" + p for p, e in files.items()
                                 if e.kind in ("file", "symlink", "hardlink") and COMPILER.match(p.rpartition("/")[2]))
    cel = next((p for p in sorted(cel_paths) if p in files), None)
    cel_info: dict = {"present": cel is not None}
    if cel is not None:
        entry = files[cel]
        cel_info.update({"path": "/" + cel, "size": entry.size, "mode": oct(entry.mode & 0o7777)})
        if cel in contents:
            info = gobuildinfo.read(contents[cel])
            cel_info.update({"goVersion": info.go_version, "mainPath": info.path,
                             "modules": [{"path": m.path, "version": m.version} for m in info.deps]})
    result["pyschedCel"] = cel_info
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", type=Path)
    ap.add_argument("-o", "--output", type=Path, help="write here (default stdout)")
    args = ap.parse_args(argv)
    result = scan(args.archive)
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    if args.output:
        args.output.write_text(text)
        print(f"imagescan: {args.output}: {len(result['debianPackages'])} Debian packages, "
              f"{len(result['pythonDistributions'])} Python distributions, "
              f"{len(result['pyschedCel'].get('modules', []))} Go modules, setuid={len(result['setuid'])}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
