"""Local and Global Consistency (Zhou et al. 2004; paper §2.1).

``F = (I - alpha S)^-1 Y`` (paper Eqs. (20) and (24); the factor beta = 1 - alpha is
left out, which changes no argmax). ``I - alpha S`` is symmetric positive definite with eigenvalues in
``[1 - alpha, 1 + alpha]``, so conjugate gradient converges in O(sqrt((1+alpha)/(1-alpha)) log(1/tol))
sparse products, in reverse Cuthill-McKee order (:func:`lgcexp.solvers.shifted.rcm_reordered`). It stops as soon as the
row argmax of the iterate is certainly that of the exact solution (:class:`lgcexp.solvers.shifted.ArgmaxCertificate`,
from the residual and the smallest eigenvalue structure of ``I - alpha S``), or at the relative residual ``tol`` when
some row's top two scores are too close to certify (exact ties); the predictions are therefore those of
the exact solution, while the scores themselves are accurate to the certified bound only (``stop='argmax'``,
the default, which the command's runs use). ``stop='tol'`` runs CG to the relative residual ``tol`` in every
column, so the scores themselves are accurate to ``tol`` (the closed form; what scikit-learn's
``LabelSpreading`` tests check).
The authors' fixed-point iteration ``F <- (1-alpha) Y + alpha S F`` for ``t`` steps is available as
``solver='power'`` for comparison.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..graph import Graph
from ..issues.judgement import LabelJudgement, graph_loo_probs, normalize_rows
from ..params import Boolean, Options, positive, unit_open
from ..solvers import diagonal
from . import propagation
from .base import GraphSSLAlgorithm, label_matrix
from .propagation import cached_propagation_submatrix, graph_degree, lgc_propagate

__all__ = ["LGC", "SOLVERS", "STOPS", "graph_degree", "lgc_loo_probs", "lgc_propagate"]

SOLVERS = ("cg", "power")


def lgc_loo_probs(S: sp.spmatrix, labeled: np.ndarray, y: np.ndarray, n_classes: int, alpha: float,
                  **kw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """LGC's leave-one-out class distribution of every label without ``P_LL``: the scores ``F_i - P_ii Y_i``
    of :func:`lgcexp.solvers.diagonal.lgc_loo_scores` (keywords as there) with rows normalised to sum to 1 (a
    row of zeros where nothing reaches the point): the scalable form of
    :func:`lgcexp.issues.judgement.graph_loo_probs`. A probed diagonal's check records, besides its error,
    the largest and mean change it makes to a checked point's distribution (``max_prob_diff``,
    ``mean_prob_diff`` in ``stats["diagonal"]["probe_check"]``)."""
    V, stats = diagonal.lgc_loo_scores(S, labeled, y, n_classes, alpha, **kw)
    exact = stats.pop("_exact_scores", None)
    if exact is not None:
        pick, V_exact = exact
        diff = np.abs(normalize_rows(V[pick]) - normalize_rows(V_exact)).max(axis=1)
        stats["diagonal"]["probe_check"]["max_prob_diff"] = float(diff.max())
        stats["diagonal"]["probe_check"]["mean_prob_diff"] = float(diff.mean())
    return normalize_rows(V), stats

#: when conjugate gradient stops: once every row's argmax is certified, or at the relative residual tol
STOPS = ("argmax", "tol")


class LGC(GraphSSLAlgorithm):
    """LGC classifier. Parameters: ``alpha`` in (0, 1); ``solver`` 'cg' (default) or 'power' (``t`` steps);
    ``stop`` (cg): 'argmax' (default: stop once every row's argmax is certified, ``tol`` the fallback) or
    'tol' (stop at the relative residual ``tol``); ``judge`` (default true): also judge the labels by LGC's
    leave-one-out prediction.

    Label judgement (:meth:`label_judgement`, docs/label_issues.md): the prediction at each labelled point
    with its own label left out, ``normalize_rows(P~ B)`` with ``P~`` the labelled block of
    ``(I - alpha S)^-1`` without its diagonal: the "graph leave-one-out, no learning" of the detection table.
    It needs ``P_LL`` (one conjugate-gradient solve per label, to a relative residual of 1e-6 in float32, as
    AutoL's), cached per labelled set like AutoL's. Above :data:`lgcexp.algorithms.propagation.DENSE_MAX_LABELS`
    labels, or above :data:`~lgcexp.algorithms.propagation.PROBE_MIN_LABELS` where most points are labelled
    (:func:`~lgcexp.algorithms.propagation.needs_pll`), it needs no P_LL: one solve with c right-hand sides and
    the diagonal of the propagation operator (probed where most points are labelled, else exact;
    :func:`lgc_loo_probs`), in O(n) memory."""

    name = "lgc"
    unlisted_params = ("stop",)
    _parameter_constraints = {
        "alpha": [unit_open()],
        "solver": [Options(SOLVERS)],
        "tol": [positive()],
        "maxiter": [positive("int")],
        "t": [positive("int")],
        "judge": [Boolean()],
        "stop": [Options(STOPS)],
    }

    def __init__(self, alpha: float = 0.9, solver: str = "cg", tol: float = 1e-10, maxiter: int = 10_000, t: int = 1000,
                 judge: bool = True, stop: str = "argmax"):
        self.alpha = alpha
        self.solver = solver
        self.tol = tol
        self.maxiter = maxiter
        self.t = t
        self.judge = judge
        self.stop = stop

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        Y = label_matrix(graph.n, labeled, y_labeled, n_classes)
        self.scores_, it = lgc_propagate(graph.S, Y, self.alpha, solver=self.solver, tol=self.tol, maxiter=self.maxiter,
                                          t=self.t, degree=graph_degree(graph) if self.stop == "argmax" else None)
        self.info_["solver_iterations"] = int(it)
        self._judgement = None
        # the leave-one-out needs P_LL by sparse solves; a low-rank graph (anchor graph) has no sparse S
        if self.judge and sp.issparse(graph.S):
            if not propagation.needs_pll(len(labeled), graph.n):
                # every label judged without P_LL: one solve and the probed diagonal (lgcexp.solvers.diagonal)
                how = diagonal.choose_diagonal(len(labeled), graph.n)
                probs, st = lgc_loo_probs(graph.S, labeled, y_labeled, n_classes, float(self.alpha),
                                          diagonal=how, distance=diagonal.LARGE_DISTANCE, progress=progress)
                self._judgement = LabelJudgement(
                    probs=probs, source=f"lgc: leave-one-out prediction (no learning; diagonal: {how})",
                    leave_one_out=probs)
                self.info_["loo_seconds"] = round(st["seconds"], 4)
                self.info_["loo_diagonal"] = {k: v for k, v in st["diagonal"].items() if k != "seconds"}
                return

            P, st = cached_propagation_submatrix(graph, labeled, float(self.alpha), cache=cache, solver=self.solver,
                                                 t=self.t, progress=progress, shared_alphas=self._pll_alphas)
            probs = graph_loo_probs(P, y_labeled, n_classes)
            self._judgement = LabelJudgement(probs=probs, source="lgc: leave-one-out prediction (no learning)",
                                             leave_one_out=probs)
            self.info_["pll_seconds"] = round(st["seconds"], 4)
            self.info_["pll_cache_hit"] = st["cache_hit"]

    def propagation_alphas(self) -> tuple[float, ...]:
        """alpha, for the label judgement's P_LL (none with ``judge=false`` or the power iteration; above
        :data:`lgcexp.algorithms.propagation.DENSE_MAX_LABELS` labels the judgement solves no P_LL either)."""
        return (float(self.alpha),) if self.judge and self.solver == "cg" else ()

    def label_judgement(self):
        """LGC's leave-one-out class distribution of every label (None with ``judge=false``)."""
        return self._judgement
