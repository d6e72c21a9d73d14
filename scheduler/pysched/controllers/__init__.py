"""Controllers that run inside the scheduler process while this replica leads.

``podgroup`` keeps the status of scheduler-plugins' PodGroups (``scheduling.x-k8s.io/v1alpha1``)
current; ``podgroup_status`` is its pure status computation and ``workqueue`` the coalescing,
rate-limited queue it reconciles from. Controllers build on ``client`` (API I/O, kopf watches,
the write fence) and ``apis``; they know nothing of the scheduling framework or its plugins.
"""
