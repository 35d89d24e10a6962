"""New points (inductive prediction): how a graph builder places a point that was not in the graph.

Every graph builder answers :meth:`lgcexp.graph.GraphBuilder.extension` with an object whose
``predict_proba(Xq, algorithm)`` gives the new points' class distributions from a fitted algorithm. The
rules here are the kNN graph's (:class:`KnnVote`: scikit-learn's ``LabelSpreading`` extension, a
kernel-weighted vote of the neighbours' fitted distributions) and a given affinity's
(:class:`AffinityVote`, ``graph=precomputed``: the new points' affinities to the training points vote);
the anchor graph reads a new point's anchor codes (:mod:`lgcexp.graph.anchor`) and the numerical eigenfunctions
are read at the point (:mod:`lgcexp.algorithms.eigenfunction`). A builder that defines no rule gets
:class:`lgcexp.graph.base.TrainingPointsOnly` (the training rows' fitted distributions; other rows refused in
one line).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

#: query rows per block (bounds the (rows, k, classes) temporary)
CHUNK = 8192


def label_distributions(scores: np.ndarray) -> np.ndarray:
    """Class scores as distributions: clipped at 0 and normalised per row; a row with no score (a graph
    component without a labelled point, or all scores <= 0) gets the uniform distribution."""
    F = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    total = F.sum(axis=1, keepdims=True)
    return np.divide(F, total, out=np.full_like(F, 1.0 / F.shape[1]), where=total > 0)


class KnnVote:
    """The vote of a new point's ``k`` nearest training points (exact faiss search in ``index``), weighted
    by the graph's kernel between the new point q and the training point j: Gaussian
    ``exp(-d^2 / (2 sigma^2))``; self_tuning ``exp(-d^2 / (sigma_q sigma_j))`` with ``sigma_j`` the training
    point's local scale (``local_scales``) and ``sigma_q`` the distance of q to its ``local_scale``-th
    nearest training point (zero: the smallest training scale); binary: 1. Weights are taken relative to the
    largest one, so a point far from every training point follows its nearest neighbours."""

    def __init__(self, index: Any, k: int, kernel: str, sigma: float | None, local_scale: int,
                 local_scales: np.ndarray | None):
        self.index, self.k, self.kernel, self.sigma = index, int(k), kernel, sigma
        self.local_scale, self.local_scales = int(local_scale), local_scales

    def predict_proba(self, Xq: np.ndarray, algorithm: Any) -> np.ndarray:
        from .search import knn_query

        F = label_distributions(algorithm.scores_)
        n_train = self.index.ntotal
        k = min(self.k, n_train)
        depth = min(max(k, self.local_scale), n_train) if self.kernel == "self_tuning" else k
        out = np.empty((Xq.shape[0], F.shape[1]))
        for s in range(0, Xq.shape[0], CHUNK):
            dist, idx = knn_query(self.index, Xq[s:s + CHUNK], depth)
            d2 = dist[:, :k] ** 2
            idx = idx[:, :k]
            if self.kernel == "gaussian":
                e = -d2 / (2.0 * self.sigma ** 2)
            elif self.kernel == "self_tuning":
                sq = dist[:, min(self.local_scale, depth) - 1]
                sq = np.where(sq > 0, sq, self.local_scales.min())
                e = -d2 / (sq[:, None] * self.local_scales[idx])
            else:  # binary
                e = np.zeros_like(d2)
            w = np.exp(e - e.max(axis=1, keepdims=True))
            P = np.einsum("mk,mkc->mc", w, F[idx])
            out[s:s + CHUNK] = P / P.sum(axis=1, keepdims=True)
        return out

    # the faiss index travels as faiss's own serialisation
    def __getstate__(self) -> dict[str, Any]:
        from .search import import_faiss

        state = dict(self.__dict__)
        state["index"] = import_faiss().serialize_index(self.index)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        from .search import import_faiss

        state = dict(state)
        state["index"] = import_faiss().deserialize_index(state["index"])
        self.__dict__.update(state)


class AffinityVote:
    """``graph=precomputed``: the new points come as their affinities to the training points, an
    (m, n_train) matrix (scikit-learn's ``metric="precomputed"`` convention), and vote with them:
    ``normalize_rows(K F)``; a row without affinity gets the uniform distribution."""

    def predict_proba(self, K: Any, algorithm: Any) -> np.ndarray:
        if (K.data if sp.issparse(K) else np.asarray(K)).min(initial=0.0) < 0:
            raise ValueError("graph='precomputed': affinities must be non-negative")
        P = np.asarray(K @ label_distributions(algorithm.scores_))
        total = P.sum(axis=1, keepdims=True)
        return np.divide(P, total, out=np.full_like(P, 1.0 / P.shape[1]), where=total > 0)
