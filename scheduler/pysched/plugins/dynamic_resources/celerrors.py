"""The error both CEL engines raise for a selector (``cel_builtin``, ``cel_go``)."""


class SelectorError(ValueError):
    """A selector did not compile, failed at run time, or did not yield a bool; the text is CEL's
    (with ``pysched-cel``, kube-scheduler's own)."""
