"""pysched: a secondary Kubernetes scheduler written in Python.

The engine follows kube-scheduler's structure and vocabulary: an informer-fed cache with
assume/forget (``cache``), a scheduling queue with activeQ/backoffQ/unschedulable pods
(``queue``), the framework with its extension points, CycleState and Status
(``framework``), and the scheduling and binding cycles (``schedule_one``). Plugins live in the
top-level ``plugins`` package.
"""

__version__ = "0.1.0"
