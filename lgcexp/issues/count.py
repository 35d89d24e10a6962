"""How many labels are wrong: one estimate, made without clean labels, and the cut that follows it.

:func:`estimate_wrong_labels` is the count every front end reports (``estimated_issues``): confident
learning's calibrated joint (Northcutt, Jiang & Chuang 2021, JAIR 70, section 3.1) with two changes, each
measured in docs/label_issues.md#count:

1. the distribution is first calibrated to the given labels by one temperature (Guo et al. 2017, "On
   calibration of modern neural networks": the temperature that maximises the likelihood of the given labels,
   :func:`calibrate_temperature`), so that its confidence means the same for every model; where many labels
   are wrong (a uniform noise rate fitted with the temperature above :data:`MATERIAL_NOISE`,
   :func:`calibrate_under_noise`) the temperature is the one fitted jointly with that rate: temperature alone
   reads the wrong labels as the model's doubt and flattens the view (ISOLET, 1,040 labels, 60 % noise, 26
   classes: 0 counted of 624 wrong; fully labelled ISOLET at 5 %: 4.3 times the truth). At lower fitted rates
   temperature alone is kept: the joint fit sharpens the view a little and adds its own confident mistakes to
   the count (+5-10 % at 1-2 % noise, docs/label_issues.md#count);
2. a point counts under the class that holds **more than half** of its probability (the class its evidence
   names clearly; at most one can), instead of under any class above that class's mean self-confidence.
   Confident learning's per-class mean is ~0.9 for a good model, so a wrong label whose true class holds 0.6
   is counted nowhere, and calibration spreads the uncounted points like the counted ones: the joint
   under-counts (CIFAR-10N: 2,785 / 2,866 where 4,505 are wrong). The majority rule counts those labels and
   leaves out the points whose evidence is split.

Where two views judge (the graph's leave-one-out and the feature view, or the user's ``pred_probs``), a point
counts only where both name the same class clearly: two experts' clear agreement (the ``consensus`` cut's rule
for the count), which leaves out most of one view's own mistakes at low noise rates. The calibration under
noise of point 1 applies to two or more views only: one view alone (the user's ``pred_probs``) is calibrated by
temperature alone, since without a second view to agree with, the sharper joint fit counts every point whose
evidence leans to another class (a test's synthetic set with 10 % uniform noise: 536 counted where 299 are
wrong, against 339 by temperature alone). The counted matrix is
calibrated as confident learning's (:func:`calibrated_counts`: each row scaled to the number
of points given that label); its off-diagonal sum is the estimate. :func:`count_cut`
flags that many labels, the lowest quality first.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .judgement import _has_evidence, label_quality, normalize_rows

__all__ = ["MAJORITY", "MATERIAL_NOISE", "calibrated_counts", "calibrate_temperature", "calibrate_under_noise",
           "calibrate_view", "clear_classes", "estimate_wrong_labels", "count_cut"]

#: a point counts under its most likely class where that class holds more than this share of the evidence
MAJORITY = 0.5
#: a view is calibrated under label noise where the fitted uniform noise rate exceeds this, else by temperature
MATERIAL_NOISE = 0.05

_FLOOR = 1e-12


def _round_rows(M: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Integers per cell whose row sums are ``totals``: each cell's floor, plus one for the cells with the
    largest remainders (largest-remainder rounding, row by row)."""
    F = np.floor(M).astype(np.int64)
    rem = M - F
    for i in range(M.shape[0]):
        extra = int(round(float(totals[i]))) - int(F[i].sum())
        if extra > 0:
            F[i, np.argsort(-rem[i], kind="stable")[:extra]] += 1
    return F


