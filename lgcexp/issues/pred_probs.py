"""The user's own model as a view: ``find_label_issues(labels, pred_probs=...)`` (docs/label_issues.md#pred-probs).

``pred_probs`` (n x c) are out-of-fold class probabilities of the user's model, each row made by a model that
did not see that point's label (cleanlab's contract, Northcutt et al. 2021). Without features or a graph they
are the judgement itself: the ranking is the self-confidence ``pred_probs[i, given]`` (Kuan & Mueller 2022
measure it as the best simple score) and the flags are the estimated number of wrong labels, lowest
self-confidence first (``cut="count"``, :mod:`lgcexp.issues.count`). With features or a graph they are the
second view beside the graph's leave-one-out evidence, instead of the tool's own feature view
(:func:`lgcexp.issues.judge.judge`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UserError
from .judgement import LabelJudgement

__all__ = ["ROW_SUM_TOL", "check_pred_probs", "pred_probs_judgement"]

#: how far a row of ``pred_probs`` may sum from 1 (float32 softmax rows are within ~1e-6)
ROW_SUM_TOL = 1e-3


def check_pred_probs(pred_probs: Any, n: int, classes: np.ndarray) -> np.ndarray:
    """``pred_probs`` as a float64 (n x c) array, checked before any work; each refusal is one line naming
    ``pred_probs``. Column j is the j-th class of ``classes`` (the sorted label values; with integer labels
    column j is class j, so the labels must be 0..c-1). The input is never modified."""
    import scipy.sparse as sp

    if sp.issparse(pred_probs):
        raise UserError("pred_probs: a sparse matrix is not allowed; give a dense (n x c) array of probabilities")
    P = np.asarray(pred_probs)
    if P.dtype == object or P.dtype.kind not in "biuf":
        raise UserError(f"pred_probs: its entries have dtype {P.dtype}; give an (n x c) array of probabilities")
    if P.ndim != 2:
        raise UserError(f"pred_probs: it has shape {P.shape}; it must be 2-D (one row per point, one column per "
                        "class)")
    if P.shape[0] != n:
        raise UserError(f"pred_probs has {P.shape[0]} rows but labels has {n} values; they must be equal")
    c = int(classes.size)
    if P.shape[1] != c:
        more = "more" if P.shape[1] > c else "fewer"
        raise UserError(f"pred_probs has {P.shape[1]} columns, {more} than the {c} classes the labels name "
                        f"({', '.join(map(str, classes[:12]))}{', ...' if c > 12 else ''}); one column per class")
    if classes.dtype.kind in "iu" and not np.array_equal(classes, np.arange(c)):
        raise UserError(f"pred_probs: with integer labels column j is class j, so the labels must be 0..{c - 1}; "
                        f"they name {', '.join(map(str, classes[:12]))}{', ...' if c > 12 else ''}")
    P = np.asarray(P, dtype=np.float64)
    bad = ~np.isfinite(P)
    if bad.any():
        raise UserError(f"pred_probs: {int(bad.any(axis=1).sum())} row(s) hold NaN or infinite entries (first: "
                        f"row {int(np.flatnonzero(bad.any(axis=1))[0])}); probabilities must be finite")
    if (P < 0).any():
        rows = np.flatnonzero((P < 0).any(axis=1))
        raise UserError(f"pred_probs: {rows.size} row(s) hold negative entries (first: row {int(rows[0])}, "
                        f"{P[rows[0]].min():.6g}); probabilities must be >= 0")
    s = P.sum(axis=1)
    off = np.abs(s - 1.0) > ROW_SUM_TOL
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise UserError(f"pred_probs: {int(off.sum())} row(s) do not sum to 1 (first: row {i}, sum {s[i]:.6g}); "
                        "give probabilities (a softmax), not scores or log-probabilities")
    return P


def pred_probs_judgement(P_labeled: np.ndarray) -> LabelJudgement:
    """The judgement of the labelled points from their rows of ``pred_probs`` alone (rows renormalised)."""
    from .judgement import normalize_rows

    return LabelJudgement(probs=normalize_rows(P_labeled),
                          source="pred_probs: the user's out-of-fold class probabilities")
