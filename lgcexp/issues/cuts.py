"""The cuts: from a class distribution of the labelled points to a yes/no per label, and the counts.

Confident learning (Northcutt, Jiang & Chuang 2021, JAIR 70: :func:`confident_joint`,
:func:`lgcexp.issues.count.calibrated_counts`, :func:`estimate_issues`, :func:`confident_learning`), the
posterior probability that a label is wrong (:func:`issue_probability`) and the one entry every front end
calls (:func:`decide`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .count import calibrated_counts, count_cut
from .judgement import _has_evidence, label_quality, normalize_rows, suggested_labels
from .options import CL_FILTERS, CUTS

__all__ = ["confident_thresholds", "confident_joint", "estimate_issues", "issue_probability",
           "confident_learning", "decide"]


def confident_thresholds(probs: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class thresholds ``t_j``: the mean of ``probs[:, j]`` over the points labelled j (confident
    learning's "expected self-confidence"); 1 for a class nobody is labelled with (never reached)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    t = np.ones(int(n_classes))
    for j in range(int(n_classes)):
        m = y == j
        if m.any():
            t[j] = probs[m, j].mean()
    return t


def confident_joint(probs: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Confident learning's count matrix ``C[given, true]`` and each point's confident class (-1: none).

    A point is counted where at least one class reaches its threshold (``probs[:, j] >= t_j``); its
    confident class is the most likely of those. Returns (C, confident class)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    c = int(n_classes)
    t = confident_thresholds(probs, y, c)
    above = probs >= t[None, :] - 1e-12
    masked = np.where(above, probs, -np.inf)
    guess = np.where(above.any(axis=1), masked.argmax(axis=1) if y.size else 0, -1)
    C = np.zeros((c, c), dtype=np.int64)
    ok = guess >= 0
    np.add.at(C, (y[ok], guess[ok]), 1)
    return C, guess


def estimate_issues(probs: np.ndarray, y: np.ndarray) -> int:
    """Confident learning's estimate of the number of wrong labels: the off-diagonal sum of the calibrated
    confident joint (:func:`lgcexp.issues.count.calibrated_counts`), from the distribution ``probs`` alone (no
    clean labels)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return 0
    C, _ = confident_joint(probs, y, probs.shape[1])
    N = calibrated_counts(C, y)
    return int(N.sum() - np.trace(N))


def issue_probability(views: Sequence[np.ndarray], y: np.ndarray, prior: np.ndarray | None = None,
                      floor: float = 1e-4) -> np.ndarray:
    """How sure each flag is: the probability that the given label is wrong, in [0, 1].

    ``views``: one or more class distributions of the labelled points (l x c each), each made without the
    point's own label (the method's leave-one-out evidence; the out-of-fold feature view). Read as
    conditionally independent experts, their posterior is the product of the views divided by the class
    prior once per extra view, ``P(j | views) ∝ prod_v (p_vj + floor) / prior_j^(V-1)`` (``prior``: the
    label fractions by default; with one view it is that view), and the probability of a wrong label is
    ``1 - P(y_i | views)``. The geometric mean that ranks the labels (:func:`combine_views`) is this
    posterior at temperature V. Rows where the first view has no evidence get 0. The sum over the labels
    estimates how many are wrong; docs/label_issues.md#probability measures both against the truth."""
    y = np.asarray(y, dtype=np.int64)
    views = [np.asarray(v, dtype=np.float64) for v in views]
    out = np.zeros(y.size)
    if not y.size or not views:
        return out
    c = views[0].shape[1]
    if len(views) == 1:
        P = normalize_rows(views[0])
    else:
        pi = (np.bincount(y, minlength=c) / y.size) if prior is None else np.asarray(prior, dtype=np.float64)
        logp = sum(np.log(v + floor) for v in views) - (len(views) - 1) * np.log(np.maximum(pi, floor))[None, :]
        logp -= logp.max(axis=1, keepdims=True)
        P = normalize_rows(np.exp(logp))
    out = 1.0 - P[np.arange(y.size), y]
    out[~_has_evidence(views[0])] = 0.0
    return np.clip(out, 0.0, 1.0)


