"""The weighted nonlocal Laplacian (WNLL; Shi, Osher & Zhu, "Weighted nonlocal Laplacian on interpolation
from sparse data", J. Sci. Comput. 73, 2017): Laplace learning (GFHF, :mod:`lgcexp.algorithms.gfhf`) on the
reweighted graph ``W'_ij = (a_i + a_j) W_ij``, ``a_i = n/m`` at the m labelled points and 1 elsewhere, i.e.
the harmonic extension of the labels for the energy ``sum_{i unlabelled} sum_j W_ij (u_i - u_j)^2 + (n/m)
sum_{i labelled} sum_j W_ij (u_i - u_j)^2``. Same weights as GraphLearning's ``laplace(reweighting='wnll')``.

The properly weighted Laplacian (:mod:`lgcexp.algorithms.properly`) is the same reweighting with other node
weights.
"""
from __future__ import annotations

import numpy as np

from .gfhf import GFHF


def node_reweighted(W, a: np.ndarray):
    """``W'_ij = (a_i + a_j) W_ij``: a graph reweighted by a weight per node (WNLL, the properly weighted
    Laplacian)."""
    import scipy.sparse as sp

    A = sp.diags(np.asarray(a, dtype=np.float64))
    return sp.csr_matrix(A @ W + W @ A)


class WNLL(GFHF):
    """GFHF on the WNLL weights (parameters as GFHF: ``tol``, ``maxiter``, ``cmn``)."""

    name = "wnll"

    def node_weights(self, graph, labeled) -> np.ndarray:
        """The weight ``a_i`` of every node (WNLL: n/m at the labels, 1 elsewhere)."""
        a = np.ones(graph.n)
        a[labeled] = graph.n / len(labeled)
        return a

    def weights(self, graph, labeled):
        W = node_reweighted(graph.W, self.node_weights(graph, labeled))
        return W, np.asarray(W.sum(axis=1)).ravel()
