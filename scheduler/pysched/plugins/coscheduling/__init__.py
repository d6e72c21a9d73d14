"""Coscheduling (scheduler-plugins' gang scheduling of PodGroups): the plugin (``coscheduling``). It
uses only the framework; its package is where helpers of its own would go."""

from pysched.plugins.coscheduling.coscheduling import Coscheduling, CoschedulingArgs

__all__ = ["Coscheduling", "CoschedulingArgs"]
