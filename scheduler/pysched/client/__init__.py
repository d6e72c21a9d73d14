"""Talking to the API server: credentials (``auth``), the REST client with its rate limiter
(``rest``) over a lean HTTP/1.1 pool (``httppool``), LIST+WATCH (``reflector``), kopf-fed
low-volume streams (``kopf_watch``, ``objectstore``), Events (``events``, ``eventseries``), Lease
leader election (``leaderelection``) and the write fence (``fence``)."""
