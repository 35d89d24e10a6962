"""Class priors: a volume label projection of any method's class scores (``class_priors=``).

GraphLearning (Calder et al.) decides labels under known class sizes by a *volume label projection*: the
scores ``F`` are shifted and scaled to ``F' = (F - min F) / max(F - min F)`` (one global min and max), and
one positive weight per class ``s`` is adjusted until the fraction of points whose ``argmax_j s_j F'_ij`` is
class j matches the prior ``b_j``: a fixed-step iteration ``s <- s - dt (v(s) - b)``, ``v(s)`` the class
fractions of the current decision (over all n points), ``dt = 0.1``, ``s`` renormalised to ``s_0 = 1``, until
``max_j |v_j - b_j| <= 1e-3`` or 10^4 steps (the rule of its ``ssl.volume_label_projection``; written here
from that description). The projected scores ``s_j F'_ij`` replace the method's scores, so every prediction
(and the labelled rows' readout) follows the projection.

``class_priors=`` takes ``null`` (off), ``uniform`` (``b_j = 1/c``), ``labels`` (the class fractions of the
observed labels) or an explicit list of c non-negative numbers (normalised to sum 1), e.g. the true class
fractions GraphLearning's MNIST experiments use.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import UserError
from .params import Array, Interval, NoneValue, Options, fmt_value

#: constraints of the top-level ``class_priors`` option
CLASS_PRIORS_PARAMETERS = {"class_priors": [
    NoneValue(), Options(("uniform", "labels")),
    Array(Interval("real", 0, None), "a list of non-negative numbers (one per class)", min_length=1)]}


def check_priors(spec: Any, n_classes: int) -> None:
    """The checks of ``class_priors`` that need the number of classes (run right after loading)."""
    if isinstance(spec, (list, tuple)):
        b = np.asarray(spec, dtype=float).ravel()
        if b.size != n_classes or not np.all(np.isfinite(b)) or b.min() < 0 or b.sum() <= 0:
            raise UserError(f"class_priors={fmt_value(list(spec))} is not allowed: it must be {n_classes} non-negative "
                            "numbers (one per class, not all zero)")


def prior_vector(spec: Any, y_labeled: np.ndarray, n_classes: int) -> np.ndarray | None:
    """The class prior b (sums to 1) named by ``spec``; None when ``spec`` is None."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec == "uniform":
            return np.full(n_classes, 1.0 / n_classes)
        if spec == "labels":
            b = np.bincount(np.asarray(y_labeled, dtype=np.int64), minlength=n_classes).astype(float)
            return b / b.sum()
        raise UserError(f"class_priors={spec} is not allowed: choose null, uniform, labels or a list of "
                        f"{n_classes} numbers")
    check_priors(spec, n_classes)
    b = np.asarray(spec, dtype=float).ravel()
    return b / b.sum()


def volume_projection(scores: np.ndarray, priors: np.ndarray, *, dt: float = 0.1, tol: float = 1e-3,
                      max_iter: int = 10_000, weights: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """Volume label projection (module docstring). Returns (projected scores ``s * F'``, the class weights
    ``s``, the final ``max_j |v_j - b_j|``). ``weights``: a start for ``s`` (default ones; Poisson-MBO
    carries them from one projection to the next)."""
    F = np.asarray(scores, dtype=np.float64)
    n, c = F.shape
    Fs = F - F.min()
    top = Fs.max()
    if top > 0:
        Fs = Fs / top
    s = np.ones(c) if weights is None else np.array(weights, dtype=np.float64)
    b = np.asarray(priors, dtype=np.float64)
    err = 1.0
    it = 0
    while it < max_iter and err > tol:
        it += 1
        v = np.bincount((Fs * s).argmax(axis=1), minlength=c) / n
        g = v - b
        err = float(np.abs(g).max())
        s = s - dt * g
        s = s / s[0]
    return Fs * s, s, err
