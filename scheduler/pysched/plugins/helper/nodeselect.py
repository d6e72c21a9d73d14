"""Vectorised node selection: node selectors and label requirements over a NodeBatch.

The scalar forms live on the model types (``Requirement.matches`` etc.); these functions give the
same answers for every node of a batch at once, using the batch's label accessor (``NodeBatch.label``). Tests check the
two agree.
"""

from __future__ import annotations

import numpy as np

from pysched.framework import NodeBatch, PodInfo
from pysched.framework.api import FieldRequirement, LabelSelector, NodeSelector, NodeSelectorTerm, Requirement


def requirement_mask(nodes: NodeBatch, req: Requirement) -> np.ndarray:
    values = nodes.label(req.key)
    op = req.operator
    if op == "In":
        return values.isin(req.values)
    if op == "NotIn":
        return ~values.isin(req.values)
    if op == "Exists":
        return values.exists()
    if op == "DoesNotExist":
        return ~values.exists()
    if op in ("Gt", "Lt"):
        vals = values.ints()
        with np.errstate(invalid="ignore"):
            return (vals > req.number) if op == "Gt" else (vals < req.number)
    return np.zeros(len(nodes), dtype=bool)


def field_mask(nodes: NodeBatch, f: FieldRequirement) -> np.ndarray:
    eq = np.zeros(len(nodes), dtype=bool)
    i = nodes.index_of(f.value)
    if i >= 0:
        eq[i] = True
    return eq if f.operator == "In" else ~eq


def term_mask(nodes: NodeBatch, term: NodeSelectorTerm) -> np.ndarray:
    if not term.valid or (not term.expressions and not term.fields):
        return np.zeros(len(nodes), dtype=bool)
    m = np.ones(len(nodes), dtype=bool)
    for r in term.expressions:
        m &= requirement_mask(nodes, r)
    for f in term.fields:
        m &= field_mask(nodes, f)
    return m


def node_selector_mask(nodes: NodeBatch, sel: NodeSelector) -> np.ndarray:
    m = np.zeros(len(nodes), dtype=bool)
    for t in sel.terms:
        m |= term_mask(nodes, t)
    return m


def labels_mask(nodes: NodeBatch, labels: dict[str, str]) -> np.ndarray:
    """``spec.nodeSelector``: every key present with exactly that value."""
    m = np.ones(len(nodes), dtype=bool)
    for k, v in labels.items():
        m &= nodes.label(k).equals(v)
    return m


def label_selector_mask(nodes: NodeBatch, sel: LabelSelector) -> np.ndarray:
    m = np.ones(len(nodes), dtype=bool)
    for r in sel.requirements:
        m &= requirement_mask(nodes, r)
    return m


def pod_required_affinity_mask(nodes: NodeBatch, pod: PodInfo) -> np.ndarray:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match``: nodeSelector AND required node affinity."""
    m = np.ones(len(nodes), dtype=bool)
    if pod.node_selector:
        m &= labels_mask(nodes, pod.node_selector)
    if pod.required_affinity is not None:
        m &= node_selector_mask(nodes, pod.required_affinity)
    return m


def has_labels_mask(nodes: NodeBatch, keys: list[str]) -> np.ndarray:
    m = np.ones(len(nodes), dtype=bool)
    for k in keys:
        m &= nodes.label(k).exists()
    return m
