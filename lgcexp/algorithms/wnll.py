"""The weighted nonlocal Laplacian (WNLL; Shi, Osher & Zhu, "Weighted nonlocal Laplacian on interpolation
from sparse data", J. Sci. Comput. 73, 2017): Laplace learning (GFHF, :mod:`lgcexp.algorithms.gfhf`) on the
reweighted graph ``W'_ij = (a_i + a_j) W_ij``, ``a_i = n/m`` at the m labelled points and 1 elsewhere, i.e.
the harmonic extension of the labels for the energy ``sum_{i unlabelled} sum_j W_ij (u_i - u_j)^2 + (n/m)
sum_{i labelled} sum_j W_ij (u_i - u_j)^2``. Same weights as GraphLearning's ``laplace(reweighting='wnll')``.

(The properly weighted Laplacian of Calder & Slepčev, Appl. Math. Optim. 2019, reweights by each point's
feature-space distance to the labelled set, which an algorithm here does not see (it gets the graph only);
it is not implemented.)
"""
from __future__ import annotations

import numpy as np

from .gfhf import GFHF


def wnll_weights(W, labeled: np.ndarray):
    """``W'_ij = (a_i + a_j) W_ij``, ``a = n/m`` on the m labelled points and 1 elsewhere (WNLL)."""
    import scipy.sparse as sp

    n = W.shape[0]
    a = np.ones(n)
    a[labeled] = n / labeled.size
    A = sp.diags(a)
    return sp.csr_matrix(A @ W + W @ A)


class WNLL(GFHF):
    """GFHF on the WNLL weights (parameters as GFHF: ``tol``, ``maxiter``, ``cmn``)."""

    name = "wnll"

    def weights(self, graph, labeled):
        W = wnll_weights(graph.W, labeled)
        return W, np.asarray(W.sum(axis=1)).ravel()
