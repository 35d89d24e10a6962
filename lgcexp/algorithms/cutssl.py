"""CutSSL (Holtz, Chen, Wan, Cheng & Mishne, "Continuous Partitioning for Graph-Based Semi-Supervised
Learning", NeurIPS 2024): a cardinality-constrained minimum cut, relaxed to a nonconvex quadratic program
whose minimisers are integral, solved by ADMM whose steps are Laplacian solves.

Followed: the paper's abstract and formulation (min-cut with class cardinalities, exact quadratic relaxation by
a concave diagonal perturbation ``-s D``) and the authors' public implementation (their Colab notebook's
``cut_ssl`` class, a GraphLearning ``ssl`` subclass) for the splitting, the start and the defaults. With the
labelled rows clamped to their one-hot labels ``Y_L`` and ``X`` (M x c) the unlabelled rows,

    min_X  1/2 tr(X^T A_s X) - tr(B^T X)   s.t.  X 1_c = 1_M,  X^T 1_M = m,  X >= 0,
    A_s = L_UU - s D_UU,   B = W_UL Y_L,   m = n b - Y_L^T 1   (b the class priors),

i.e. the cut ``tr(U^T L U)/2`` of the whole labelling, each unlabelled row a point of the simplex, each class
given its size ``n b_j`` (labels included). ``s > 0`` makes the objective concave along the simplex's faces,
which pushes the minimiser to a vertex (an integral labelling). ADMM on the split ``X = Y``, ``Y >= 0``
(scaled dual ``Λ``, penalty ``rho``):

    X <- argmin_{X 1 = 1, X^T 1 = m} 1/2 tr(X^T A_s X) - tr(B^T X) + rho/2 ||X - Y + Λ||^2
       = H^-1 (R - 1 mu1^T - mu2 1^T),   H = A_s + rho I,   R = B + rho (Y - Λ),
    Y <- max(X + Λ, 0),   Λ <- Λ + X - Y,

the multipliers in closed form (``g = H^-1 1``, ``M`` unlabelled points, ``sum(m) = M``; the pair is unique up
to ``mu1 + t, mu2 - t``, fixed by ``sum(mu1) = 0``): ``mu2 = (R 1 - H 1) / c``,
``mu1 = (R^T g - m - 1 ((R 1)^T g - M) / c) / (1^T g)``. So an X step is one block solve with H (c columns,
Jacobi-preconditioned CG warm-started at the previous X) plus the fixed ``g``. The authors' code alternates one
update of ``mu1`` and of ``mu2`` per step instead (the same fixed point); here the X step is solved exactly.

Schedule (the authors' demo): ``s = [0.0, 0.1]`` with ``iterations = [100, 400]``; each stage restarts with
``Λ = 0``, ``Y = max(X, 0)`` from the previous stage's X. Start: the minimiser of the ``s = 0`` objective under
the cardinality constraint alone, ``X0 = Z - g0 nu^T + 1 m^T / M`` with ``Z = L_UU^-1 B``, ``g0 = L_UU^-1 1``,
``nu = Z^T 1 / 1^T g0`` (the authors: CG on the column-centred system plus ``1 m^T / M``, which tends to the
same point). Scores: ``Y`` on the unlabelled rows (non-negative, rows near the simplex's vertices), the one-hot
labels on the labelled rows. ``priors``: ``uniform`` (default), ``labels`` or a list of c class fractions (the
authors' experiments give the true class fractions). H is positive definite when ``s max d < rho`` (and in
practice well beyond it on kNN graphs); CG is stopped at ``tol`` (relative residual).

Penalty ``rho``: ``"degree"`` (default) sets it to the graph's largest weighted degree ``max_i d_i`` (all n
points), or a positive number. The authors' code has ``rho = 1``, which suits their graphs' weight scale but not
every graph's: the problem's minimiser does not change when W is multiplied by a constant while the ADMM with a
fixed ``rho`` does. On digits' 10-NN self-tuning graph (degrees 2.3-12.1) ``rho = 1`` left ``max|X - Y|`` at
0.26-2.3 after the 500 steps (seed 0; mean accuracy 49-62 %); ``rho = max d`` brings it to 1e-3 or less (60
fits) with several times fewer CG iterations. On raw MNIST's 10-NN self-tuning graph (max d 18.1; 1 label per
class, seed 0) ``rho = 1`` ended at ``max|X - Y|`` 3.6 and 8 % accuracy (11,802 CG iterations), ``rho = max d``
at 1.7e-3 and 85.2 % (1,867). ``rho = max d`` also makes H positive definite for every ``s < 1``
(``H >= rho I - s D_UU >= (1 - s) max d I``), and with it the iterates are invariant to W's scale.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..graph import Graph
from ..params import Array, Interval, Options, fmt_value, positive
from ..priors import prior_vector
from ..solvers.cg import cg
from .base import GraphSSLAlgorithm, one_hot


def affine_x_step(solve, R: np.ndarray, g: np.ndarray, h: np.ndarray, m: np.ndarray,
                  X0: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``argmin 1/2 tr(X^T H X) - tr(R^T X)`` over ``X 1 = 1``, ``X^T 1 = m`` (H symmetric positive definite;
    ``solve(rhs, X0)`` returns ``(H^-1 rhs, iterations)``, ``g = H^-1 1``, ``h = H 1``, ``sum(m) = M``).
    Returns (X, solver iterations)."""
    M, c = R.shape
    r1 = R.sum(axis=1)
    mu2 = (r1 - h) / c
    mu1 = (R.T @ g - m - (r1 @ g - M) / c) / g.sum()
    V, it = solve(R - mu2[:, None], X0 if X0 is None else X0 + np.outer(g, mu1))
    return V - np.outer(g, mu1), it


