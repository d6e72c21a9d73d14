"""Release notes: the CHANGELOG's ``## [X.Y.Z]`` section, as GitHub shows it on the release.

``section`` returns the section's body (its heading line and the next section excluded), without
the link references Keep a Changelog puts at the end of the file; an absent or empty section is an
error naming the file. ``render`` puts a title over it and, when the image was built, its reference
and digest, so the notes say what to pull.
"""

from __future__ import annotations

import re


class NotesError(ValueError):
    """The CHANGELOG has no usable section for the version."""


def section(changelog: str, version: str) -> str:
    """The body of ``## [version]`` in ``changelog`` (Markdown), stripped."""
    lines = changelog.splitlines()
    start = None
    for i, line in enumerate(lines):
        if re.match(r"^## \[" + re.escape(version) + r"\](\s|$)", line):
            start = i + 1
            break
    if start is None:
        raise NotesError(f"CHANGELOG.md: no '## [{version}]' section")
    body: list[str] = []
    for line in lines[start:]:
        if line.startswith("## ") or re.match(r"^\[[^\]]+\]:\s", line):
            break
        body.append(line)
    text = "\n".join(body).strip()
    if not text:
        raise NotesError(f"CHANGELOG.md: the '## [{version}]' section is empty")
    return text


def render(changelog: str, version: str, image: str | None = None, digest: str | None = None) -> str:
    """RELEASE_NOTES.md: a title, the image (when built) and the CHANGELOG section."""
    head = [f"# pysched {version}", ""]
    if image:
        head += [f"Image: `{image}`" + (f" (`{digest}`)" if digest else ""), ""]
    return "\n".join(head) + "\n" + section(changelog, version) + "\n"
