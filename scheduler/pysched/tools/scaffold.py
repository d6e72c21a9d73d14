"""``pysched plugin new NAME --points filter,score``: a plugin package to start from.

Writes a normal Python distribution beside nothing else of pysched's: a ``pyproject.toml`` naming
the plugin in the ``pysched.plugins`` entry-point group, the plugin module (typed args, one method
per chosen extension point, written against the public API ``pysched.framework`` only), tests with
``pysched.testing.PluginTester`` that pass as written - the module and its tests both pass
``mypy --strict`` (``[tool.mypy]`` in the pyproject) -, and a README saying how to install, test and
enable it. ``pip install -e <dir>`` makes the plugin loadable by name; ``pytest`` in the directory
runs its tests.

The generated plugin does something small and real so that the tests mean something: Filter keeps
pods off nodes labelled ``<labelKey>=excluded``; Score prefers nodes whose ``<labelKey>`` is
``preferred`` (100, else 0). Both are meant to be replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

POINTS = ("filter", "score")
_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class ScaffoldError(ValueError):
    """A name, a point list or a target directory the scaffold cannot use; the message says which."""


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def parse_points(text: str) -> tuple[str, ...]:
    points = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    unknown = [p for p in points if p not in POINTS]
    if unknown or not points:
        raise ScaffoldError(f"--points: {', '.join(unknown) or 'empty'}: choose from {', '.join(POINTS)}")
    return tuple(p for p in POINTS if p in points)


def new_plugin(name: str, points: tuple[str, ...], parent: Path) -> Path:
    """Write the package for plugin ``name`` under ``parent``; returns its directory."""
    if not _NAME.match(name):
        raise ScaffoldError(f"NAME: {name!r} must be a CamelCase Python identifier, e.g. TeamNodes")
    module = snake(name)
    package = f"pysched_{module}"
    root = parent / f"pysched-{module.replace('_', '-')}"
    if root.exists():
        raise ScaffoldError(f"{root} already exists")
    files = {
        "pyproject.toml": _pyproject(name, module, package),
        "README.md": _readme(name, module, package, points),
        f"src/{package}/__init__.py": (f'"""The {name} pysched plugin."""\n\n'
                                       f"from {package}.{module} import {name}, {name}Args\n\n"
                                       f'__all__ = ["{name}", "{name}Args"]\n'),
        f"src/{package}/py.typed": "",
        f"src/{package}/{module}.py": _plugin(name, points),
        f"tests/test_{module}.py": _tests(name, module, package, points),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _pyproject(name: str, module: str, package: str) -> str:
    return f'''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "pysched-{module.replace('_', '-')}"
version = "0.1.0"
description = "The {name} scheduling plugin for pysched."
requires-python = ">=3.11"
dependencies = ["pysched", "numpy>=1.26"]

[project.optional-dependencies]
test = ["pytest>=8", "mypy>=1.10"]

# The entry point's name is the plugin's name in a profile's plugins and pluginConfig.
[project.entry-points."pysched.plugins"]
{name} = "{package}.{module}:{name}"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
{package} = ["py.typed"]

[tool.pytest.ini_options]
testpaths = ["tests"]

# `mypy` checks the plugin and its tests, strictly (pysched.framework and pysched.testing are typed).
[tool.mypy]
files = ["src", "tests"]
mypy_path = "src"
strict = true
'''


def _plugin(name: str, points: tuple[str, ...]) -> str:
    bases = ", ".join(f"{ {'filter': 'FilterPlugin', 'score': 'ScorePlugin'}[p]}[{name}Args]" for p in points)
    imports = sorted({"CycleState", "NodeBatch", "PodInfo"}
                     | ({"Code", "FilterPlugin", "FilterResult"} if "filter" in points else set())
                     | ({"MAX_NODE_SCORE", "ScorePlugin"} if "score" in points else set()),
                     key=lambda s: (not s.isupper(), s))
    methods = []
    if "filter" in points:
        methods.append('''
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        """Every node of the batch at once: ``False`` where the pod may not run, with the reason
        kube-scheduler's message will count (``0/5 nodes are available: 2 <reason>``)."""
        excluded = nodes.label(self.args.label_key).equals("excluded")
        return FilterResult.from_mask(~excluded, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)
