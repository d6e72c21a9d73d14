"""The scheduler process, assembled: one builder per concern, each from what the earlier ones built.

``options`` (the command-line settings and ``Mode``, every difference shadow mode makes),
``clients`` (every API client, the write fence, leader election), ``profiles`` (the frameworks,
the queue, the Scheduler and what feeds them), ``informers`` (the reflectors), ``controllers``
(the status controllers the leader runs) and ``servers`` (the secure port). ``pysched.app``
builds them in start-up order and owns the lifecycle: run, readiness, lease loss, shutdown.
"""
