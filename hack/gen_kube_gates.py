"""Generate ``scheduler/pysched/apis/features/kube_gates.py`` from Kubernetes' own feature-gate tables.

kube-scheduler's ``--feature-gates`` knows every gate of ``k8s.io/kubernetes/pkg/features`` (with the
apiserver, apiextensions, controller-manager and zpages gates it lists), client-go's, and
component-base's logging and metrics gates. Each gate's history is a list of versioned specs:
from release X on, default D, stage S, maybe locked to its default, maybe only for clusters whose
minimum compatibility version is at least M. This script reads those Go tables from the module
cache (``go mod download`` puts them there) and writes them as Python data, so pysched resolves a
release's defaults exactly as ``component-base/featuregate`` does.

    python hack/gen_kube_gates.py [K8S_VERSION...]   # default: the window, oldest to newest

The newest release's tables hold each gate's whole history; gates it removed are taken from the
older releases of the window (a 1.35 cluster's kube-scheduler still knows them), marked REMOVED_IN.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "scheduler/pysched/apis/features/kube_gates.py"
WINDOW_RELEASES = ("1.35.4", "1.36.2", "1.37.2")

SPEC = re.compile(r"\{(Version:\s*version\.MustParse\(\"(\d+)\.(\d+)\"\),.*?)\}")
NAME = re.compile(r"^\t+(?:\w+\.)?(?:Feature\()?(\w+)\)?:\s*\{\s*$")
DEP = re.compile(r"^\t+(?:\w+\.)?(\w+):\s*\{(.*)\},\s*$")


def module_dir(mod: str, ver: str) -> Path:
    out = subprocess.run(["go", "mod", "download", "-json", f"{mod}@{ver}"], check=True,
                         capture_output=True, text=True, env=None).stdout
    return Path(json.loads(out)["Dir"])


def versioned_maps(text: str) -> dict[str, list[tuple]]:
    """Every ``map[...Feature]...VersionedSpecs{`` literal in a Go file: name -> specs."""
    gates: dict[str, list[tuple]] = {}
    inside = False
    current: str | None = None
    for line in text.splitlines():
        if not inside:
            if re.search(r"map\[(?:featuregate\.)?Feature\](?:featuregate\.)?VersionedSpecs\{", line):
                inside = True
            continue
        if line.startswith("}"):
            inside = False
            continue
        m = NAME.match(line)
        if m:
            current = m.group(1)
            gates.setdefault(current, [])
            continue
        for s in SPEC.finditer(line):
            fields = s.group(1)
            default = re.search(r"Default:\s*(true|false)", fields)
            stage = re.search(r"PreRelease:\s*(?:featuregate\.)?(\w+)", fields)
            assert current is not None and default and stage, line
            locked = "LockToDefault: true" in fields
            mc = re.search(r"MinCompatibilityVersion:\s*version\.MustParse\(\"(\d+)\.(\d+)\"\)", fields)
            min_compat = (int(mc.group(1)), int(mc.group(2))) if mc else None
            gates[current].append(((int(s.group(2)), int(s.group(3))), default.group(1) == "true",
                                   stage.group(1), locked, min_compat))
    return gates


def feature_names(text: str) -> dict[str, str]:
    """Go identifier -> the gate's name (``X featuregate.Feature = "Name"``); they differ for a few."""
    return dict(re.findall(r"^\s*(\w+)\s+(?:featuregate\.)?Feature\s*=\s*\"(\w+)\"", text, re.M))


def dependencies(text: str) -> dict[str, tuple[str, ...]]:
    deps: dict[str, tuple[str, ...]] = {}
    inside = False
    for line in text.splitlines():
        if not inside:
            inside = "map[featuregate.Feature][]featuregate.Feature{" in line
            continue
        if line.startswith("}"):
            break
        m = DEP.match(line)
        if m and m.group(2).strip():
            names = [re.sub(r"^(?:\w+\.)?(?:Feature\()?(?:\w+\.)?(\w+)\)?$", r"\1", n.strip())
                     for n in m.group(2).split(",") if n.strip()]
            deps[m.group(1)] = tuple(names)
    return deps


def release_tables(k8s: str) -> tuple[dict[str, list[tuple]], dict[str, tuple[str, ...]]]:
    """One release's gates (name -> specs) and dependencies, from its modules."""
    staging = "v0." + k8s.split(".", 1)[1]
    kube = module_dir("k8s.io/kubernetes", f"v{k8s}")
    base = module_dir("k8s.io/component-base", staging)
    client = module_dir("k8s.io/client-go", staging)
    kube_text = (kube / "pkg/features/kube_features.go").read_text()
    sources = [kube_text, (client / "features/known_features.go").read_text(),
               (base / "logs/api/v1/kube_features.go").read_text()]
    for extra in ("metrics/features/kube_features.go", "zpages/features/kube_features.go"):
        if (base / extra).exists():
            sources.append((base / extra).read_text())
    names: dict[str, str] = {}
    for text in sources:
        names.update(feature_names(text))
    gates: dict[str, list[tuple]] = {}
    for text in sources:
        for ident, specs in versioned_maps(text).items():
            if specs:
                gates.setdefault(names.get(ident, ident), specs)
    deps = {names.get(k, k): tuple(names.get(d, d) for d in v) for k, v in dependencies(kube_text).items()}
    return gates, deps


def main() -> None:
    """The newest release's tables (its histories cover the older releases it can emulate), plus the
    gates the older releases of the window still had and the newest removed."""
    releases = sys.argv[1:] or list(WINDOW_RELEASES)
    k8s = releases[-1]
    gates, deps = release_tables(k8s)
    removed: dict[str, str] = {}
    for older in reversed(releases[:-1]):
        old_gates, old_deps = release_tables(older)
        for name, specs in old_gates.items():
            if name not in gates:
                gates[name] = specs
                removed[name] = older
                if name in old_deps:
                    deps[name] = old_deps[name]
    lines = [
        f'"""Kubernetes v{k8s}\'s feature gates (and older ones of {", ".join(releases[:-1])}), as kube-scheduler\'s',
        "``--feature-gates`` knows them.",
        "",
        "Generated by ``hack/gen_kube_gates.py`` from ``k8s.io/kubernetes/pkg/features``, client-go's and",
        "component-base's gate tables; do not edit. ``GATES[name]`` is the gate's history: (release,",
        "default, stage, locked to default, minimum compatibility version or None), oldest first.",
        "``DEPENDENCIES[name]`` lists the gates it needs on.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f'SOURCE = "k8s.io/kubernetes v{k8s}"',
        "",
        "# Gates the newest release no longer has: the last release of the window that had them.",
        "LAST_RELEASE: dict[str, tuple[int, int]] = {",
        *[f"    {n!r}: ({int(v.split('.')[0])}, {int(v.split('.')[1])})," for n, v in sorted(removed.items())],
        "}",
        "",
        "Spec = tuple[tuple[int, int], bool, str, bool, tuple[int, int] | None]",
        "",
        "GATES: dict[str, tuple[Spec, ...]] = {",
    ]
    for name in sorted(gates):
        lines.append(f"    {name!r}: (")
        lines += [f"        {spec!r}," for spec in gates[name]]
        lines.append("    ),")
    lines.append("}")
    lines.append("")
    lines.append("DEPENDENCIES: dict[str, tuple[str, ...]] = {")
    for name in sorted(deps):
        lines.append(f"    {name!r}: (")
        lines += [f"        {d!r}," for d in deps[name]]
        lines.append("    ),")
    lines.append("}")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(gates)} gates, {len(deps)} with dependencies")


if __name__ == "__main__":
    main()
