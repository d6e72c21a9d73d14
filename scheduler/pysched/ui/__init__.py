"""``pysched ui``: a live what-if web page over the offline engine (``pysched simulate``).

``scenario`` holds the editable cluster (nodes, bound and pending pods, supporting objects, the
KubeSchedulerConfiguration text) and validates every change; ``runner`` runs it through
``tools.simulate.Simulation`` (seed fixed: a run is reproducible), explains a pod by re-running a
run's frozen copy with ``explain={pod}``, compares runs and replays a sequence of steps;
``server`` is the aiohttp application serving the JSON API and the static page (``static/``) on
loopback, behind a session token.
"""
