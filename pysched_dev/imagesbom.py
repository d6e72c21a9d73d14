"""A CycloneDX SBOM of a container image's OCI archive: Debian packages, Python distributions, Go modules.

``python -m pysched_dev.imagesbom image.oci.tar --workdir DIR -o sbom.cdx.json`` (hack/image.sh).
The image's root filesystem is extracted into DIR (``ocirootfs``) and each part comes from the tool
that owns it, run against that file system, not from ``imagescan`` (the test compares the two):

* Python: ``cyclonedx-py environment`` (PyPI's cyclonedx-bom) given a stand-in interpreter that
  asks the image's own ``python3`` for its ``sys.path`` (run in a chroot of the rootfs: as root, or
  in a user namespace) and answers it with the rootfs prefixed, so cyclonedx-py reads the image's
  distributions' metadata; it leaves the purl out for a distribution installed from a local file,
  as the Dockerfile installs them all (from /wheels): those get ``pkg:pypi/NAME@VERSION``;
* Debian: ``dpkg-query --admindir=<rootfs>/var/lib/dpkg`` (the status file parsed when the host has
  no dpkg), purls ``pkg:deb/debian/NAME@VERSION?arch=...&distro=debian-<VERSION_ID>``;
* Go: the modules of ``pysched-cel`` as ``go version -m`` prints them (``gobuildinfo`` when the host
  has no Go), purls ``pkg:golang/PATH@VERSION``, with the Go standard library as ``stdlib``.

The image itself is the BOM's metadata component (type container, its manifest digest in an
``pkg:oci`` purl and its OCI labels as properties). With SOURCE_DATE_EPOCH set the document is
reproducible (no serial number, that timestamp). It is validated against the CycloneDX 1.6 schema
(cyclonedx-python-lib) before it is written.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from packageurl import PackageURL

from pysched_dev import gobuildinfo
from pysched_dev.imagescan import CEL_NAME, parse_dpkg_status, path_dirs
from pysched_dev.ocirootfs import OciImage, extract_rootfs

SPEC = "1.6"
WRAPPER = """#!/bin/sh
# stand-in interpreter for cyclonedx-py: the image's python3 sys.path, rootfs-prefixed
out=$({chroot} {rootfs} /usr/bin/env -i PATH={path} python3 "$@") || exit $?
exec {host_python} -c 'import json,sys; r=sys.argv[1]; print(json.dumps([r+p if p.startswith("/") else p \
  for p in json.loads(sys.argv[2])]))' {rootfs} "$out"
