"""Side-by-side scheduling benchmark: pysched against the control plane's kube-scheduler (1.37.2 by default).

In the style of kube-scheduler's ``test/integration/scheduler_perf``: bare Node objects, a phase of
init pods, then measured pods created as fast as the API server takes them while a separate watcher
process timestamps every bind. ``python -m bench.run`` (``make bench``) drives it; see
``bench/RESULTS.md`` for a committed run.
"""
