"""Poisson-MBO (Calder, Cook, Thorpe & Slepčev, ICML 2020, Algorithm 2): Poisson learning, then
volume-constrained MBO steps.

Start from the Poisson decision ``U = onehot(argmax U_poisson)`` (:mod:`lgcexp.algorithms.poisson`). Then
``T`` times: ``Ns`` explicit heat steps with the Poisson sources as a forcing term,

    U <- U - dt (L U - mu B),    dt = 1 / max_i d_i,

(``L = D - W``, ``B`` the mean-shifted sources), followed by the volume label projection onto the class
priors (:func:`lgcexp.priors.volume_projection`; its class weights carried from one projection to the next,
as GraphLearning's ``poisson_mbo`` does), and ``U`` becomes the one-hot projected decision. The final scores
are that one-hot decision. Defaults are the paper's: ``Ns = 40``, ``mu = 1``, ``T = 20``; ``priors``:
``uniform`` (default), ``labels`` or a list of c class fractions.

The heat steps run at memory speed (:class:`HeatSteps`): one sparse product a step with the matrix
``I - dt L`` (each row: its ``dt W`` entries in ``W``'s own order, then its diagonal ``1 - dt d_i``), on rows
renumbered by reverse Cuthill-McKee so that neighbours sit close in memory, and the forcing added at the
labelled rows only (it is zero elsewhere). Every row sums the same products in the same order as
``(1 - dt d) U + dt W U + dt mu B``, so the scores, and every decision, are those of that plain loop bit for
bit (tested against it); the projection sees the rows renumbered, which changes none of its counts.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..graph import Graph
from ..params import Array, Interval, NoneValue, Options, positive
from ..priors import prior_vector, volume_projection
from .base import GraphSSLAlgorithm, one_hot
from .poisson import SOLVERS, Poisson, poisson_sources


class HeatSteps:
    """``U <- (1 - dt d) U + dt W U + src`` on renumbered rows (module docstring). ``perm[r]``: the original
    row of row r; :meth:`to_new` / :meth:`to_old` move row-indexed arrays between the numberings."""

    def __init__(self, W: sp.csr_matrix, keep: np.ndarray, dt: float, src: np.ndarray):
        from scipy.sparse.csgraph import reverse_cuthill_mckee

        W = sp.csr_matrix(W)
        n = W.shape[0]
        perm = np.asarray(reverse_cuthill_mckee(W, symmetric_mode=True), dtype=np.int64)
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        counts = np.diff(W.indptr).astype(np.int64)[perm]          # off-diagonal entries of each new row
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts + 1, out=indptr[1:])
        m = int(counts.sum())
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        old_pos = np.repeat(W.indptr[perm].astype(np.int64) - starts, counts) + np.arange(m)
        new_pos = np.arange(m) + np.repeat(np.arange(n), counts)   # row r's entries start after r diagonals
        data = np.empty(m + n)
        indices = np.empty(m + n, dtype=np.int64)
        data[new_pos] = W.data[old_pos] * dt                       # the numbers of sp.csr_matrix(W * dt)
        indices[new_pos] = inv[W.indices[old_pos]]
        data[indptr[1:] - 1] = keep[perm]                          # the diagonal last in each row
        indices[indptr[1:] - 1] = np.arange(n)
        if n + m < np.iinfo(np.int32).max:
            indices, indptr = indices.astype(np.int32), indptr.astype(np.int32)
        self.A = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        self.perm, self.inv = perm, inv
        rows = np.flatnonzero(np.any(src != 0, axis=1))
        self.src_rows = inv[rows]
        self.src = src[rows]

    def to_new(self, X: np.ndarray) -> np.ndarray:
        return X[self.perm]

    def to_old(self, X: np.ndarray) -> np.ndarray:
        return X[self.inv]

    def run(self, U: np.ndarray, steps: int) -> np.ndarray:
        """``steps`` heat steps from ``U`` (new numbering, C-ordered float64)."""
        A, rows, src = self.A, self.src_rows, self.src
        for _ in range(steps):
            U = A @ U
            U[rows] += src
        return U


class PoissonMBO(GraphSSLAlgorithm):
    """Poisson-MBO (module docstring). Parameters: ``Ns``, ``mu``, ``T``, ``priors``, and the Poisson
    solve's ``solver``, ``min_iter``, ``max_iter`` (None: the solver's default), ``tol``."""

    name = "poissonMBO"
    _parameter_constraints = {
        "Ns": [positive("int")],
        "mu": [positive()],
        "T": [positive("int")],
        "priors": [Options(("uniform", "labels")), Array(Interval("real", 0, None), "a list of class fractions", 1)],
        "solver": [Options(SOLVERS)],
        "min_iter": [positive("int")],
        "max_iter": [positive("int"), NoneValue()],
        "tol": [positive()],
    }

    def __init__(self, Ns: int = 40, mu: float = 1.0, T: int = 20, priors="uniform", solver: str = "iterate",
                 min_iter: int = 50, max_iter: int | None = None, tol: float = 1e-8):
        self.Ns = Ns
        self.mu = mu
        self.T = T
        self.priors = priors
        self.solver = solver
        self.min_iter = min_iter
        self.max_iter = max_iter
        self.tol = tol

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """A list of priors needs one number per class (checked right after loading)."""
        if isinstance(self.priors, (list, tuple)):
            from ..errors import UserError
            from ..params import fmt_value

            b = np.asarray(self.priors, dtype=float)
            if b.size != n_classes or b.sum() <= 0:
                raise UserError(f"{prefix or self.config_prefix}priors={fmt_value(list(self.priors))} is not allowed: "
                                f"it must be {n_classes} non-negative numbers (one per class, not all zero)")

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        b = prior_vector(self.priors, y_labeled, n_classes)
        B = poisson_sources(graph.n, labeled, one_hot(y_labeled, n_classes))
        base = Poisson(solver=self.solver, min_iter=self.min_iter, max_iter=self.max_iter, tol=self.tol)
        U0, it = base.solve(graph.W, B, labeled)
        labels, err = mbo_rounds(graph, B, U0.argmax(axis=1), b, Ns=self.Ns, mu=self.mu, T=self.T)
        self.scores_ = one_hot(labels, n_classes)
        self.info_.update({"solver_iterations": int(it), "mbo_projection_error": float(err)})


def mbo_rounds(graph: Graph, B: np.ndarray, labels: np.ndarray, b: np.ndarray, *, Ns: int, mu: float,
               T: int) -> tuple[np.ndarray, float]:
    """Algorithm 2's rounds from the decision ``labels``: T times, Ns heat steps forced by ``mu B`` and the
    volume projection onto the class fractions ``b``; (final decision, last projection's error)."""
    n_classes = B.shape[1]
    d = graph.degree
    dt = 1.0 / d.max()
    # U - dt L U = (1 - dt d) U + dt W U
    heat = HeatSteps(graph.W, 1.0 - dt * d, dt, (mu * dt) * B)
    labels = heat.to_new(np.asarray(labels))
    weights = None
    err = 0.0
    for _ in range(int(T)):
        U = heat.run(one_hot(labels, n_classes), int(Ns))
        F, weights, err = volume_projection(U, b, weights=weights)
        labels = F.argmax(axis=1)
    return heat.to_old(labels), float(err)
