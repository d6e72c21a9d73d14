"""Topology-domain arithmetic over label codes, shared by PodTopologySpread, InterPodAffinity and
AZSpread.

A topology domain is a value of a node label (``topology.kubernetes.io/zone=a``). The node batch
gives each node's value as an integer code (``NodeBatch.label(key).codes``, -1 where the label is
absent), so per-domain quantities are arrays indexed by code: ``domain_sums`` adds a per-node
quantity up by domain, ``per_node`` reads a per-domain array back for each node of a batch.
"""

from __future__ import annotations

import numpy as np

from pysched.framework import LabelValues


def domain_sums(codes: np.ndarray, per_node: np.ndarray, size: int, mask: np.ndarray | None = None) -> np.ndarray:
    """int64 array of length ``size`` (at least): the sum of ``per_node`` over the nodes of each
    domain code, counting only nodes with the label (and, given ``mask``, where it is True)."""
    keep = codes >= 0
    if mask is not None:
        keep &= mask
    return np.bincount(codes[keep], weights=per_node[keep], minlength=size).astype(np.int64)


def per_node(per_domain: np.ndarray, values: LabelValues, absent: int = 0) -> np.ndarray:
    """``per_domain[code]`` for each node of ``values`` (``NodeBatch.label(key)``); ``absent`` where
    the node lacks the label or its code is beyond ``per_domain`` (a value no counted node had)."""
    n = len(per_domain)
    # One gather: the codes index a copy padded to the whole vocabulary plus a trailing slot
    # that code -1 (label absent) picks.
    padded = np.full(max(n, len(values.vocabulary)) + 1, absent, dtype=per_domain.dtype)
    padded[:n] = per_domain
    out: np.ndarray = padded[values.codes]
    return out
