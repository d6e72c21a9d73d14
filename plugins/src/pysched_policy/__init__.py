"""pysched's policy plugins: scores kube-scheduler does not have, built as any user's plugin is.

GPU (keep GPU nodes for GPU pods), AZSpread (spread a workload evenly over the eligible zones),
CapacityType (spot or on-demand, as the pod asks) and InstanceType (rank nodes by instance type)
are written only against the public plugin API (``pysched.framework``, ``pysched.framework.api``)
and reach the scheduler the way a user's plugin does: this distribution's ``pysched.plugins``
entry points (pyproject.toml). The engine, kube-scheduler's plugin set and the scheduler-plugins
ports live in the ``pysched`` distribution; nothing there imports this package.
"""

from pysched_policy.az_spread import AZSpread
from pysched_policy.capacity_type import CapacityType
from pysched_policy.gpu import GPU
from pysched_policy.instance_type import InstanceType

__version__ = "0.2.0"

PLUGINS = [GPU, AZSpread, CapacityType, InstanceType]

__all__ = ["AZSpread", "CapacityType", "GPU", "InstanceType", "PLUGINS"]
