"""How the documentation's command blocks are read and their outputs compared (pysched_dev.docpages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pysched_dev.docpages import ConsoleBlock, DocPageError, FileBlock, discover, output_matches, parse_page

PAGE = '''# A page

<!-- doc-test: page venv=own -->
```console
$ mkdir demo
$ cd demo
```

```yaml title="pods.yaml"
kind: Pod
```

```yaml
kind: NotAFile
```

<!-- doc-test: background wait="caches synced" -->
```console
$ pysched --config c.yaml
```

<!-- doc-test: eventually=30 -->
```console
$ kubectl get pods \\
    -o wide
NAME   NODE
web-...   kwok-a1
...

$ echo done
done
```

<!-- doc-test: skip="needs a real cloud" exit=3 -->
```console
$ helm install x
```
'''


def test_a_page_is_read_as_steps_in_order(tmp_path):
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    page = parse_page(path)
    assert page.venv == "own" and page.cluster == "dev-cluster"
    kinds = [type(s).__name__ for s in page.steps]
    assert kinds == ["ConsoleBlock", "FileBlock", "ConsoleBlock", "ConsoleBlock", "ConsoleBlock"]
    first, file, background, listing, skipped = page.steps
    assert isinstance(first, ConsoleBlock) and [c.text for c in first.commands] == ["mkdir demo", "cd demo"]
    assert isinstance(file, FileBlock) and (file.path, file.content) == ("pods.yaml", "kind: Pod\n")
    assert isinstance(background, ConsoleBlock) and background.background and background.wait == "caches synced"
    assert isinstance(listing, ConsoleBlock) and listing.eventually == 30
    assert [c.text for c in listing.commands] == ["kubectl get pods -o wide", "echo done"]
    assert listing.commands[0].expected == ["NAME   NODE", "web-...   kwok-a1", "..."]
    assert listing.commands[1].expected == ["done"]
    assert isinstance(skipped, ConsoleBlock) and skipped.skip == "needs a real cloud" and skipped.exit == 3
    assert page.runs


@pytest.mark.parametrize("text, message", [
    ("```console\nno prompt\n```\n", "output before the first"),
    ("<!-- doc-test: skip -->\n```console\n$ x\n```\n", "skip needs a reason"),
    ("<!-- doc-test: retry=3 -->\n```console\n$ x\n```\n", "unknown key 'retry'"),
    ("<!-- doc-test: eventually=30 -->\n```yaml\na: 1\n```\n", "before a yaml block"),
    ("<!-- doc-test: background -->\n```console\n$ a\n$ b\n```\n", "holds one command"),
    ("```console\n$ a\n```\n<!-- doc-test: page cluster=none -->\n```console\n$ b\n```\n", "before the first block"),
    ("<!-- doc-test: page cluster=kind -->\n```console\n$ a\n```\n", "expected dev-cluster or none"),
])
def test_a_block_that_cannot_run_as_written_is_refused_with_its_line(tmp_path, text, message):
    path = tmp_path / "bad.md"
    path.write_text("# Bad\n\n" + text)
    with pytest.raises(DocPageError, match=message) as err:
        parse_page(path)
    assert str(err.value).startswith("bad.md:")


def test_output_matches_the_page_with_ellipses_and_any_spacing():
    shown = ["NAME     NODE", "priced   small-cheap", "plain    big-dear"]
    assert output_matches(shown, "NAME NODE\npriced small-cheap\nplain  big-dear  \n\n")
    assert not output_matches(shown, "NAME NODE\npriced big-dear\nplain small-cheap\n")
    assert not output_matches(shown, "NAME NODE\npriced small-cheap\n")                 # a line missing
    assert not output_matches(shown, "NAME NODE\npriced small-cheap\nplain big-dear\nextra\n")
    assert output_matches(["a", "...", "z"], "a\nz\n")
    assert output_matches(["a", "...", "z"], "a\nb\nc\nz\n")
    assert not output_matches(["a", "...", "z"], "a\nb\n")
    assert output_matches(["web-...   Running   kwok-..."], "web-7d4f-x2x   Running   kwok-a1\n")
    assert not output_matches(["web-...   Running"], "web-7d4f-x2x   Pending\n")
    assert output_matches(["3 passed in ..."], "3 passed in 0.12s\n")
    assert not output_matches(["(a+b)"], "aab\n")                                       # text, not a regex
    assert output_matches([], "")


def test_a_page_includes_a_section_of_another_file_as_the_site_does(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples" / "README.md").write_text(
        "# Examples\n<!-- --8<-- [start:quota] -->\n```console\n$ kubectl get quota\nNAME\n```\n"
        "<!-- --8<-- [end:quota] -->\n<!-- --8<-- [start:other] -->\n```console\n$ other\n```\n"
        "<!-- --8<-- [end:other] -->\n")
    page = tmp_path / "docs" / "quotas.md"
    page.write_text('# Quotas\n\n<!-- doc-test: page services=kueue -->\n--8<-- "examples/README.md:quota"\n')
    parsed = parse_page(page)
    assert parsed.services == {"kueue"}
    assert [c.text for b in parsed.console_blocks for c in b.commands] == ["kubectl get quota"]
    page.write_text('# Quotas\n--8<-- "examples/README.md:nothing"\n')
    with pytest.raises(DocPageError, match="no section 'nothing'"):
        parse_page(page)


REPO = Path(__file__).resolve().parents[2]


def test_every_live_example_is_run_by_a_documentation_page():
    """Each example directory has its section in examples/README.md, and each section is the "Try it"
    session of a page that ``tests/e2e/test_docs_pages.py`` runs on ``make dev-cluster``."""
    readme = (REPO / "examples" / "README.md").read_text()
    sections = set(re.findall(r"--8<-- \[start:([\w-]+)\]", readme))
    dirs = {p.name for p in (REPO / "examples").iterdir()
            if p.is_dir() and p.name not in ("simulate", "living-cluster", "pysched-plugin-example")}
    assert sections == dirs
    included = {m for page in (REPO / "docs").glob("*.md")
                for m in re.findall(r'^--8<-- "examples/README\.md:([\w-]+)"', page.read_text(), re.MULTILINE)}
    assert included == sections
    run = {b.commands[0].text for page in discover(REPO / "docs") for b in page.console_blocks}
    assert any("examples/quota/" in text for text in run), "the included sessions are read as the pages' own"
