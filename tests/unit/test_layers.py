"""The package's layers, checked on the source: no module imports a layer above its own.

Read bottom-up: ``util`` and ``metrics`` know nothing of scheduling; ``apis`` (configuration and
object model) builds on ``util``; ``framework`` (the plugin API) on ``apis``; ``backend`` (cache,
queue) and ``client`` (API I/O) below the engine; in-tree ``plugins`` see only the framework, the
helpers they share and their own package (never another plugin's); ``loadmetrics`` (metric
sources) fills the framework's series from beside the engine; ``controllers`` (PodGroup status) sit
beside ``server`` on ``client``; ``tools`` never reach for the live app, nor does the what-if web UI
(``ui``) built on them. The scheduler process (``app``) is assembled by its builders (``assembly``)
from the engine, the controllers and the secure port, and the extender's server (``extender.server``)
serves a profile without knowing the process around it: none of them imports a tool, the app (nor
the app the extender's server), or the command line. Only the command
line - ``cli``, ``__main__`` and the process entry points it hands commands to (``cmd``) - may
import everything; the package itself (``pysched``) imports nothing. Nothing in the wheel imports
the dev harness. Every import counts, ``TYPE_CHECKING`` ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "scheduler"
BASE = {"pysched.util", "pysched.metrics"}
ALLOWED = {
    "pysched.util": {"pysched.util"},
    "pysched.metrics": {"pysched.util"},
    "pysched.apis": {"pysched.apis", "pysched.util"},
    "pysched.framework": {"pysched.framework", "pysched.apis"} | BASE,
    # the engine that runs the plugin API (upstream's framework/runtime)
    "pysched.runtime": {"pysched.runtime", "pysched.framework", "pysched.apis"} | BASE,
    # a plugin also sees its own package (allowed_for): pysched.plugins.<name>.*, never another plugin's
    "pysched.plugins": {"pysched.framework", "pysched.plugins.helper"},
    "pysched.backend": {"pysched.backend", "pysched.framework", "pysched.apis"} | BASE,
    "pysched.client": {"pysched.client", "pysched.apis"} | BASE,
    "pysched.server": {"pysched.server", "pysched.client", "pysched.apis"} | BASE,
    # in-process controllers (PodGroup status): API I/O and the object model, never the framework or plugins
    "pysched.controllers": {"pysched.controllers", "pysched.client", "pysched.apis"} | BASE,
    "pysched.extender": BASE,   # the package's own __init__ (a module under it without a rule: this one)
    "pysched.extender.wire": {"pysched.extender.wire", "pysched.apis"} | BASE,
    "pysched.extender.client": {"pysched.extender.wire", "pysched.framework", "pysched.client", "pysched.apis"} | BASE,
    # the testing kit: PluginTester on the framework and the cache; ProfileHarness drives the offline
    # engine (a whole profile), as simulate does
    "pysched.testing": {"pysched.testing", "pysched.framework", "pysched.backend", "pysched.client",
                        "pysched.apis", "pysched.profile", "pysched.tools.offline", "pysched.runtime"} | BASE,
    # load metrics sources and collector: the plugin API's series, never the engine or the plugins
    "pysched.loadmetrics": {"pysched.loadmetrics", "pysched.framework", "pysched.apis"} | BASE,
}
ENGINE = {"pysched.framework", "pysched.runtime", "pysched.backend", "pysched.client", "pysched.apis",
          "pysched.extender.client",
          "pysched.extender.wire", "pysched.explanation", "pysched.eventhandlers", "pysched.schedule_one",
          "pysched.schedule_one_podgroup", "pysched.schedule_composite_podgroup",
          "pysched.profile", "pysched.plugins", "pysched.loadmetrics", "pysched.podlocation",
          "pysched.podrecovery", "pysched.shadow"} | BASE
ALLOWED.update({
    "pysched.explanation": {"pysched.explanation"} | BASE,
    "pysched.eventhandlers": ENGINE,
    "pysched.schedule_one": ENGINE,
    # the pod-group cycle, mixed into the scheduler
    "pysched.schedule_one_podgroup": ENGINE,
    # the pod-group cycle of a tree of CompositePodGroups, run by the one above
    "pysched.schedule_composite_podgroup": ENGINE,
    # shadow mode's predictions, run by the live process in place of binding
    "pysched.shadow": ENGINE,
    "pysched.podlocation": BASE,
    "pysched.podrecovery": {"pysched.podlocation"} | BASE,
    "pysched.profile": ENGINE,
    "pysched.tools": ENGINE | {"pysched.tools"},
    # the scheduler process's builders, one per concern: the engine, the status controllers, the secure port
    "pysched.assembly": ENGINE | {"pysched.assembly", "pysched.controllers", "pysched.server"},
    # the scheduler process: its builders and its lifecycle
    "pysched.app": ENGINE | {"pysched.assembly", "pysched.controllers", "pysched.server"},
    # the extender's HTTP server over one profile (the process around it is pysched.cmd.extender)
    "pysched.extender.server": {"pysched.extender.server", "pysched.extender.wire", "pysched.framework",
                                "pysched.client", "pysched.server", "pysched.podlocation", "pysched.apis"} | BASE,
    # the what-if web UI (pysched ui): the offline tools and what they build on, never the live app
    "pysched.ui": {"pysched.ui", "pysched.tools", "pysched.framework", "pysched.runtime", "pysched.apis",
                   "pysched.util"},
})
# deprecated aliases kept for one plugin API major version: a framework module re-exporting the engine's
DEPRECATED_ALIASES = {"pysched.framework.registry": {"pysched.runtime.registry"},
                      "pysched.framework.groupmetrics": {"pysched.runtime.plugin_metrics"},
                      "pysched.framework.quotametrics": {"pysched.runtime"}}
# The command line: the only modules that may import every layer (a module under one of them too).
ENTRY_POINTS = {"pysched.__main__", "pysched.cli", "pysched.cmd"}
ROOT_PACKAGE = "pysched"   # its __init__: the version and the docstring, nothing imported


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; use absolute pysched.* imports"
            out.add(node.module or "")
            # `from pysched.x import y` may name a submodule y: check it too
            out.update(f"{node.module}.{a.name}" for a in node.names
                       if (ROOT / (node.module or "").replace(".", "/") / f"{a.name}.py").exists())
    return out


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def rule_for(mod: str) -> set[str] | None:
    best = None
    for prefix in ALLOWED:
        if within(mod, prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else ALLOWED[best]


def is_entry_point(mod: str) -> bool:
    return any(within(mod, e) for e in ENTRY_POINTS)


def allowed_for(mod: str) -> set[str] | None:
    """What ``mod`` may import: its layer's rule, narrowed for the plugins. A plugin sees the framework,
    the shared helpers and its own package ``pysched.plugins.<name>`` (its private helpers; for a
    one-module plugin, itself) - never another plugin, nor another plugin's private helpers."""
    if mod == ROOT_PACKAGE:
        return set()
    allowed = rule_for(mod)
    if allowed is None:
        return None
    if mod == "pysched.plugins":
        allowed = ALLOWED["pysched.plugins"] | {"pysched.plugins"}   # the registry list imports the plugins
    elif within(mod, "pysched.plugins.helper"):
        allowed = {"pysched.framework", "pysched.plugins.helper"}     # shared by plugins: none of their code
    elif within(mod, "pysched.plugins"):
        allowed = ALLOWED["pysched.plugins"] | {".".join(mod.split(".")[:3])}   # a plugin: + its own package
    return allowed | DEPRECATED_ALIASES.get(mod, set())


