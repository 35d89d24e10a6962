"""Stage 6: evaluation. Accuracies are fractions in [0, 1] (tables multiply by 100)."""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from .labels import LabelSplit


def accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(pred == truth)) if truth.size else float("nan")


def evaluate(pred_all: np.ndarray, labeled_pred: np.ndarray, y_true: np.ndarray, split: LabelSplit) -> dict[str, Any]:
    """Accuracy on unlabelled points (vs true labels) and on labelled points (vs the CLEAN labels).

    Own data may lack truth: ``y_true`` (and ``split.y_clean``) hold -1 where no trusted label is known.
    Accuracies are then taken over the points with a known label only (``n_scored_*`` say how many), and
    left out entirely when no point has one (a diagnosis run without clean labels)."""
    unl = split.unlabeled_mask(y_true.size)
    known = y_true >= 0
    known_lab = split.y_clean >= 0
    truth = bool(known.any())
    out: dict[str, Any] = {}
    if truth:
        out["acc_unlabeled"] = accuracy(pred_all[unl & known], y_true[unl & known])
        out["acc_labeled"] = accuracy(labeled_pred[known_lab], split.y_clean[known_lab])
    out["acc_labeled_observed"] = accuracy(labeled_pred, split.y_observed)
    out["n_labeled"] = split.n_labeled
    if truth:
        out["n_flipped"] = split.n_flipped
    out["n_unlabeled"] = int(unl.sum())
    if truth and not known.all():
        out["n_scored_unlabeled"] = int((unl & known).sum())
        out["n_scored_labeled"] = int(known_lab.sum())
    return out


def mark_unreached(pred: np.ndarray, graph: Any, labeled: np.ndarray) -> tuple[np.ndarray, int]:
    """Predictions with the points no label can reach (their connected component holds no labelled point)
    set to -1 instead of an arbitrary class (argmax of an all-zero row is class 0); accuracy counts them
    wrong. Returns (predictions, number of such points)."""
    mask = graph.unreached_mask(labeled)  # each graph type knows its components (anchor graph: W never formed)
    if not mask.any():
        return pred, 0
    pred = np.array(pred, copy=True)
    pred[mask] = -1
    logging.getLogger("lgcexp").warning(
        "%d points lie in graph components without a labelled point: predicted -1 (counted wrong); "
        "increase graph.k or labels.n", int(mask.sum()))
    return pred, int(mask.sum())