def confident_learning(probs: np.ndarray, y: np.ndarray, n_classes: int | None = None, *,
                       filter_by: str = "prune_by_noise_rate", min_per_class: int = 1) -> np.ndarray:
    """Confident learning (Northcutt, Jiang & Chuang 2021, JAIR 70): which labels to prune.

    ``t_j`` = mean ``probs[:, j]`` over points labelled j; ``C[i, j]`` counts points labelled i whose most
    likely class among those reaching their threshold is j; ``N`` = C calibrated
    (:func:`lgcexp.issues.count.calibrated_counts`: row i scaled to the number of points labelled i, rounded
    preserving it). Then:

    - ``confident_joint``: the off-diagonal entries of C (a point labelled i counted under j != i);
    - ``prune_by_noise_rate``: for every i != j, the ``N[i, j]`` points labelled i with the largest margin
      ``probs[:, j] - probs[:, i]`` (chosen for each j independently: a point may be chosen for two);
    - ``prune_by_class``: for every class i, the ``sum_{j != i} N[i, j]`` points labelled i with the lowest
      ``probs[:, i]``;
    - ``both``: flagged by both prunings.

    In every filter a point whose given label is its most likely class is not flagged; the two prunings
    never plan to remove so many labels of a class that fewer than ``min_per_class`` remain (the counts
    are scaled down). Written from the paper (cleanlab, AGPL, is not used; ``tests/test_label_issues.py``
    compares with it where it is installed)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    c = int(probs.shape[1] if n_classes is None else n_classes)
    l = y.size
    flag = np.zeros(l, dtype=bool)
    if l == 0:
        return flag
    if filter_by not in CL_FILTERS:
        raise ValueError(f"filter_by={filter_by!r}: choose one of {', '.join(CL_FILTERS)}")
    C, guess = confident_joint(probs, y, c)
    if filter_by == "confident_joint":
        flag = (guess >= 0) & (guess != y)
    else:
        N = calibrated_counts(C, y)
        by_rate = np.zeros(l, dtype=bool)
        by_class = np.zeros(l, dtype=bool)
        for i in range(c):
            members = np.flatnonzero(y == i)
            if not members.size:
                continue
            off = N[i].copy()
            off[i] = 0
            budget = max(0, members.size - int(min_per_class))
            if off.sum() > budget:
                off = np.floor(off * budget / off.sum()).astype(np.int64)
            if filter_by in ("prune_by_noise_rate", "both"):
                for j in np.flatnonzero(off > 0):
                    margin = probs[members, j] - probs[members, i]
                    by_rate[members[np.argsort(-margin, kind="stable")[:off[j]]]] = True
            if filter_by in ("prune_by_class", "both") and off.sum() > 0:
                by_class[members[np.argsort(probs[members, i], kind="stable")[:off.sum()]]] = True
        flag = by_rate if filter_by == "prune_by_noise_rate" else by_class if filter_by == "prune_by_class" \
            else by_rate & by_class
    # never flag a label that is its point's most likely class
    flag &= suggested_labels(probs, y) != y
    return flag


def decide(probs: np.ndarray, y: np.ndarray, cut: str = "suggested", *, threshold: float = 0.5,
           decision: np.ndarray | None = None, min_per_class: int = 1,
           evidence: np.ndarray | None = None, count: int | None = None) -> np.ndarray:
    """``is_label_issue`` by the rule ``cut`` (:data:`CUTS`); none uses clean labels.

    ``suggested``: the suggested label differs from the given one; ``consensus``: that, and the same in
    the method's own ``evidence`` (l x c; default ``probs``); a confident-learning filter
    (:func:`confident_learning`); ``threshold``: quality below ``threshold``; ``method``: the method's own
    ``decision`` (refused when it has none); ``count``: the estimated number of wrong labels, lowest quality
    first (:func:`lgcexp.issues.count.count_cut`; ``count``: that estimate where the caller made it from all
    its views, default from ``probs``)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if cut == "suggested":
        return suggested_labels(probs, y) != y
    if cut == "consensus":
        own = suggested_labels(probs if evidence is None else evidence, y) != y
        return own & (suggested_labels(probs, y) != y)
    if cut in CL_FILTERS:
        return confident_learning(probs, y, probs.shape[1], filter_by=cut, min_per_class=min_per_class)
    if cut == "threshold":
        return label_quality(probs, y) < float(threshold)
    if cut == "count":
        return count_cut(probs, y, count)
    if cut == "method":
        if decision is None:
            raise ValueError("cut='method': this method makes no decision of its own")
        return np.asarray(decision, dtype=bool).copy()
    raise ValueError(f"cut={cut!r}: choose one of {', '.join(CUTS)}")
