"""Write an OCI image layout directory as the archive hack/image.sh ships, ``image.oci.tar``.

``python -m pysched_dev.ociarchive LAYOUT_DIR IMAGE EPOCH OUT_DIR`` takes the one image manifest of
the layout (the one whose ``org.opencontainers.image.ref.name`` is IMAGE when there are several) and
writes ``OUT_DIR/image.oci.tar``, ``OUT_DIR/image.digest`` (the manifest's digest) and
``OUT_DIR/.config-digest`` (the config's: the image id engines show).

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) whose
index names the manifest IMAGE twice: ``org.opencontainers.image.ref.name`` (podman, skopeo,
buildah) and ``io.containerd.image.name`` (``ctr images import`` of containerd 1.6 keeps a full
reference only from this one: without ``--base-name`` it drops a ref.name holding a registry and a
tag). A Docker ``manifest.json`` beside it (config and layers by their blob paths, ``RepoTags``)
makes the same file a docker-archive too, as ``docker save`` of Docker 25+ writes it, so
``docker load`` of any version reads it. Entries are sorted, owned by 0:0 and dated EPOCH: the same
layout gives the same bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path

REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")


def blob_path(layout: Path, digest: str) -> Path:
    algo, _, hexd = digest.partition(":")
    return layout / "blobs" / algo / hexd


def pick_manifest(layout: Path, image: str) -> dict:
    """The index entry of the image manifest to ship."""
    index = json.loads((layout / "index.json").read_text())
    entries = [m for m in index["manifests"] if m.get("mediaType") in MANIFEST_TYPES]
    named = [m for m in entries if m.get("annotations", {}).get(REF_NAME) in (image, image.rpartition(":")[2])]
    chosen = named or entries
    if len(chosen) != 1:
        raise SystemExit(f"ociarchive: {layout}/index.json holds {len(chosen)} image manifests for {image}, want 1")
    return chosen[0]


def write_archive(layout: Path, image: str, epoch: int, out: Path) -> tuple[str, str]:
    """Writes out/image.oci.tar; returns (manifest digest, config digest)."""
    entry = pick_manifest(layout, image)
    manifest = json.loads(blob_path(layout, entry["digest"]).read_bytes())
    config, layers = manifest["config"], manifest["layers"]
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": entry["mediaType"], "digest": entry["digest"], "size": entry["size"],
                            "annotations": {CONTAINERD_NAME: image, REF_NAME: image}}]}
    docker_manifest = [{"Config": f"blobs/sha256/{config['digest'].partition(':')[2]}", "RepoTags": [image],
                        "Layers": [f"blobs/sha256/{x['digest'].partition(':')[2]}" for x in layers]}]
    blobs = sorted({entry["digest"], config["digest"], *(x["digest"] for x in layers)})

    def info(name: str, size: int, mode: int = 0o644, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime, ti.type = size, mode, epoch, kind
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "image.oci.tar.tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(info(d, 0, 0o755, tarfile.DIRTYPE))
        for digest in blobs:
            path = blob_path(layout, digest)
            with open(path, "rb") as f:
                tar.addfile(info(f"blobs/sha256/{digest.partition(':')[2]}", path.stat().st_size), f)
        for name, body in (("index.json", index), ("manifest.json", docker_manifest),
                           ("oci-layout", {"imageLayoutVersion": "1.0.0"})):
            data = json.dumps(body, separators=(",", ":")).encode()
            tar.addfile(info(name, len(data)), io.BytesIO(data))
    tmp.rename(out / "image.oci.tar")
    (out / "image.digest").write_text(entry["digest"] + "\n")
    (out / ".config-digest").write_text(config["digest"] + "\n")
    return entry["digest"], config["digest"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layout", type=Path)
    ap.add_argument("image")
    ap.add_argument("epoch", type=int)
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    digest, _ = write_archive(args.layout, args.image, args.epoch, args.out)
    print(f"ociarchive: wrote {args.out / 'image.oci.tar'} manifest={digest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
