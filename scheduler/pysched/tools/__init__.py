"""Tools built on the engine without the live app: the offline engine (``offline``), ``pysched
simulate`` (``simulate``, ``snapshot``, ``report``) and shadow mode (``shadow``)."""
