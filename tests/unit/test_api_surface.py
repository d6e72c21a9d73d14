"""The public plugin API (``pysched.framework``, ``pysched.framework.api``, ``pysched.testing``) changes
only as the stability policy in docs/api.md allows.

The surface - every exported name, what it is, the signature of every public function and method -
is recorded in ``api_surface.txt`` beside this file for ``PLUGIN_API_VERSION``. A change to it
fails here until the record is updated with ``python -m tests.unit.test_api_surface --update``
together with what the policy asks: an addition bumps the minor version; a removal or an
incompatible change needs the name deprecated (working, with a warning naming its replacement) for
at least one minor release first, then a major version.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

RECORD = Path(__file__).with_name("api_surface.txt")


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def surface() -> list[str]:
    import pysched.framework as framework
    import pysched.framework.api as api
    import pysched.testing as testing

    lines = [f"PLUGIN_API_VERSION {framework.PLUGIN_API_VERSION}"]
    for module in (framework, api, testing):
        for name in sorted(module.__all__):
            obj = getattr(module, name)
            where = f"{module.__name__}.{name}"
            if inspect.isclass(obj):
                lines.append(f"class {where}")
                for attr, value in sorted(vars(obj).items()):
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
                        func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                        lines.append(f"  def {attr}{_signature(func)}")
                    elif isinstance(value, property):
                        lines.append(f"  property {attr}")
            elif callable(obj):
                lines.append(f"def {where}{_signature(obj)}")
            else:
                lines.append(f"const {where}: {type(obj).__name__}")
    return lines


def test_the_public_surface_is_the_recorded_one():
    recorded = RECORD.read_text().splitlines()
    now = surface()
    added = sorted(set(now) - set(recorded))
    removed = sorted(set(recorded) - set(now))
    assert not added and not removed, (
        "the plugin API changed; follow docs/api.md's stability policy, then update the record "
        "(python -m tests.unit.test_api_surface --update).\n"
        + "".join(f"+ {line}\n" for line in added) + "".join(f"- {line}\n" for line in removed))


def test_the_check_sees_a_change(monkeypatch):
    import pysched.framework as framework

    monkeypatch.setattr(framework.ScorePlugin, "score_v2", lambda self, x: x, raising=False)
    assert "  def score_v2(self, x)" in surface()


if __name__ == "__main__" and "--update" in sys.argv:
    RECORD.write_text("\n".join(surface()) + "\n")
    print(f"wrote {RECORD}")
