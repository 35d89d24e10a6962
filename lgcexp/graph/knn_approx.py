"""``graph=knn_approx``: the kNN graph from an approximate faiss index (HNSW or IVF-Flat), with its recall
measured against the exact search.

Everything after the search is as ``graph=knn`` (symmetrisation, kernels, sigma heuristics); only the
neighbour lists come from an approximate index:

* ``hnsw``: hierarchical navigable small-world graph, Malkov & Yashunin, "Efficient and robust approximate
  nearest neighbor search using Hierarchical Navigable Small World graphs", IEEE TPAMI 2020 (faiss
  ``IndexHNSWFlat``: ``M`` links per node, ``ef_construction`` / ``ef_search`` candidate-list sizes);
* ``ivf``: inverted file over a k-means coarse quantiser, Jégou, Douze & Schmid, "Product quantization for
  nearest neighbor search", IEEE TPAMI 2011 (faiss ``IndexIVFFlat``: ``nlist`` cells, ``nprobe`` of them
  visited per query; vectors stored uncompressed, so the distances returned are exact).

For large, high-dimensional data (a million 784-d images on two cores) the search can run in a lower
dimension: ``pca=p`` projects the data onto its first p principal components (eigenvectors of the
covariance of ``train_size`` points drawn with a fixed seed; the projection is applied block by block so a
memory-mapped X is never copied whole) and builds the index there. The projected distances are not the data's:
``refine=r`` (r >= 2) asks
the index for r times as many neighbours and re-ranks them by their exact distance in the original space
(Jégou, Tavenard, Douze & Amsaleg, "Searching in one billion vectors: re-rank with source coding", ICASSP
2011, do the same after a compressed search), so the graph's distances, weights and sigma are the original
ones. Without ``refine`` the graph is that of the projected data. IVF's k-means is also trained on
``train_size`` sampled points.

The recall is measured on every build: ``min(n, recall_queries)`` points drawn with a fixed seed (0, not
the run's seed: the graph does not depend on the run) are searched exactly (brute force, for those queries
only) and ``recall@k = mean_q |approx_k(q) ∩ exact_k(q)| / k``, where an approximate neighbour tied with the
exact k-th distance counts as found. It is stored with the cached graph and reported in ``Graph.info`` /
the builder's ``info_`` (``recall_at_k``), and so in result.json's ``graph`` block. ``recall_at_k`` is
measured in the space the graph's distances live in (the projected one for ``pca`` without ``refine``, the
original one otherwise); with ``pca``, ``recall_at_k_original`` is also measured against the exact search
in the original feature space, the approximate neighbours' distances recomputed there. The exact searches
of the recall check add the data block by block (bounded memory).

With a GPU build of faiss and a GPU (``faiss.get_num_gpus() > 0``, :mod:`lgcexp.devices`), the IVF index
and the exact searches of the recall check run on the GPU(s) (faiss has no GPU HNSW: it stays on the CPU);
``info['device']`` says where the search ran.

faiss builds HNSW with several threads, inserting in parallel: two builds of the same data may differ in a
few edges. The graph is cached, so the runs sharing a cache share one graph.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from .. import devices
from ..errors import UserError
from ..params import Interval, NoneValue, Options
from ..preprocess import pca_axes
from .knn import KnnGraph
from .search import drop_self, import_faiss

log = logging.getLogger(__name__)

INDEXES = ("hnsw", "ivf")
RECALL_SEED = 0
TRAIN_SEED = 0
#: rows per block when projecting, re-ranking, or adding data to the exact index of the recall check
BLOCK_ROWS = 65536
MIN_POINTS_PER_CELL = 39  # faiss's k-means wants at least 39 training points per centroid


def auto_nlist(n: int) -> int:
    """``nlist=auto``: about sqrt(n) cells, at most n / 39 (so each centroid has its 39 training points)."""
    return int(max(1, min(round(math.sqrt(n)), n // MIN_POINTS_PER_CELL)))


def recall_at_k(approx_idx: np.ndarray, approx_dist: np.ndarray, exact_idx: np.ndarray,
                exact_dist: np.ndarray, rtol: float = 1e-5) -> float:
    """Mean over queries of the share of the exact k nearest neighbours the approximate search found
    (rows: queries; k columns each). An approximate neighbour at a distance no larger than the exact k-th
    (ties, up to ``rtol``) counts as found; missing results (index -1) count as misses."""
    k = exact_idx.shape[1]
    in_exact = (approx_idx[:, :, None] == exact_idx[:, None, :]).any(axis=2)
    kth = exact_dist[:, -1:]
    tied = np.nan_to_num(approx_dist, nan=np.inf) <= kth * (1 + rtol)
    found = (in_exact | tied) & (approx_idx >= 0)
    return float(found.sum(axis=1).mean() / k)


def sample_rows(X: np.ndarray, size: int, seed: int = TRAIN_SEED) -> np.ndarray:
    """``size`` rows of X drawn without replacement with a fixed seed (all rows when X has fewer), as a
    contiguous float32 array, read in row order (cheap on a memory map)."""
    n = X.shape[0]
    if size >= n:
        return np.ascontiguousarray(X, dtype=np.float32)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    return np.ascontiguousarray(X[rows], dtype=np.float32)


def pca_project(X: np.ndarray, mean: np.ndarray, axes: np.ndarray, block: int = BLOCK_ROWS) -> np.ndarray:
    """``(X - mean) @ axes`` as float32 (n, p), X read block by block (a memory map is never copied whole)."""
    n = X.shape[0]
    A = axes.astype(np.float32)
    shift = (mean @ axes).astype(np.float32)
    Y = np.empty((n, axes.shape[1]), dtype=np.float32)
    for start in range(0, n, block):
        np.matmul(np.asarray(X[start:start + block], dtype=np.float32), A, out=Y[start:start + block])
        Y[start:start + block] -= shift
    return Y


def blocked_exact_search(X: np.ndarray, k: int, queries: np.ndarray, faiss: Any = None,
                         block: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN of the rows ``queries`` among all rows of X, self excluded: (distances, indices), (m, k).

    X is added to a flat index ``block`` rows at a time (at most one float32 block in memory besides X,
    which may be a memory map) and the k+1 best of each block are merged, so the result is that of one
    search over all of X (up to the order of exact ties)."""
    faiss = faiss or import_faiss()
    queries = np.asarray(queries)
    n, d = X.shape
    Q = np.ascontiguousarray(X[queries], dtype=np.float32)
    k1 = min(k + 1, n)
    best_sq = np.full((len(queries), 0), np.inf, dtype=np.float32)
    best_idx = np.empty((len(queries), 0), dtype=np.int64)
    index, _ = devices.to_faiss_device(faiss, faiss.IndexFlatL2(d))  # once: on a GPU, each move allocates
    for start in range(0, n, block):
        part = np.ascontiguousarray(X[start:start + block], dtype=np.float32)
        index.reset()
        index.add(part)
        sq, idx = index.search(Q, min(k1, part.shape[0]))
        idx = np.where(idx >= 0, idx + start, -1)
        best_sq = np.concatenate([best_sq, sq], axis=1)
        best_idx = np.concatenate([best_idx, idx], axis=1)
        order = np.argsort(best_sq, axis=1, kind="stable")[:, :k1]
        best_sq = np.take_along_axis(best_sq, order, axis=1)
        best_idx = np.take_along_axis(best_idx, order, axis=1)
    return drop_self(best_sq, best_idx, queries)


