"""The machine a benchmark ran on, and the other load on it during each run.

``machine_info`` names the CPU, cores, memory, kernel and versions. ``OtherLoad`` measures, over a
run's measured phase, the machine's busy CPU seconds (``/proc/stat``) minus the CPU seconds of the
run's own processes (this driver and its children: etcd, kube-apiserver, the scheduler, the
watcher), as CPU-seconds per second: what something else on the machine took meanwhile. The
1-minute /proc/loadavg at the start of a run is recorded beside it. It also records the CPU-s/s of
named processes (kube-apiserver, etcd): with the scheduler on its own core, an API server near
1.0 CPU-s/s on the other is the ceiling both schedulers hit, not either scheduler.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import procstat


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


@dataclass
class OtherLoad:
    """Start with ``OtherLoad.start()``, finish with ``.stop()`` -> figures of the interval."""
    t: float
    busy: float
    own: float
    named: dict[str, tuple[int, float | None]] = field(default_factory=dict)   # name -> (pid, CPU s at start)

    @classmethod
    def start(cls, named: dict[str, int] | None = None) -> OtherLoad:
        """``named``: processes (name -> pid) whose own CPU-s/s to report as ``<name>_cpu_per_s``
        (None when a process could not be read at either end)."""
        return cls(time.monotonic(), procstat.busy_cpu_s(), procstat.own_cpu_s(),
                   {n: (pid, _cpu_or_none(pid)) for n, pid in (named or {}).items()})

    def stop(self) -> dict:
        seconds = time.monotonic() - self.t
        out = other_cpu(seconds, procstat.busy_cpu_s() - self.busy, procstat.own_cpu_s() - self.own)
        for name, (pid, cpu0) in self.named.items():
            cpu1 = _cpu_or_none(pid)
            out[f"{name}_cpu_per_s"] = (None if cpu0 is None or cpu1 is None
                                        else round((cpu1 - cpu0) / max(seconds, 1e-9), 3))
        return out


def _cpu_or_none(pid: int) -> float | None:
    try:
        return procstat.cpu_s(pid)
    except (OSError, ValueError, IndexError):
        return None


def other_cpu(seconds: float, busy: float, own: float) -> dict:
    """Busy and own CPU-s of an interval -> CPU-s per second (other = busy - own)."""
    wall = max(seconds, 1e-9)
    return {"phase_s": round(seconds, 2), "busy_cpu_per_s": round(busy / wall, 3),
            "own_cpu_per_s": round(own / wall, 3), "other_cpu_per_s": round((busy - own) / wall, 3)}


def machine_info(bin_dir: Path) -> dict:
    def version(args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in open("/proc/meminfo") if x.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = 0
    import aiohttp
    import numpy
    import orjson
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "kube-scheduler": version([str(bin_dir / "kube-scheduler"), "--version"]),
            "kube-apiserver": version([str(bin_dir / "kube-apiserver"), "--version"]),
            "etcd": version([str(bin_dir / "etcd"), "--version"]),
            "aiohttp": aiohttp.__version__, "orjson": orjson.__version__, "numpy": numpy.__version__}
