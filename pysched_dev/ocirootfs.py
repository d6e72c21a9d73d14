"""Read an OCI image archive without a daemon: its manifest, config and layers, and its root filesystem.

``OciImage(path)`` opens an archive as hack/image.sh writes it (``image.oci.tar``: an OCI layout in
a tar; ``index.json`` naming one image manifest). ``layers()`` streams each layer's tar in order
(gzip or uncompressed). ``extract_rootfs(archive, dest)`` applies them to a directory as a container
runtime's snapshotter would:

* whiteouts (``.wh.NAME``) remove NAME from the layers below, opaque markers (``.wh..wh..opq``) every
  entry below of their directory: both are applied when their layer ends, sparing what that layer
  itself wrote;
* a path is resolved inside ``dest`` as in a chroot: a symlink on the way (``/bin`` -> ``usr/bin``,
  an absolute ``/etc/alternatives/...``) is followed within ``dest``, never out of it, and an entry
  replaces what was at its path (a symlink there is removed, not written through);
* devices are skipped (a runtime provides ``/dev``); owners are kept when running as root.

``python -m pysched_dev.ocirootfs ARCHIVE DEST`` extracts one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


def norm(name: str) -> str:
    """A layer entry's path relative to the root: no leading ``./`` or ``/``, no trailing ``/``."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return "/".join(parts)


class OciImage:
    """An image archive opened for reading (a context manager)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.tar = tarfile.open(self.path, "r:")
        self.index = json.loads(self._read("index.json"))
        manifests = self.index["manifests"]
        if len(manifests) != 1:
            raise ValueError(f"{self.path}: index.json lists {len(manifests)} manifests, want 1")
        self.descriptor = manifests[0]
        self.manifest_bytes = self._blob(self.descriptor["digest"])
        self.manifest = json.loads(self.manifest_bytes)
        self.config = json.loads(self._blob(self.manifest["config"]["digest"]))

    def __enter__(self) -> OciImage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tar.close()

    def _read(self, name: str) -> bytes:
        f = self.tar.extractfile(name)
        if f is None:
            raise ValueError(f"{self.path}: {name} is not a file")
        return f.read()

    def _blob(self, digest: str) -> bytes:
        return self._read(self.blob_name(digest))

    @staticmethod
    def blob_name(digest: str) -> str:
        algo, _, hexd = digest.partition(":")
        return f"blobs/{algo}/{hexd}"

    @property
    def ref_name(self) -> str:
        return self.descriptor.get("annotations", {}).get("org.opencontainers.image.ref.name", "")

    def layers(self) -> Iterator[tuple[dict, tarfile.TarFile]]:
        """(descriptor, streaming tar) of each layer, lowest first."""
        for desc in self.manifest["layers"]:
            fobj: IO[bytes] | None = self.tar.extractfile(self.blob_name(desc["digest"]))
            if fobj is None:
                raise ValueError(f"{self.path}: layer {desc['digest']} missing")
            if "zstd" in desc.get("mediaType", ""):
                raise ValueError(f"{self.path}: zstd layers are not supported ({desc['digest']})")
            with tarfile.open(fileobj=fobj, mode="r|*") as layer:
                yield desc, layer


def whiteout_target(path: str) -> tuple[str, bool] | None:
    """(the path a whiteout entry removes, whether it is an opaque marker), or None for an entry."""
    head, _, base = path.rpartition("/")
    if base == OPAQUE:
        return head, True
    if base.startswith(WHITEOUT):
        return (f"{head}/" if head else "") + base[len(WHITEOUT):], False
    return None


def resolve(root: str, rel: str) -> str:
    """rel's host path under root, every component but the last resolved as in a chroot at root."""
    stack = list(reversed([p for p in rel.split("/") if p not in ("", ".")]))
    cur, hops = root, 0
    while stack:
        part = stack.pop()
        if part == "..":
            if cur != root:
                cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, part)
        if stack and os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise OSError(f"too many symlinks resolving {rel} under {root}")
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = root
            stack.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
            continue
        cur = nxt
    return cur


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _spared(rel: str, written: set[str]) -> bool:
    """Whether rel was written by the current layer or lies on the way to something it wrote."""
    return rel in written or any(w.startswith(rel + "/") for w in written)


def extract_rootfs(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> dict[str, int]:
    """Applies the image's layers to dest (created); returns counts of what was done."""
    root = os.path.realpath(dest)
    os.makedirs(root, exist_ok=True)
    as_root = os.geteuid() == 0
    counts = {"entries": 0, "whiteouts": 0, "devices_skipped": 0}
    dir_modes: dict[str, tuple[int, int, int, int]] = {}
    with OciImage(archive) as image:
        for _desc, layer in image.layers():
            written: set[str] = set()
            removals: list[tuple[str, bool]] = []
            for ti in layer:
                rel = norm(ti.name)
                if not rel:
                    continue
                wo = whiteout_target(rel)
                if wo is not None:
                    removals.append(wo)
                    continue
                counts["entries"] += 1
                if ti.ischr() or ti.isblk():
                    counts["devices_skipped"] += 1
                    continue
                target = resolve(root, rel)
                parent = os.path.dirname(target)
                os.makedirs(parent, exist_ok=True)
                written.add(rel)
                if ti.isdir():
                    if os.path.lexists(target) and not (os.path.isdir(target) and not os.path.islink(target)):
                        _remove(target)
                    os.makedirs(target, exist_ok=True)
                    dir_modes[target] = (ti.mode, ti.uid, ti.gid, int(ti.mtime))
                    continue
                _remove(target)
                if ti.isreg():
                    src = layer.extractfile(ti)
                    assert src is not None
                    with open(target, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                elif ti.issym():
                    os.symlink(ti.linkname, target)
                elif ti.islnk():
                    # a hard link to a symlink links the symlink itself, never what it points at
                    os.link(resolve(root, norm(ti.linkname)), target, follow_symlinks=False)
                elif ti.isfifo():
                    os.mkfifo(target)
                else:
                    continue
                if as_root:
                    os.chown(target, ti.uid, ti.gid, follow_symlinks=False)
                if not ti.issym():
                    os.chmod(target, ti.mode)
                    os.utime(target, (ti.mtime, ti.mtime))
            for path, opaque in removals:
                counts["whiteouts"] += 1
                target = resolve(root, path)
                if not opaque:
                    if not _spared(path, written):
                        _remove(target)
                    continue
                if not os.path.isdir(target):
                    continue
                for dirpath, dirnames, filenames in os.walk(target):
                    for name in [*filenames, *list(dirnames)]:
                        full = os.path.join(dirpath, name)
                        rel = os.path.relpath(full, root)
                        if not _spared(rel, written):
                            _remove(full)
                            if name in dirnames:
                                dirnames.remove(name)
    # directory modes and owners last (a read-only directory would refuse what goes into it)
    for target, (mode, uid, gid, mtime) in sorted(dir_modes.items(), reverse=True):
        if os.path.islink(target) or not os.path.isdir(target):   # a later layer's symlink: not followed
            continue
        if as_root:
            os.chown(target, uid, gid, follow_symlinks=False)
        os.chmod(target, mode)
        os.utime(target, (mtime, mtime))
    return counts


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print("usage: python -m pysched_dev.ocirootfs ARCHIVE DEST", file=sys.stderr)
        return 2
    counts = extract_rootfs(args[0], args[1])
    print(f"ocirootfs: {args[1]} " + " ".join(f"{k}={v}" for k, v in counts.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
