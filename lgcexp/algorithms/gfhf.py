"""Gaussian Fields and Harmonic Functions (Zhu, Ghahramani & Lafferty 2003).

The harmonic solution with the labelled points clamped to their (observed) one-hot labels:
``(D_UU - W_UU) F_U = W_UL Y_L``, i.e. ``F_U = (I - P_UU)^-1 P_UL Y_L`` with ``P = D^-1 W``
(reference notes §8). Solved by Jacobi-preconditioned conjugate gradient on the unlabelled block.
Labelled rows keep their given labels, so labelled accuracy equals 1 - noise rate.
An unlabelled connected component with no labelled point gets zero scores (argmax: class 0).
"""
from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..linalg import block_cg
from .base import GraphSSLAlgorithm, check_positive, one_hot


class GFHF(GraphSSLAlgorithm):
    name = "gfhf"

    def __init__(self, tol: float = 1e-8, maxiter: int = 20_000):
        self.tol = check_positive(tol, "algo.tol")
        self.maxiter = check_positive(maxiter, "algo.maxiter", integer=True)

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False) -> None:
        n = graph.n
        unl = np.ones(n, dtype=bool)
        unl[labeled] = False
        W = graph.W
        W_uu = W[unl][:, unl].tocsr()
        W_ul = W[unl][:, labeled].tocsr()
        d_u = graph.degree[unl]
        Y_l = one_hot(y_labeled, n_classes)
        rhs = W_ul @ Y_l
        precond = np.where(d_u > 0, 1.0 / np.where(d_u > 0, d_u, 1.0), 1.0)
        F_u, it, _ = block_cg(lambda X: d_u[:, None] * X - W_uu @ X, rhs, tol=self.tol, maxiter=self.maxiter, precond=precond)
        F = np.zeros((n, n_classes))
        F[unl] = F_u
        F[labeled] = Y_l
        self.scores_ = F
        self.info_["solver_iterations"] = int(it)
