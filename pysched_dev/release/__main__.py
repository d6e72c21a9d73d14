"""``python -m pysched_dev.release``: build the release into ``dist/release`` (``make release``).

Prints the output directory as the last line of stdout; progress, timings and the list of
artifacts with their sizes go to stderr. Exit 1 with the reason (naming the file) when the
versions disagree or a step fails. ``--skip-image`` (or ``RELEASE_SKIP_IMAGE=1``) builds everything
but the image, for machines that cannot build one; the result is then not a complete release.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from pysched_dev.release.build import ROOT, Release, ReleaseError, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pysched_dev.release", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: <root>/dist/release)")
    parser.add_argument("--skip-image", action="store_true", default=os.environ.get("RELEASE_SKIP_IMAGE") == "1",
                        help="build everything but the image (not a complete release)")
    args = parser.parse_args(argv)
    release = Release(root=args.root.resolve(), out=(args.out or args.root / "dist" / "release").resolve(),
                      skip_image=args.skip_image)
    try:
        out = release.run()
    except ReleaseError as exc:
        log(f"FAILED: {exc}")
        return 1
    except subprocess.CalledProcessError as exc:
        log(f"FAILED: {' '.join(map(str, exc.cmd))} exited with {exc.returncode}")
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
