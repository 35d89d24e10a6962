"""Stage 3: the affinity graph (docs/fidelity.md#graph; paper Eqs. (7)-(9)).

Exact k-nearest neighbours with faiss (``IndexFlatL2``, self excluded), symmetrised as the union graph
(element-wise max of the distance matrix and its transpose; ``mutual`` = min), Gaussian weights
``W_ij = exp(-d_ij^2 / (2 sigma^2))`` with a zero diagonal, and the normalised affinity
``S = D^-1/2 W D^-1/2`` (paper Eq. (9): ``L_N = I - S``). The graph depends only on the data and these
settings, never on the seed, so it is cached on disk.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from .cache import Cache, stable_hash
from .errors import UserError
from .params import Configurable, Interval, Options, positive
from .registry import Registry

log = logging.getLogger(__name__)

SYMMETRIZE = ("union", "mutual")
SIGMA_NEIGHBOR = 10  # the "mean" heuristic uses the distance to the 10th nearest neighbour


@dataclass
class Graph:
    """A weighted undirected graph with its normalised affinity.

    ``W`` symmetric CSR with zero diagonal; ``degree`` its row sums; ``S = D^-1/2 W D^-1/2``;
    ``key`` a content hash of what the graph depends on (used for caching derived results).
    """

    W: sp.csr_matrix
    sigma: float
    key: str
    degree: np.ndarray = field(init=False)
    S: sp.csr_matrix = field(init=False)

    def __post_init__(self) -> None:
        self.W = sp.csr_matrix(self.W, dtype=np.float64)
        self.degree = np.asarray(self.W.sum(axis=1)).ravel()
        inv_sqrt = np.ones_like(self.degree)
        pos = self.degree > 0
        inv_sqrt[pos] = 1.0 / np.sqrt(self.degree[pos])  # a zero degree gets factor 1 (docs/fidelity.md#graph)
        Dm = sp.diags(inv_sqrt)
        self.S = sp.csr_matrix(Dm @ self.W @ Dm)
        self.inv_sqrt_degree = inv_sqrt

    @property
    def n(self) -> int:
        return self.W.shape[0]

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return int(self.W.nnz // 2)

    def n_components(self) -> int:
        return int(sp.csgraph.connected_components(self.W, directed=False)[0])


#: OpenBLAS kernel families by the CPU flags they need (best first); see :func:`openblas_coretype`
_OPENBLAS_CORES = (
    ("SkylakeX", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
    ("Haswell", {"avx2", "fma"}),
)


def openblas_coretype(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The OpenBLAS kernel family this CPU can run (``SkylakeX`` with AVX-512, ``Haswell`` with AVX2+FMA),
    from the CPU flags; None when unknown (not Linux, or an older CPU)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return None
    return next((name for name, need in _OPENBLAS_CORES if need <= flags), None)


def _faiss():
    """Import faiss. The faiss-cpu wheels bundle their own OpenBLAS (0.3.15 in faiss-cpu 1.15), which does
    not recognise CPUs newer than it (Sapphire Rapids: it falls back to its SSE3 'Prescott' kernels, and the
    exact kNN search, a float32 GEMM, runs 4x slower: MNIST's graph 350 CPU seconds instead of about 90).
    Before faiss is first imported, and unless the user set it, ``OPENBLAS_CORETYPE`` is set to the kernel
    family the CPU flags allow; numpy's own OpenBLAS is loaded already and is not affected."""
    import os
    import sys

    if "faiss" not in sys.modules and not os.environ.get("OPENBLAS_CORETYPE"):
        core = openblas_coretype()
        if core:
            os.environ["OPENBLAS_CORETYPE"] = core
            log.debug("OPENBLAS_CORETYPE=%s for faiss's bundled OpenBLAS", core)
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError(
            "faiss is not installed: install the CPU extra (pip install 'lgcexp[cpu]') or the GPU one ('lgcexp[gpu]')"
        ) from exc
    return faiss


def as_float32(X: np.ndarray) -> np.ndarray:
    """X as the C-contiguous float32 array faiss reads (no copy when it already is one, e.g. a memory map)."""
    return np.ascontiguousarray(X, dtype=np.float32)


def flat_index(X: np.ndarray):
    """An exact faiss ``IndexFlatL2`` holding the rows of X (the index the kNN graph is searched in, and
    the one the scikit-learn estimators query for new points)."""
    faiss = _faiss()
    Xf = as_float32(X)
    index = faiss.IndexFlatL2(Xf.shape[1])
    index.add(Xf)
    return index


def knn_query(index, Xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest indexed points of each query row: (distances, indices), each (m, k), nearest first.
    Nothing is excluded (a query that is an indexed point finds itself at distance 0)."""
    sq, idx = index.search(as_float32(Xq), int(k))
    return np.sqrt(np.maximum(sq, 0.0)).astype(np.float64), idx.astype(np.int64)


def knn_search(X: np.ndarray, k: int, *, index=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN by faiss ``IndexFlatL2``: (distances, indices), each (n, k), self excluded.

    Searches k+1 neighbours and removes the query point itself wherever it appears (duplicates may push it
    out of column 0); rows that did not return themselves drop their last neighbour. ``index``: a
    :func:`flat_index` of X already built (it is built here otherwise).
    """
    Xf = as_float32(X)
    n, d = Xf.shape
    if index is None:
        index = flat_index(Xf)
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


def sigma_mean_heuristic(dist_sorted: np.ndarray, neighbor: int = SIGMA_NEIGHBOR) -> float:
    """Mean over points of the distance to the ``neighbor``-th nearest neighbour, divided by 3."""
    return float(dist_sorted[:, neighbor - 1].mean() / 3.0)


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


def gaussian_weights(D: sp.csr_matrix, sigma: float) -> sp.csr_matrix:
    """``W_ij = exp(-d_ij^2 / (2 sigma^2))`` on the stored entries; zero diagonal."""
    W = D.copy().astype(np.float64)
    W.data = np.exp(-(W.data ** 2) / (2.0 * sigma * sigma))
    W.setdiag(0.0)
    W.eliminate_zeros()
    return W.tocsr()


def build_affinity(X: np.ndarray, k: int, sigma: float | str, symmetrize: str = "union", *,
                   index=None) -> tuple[sp.csr_matrix, float]:
    """Affinity matrix W and the sigma used (resolved when ``sigma='mean'``); parameters already checked.
    ``index``: a :func:`flat_index` of X already built."""
    k_search = max(k, SIGMA_NEIGHBOR) if sigma == "mean" else k
    k_search = min(k_search, X.shape[0] - 1)
    dist, idx = knn_search(X, k_search, index=index)
    if sigma == "mean":
        if k_search < SIGMA_NEIGHBOR:
            raise UserError(f"graph.sigma='mean' needs at least {SIGMA_NEIGHBOR + 1} points")
        sigma_val = sigma_mean_heuristic(dist)
        if not (np.isfinite(sigma_val) and sigma_val > 0):  # every point has >= 10 exact duplicates
            raise UserError(
                f"graph.sigma='mean' gives sigma={sigma_val:g}: the {SIGMA_NEIGHBOR}th nearest neighbour of every "
                "point is at distance 0 (duplicate points); set a positive number, e.g. graph.sigma=1"
            )
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


def _fingerprint(X: np.ndarray) -> str:
    import hashlib

    Xc = np.ascontiguousarray(X)
    return hashlib.sha256(Xc.tobytes()).hexdigest() + f"{Xc.shape}{Xc.dtype}"


class GraphBuilder(Configurable):
    """The graph-builder protocol: ``build(X, cache=, data_fingerprint=) -> (Graph, cache_hit)``; builders
    may take further keyword options (``KnnGraph``: ``index=``, a faiss index of X to search in)."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "graph."

    def build(self, X: np.ndarray, *, cache: Cache | None = None,
              data_fingerprint: str | None = None, **options) -> tuple[Graph, bool]:
        self._validate_params()
        return self._build(X, cache=cache, data_fingerprint=data_fingerprint, **options)

    def _build(self, X, *, cache, data_fingerprint, **options) -> tuple[Graph, bool]:  # pragma: no cover
        raise NotImplementedError


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

    def _build(self, X, *, cache, data_fingerprint, index=None) -> tuple[Graph, bool]:
        """``index``: a :func:`flat_index` of X to search in (built here when needed and not given)."""
        k, sigma, symmetrize = int(self.k), self.sigma, self.symmetrize
        fp = data_fingerprint or _fingerprint(X)
        key = graph_key(fp, k, sigma, symmetrize)

        def compute() -> dict[str, np.ndarray]:
            t0 = time.perf_counter()
            W, sig = build_affinity(X, k, sigma, symmetrize, index=index)
            log.info("built %d-NN graph on %d points in %.1fs (sigma=%.4g)", k, X.shape[0],
                     time.perf_counter() - t0, sig)
            return {"data": W.data, "indices": W.indices, "indptr": W.indptr, "shape": np.array(W.shape),
                    "sigma": np.array(sig)}

        cache = cache or Cache(None)
        n = X.shape[0]
        arrays, hit = cache.get_or_compute("graph", key, compute, validate=lambda a: check_graph_arrays(a, n))
        W = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
        graph = Graph(W=W, sigma=float(arrays["sigma"]), key=key)
        check_no_isolated_points(graph, sigma)
        return graph, hit


#: config name -> graph builder class
GRAPH_BUILDERS = Registry("graph", {"knn": "lgcexp.graph:KnnGraph"})


# -- faults: cache-entry shape checks, degenerate graphs, unreachable points --------------------------------

def check_graph_arrays(a: dict[str, np.ndarray], n: int) -> str | None:
    """Why a cached graph entry cannot be the CSR graph of n points (None when it can)."""
    for name in ("data", "indices", "indptr", "shape", "sigma"):
        if name not in a:
            return f"array {name!r} is missing"
    data, indices, indptr, shape = a["data"], a["indices"], a["indptr"], a["shape"]
    if shape.shape != (2,) or tuple(int(v) for v in shape) != (n, n):
        return f"graph shape {shape.tolist()} is not ({n}, {n})"
    if indptr.shape != (n + 1,) or data.ndim != 1 or indices.shape != data.shape:
        return (f"CSR arrays do not fit an {n} x {n} graph (indptr {indptr.shape}, indices {indices.shape}, "
                f"data {data.shape})")
    if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
        return "indptr is not a valid CSR row pointer"
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        return "column indices out of range"
    if not np.all(np.isfinite(data)) or np.any(data < 0):
        return "weights are not finite and non-negative"
    if a["sigma"].shape != () or not np.isfinite(a["sigma"]) or float(a["sigma"]) <= 0:
        return "sigma is not a positive number"
    return None


def check_no_isolated_points(graph: Graph, sigma: float | str | None = None) -> None:
    """Refuse a graph in which some points have no edge (zero degree), which happens when every kNN weight
    of a point underflows to 0 (graph.sigma far too small for the distances). One-line UserError."""
    n_nonfinite = int(np.sum(~np.isfinite(graph.degree)))
    if n_nonfinite:
        raise UserError(
            f"the graph has non-finite weights at {n_nonfinite} of {graph.n} points (distances overflow or "
            "are NaN); rescale the features or set a positive graph.sigma"
        )
    n_bad = int(np.sum(~(graph.degree > 0)))
    if n_bad:
        given = f"graph.sigma={sigma!r}" if sigma is not None else f"sigma={graph.sigma:g}"
        raise UserError(
            f"the graph leaves {n_bad} of {graph.n} points isolated (no edge: their neighbours' weights "
            f"exp(-d^2/(2 sigma^2)) underflow to 0 with {given}); increase graph.sigma or use graph.sigma=mean"
        )


def unreached_mask(graph: Graph, labeled: np.ndarray) -> np.ndarray:
    """Boolean mask of the points whose connected component holds no labelled point: no label can reach
    them by propagation, so any class assigned to them is arbitrary."""
    n_comp, comp = sp.csgraph.connected_components(graph.W, directed=False)
    labeled = np.asarray(labeled, dtype=np.int64)
    has_label = np.zeros(n_comp, dtype=bool)
    has_label[comp[labeled]] = True
    return ~has_label[comp]
