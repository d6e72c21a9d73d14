"""The scheduler cache: nodes and the pods on them with assume/forget (``cache``), the columnar
NodeTable (``nodetable``), and incremental per-node pod counts (``podindex``, ``termindex``)."""
