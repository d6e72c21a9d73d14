"""CPU time and peak RSS of a running process, read from /proc (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_s: float       # user + system CPU seconds so far
    peak_rss_mib: float  # VmHWM: the resident-set high-water mark
    rss_mib: float


def sample(pid: int) -> ProcSample:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), after pid and comm
    hwm = rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024.0
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024.0
    return ProcSample(cpu_s=(utime + stime) / _TICKS, peak_rss_mib=hwm, rss_mib=rss)
