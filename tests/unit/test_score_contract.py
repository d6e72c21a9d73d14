"""A Score plugin returns integers in [0, 100]. What a plugin author gets wrong is refused with a
message that says what to do, never silently truncated: ``np.full(n, 0.5)`` used to score every
node 0."""

from __future__ import annotations

import numpy as np
import pytest

from pysched.framework import ScorePlugin
from pysched.framework.status import FrameworkError
from pysched.runtime.framework import integral_scores
from pysched.testing import PluginTester, make_node, make_pod


class Halves(ScorePlugin):
    name = "Halves"

    def score(self, state, pod, nodes):
        return np.full(len(nodes), 0.5)


class Wholes(ScorePlugin):
    name = "Wholes"

    def score(self, state, pod, nodes):
        return np.full(len(nodes), 70.0)


class TooHigh(ScorePlugin):
    name = "TooHigh"

    def score(self, state, pod, nodes):
        return np.full(len(nodes), 250, dtype=np.int64)


def test_integers_pass_without_a_copy():
    arr = np.array([1, 2, 3], dtype=np.int64)
    assert integral_scores(arr, "x") is arr
    assert integral_scores([0, 100], "x").tolist() == [0, 100]


def test_a_fraction_is_refused_naming_the_plugin_and_the_fix():
    with pytest.raises(FrameworkError) as err:
        integral_scores(np.array([1.0, 0.5]), "Halves")
    msg = err.value.status.message()
    assert "plugin 'Halves' returned a score that is not an integer (0.5)" in msg and "np.rint" in msg
    with pytest.raises(FrameworkError, match="not an integer"):
        integral_scores(np.array([np.nan]), "Halves")
    with pytest.raises(FrameworkError, match="returned scores of type <U1"):
        integral_scores(np.array(["a"]), "Strings")


def test_plugin_tester_applies_the_same_contract():
    nodes = [make_node("n1"), make_node("n2")]
    with pytest.raises(FrameworkError, match="not an integer"):
        PluginTester(Halves, nodes=nodes).score(make_pod("p"))
    assert PluginTester(Wholes, nodes=nodes).score(make_pod("p")) == {"n1": 70, "n2": 70}
    with pytest.raises(AssertionError, match=r"score 250 is outside \[0, 100\] after normalizing"):
        PluginTester(TooHigh, nodes=nodes).score(make_pod("p"))
