"""Poisson learning (Calder, Cook, Thorpe & Slepčev, "Poisson learning: graph based semi-supervised learning
at very low label rates", ICML 2020, Algorithm 1).

Sources at the labelled points, mean-shifted so they sum to zero: ``B_i = y_i - ybar`` (one-hot ``y_i``,
``ybar`` the mean of the m one-hot labels), ``B = 0`` elsewhere. The scores solve the graph Poisson equation
``L U = B`` (``L = D - W``), which the paper solves by the Jacobi iteration from zero

    U_0 = 0,   U_{t+1} = U_t + D^-1 (B - L U_t) = D^-1 B + D^-1 W U_t,

i.e. ``U_T = sum_{t<T} (D^-1 W)^t D^-1 B``, stopped by its mixing-time rule: run the random walk that starts
uniformly on the labelled set, ``v_0 = 1_L / m``, ``v_{t+1} = W D^-1 v_t``, and stop at the first
``T >= min_iter`` with ``max_i |v_T(i) - d_i / sum(d)| <= 1/n`` (or at ``max_iter``); GraphLearning's
``gradient_descent`` solver uses the same rule with ``min_iter = 50``, ``max_iter = 1000``. The random walk
rides along as one more column of the same sparse product (``z_t = D^-1 v_t`` obeys ``z_{t+1} = D^-1 W z_t``).

``solver='cg'`` solves ``L U = B`` to ``tol`` instead (Jacobi-preconditioned CG from zero; every iterate has
``d^T U = 0``, the solution the iteration tends to as ``T -> inf``); GraphLearning's default solver (CG on
the symmetrically normalised system with tolerance 1e-3) targets the same solution.

Predictions: ``argmax_j s_j U_ij`` with ``s_j = 1`` (default) or, with ``balance=True``, the paper's
class-size reweighting ``s_j = b_j / ybar_j`` with ``b_j = 1/c`` (equal class sizes assumed): classes
under-represented among the labels are scaled up. ``class_priors=`` (every method) applies GraphLearning's
volume label projection instead (:mod:`lgcexp.priors`).

The solution is linear in the labels: ``U = G_T H Y_L`` with ``G_T = sum_{t<T} (D^-1 W)^t D^-1`` restricted to
the labelled columns and ``H = I - 11^T/m`` the centring, which is what ``algo=poissonL``
(:mod:`lgcexp.algorithms.poissonl`) reweights.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..graph import Graph
from ..params import Boolean, NoneValue, Options, positive
from ..solvers.cg import cg
from .base import GraphSSLAlgorithm, one_hot

SOLVERS = ("iterate", "cg")
#: the iteration cap of each solver when ``max_iter`` is None: the paper's / GraphLearning's 1000 steps of
#: the iteration, 20,000 conjugate-gradient iterations
DEFAULT_MAX_ITER = {"iterate": 1000, "cg": 20_000}


def poisson_sources(n: int, labeled: np.ndarray, Y_l: np.ndarray) -> np.ndarray:
    """``B``: the (n, c) mean-shifted sources, ``Y_l - mean(Y_l)`` at the labelled rows, zero elsewhere."""
    Y_l = np.asarray(Y_l, dtype=np.float64)
    B = np.zeros((n, Y_l.shape[1]))
    B[labeled] = Y_l - Y_l.mean(axis=0)
    return B


def _inverse_degree(d: np.ndarray) -> np.ndarray:
    return np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)


def mixing_steps(W: sp.csr_matrix, labeled: np.ndarray, *, min_iter: int = 50, max_iter: int = 1000) -> int:
    """T of the paper's stopping rule alone (the random walk from the labelled set; module docstring)."""
    return poisson_iterate(W, np.zeros((W.shape[0], 0)), labeled, min_iter=min_iter, max_iter=max_iter)[1]


