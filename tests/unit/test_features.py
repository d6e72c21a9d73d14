"""Feature gates and the release window: kube's defaults per release, kube's flag rules and messages,
and which release pysched behaves as against a given API server."""

from __future__ import annotations

import pytest

from pysched.apis.features import (
    NEWEST,
    OLDEST,
    FeatureGateError,
    ReleaseError,
    choose,
    defaults,
    parse_flag,
    parse_version,
    resolve,
)
from pysched.apis.features.gates import spec_at
from pysched.apis.features.kube_gates import GATES


@pytest.mark.parametrize("gate,on_at", [
    # (gate, the releases of the window where kube-scheduler has it on by default): kube_features.go at v1.37.2
    ("DynamicResourceAllocation", {(1, 35), (1, 36), (1, 37)}),
    ("DRAPartitionableDevices", {(1, 36), (1, 37)}),
    ("DRAConsumableCapacity", {(1, 36), (1, 37)}),
    ("DRADeviceTaints", {(1, 36), (1, 37)}),
    ("DRADeviceTaintRules", {(1, 37)}),
    ("DRADeviceBindingConditions", {(1, 36), (1, 37)}),
    ("DRAExtendedResource", {(1, 36), (1, 37)}),
    ("NodeDeclaredFeatures", {(1, 36), (1, 37)}),
    ("DRAFractionalCapacityRange", set()),   # on at 1.37 only with --min-compatibility-version 1.37
    ("GenericWorkload", set()),
    ("OpportunisticBatching", {(1, 35), (1, 36), (1, 37)}),
    ("PyschedExistingAntiAffinityDeleteHint", set()),
])
def test_each_release_has_kubes_defaults(gate, on_at):
    assert {r for r in ((1, 35), (1, 36), (1, 37)) if gate in defaults(r)} == on_at


def test_min_compatibility_version_picks_the_later_spec():
    history = GATES["DRAFractionalCapacityRange"]
    assert spec_at(history, (1, 37))[1] is False
    assert spec_at(history, (1, 37), min_compat=(1, 37))[1] is True
    assert spec_at(history, (1, 36))[2] == "PreAlpha"


def test_overrides_apply_and_are_reported():
    gates = resolve((1, 37), parse_flag("DRAConsumableCapacity=false, PyschedExistingAntiAffinityDeleteHint=True"))
    assert "DRAConsumableCapacity" not in gates and "PyschedExistingAntiAffinityDeleteHint" in gates
    assert "DRAPartitionableDevices" in gates
    assert gates.describe() == "DRAConsumableCapacity=false,PyschedExistingAntiAffinityDeleteHint=true"


@pytest.mark.parametrize("flag,release,message", [
    ("Nope=true", (1, 37), "unrecognized feature gate: Nope"),
    ("DRAAdminAccess", (1, 37), "missing bool value for DRAAdminAccess"),
    ("DRAAdminAccess=yes", (1, 37),
     'invalid value of DRAAdminAccess=yes, err: strconv.ParseBool: parsing "yes": invalid syntax'),
    ("NodeDeclaredFeatures=false", (1, 37),
     "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"),
    ("DynamicResourceAllocation=false", (1, 35),
     "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
    ("DRADerivedAttributes=true", (1, 36), "cannot set feature gate DRADerivedAttributes to true, feature is "
                                           "PreAlpha at emulated version 1.36, min compatibility version 1.35"),
    ("DRAConsumableCapacity=false,DRAFractionalCapacityRange=true", (1, 37),
     "DRAFractionalCapacityRange is enabled, but depends on features that are disabled: [DRAConsumableCapacity]"),
])
def test_refused_as_kube_refuses(flag, release, message):
    with pytest.raises(FeatureGateError) as err:
        resolve(release, parse_flag(flag))
    assert str(err.value) == message


def test_all_alpha_turns_on_every_alpha_gate_not_named():
    # GenericWorkload is beta (off): alpha gates that need it fail unless it is named too, as in kube.
    with pytest.raises(FeatureGateError, match=r"WorkloadWithJob is enabled, but depends on .*\[GenericWorkload\]"):
        resolve((1, 37), parse_flag("AllAlpha=true"))
    gates = resolve((1, 37), parse_flag("AllAlpha=true,GenericWorkload=true,DRADerivedAttributes=false"))
    assert "DRANodeAllocatableResources" in gates and "DRADerivedAttributes" not in gates
    assert "DRADeviceTaints" in gates   # beta, default on: untouched


@pytest.mark.parametrize("text,version", [("v1.37.2", (1, 37)), ("1.36", (1, 36)), ("v1.35.0-rc.1+abc", (1, 35)),
                                          ("v1.38.0-beta.0.12+0123abcd", (1, 38))])
def test_versions_parse(text, version):
    assert parse_version(text) == version


def test_the_servers_release_is_followed():
    r = choose("v1.36.2", None)
    assert r.version == (1, 36) and not r.emulated and r.warning is None
    assert choose(None, None).version == NEWEST


@pytest.mark.parametrize("server,nearest", [("v1.38.0", "1.37"), ("v1.34.7", "1.35")])
def test_a_server_outside_the_window_is_refused_with_the_flag_to_pass(server, nearest):
    with pytest.raises(ReleaseError) as err:
        choose(server, None)
    msg = str(err.value)
    assert msg.startswith(f"the API server is Kubernetes {server}; pysched follows kube-scheduler 1.35 to 1.37")
    assert f"--emulated-version={nearest}" in msg


def test_emulated_version_runs_outside_the_window_with_a_warning():
    r = choose("v1.38.1", "1.37")
    assert r.version == (1, 37) and r.emulated
    assert r.warning and "outside the releases pysched follows (1.35 to 1.37)" in r.warning
    assert choose("v1.37.2", "kube=1.36").version == (1, 36) and choose("v1.37.2", "1.36").warning is None
    assert "newer than the API server" in (choose("v1.35.4", "1.37").warning or "")
    assert "more than one release older" in (choose("v1.37.2", "1.35").warning or "")


@pytest.mark.parametrize("flag", ["1.34", "1.38", "wardle=1.2", "one"])
def test_emulated_version_outside_the_window_is_refused(flag):
    with pytest.raises(ReleaseError, match="--emulated-version"):
        choose("v1.37.2", flag)


def test_the_window_is_the_documented_one():
    assert (OLDEST, NEWEST) == ((1, 35), (1, 37))


def test_a_gate_removed_later_is_known_only_to_the_releases_that_had_it():
    """GangScheduling was 1.35/1.36's gate (1.37 moved it under GenericWorkload): kube-scheduler 1.35
    takes it, 1.37 does not know it."""
    assert "GangScheduling" not in resolve((1, 35), parse_flag("GangScheduling=false"))
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: GangScheduling"):
        resolve((1, 37), parse_flag("GangScheduling=true"))
