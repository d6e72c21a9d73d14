"""``pysched_dev.testkit.poll_until``: the one waiter behind the tests' ``wait_for`` and the demo's waits."""

from __future__ import annotations

import pytest

from pysched_dev.testkit import node_ready, poll_until


async def test_returns_the_first_truthy_answer():
    answers = iter([None, 0, {"found": 1}, {"found": 2}])

    async def check():
        return next(answers)

    assert await poll_until(check, 10, interval=0, fail=AssertionError) == {"found": 1}


async def test_fails_with_the_last_answer_it_saw():
    async def check():
        return []

    with pytest.raises(RuntimeError, match=r"last=\[\]"):
        await poll_until(check, 0.05, interval=0.01, fail=lambda last: RuntimeError(f"last={last!r}"))


def test_a_node_is_ready_only_on_a_true_ready_condition():
    assert node_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not node_ready({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    assert not node_ready({})