def poisson_iterate(W: sp.csr_matrix, B: np.ndarray, labeled: np.ndarray, *, min_iter: int = 50,
                    max_iter: int = 1000, steps: int | None = None) -> tuple[np.ndarray, int]:
    """``U_T = sum_{t<T} (D^-1 W)^t D^-1 B`` with T from the mixing rule (or ``steps`` when given).
    ``W`` symmetric with a zero diagonal. Returns (U_T, T)."""
    W = sp.csr_matrix(W, dtype=np.float64)
    n = W.shape[0]
    d = np.asarray(W.sum(axis=1)).ravel()
    dinv = _inverse_degree(d)
    P = sp.diags(dinv) @ W
    P = P.tocsr()
    c = B.shape[1]
    X = np.zeros((n, c + 1))                 # [U | z], z = D^-1 v
    src = np.zeros((n, c + 1))
    src[:, :c] = dinv[:, None] * B
    X[labeled, c] = dinv[labeled] / labeled.size
    v_inf = d / d.sum()
    T = 0
    while T < max_iter if steps is None else T < steps:
        if steps is None and T >= min_iter and np.abs(d * X[:, c] - v_inf).max() <= 1.0 / n:
            break
        X = P @ X
        X[:, :c] += src[:, :c]
        T += 1
    return X[:, :c], T


def poisson_cg(W: sp.csr_matrix, B: np.ndarray, *, tol: float = 1e-8, maxiter: int = 20_000) -> tuple[np.ndarray, int]:
    """The solution of ``L U = B`` with ``d^T U = 0`` by Jacobi-preconditioned CG from zero."""
    W = sp.csr_matrix(W, dtype=np.float64)
    d = np.asarray(W.sum(axis=1)).ravel()
    dinv = _inverse_degree(d)
    U, it, _ = cg(lambda X: d[:, None] * X - W @ X, B, tol=tol, maxiter=maxiter,
                        precond=np.where(d > 0, dinv, 1.0))
    return U, it


def source_balance(S: np.ndarray) -> np.ndarray:
    """The paper's reweighting ``s_j = b_j / ybar_j`` with equal class sizes ``b_j = 1/c``, where ``ybar_j`` is
    class j's share of the (m, c) label matrix S (one-hot or soft); 0 for a class with no mass."""
    S = np.asarray(S, dtype=np.float64)
    c = S.shape[1]
    ybar = S.sum(axis=0) / max(1, S.shape[0])
    return np.where(ybar > 0, (1.0 / c) / np.where(ybar > 0, ybar, 1.0), 0.0)


def class_balance(y_labeled: np.ndarray, n_classes: int) -> np.ndarray:
    """:func:`source_balance` of the one-hot labels."""
    return source_balance(one_hot(np.asarray(y_labeled, dtype=np.int64), n_classes))


class Poisson(GraphSSLAlgorithm):
    """Poisson learning (module docstring). Parameters: ``solver`` (iterate: the paper's iteration and
    stopping rule | cg), ``max_iter`` (the most steps or CG iterations; None: :data:`DEFAULT_MAX_ITER` of
    the solver), ``min_iter`` (the iteration's fewest steps), ``tol`` (CG's relative residual), ``balance``
    (the paper's class-size reweighting)."""

    name = "poisson"
    _parameter_constraints = {
        "solver": [Options(SOLVERS)],
        "min_iter": [positive("int")],
        "max_iter": [positive("int"), NoneValue()],
        "tol": [positive()],
        "balance": [Boolean()],
    }

    def __init__(self, solver: str = "iterate", min_iter: int = 50, max_iter: int | None = None, tol: float = 1e-8,
                 balance: bool = False):
        self.solver = solver
        self.min_iter = min_iter
        self.max_iter = max_iter
        self.tol = tol
        self.balance = balance

    def solve(self, W: sp.csr_matrix, B: np.ndarray, labeled: np.ndarray) -> tuple[np.ndarray, int]:
        cap = DEFAULT_MAX_ITER[self.solver] if self.max_iter is None else int(self.max_iter)
        if self.solver == "cg":
            return poisson_cg(W, B, tol=self.tol, maxiter=cap)
        return poisson_iterate(W, B, labeled, min_iter=self.min_iter, max_iter=cap)

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        B = poisson_sources(graph.n, labeled, one_hot(y_labeled, n_classes))
        U, it = self.solve(graph.W, B, labeled)
        if self.balance:
            U = U * class_balance(y_labeled, n_classes)
        self.scores_ = U
        self.info_["solver_iterations"] = int(it)
