"""The one exception the real cluster raises: which piece failed, and the end of its log."""

from __future__ import annotations

from pathlib import Path

#: How much of a log an error quotes.
TAIL_BYTES = 4000


def log_tail(path: Path | None, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a log file ("" when there is none)."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - limit))
        return f.read().decode(errors="replace")


class RealClusterError(RuntimeError):
    """A piece of the real cluster could not be started (or stopped): ``piece`` names it, the
    message ends with the tail of its log when it has one."""

    def __init__(self, piece: str, message: str, log: Path | None = None) -> None:
        self.piece = piece
        self.log = log
        tail = log_tail(log)
        text = f"{piece}: {message}"
        if log is not None:
            text += f"\n--- last lines of {log} ---\n{tail}" if tail else f"\n(no output in {log})"
        super().__init__(text)
