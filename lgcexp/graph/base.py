"""The :class:`Graph` record and the :class:`GraphBuilder` protocol every builder follows."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..cache import Cache
from ..errors import UserError
from ..params import Configurable


@dataclass
class Graph:
    """A weighted undirected graph with its normalised affinity.

    ``W`` symmetric CSR with zero diagonal; ``degree`` its row sums; ``S = D^-1/2 W D^-1/2``;
    ``key`` a content hash of what the graph depends on (used for caching derived results); ``info``
    builder-specific facts worth recording (the measured recall of an approximate search, the source
    file of a precomputed graph, ...); ``neighbors``: the kNN lists (distances, indices; self excluded,
    nearest first) the graph was built from, where the builder keeps them (exact search; approximate search
    with distances in the features' own space; None otherwise), so that a later step on the same features
    (the data audit) does not search again; ``neighbors_exact``: whether those lists are the exact search's
    (False for an approximate search's).
    """

    W: sp.csr_matrix
    sigma: float
    key: str
    info: dict[str, Any] = field(default_factory=dict)
    neighbors: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    neighbors_exact: bool = field(default=False, compare=False)
    degree: np.ndarray = field(init=False)
    S: sp.csr_matrix = field(init=False)
    _components: tuple[int, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

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

    def components(self) -> tuple[int, np.ndarray]:
        """(number of connected components, component of every point; read-only). Computed once per graph
        object: a sweep worker's memoised graph (:mod:`lgcexp.memo`) serves every job's count and
        unreached mask from it (about 60 ms each on MNIST)."""
        if self._components is None:
            n_comp, comp = sp.csgraph.connected_components(self.W, directed=False)
            comp.setflags(write=False)
            self._components = (int(n_comp), comp)
        return self._components

    def n_components(self) -> int:
        return self.components()[0]

    def unreached_mask(self, labeled: np.ndarray) -> np.ndarray:
        """Boolean mask of the points whose connected component holds no labelled point: no label can reach
        them by propagation, so any class assigned to them is arbitrary."""
        n_comp, comp = self.components()
        has_label = np.zeros(n_comp, dtype=bool)
        has_label[comp[np.asarray(labeled, dtype=np.int64)]] = True
        return ~has_label[comp]


def fingerprint(X: Any) -> str:
    """Content hash of a feature matrix (when the caller gives no data fingerprint): a dense one's bytes, shape
    and dtype; a scipy sparse one's canonical CSR arrays (duplicates summed, indices sorted), shape and dtype."""
    if sp.issparse(X):
        A = sp.csr_matrix(X, copy=True)
        A.sum_duplicates()
        A.sort_indices()
        h = hashlib.sha256()
        for a in (A.indptr, A.indices, A.data):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest() + f"sparse{A.shape}{A.dtype}"
    Xc = np.ascontiguousarray(X)
    return hashlib.sha256(Xc.tobytes()).hexdigest() + f"{Xc.shape}{Xc.dtype}"


class TrainingPointsOnly:
    """The rule of a graph builder that has none for new points: the rows the graph was built on get their
    fitted distributions back, any other rows are refused with ``reason`` (a ``ValueError``, one line).
    ``X``: the training rows (None where the builder took the graph itself: nothing can be matched)."""

    def __init__(self, X: Any, reason: str):
        self.reason = reason
        self.digest = None if X is None else fingerprint(X)

    def predict_proba(self, Xq: Any, algorithm: Any) -> np.ndarray:
        from .extension import label_distributions

        if self.digest is None or fingerprint(Xq) != self.digest:
            raise ValueError(self.reason)
        return label_distributions(algorithm.scores_)


class GraphBuilder(Configurable):
    """The graph-builder protocol: ``build(X, cache=, data_fingerprint=) -> (Graph, cache_hit)``.

    After ``build`` the builder's ``info_`` holds the returned graph's ``info``."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "graph."
    #: parameters for a graph on about 10 points (scikit-learn's estimator checks)
    quick_params: ClassVar[dict[str, Any]] = {}
    #: whether ``build`` takes a scipy sparse X (faiss, k-means and PCA here read dense rows)
    accepts_sparse: ClassVar[bool] = False
    #: whether X is the graph itself (an n x n affinity; scikit-learn's "pairwise" input), not features
    pairwise: ClassVar[bool] = False

    def min_points(self) -> int:
        """The fewest points the graph can be built on."""
        return 2

    def extension(self, X: Any, graph: Graph, **build_options: Any) -> Any:
        """After ``build(X)``: how new points are placed, an object whose ``predict_proba(Xq, algorithm)``
        gives their class distributions from a fitted algorithm (:mod:`lgcexp.graph.extension`). Default, for a
        builder that defines no rule: the training points only (:class:`TrainingPointsOnly`:
        ``predict(X)`` on the rows the graph was built on gives the fitted labels, other rows are refused in
        one line), so the estimators fit with any builder."""
        return TrainingPointsOnly(X, f"graph={self.name} has no rule for new points (its builder defines no "
                                     f"extension): predict and predict_proba take the training points only, "
                                     f"whose labels are transduction_")

    def build(self, X: np.ndarray, *, cache: Cache | None = None,
              data_fingerprint: str | None = None, **options: Any) -> tuple[Graph, bool]:
        """``options``: builder-specific (``knn``: ``index=``, a faiss index of X to search in)."""
        self._validate_params()
        graph, hit = self._build(X, cache=cache, data_fingerprint=data_fingerprint, **options)
        self._check_graph(graph)
        self.info_ = dict(graph.info)
        return graph, hit

    def _build(self, X, *, cache, data_fingerprint) -> tuple[Graph, bool]:  # pragma: no cover
        raise NotImplementedError

    def _check_graph(self, graph: Graph) -> None:
        """Refuse non-finite weights. Points without an edge are legitimate in general (a mutual kNN graph,
        a user's graph): they are logged, and predicted -1 unless labelled (see :meth:`Graph.unreached_mask`).
        Builders for which an isolated point can only mean underflowing weights refuse it (knn, union)."""
        check_no_isolated_points(graph, getattr(self, "sigma", None), allow_isolated=True)


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
    if a["sigma"].shape != () or not (np.isnan(a["sigma"]) or (np.isfinite(a["sigma"]) and float(a["sigma"]) > 0)):
        return "sigma is neither a positive number nor NaN (kernels without one)"
    return None


def check_no_isolated_points(graph: Graph, sigma: float | str | None = None, allow_isolated: bool = False) -> None:
    """Refuse a graph in which some points have no edge (zero degree), which happens when every kNN weight
    of a point underflows to 0 (graph.sigma far too small for the distances). One-line UserError."""
    n_nonfinite = int(np.sum(~np.isfinite(graph.degree)))
    if n_nonfinite:
        raise UserError(
            f"the graph has non-finite weights at {n_nonfinite} of {graph.n} points (distances overflow or "
            "are NaN); rescale the features or set a positive graph.sigma"
        )
    n_bad = int(np.sum(~(graph.degree > 0)))
    if n_bad and allow_isolated:
        logging.getLogger(__name__).warning("the graph leaves %d of %d points without an edge", n_bad, graph.n)
        return
    if n_bad:
        given = f"graph.sigma={sigma!r}" if sigma is not None else f"sigma={graph.sigma:g}"
        raise UserError(
            f"the graph leaves {n_bad} of {graph.n} points isolated (no edge: their neighbours' weights "
            f"exp(-d^2/(2 sigma^2)) underflow to 0 with {given}); increase graph.sigma or use graph.sigma=mean"
        )
