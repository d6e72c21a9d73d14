"""DRA device selectors: the ``device`` variable and Kubernetes' CEL functions, hand-checked."""

from __future__ import annotations

import pytest

from pysched.plugins.helper.dra.cel import CelDevice, SelectorError, compile_selector, device_variable

GPU = {
    "name": "gpu-0",
    "attributes": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3"},
                   "numa.example.com/node": {"int": 1}, "mig": {"bool": False}},
    "capacity": {"memory": {"value": "40Gi"}},
}


def matches(expression: str, device: dict = GPU, driver: str = "gpu.example.com") -> bool:
    return CelDevice(driver, device).matches(compile_selector(expression))


def test_bare_names_belong_to_the_driver_domain_and_qualified_ones_to_theirs():
    var = device_variable("gpu.example.com", GPU)
    assert var["attributes"] == {"gpu.example.com": {"model": "a100", "driverVersion": {"__semver__": "1.2.3"},
                                                     "mig": False},
                                 "numa.example.com": {"node": 1}}
    assert var["capacity"]["gpu.example.com"]["memory"] == {"__quantity__": f"{40 * 2**30}/1"}
    assert var["driver"] == "gpu.example.com"


@pytest.mark.parametrize("expression, want", [
    ('device.driver == "gpu.example.com"', True),
    ('device.attributes["gpu.example.com"].model == "a100"', True),
    ('device.attributes["gpu.example.com"].model == "h100"', False),
    ('device.attributes["numa.example.com"].node == 1', True),
    ('device.attributes["gpu.example.com"].mig', False),
    ('"numa.example.com" in device.attributes', True),
    ('has(device.attributes["gpu.example.com"].nosuch)', False),
    ('"x" in device.attributes["other.example.com"]', False),            # upstream: an empty map
    ('device.capacity["other.example.com"].size() == 0', True),
    # quantities compare by value, whatever the suffix
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40960Mi")) == 0', True),
    ('device.capacity["gpu.example.com"].memory == quantity("40960Mi")', True),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))', True),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))', False),
    ('device.capacity["gpu.example.com"].memory.sub(quantity("8Gi")) == quantity("32Gi")', True),
    ('quantity("1.5").isInteger()', False),
    ('quantity("2k").asInteger() == 2000', True),
    ('quantity("-1m").sign() == -1', True),
    # versions compare as semver: 1.2.3 > 1.2.3-rc.1 > 1.2.0, 1.10.0 > 1.9.0
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.10.0"))', False),
    ('semver("1.10.0").compareTo(semver("1.9.0")) == 1', True),
    ('semver("1.0.0-alpha.10").isGreaterThan(semver("1.0.0-alpha.9"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.minor() == 2', True),
])
def test_selectors(expression, want):
    assert matches(expression) is want


@pytest.mark.parametrize("expression, reason", [
    ('device.attributes["gpu.example.com"].nosuch == 1', "no such key: nosuch"),
    ('device.attributes["other.example.com"].x == 1', "no such key: x"),   # an unknown domain is empty
    ('device.driver', "must return a bool"),
    ('quantity("12 Gi") == quantity("1")', "invalid quantity"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
])
def test_runtime_errors_name_the_reason(expression, reason):
    with pytest.raises(SelectorError, match=reason):
        matches(expression)


def test_a_syntax_error_is_reported_at_compile_time():
    with pytest.raises(SelectorError, match="compilation failed"):
        compile_selector('device.driver ==')


def test_each_result_is_remembered_per_device_errors_included():
    dev = CelDevice("gpu.example.com", GPU)
    ok, bad = compile_selector('device.attributes["gpu.example.com"].model == "a100"'), \
        compile_selector('device.attributes["gpu.example.com"].nosuch == 1')
    calls = []
    program = ok.program

    class Counting:
        def execute(self, ctx):
            calls.append(1)
            return program.execute(ctx)

    ok.program = Counting()
    try:
        assert dev.matches(ok) is True and dev.matches(ok) is True
    finally:
        ok.program = program
    assert len(calls) == 1
    for _ in range(2):
        with pytest.raises(SelectorError, match="no such key"):
            dev.matches(bad)


def test_the_cel_library_loads_without_its_command_line_tool():
    import subprocess
    import sys
    code = ("import sys; from pysched.plugins.helper.dra.cel import compile_selector, CelDevice; "
            "assert 'cel' not in sys.modules; "
            "assert CelDevice('d', {}).matches(compile_selector('device.driver == \"d\"')); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'prompt_toolkit')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
