"""Exit statuses of ``pysched simulate`` (also the ``--help`` epilog and the table in
docs/simulate-explain-shadow.md)."""

EXIT_ALL_PLACED = 0        # every pod was placed
EXIT_UNSCHEDULABLE = 1     # at least one pod was not placed (unschedulable, no profile for it, plugin error)
EXIT_BAD_INPUT = 2         # bad flags, configuration, snapshot, pod file, --add-nodes or unwritable --report
EXIT_INTERNAL = 3          # a bug in pysched: the traceback is on stderr

SIMULATE_EXIT_HELP = """exit status:
  0  every pod was placed
  1  at least one pod was not placed (unschedulable, no profile for its schedulerName, or a plugin
     error); the output gives each one's reason
  2  bad input: flags, --config, --cluster, --pods, --add-nodes, or a --report path that cannot be written
  3  internal error (a bug in pysched; the traceback is printed on stderr)"""
