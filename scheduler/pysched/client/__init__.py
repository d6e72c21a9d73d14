"""Talking to the API server: credentials (``auth``), the REST client with its rate limiter
(``rest``) over a lean HTTP/1.1 pool (``httppool``), LIST+WATCH (``reflector``: pods, nodes and
the low-volume kinds of ``objectstore``), kopf for the PodGroup controller (``kopf_watch``),
Events (``events``, ``eventseries``), Lease
leader election (``leaderelection``) and the write fence (``fence``)."""
