"""A real cluster on this machine: control plane, one real node (containerd + runc + kubelet) and
KWOK's fake nodes, on loopback and private addresses, changing no host-wide setting and leaving
nothing behind (``make real-cluster``, the ``real_cluster`` fixture of tests/real; docs/real-node.md).

One job per module: ``cluster`` (RealCluster: start, stop, the API tests use), ``prereq`` (what the
machine needs, the binaries), ``pki``, ``network`` (addresses, bridge, CNI), ``containerd``,
``kubelet``, ``controlplane``, ``kwok``, ``mounts``, ``cgroups``, ``procs`` (daemons by PID),
``api`` (a small REST client), ``hoststate`` (what the host looks like, for the teardown test).
"""

from pysched_dev.realcluster.cluster import RealCluster
from pysched_dev.realcluster.errors import RealClusterError
from pysched_dev.realcluster.kwok import KWOK_TAINT, KWOK_TOLERATION
from pysched_dev.realcluster.prereq import unavailable_reason

__all__ = ["KWOK_TAINT", "KWOK_TOLERATION", "RealCluster", "RealClusterError", "unavailable_reason"]