MODULES = sorted((module_name(p), p) for p in ROOT.rglob("*.py"))


def upward_imports(mod: str, path: Path) -> list[str]:
    """The pysched modules that ``path`` (module ``mod``) imports and its layer does not allow."""
    if is_entry_point(mod):
        return []
    allowed = allowed_for(mod)
    assert allowed is not None, f"{mod}: no layer rule; add it to ALLOWED in {__file__}"
    return sorted(i for i in imports(path)
                  if within(i, "pysched") and i != "pysched" and not any(within(i, a) for a in allowed))


@pytest.mark.parametrize("mod,path", MODULES, ids=[m for m, _ in MODULES])
def test_no_upward_imports(mod, path):
    own = {i for i in imports(path) if within(i, "pysched") or i.split(".")[0] in ("pysched_dev", "tests", "bench")}
    outside = {i for i in own if not within(i, "pysched")}
    assert not outside, f"{mod} imports the dev harness or tests: {sorted(outside)}"
    bad = upward_imports(mod, path)
    assert not bad, f"{mod} imports {bad}; its layer allows only {sorted(allowed_for(mod) or ())}"


def test_the_rule_catches_an_upward_import(tmp_path):
    """The check itself can fail: a framework module importing the live app is refused, and so is
    the process importing the command line or a tool, or the extender's server importing the app."""
    allowed = rule_for("pysched.runtime.framework")
    assert not any(within("pysched.app", a) for a in allowed)
    assert not any(within("pysched.backend.cache.cache", a) for a in rule_for("pysched.plugins.gpu") or ())
    assert not any(within("pysched.framework", a) or within("pysched.plugins", a)
                   for a in rule_for("pysched.controllers.podgroup") or ())
    for process in ("pysched.app", "pysched.assembly.profiles", "pysched.extender.server"):
        assert not is_entry_point(process)
        for upper in ("pysched.cli", "pysched.cmd", "pysched.tools", "pysched.ui", "pysched.testing"):
            assert not any(within(upper, a) for a in allowed_for(process) or ()), (process, upper)
    assert not any(within("pysched.app", a) for a in allowed_for("pysched.extender.server") or ())
    assert not any(within("pysched.extender.server", a) for a in allowed_for("pysched.app") or ())
    assert not any(within("pysched.app", a) for a in allowed_for("pysched.assembly.clients") or ())
    assert allowed_for("pysched") == set()


