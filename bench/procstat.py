"""CPU time and memory read from /proc (Linux): one process, the bench's own process tree, the machine.

* ``sample(pid)``: a process's user+system CPU seconds (all its threads) and VmHWM / VmRSS.
* ``own_cpu_s()``: CPU seconds of this driver, of its children that were reaped (``RUSAGE_CHILDREN``)
  and of its live children (read from their ``/proc/<pid>/stat``): every process a run starts
  (etcd, kube-apiserver, the schedulers, the watcher, the profiler) is a child of the driver, so the
  difference of two readings is what the run itself used in between, whether a child lived through
  the interval, started in it or ended in it.
* ``busy_cpu_s()``: the machine's busy CPU seconds over all CPUs, from the ``cpu`` line of
  ``/proc/stat`` (user, nice, system, irq, softirq, steal; not idle or iowait).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_s: float       # user + system CPU seconds so far
    peak_rss_mib: float  # VmHWM: the resident-set high-water mark
    rss_mib: float


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2:].split()   # fields 3.. of proc(5), after pid and (comm)


def cpu_s(pid: int) -> float:
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _TICKS   # utime, stime: fields 14 and 15 of proc(5)


def sample(pid: int) -> ProcSample:
    cpu = cpu_s(pid)
    hwm = rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024.0
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024.0
    return ProcSample(cpu_s=cpu, peak_rss_mib=hwm, rss_mib=rss)


def children(parent: int | None = None) -> list[int]:
    """Pids whose parent is ``parent`` (default: this process), zombies included."""
    parent = os.getpid() if parent is None else parent
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry))[1]) == parent:   # field 4: ppid
                out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue   # gone meanwhile
    return out


def own_cpu_s() -> float:
    """CPU seconds of this process, its reaped children and its live children, so far."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + reaped.ru_utime + reaped.ru_stime
    for pid in children():
        try:
            total += cpu_s(pid)
        except (OSError, ValueError, IndexError):
            continue
    return total


def busy_cpu_s(stat_text: str | None = None) -> float:
    """Busy CPU seconds of the whole machine since boot (all CPUs)."""
    if stat_text is None:
        with open("/proc/stat") as f:
            stat_text = f.read()
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            user, nice, system, _idle, _iowait, irq, softirq = v[:7]
            steal = v[7] if len(v) > 7 else 0
            return (user + nice + system + irq + softirq + steal) / _TICKS
    raise ValueError("/proc/stat has no 'cpu' line")


def allowed_cpus(pid: int) -> str:
    """``Cpus_allowed_list`` of a process (e.g. ``1`` or ``0-1``), "?" if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"
