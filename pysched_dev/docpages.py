"""The documentation's command blocks, read as a test runs them: parsing and output matching.

A page shows a session in fenced ``console`` blocks. Each line starting with ``$ `` is a command
(a line ending in `` \\`` continues on the next); the lines after it, up to the next command, are
what it prints. In that output a line that is just ``...`` stands for any number of lines, and
``...`` inside a line for any text (a pod's random suffix, a port); runs of spaces compare equal.
A command shown with no output is run and must succeed, its output not compared.

Files a page asks the reader to write are fenced blocks with a title (```` ```yaml
title="pods.yaml" ````): the runner writes them, in page order, relative to the directory the
session is in at that point.

An HTML comment right before a block (invisible on the site) steers the runner:

* ``<!-- doc-test: background wait="REGEX" -->``: the block's one command runs in another
  terminal until the page ends; the session waits until its output matches ``REGEX``, then
  compares what it printed so far with the page's (lines after those shown may follow).
* ``<!-- doc-test: eventually=SECONDS -->``: the block's commands are run again until every
  output matches (a reader re-running ``kubectl get`` until the pods are placed).
* ``<!-- doc-test: exit=N -->``: the block's last command exits with ``N``.
* ``<!-- doc-test: skip="why" -->``: the block is not run; the reason is required.
* ``<!-- doc-test: page cluster=none -->`` (anywhere before the first block): the page needs no
  cluster.
  ``cluster=dev-cluster``, the default, runs the page against a fresh ``make dev-cluster``.
  ``venv=own`` gives the page a virtual environment of its own over the repository's, for pages
  that ``pip install``. ``services=kueue,prometheus``: the dev cluster's optional services the page
  uses (``make dev-cluster`` starts them when they are built; the runner starts only those named).

A page may include a section of another file as pymdownx.snippets does (``--8<--
"examples/README.md:quota"``): the runner reads the page as the site shows it, so the examples'
README and the feature pages share one tested session.

``tests/e2e/test_docs_pages.py`` runs every page with a ``console`` block.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(
    r"(?:^<!--\s*doc-test:(?!\s*page\b)(?P<directive>.*?)-->\s*\n(?:[ \t]*\n)*)?"
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
PAGE_DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(page\b.*?)-->", re.MULTILINE)
SNIPPET = re.compile(r'^--8<-- "([^":]+):([\w-]+)"[ \t]*$', re.MULTILINE)
PAGE_KEYS = {"page", "cluster", "venv", "services"}
SERVICES = {"kueue", "prometheus"}
BLOCK_KEYS = {"background", "wait", "eventually", "exit", "skip"}


class DocPageError(ValueError):
    """A page's blocks or directives cannot be run as written."""


@dataclass
class Command:
    """One ``$ `` line (continuations joined) and the output the page shows for it."""

    text: str
    expected: list[str] = field(default_factory=list)
    line: int = 0


@dataclass
class ConsoleBlock:
    commands: list[Command]
    line: int
    background: bool = False
    wait: str = ""
    eventually: float = 0.0
    exit: int = 0
    skip: str = ""


@dataclass
class FileBlock:
    path: str
    content: str
    line: int


@dataclass
class Page:
    path: Path
    steps: list[ConsoleBlock | FileBlock]
    cluster: str = "dev-cluster"
    venv: str = ""
    services: frozenset[str] = frozenset()

    @property
    def console_blocks(self) -> list[ConsoleBlock]:
        return [s for s in self.steps if isinstance(s, ConsoleBlock)]

    @property
    def runs(self) -> bool:
        return any(not b.skip for b in self.console_blocks)


def parse_directive(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise DocPageError(f"{where}: doc-test directive: {exc}") from None
    for word in words:
        key, _, value = word.partition("=")
        if key not in PAGE_KEYS | BLOCK_KEYS:
            raise DocPageError(f"{where}: doc-test directive: unknown key {key!r}")
        out[key] = value
    return out


def parse_console(body: str, first_line: int, where: str) -> list[Command]:
    commands: list[Command] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            text, at = line[2:], first_line + i
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1].rstrip() + " " + lines[i].strip()
            commands.append(Command(text=text, line=at))
        elif commands:
            commands[-1].expected.append(line)
        elif line.strip():
            raise DocPageError(f"{where}: line {first_line + i}: output before the first '$ ' command")
        i += 1
    if not commands:
        raise DocPageError(f"{where}: line {first_line}: a console block without a '$ ' command")
    for c in commands:
        while c.expected and not c.expected[-1].strip():
            c.expected.pop()
    return commands


