"""The judgement record: what a method that can judge its labels hands over (numpy only).

An algorithm that judges labels returns a :class:`LabelJudgement`: for every labelled point, a class
distribution made from the evidence of the *other* labels. The algorithms import this module and nothing
else of :mod:`lgcexp.issues`; everything that turns a judgement into flags lives above them
(:mod:`lgcexp.issues.judge`).

- :func:`graph_loo_probs`: the graph's leave-one-out distribution from the labelled block ``P_LL`` of the
  propagation matrix with its diagonal removed (the paper's leave-one-out, section 3, eq. 8-9);
- :func:`label_quality` (``probs[i, y_i]``) and :func:`suggested_labels` (the best-backed class).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["LabelJudgement", "normalize_rows", "label_quality", "suggested_labels", "graph_loo_probs",
           "weighted_loo_judgement"]


@dataclass(frozen=True)
class LabelJudgement:
    """A method's judgement of its labelled points.

    ``probs`` (l, c): for each labelled point, its class distribution from the evidence of the other
    labels (rows sum to 1; a row of zeros where there is no evidence: such a label keeps quality 1 and is
    never flagged). ``decision``: the method's own yes/no verdict, used by ``cut=method`` (None: the method
    has none of its own). ``source``: a short description of ``probs`` for the record. ``leave_one_out`` (l, c):
    the graph's plain leave-one-out of the labels, every other label counted once (:func:`graph_loo_probs`
    without weights; LGC's ``probs`` themselves; for AutoL and ``auto`` at their alpha, not their vote share at the
    learnt weights, which were fitted to every label, the judged one included), or None where the method has
    none. The count of wrong labels reads it in place of ``probs``, and its identified fitted noise rate may be
    the count even where it is the only view (:func:`lgcexp.issues.count.estimate_wrong_labels`, ``alone``).
    """

    probs: np.ndarray
    decision: np.ndarray | None = None
    source: str = ""
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    leave_one_out: np.ndarray | None = None


def normalize_rows(V: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (non-negative input); a row summing to 0 stays 0."""
    V = np.asarray(V, dtype=np.float64)
    s = V.sum(axis=1, keepdims=True)
    out = np.zeros_like(V)
    np.divide(V, s, out=out, where=s > 0)
    return out


def _has_evidence(probs: np.ndarray) -> np.ndarray:
    return np.asarray(probs).sum(axis=1) > 0


def label_quality(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``probs[i, y_i]``: the share of the evidence for the given label, in [0, 1]; 1 where a row has no
    evidence (nothing speaks against the label)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    q = probs[np.arange(y.size), y] if y.size else np.zeros(0)
    return np.clip(np.where(_has_evidence(probs), q, 1.0), 0.0, 1.0)


def suggested_labels(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The class with the most evidence; the given label where a row has no evidence or where the given
    label ties with the best class."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return y.copy()
    best = probs.argmax(axis=1)
    keep = ~_has_evidence(probs) | (probs[np.arange(y.size), y] >= probs[np.arange(y.size), best])
    return np.where(keep, y, best)


def graph_loo_probs(P_LL: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None = None) -> np.ndarray:
    """The graph's leave-one-out class distribution of every labelled point, with no learning.

    ``P_LL`` (l x l): the labelled block of the propagation matrix ``(1 - alpha)(I - alpha S)^-1`` (any
    positive scale). Without its diagonal (a label's influence on itself), row i of ``P~ diag(w) B`` holds
    how much each class's labels (weighted by ``weights``, default 1) reach point i; rows are normalised to
    sum to 1. This is LGC's prediction at a labelled point with that point's own label left out."""
    return _loo_votes(_without_diagonal(P_LL), y, n_classes, weights)


def _without_diagonal(P_LL: np.ndarray) -> np.ndarray:
    """``P~``: a float64 copy of ``P_LL`` with its diagonal (each label's influence on itself) set to 0."""
    P = np.array(P_LL, dtype=np.float64, copy=True)
    np.fill_diagonal(P, 0.0)
    return P


def _loo_votes(P: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None) -> np.ndarray:
    """``normalize_rows(P~ diag(w) B)`` for ``P~`` without its diagonal (:func:`graph_loo_probs`)."""
    y = np.asarray(y, dtype=np.int64)
    w = np.ones(y.size) if weights is None else np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    V = np.zeros((y.size, int(n_classes)))
    for k in range(int(n_classes)):  # P~ @ (w * B) without forming B
        m = y == k
        if m.any():
            V[:, k] = P[:, m] @ w[m]
    return normalize_rows(np.maximum(V, 0.0))


def weighted_loo_judgement(P_LL: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray,
                           decision: np.ndarray, source: str) -> LabelJudgement:
    """AutoL's and ``auto``'s judgement: ``probs``, each label's share of the leave-one-out vote of the other
    labels weighted by the learnt ``weights``; ``leave_one_out``, the same vote with every other label counted
    once (for the count: the weights were fitted to every label, the judged one included). ``P~`` is formed once
    for both (:func:`graph_loo_probs`)."""
    P = _without_diagonal(P_LL)
    return LabelJudgement(probs=_loo_votes(P, y, n_classes, weights), decision=decision, source=source,
                          leave_one_out=_loo_votes(P, y, n_classes, None))
