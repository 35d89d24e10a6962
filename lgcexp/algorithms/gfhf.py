"""Gaussian Fields and Harmonic Functions (Zhu, Ghahramani & Lafferty 2003).

The harmonic solution with the labelled points clamped to their (observed) one-hot labels:
``(D_UU - W_UU) F_U = W_UL Y_L``, i.e. ``F_U = (I - P_UU)^-1 P_UL Y_L`` with ``P = D^-1 W``
(docs/fidelity.md#gfhf). Solved by Jacobi-preconditioned conjugate gradient on the unlabelled block, its
points numbered in the graph's reverse Cuthill-McKee order (:func:`lgcexp.solvers.shifted.rcm_reordered`: faster
sparse products, only the order of the sums changes).
Labelled rows keep their given labels, so labelled accuracy equals 1 - noise rate.
An unlabelled connected component with no labelled point gets zero scores (argmax: class 0).

With very few labels on a large graph the harmonic solution is nearly constant away from the labelled
points (on MNIST with 100 labels most points go to one class); ``cmn=True`` applies Zhu et al.'s class mass
normalisation: each class column of F_U is rescaled so its mass matches the class proportions of the
observed labels. The authors' GFHF had none, so it is off by default.

Variants reweight the graph before the same solve (:meth:`GFHF.weights`): ``algo=wnll``
(:mod:`lgcexp.algorithms.wnll`).
"""
from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..params import Boolean, positive
from ..solvers.cg import cg
from ..solvers.shifted import rcm_reordered
from .base import GraphSSLAlgorithm, one_hot


class GFHF(GraphSSLAlgorithm):
    """GFHF classifier. Parameters: ``tol``/``maxiter`` of the CG solve; ``cmn`` class mass normalisation."""

    name = "gfhf"
    #: the CG stopping criterion (:func:`lgcexp.solvers.cg.cg`'s ``residual``): GFHF's relative residual of the
    #: unscaled system
    residual: str = "plain"
    _parameter_constraints = {"tol": [positive()], "maxiter": [positive("int")], "cmn": [Boolean()]}

    def __init__(self, tol: float = 1e-8, maxiter: int = 20_000, cmn: bool = False):
        self.tol = tol
        self.maxiter = maxiter
        self.cmn = cmn

    def weights(self, graph: Graph, labeled: np.ndarray):
        """The graph the Laplace equation is solved on, and its degrees (GFHF: the graph itself)."""
        return graph.W, graph.degree

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        n = graph.n
        unl = np.ones(n, dtype=bool)
        unl[labeled] = False
        W, degree = self.weights(graph, labeled)
        _, perm = rcm_reordered(graph.S)
        order = perm[unl[perm]]                                  # the unlabelled points in RCM order
        W_uu = W[order][:, order].tocsr()
        W_uu.sort_indices()
        W_ul = W[order][:, labeled].tocsr()
        d_u = degree[order]
        Y_l = one_hot(y_labeled, n_classes)
        rhs = W_ul @ Y_l
        precond = np.where(d_u > 0, 1.0 / np.where(d_u > 0, d_u, 1.0), 1.0)
        F_u, it, _ = cg(lambda X: d_u[:, None] * X - W_uu @ X, rhs, tol=self.tol, maxiter=self.maxiter,
                        precond=precond, residual=self.residual)
        if self.cmn:
            prior = np.bincount(y_labeled, minlength=n_classes) / max(1, y_labeled.size)
            mass = F_u.sum(axis=0)
            F_u = F_u * np.where(mass > 0, prior / np.where(mass > 0, mass, 1.0), 0.0)
        F = np.zeros((n, n_classes))
        F[order] = F_u
        F[labeled] = Y_l
        self.scores_ = F
        self.info_["solver_iterations"] = int(it)
