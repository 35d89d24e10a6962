"""``graph=knn``: the exact k-nearest-neighbour graph (faiss ``IndexFlatL2``)."""
from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp

from ..cache import Cache, stable_hash
from ..errors import UserError
from ..params import Interval, Options, positive
from .base import Graph, GraphBuilder, fingerprint
from .kernels import SIGMA_NEIGHBOR, gaussian_weights, sigma_mean_heuristic

log = logging.getLogger(__name__)

SYMMETRIZE = ("union", "mutual")


def knn_search(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN by faiss ``IndexFlatL2``: (distances, indices), each (n, k), self excluded.

    Searches k+1 neighbours and removes the query point itself wherever it appears (duplicates may push it
    out of column 0); rows that did not return themselves drop their last neighbour.
    """
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError(
            "faiss is not installed: install the CPU extra (pip install 'lgcexp[cpu]') or the GPU one ('lgcexp[gpu]')"
        ) from exc
    Xf = np.ascontiguousarray(X, dtype=np.float32)
    n, d = Xf.shape
    index = faiss.IndexFlatL2(d)
    index.add(Xf)
    sq, idx = index.search(Xf, k + 1)
    is_self = idx == np.arange(n)[:, None]
    has_self = is_self.any(axis=1)
    # drop the self column where present, else the farthest (last) column
    drop = np.where(has_self, is_self.argmax(axis=1), k)
    keep = np.ones_like(idx, dtype=bool)
    keep[np.arange(n), drop] = False
    idx = idx[keep].reshape(n, k)
    sq = sq[keep].reshape(n, k)
    dist = np.sqrt(np.maximum(sq, 0.0)).astype(np.float64)
    return dist, idx.astype(np.int64)


def knn_distance_matrix(dist: np.ndarray, idx: np.ndarray, symmetrize: str) -> sp.csr_matrix:
    """Sparse distance matrix of the kNN lists, symmetrised (union = max, mutual = min)."""
    n, k = idx.shape
    rows = np.repeat(np.arange(n), k)
    # A zero distance (duplicate points) would vanish from the sparse structure; keep it as a tiny value.
    vals = np.maximum(dist.ravel(), 1e-300)
    K = sp.csr_matrix((vals, (rows, idx.ravel())), shape=(n, n))
    KT = K.T.tocsr()
    if symmetrize == "union":
        return K.maximum(KT).tocsr()
    return K.minimum(KT).tocsr()


def build_affinity(X: np.ndarray, k: int, sigma: float | str, symmetrize: str = "union") -> tuple[sp.csr_matrix, float]:
    """Affinity matrix W and the sigma used (resolved when ``sigma='mean'``); parameters already checked."""
    k_search = max(k, SIGMA_NEIGHBOR) if sigma == "mean" else k
    k_search = min(k_search, X.shape[0] - 1)
    dist, idx = knn_search(X, k_search)
    if sigma == "mean":
        if k_search < SIGMA_NEIGHBOR:
            raise UserError(f"graph.sigma='mean' needs at least {SIGMA_NEIGHBOR + 1} points")
        sigma_val = sigma_mean_heuristic(dist)
    else:
        sigma_val = float(sigma)
    D = knn_distance_matrix(dist[:, :k], idx[:, :k], symmetrize)
    return gaussian_weights(D, sigma_val), sigma_val


def graph_key(data_fingerprint: str, k: int, sigma: float | str, symmetrize: str) -> str:
    return stable_hash({"data": data_fingerprint, "k": int(k), "sigma": sigma, "sym": symmetrize, "v": 1})


def build_graph(
    X: np.ndarray,
    k: int,
    sigma: float | str,
    symmetrize: str = "union",
    *,
    cache: Cache | None = None,
    data_fingerprint: str | None = None,
) -> tuple[Graph, bool]:
    """Stage 3 with caching: the exact kNN graph; returns (graph, cache_hit)."""
    builder = KnnGraph(k=k, sigma=sigma, symmetrize=symmetrize)
    builder._validate_params()
    builder.check_data(X.shape[0], 0)
    return builder._build(X, cache=cache, data_fingerprint=data_fingerprint)


class KnnGraph(GraphBuilder):
    """Exact kNN graph (faiss ``IndexFlatL2``), union- or mutual-symmetrised, Gaussian weights.

    Parameters: ``k`` neighbours; ``sigma`` a positive number or ``mean`` (mean distance to the 10th
    neighbour / 3); ``symmetrize`` union (the paper's) or mutual."""

    name = "knn"
    _parameter_constraints = {
        "k": [Interval("int", 1, None)],
        "sigma": [positive(), Options(("mean",))],
        "symmetrize": [Options(SYMMETRIZE)],
    }

    def __init__(self, k: int = 10, sigma: float | str = "mean", symmetrize: str = "union"):
        self.k = k
        self.sigma = sigma
        self.symmetrize = symmetrize

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        if self.k >= n:
            raise UserError(f"{prefix}k={self.k} is not allowed: it must be less than the number of points ({n})")
        if self.sigma == "mean" and n <= SIGMA_NEIGHBOR:
            raise UserError(f"{prefix}sigma=mean is not allowed: it needs at least {SIGMA_NEIGHBOR + 1} points "
                            f"(the data has {n}); give a number")

    def _build(self, X, *, cache, data_fingerprint) -> tuple[Graph, bool]:
        k, sigma, symmetrize = int(self.k), self.sigma, self.symmetrize
        fp = data_fingerprint or fingerprint(X)
        key = graph_key(fp, k, sigma, symmetrize)

        def compute() -> dict[str, np.ndarray]:
            t0 = time.perf_counter()
            W, sig = build_affinity(X, k, sigma, symmetrize)
            log.info("built %d-NN graph on %d points in %.1fs (sigma=%.4g)", k, X.shape[0],
                     time.perf_counter() - t0, sig)
            return {"data": W.data, "indices": W.indices, "indptr": W.indptr, "shape": np.array(W.shape),
                    "sigma": np.array(sig)}

        cache = cache or Cache(None)
        arrays, hit = cache.get_or_compute("graph", key, compute)
        W = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
        return Graph(W=W, sigma=float(arrays["sigma"]), key=key), hit
