"""Load-aware scores: nodes scored on measured load from Prometheus or metrics-server, read from
the snapshot a background collector keeps (``pysched.loadmetrics``), never fetched in a cycle.

TargetLoadPacking and LoadVariationRiskBalancing follow scheduler-plugins' Trimaran; MetricScore
scores on any PromQL expression. All three are opt-in and share the fallback policy of
``load``.
"""