''')
    if "score" in points:
        methods.append('''
    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        """One integer per node of the batch, in [0, 100] (no NormalizeScore here)."""
        preferred = nodes.label(self.args.label_key).equals(self.args.preferred)
        return np.where(preferred, MAX_NODE_SCORE, 0).astype(np.int64)
''')
    np_import = "import numpy as np\nimport numpy.typing as npt\n\n" if "score" in points else ""
    names = ", ".join(p.capitalize() for p in points)
    return f'''"""{name} ({names}): a pysched plugin.

Args (``pluginConfig[].args``): ``labelKey`` (default ``example.com/tier``), ``preferred`` (default
``fast``).{chr(10) + "Filter keeps pods off nodes labelled ``<labelKey>=excluded``." if "filter" in points else ""}\
{chr(10) + "Score prefers nodes whose ``<labelKey>`` is ``preferred``." if "score" in points else ""}
Replace them with your policy; ``pysched.framework`` is the whole API you need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

{np_import}from pysched.framework import (
{"".join(f"    {i},{chr(10)}" for i in imports)})

NAME = "{name}"
REASON = "node(s) excluded by {name}"


@dataclass
class {name}Args:
    """``pluginConfig[].args`` of {name}; wire names are the camelCase field names."""

    KIND: ClassVar[str] = "{name}Args"

    label_key: str = "example.com/tier"
    preferred: str = "fast"


class {name}({bases}):
    """Typed with its args: ``self.args`` is a ``{name}Args`` (the defaults when the profile gives
    no pluginConfig entry); ``self.handle`` reaches the snapshot and the API objects."""

    name = NAME
{"".join(methods)}'''


def _tests(name: str, module: str, package: str, points: tuple[str, ...]) -> str:
    out = f'''"""Tests of {name} with pysched.testing: the plugin over a real scheduler snapshot."""

from __future__ import annotations

from {package}.{module} import REASON, {name}

from pysched.framework import Code
from pysched.testing import PluginTester, make_node, make_pod

NODES = [make_node("fast-1", labels={{"example.com/tier": "fast"}}),
         make_node("slow-1", labels={{"example.com/tier": "slow"}}),
         make_node("gone-1", labels={{"example.com/tier": "excluded"}})]


def test_it_loads_through_its_entry_point() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="pysched.plugins") if e.name == "{name}"]
    assert ep.load() is {name}
'''
    if "filter" in points:
        out += f'''

def test_filter_keeps_pods_off_excluded_nodes() -> None:
    verdicts = PluginTester({name}, nodes=NODES).filter(make_pod("web"))
    assert verdicts == {{"fast-1": None, "slow-1": None,
                         "gone-1": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (REASON,))}}
'''
    if "score" in points:
        out += f'''

def test_score_prefers_the_preferred_tier() -> None:
    assert PluginTester({name}, nodes=NODES).score(make_pod("web")) == {{"fast-1": 100, "slow-1": 0, "gone-1": 0}}
    slow = PluginTester({name}, {{"preferred": "slow"}}, nodes=NODES).score(make_pod("web"))
    assert slow == {{"fast-1": 0, "slow-1": 100, "gone-1": 0}}
'''
    return out


def _readme(name: str, module: str, package: str, points: tuple[str, ...]) -> str:
    return f'''# {name}

A pysched scheduling plugin ({", ".join(p.capitalize() for p in points)}), made with
`pysched plugin new {name} --points {",".join(points)}`.

```sh
pip install -e ".[test]"     # beside pysched: the entry point makes {name} loadable by name
pytest                       # PluginTester runs it over a real scheduler snapshot
mypy                         # --strict over src/ and tests/ (pyproject.toml's [tool.mypy])
```

Enable it in a profile of your KubeSchedulerConfiguration:

```yaml
profiles:
- schedulerName: pysched
  plugins:
    multiPoint:
      enabled:
      - {{name: {name}, weight: 1}}
  pluginConfig:
  - name: {name}
    args: {{labelKey: example.com/tier, preferred: fast}}
```

pysched's start-up log lists it in the profile's `plugins` with its module
(`out_of_tree={name}:{package}.{module}`). The code is in `src/{package}/{module}.py`.
'''
