"""Score normalisation shared by the in-tree plugins (upstream's ``helper.DefaultNormalizeScore``)."""

from __future__ import annotations

import numpy as np

from pysched.framework import MAX_NODE_SCORE


def default_normalize(scores: np.ndarray, reverse: bool) -> None:
    """``helper.DefaultNormalizeScore`` with MaxNodeScore, in place."""
    if not len(scores):
        return
    mx = int(scores.max())
    if mx <= 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return
    np.floor_divide(scores * MAX_NODE_SCORE, mx, out=scores)
    if reverse:
        np.subtract(MAX_NODE_SCORE, scores, out=scores)
