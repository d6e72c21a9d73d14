"""What the processes run, once ``pysched.cli`` has parsed the command line: ``scheduler`` (``pysched
[run]``: the scheduler process) and ``extender`` (``pysched extender``: the plugins served to
kube-scheduler). These are the process entry points, the only modules that may import every layer
(``tests/unit/test_layers.py``); nothing imports them but the command line."""
