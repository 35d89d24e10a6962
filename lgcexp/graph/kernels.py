"""Edge weights of a kNN graph from its sparse, symmetrised distance matrix ``D`` (``graph.kernel=``).

* ``gaussian`` (the paper's): ``W_ij = exp(-d_ij^2 / (2 sigma^2))`` with one global ``sigma`` (a number, or
  the ``mean`` heuristic: mean distance to the 10th nearest neighbour / 3).
* ``self_tuning``: the local-scale Gaussian of Zelnik-Manor & Perona, "Self-Tuning Spectral Clustering",
  NIPS 2004: ``W_ij = exp(-d_ij^2 / (sigma_i sigma_j))`` with ``sigma_i`` the distance of point i to its
  ``local_scale``-th nearest neighbour (their default 7). A point with ``local_scale`` or more duplicates has
  ``sigma_i = 0``; it gets the smallest positive ``sigma`` of the data instead (all zero: 1).
* ``binary``: ``W_ij = 1`` on every edge of the kNN graph (the unweighted graph).

Every kernel keeps the sparsity of ``D`` (an edge of distance zero, between duplicate points, is kept) and
returns a zero diagonal.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

KERNELS = ("gaussian", "self_tuning", "binary")
SIGMA_NEIGHBOR = 10  # the "mean" heuristic uses the distance to the 10th nearest neighbour
LOCAL_SCALE = 7      # Zelnik-Manor & Perona's neighbour for the local scale


def sigma_mean_heuristic(dist_sorted: np.ndarray, neighbor: int = SIGMA_NEIGHBOR) -> float:
    """Mean over points of the distance to the ``neighbor``-th nearest neighbour, divided by 3 (points
    whose list is shorter, possible with an approximate search, are left out)."""
    return float(np.nanmean(dist_sorted[:, neighbor - 1]) / 3.0)


def local_scales(dist_sorted: np.ndarray, neighbor: int = LOCAL_SCALE) -> np.ndarray:
    """``sigma_i``: the distance of point i to its ``neighbor``-th nearest neighbour (self excluded),
    ``dist_sorted`` (n, >= neighbor) ascending per row. Zero (duplicates) or missing entries are replaced
    by the smallest positive scale of the data (1 when there is none)."""
    s = np.asarray(dist_sorted[:, neighbor - 1], dtype=np.float64).copy()
    ok = np.isfinite(s) & (s > 0)
    s[~ok] = s[ok].min() if ok.any() else 1.0
    return s


def _finish(W: sp.csr_matrix) -> sp.csr_matrix:
    W.setdiag(0.0)
    W.eliminate_zeros()
    return W.tocsr()


def gaussian_weights(D: sp.csr_matrix, sigma: float) -> sp.csr_matrix:
    """``W_ij = exp(-d_ij^2 / (2 sigma^2))`` on the stored entries; zero diagonal."""
    W = D.copy().astype(np.float64)
    W.data = np.exp(-(W.data ** 2) / (2.0 * sigma * sigma))
    return _finish(W)


def self_tuning_weights(D: sp.csr_matrix, scales: np.ndarray) -> sp.csr_matrix:
    """``W_ij = exp(-d_ij^2 / (sigma_i sigma_j))`` on the stored entries (Zelnik-Manor & Perona 2004);
    ``scales`` the positive ``sigma_i``; zero diagonal."""
    W = sp.csr_matrix(D, dtype=np.float64, copy=True)
    W.sort_indices()
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    W.data = np.exp(-(W.data ** 2) / (scales[rows] * scales[W.indices]))
    return _finish(W)


def binary_weights(D: sp.csr_matrix) -> sp.csr_matrix:
    """``W_ij = 1`` on the stored entries (the unweighted graph); zero diagonal."""
    W = sp.csr_matrix(D, dtype=np.float64, copy=True)
    W.data = np.ones_like(W.data)
    return _finish(W)
