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

The recall is measured on every build: ``min(n, recall_queries)`` points drawn with a fixed seed (0, not
the run's seed: the graph does not depend on the run) are searched exactly (brute force, for those queries
only) and ``recall@k = mean_q |approx_k(q) ∩ exact_k(q)| / k``, where an approximate neighbour tied with the
exact k-th distance counts as found. It is stored with the cached graph and reported in ``Graph.info`` /
the builder's ``info_`` (``recall_at_k``), and so in result.json's ``graph`` block.

faiss builds HNSW with several threads, inserting in parallel: two builds of the same data may differ in a
few edges. The graph is cached, so the runs sharing a cache share one graph.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from ..errors import UserError
from ..params import Interval, Options
from .knn import KnnGraph, drop_self, exact_search, import_faiss

log = logging.getLogger(__name__)

INDEXES = ("hnsw", "ivf")
RECALL_SEED = 0
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
    ===============  =================================  ======================================================

    The defaults reach recall@k >= 0.95 on ISOLET (k=10) and MNIST (k=15) with either index (measured by
    scripts/bench_graph.py: ISOLET hnsw 0.9996, ivf 0.993; MNIST hnsw 0.992, ivf 0.978).
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
    }

    def __init__(self, k: int = 10, sigma: float | str = "mean", symmetrize: str = "union",
                 kernel: str = "gaussian", local_scale: int = 7, index: str = "hnsw", M: int = 16,
                 ef_construction: int = 100, ef_search: int = 32, nlist: int | str = "auto", nprobe: int = 8,
                 recall_queries: int = 1000):
        super().__init__(k=k, sigma=sigma, symmetrize=symmetrize, kernel=kernel, local_scale=local_scale)
        self.index = index
        self.M = M
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.nlist = nlist
        self.nprobe = nprobe
        self.recall_queries = recall_queries

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

    def _nlist(self, n: int) -> int:
        return auto_nlist(n) if self.nlist == "auto" else int(self.nlist)

    def _search_spec(self, n: int) -> dict[str, Any]:
        if self.index == "hnsw":
            spec = {"index": "hnsw", "M": int(self.M), "ef_construction": int(self.ef_construction),
                    "ef_search": int(self.ef_search)}
        else:
            spec = {"index": "ivf", "nlist": self._nlist(n), "nprobe": int(self.nprobe)}
        return {**spec, "recall_queries": int(self.recall_queries), "recall_seed": RECALL_SEED}

    def _make_index(self, Xf: np.ndarray) -> Any:
        faiss = import_faiss()
        n, d = Xf.shape
        if self.index == "hnsw":
            index = faiss.IndexHNSWFlat(d, int(self.M))
            index.hnsw.efConstruction = int(self.ef_construction)
            index.add(Xf)
            index.hnsw.efSearch = int(self.ef_search)
            return index
        nlist = self._nlist(n)
        index = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, nlist)
        index.train(Xf)
        index.add(Xf)
        index.nprobe = min(int(self.nprobe), nlist)
        return index

    def _neighbors(self, X: np.ndarray, k_search: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        Xf = np.ascontiguousarray(X, dtype=np.float32)
        n = Xf.shape[0]
        t0 = time.perf_counter()
        index = self._make_index(Xf)
        sq, idx = index.search(Xf, k_search + 1)
        dist, idx = drop_self(sq, idx, np.arange(n))
        search_s = time.perf_counter() - t0
        # recall@k on a seeded sample, against the exact search of those queries only
        t1 = time.perf_counter()
        k = int(self.k)
        m = min(n, int(self.recall_queries))
        queries = np.sort(np.random.default_rng(RECALL_SEED).choice(n, size=m, replace=False))
        ex_dist, ex_idx = exact_search(Xf, k, queries)
        recall = recall_at_k(idx[queries, :k], dist[queries, :k], ex_idx, ex_dist)
        info: dict[str, Any] = {"index": self.index, "recall_at_k": round(recall, 6), "recall_queries": m,
                                "search_seconds": round(search_s, 3),
                                "recall_seconds": round(time.perf_counter() - t1, 3)}
        if self.index == "ivf":
            info["nlist"] = self._nlist(n)
        missing = int((idx[:, :k] < 0).sum())
        if missing:
            info["missing_neighbors"] = missing
        log.info("%s search: recall@%d = %.4f on %d queries (%.1fs; exact check %.1fs)", self.index, k, recall, m,
                 search_s, info["recall_seconds"])
        return dist, idx, info
