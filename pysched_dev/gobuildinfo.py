"""The build information a Go binary carries (what ``go version -m`` prints), read without Go.

Go 1.18+ writes it into the ``.go.buildinfo`` data (ELF section, found by its 14-byte magic):
``\\xff Go buildinf:``, pointer size, flags (bit 1: strings inline), then two varint-length-prefixed
strings, the Go version and the module information (``path``/``mod``/``dep``/``=>``/``build``
lines between two 16-byte sentinels), as ``debug/buildinfo`` in the Go standard library reads it.
Older layouts (pointers instead of inline strings) are refused: the image's pysched-cel is built
with Go >= 1.25.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

MAGIC = b"\xff Go buildinf:"


@dataclass
class Module:
    path: str
    version: str
    sum: str = ""
    replaced_by: Module | None = None


@dataclass
class BuildInfo:
    go_version: str
    path: str = ""
    main: Module | None = None
    deps: list[Module] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def read(data: bytes) -> BuildInfo:
    """The build information of a Go binary's bytes; ValueError when there is none."""
    at = data.find(MAGIC)
    while at >= 0 and at % 16:   # the blob is 16-byte aligned
        at = data.find(MAGIC, at + 1)
    if at < 0:
        raise ValueError("not a Go binary (no build information)")
    flags = data[at + 15]
    if not flags & 0x2:
        raise ValueError("build information not inline (Go older than 1.18)")
    pos = at + 32
    n, pos = _varint(data, pos)
    version = data[pos:pos + n].decode()
    pos += n
    n, pos = _varint(data, pos)
    mod = data[pos:pos + n]
    if len(mod) >= 33 and mod[-17] == ord("\n"):
        mod = mod[16:-16]   # the sentinels around the text
    return parse_modinfo(version, mod.decode())


def parse_modinfo(go_version: str, text: str) -> BuildInfo:
    """The lines ``go version -m`` prints after the binary's name (tab-separated)."""
    info = BuildInfo(go_version=go_version)
    last: Module | None = None
    for line in text.splitlines():
        word, _, rest = line.partition("\t")
        parts = rest.split("\t")
        if word == "path":
            info.path = rest
        elif word == "mod":
            info.main = last = Module(parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else "")
        elif word == "dep":
            last = Module(parts[0], parts[1], parts[2] if len(parts) > 2 else "")
            info.deps.append(last)
        elif word == "=>" and last is not None:
            last.replaced_by = Module(parts[0], parts[1], parts[2] if len(parts) > 2 else "")
        elif word == "build":
            key, _, value = rest.partition("=")
            info.settings[key] = value
    return info


def main(argv: list[str] | None = None) -> int:
    for name in argv if argv is not None else sys.argv[1:]:
        with open(name, "rb") as f:
            info = read(f.read())
        print(f"{name}: {info.go_version}")
        print(f"\tpath\t{info.path}")
        for m in ([info.main] if info.main else []) + info.deps:
            print(f"\t{'mod' if m is info.main else 'dep'}\t{m.path}\t{m.version}\t{m.sum}".rstrip("\t"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
