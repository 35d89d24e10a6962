"""Mean-shifted Laplace learning: GraphLearning's ``laplace(mean_shift=True)`` (Calder et al.'s
GraphLearning package; its connection to a cardinality-constrained cut: Holtz et al., NeurIPS 2024, Sec. 4).

Laplace learning (GFHF, :mod:`lgcexp.algorithms.gfhf`): the harmonic solution ``u`` with the labelled rows
clamped to their one-hot labels, then every class column shifted to mean zero over all n points,

    u_j <- u_j - (1/n) sum_i u_ij,

and the decision is the row argmax of the shifted scores. At low label rates the harmonic solution is nearly
constant away from the labels, and the class with the largest constant wins almost everywhere; subtracting
each class's mean removes that constant (the same shift Poisson learning applies to its sources). What
GraphLearning 1.7.5 does (``ssl.laplace._fit``: CG solve on the unlabelled block, labels put back, column
means over all rows subtracted); here the solve is GFHF's (Jacobi-preconditioned block CG, ``tol``).
"""
from __future__ import annotations

from ..graph import Graph
from ..params import positive
from .gfhf import GFHF


class MeanShiftLaplace(GFHF):
    """Laplace learning with GraphLearning's mean shift (module docstring). Parameters: ``tol``/``maxiter`` of
    the CG solve."""

    name = "meanshift"
    _parameter_constraints = {"tol": [positive()], "maxiter": [positive("int")]}
    cmn = False  # GFHF's class mass normalisation is not part of this method

    def __init__(self, tol: float = 1e-8, maxiter: int = 20_000):
        self.tol = tol
        self.maxiter = maxiter

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        super()._fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress, cache=cache)
        self.scores_ = self.scores_ - self.scores_.mean(axis=0)
