"""``python -m pysched``: the same entry point as the installed ``pysched`` command."""

import sys

from pysched.cli import main

sys.exit(main())
