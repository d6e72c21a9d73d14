"""One PNG per workload: cumulative measured pods bound over time, one panel per mode.

Each scheduler (and pysched profile) has one colour; every repeat is a line (the first labelled). Time 0 is the first
measured pod's creation (steady, burst) or the start of the fresh scheduler (drain); dotted lines
are the pods the watcher saw created (steady, burst).
"""

from __future__ import annotations

from pathlib import Path

from . import stats
from .modes import MODES
from .schedulers import NULL


def series(run: dict) -> str:
    """A run's line: its scheduler, with pysched's profile when it is not the default (profiles are
    lines and colours of their own)."""
    profile = run.get("profile") or ""
    return f"{run['scheduler']} ({profile})" if profile not in ("", "default") else run["scheduler"]


def chart(results: list[dict], out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for wl in dict.fromkeys(r["workload"] for r in results):
        runs = [r for r in results if r["workload"] == wl]
        modes = [m for m in MODES if any(r["mode"] == m for r in runs)]
        fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4), squeeze=False)
        colours: dict[str, str] = {}
        for ax, mode in zip(axes[0], modes):
            labelled: set[str] = set()
            for r in runs:
                if r["mode"] != mode or not r["bind_offsets"]:
                    continue
                step = max(0.01, max(r["bind_offsets"]) / 400)
                xs, ys = stats.bound_over_time(0.0, r["bind_offsets"], step)
                name = f"{series(r)} qps {r['qps']:g}"
                label = None if name in labelled else name
                labelled.add(name)
                line, = ax.plot(xs, ys, label=label, color=colours.get(name), linewidth=1.2,
                                linestyle="--" if r["scheduler"] == NULL else "-")
                colours[name] = line.get_color()
                if mode != "drain" and r.get("seen_offsets"):
                    xs, ys = stats.bound_over_time(0.0, r["seen_offsets"], step)
                    ax.plot(xs, ys, color=colours[name], linestyle=":", linewidth=0.8, alpha=0.6)
            ax.set_title(f"{wl}: {mode}")
            ax.set_xlabel("s since the fresh scheduler started" if mode == "drain"
                          else "s since the first measured pod was created")
            ax.set_ylabel("measured pods bound")
            ax.grid(alpha=0.3)
            if labelled:
                ax.legend(loc="lower right")
        fig.tight_layout()
        path = out / f"{wl.replace('/', '_')}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
