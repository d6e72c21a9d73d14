"""``pysched trace``: replay a GPU cluster trace through pysched's scheduling framework.

``openb`` reads the openb trace format (Alibaba's GPU production trace, as the FGD paper's
simulator uses it) and builds a run's arrival sequence; ``replay`` places the pods one attempt each
through the offline engine (``tools.offline``) with a GPU policy, recording the allocation after
every attempt; ``report`` turns runs into the allocation-ratio curves, the table at 100 % and
130 % of capacity arrived, and a plot beside the published curves; ``cli`` is the command.
The trace files are never shipped: the user gives their path.
"""
