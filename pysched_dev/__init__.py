"""The development harness, not shipped in the wheel: a throw-away control plane built from the
Go module proxy (``devcluster``), API object builders (``testkit``) and ``make demo`` (``demo``).
Used by the tests, the demo and the benchmark."""
