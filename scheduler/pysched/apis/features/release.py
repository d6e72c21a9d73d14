"""Which kube-scheduler release pysched behaves as: the API server's, inside the supported window.

pysched follows kube-scheduler 1.35, 1.36 and 1.37 (``WINDOW``). At start-up it reads the API
server's ``/version`` and behaves as kube-scheduler of that minor release: that release's feature
gate defaults, default plugins and behaviour. A server outside the window is refused, unless the
user names the release to behave as with ``--emulated-version`` (inside the window); pysched then
runs as that release and warns, as a kube component at a compatibility version does. An emulated
version newer than the server, or more than one release older, is a skew Kubernetes does not
support for kube-scheduler: pysched runs, and warns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int]

WINDOW: tuple[Version, ...] = ((1, 35), (1, 36), (1, 37))
OLDEST, NEWEST = WINDOW[0], WINDOW[-1]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


class ReleaseError(ValueError):
    """The API server's release is outside the window, or ``--emulated-version`` is not a release pysched follows."""


def parse_version(text: str, what: str = "version") -> Version:
    """``v1.37.2``, ``1.37``, ``v1.37.0-rc.1+abc`` -> (1, 37)."""
    m = _VERSION.match(text.strip())
    if not m:
        raise ReleaseError(f"{what} {text!r}: expected MAJOR.MINOR, such as 1.37")
    return int(m.group(1)), int(m.group(2))


def fmt(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def window_text() -> str:
    return f"{fmt(OLDEST)} to {fmt(NEWEST)}"


@dataclass(frozen=True)
class Release:
    """The release pysched behaves as (``version``), the server's (``server``, its gitVersion if read),
    and why, if it is not the server's own (``warning``)."""

    version: Version
    server: str | None = None
    emulated: bool = False
    warning: str | None = None


def choose(server: str | None, emulated: str | None) -> Release:
    """The release to behave as, given the server's ``gitVersion`` (None: not read) and ``--emulated-version``."""
    want = None
    if emulated:
        # kube-scheduler's syntax names the component: ``kube=1.36``; a bare ``1.36`` means the same.
        want = parse_version(emulated.strip().removeprefix("kube="), "--emulated-version")
        if want not in WINDOW:
            raise ReleaseError(f"--emulated-version {emulated}: pysched emulates kube-scheduler {window_text()}")
    if server is None:
        return Release(want or NEWEST, None, emulated=want is not None)
    have = parse_version(server, "the API server's version")
    if want is None:
        if have not in WINDOW:
            nearest = fmt(NEWEST if have > NEWEST else OLDEST)
            raise ReleaseError(
                f"the API server is Kubernetes {server}; pysched follows kube-scheduler {window_text()} and "
                f"refuses to guess how another release schedules. Pass --emulated-version={nearest} "
                f"to run as kube-scheduler {nearest} against it anyway")
        return Release(have, server)
    warning = None
    if have not in WINDOW:
        warning = (f"the API server is Kubernetes {server}, outside the releases pysched follows ({window_text()}); "
                   f"running as kube-scheduler {fmt(want)} (--emulated-version)")
    elif want > have:
        warning = (f"--emulated-version {fmt(want)} is newer than the API server ({server}): kube-scheduler must "
                   f"not be newer than kube-apiserver; objects and fields of {fmt(want)} may not be served")
    elif have[1] - want[1] > 1:
        warning = (f"--emulated-version {fmt(want)} is more than one release older than the API server ({server}), "
                   f"a skew Kubernetes does not support for kube-scheduler")
    return Release(want, server, emulated=True, warning=warning)
