"""Scheduler extenders, both ways: the wire format (``wire``), the client our scheduling cycle
calls (``client``), and the server that offers our plugins to kube-scheduler (``server``)."""