"""


def python_components(rootfs: Path, env_path: str, workdir: Path) -> dict:
    """cyclonedx-py's BOM of the image's Python environment."""
    chroot = "chroot" if os.geteuid() == 0 else "unshare --map-root-user chroot"
    wrapper = workdir / "python"
    wrapper.write_text(WRAPPER.format(chroot=chroot, rootfs=shlex.quote(str(rootfs)), path=shlex.quote(env_path),
                                      host_python=shlex.quote(sys.executable)))
    wrapper.chmod(0o755)
    out = workdir / "python.cdx.json"
    cli = [sys.executable, "-m", "cyclonedx_py", "environment", "--sv", SPEC, "--of", "JSON",
           "--output-reproducible", "--short-PURLs", "-o", str(out), str(wrapper)]
    subprocess.run(cli, check=True, stdout=sys.stderr)
    return json.loads(out.read_text())


def debian_packages(rootfs: Path) -> list[dict[str, str]]:
    admindir = rootfs / "var/lib/dpkg"
    if not (admindir / "status").exists():
        return []
    if shutil.which("dpkg-query"):
        fmt = "${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\t${source:Package}\n"
        res = subprocess.run(["dpkg-query", f"--admindir={admindir}", "-W", "-f", fmt],
                             check=True, capture_output=True, text=True)
        pkgs = []
        for line in res.stdout.splitlines():
            status, name, version, arch, source = line.split("\t")
            if status.startswith("ii"):
                pkgs.append({"name": name, "version": version, "architecture": arch, "source": source})
        return sorted(pkgs, key=lambda p: p["name"])
    return parse_dpkg_status((admindir / "status").read_text())


def go_binary(path: Path) -> gobuildinfo.BuildInfo:
    if shutil.which("go"):
        res = subprocess.run(["go", "version", "-m", str(path)], check=True, capture_output=True, text=True)
        first, _, rest = res.stdout.partition("\n")
        return gobuildinfo.parse_modinfo(first.rpartition(": ")[2].strip(),
                                         "\n".join(line.removeprefix("\t") for line in rest.splitlines()))
    return gobuildinfo.read(path.read_bytes())


def os_release(rootfs: Path) -> dict[str, str]:
    out = {}
    for name in ("usr/lib/os-release", "etc/os-release"):
        p = rootfs / name
        if p.is_file() and not p.is_symlink():   # a link could point out of the rootfs
            for line in p.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    out[key] = value.strip().strip('"')
            break
    return out


def prop(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def build(archive: Path, workdir: Path) -> dict:
    rootfs = workdir / "rootfs"
    extract_rootfs(archive, rootfs)
    with OciImage(archive) as image:
        ref, digest = image.ref_name, image.descriptor["digest"]
        cfg = image.config.get("config", {})
        labels = cfg.get("Labels") or {}
        arch = image.config.get("architecture", "")
    env_path = next((e.partition("=")[2] for e in cfg.get("Env") or [] if e.startswith("PATH=")),
                    "/usr/local/bin:/usr/bin:/bin")
    repo, _, tag = ref.rpartition(":") if ":" in ref.rpartition("/")[2] else (ref, "", "")
    image_purl = PackageURL("oci", None, repo.rpartition("/")[2], digest,
                            {"repository_url": repo, "arch": arch, **({"tag": tag} if tag else {})}).to_string()

    bom = python_components(rootfs, env_path, workdir)
    components: list[dict] = []
    for c in bom.get("components", []):
        c.setdefault("properties", []).append(prop("pysched:source", "python"))
        if "purl" not in c:
            # cyclonedx-py gives none to what was installed from a local file: the Dockerfile installs
            # every distribution from /wheels, wheels pip fetched from PyPI by their lock pins (and
            # pysched's own two, published there under these names)
            c["purl"] = PackageURL("pypi", None, c["name"], c["version"]).to_string()
            c["properties"].append(prop("pysched:purl", "installed from a local wheel; named as on PyPI"))
        components.append(c)

    release = os_release(rootfs)
    distro = f"{release.get('ID', 'debian')}-{release.get('VERSION_ID', '')}".rstrip("-")
    for p in debian_packages(rootfs):
        purl = PackageURL("deb", release.get("ID", "debian"), p["name"], p["version"],
                          {"arch": p["architecture"], "distro": distro}).to_string()
        c = {"type": "library", "bom-ref": purl, "name": p["name"], "version": p["version"], "purl": purl,
             "properties": [prop("pysched:source", "dpkg")]}
        if p.get("source") and p["source"] != p["name"]:
            c["properties"].append(prop("pysched:deb:source", p["source"]))
        components.append(c)

    dependencies = bom.get("dependencies", [])
    cel = next((rootfs / d / CEL_NAME for d in path_dirs(cfg.get("Env") or []) if (rootfs / d / CEL_NAME).is_file()),
               None)
    if cel is not None:
        info = go_binary(cel)
        where = "/" + str(cel.relative_to(rootfs))
        main_purl = PackageURL("golang", None, info.path, None).to_string()
        cel_ref = f"{main_purl}#{where}"
        components.append({"type": "application", "bom-ref": cel_ref, "name": info.path, "purl": main_purl,
                           "properties": [prop("pysched:source", "go"), prop("pysched:path", where),
                                          *(prop(f"go:build:{k}", v) for k, v in sorted(info.settings.items()))]})
        deps = []
        std = PackageURL("golang", None, "stdlib", info.go_version).to_string()
        modules = [(m.replaced_by or m) for m in info.deps]
        for path, version, purl in [("stdlib", info.go_version, std),
                                    *((m.path, m.version, PackageURL("golang", None, m.path, m.version).to_string())
                                      for m in modules)]:
            components.append({"type": "library", "bom-ref": f"{purl}#{where}", "name": path, "version": version,
                               "purl": purl,
                               "properties": [prop("pysched:source", "go"), prop("pysched:binary", where)]})
            deps.append(f"{purl}#{where}")
        dependencies.append({"ref": cel_ref, "dependsOn": sorted(deps)})

    root_ref = image_purl
    bom["metadata"]["component"] = {
        "type": "container", "bom-ref": root_ref, "name": repo or ref, "version": tag or digest, "purl": image_purl,
        "hashes": [{"alg": "SHA-256", "content": digest.partition(":")[2]}],
        "properties": [prop(k, v) for k, v in sorted(labels.items())]}
    tools = bom["metadata"].setdefault("tools", {}).setdefault("components", [])
    tools.append({"type": "application", "name": "pysched_dev.imagesbom",
                  "description": "Debian packages (dpkg-query), Go modules (go version -m) and the merge"})
    bom["components"] = sorted(components, key=lambda c: (c.get("purl", ""), c["bom-ref"]))
    dependencies.append({"ref": root_ref, "dependsOn": sorted(c["bom-ref"] for c in components
                                                                if c.get("type") == "application"
                                                                or "dpkg" in json.dumps(c.get("properties")))})
    bom["dependencies"] = sorted(dependencies, key=lambda d: d["ref"])
    return bom


def validate(bom: dict) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.from_version(SPEC)).validate_str(json.dumps(bom))
    if error is not None:
        raise SystemExit(f"imagesbom: the SBOM fails the CycloneDX {SPEC} schema: {error}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", type=Path)
    ap.add_argument("--workdir", type=Path, required=True, help="scratch space (the rootfs goes here)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    bom = build(args.archive, args.workdir)
    validate(bom)
    args.output.write_text(json.dumps(bom, indent=1, sort_keys=True) + "\n")
    kinds: dict[str, int] = {}
    for c in bom["components"]:
        src = next((p["value"] for p in c.get("properties", []) if p["name"] == "pysched:source"), "?")
        kinds[src] = kinds.get(src, 0) + 1
    print(f"imagesbom: {args.output}: " + " ".join(f"{k}={v}" for k, v in sorted(kinds.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
