"""The scheduler process, assembled: one builder per concern, each from what the earlier ones built.

``options`` (the command-line settings and ``Mode``, every difference shadow mode makes) and
``clients`` (every API client, the write fence, leader election). ``pysched.app`` builds them in
start-up order and owns the lifecycle: run, readiness, lease loss, shutdown.
"""
