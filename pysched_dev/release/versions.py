"""One version for a release: every file that names it must agree, and a disagreement names the file.

Read here (``collect``), each as the file states it, without importing the packages:

* ``scheduler/pysched/__init__.py`` and ``plugins/src/pysched_policy/__init__.py``: ``__version__``;
* ``charts/pysched/Chart.yaml``: ``version`` and ``appVersion``; ``charts/pysched/values.yaml``:
  ``image.tag`` when set (empty means the appVersion) - so the chart's image default is
  ``<image.repository>:<version>``, the image ``make release`` builds (``image_ref``);
* ``manifests/kustomization.yaml`` and ``manifests/components/extender/kustomization.yaml``: the
  ``images:`` entry's ``newTag`` (and its ``newName``, which must be the chart's repository);
* the docs and READMEs (``DOC_GLOBS``) wherever they pin an image of pysched
  (``ghcr.io/pysched/pysched:X``, ``registry.example.com/pysched:X``, a kustomize ``newTag: "X"``)
  or name a release artifact (``pysched-X.tgz``, ``pysched-X-py3-...whl``, ``pysched-X.tar.gz``,
  ``pysched-X-image.oci.tar``...) or pin the package (``pysched==X``);
* ``CHANGELOG.md``: with ``release=True`` (``make release``, the release workflow) a
  ``## [X]`` section must exist; otherwise (a development tree) ``## [Unreleased]`` will do.

``check`` returns the problems, each starting with the file's path; the command line
(``python -m pysched_dev.release.versions [--tag vX.Y.Z] [--github]``) prints them (as GitHub
annotations with ``--github``) and exits 1, or prints the version. The release workflow's ``verify``
job runs it with the tag, so a tag that differs from the files stops the release.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$")
PACKAGES = ("scheduler/pysched/__init__.py", "plugins/src/pysched_policy/__init__.py")
CHART = "charts/pysched/Chart.yaml"
VALUES = "charts/pysched/values.yaml"
KUSTOMIZATIONS = ("manifests/kustomization.yaml", "manifests/components/extender/kustomization.yaml")
CHANGELOG = "CHANGELOG.md"
DOC_GLOBS = ("README.md", "docs/*.md", "charts/pysched/README.md", "charts/pysched/templates/NOTES.txt",
             "plugins/README.md")
_VERSION = r"(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)"
# Where a document pins a release: the image, the chart package, the wheels and sdists.
DOC_PATTERNS = (re.compile(r"(?<![\w.-])pysched:" + _VERSION),          # any registry's pysched image
                re.compile(r"\bnewTag:\s*[\"']?" + _VERSION),                # a kustomize images: example
                re.compile(r"\bpysched-" + _VERSION + r"\.tgz"),
                re.compile(r"\bpysched(?:_policy|-policy)?-" + _VERSION + r"(?:-py3|-image|-buildinfo|\.tar\.gz)"),
                re.compile(r"\bpysched(?:_policy|-policy)?==" + _VERSION))    # a pip pin
_DUNDER = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']\s*$', re.M)


@dataclass(frozen=True)
class Found:
    """One place that states the version: the file (relative to the repository), what in it, the value."""

    path: str
    what: str
    value: str


def _yaml(root: Path, rel: str) -> dict:
    data = yaml.safe_load((root / rel).read_text())
    return data if isinstance(data, dict) else {}


def chart_repository(root: Path) -> str:
    """The image repository the chart deploys (``values.yaml`` ``image.repository``)."""
    return str((_yaml(root, VALUES).get("image") or {}).get("repository") or "")


def image_ref(root: Path, version: str) -> str:
    """The image a release builds: exactly what the chart and the manifests deploy by default."""
    return f"{chart_repository(root)}:{version}"


def collect(root: Path) -> tuple[list[Found], list[str]]:
    """Every version the repository states, and the problems found reading them (a missing field)."""
    found: list[Found] = []
    problems: list[str] = []
    for rel in PACKAGES:
        m = _DUNDER.search((root / rel).read_text())
        if m:
            found.append(Found(rel, "__version__", m.group(1)))
        else:
            problems.append(f"{rel}: no __version__ = \"X.Y.Z\" line")
    chart = _yaml(root, CHART)
    for key in ("version", "appVersion"):
        if chart.get(key) is None:
            problems.append(f"{CHART}: no {key}")
        else:
            found.append(Found(CHART, key, str(chart[key])))
    tag = (_yaml(root, VALUES).get("image") or {}).get("tag")
    if tag:
        found.append(Found(VALUES, "image.tag", str(tag)))
    repository = chart_repository(root)
    for rel in KUSTOMIZATIONS:
        images = _yaml(root, rel).get("images") or []
        entries = [i for i in images if isinstance(i, dict) and i.get("name") == "pysched"]
        if len(entries) != 1:
            problems.append(f"{rel}: expected one images: entry named pysched, found {len(entries)}")
            continue
        entry = entries[0]
        found.append(Found(rel, "images[pysched].newTag", str(entry.get("newTag"))))
        if entry.get("newName") != repository:
            problems.append(f"{rel}: images[pysched].newName is {entry.get('newName')!r}, the chart deploys "
                            f"{repository!r} ({VALUES} image.repository)")
    for pattern_glob in DOC_GLOBS:
        for path in sorted(root.glob(pattern_glob)):
            rel = path.relative_to(root).as_posix()
            for lineno, line in enumerate(path.read_text().splitlines(), 1):
                for pattern in DOC_PATTERNS:
                    for m in pattern.finditer(line):
                        found.append(Found(rel, f"line {lineno} ({m.group(0)})", m.group(1)))
    return found, problems


def changelog_sections(root: Path) -> list[str]:
    """The CHANGELOG's section names in order (``Unreleased``, ``0.2.0``...)."""
    text = (root / CHANGELOG).read_text()
    return re.findall(r"^## \[([^\]]+)\]", text, re.M)


