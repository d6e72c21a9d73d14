"""Quantities parse to the integers kube-scheduler uses (Value/MilliValue round up)."""

import pytest

from pysched.apis.core.quantity import MAX_AMOUNT, QuantityError, format_resource, milli_value, resource_value, value


@pytest.mark.parametrize("text,expected", [
    ("100m", 100), ("1", 1000), ("1.5", 1500), ("0.1", 100), ("2", 2000), ("1e3", 1000000),
    ("1n", 1), ("0", 0), ("250m", 250), ("1001u", 2), (".5", 500),
])
def test_milli_value(text, expected):
    assert milli_value(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("500Mi", 500 * 2**20), ("32Gi", 32 * 2**30), ("1Ki", 1024), ("1k", 1000), ("1M", 10**6),
    ("110", 110), ("1.5Gi", 3 * 2**29), ("100m", 1), ("1e3", 1000), ("2P", 2 * 10**15), ("0.5", 1),
])
def test_value_rounds_up(text, expected):
    assert value(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", "Mi", "--1", "1Qi"])
def test_invalid(bad):
    with pytest.raises(QuantityError):
        value(bad)


def test_resource_value_dispatches_cpu():
    assert resource_value("cpu", "2") == 2000
    assert resource_value("memory", "2") == 2
    assert resource_value("nvidia.com/gpu", "2") == 2


def test_numbers_accepted():
    assert value(3) == 3
    assert milli_value(0.25) == 250


def test_format():
    assert format_resource("cpu", 1500) == "1500m"
    assert format_resource("cpu", 2000) == "2"
    assert format_resource("memory", 2 * 2**30) == "2Gi"


@pytest.mark.parametrize("fn,text,expected", [
    (milli_value, "1E", MAX_AMOUNT),          # 10^21 millicores
    (milli_value, "9223372036854775807", MAX_AMOUNT),
    (value, "10E", MAX_AMOUNT),
    (value, "2E", MAX_AMOUNT),                 # Value() would give 2e18: beyond the bound we saturate
    (value, "8Ei", MAX_AMOUNT),
    (value, "-10E", -MAX_AMOUNT),
    (milli_value, "9223372036854775m", 9223372036854775),   # at the bound: exact
    (value, "9223372036854776", MAX_AMOUNT),
])
def test_huge_amounts_saturate(fn, text, expected):
    """Amounts saturate at apimachinery's MaxMilliValue instead of overflowing the node table."""
    assert MAX_AMOUNT == 9223372036854775
    assert fn(text) == expected
