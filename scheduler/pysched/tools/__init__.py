"""Tools built on the engine without the live app: the offline engine (``offline``) and ``pysched
simulate`` (``simulate``, ``snapshot``, ``report``). Shadow mode runs in the live process
(``pysched.shadow``)."""