def check(root: Path, *, expected: str | None = None, release: bool = True) -> tuple[str | None, list[str]]:
    """The version every file agrees on and the problems (empty when they agree). ``expected`` (a
    tag without its v) is what every file must say; without it, the version most files state (the
    package's ``__version__`` on a tie), so a problem names the file that differs."""
    found, problems = collect(root)
    if expected is None and found:
        # the value most places state (the package's on a tie), so the odd one out is the one named
        counts = Counter(f.value for f in found)
        top = max(counts.values())
        package = next((f.value for f in found if f.path == PACKAGES[0]), None)
        expected = package if counts.get(package or "") == top else counts.most_common(1)[0][0]
    if expected is None:
        return None, problems or [f"{PACKAGES[0]}: no version"]
    if not SEMVER.match(expected):
        problems.append(f"{expected!r} is not a semantic version X.Y.Z[-pre]")
    for f in found:
        if f.value != expected:
            problems.append(f"{f.path}: {f.what} is {f.value!r}, the release is {expected!r}")
    sections = changelog_sections(root)
    if expected not in sections and (release or "Unreleased" not in sections):
        problems.append(f"{CHANGELOG}: no '## [{expected}]' section (the release notes come from it; found "
                        f"{', '.join(sections[:3]) or 'none'})")
    return expected, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pysched_dev.release.versions", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--tag", help="the release tag (vX.Y.Z): every file must state X.Y.Z")
    parser.add_argument("--dev", action="store_true", help="a development tree: '## [Unreleased]' is enough")
    parser.add_argument("--github", action="store_true", help="problems as GitHub workflow annotations")
    args = parser.parse_args(argv)
    expected = None
    if args.tag is not None:
        expected = args.tag[1:] if args.tag.startswith("v") else args.tag
        if not args.tag.startswith("v"):
            print(f"tag {args.tag!r} is not v<semver>", file=sys.stderr)
            return 1
    version, problems = check(args.root, expected=expected, release=not args.dev)
    for p in problems:
        if args.github:
            path, _, message = p.partition(": ")
            print(f"::error file={path}::{message}" if "/" in path or path.endswith(".md") else f"::error::{p}")
        else:
            print(f"release versions: {p}", file=sys.stderr)
    if problems:
        return 1
    print(version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
