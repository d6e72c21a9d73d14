"""Go's Duration.String(), as kube-scheduler prints a wait in a message."""

import pytest

from pysched.apis.config import format_duration
from pysched.util.goduration import go_duration


@pytest.mark.parametrize("seconds,text", [
    (0, "0s"), (3, "3s"), (60, "1m0s"), (90, "1m30s"), (1.5, "1.5s"), (0.5, "500ms"), (0.0015, "1.5ms"),
    (0.000002, "2µs"), (3600, "1h0m0s"), (3700, "1h1m40s"), (61.25, "1m1.25s"), (-2, "-2s"), (1e-9, "1ns"),
])
def test_durations_print_as_go_prints_them(seconds, text):
    assert go_duration(seconds) == text


def test_config_encoding_uses_the_same_format():
    assert format_duration(15) == "15s" and format_duration(137) == "2m17s" and format_duration(3700) == "1h1m40s"
