"""Raw benchmark data on disk, plain or gzipped.

``bench/runs`` keeps every raw file gzipped (``gzip -9n``: ``*.json.gz``, ``samples.jsonl.gz``), and
the benchmark writes its raw output the same way: ``bench.run``'s ``results.json.gz``, the soak's
``samples.jsonl.gz`` once the run is over, ``bench.startup --out X.json.gz``. The small summaries
meant for reading (a soak's ``summary.json``) stay plain. Every reader goes through ``read_text``,
which takes either form.
"""

from __future__ import annotations

import gzip
from pathlib import Path


def read_text(path: Path | str) -> str:
    """The text of ``path``, gunzipped when its name ends in ``.gz``. A plain name that is not there
    is read from the gzipped file beside it (``results.json`` from ``results.json.gz``)."""
    path = Path(path)
    if path.suffix != ".gz" and not path.exists():
        gz = path.with_name(path.name + ".gz")
        if gz.exists():
            path = gz
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def write_gz(path: Path | str, text: str | bytes) -> None:
    """``text`` gzipped into ``path`` as ``gzip -9n`` would (no name, no time stamp: the same text
    gives the same bytes), through a temporary file so a reader never sees half of it."""
    path = Path(path)
    data = text.encode() if isinstance(text, str) else text
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    tmp.replace(path)


def write_text(path: Path | str, text: str) -> None:
    """``text`` into ``path``: gzipped (``write_gz``) when the name ends in ``.gz``, plain otherwise."""
    path = Path(path)
    if path.suffix == ".gz":
        write_gz(path, text)
    else:
        path.write_text(text)


def compress(path: Path | str) -> Path:
    """Replace ``path`` by ``path.gz`` (``gzip -9n path``); the gzipped file's path."""
    path = Path(path)
    gz = path.with_name(path.name + ".gz")
    write_gz(gz, path.read_bytes())
    path.unlink()
    return gz