def test_an_upward_import_of_the_process_is_caught(tmp_path):
    """Planted files: the imports that used to run back up the layers - the app importing a tool,
    the extender's server importing the app - fail the check, as would the app reaching for the
    command line; the command line's entry points may import them all."""
    pkg = tmp_path / "pysched"
    for sub in ("extender", "cmd"):
        (pkg / sub).mkdir(parents=True)
    (pkg / "app.py").write_text("from pysched.tools.shadow import ShadowRecorder\nimport pysched.cmd.scheduler\n"
                                "from pysched.profile import build_queue\n")
    (pkg / "extender" / "server.py").write_text("from pysched.framework import NodeBatch\n"
                                                "from pysched.app import Options, SchedulerApp\n")
    (pkg / "cmd" / "extender.py").write_text("from pysched.app import Options, SchedulerApp\n"
                                             "from pysched.extender.server import ExtenderServer\n")
    (pkg / "__init__.py").write_text("from pysched.app import SchedulerApp\n")
    assert upward_imports("pysched.app", pkg / "app.py") == ["pysched.cmd.scheduler", "pysched.tools.shadow"]
    assert upward_imports("pysched.extender.server", pkg / "extender" / "server.py") == ["pysched.app"]
    assert upward_imports("pysched.cmd.extender", pkg / "cmd" / "extender.py") == []
    assert upward_imports("pysched", pkg / "__init__.py") == ["pysched.app"]


def test_a_plugin_sees_its_own_package_and_no_other_plugins():
    """A plugin package's modules import each other; no plugin reaches into another plugin's package,
    and the shared helpers import no plugin."""
    def may(mod: str, imported: str) -> bool:
        return any(within(imported, a) for a in allowed_for(mod) or ())
    assert may("pysched.plugins.dynamic_resources.dynamic_resources", "pysched.plugins.dynamic_resources.allocator")
    assert may("pysched.plugins.dynamic_resources.allocator", "pysched.plugins.dynamic_resources.cel")
    assert may("pysched.plugins.dynamic_resources", "pysched.plugins.dynamic_resources.dynamic_resources")
    assert may("pysched.plugins.loadaware.metric_score", "pysched.plugins.loadaware.load")
    assert may("pysched.plugins.node_affinity", "pysched.plugins.helper.nodeselect")
    assert not may("pysched.plugins.capacity_scheduling.capacity_scheduling", "pysched.plugins.dynamic_resources.cel")
    assert not may("pysched.plugins.coscheduling.coscheduling", "pysched.plugins.capacity_scheduling")
    assert not may("pysched.plugins.node_affinity", "pysched.plugins.loadaware.load")
    assert not may("pysched.plugins.node_affinity", "pysched.plugins.taint_toleration")
    assert not may("pysched.plugins.helper.normalize", "pysched.plugins.dynamic_resources.allocator")
    assert not may("pysched.plugins.dynamic_resources.allocator", "pysched.backend.cache")


def runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The ``known`` modules ``path`` imports when it is imported: module-level imports, not those
    under ``if TYPE_CHECKING:`` (type-only) nor inside functions (deferred on purpose)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for n in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else (node,):
            if isinstance(n, ast.Import):
                out.update(a.name for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.module:
                out.add(n.module)
                out.update(f"{n.module}.{a.name}" for a in n.names)
    return out & known


def import_cycles(root: Path) -> list[list[str]]:
    """Cycles of runtime imports between the modules under ``root`` (strongly connected components)."""
    paths = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        paths[".".join(parts)] = p
    graph = {m: runtime_imports(p, set(paths)) - {m} for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:       # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            # A package's __init__ importing its own submodules is not a cycle that bites.
            if len(comp) > 1 and not any(all(within(c, m) for c in comp) for m in comp):
                cycles.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    """A runtime import cycle makes import order matter and hides a layering mistake."""
    assert import_cycles(ROOT) == []


def test_the_checks_catch_a_planted_module(tmp_path):
    """The checks parse real files: a planted package with a cycle and an upward import is caught."""
    pkg = tmp_path / "pysched"
    (pkg / "framework").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "framework" / "__init__.py").write_text("")
    (pkg / "framework" / "a.py").write_text("from pysched.framework import b\n")
    (pkg / "framework" / "b.py").write_text("import pysched.framework.a\nfrom pysched.app import run\n")
    (pkg / "framework" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from pysched.framework import a\n")
    assert import_cycles(tmp_path) == [["pysched.framework.a", "pysched.framework.b"]]
    planted = imports(pkg / "framework" / "b.py")
    assert "pysched.app" in planted
    assert not any(within("pysched.app", a) for a in rule_for("pysched.framework.b"))


# -- the policy plugins (plugins/, the pysched-policy distribution) ------------------------------------

POLICY_ROOT = Path(__file__).resolve().parents[2] / "plugins" / "src"
PUBLIC_API = {"pysched.framework", "pysched.framework.api"}


def policy_violations(root: Path) -> list[str]:
    """Imports of pysched beyond the public plugin API, by the modules under ``root``: a policy
    plugin is written as a user's plugin is (``from pysched.framework import ...`` and
    ``from pysched.framework.api import ...``, nothing deeper)."""
    bad = []
    for p in sorted(root.rglob("*.py")):
        for i in sorted(imports_anywhere(p)):
            if within(i, "pysched") and i not in PUBLIC_API:
                bad.append(f"{p.relative_to(root)}: {i}")
    return bad


def imports_anywhere(path: Path) -> set[str]:
    """Every module ``path`` imports (``from pysched.framework import X`` counts as
    pysched.framework, whatever X is: the names it exports are the API)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            out.add(node.module or "")
    return out


def test_policy_plugins_use_only_the_public_plugin_api():
    assert sorted(p.name for p in (POLICY_ROOT / "pysched_policy").glob("*.py")) == [
        "__init__.py", "az_spread.py", "capacity_type.py", "gpu.py", "instance_type.py"]
    assert policy_violations(POLICY_ROOT) == []
    assert import_cycles(POLICY_ROOT) == []


def test_the_policy_check_catches_an_engine_import(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "p.py").write_text("from pysched.framework import ScorePlugin\n"
                                           "from pysched.plugins.helper.domains import per_node\n")
    assert policy_violations(tmp_path) == ["pkg/p.py: pysched.plugins.helper.domains"]


def test_every_module_has_one_import_path():
    """The engine (scheduler/) and the policy plugins (plugins/src) are import roots of their own: no
    folder above them is a package, they share no top-level name, and the policy plugins are
    nowhere in the engine's tree - so no module can be imported under two names."""
    repo = ROOT.parent
    for folder in (repo, ROOT, POLICY_ROOT.parent, POLICY_ROOT):
        assert not (folder / "__init__.py").exists(), f"{folder} would make its modules importable twice"
    engine_top = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    policy_top = {p.name for p in POLICY_ROOT.iterdir() if (p / "__init__.py").exists()}
    assert engine_top == {"pysched"} and policy_top == {"pysched_policy"}
    engine_files = {p.name for p in (ROOT / "pysched").rglob("*.py")}
    assert not engine_files & {"gpu.py", "az_spread.py", "capacity_type.py", "instance_type.py"}
    import pysched_policy
    assert Path(pysched_policy.__file__).resolve().parent == POLICY_ROOT / "pysched_policy"
