"""Which CEL engine evaluates DRA selectors, and how loudly a missing ``pysched-cel`` is reported.

The helper is looked for where ``PYSCHED_CEL_HELPER`` names it, then in the package (``pysched/_bin``,
where the Linux wheels carry it), then on ``PATH``. Without it the built-in subset is used, and since
that breaks selectors kube-scheduler accepts, the choice is made when a profile enabling
DynamicResources is built (at start), logged at ERROR level with the fix, and exported as
``pysched_dra_cel_engine``. These tests need no helper: they plant fake ones.
"""

from __future__ import annotations

import logging
import stat

import pytest

from pysched.apis.config import ConfigError, parse
from pysched.backend.cache.cache import SchedulerCache
from pysched.metrics import METRICS
from pysched.plugins.dynamic_resources import cel
from pysched.profile import build_frameworks, default_registry

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "pysched"}]}


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No helper anywhere (no override, an empty PATH, no bundled binary) and a fresh choice."""
    monkeypatch.delenv(cel.HELPER_ENV, raising=False)
    monkeypatch.delenv(cel.ENGINE_ENV, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(cel, "BUNDLED", tmp_path / "no-bin" / cel.HELPER_NAME)
    cel.engine.cache_clear()
    cel._announced.clear()
    yield tmp_path
    cel.engine.cache_clear()
    cel._announced.clear()


def fake_helper(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_bundled_helper_comes_after_the_override_and_before_path(fresh, monkeypatch):
    bundled = fake_helper(fresh / "pkg" / "_bin" / "pysched-cel")
    on_path = fake_helper(fresh / "empty-path" / "pysched-cel")
    assert cel.find_helper() == (str(on_path), "PATH")
    monkeypatch.setattr(cel, "BUNDLED", bundled)
    assert cel.find_helper() == (str(bundled), "bundled")
    assert cel.engine().name == "pysched-cel" and cel.engine().path == str(bundled)
    monkeypatch.setenv(cel.HELPER_ENV, "/opt/pysched-cel")
    assert cel.find_helper() == ("/opt/pysched-cel", cel.HELPER_ENV)


def test_a_bundled_file_that_is_not_executable_is_not_taken(fresh, monkeypatch):
    bundled = fresh / "pkg" / "_bin" / "pysched-cel"
    bundled.parent.mkdir(parents=True)
    bundled.write_text("")
    monkeypatch.setattr(cel, "BUNDLED", bundled)
    assert cel.find_helper() is None


def test_the_bundled_path_is_the_package_bin_directory():
    """Where the release puts the binary in the platform wheels (pysched_dev.release.wheels.HELPER_IN_WHEEL)."""
    import pysched
    from pysched_dev.release.wheels import HELPER_IN_WHEEL

    assert cel.BUNDLED.parent.parent.resolve() == type(cel.BUNDLED)(pysched.__file__).parent.resolve()
    assert cel.BUNDLED.relative_to(cel.BUNDLED.parents[2]).as_posix() == HELPER_IN_WHEEL


def test_the_fallback_is_an_error_naming_the_fix_once(fresh, caplog):
    with caplog.at_level(logging.INFO, logger="pysched.plugins.dra.cel"):
        assert cel.engine().name == "builtin"
        assert cel.engine(True).name == "builtin"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, caplog.records          # once per process, whatever the gates
    text = errors[0].getMessage()
    assert "pysched-cel not found" in text and "wheel" in text and "PYSCHED_CEL_HELPER" in text


def test_choosing_the_subset_knowingly_is_no_error(fresh, monkeypatch, caplog):
    monkeypatch.setenv(cel.ENGINE_ENV, "builtin")
    with caplog.at_level(logging.INFO, logger="pysched.plugins.dra.cel"):
        assert cel.engine().name == "builtin"
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_the_choice_is_made_and_exported_when_the_profile_is_built(fresh, caplog):
    """At start, not at the first selector: building a profile with DynamicResources (the default
    profile has it) logs the fallback and sets the metric."""
    with caplog.at_level(logging.INFO, logger="pysched.plugins.dra.cel"):
        build_frameworks(parse(dict(HEAD)), default_registry(), cache=SchedulerCache(), client=None, recorder=None)
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    assert METRICS.dra_cel_engine.labels("builtin")._value.get() == 1
    assert METRICS.dra_cel_engine.labels("pysched-cel")._value.get() == 0


def test_the_exported_engine_is_the_helper_when_found(fresh, monkeypatch):
    monkeypatch.setattr(cel, "BUNDLED", fake_helper(fresh / "pkg" / "_bin" / "pysched-cel"))
    build_frameworks(parse(dict(HEAD)), default_registry(), cache=SchedulerCache(), client=None, recorder=None)
    assert METRICS.dra_cel_engine.labels("pysched-cel")._value.get() == 1
    assert METRICS.dra_cel_engine.labels("builtin")._value.get() == 0


def test_requiring_the_helper_refuses_the_profile_at_start(fresh, monkeypatch):
    monkeypatch.setenv(cel.ENGINE_ENV, "pysched-cel")
    with pytest.raises(ConfigError, match="DynamicResources: PYSCHED_CEL_ENGINE=pysched-cel but the helper"):
        build_frameworks(parse(dict(HEAD)), default_registry(), cache=SchedulerCache(), client=None, recorder=None)
