"""Eigenfunction (Fergus, Weiss & Torralba 2009, "Semi-supervised learning in gigantic image collections",
NIPS), the label fit (``algo=eigenfunction``, :class:`Eigenfunction`): Fergus et al.'s Eq. (3), in the span
of the numerical eigenfunctions ``U`` of the graph stage (``graph=eigenfunction``,
:class:`lgcexp.graph.eigenfunction.EigenfunctionBuilder`):

    min_a  a' Sigma a + (U a - Y)' Lambda (U a - Y),   Lambda = lambda on the labelled points, 0 elsewhere,

i.e. ``(Sigma + U' Lambda U) a = U' Lambda Y`` (a (k+1) x (k+1) solve), scores ``F = U a``.
"""
from __future__ import annotations

import numpy as np

from ..errors import UserError

# EigenfunctionBuilder is importable from here for one reason: conf/graph/eigenfunction.yaml names
# lgcexp.algorithms.eigenfunction.EigenfunctionBuilder, a string in every recorded run's config hash
from ..graph.eigenfunction import EigenfunctionBuilder, EigenfunctionGraph
from ..params import positive
from .base import GraphSSLAlgorithm, label_matrix

__all__ = ["Eigenfunction", "EigenfunctionBuilder"]


class Eigenfunction(GraphSSLAlgorithm):
    """Fergus et al.'s label fit on numerical eigenfunctions; needs ``graph=eigenfunction``.
    Parameter: ``lam`` the weight of the labelled points (Lambda = lam on them)."""

    name = "eigenfunction"
    default_graph = "eigenfunction"
    _parameter_constraints = {"lam": [positive()]}

    def __init__(self, lam: float = 10.0):
        self.lam = lam

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        if not isinstance(graph, EigenfunctionGraph):
            raise UserError("algo=eigenfunction needs graph=eigenfunction (numerical eigenfunctions of the data)")
        U, sigma = graph.U, graph.eigvals
        UL = U[labeled]
        Y = label_matrix(graph.n, labeled, y_labeled, n_classes)[labeled]
        A = np.diag(sigma) + self.lam * UL.T @ UL
        rhs = self.lam * UL.T @ Y
        a = np.linalg.solve(A, rhs)
        self.coef_ = a  # ((k+1) x c): the scores of any point are its eigenfunction values times a
        self.scores_ = U @ a
        self.info_["n_eigenfunctions"] = int(U.shape[1])