class CutSSL(GraphSSLAlgorithm):
    """CutSSL (module docstring). Parameters: ``s`` and ``iterations`` (the stages: perturbation and ADMM
    steps of each), ``rho`` (ADMM penalty: ``"degree"``, the graph's largest weighted degree, or a positive
    number), ``priors`` (class sizes), ``tol``/``maxiter`` (each CG solve). After ``fit``, ``X_`` holds the last
    X iterate (unlabelled rows in index order; ``scores_`` has Y) and ``info_["rho"]`` the penalty used."""

    name = "cutssl"
    _parameter_constraints = {
        "s": [Array(Interval("real", 0, 1, closed="left"), "a list of numbers in [0, 1)", 1)],
        "iterations": [Array(Interval("int", 1, None), "a list of positive integers", 1)],
        "rho": [Options(("degree",)), positive()],
        "priors": [Options(("uniform", "labels")), Array(Interval("real", 0, None), "a list of class fractions", 1)],
        "tol": [positive()],
        "maxiter": [positive("int")],
    }
    quick_params = {"iterations": [10, 20]}

    def __init__(self, s: list[float] = [0.0, 0.1], iterations: list[int] = [100, 400],  # noqa: B006 (never mutated)
                 rho: float | str = "degree", priors="uniform", tol: float = 1e-6, maxiter: int = 20_000):
        self.s = s
        self.iterations = iterations
        self.rho = rho
        self.priors = priors
        self.tol = tol
        self.maxiter = maxiter

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        if len(params["s"]) != len(params["iterations"]):
            raise UserError(f"{prefix}iterations={fmt_value(list(params['iterations']))} is not allowed: it must "
                            f"have one entry per stage of {prefix}s ({len(params['s'])})")

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """A list of priors needs one number per class (checked right after loading)."""
        if isinstance(self.priors, (list, tuple)):
            b = np.asarray(self.priors, dtype=float)
            if b.size != n_classes or b.sum() <= 0:
                raise UserError(f"{prefix or self.config_prefix}priors={fmt_value(list(self.priors))} is not "
                                f"allowed: it must be {n_classes} non-negative numbers (one per class, not all zero)")

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        n, c = graph.n, n_classes
        unl = np.ones(n, dtype=bool)
        unl[labeled] = False
        idx = np.flatnonzero(unl)
        Mn = idx.size
        W = sp.csr_matrix(graph.W, dtype=np.float64)
        W_uu = W[idx][:, idx].tocsr()
        d = np.asarray(W.sum(axis=1)).ravel()
        d_u = d[idx]
        rho = float(d.max()) if self.rho == "degree" else float(self.rho)
        self.info_["rho"] = rho
        Y_l = one_hot(y_labeled, c)
        B = W[idx][:, labeled] @ Y_l
        b = prior_vector(self.priors, y_labeled, c)
        m = n * b - Y_l.sum(axis=0)
        self.info_["solver_iterations"] = 0
        if Mn == 0:
            self.scores_ = np.zeros((n, c))
            self.scores_[labeled] = Y_l
            return
        cg_total = 0

        def solver(diag: np.ndarray):
            pre = np.where(diag > 0, 1.0 / np.where(diag > 0, diag, 1.0), 1.0)

            def solve(rhs, X0=None):
                X, it, _ = cg(lambda Z: diag[:, None] * Z - W_uu @ Z, np.asarray(rhs, dtype=np.float64),
                              tol=self.tol, maxiter=self.maxiter, precond=pre, X0=X0)
                return X, it
            return solve

        # start: the s = 0 minimiser under the cardinality constraint alone
        Zg, it = solver(d_u)(np.column_stack([B, np.ones(Mn)]))
        cg_total += it
        Z, g0 = Zg[:, :c], Zg[:, c]
        X = Z - np.outer(g0, Z.sum(axis=0) / g0.sum()) + np.outer(np.ones(Mn), m / Mn)
        steps = 0
        residual = 0.0
        for s, T in zip(self.s, self.iterations):
            diag = (1.0 - s) * d_u + rho
            solve = solver(diag)
            g, it = solve(np.ones((Mn, 1)))
            cg_total += it
            g = g[:, 0]
            h = diag - np.asarray(W_uu.sum(axis=1)).ravel()
            Lam = np.zeros_like(X)
            Y = np.maximum(X, 0.0)
            for _ in range(int(T)):
                X, it = affine_x_step(solve, B + rho * (Y - Lam), g, h, m, X0=X)
                cg_total += it
                Y = np.maximum(X + Lam, 0.0)
                Lam += X - Y
                steps += 1
            residual = float(np.abs(X - Y).max()) if X.size else 0.0
        F = np.zeros((n, c))
        F[idx] = Y
        F[labeled] = Y_l
        self.scores_ = F
        self.X_ = X
        self.info_["solver_iterations"] = steps
        self.info_["cg_iterations"] = int(cg_total)
        self.info_["admm_residual"] = residual