def expand_snippets(text: str, root: Path, where: str) -> str:
    """The page as the site shows it: each ``--8<-- "FILE:SECTION"`` line replaced by that section of
    ``FILE`` (between ``--8<-- [start:SECTION]`` and ``--8<-- [end:SECTION]``), as pymdownx.snippets
    does."""
    def section(m: re.Match[str]) -> str:
        source = root / m.group(1)
        if not source.is_file():
            raise DocPageError(f"{where}: --8<-- {m.group(1)}: no such file")
        name = re.escape(m.group(2))
        pattern = rf"^[^\n]*--8<-- \[start:{name}\][^\n]*\n(.*?)^[^\n]*--8<-- \[end:{name}\]"
        found = re.search(pattern, source.read_text(),
                          re.MULTILINE | re.DOTALL)
        if not found:
            raise DocPageError(f"{where}: --8<-- {m.group(1)}: no section {m.group(2)!r}")
        return found.group(1)
    return SNIPPET.sub(section, text)


def _page_directives(page: Page, text: str) -> None:
    steps = (m for m in FENCE.finditer(text) if m.group("lang") == "console" or TITLE.search(m.group("info")))
    first = next(steps, None)
    for m in PAGE_DIRECTIVE.finditer(text):
        where = f"{page.path.name}:{text.count(chr(10), 0, m.start()) + 1}"
        if first is not None and m.start() > first.start():
            raise DocPageError(f"{where}: the page directive must come before the first block")
        directive = parse_directive(m.group(1), where)
        if set(directive) - PAGE_KEYS:
            raise DocPageError(f"{where}: a page directive takes {sorted(PAGE_KEYS - {'page'})}")
        page.cluster = directive.get("cluster", page.cluster)
        page.venv = directive.get("venv", "")
        page.services = frozenset(filter(None, directive.get("services", "").split(",")))
        if page.services - SERVICES:
            raise DocPageError(f"{where}: services: unknown {sorted(page.services - SERVICES)}, "
                               f"expected some of {sorted(SERVICES)}")
        if page.cluster not in ("dev-cluster", "none"):
            raise DocPageError(f"{where}: cluster={page.cluster!r}: expected dev-cluster or none")


def parse_page(path: Path, root: Path | None = None) -> Page:
    """Read ``path``; snippets are taken relative to ``root`` (the repository: the docs' parent)."""
    text = expand_snippets(path.read_text(), root or path.parent.parent, path.name)
    page = Page(path=path, steps=[])
    _page_directives(page, text)
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        where = f"{path.name}:{line}"
        directive = parse_directive(m.group("directive") or "", where)
        if set(directive) & PAGE_KEYS:
            raise DocPageError(f"{where}: {sorted(set(directive) & PAGE_KEYS)} belong in a page directive")
        title = TITLE.search(m.group("info"))
        if m.group("lang") == "console":
            if m.group("indent"):
                raise DocPageError(f"{where}: a console block must not be indented")
            block = ConsoleBlock(commands=parse_console(m.group("body"), line + 1, where), line=line)
            block.skip = directive.get("skip", "")
            if "skip" in directive and not block.skip:
                raise DocPageError(f"{where}: skip needs a reason: skip=\"why\"")
            block.background = "background" in directive
            block.wait = directive.get("wait", "")
            if block.background and len(block.commands) != 1:
                raise DocPageError(f"{where}: a background block holds one command")
            try:
                block.eventually = float(directive.get("eventually", 0))
                block.exit = int(directive.get("exit", 0))
            except ValueError as exc:
                raise DocPageError(f"{where}: doc-test directive: {exc}") from None
            page.steps.append(block)
        elif directive:
            raise DocPageError(f"{where}: a doc-test directive before a {m.group('lang') or 'plain'} block")
        elif title:
            page.steps.append(FileBlock(path=title.group(1), content=m.group("body"), line=line))
    return page


def _normal(line: str) -> str:
    return re.sub(r"[ \t]+", " ", line.rstrip())


def expected_pattern(expected: list[str]) -> re.Pattern[str]:
    """The regular expression an output must match in full (see the module's docstring)."""
    parts: list[str] = []
    for want in expected:
        want = _normal(want)
        if want.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = [re.escape(p) for p in want.split("...")]
        parts.append(r"[^\n]*?".join(pieces).replace(r"\ ", " ") + r"\n")
    return re.compile("".join(parts), re.DOTALL)


def normal_output(output: str) -> str:
    lines = [_normal(line) for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(line + "\n" for line in lines)


def output_matches(expected: list[str], output: str) -> bool:
    return expected_pattern(expected).fullmatch(normal_output(output)) is not None


def discover(docs: Path) -> list[Page]:
    """Every page under ``docs`` with at least one console block, in name order."""
    pages = [parse_page(p) for p in sorted(docs.glob("*.md"))]
    return [p for p in pages if p.console_blocks]
