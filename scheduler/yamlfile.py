"""Reading YAML files given on the command line, with errors that say where the YAML is broken."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


class YAMLFileError(ValueError):
    """The file cannot be read or is not YAML; the message says why (and at which line)."""


def read_yaml(path: str | os.PathLike, *, all_documents: bool = False) -> Any:
    """The parsed document (or, with ``all_documents``, the list of documents) in ``path``."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise YAMLFileError(f"cannot read: {exc.strerror or exc}") from None
    try:
        return list(yaml.safe_load_all(text)) if all_documents else yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YAMLFileError(f"not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
