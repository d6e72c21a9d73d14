"""The engine's state, as kube-scheduler's ``pkg/scheduler/backend``: the cache (``cache``) and
the scheduling queue (``queue``)."""
