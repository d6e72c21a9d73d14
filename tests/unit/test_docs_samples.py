"""Reading a sample output out of a page and comparing it line by line, for samples that are not a
session a reader types: ``make demo``'s story in getting-started.md (``test_living_cluster`` masks
what changes from run to run). Every ``console`` session runs in ``tests/e2e/test_docs_pages.py``.

A sample may leave lines out with a line ``...`` (any number of lines) and shorten a line with
``  ...  `` inside it; every other line must appear, in order, exactly as printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


FENCED = re.compile(r"^```[a-z]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def code_block_after(page: str, marker: str) -> list[str]:
    """The lines of the first fenced block that opens after ``marker`` (which may sit in the block
    before it: the command whose output the block shows)."""
    text = (DOCS / page).read_text()
    start = text.index(marker)
    block = next(m for m in FENCED.finditer(text) if m.start() > start)
    lines = block.group(1).splitlines()
    assert len(lines) > 3, f"{page}: the sample after {marker!r} is empty"
    return lines


def assert_sample(sample: list[str], output: str) -> None:
    lines = output.splitlines()
    at = 0
    for want in sample:
        if not want.strip() or want.strip() == "...":
            continue
        parts = [re.escape(p) for p in re.split(r"\s{2,}\.\.\.\s{2,}", want.rstrip())]
        pattern = re.compile(".*".join(parts))
        for i in range(at, len(lines)):
            if pattern.fullmatch(lines[i].rstrip()):
                at = i + 1
                break
        else:
            pytest.fail(f"sample line not printed (in this order):\n{want}\n--- output:\n{output}")


def test_assert_sample_catches_drift():
    assert_sample(["a", "...", "c  ...  e"], "a\nb\nc d e\n")
    with pytest.raises(pytest.fail.Exception):
        assert_sample(["a", "x"], "a\nb\n")
    with pytest.raises(pytest.fail.Exception):
        assert_sample(["b", "a"], "a\nb\n")       # order matters
