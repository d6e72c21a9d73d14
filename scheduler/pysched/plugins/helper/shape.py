"""Scoring function shapes (``helper.FunctionShape``): kube's broken-linear function over
utilisation points, and ``validateFunctionShape``'s rules with its messages.

A shape is a list of points with ``utilization`` (0-100) and ``score`` (0-10, the configuration's
``MaxCustomPriorityScore``); the function scales the scores to 0-100 (``MaxNodeScore``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
SCORE_SCALE = 100 // MAX_CUSTOM_PRIORITY_SCORE   # MaxNodeScore / MaxCustomPriorityScore


class ShapePoint(Protocol):
    utilization: int
    score: int


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """``BuildBrokenLinearFunction`` at ``p``: ``shape`` is (utilisation, score) pairs already
    scaled; the first score below the first point, the last above the last, linear between (Go's
    integer division, which truncates toward zero)."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            pu, ps = shape[i - 1]
            num = (s - ps) * (p - pu)
            den = u - pu
            q = abs(num) // abs(den)
            return ps + (q if (num >= 0) == (den > 0) else -q)
    return shape[-1][1]


def scaled(points: Sequence[ShapePoint]) -> list[tuple[int, int]]:
    """The points as the scorer uses them: scores times ``SCORE_SCALE``."""
    return [(pt.utilization, pt.score * SCORE_SCALE) for pt in points]


def function_shape_errors(points: Sequence[ShapePoint], path: str) -> list[str]:
    """``validateFunctionShape``: every problem with ``points``, worded and ordered as kube's
    field errors (``<path>: Required value: ...``, ``<path>[i].utilization: Invalid value: ...``)."""
    if not points:
        return [f"{path}: Required value: at least one point must be specified"]
    errors = []
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            errors.append(f"{path}[{i}].utilization: Invalid value: {points[i].utilization}: "
                          "values must be sorted in increasing order")
            break
    for i, pt in enumerate(points):
        if not 0 <= pt.utilization <= MAX_UTILIZATION:
            errors.append(f"{path}[{i}].utilization: Invalid value: {pt.utilization}: "
                          f"not in valid range [0, {MAX_UTILIZATION}]")
        if not 0 <= pt.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(f"{path}[{i}].score: Invalid value: {pt.score}: "
                          f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
    return errors


def internal_json(points: Sequence[ShapePoint]) -> str:
    """The points as kube's field errors print an internal ``[]UtilizationShapePoint`` (Go's JSON
    of a struct without tags: ``[{"Utilization":0,"Score":10}]``)."""
    return json.dumps([{"Utilization": pt.utilization, "Score": pt.score} for pt in points], separators=(",", ":"))

