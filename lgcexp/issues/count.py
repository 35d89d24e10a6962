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
of points given that label); its off-diagonal sum is the *majority count*.

3. With two views, the uniform noise rate fitted with its temperature to the last view that identifies it (the
   feature view, or the user's ``pred_probs``; else the graph's plain leave-one-out,
   ``LabelJudgement.leave_one_out``;
   :func:`lgcexp.calibration.noise_rate_identified`: a weak view, such as the linear view of a few sampled labels,
   leaves the likelihood flat in the rate and its fit is a guess, while the graph's evidence there identifies it),
   times the number of labels, is the count where (a) it is at least
   :data:`UNIFORM_SHARE` of the majority count and (b) the views' combination finds the wrong labels too (its own
   fitted rate is at least :data:`COMBINED_SHARE` of the view's, or the rate is material). At low noise rates
   the majority count also counts the views' own confident mistakes on right labels (fully labelled ISOLET:
   ~160 of 7,797; MNIST's test images: ~70), which no count made without clean labels can tell from wrong
   labels by *where* the evidence points. The fit tells them apart by *how far* it points: under uniform noise a
   wrong label is explained only where the view gives it about ``rho / (c - 1)``, almost nothing, while a
   confident mistake leaves its right label a share that the view's doubt explains. Where the wrong labels
   follow the classes' confusions (the confusion noise model; human noise behaves so) they sit in the views'
   doubt: the feature view's fitted rate reads ~0 (a), or, where it is a stronger classifier than the one whose
   confusions made the flips (MNIST's image view), the combination's reads ~0 because the graph's neighbours
   share a confused point's look (b); either way the majority count stands. Measured on digits, ISOLET and
   MNIST's test images at 0.5-40 % (docs/label_issues.md#count-fitted).

4. One view alone keeps the majority count (the user's ``pred_probs``, the k-NN baseline), except the graph's
   plain leave-one-out of a graph method (LGC, AutoL, auto: ``LabelJudgement.leave_one_out``, which the count
   reads in place of AutoL's vote share at its learnt weights, fitted to every label) where its feature view
   failed the gate, as with a few labels per class: its identified fitted rate is the count where it is at least
   :data:`UNIFORM_SHARE` of the majority count. There the majority count, calibrated by temperature alone, names
   no class clearly under heavy noise and read 7-34 for 104 (ISOLET, 10 labels per class, 40 % uniform noise,
   means over 20 seeds), while the fitted rate reads 105-107; under confusion noise it reads low (0.39-0.81 of
   the truth at 40 %). docs/label_issues.md#count-fitted ("One view").

:func:`count_cut` flags that many labels, the lowest quality first.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..calibration import calibrate_temperature, calibrate_under_noise, noise_rate_identified
from .judgement import _has_evidence, label_quality

__all__ = ["COMBINED_SHARE", "MAJORITY", "MATERIAL_NOISE", "UNIFORM_SHARE", "calibrated_counts",
           "calibrate_temperature", "calibrate_under_noise", "calibrate_view", "clear_classes",
           "estimate_wrong_labels", "majority_count", "count_cut"]

#: a point counts under its most likely class where that class holds more than this share of the evidence
MAJORITY = 0.5
#: a view is calibrated under label noise where the fitted uniform noise rate exceeds this, else by temperature
MATERIAL_NOISE = 0.05
#: with two views, the last view's fitted uniform noise rate times the labels is the count where it is at least
#: this share of the majority count (module docstring, point 3)
UNIFORM_SHARE = 0.25
#: ... and where the views' combination's own fitted rate is at least this share of it (module docstring, point 3)
COMBINED_SHARE = 0.25


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


def calibrate_view(probs: np.ndarray, y: np.ndarray, under_noise: bool | None = None) -> np.ndarray:
    """One view calibrated for the count: :func:`calibrate_under_noise` where its fitted noise rate exceeds
    :data:`MATERIAL_NOISE`, else :func:`calibrate_temperature` (module docstring); ``under_noise`` True / False
    forces one way (benchmarks compare them)."""
    return _calibrate(probs, y, under_noise, fit_rate=False)[0]


def _calibrate(probs: np.ndarray, y: np.ndarray, under_noise: bool | None,
               fit_rate: bool = True) -> tuple[np.ndarray, float]:
    """(:func:`calibrate_view` under ``under_noise``, the fitted uniform noise rate where the view identifies it,
    :func:`lgcexp.calibration.noise_rate_identified`, else 0). With ``under_noise`` False and ``fit_rate`` False
    nothing is fitted (temperature alone, rate 0); otherwise the joint fit is made once and serves both."""
    plain = calibrate_temperature(probs, y)
    if under_noise is False and not fit_rate:
        return plain[0], 0.0
    Q, T, rho = calibrate_under_noise(probs, y, plain)
    rate = rho if noise_rate_identified(probs, y, T, rho, plain[1]) else 0.0
    under = under_noise is True or (under_noise is None and rho > MATERIAL_NOISE)
    return (Q if under else plain[0]), rate


def _calibrated_views(views: Sequence[np.ndarray], y: np.ndarray, under_noise: bool | None = None,
                      alone: bool = False) -> tuple[np.ndarray, list[float]]:
    """(:func:`clear_classes`, each view's fitted uniform noise rate; 0 where none was fitted or the view does not
    identify it): each view calibrated once. One view is calibrated by temperature alone (module docstring); its
    rate is fitted only where it may count, ``alone`` (point 4)."""
    y = np.asarray(y, dtype=np.int64)
    clear = np.full(y.size, -1, dtype=np.int64)
    best, rhos = None, []
    ok = np.ones(y.size, dtype=bool)
    views = list(views)
    if under_noise is None and len(views) < 2:
        under, fit = False, alone  # one view: temperature alone; its rate only where it may count
    else:
        under, fit = under_noise, under_noise is not False
    for v in views:
        Q, rho = _calibrate(v, y, under, fit_rate=fit)
        rhos.append(rho)
        b = Q.argmax(axis=1) if y.size else np.zeros(0, dtype=np.int64)
        ok &= Q[np.arange(y.size), b] > MAJORITY
        if best is None:
            best = b
        else:
            ok &= b == best
    if best is not None:
        clear[ok] = best[ok]
    return clear, rhos


def clear_classes(views: Sequence[np.ndarray], y: np.ndarray, under_noise: bool | None = None) -> np.ndarray:
    """The class every view names clearly, per labelled point (-1: none): each view calibrated
    (:func:`calibrate_view` where there are two or more views, :func:`calibrate_temperature` for one) and its
    most likely class holding more than :data:`MAJORITY`, the same class in every view."""
    return _calibrated_views(views, y, under_noise)[0]


def _view_list(views: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    """One (n, c) array or a sequence of them, as a list."""
    return [views] if isinstance(views, np.ndarray) and views.ndim == 2 else list(views)


def _counts(views: list[np.ndarray], y: np.ndarray, under_noise: bool | None = None,
            alone: bool = False) -> tuple[int, int]:
    """(majority count, the fitted uniform noise rate of the last view that identifies its rate
    (:func:`lgcexp.calibration.noise_rate_identified`) times the labels, 0 where none does; one view's rate only
    where ``alone``)."""
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return 0, 0
    c = int(np.asarray(views[0]).shape[1])
    clear, rhos = _calibrated_views(views, y, under_noise, alone)
    C = np.zeros((c, c), dtype=np.int64)
    ok = clear >= 0
    np.add.at(C, (y[ok], clear[ok]), 1)
    N = calibrated_counts(C, y)
    rho = next((r for r in reversed(rhos) if r > 0), 0.0)  # the last view that identifies its rate
    return int(N.sum() - np.trace(N)), int(round(rho * y.size))


def majority_count(views: np.ndarray | Sequence[np.ndarray], y: np.ndarray, under_noise: bool | None = None) -> int:
    """The majority count: the points every view names clearly (:func:`clear_classes`) counted under (given,
    named class), each row scaled to its label count (:func:`calibrated_counts`), the off-diagonal summed. With
    two views (the graph's leave-one-out and the feature view) a label counts as wrong only where both name the
    same other class clearly, as the ``consensus`` cut flags only where both prefer another class."""
    return _counts(_view_list(views), y, under_noise)[0]


def estimate_wrong_labels(views: np.ndarray | Sequence[np.ndarray], y: np.ndarray,
                          under_noise: bool | None = None, *, alone: bool = False) -> int:
    """The estimated number of wrong labels among ``y`` from one or more class distributions, each made without
    the labels it judges (module docstring): with two or more views, the uniform noise rate fitted to the last
    view that identifies it (the feature view, or the user's ``pred_probs``; else the first view: the graph's plain
    leave-one-out where :func:`lgcexp.issues.judge.judge` counts) times the
    number of labels where it is at least
    :data:`UNIFORM_SHARE` of the :func:`majority_count` and the views' combination agrees
    (:func:`_combination_agrees`), else the majority count (module docstring, point 3). ``alone``: the one view
    is the graph's leave-one-out (:attr:`LabelJudgement.leave_one_out`), whose identified fitted rate is the count
    where it is at least :data:`UNIFORM_SHARE` of the majority count (point 4). ``under_noise`` True / False forces
    every view's calibration and gives the majority count (benchmarks compare them)."""
    views = _view_list(views)
    majority, fitted = _counts(views, y, under_noise, alone)
    if under_noise is not None or fitted < UNIFORM_SHARE * majority:
        return majority
    if len(views) >= 2:
        return fitted if _combination_agrees(views, y, fitted) else majority
    return fitted if alone else majority  # one view: its rate was fitted only where alone


def _combination_agrees(views: Sequence[np.ndarray], y: np.ndarray, fitted: int) -> bool:
    """Whether the first and last views' combination (:func:`lgcexp.issues.views.combine_views`; the reported
    distribution where the first view is the judged evidence, as for LGC) finds the wrong labels too: its own
    fitted uniform rate times the labels is at least :data:`COMBINED_SHARE` of ``fitted``, or ``fitted`` is a
    material rate (above :data:`MATERIAL_NOISE`, where the views are calibrated under noise and the combination's
    tails flatten). Under confusion noise the graph's neighbours share a confused point's look, so the combination
    explains its label (module docstring, point 3)."""
    from .views import combine_views

    y = np.asarray(y, dtype=np.int64)
    if fitted > MATERIAL_NOISE * y.size:
        return True
    P = combine_views(views[0], views[-1])
    return calibrate_under_noise(P, y)[2] * y.size >= COMBINED_SHARE * fitted


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
