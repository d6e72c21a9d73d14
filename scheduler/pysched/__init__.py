"""pysched: a secondary Kubernetes scheduler written in Python.

The engine follows kube-scheduler's tree and vocabulary: the configuration and object model
(``apis``), the plugin framework with its extension points, CycleState and Status
(``framework``), the cache with assume/forget and the scheduling queue with activeQ/backoffQ
(``backend``), the scheduling and binding cycles (``schedule_one``), the API client, informers,
Events and leader election (``client``), extenders (``extender``), the secure port (``server``),
the in-tree plugins (``plugins``), shadow mode (``shadow``) and the tools (``tools``: simulate).
``profile`` builds a framework per profile for the live app, simulate and the extender alike.
"""

__version__ = "0.2.0"
