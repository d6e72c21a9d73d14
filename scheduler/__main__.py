"""``python -m scheduler``: the same entry point as the installed ``pysched`` command."""

import sys

from .cli import main

sys.exit(main())
