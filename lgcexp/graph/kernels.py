"""Edge weights of a graph from its (sparse, symmetrised) distance matrix, and the sigma heuristic."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

SIGMA_NEIGHBOR = 10  # the "mean" heuristic uses the distance to the 10th nearest neighbour


def sigma_mean_heuristic(dist_sorted: np.ndarray, neighbor: int = SIGMA_NEIGHBOR) -> float:
    """Mean over points of the distance to the ``neighbor``-th nearest neighbour, divided by 3."""
    return float(dist_sorted[:, neighbor - 1].mean() / 3.0)


def gaussian_weights(D: sp.csr_matrix, sigma: float) -> sp.csr_matrix:
    """``W_ij = exp(-d_ij^2 / (2 sigma^2))`` on the stored entries; zero diagonal."""
    W = D.copy().astype(np.float64)
    W.data = np.exp(-(W.data ** 2) / (2.0 * sigma * sigma))
    W.setdiag(0.0)
    W.eliminate_zeros()
    return W.tocsr()
