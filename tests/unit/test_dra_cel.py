"""DRA device selectors: both engines, one table.

``pysched-cel`` runs kube-scheduler's own CEL code (k8s.io/dynamic-resource-allocation/cel 1.35), so
its column is upstream's behaviour - the e2e differential (``tests/e2e/test_dra_cel_differential.py``)
checks the same expressions against kube-scheduler itself. The built-in subset must agree wherever
it can read an expression and fail to compile where it cannot (never a different answer).
"""

from __future__ import annotations

import os
import shutil

import pytest

from pysched.plugins.dynamic_resources import cel
from pysched.plugins.dynamic_resources.cel import CelDevice, Selector, SelectorError, device_variable, prefetch
from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine
from pysched.plugins.dynamic_resources.cel_go import GoEngine

GPU = {
    "name": "gpu-0",
    "attributes": {"model": {"string": "A100"}, "driverVersion": {"version": "1.2.3"},
                   "numa.example.com/node": {"int": 1}, "mig": {"bool": False}, "tags": {"string": "a,b,c"}},
    "capacity": {"memory": {"value": "40Gi"}},
}
D = 'device.attributes["gpu.example.com"]'
C = 'device.capacity["gpu.example.com"]'
SUBSET = "subset"   # the built-in engine cannot read it: a compile error there

