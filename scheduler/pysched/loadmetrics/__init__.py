"""Load metrics for the load-aware plugins: the sources (Prometheus's HTTP API, metrics.k8s.io),
the background collector that refreshes every subscribed series on its provider's interval with a
bounded timeout, and the metrics-file stand-in simulate and explain use.

The scheduling cycle never calls into this package: plugins hold ``MetricSeries`` objects
(``pysched.framework.loadmetrics``) that the collector replaces in place.
"""

from pysched.loadmetrics.collector import LoadCollector
from pysched.loadmetrics.sources import MetricsServerSource, PrometheusSource, SourceError
from pysched.loadmetrics.static import StaticLoad, load_metrics_file

__all__ = ["LoadCollector", "MetricsServerSource", "PrometheusSource", "SourceError", "StaticLoad",
           "load_metrics_file"]
