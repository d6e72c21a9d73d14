"""Vectorised node selection: node selectors and label requirements over a NodeTable batch.

The scalar forms live on the model types (``Requirement.matches`` etc.); these functions give the
same answers for every node of a batch at once, using the table's label columns. Tests check the
two agree.
"""

from __future__ import annotations

import numpy as np

from pysched.apis.core.model import FieldRequirement, LabelSelector, NodeSelector, NodeSelectorTerm, Requirement
from pysched.backend.cache.nodetable import NodeTable


def requirement_mask(table: NodeTable, slots: np.ndarray, req: Requirement) -> np.ndarray:
    col = table.label_column(req.key)
    codes = col.codes[slots]
    op = req.operator
    if op == "In":
        wanted = col.codes_of(req.values)
        if not len(wanted):
            return np.zeros(len(slots), dtype=bool)
        return np.isin(codes, wanted)
    if op == "NotIn":
        wanted = col.codes_of(req.values)
        if not len(wanted):
            return np.ones(len(slots), dtype=bool)
        return ~np.isin(codes, wanted)
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    if op in ("Gt", "Lt"):
        vals = col.ints()[codes]  # code -1 picks the trailing NaN
        with np.errstate(invalid="ignore"):
            return (vals > req.number) if op == "Gt" else (vals < req.number)
    return np.zeros(len(slots), dtype=bool)


def field_mask(table: NodeTable, slots: np.ndarray, f: FieldRequirement) -> np.ndarray:
    slot = table.slot_by_name.get(f.value, -1)
    eq = slots == slot
    return eq if f.operator == "In" else ~eq


def term_mask(table: NodeTable, slots: np.ndarray, term: NodeSelectorTerm) -> np.ndarray:
    if not term.valid or (not term.expressions and not term.fields):
        return np.zeros(len(slots), dtype=bool)
    m = np.ones(len(slots), dtype=bool)
    for r in term.expressions:
        m &= requirement_mask(table, slots, r)
    for f in term.fields:
        m &= field_mask(table, slots, f)
    return m


def node_selector_mask(table: NodeTable, slots: np.ndarray, sel: NodeSelector) -> np.ndarray:
    m = np.zeros(len(slots), dtype=bool)
    for t in sel.terms:
        m |= term_mask(table, slots, t)
    return m


def labels_mask(table: NodeTable, slots: np.ndarray, labels: dict) -> np.ndarray:
    """``spec.nodeSelector``: every key present with exactly that value."""
    m = np.ones(len(slots), dtype=bool)
    for k, v in labels.items():
        col = table.label_column(k)
        code = col.vocab.get(v)
        if code is None:
            return np.zeros(len(slots), dtype=bool)
        m &= col.codes[slots] == code
    return m


def label_selector_mask(table: NodeTable, slots: np.ndarray, sel: LabelSelector) -> np.ndarray:
    m = np.ones(len(slots), dtype=bool)
    for r in sel.requirements:
        m &= requirement_mask(table, slots, r)
    return m


def pod_required_affinity_mask(table: NodeTable, slots: np.ndarray, pod) -> np.ndarray:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match``: nodeSelector AND required node affinity."""
    m = np.ones(len(slots), dtype=bool)
    if pod.node_selector:
        m &= labels_mask(table, slots, pod.node_selector)
    if pod.required_affinity is not None:
        m &= node_selector_mask(table, slots, pod.required_affinity)
    return m


def has_labels_mask(table: NodeTable, slots: np.ndarray, keys) -> np.ndarray:
    m = np.ones(len(slots), dtype=bool)
    for k in keys:
        m &= table.label_column(k).codes[slots] >= 0
    return m