# (expression, upstream's answer, True if the built-in subset reads it too)
CASES = [
    ('device.driver == "gpu.example.com"', True, True),
    (f'{D}.model == "A100"', True, True),
    (f'{D}.model == "H100"', False, True),
    ('device.attributes["numa.example.com"].node == 1', True, True),
    (f'{D}.mig', False, True),
    ('"numa.example.com" in device.attributes', True, True),
    (f'has({D}.nosuch)', False, True),
    ('"x" in device.attributes["other.example.com"]', False, True),          # an unknown domain is empty
    ('device.capacity["other.example.com"].size() == 0', True, True),
    # quantities compare by value, whatever the suffix
    (f'{C}.memory.compareTo(quantity("40960Mi")) == 0', True, True),
    (f'{C}.memory.isGreaterThan(quantity("32Gi"))', True, True),
    (f'{C}.memory.isLessThan(quantity("32Gi"))', False, True),
    (f'{C}.memory.sub(quantity("8Gi")).compareTo(quantity("32Gi")) == 0', True, True),
    ('quantity("1.5").isInteger()', False, True),
    ('quantity("2k").asInteger() == 2000', True, True),
    # versions compare as semver: 1.2.3 > 1.2.3-rc.1 > 1.2.0, 1.10.0 > 1.9.0
    (f'{D}.driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', True, True),
    (f'{D}.driverVersion.isGreaterThan(semver("1.10.0"))', False, True),
    ('semver("1.10.0").compareTo(semver("1.9.0")) == 1', True, True),
    (f'{D}.driverVersion.minor() == 2', True, True),
    # optional types
    (f'{D}.?driverVersion.hasValue()', True, False),
    (f'{D}[?"nosuch"].orValue("a100") == "a100"', True, False),
    (f'{D}.?nosuch.orValue("x") == "x"', True, False),
    # the strings extension
    (f'{D}.model.lowerAscii() == "a100"', True, False),
    (f'{D}.tags.split(",").size() == 3', True, False),
    (f'{D}.model.indexOf("1") == 1', True, False),
    ('"a{b}c".size() == 5', True, True),
    # Kubernetes' lists, sets and regex libraries, comprehensions, cel.bind
    ('[3, 1, 2].sort() == [1, 2, 3]', True, False),
    ('[1, 2, 3].isSorted() && [1, 2].sum() == 3', True, False),
    ('sets.contains([1, 2, 3], [1, 3])', True, False),
    (f'{D}.model.find("[0-9]+") == "100"', True, False),
    (f'{D}.model.matches("^A[0-9]+$")', True, True),
    ('[1, 2, 3].exists(x, x == 2)', True, True),
    (f'cel.bind(g, {D}, g.model == "A100" && !g.mig)', True, False),
    # IP and CIDR
    ('ip("10.0.0.1").family() == 4 && cidr("10.0.0.0/8").containsIP(ip("10.0.0.1"))', True, False),
]
ERRORS = [
    # (expression, text upstream reports, at compile or at run time)
    (f'{D}.nosuch == 1', "no such key: nosuch", "run"),
    ('device.attributes["other.example.com"].x == 1', "no such key: x", "run"),
    ('device.driver', "must evaluate to bool or the unknown type, not string", "compile"),
    ('device.driver ==', "compilation failed: ERROR: <input>:1:17: Syntax error", "compile"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer", "run"),
    ('quantity("12 Gi") == quantity("1")', "quantities must match the regular expression", "run"),
    ('quantity("-1m").sign() == -1', "found no matching overload for 'sign'", "compile"),
    ('[1, 2, 3].map(x, [1, 2, 3].map(y, [1, 2, 3].map(z, x * y * z))).size() > 0 && '
     + " && ".join(["[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, "
                    "[1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, a + b + c + d > 0))))"] * 30),
     "operation cancelled: actual cost limit exceeded", "run"),
]


def helper_path() -> str | None:
    return os.environ.get(cel.HELPER_ENV) or shutil.which(cel.HELPER_NAME)


@pytest.fixture(scope="module")
def go_engine():
    path = helper_path()
    if path is None:
        if os.environ.get("PYSCHED_REQUIRE_CEL_HELPER"):
            pytest.fail("pysched-cel is required here (make test builds it: hack/pysched-cel.sh)")
        pytest.skip("pysched-cel not built (hack/pysched-cel.sh)")
    eng = GoEngine(path)
    yield eng
    eng.close()


def evaluate(eng, expression: str, device: dict = GPU, driver: str = "gpu.example.com") -> bool:
    return CelDevice(driver, device).matches(Selector(expression, eng))


@pytest.mark.parametrize("expression, want, in_subset", CASES, ids=[c[0][:60] for c in CASES])
def test_upstream_answers(go_engine, expression, want, in_subset):
    assert evaluate(go_engine, expression) is want


@pytest.mark.parametrize("expression, want, in_subset", CASES, ids=[c[0][:60] for c in CASES])
def test_the_builtin_subset_agrees_or_refuses(expression, want, in_subset):
    if in_subset:
        assert evaluate(BuiltinEngine(), expression) is want
    else:
        with pytest.raises(SelectorError):
            evaluate(BuiltinEngine(), expression)


@pytest.mark.parametrize("expression, text, when", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_upstream_error_texts(go_engine, expression, text, when):
    if when == "compile":
        with pytest.raises(SelectorError) as exc:
            Selector(expression, go_engine)
    else:
        sel = Selector(expression, go_engine)
        with pytest.raises(SelectorError) as exc:
            CelDevice("gpu.example.com", GPU).matches(sel)
    assert text in str(exc.value)


def test_bare_names_belong_to_the_driver_domain_and_qualified_ones_to_theirs():
    var = device_variable("gpu.example.com", GPU)
    assert var["attributes"]["gpu.example.com"]["model"] == "A100"
    assert var["attributes"]["numa.example.com"] == {"node": 1}
    assert var["capacity"]["gpu.example.com"]["memory"] == {"__quantity__": f"{40 * 2**30}/1"}


class Counting:
    """An engine that counts how often it is asked, and for how many devices."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[int] = []

    def compile(self, expression):
        return self.inner.compile(expression)

    def evaluate(self, program, expression, devices):
        self.calls.append(len(devices))
        return self.inner.evaluate(program, expression, devices)


@pytest.mark.parametrize("which", ["pysched-cel", "builtin"])
def test_each_result_is_remembered_and_a_batch_is_one_request(which, request):
    inner = request.getfixturevalue("go_engine") if which == "pysched-cel" else BuiltinEngine()
    eng = Counting(inner)
    ok, bad = Selector(f'{D}.model == "A100"', eng), Selector(f'{D}.nosuch == 1', eng)
    devices = [CelDevice("gpu.example.com", GPU) for _ in range(5)]
    prefetch(ok, devices)
    prefetch(ok, devices)
    assert eng.calls == [5]
    assert all(d.matches(ok) for d in devices) and eng.calls == [5]
    for _ in range(2):
        with pytest.raises(SelectorError, match="no such key"):
            devices[0].matches(bad)
    assert eng.calls == [5, 1]


def test_the_helper_comes_back_after_it_dies(go_engine):
    sel = Selector('device.driver == "d"', go_engine)
    assert CelDevice("d", {}).matches(sel)
    go_engine._proc.kill()   # noqa: SLF001 - a crash between two requests
    go_engine._proc.wait()   # noqa: SLF001
    assert CelDevice("d", {}).matches(Selector('device.driver != "e"', go_engine))
    assert go_engine.version()["kubernetes"] == "v0.37.2"


def test_a_missing_helper_is_a_selector_error_not_a_crash(tmp_path):
    eng = GoEngine(str(tmp_path / "no-such-binary"))
    with pytest.raises(SelectorError, match="the CEL helper pysched-cel failed"):
        Selector('device.driver == "d"', eng)


def test_the_engine_is_chosen_from_the_environment(monkeypatch, tmp_path):
    cel.engine.cache_clear()
    try:
        monkeypatch.setenv(cel.ENGINE_ENV, "builtin")
        assert cel.engine().name == "builtin"
        cel.engine.cache_clear()
        monkeypatch.setenv(cel.ENGINE_ENV, "pysched-cel")
        monkeypatch.delenv(cel.HELPER_ENV, raising=False)
        monkeypatch.setenv("PATH", str(tmp_path))
        with pytest.raises(SelectorError, match="not on PATH"):
            cel.engine()
        cel.engine.cache_clear()
        monkeypatch.setenv(cel.HELPER_ENV, "/opt/pysched-cel")
        assert cel.engine().name == "pysched-cel" and cel.engine().path == "/opt/pysched-cel"
        cel.engine.cache_clear()
        monkeypatch.setenv(cel.ENGINE_ENV, "fast")
        with pytest.raises(SelectorError, match="expected pysched-cel, builtin or auto"):
            cel.engine()
    finally:
        cel.engine.cache_clear()


def test_the_cel_library_loads_without_its_command_line_tool():
    import subprocess
    import sys
    code = ("import sys; from pysched.plugins.dynamic_resources.cel import Selector, CelDevice; "
            "from pysched.plugins.dynamic_resources.cel_builtin import BuiltinEngine; "
            "assert 'cel' not in sys.modules; "
            "assert CelDevice('d', {}).matches(Selector('device.driver == \"d\"', BuiltinEngine())); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'prompt_toolkit')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
