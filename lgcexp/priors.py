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


class _Decisions:
    """``argmax_j F_ij s_j`` of every row for a sequence of slowly moving class weights ``s``, equal to
    ``(F * s).argmax(axis=1)`` (same products, same first-index tie rule) but recomputed only where it can
    have changed. ``F >= 0``. At a reference ``s0`` every row's top product ``a_i`` and runner-up ``b_i`` are
    kept; for a later ``s`` with ratios ``r = s / s0`` in ``[lo, hi]`` (all positive), row i keeps its top class
    whenever ``a_i lo > b_i hi`` with a margin (``SAFETY``) far above the few roundings involved, i.e. whenever
    ``q_i = a_i / b_i`` exceeds ``(hi / lo)(1 + SAFETY)``. The rows sorted by ``q`` make the others a prefix,
    recomputed exactly; when that prefix passes ``n / 4`` rows, ``s`` becomes the new reference.

    Only the rows nearest a cut are ever in such a prefix, so only the ``m = ceil(n * sorted_share)`` rows of
    smallest ``q`` are kept sorted (a partition, then a sort of those m; ``sorted_share=1``: every row). The
    rows left out all have ``q`` at least the largest kept one, so a prefix that stops short of the m kept rows
    is the whole prefix; one that reaches their end makes ``s`` the new reference."""

    SAFETY = 1e-9

    def __init__(self, F: np.ndarray, sorted_share: float = 1.0):
        self.F = F
        self.n, self.c = F.shape
        self.m = min(self.n, max(1, int(np.ceil(self.n * float(sorted_share)))))
        self.ref: np.ndarray | None = None

    def _reset(self, s: np.ndarray) -> np.ndarray:
        P = self.F * s
        top = P.argmax(axis=1)
        rows = np.arange(self.n)
        a = P[rows, top].copy()
        P[rows, top] = -np.inf
        b = P.max(axis=1) if self.c > 1 else np.zeros(self.n)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.where(a > 0, np.inf, 0.0))
        if self.m < self.n:
            near = np.argpartition(q, self.m - 1)[:self.m]
            self.order = near[np.argsort(q[near], kind="stable")]
        else:
            self.order = np.argsort(q, kind="stable")
        self.q_sorted = q[self.order]
        self.top = top
        self.counts = np.bincount(top, minlength=self.c)
        self.ref = s.copy()
        return self.counts.copy()

    def counts_for(self, s: np.ndarray) -> np.ndarray:
        """The class counts of ``argmax_j F_ij s_j`` over all rows."""
        if not np.all(s > 0):  # the bound needs positive weights: plain computation
            self.ref = None
            return np.bincount((self.F * s).argmax(axis=1), minlength=self.c)
        if self.ref is None:
            return self._reset(s)
        r = s / self.ref
        tau = (r.max() / r.min()) * (1.0 + self.SAFETY)
        k = int(np.searchsorted(self.q_sorted, tau, side="right"))
        if k > self.n // 4 or (k == self.m < self.n):
            return self._reset(s)
        idx = self.order[:k]
        return (self.counts - np.bincount(self.top[idx], minlength=self.c)
                + np.bincount((self.F[idx] * s).argmax(axis=1), minlength=self.c))


def volume_projection(scores: np.ndarray, priors: np.ndarray, *, dt: float = 0.1, tol: float = 1e-3,
                      max_iter: int = 10_000, weights: np.ndarray | None = None, sorted_share: float = 1 / 64
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """Volume label projection (module docstring). Returns (projected scores ``s * F'``, the class weights
    ``s``, the final ``max_j |v_j - b_j|``). ``weights``: a start for ``s`` (default ones; Poisson-MBO
    carries them from one projection to the next). The decisions of each step are those of
    ``(F' * s).argmax(axis=1)``, recomputed only for the rows whose top class can have changed
    (:class:`_Decisions`, keeping the ``sorted_share`` of rows nearest a cut sorted; the same numbers as the
    plain loop whatever the share, tested against it)."""
    F = np.asarray(scores, dtype=np.float64)
    n, c = F.shape
    Fs = F - F.min()
    top = Fs.max()
    if top > 0:
        Fs = Fs / top
    s = np.ones(c) if weights is None else np.array(weights, dtype=np.float64)
    b = np.asarray(priors, dtype=np.float64)
    decide = _Decisions(Fs, sorted_share)
    err = 1.0
    it = 0
    while it < max_iter and err > tol:
        it += 1
        v = decide.counts_for(s) / n
        g = v - b
        err = float(np.abs(g).max())
        s = s - dt * g
        s = s / s[0]
    return Fs * s, s, err