def row_distances(X: np.ndarray, rows: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Euclidean distances (float64 from float32 arithmetic, as faiss) between row ``rows[i]`` of X and rows
    ``cand[i, :]`` (-1: none; distance NaN)."""
    Q = np.asarray(X[rows], dtype=np.float32)
    ok = cand >= 0
    C = np.asarray(X[np.where(ok, cand, 0).ravel()], dtype=np.float32).reshape(*cand.shape, -1)
    diff = C - Q[:, None, :]
    sq = np.einsum("ijk,ijk->ij", diff, diff)
    out = np.sqrt(sq).astype(np.float64)
    out[~ok] = np.nan
    return out


def rerank(X: np.ndarray, idx: np.ndarray, k: int, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest of each row's candidates ``idx`` (n, r) by their exact distance in X (the original
    space): (distances, indices), each (n, k), nearest first; candidates -1 sort last."""
    n = idx.shape[0]
    dist_out = np.empty((n, k), dtype=np.float64)
    idx_out = np.empty((n, k), dtype=np.int64)
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        cand = idx[rows]
        dist = row_distances(X, rows, cand)
        order = np.argsort(np.nan_to_num(dist, nan=np.inf), axis=1, kind="stable")[:, :k]
        dist_out[rows] = np.take_along_axis(dist, order, axis=1)
        idx_out[rows] = np.take_along_axis(cand, order, axis=1)
    return dist_out, idx_out


class KnnApproxGraph(KnnGraph):
    """``graph=knn_approx``: the kNN graph from a faiss approximate index (HNSW or IVF-Flat), then as
    ``graph=knn``: ``D`` the symmetrised kNN distances, ``W = kernel(D)`` (gaussian
    ``exp(-d_ij^2 / (2 sigma^2))``, self_tuning ``exp(-d_ij^2 / (sigma_i sigma_j))``, binary), zero
    diagonal. HNSW: Malkov & Yashunin, IEEE TPAMI 2020; IVF: Jégou, Douze & Schmid, IEEE TPAMI 2011. Its
    recall@k against the exact search, on ``min(n, recall_queries)`` seeded random queries, is recorded
    (``info_['recall_at_k']``).

    ===============  =================================  ======================================================
    parameter        allowed                            meaning
    ===============  =================================  ======================================================
    k                integer >= 1, < n                  neighbours per point (default 10)
    sigma            number > 0 or ``mean``             Gaussian width (default mean: 10th-neighbour mean / 3)
    symmetrize       union, mutual                      max (default) or min of K and K^T
    kernel           gaussian, self_tuning, binary      edge weights (default gaussian)
    local_scale      integer >= 1, < n                  self_tuning's neighbour for sigma_i (default 7)
    index            hnsw, ivf                          the faiss index (default hnsw)
    M                integer in [2, 256]                hnsw: links per node (default 16)
    ef_construction  integer >= 1                       hnsw: candidate list when inserting (default 100)
    ef_search        integer >= 1                       hnsw: candidate list when searching (default 32;
                                                        faiss uses at least k + 1)
    nlist            integer >= 1, <= n, or ``auto``    ivf: k-means cells; auto (default) = min(sqrt(n), n/39)
    nprobe           integer >= 1, <= nlist             ivf: cells visited per query (default 8)
    recall_queries   integer >= 1000                    queries checked against the exact search (default
                                                        1000; all points when n is smaller)
    pca              integer >= 1, < d, or null         search in the first pca principal components
                                                        (default null: in the data's own space)
    refine           integer >= 1                       re-rank refine x as many candidates by their exact
                                                        distance in the data's space (default 1: none)
    train_size       integer >= 1000                    points (seeded sample) that train the PCA and the
                                                        IVF k-means (default 100000)
    ===============  =================================  ======================================================

    For a million MNIST-like images (scripts/make_infimnist.py), ``pca=64 refine=2 index=ivf nlist=4096
    nprobe=16`` is what benchmarks/scale.py runs; its recall in the original 784-d space and its costs
    are in results/bench/scale.md (``nprobe=8`` gave 0.873 there).

    The defaults reach recall@k >= 0.95 on ISOLET (k=10) and MNIST (k=15) with either index (measured by
    benchmarks/knn_approx.py: ISOLET hnsw 0.9996, ivf 0.993; MNIST hnsw 0.992, ivf 0.978).
    """

    name = "knn_approx"
    _parameter_constraints = {
        **KnnGraph._parameter_constraints,
        "index": [Options(INDEXES)],
        "M": [Interval("int", 2, 256)],
        "ef_construction": [Interval("int", 1, None)],
        "ef_search": [Interval("int", 1, None)],
        "nlist": [Interval("int", 1, None), Options(("auto",))],
        "nprobe": [Interval("int", 1, None)],
        "recall_queries": [Interval("int", 1000, None)],
        "pca": [Interval("int", 1, None), NoneValue()],
        "refine": [Interval("int", 1, None)],
        "train_size": [Interval("int", 1000, None)],
    }

    def __init__(self, k: int = 10, sigma: float | str = "mean", symmetrize: str = "union",
                 kernel: str = "gaussian", local_scale: int = 7, index: str = "hnsw", M: int = 16,
                 ef_construction: int = 100, ef_search: int = 32, nlist: int | str = "auto", nprobe: int = 8,
                 recall_queries: int = 1000, pca: int | None = None, refine: int = 1, train_size: int = 100000):
        super().__init__(k=k, sigma=sigma, symmetrize=symmetrize, kernel=kernel, local_scale=local_scale)
        self.index = index
        self.M = M
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.nlist = nlist
        self.nprobe = nprobe
        self.recall_queries = recall_queries
        self.pca = pca
        self.refine = refine
        self.train_size = train_size

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        nlist, nprobe = params.get("nlist"), params.get("nprobe")
        if params.get("index") == "ivf" and isinstance(nlist, int) and isinstance(nprobe, int) and nprobe > nlist:
            raise UserError(f"{prefix}nprobe={nprobe} is not allowed: it must be at most {prefix}nlist ({nlist})")

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        super().check_data(n, n_classes, prefix)
        prefix = self.config_prefix if prefix is None else prefix
        if self.index == "ivf" and self.nlist != "auto" and self.nlist > n:
            raise UserError(f"{prefix}nlist={self.nlist} is not allowed: it must be at most the number of points "
                            f"({n}); or use nlist=auto")

    def check_dimension(self, d: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        if self.pca is not None and self.pca >= d:
            raise UserError(f"{prefix}pca={self.pca} is not allowed: it must be less than the number of features "
                            f"({d}); or pca=null")

    def _build(self, X, **kwargs):
        self.check_dimension(X.shape[1])
        return super()._build(X, **kwargs)

    def _lists_in_feature_space(self) -> bool:
        """Approximate lists are kept where their distances are the features' own: no PCA, or candidates
        re-ranked by their exact distances (``refine`` > 1)."""
        return self.pca is None or int(self.refine) > 1

    def _nlist(self, n: int) -> int:
        return auto_nlist(n) if self.nlist == "auto" else int(self.nlist)

    def _search_spec(self, n: int) -> dict[str, Any]:
        if self.index == "hnsw":
            spec = {"index": "hnsw", "M": int(self.M), "ef_construction": int(self.ef_construction),
                    "ef_search": int(self.ef_search)}
        else:
            spec = {"index": "ivf", "nlist": self._nlist(n), "nprobe": int(self.nprobe)}
        spec = {**spec, "recall_queries": int(self.recall_queries), "recall_seed": RECALL_SEED}
        # the new options enter the key only when they change something (older keys stay valid)
        if self.pca is not None:
            spec["pca"] = int(self.pca)
        if int(self.refine) > 1:
            spec["refine"] = int(self.refine)
        if n > int(self.train_size) and (self.pca is not None or self.index == "ivf"):
            spec["train_size"] = int(self.train_size)
        return spec

    def _project(self, X: np.ndarray, faiss: Any) -> np.ndarray:
        """X as contiguous float32 in the search space: the data itself (no copy for a float32 memory map)
        or its first ``pca`` principal components (trained on a seeded sample, applied block by block)."""
        if self.pca is None:
            return np.ascontiguousarray(X, dtype=np.float32)
        mean, axes = pca_axes(sample_rows(X, int(self.train_size)), int(self.pca))
        return pca_project(X, mean, axes)

    def _make_index(self, Y: np.ndarray, faiss: Any) -> tuple[Any, str]:
        n, d = Y.shape
        if self.index == "hnsw":  # faiss has no GPU HNSW
            index = faiss.IndexHNSWFlat(d, int(self.M))
            index.hnsw.efConstruction = int(self.ef_construction)
            index.add(Y)
            index.hnsw.efSearch = int(self.ef_search)
            return index, "cpu"
        nlist = self._nlist(n)
        index = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, nlist)
        index.train(sample_rows(Y, int(self.train_size)))
        index.nprobe = min(int(self.nprobe), nlist)
        index, device = devices.to_faiss_device(faiss, index)
        index.add(Y)
        return index, device

    def _neighbors(self, X: np.ndarray, k_search: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        faiss = import_faiss()
        n = X.shape[0]
        t0 = time.perf_counter()
        Y = self._project(X, faiss)
        project_s = time.perf_counter() - t0
        refine = int(self.refine)
        k_cand = min(n - 1, k_search * refine)
        index, device = self._make_index(Y, faiss)
        sq, idx = index.search(Y, k_cand + 1)
        del index
        dist, idx = drop_self(sq, idx, np.arange(n))
        del sq
        if refine > 1:  # distances in the original space, the best k_search of the candidates
            dist, idx = rerank(X, idx, k_search)
        search_s = time.perf_counter() - t0
        # recall@k on a seeded sample, against the exact search of those queries only, in the graph's space
        t1 = time.perf_counter()
        k = int(self.k)
        m = min(n, int(self.recall_queries))
        queries = np.sort(np.random.default_rng(RECALL_SEED).choice(n, size=m, replace=False))
        graph_space = X if (self.pca is None or refine > 1) else Y
        ex_dist, ex_idx = blocked_exact_search(graph_space, k, queries, faiss)
        recall = recall_at_k(idx[queries, :k], dist[queries, :k], ex_idx, ex_dist)
        info: dict[str, Any] = {"index": self.index, "recall_at_k": round(recall, 6), "recall_queries": m,
                                "search_seconds": round(search_s, 3), "device": device}
        if self.pca is not None:
            info["pca"] = int(self.pca)
            info["project_seconds"] = round(project_s, 3)
            info["distances_in"] = "original" if refine > 1 else f"pca{int(self.pca)}"
            if refine > 1:
                recall_orig = recall
            else:  # the same neighbours judged in the original space, their distances recomputed there
                ex_dist, ex_idx = blocked_exact_search(X, k, queries, faiss)
                recall_orig = recall_at_k(idx[queries, :k], row_distances(X, queries, idx[queries, :k]),
                                          ex_idx, ex_dist)
            info["recall_at_k_original"] = round(recall_orig, 6)
        info["recall_seconds"] = round(time.perf_counter() - t1, 3)
        if self.index == "ivf":
            info["nlist"] = self._nlist(n)
        missing = int((idx[:, :k] < 0).sum())
        if missing:
            info["missing_neighbors"] = missing
        log.info("%s search on %s: recall@%d = %.4f on %d queries%s (%.1fs; exact check %.1fs)", self.index, device,
                 k, recall, m, f", {info['recall_at_k_original']:.4f} in the original space" if self.pca else "",
                 search_s, info["recall_seconds"])
        return dist, idx, info
