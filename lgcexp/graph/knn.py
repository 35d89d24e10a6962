"""``graph=knn``: the exact k-nearest-neighbour graph (faiss ``IndexFlatL2``; on integer-valued data the
symmetric self-join of :mod:`lgcexp.graph.selfjoin`, which returns faiss's lists bit for bit).

The k nearest neighbours of every point (self excluded) give a sparse distance matrix, symmetrised as the
union graph (``max(K, K^T)``, the paper's) or the mutual graph (``min``); a kernel of
:mod:`lgcexp.graph.kernels` turns distances into weights (default the Gaussian
``W_ij = exp(-d_ij^2 / (2 sigma^2))``, Zhou et al., "Learning with Local and Global Consistency", NIPS 2003).
The graph depends only on the data and these settings, never on the seed, so it is cached on disk.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .. import memo
from ..cache import Cache, stable_hash
from ..errors import UserError
from ..params import Interval, Options, positive
from .base import Graph, GraphBuilder, check_graph_arrays, check_no_isolated_points, fingerprint
from .kernels import (
    KERNELS,
    LOCAL_SCALE,
    SIGMA_NEIGHBOR,
    binary_weights,
    gaussian_weights,
    local_scales,
    self_tuning_weights,
    sigma_mean_heuristic,
)
from .search import as_float32, drop_self, faiss_exact_search, flat_index, gpu_search

log = logging.getLogger(__name__)

SYMMETRIZE = ("union", "mutual")

#: a neighbour search: (X, k) -> (distances (n, k) ascending, indices (n, k); -1 where none was found)
Search = Callable[[np.ndarray, int], "tuple[np.ndarray, np.ndarray]"]


#: the symmetric self-join (:mod:`lgcexp.graph.selfjoin`) replaces faiss's search of all points from this size
SELFJOIN_MIN_POINTS = 8192


def use_selfjoin(X: np.ndarray) -> bool:
    """Whether the exact search of all points goes through :func:`lgcexp.graph.selfjoin.selfjoin_search`:
    for integer-valued X of at least :data:`SELFJOIN_MIN_POINTS` points, where it provably returns faiss's
    neighbours and float32 distances bit for bit, at a fraction of the arithmetic. Other data keep faiss's
    search (the self-join's distances may differ from faiss's in the last bit there)."""
    from .selfjoin import is_integer_valued

    if gpu_search():
        return False  # a GPU's brute-force search is faster than the CPU join (and is not bit for bit faiss-CPU)
    return X.shape[0] >= SELFJOIN_MIN_POINTS and is_integer_valued(X)


def exact_search(X: np.ndarray, k: int, queries: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN (faiss ``IndexFlatL2``) of the points ``queries`` (row numbers; default all) among all of
    ``X``, self excluded: (distances, indices), each (m, k). All points of integer-valued data: the same
    result by the symmetric self-join (:func:`use_selfjoin`)."""
    if queries is None and use_selfjoin(X):
        from .selfjoin import selfjoin_search

        return selfjoin_search(X, k)
    return faiss_exact_search(X, k, queries)


