"""Topology-domain arithmetic over label codes, shared by PodTopologySpread and InterPodAffinity.

A topology domain is a value of a node label (``topology.kubernetes.io/zone=a``). The node batch
gives each node's value as an integer code (``NodeBatch.label(key).codes``, -1 where the label is
absent), so per-domain quantities are arrays indexed by code: ``domain_sums`` adds a per-node
quantity up by domain, ``per_node`` reads a per-domain array back for each node of a batch. Both
are the plugin API's own (``LabelValues.totals`` / ``lookup``), in the form these plugins call them.
"""

from __future__ import annotations

import numpy as np

from pysched.framework import LabelValues
from pysched.framework.interface import sum_by_code


def domain_sums(codes: np.ndarray, per_node: np.ndarray, size: int, mask: np.ndarray | None = None) -> np.ndarray:
    """int64 array of length ``size`` (at least): the sum of ``per_node`` over the nodes of each
    domain code, counting only nodes with the label (and, given ``mask``, where it is True)."""
    return sum_by_code(codes, per_node, size, mask)


def per_node(per_domain: np.ndarray, values: LabelValues, absent: int = 0) -> np.ndarray:
    """``per_domain[code]`` for each node of ``values`` (``NodeBatch.label(key)``); ``absent`` where
    the node lacks the label or its code is beyond ``per_domain`` (a value no counted node had)."""
    return values.lookup(per_domain, absent)
