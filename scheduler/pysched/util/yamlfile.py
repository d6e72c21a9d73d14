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
    try:
        if all_documents:
            return list(yaml.load_all(text, Loader=_DepthLimitedLoader))
        return yaml.load(text, Loader=_DepthLimitedLoader)  # noqa: S506 - a SafeLoader
    except yaml.reader.ReaderError as exc:
        raise YAMLFileError(f"not valid YAML: character #x{ord(exc.character):04x} at position {exc.position}: "
                            f"{exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YAMLFileError(f"not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise YAMLFileError(f"not valid YAML: nested too deeply (limit {MAX_DEPTH} levels)") from None
