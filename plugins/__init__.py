"""The plugin set: kube-scheduler's in-tree plugins re-implemented in Python, plus our own.

``IN_TREE`` is the registry's starting point (name -> class). Each plugin lives in its own module
with a docstring saying what it checks and what it reads. Out-of-tree plugins register through
the ``pysched.plugins`` entry point group or ``--plugin-module`` (see
``scheduler.framework.registry``); nothing here needs to change for them.
"""

from .default_binder import DefaultBinder
from .node_affinity import NodeAffinity
from .node_name import NodeName
from .node_resources_fit import NodeResourcesFit
from .node_unschedulable import NodeUnschedulable
from .queue_sort import PrioritySort
from .scheduling_gates import SchedulingGates
from .taint_toleration import TaintToleration

IN_TREE = [
    SchedulingGates,
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodeResourcesFit,
    DefaultBinder,
]

__all__ = ["IN_TREE"]
