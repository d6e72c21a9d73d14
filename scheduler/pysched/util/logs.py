"""Structured logging: logfmt (``key=value``) by default, JSON with ``--log-format=json``.

Call sites pass fields with ``extra=kv(pod=..., node=...)`` so every error names the pod and node
it concerns; plain ``%``-style messages still work. One line per record, UTC timestamps.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys


def kv(**fields) -> dict:
    return {"kv": fields}


def _logfmt_value(v) -> str:
    s = str(v)
    if s == "" or any(c in s for c in ' ="\n\t'):
        return json.dumps(s)
    return s


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        parts = [f"ts={ts}", f"level={record.levelname.lower()}", f"logger={record.name}",
                 f"msg={_logfmt_value(record.getMessage())}"]
        for k, v in (getattr(record, "kv", None) or {}).items():
            parts.append(f"{k}={_logfmt_value(v)}")
        if record.exc_info:
            parts.append(f"error={_logfmt_value(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out: dict[str, int | float | str | None] = {"ts": ts, "level": record.levelname.lower(),
                                                    "logger": record.name, "msg": record.getMessage()}
        for k, v in (getattr(record, "kv", None) or {}).items():
            out[k] = v if isinstance(v, (int, float, bool)) or v is None else str(v)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


class TransientRetries(logging.Filter):
    """kopf logs every failed watch request it will retry at error level ("Request attempt #1/9
    failed; will retry: ..."), one line per watched kind whenever the API server restarts. They are
    expected and handled: the first attempt becomes info, later ones warning; a request kopf gives
    up on ("escalating") stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.name.startswith("kopf."):
            msg = record.getMessage()
            if msg.startswith("Request attempt") and ("will retry" in msg or "will re-authenticate" in msg):
                level = logging.INFO if msg.startswith("Request attempt #1/") else logging.WARNING
                record.levelno, record.levelname = level, logging.getLevelName(level)
                return logging.getLogger().isEnabledFor(level)
        return True


def setup(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    handler.addFilter(TransientRetries())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for noisy in ("kopf", "aiohttp.access", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def process_uptime() -> float:
    """Seconds since this process started (Linux ``/proc``; 0.0 where that is not available), for
    start-up log lines: how long from exec to caches synced."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        start_ticks = int(stat[stat.rindex(")") + 2:].split()[19])   # field 22 of proc(5)
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