def knn_search(X: np.ndarray, k: int, *, index: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN by faiss ``IndexFlatL2``: (distances, indices), each (n, k), self excluded.

    Searches k+1 neighbours and removes the query point itself wherever it appears (duplicates may push it
    out of column 0); rows that did not return themselves drop their last neighbour. ``index``: a
    :func:`flat_index` of X already built (built here otherwise). Integer-valued data of at least
    :data:`SELFJOIN_MIN_POINTS` points go through the symmetric self-join instead, with the same result
    (:func:`use_selfjoin`).
    """
    if index is None or use_selfjoin(X):
        return exact_search(X, k)
    Xf = as_float32(X)
    sq, idx = index.search(Xf, k + 1)
    return drop_self(sq, idx, np.arange(Xf.shape[0]))


def neighbor_arrays(arrays: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The kNN lists stored with a cached graph (``knn_dist``, ``knn_idx``: n rows, the same width, indices
    in range), or None where the entry has none (written before they were kept) or they do not fit."""
    if "knn_dist" not in arrays or "knn_idx" not in arrays:
        return None
    dist, idx = np.asarray(arrays["knn_dist"]), np.asarray(arrays["knn_idx"])
    if dist.ndim != 2 or dist.shape != idx.shape or dist.shape[0] != n or (idx.size and idx.max() >= n):
        return None
    return dist, idx


def knn_distance_matrix(dist: np.ndarray, idx: np.ndarray, symmetrize: str) -> sp.csr_matrix:
    """Sparse distance matrix of the kNN lists, symmetrised (union = max, mutual = min); entries with
    index -1 (not found by an approximate search) are left out."""
    n, k = idx.shape
    rows = np.repeat(np.arange(n), k)
    cols = idx.ravel()
    found = cols >= 0
    # A zero distance (duplicate points) would vanish from the sparse structure; keep it as a tiny value.
    vals = np.maximum(dist.ravel()[found], 1e-300)
    K = sp.csr_matrix((vals, (rows[found], cols[found])), shape=(n, n))
    KT = K.T.tocsr()
    if symmetrize == "union":
        return K.maximum(KT).tocsr()
    return K.minimum(KT).tocsr()


def search_depth(k: int, sigma: float | str, kernel: str, local_scale: int) -> int:
    """How many neighbours the search needs: k, and as many as the sigma heuristic or local scale use."""
    need = k
    if kernel == "gaussian" and sigma == "mean":
        need = max(need, SIGMA_NEIGHBOR)
    if kernel == "self_tuning":
        need = max(need, int(local_scale))
    return need


def affinity_from_neighbors(dist: np.ndarray, idx: np.ndarray, k: int, sigma: float | str, symmetrize: str,
                            kernel: str = "gaussian", local_scale: int = LOCAL_SCALE) -> tuple[sp.csr_matrix, float]:
    """W from sorted neighbour lists (at least :func:`search_depth` columns) and the global sigma used
    (NaN for the kernels that have none)."""
    D = knn_distance_matrix(dist[:, :k], idx[:, :k], symmetrize)
    if kernel == "binary":
        return binary_weights(D), float("nan")
    if kernel == "self_tuning":
        return self_tuning_weights(D, local_scales(dist, int(local_scale))), float("nan")
    sigma_val = sigma_mean_heuristic(dist) if sigma == "mean" else float(sigma)
    if not (np.isfinite(sigma_val) and sigma_val > 0):  # every point has >= 10 exact duplicates
        raise UserError(
            f"graph.sigma='mean' gives sigma={sigma_val:g}: the {SIGMA_NEIGHBOR}th nearest neighbour of every "
            "point is at distance 0 (duplicate points); set a positive number, e.g. graph.sigma=1"
        )
    return gaussian_weights(D, sigma_val), sigma_val


def build_affinity(X: np.ndarray, k: int, sigma: float | str, symmetrize: str = "union", *,
                   kernel: str = "gaussian", local_scale: int = LOCAL_SCALE,
                   search: Search = knn_search) -> tuple[sp.csr_matrix, float]:
    """Affinity matrix W and the sigma used (resolved when ``sigma='mean'``; NaN for the self_tuning and
    binary kernels); parameters already checked."""
    k_search = min(search_depth(k, sigma, kernel, local_scale), X.shape[0] - 1)
    if kernel == "gaussian" and sigma == "mean" and k_search < SIGMA_NEIGHBOR:
        raise UserError(f"graph.sigma='mean' needs at least {SIGMA_NEIGHBOR + 1} points")
    if kernel == "self_tuning" and k_search < local_scale:
        raise UserError(f"graph.local_scale={local_scale} needs at least {local_scale + 1} points")
    dist, idx = search(X, k_search)
    return affinity_from_neighbors(dist, idx, k, sigma, symmetrize, kernel, local_scale)


def graph_key(data_fingerprint: str, k: int, sigma: float | str, symmetrize: str, kernel: str = "gaussian",
              local_scale: int = LOCAL_SCALE, search: dict[str, Any] | None = None) -> str:
    """Cache key of a kNN graph: the data, k, symmetrisation, the kernel and its parameters (sigma for the
    Gaussian, local_scale for self_tuning) and, for an approximate search, the index and its parameters.
    The exact Gaussian graph keeps the key it always had."""
    spec: dict[str, Any] = {"data": data_fingerprint, "k": int(k), "sym": symmetrize, "v": 1}
    if kernel == "gaussian":
        spec["sigma"] = sigma
    else:
        spec["kernel"] = kernel
        if kernel == "self_tuning":
            spec["local_scale"] = int(local_scale)
    if search:
        spec["search"] = search
    return stable_hash(spec)


def build_graph(
    X: np.ndarray,
    k: int,
    sigma: float | str,
    symmetrize: str = "union",
    *,
    cache: Cache | None = None,
    data_fingerprint: str | None = None,
    kernel: str = "gaussian",
    local_scale: int = LOCAL_SCALE,
) -> tuple[Graph, bool]:
    """Stage 3 with caching: the exact kNN graph; returns (graph, cache_hit)."""
    builder = KnnGraph(k=k, sigma=sigma, symmetrize=symmetrize, kernel=kernel, local_scale=local_scale)
    builder._validate_params()
    builder.check_data(X.shape[0], 0)
    return builder.build(X, cache=cache, data_fingerprint=data_fingerprint)


class KnnGraph(GraphBuilder):
    """``graph=knn``: the exact kNN graph (faiss ``IndexFlatL2``, self excluded).

    ``D`` = the kNN distance lists symmetrised, union ``max(K, K^T)`` (the paper's) or mutual ``min``;
    ``W = kernel(D)`` with a zero diagonal (:mod:`lgcexp.graph.kernels`):

    * gaussian: ``W_ij = exp(-d_ij^2 / (2 sigma^2))`` (Zhou et al., NIPS 2003);
    * self_tuning: ``W_ij = exp(-d_ij^2 / (sigma_i sigma_j))``, ``sigma_i`` the distance of i to its
      ``local_scale``-th neighbour (Zelnik-Manor & Perona, "Self-Tuning Spectral Clustering", NIPS 2004);
    * binary: ``W_ij = 1`` on every edge.

    ============  =====================================  ===================================================
    parameter     allowed                                meaning
    ============  =====================================  ===================================================
    k             integer >= 1, < n                      neighbours per point (default 10)
    sigma         number > 0 or ``mean``                 Gaussian width; ``mean``: mean distance to the 10th
                                                         neighbour / 3 (default). Unused by the other kernels
    symmetrize    union, mutual                          max (default, the paper's) or min of K and K^T
    kernel        gaussian, self_tuning, binary          edge weights (default gaussian)
    local_scale   integer >= 1, < n                      neighbour giving sigma_i for self_tuning (default 7)
    ============  =====================================  ===================================================
    """

    name = "knn"
    _parameter_constraints = {
        "k": [Interval("int", 1, None)],
        "sigma": [positive(), Options(("mean",))],
        "symmetrize": [Options(SYMMETRIZE)],
        "kernel": [Options(KERNELS)],
        "local_scale": [Interval("int", 1, None)],
    }

    def __init__(self, k: int = 10, sigma: float | str = "mean", symmetrize: str = "union",
                 kernel: str = "gaussian", local_scale: int = LOCAL_SCALE):
        self.k = k
        self.sigma = sigma
        self.symmetrize = symmetrize
        self.kernel = kernel
        self.local_scale = local_scale

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        if self.k >= n:
            raise UserError(f"{prefix}k={self.k} is not allowed: it must be less than the number of points ({n})")
        if self.kernel == "gaussian" and self.sigma == "mean" and n <= SIGMA_NEIGHBOR:
            raise UserError(f"{prefix}sigma=mean is not allowed: it needs at least {SIGMA_NEIGHBOR + 1} points "
                            f"(the data has {n}); give a number")
        if self.kernel == "self_tuning" and self.local_scale >= n:
            raise UserError(f"{prefix}local_scale={self.local_scale} is not allowed: it must be less than the "
                            f"number of points ({n})")

    def min_points(self) -> int:
        """More points than ``k``; ``sigma='mean'`` (Gaussian) needs a 10th neighbour, the self-tuning kernel
        more points than ``local_scale``."""
        need = max(2, int(self.k) + 1)
        if self.kernel == "gaussian" and self.sigma == "mean":
            need = max(need, SIGMA_NEIGHBOR + 1)
        if self.kernel == "self_tuning":
            need = max(need, int(self.local_scale) + 1)
        return need

    def extension(self, X: np.ndarray, graph: Graph, **build_options: Any) -> Any:
        """New points: the kernel-weighted vote of their ``k`` nearest training points
        (:class:`lgcexp.graph.extension.KnnVote`, scikit-learn's ``LabelSpreading`` rule), searched exactly
        in a faiss index of X (also for ``knn_approx``) with the graph's kernel and width."""
        from .extension import KnnVote

        index = build_options.get("index") or flat_index(X)
        scales = None
        if self.kernel == "self_tuning":
            # sigma_i of the training points as the graph's kernel used them (local_scale-th neighbour, self
            # excluded)
            dist, _ = knn_search(X, int(self.local_scale), index=index)
            scales = local_scales(dist, int(self.local_scale))
        sigma = float(graph.sigma) if self.kernel == "gaussian" else None
        return KnnVote(index, int(self.k), self.kernel, sigma, int(self.local_scale), scales)

    # -- what a subclass changes: the search, and what identifies it in the cache key ---------------------
    def _search_spec(self, n: int) -> dict[str, Any] | None:
        """The search's parameters for the cache key (None: the exact search)."""
        return None

    def _neighbors(self, X: np.ndarray, k_search: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """(distances, indices, info) of the k_search nearest neighbours of every point."""
        dist, idx = knn_search(X, k_search)
        return dist, idx, {}

    def _lists_in_feature_space(self) -> bool:
        """Whether the search's distances are those of the features themselves (its lists are then kept
        with the graph, :attr:`Graph.neighbors`, for the data audit)."""
        return True

    def _check_graph(self, graph: Graph) -> None:
        """In a union kNN graph every point has at least k edges, so a point without one means its weights
        underflowed (sigma far too small): refused. A mutual kNN graph may leave points alone: logged."""
        check_no_isolated_points(graph, self.sigma, allow_isolated=self.symmetrize != "union")

    def _build(self, X, *, cache, data_fingerprint, index: Any = None) -> tuple[Graph, bool]:
        """``index``: a :func:`flat_index` of X to search in (the exact search builds one otherwise)."""
        k, sigma, symmetrize, kernel, local_scale = int(self.k), self.sigma, self.symmetrize, self.kernel, \
            int(self.local_scale)
        n = X.shape[0]
        fp = data_fingerprint or fingerprint(X)
        key = graph_key(fp, k, sigma, symmetrize, kernel, local_scale, self._search_spec(n))
        keep_lists = self._lists_in_feature_space()

        def compute() -> dict[str, np.ndarray]:
            t0 = time.perf_counter()
            k_search = min(search_depth(k, sigma, kernel, local_scale), n - 1)
            if index is None:
                dist, idx, info = self._neighbors(X, k_search)
            else:
                dist, idx = knn_search(X, k_search, index=index)
                info = {}
            W, sig = affinity_from_neighbors(dist, idx, k, sigma, symmetrize, kernel, local_scale)
            info = {**info, "build_seconds": round(time.perf_counter() - t0, 3)}
            log.info("built %d-NN graph (%s, %s kernel) on %d points in %.1fs (sigma=%.4g)", k, self.name, kernel,
                     n, info["build_seconds"], sig)
            arrays = {"data": W.data, "indices": W.indices, "indptr": W.indptr, "shape": np.array(W.shape),
                      "sigma": np.array(sig), "info": np.array(json.dumps(info))}
            if keep_lists:  # kept for the data audit (Graph.neighbors)
                arrays.update(knn_dist=np.asarray(dist), knn_idx=np.asarray(idx))
            return arrays

        cache = cache or Cache(None)

        def load() -> tuple[Graph, bool]:
            arrays, hit = cache.get_or_compute("graph", key, compute, validate=lambda a: check_graph_arrays(a, n))
            W = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
            info = json.loads(str(arrays["info"])) if "info" in arrays else {}
            lists = neighbor_arrays(arrays, n) if keep_lists else None
            return Graph(W=W, sigma=float(arrays["sigma"]), key=key, info=info, neighbors=lists,
                         neighbors_exact=lists is not None and self._search_spec(n) is None), hit

        # a sweep worker's later jobs reuse the Graph (S, and its RCM ordering, lgcexp.solvers.shifted) while the
        # cache entry is the file it was read from (lgcexp.memo)
        (graph, hit), reused = memo.memoised("graph", key, cache.path("graph", key), load)
        return graph, hit or reused
