"""Reading YAML files given on the command line, with errors that say where the YAML is broken.

Whatever the file holds, the outcome is a document or ``YAMLFileError``, never a traceback: bytes
that are not UTF-8 are reported with their offset and line, and nesting deeper than
``MAX_DEPTH`` levels is refused where it starts (PyYAML composes recursively, so ten thousand
nested lists would otherwise end in ``RecursionError``). No configuration, snapshot or pod file
comes anywhere near the limit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

MAX_DEPTH = 200

# libyaml's parser and constructor when PyYAML was built with it: composing a multi-megabyte
# snapshot in pure Python takes minutes (a 6,000-object List: ~20 s of CPU). The depth limit is
# then checked on libyaml's event stream before anything is composed.
_CLoader = getattr(yaml, "CSafeLoader", None)


class YAMLFileError(ValueError):
    """The file cannot be read or is not YAML; the message says why (and at which line)."""


class _DepthLimitedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses collections nested deeper than ``MAX_DEPTH``."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YAMLFileError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                            f"(line {line}) cannot be decoded") from None


def read_yaml(path: str | os.PathLike, *, all_documents: bool = False) -> Any:
    """The parsed document (or, with ``all_documents``, the list of documents) in ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise YAMLFileError(f"cannot read: {exc.strerror or exc}") from None
    text = _decode(data)
    if _CLoader is not None:
        return _read_fast(text, all_documents)
    try:
        if all_documents:
            return list(yaml.load_all(text, Loader=_DepthLimitedLoader))
        return yaml.load(text, Loader=_DepthLimitedLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise YAMLFileError(_yaml_message(exc)) from None
    except RecursionError:
        raise YAMLFileError(f"not valid YAML: nested too deeply (limit {MAX_DEPTH} levels)") from None


def _check_depth(text: str) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` from libyaml's events (nothing composed yet)."""
    depth = 0
    start = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    end = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    for event in yaml.parse(text, Loader=_CLoader):
        if isinstance(event, start):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise YAMLFileError(f"not valid YAML at line {mark.line + 1}, column {mark.column + 1}: "
                                    f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, end):
            depth -= 1


def _yaml_message(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        return (f"not valid YAML: character #x{ord(exc.character):04x} at position {exc.position}: "
                f"{exc.reason}")
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    if "tab" in problem or "'\\t'" in problem:
        problem += " (a tab: YAML indents with spaces only)"
    return f"not valid YAML{at}: {problem}"


def _read_fast(text: str, all_documents: bool) -> Any:
    """The same document(s), parsed and constructed by libyaml; the depth limit checked first."""
    try:
        _check_depth(text)
        if all_documents:
            return list(yaml.load_all(text, Loader=_CLoader))
        return yaml.load(text, Loader=_CLoader)  # noqa: S506 - libyaml's SafeLoader
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):      # libyaml's own limit (1,000), met while scanning ahead
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise YAMLFileError(f"not valid YAML{at}: nested deeper than {MAX_DEPTH} levels") from None
        raise YAMLFileError(_yaml_message(exc)) from None