def calibrated_counts(C: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Confident learning's calibration of the confident joint, as integer counts: each class keeps at
    least one confident point of its own (diagonal >= 1), each row is scaled to the number of points given
    that label and rounded preserving that number (so ``counts[i, j] = l Q[i, j]``, Q the estimated joint
    distribution of given and true labels)."""
    C = np.array(C, dtype=np.float64)
    np.fill_diagonal(C, np.maximum(np.diag(C), 1.0))
    counts = np.bincount(y, minlength=C.shape[0]).astype(np.float64)
    Ct = C * (counts / C.sum(axis=1))[:, None]
    return _round_rows(Ct, counts)


def calibrate_temperature(probs: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """``probs`` at the temperature T that maximises the mean log-likelihood of the given labels,
    ``softmax(log(p) / T)`` (bounded search over T in [0.05, 20]); returns (calibrated probs, T). Rows
    without evidence stay zero. Classes with zero probability stay at zero."""
    from scipy.optimize import minimize_scalar

    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    has = _has_evidence(P)
    if not has.any():
        return P.copy(), 1.0
    L = np.log(np.maximum(P[has], _FLOOR))
    yl = y[has]
    rows = np.arange(yl.size)

    def scaled(T: float) -> np.ndarray:
        Z = L / T
        return Z - Z.max(axis=1, keepdims=True)

    def nll(T: float) -> float:
        Z = scaled(T)
        return float(np.mean(np.log(np.exp(Z).sum(axis=1)) - Z[rows, yl]))

    T = float(minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded", options={"xatol": 1e-4}).x)
    out = np.zeros_like(P)
    out[has] = normalize_rows(np.exp(scaled(T)))
    return out, T


def calibrate_under_noise(probs: np.ndarray, y: np.ndarray,
                          plain: tuple[np.ndarray, float] | None = None) -> tuple[np.ndarray, float, float]:
    """``probs`` at the temperature that maximises the likelihood of the given labels *under uniform label
    noise*: a given label is the true class with probability ``1 - rho`` and any other class with ``rho / (c - 1)``,
    so the likelihood of ``y_i`` is ``(1 - rho) q_T(y_i) + rho (1 - q_T(y_i)) / (c - 1)`` with
    ``q_T = softmax(log(p) / T)``. ``T`` and ``rho`` are fitted jointly (L-BFGS-B on ``(log T, rho)`` with the
    analytic gradient; ``T`` in [0.05, 20], ``rho`` in [0, (c - 1) / c]; two starts: plain calibration with
    ``rho = 0``, and ``T = 1, rho = 0.2``). Returns (calibrated probs ``q_T``, T, rho).

    Why: :func:`calibrate_temperature` treats every given label as true, so where many labels are wrong the
    likelihood is best served by a flat distribution (T grows) and no point names another class clearly; with
    26 classes and 60 % uniform noise the count fell to 0 (docs/label_issues.md#count). Modelling the noise
    keeps the distribution as sharp as the clean labels support (the noisy-label likelihood of Natarajan et al.
    2013 and of the noise-adaptation layer of Goldberger & Ben-Reuven 2017, here with one rate and one
    temperature). With ``rho`` fixed at 0 the objective is :func:`calibrate_temperature`'s. ``plain``: that
    function's result for the same arguments, where the caller has it (the first start)."""
    from scipy.optimize import minimize

    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    c = int(P.shape[1]) if P.ndim == 2 else 0
    has = _has_evidence(P)
    if not has.any() or c < 2:
        return P.copy(), 1.0, 0.0
    L = np.log(np.maximum(P[has], _FLOOR))
    yl = y[has]
    rows = np.arange(yl.size)
    rho_max = (c - 1) / c

    def parts(theta: float) -> tuple[np.ndarray, np.ndarray]:
        Z = L / np.exp(theta)
        Z = Z - Z.max(axis=1, keepdims=True)
        Q = np.exp(Z)
        Q /= Q.sum(axis=1, keepdims=True)
        return Z, Q

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, rho = float(x[0]), float(x[1])
        Z, Q = parts(theta)
        s = Q[rows, yl]
        a, b = rho / (c - 1), 1.0 - rho * c / (c - 1)
        m = np.maximum(a + b * s, _FLOOR)
        d_theta = b * s * ((Q * Z).sum(axis=1) - Z[rows, yl]) / m
        d_rho = (1.0 - c * s) / ((c - 1) * m)
        return float(-np.mean(np.log(m))), -np.array([d_theta.mean(), d_rho.mean()])

    _, T0 = calibrate_temperature(P, y) if plain is None else plain
    bounds = [(np.log(0.05), np.log(20.0)), (0.0, rho_max)]
    best = None
    for start in ((np.log(T0), 0.0), (0.0, min(0.2, rho_max))):
        r = minimize(objective, np.array(start), jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"ftol": 1e-12, "gtol": 1e-9, "maxiter": 500})
        if best is None or r.fun < best.fun:
            best = r
    theta, rho = float(best.x[0]), float(best.x[1])
    out = np.zeros_like(P)
    out[has] = parts(theta)[1]
    return out, float(np.exp(theta)), rho


def calibrate_view(probs: np.ndarray, y: np.ndarray, under_noise: bool | None = None) -> np.ndarray:
    """One view calibrated for the count: :func:`calibrate_under_noise` where its fitted noise rate exceeds
    :data:`MATERIAL_NOISE`, else :func:`calibrate_temperature` (module docstring); ``under_noise`` True / False
    forces one way (benchmarks compare them)."""
    plain = calibrate_temperature(probs, y)
    if under_noise is False:
        return plain[0]
    Q, _, rho = calibrate_under_noise(probs, y, plain)
    return plain[0] if under_noise is None and rho <= MATERIAL_NOISE else Q


def clear_classes(views: Sequence[np.ndarray], y: np.ndarray, under_noise: bool | None = None) -> np.ndarray:
    """The class every view names clearly, per labelled point (-1: none): each view calibrated
    (:func:`calibrate_view` where there are two or more views, :func:`calibrate_temperature` for one) and its
    most likely class holding more than :data:`MAJORITY`, the same class in every view."""
    y = np.asarray(y, dtype=np.int64)
    clear = np.full(y.size, -1, dtype=np.int64)
    best = None
    ok = np.ones(y.size, dtype=bool)
    views = list(views)
    if under_noise is None and len(views) < 2:
        under_noise = False  # one view: temperature alone (module docstring)
    for v in views:
        Q = calibrate_view(v, y, under_noise)
        b = Q.argmax(axis=1) if y.size else np.zeros(0, dtype=np.int64)
        ok &= Q[np.arange(y.size), b] > MAJORITY
        if best is None:
            best = b
        else:
            ok &= b == best
    if best is not None:
        clear[ok] = best[ok]
    return clear


def estimate_wrong_labels(views: np.ndarray | Sequence[np.ndarray], y: np.ndarray,
                          under_noise: bool | None = None) -> int:
    """The estimated number of wrong labels among ``y`` from one or more class distributions, each made without
    the labels it judges (module docstring): the points every view names clearly (:func:`clear_classes`)
    counted under (given, named class), each row scaled to its label count
    (:func:`calibrated_counts`), the off-diagonal summed. With two views (the graph's
    leave-one-out and the feature view) a label counts as wrong only where both name the same other class
    clearly, as the ``consensus`` cut flags only where both prefer another class."""

    views = [views] if isinstance(views, np.ndarray) and views.ndim == 2 else list(views)
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return 0
    c = int(np.asarray(views[0]).shape[1])
    clear = clear_classes(views, y, under_noise)
    C = np.zeros((c, c), dtype=np.int64)
    ok = clear >= 0
    np.add.at(C, (y[ok], clear[ok]), 1)
    N = calibrated_counts(C, y)
    return int(N.sum() - np.trace(N))


def count_cut(probs: np.ndarray, y: np.ndarray, count: int | None = None) -> np.ndarray:
    """Flag the ``count`` labels of lowest quality (``probs[i, y_i]``, ties by position; default
    :func:`estimate_wrong_labels`), never one whose row has no evidence."""
    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    k = estimate_wrong_labels(P, y) if count is None else int(count)
    flag = np.zeros(y.size, dtype=bool)
    q = label_quality(P, y)
    eligible = np.flatnonzero(_has_evidence(P))
    order = eligible[np.argsort(q[eligible], kind="stable")]
    flag[order[:max(0, min(k, order.size))]] = True
    return flag
