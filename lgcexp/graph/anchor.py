"""Anchor graphs (Liu, He & Chang 2010, "Large graph construction for scalable semi-supervised
learning", ICML): a graph builder linear in n (docs/fidelity.md#anchor-graph).

m anchors ``U`` are k-means centres of the data. Each point is tied to its ``s`` nearest anchors by the
row-stochastic weights ``Z`` (n x m, s non-zeros a row):

- ``weights='lae'`` (local anchor embedding, Liu et al. Eq. (5)): ``z_i = argmin ||x_i - U_<i> z||^2``
  subject to ``z >= 0, 1'z = 1``, solved per point by projected gradient (batched over all points);
- ``weights='kernel'`` (Liu et al. Eq. (4)): ``Z_ij = K(x_i, u_j) / sum_j' K(x_i, u_j')`` with the Gaussian
  kernel ``exp(-d^2 / h^2)``, ``h`` the mean distance to the s-th nearest anchor (Liu's code).

The adjacency is the low-rank ``W = Z Lambda^-1 Z'`` with ``Lambda = diag(Z' 1)`` (Liu et al. Eq. (6)). Its
degrees are all 1 (``W 1 = Z Lambda^-1 Lambda 1 = Z 1 = 1``), so ``S = D^-1/2 W D^-1/2 = W``. The graph is
never formed: :class:`LowRankAffinity` applies it as ``Z (Lambda^-1 (Z' V))`` in O(n s c) per product, so
any method that only multiplies by ``S`` (LGC's conjugate gradient) runs on it unchanged; ``algo=lgc
graph=anchor`` is the paper's "LGC* (anchor graph)" column. Methods that index ``W`` (GFHF, SIIS) or need
Laplacian eigenpairs refuse it with one line.
"""
from __future__ import annotations

import logging
import time
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..cache import Cache, stable_hash
from ..errors import UserError
from ..params import Interval, Options
from .base import Graph, GraphBuilder, fingerprint

log = logging.getLogger(__name__)

WEIGHTS = ("lae", "kernel")


class LowRankAffinity:
    """``V -> Z (Lambda^-1 (Z' V))``: the anchor graph's W (= S), never formed. Supports ``@`` and ``shape``."""

    def __init__(self, Z: sp.csr_matrix, lam: np.ndarray):
        self.Z = Z
        self.ZT = Z.T.tocsr()
        self.inv_lam = np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0), 0.0)
        self.shape = (Z.shape[0], Z.shape[0])

    def __matmul__(self, V: np.ndarray) -> np.ndarray:
        V = np.asarray(V, dtype=np.float64)
        T = self.ZT @ V
        T = T * (self.inv_lam[:, None] if T.ndim == 2 else self.inv_lam)
        return self.Z @ T

    def toarray(self) -> np.ndarray:
        """The dense n x n matrix (small cases and tests only)."""
        Zd = self.Z.toarray()
        return (Zd * self.inv_lam) @ Zd.T


class AnchorGraph(Graph):
    """A :class:`lgcexp.graph.Graph` whose ``W`` and ``S`` are the low-rank :class:`LowRankAffinity`.

    ``Z`` (n x m CSR), ``lam`` = Z'1, ``anchors`` (m x d). ``n_edges`` counts the point-anchor links
    (non-zeros of Z); connected components are those of the bipartite point-anchor graph."""

    def __init__(self, Z: sp.csr_matrix, anchors: np.ndarray, key: str, sigma: float = float("nan")):
        self.Z = sp.csr_matrix(Z, dtype=np.float64)
        self.anchors = anchors
        self.lam = np.asarray(self.Z.sum(axis=0)).ravel()
        self.W = LowRankAffinity(self.Z, self.lam)
        self.S = self.W
        self.info: dict = {}  # builder facts for result.json (none)
        self.degree = np.asarray(self.Z.sum(axis=1)).ravel()  # = 1 for every point with a link
        self.inv_sqrt_degree = np.ones_like(self.degree)
        self.sigma = sigma
        self.key = key

    @property
    def n(self) -> int:
        return self.Z.shape[0]

    @property
    def n_edges(self) -> int:
        return int(self.Z.nnz)

    def components(self) -> tuple[int, np.ndarray]:
        """Components of the points through their anchors (W = Z Λ⁻¹ Zᵀ is never formed)."""
        n, m = self.Z.shape
        B = sp.bmat([[None, self.Z], [self.Z.T, None]], format="csr")
        n_comp, comp = sp.csgraph.connected_components(B, directed=False)
        # components that hold points (an anchor with no point would be a component of its own)
        labels, comp_pts = np.unique(comp[:n], return_inverse=True)
        return int(labels.size), comp_pts



# -- construction ----------------------------------------------------------------------------------------------

def kmeans_anchors(X: np.ndarray, m: int, n_iter: int, seed: int) -> np.ndarray:
    """m k-means centres (faiss Lloyd iterations from a seeded random sample of points)."""
    import faiss

    Xf = np.ascontiguousarray(X, dtype=np.float32)
    km = faiss.Kmeans(Xf.shape[1], m, niter=n_iter, seed=int(seed), verbose=False, max_points_per_centroid=10**9)
    km.train(Xf)
    return np.asarray(km.centroids, dtype=np.float64)


def nearest_anchors(X: np.ndarray, anchors: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
    """Squared distances and indices of each point's s nearest anchors (exact)."""
    import faiss

    index = faiss.IndexFlatL2(anchors.shape[1])
    index.add(np.ascontiguousarray(anchors, dtype=np.float32))
    d2, idx = index.search(np.ascontiguousarray(X, dtype=np.float32), s)
    return np.maximum(d2.astype(np.float64), 0.0), idx.astype(np.int64)


def project_simplex(V: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean projection onto the probability simplex (Duchi et al. 2008)."""
    n, s = V.shape
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    ks = np.arange(1, s + 1)
    cond = U - css / ks > 0
    rho = s - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(n), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def lae_weights(X: np.ndarray, anchors: np.ndarray, idx: np.ndarray, n_iter: int = 100,
                batch: int = 8192) -> np.ndarray:
    """Local anchor embedding: ``argmin_z ||x - U z||^2`` over the simplex for each point's s anchors, by
    projected gradient with step 1/L (L = 2 * largest eigenvalue of U'U), from uniform weights."""
    n, s = idx.shape
    out = np.empty((n, s))
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        x = np.asarray(X[lo:hi], dtype=np.float64)
        U = anchors[idx[lo:hi]]                       # (b, s, d)
        G = np.einsum("bsd,btd->bst", U, U)           # U'U
        g = np.einsum("bsd,bd->bs", U, x)             # U'x
        L = 2.0 * np.linalg.eigvalsh(G)[:, -1]
        L = np.where(L > 0, L, 1.0)
        z = np.full((hi - lo, s), 1.0 / s)
        for _ in range(n_iter):
            grad = 2.0 * (np.einsum("bst,bt->bs", G, z) - g)
            z = project_simplex(z - grad / L[:, None])
        out[lo:hi] = z
    return out


def kernel_weights(d2: np.ndarray, h: float | None = None) -> tuple[np.ndarray, float]:
    """Gaussian kernel weights ``exp(-d^2/h^2)`` normalised per row; h = mean distance to the s-th anchor
    (or the ``h`` given: the graph's, for new points)."""
    if h is None:
        h = float(np.sqrt(d2[:, -1]).mean())
        h = h if h > 0 else 1.0
    logk = -(d2 - d2[:, :1]) / (h * h)  # shift by the nearest anchor's distance for stability (cancels)
    K = np.exp(logk)
    return K / K.sum(axis=1, keepdims=True), h


def anchor_weights(X: np.ndarray, anchors: np.ndarray, s: int, weights: str, lae_iter: int,
                   h: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Each point's weights on its s nearest anchors: (weights (n, s), anchor indices (n, s), h) by local
    anchor embedding (``weights='lae'``, h NaN) or the normalised Gaussian kernel (``'kernel'``; h computed
    from X unless given). The builder's rows of Z, and the codes of new points (with the graph's h)."""
    d2, idx = nearest_anchors(X, anchors, s)
    if weights == "lae":
        return lae_weights(X, anchors, idx, int(lae_iter)), idx, float("nan")
    w, h = kernel_weights(d2, h)
    return w, idx, h


def anchor_matrix(weights: np.ndarray, idx: np.ndarray, m: int) -> sp.csr_matrix:
    n, s = idx.shape
    return sp.csr_matrix((weights.ravel(), idx.ravel(), np.arange(0, n * s + 1, s)), shape=(n, m))


class AnchorGraphBuilder(GraphBuilder):
    """Anchor graph (Liu et al. 2010). Parameters: ``n_anchors`` m (k-means centres), ``s`` nearest anchors
    per point, ``weights`` lae | kernel, ``kmeans_iter`` Lloyd iterations, ``lae_iter`` projected-gradient
    steps, ``seed`` of the k-means start (the graph, like the kNN graph, never depends on the run's seed)."""

    name: ClassVar[str] = "anchor"
    _parameter_constraints = {
        "n_anchors": [Interval("int", 2, None)],
        "s": [Interval("int", 1, None)],
        "weights": [Options(WEIGHTS)],
        "kmeans_iter": [Interval("int", 1, None)],
        "lae_iter": [Interval("int", 1, None)],
        "seed": [Interval("int", 0, None)],
    }

    def __init__(self, n_anchors: int = 1000, s: int = 3, weights: str = "lae", kmeans_iter: int = 10,
                 lae_iter: int = 100, seed: int = 0):
        self.n_anchors = n_anchors
        self.s = s
        self.weights = weights
        self.kmeans_iter = kmeans_iter
        self.lae_iter = lae_iter
        self.seed = seed

    @classmethod
    def _check_relations(cls, params: dict, prefix: str) -> None:
        if params["s"] > params["n_anchors"]:
            raise UserError(f"{prefix}s={params['s']} is not allowed: it must be at most "
                            f"{prefix}n_anchors={params['n_anchors']}")

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        if self.n_anchors > n:
            raise UserError(f"{prefix}n_anchors={self.n_anchors} is not allowed: it must be at most the number "
                            f"of points ({n})")

    quick_params: ClassVar[dict] = {"n_anchors": 8}

    def min_points(self) -> int:
        return max(2, int(self.n_anchors))

    def extension(self, X: np.ndarray, graph: Graph, **build_options) -> "AnchorCodes":
        """New points: their codes over their ``s`` nearest anchors (the graph's own rule), times the
        anchors' scores (:class:`AnchorCodes`)."""
        return AnchorCodes(int(self.s), self.weights, int(self.lae_iter), graph.anchors, float(graph.sigma),
                           graph.Z)

    def _build(self, X, *, cache, data_fingerprint) -> tuple[Graph, bool]:
        fp = data_fingerprint or fingerprint(X)
        params = {k: getattr(self, k) for k in self._parameter_constraints}
        key = stable_hash({"data": fp, "builder": "anchor", **params, "v": 1})
        m, s = int(self.n_anchors), int(self.s)

        def compute() -> dict[str, np.ndarray]:
            t0 = time.perf_counter()
            anchors = kmeans_anchors(X, m, int(self.kmeans_iter), int(self.seed))
            w, idx, h = anchor_weights(X, anchors, s, self.weights, int(self.lae_iter))
            log.info("built anchor graph (m=%d, s=%d, %s) on %d points in %.1fs", m, s, self.weights,
                     X.shape[0], time.perf_counter() - t0)
            return {"weights": w, "idx": idx, "anchors": anchors, "h": np.array(h)}

        cache = cache or Cache(None)
        n = X.shape[0]

        def validate(a):
            for name in ("weights", "idx", "anchors", "h"):
                if name not in a:
                    return f"array {name!r} is missing"
            if a["idx"].shape != (n, s) or a["weights"].shape != (n, s) or a["anchors"].shape[0] != m:
                return "anchor graph arrays do not fit the data"
            return None

        arrays, hit = cache.get_or_compute("anchorgraph", key, compute, validate=validate)
        Z = anchor_matrix(arrays["weights"], arrays["idx"], m)
        graph = AnchorGraph(Z, arrays["anchors"], key=key, sigma=float(arrays["h"]))
        return graph, hit


class AnchorCodes:
    """The anchor graph's inductive rule (Liu, He & Chang 2010, §3-4: a point's labels are inferred from the
    anchors' through its codes): a new point's codes ``z(x)`` over its ``s`` nearest anchors, computed as
    the graph's rows (local anchor embedding, or the kernel with the graph's width), times the anchors'
    scores ``A`` (m x c); clipped at 0 and normalised. ``A`` is the method's own (LSSC's
    ``anchor_scores_``), else what the graph's ``S = Z Lambda^-1 Z'`` gives the anchors:
    ``Lambda^-1 Z' F`` for the fitted scores F."""

    def __init__(self, s: int, weights: str, lae_iter: int, anchors: np.ndarray, h: float, Z: sp.csr_matrix):
        self.s, self.weights, self.lae_iter, self.anchors, self.h = s, weights, lae_iter, anchors, h
        self.anchor_mass = np.asarray(Z.sum(axis=0)).ravel()
        self._Zt = sp.csr_matrix(Z.T)

    def predict_proba(self, Xq: np.ndarray, algorithm) -> np.ndarray:
        from .extension import CHUNK, label_distributions

        A = getattr(algorithm, "anchor_scores_", None)
        if A is None:
            mass = np.where(self.anchor_mass > 0, self.anchor_mass, 1.0)
            A = (self._Zt @ np.asarray(algorithm.scores_, dtype=np.float64)) / mass[:, None]
        out = np.empty((Xq.shape[0], A.shape[1]))
        for lo in range(0, Xq.shape[0], CHUNK):
            w, idx, _ = anchor_weights(Xq[lo:lo + CHUNK], self.anchors, self.s, self.weights, self.lae_iter,
                                       h=self.h)
            out[lo:lo + CHUNK] = label_distributions(anchor_matrix(w, idx, self.anchors.shape[0]) @ A)
        return out


def require_sparse_graph(graph: Graph, method: str) -> None:
    """One-line refusal for methods that index W (an anchor graph's W is an operator, never formed)."""
    if isinstance(graph, AnchorGraph):
        raise UserError(f"algo={method} needs a graph with an explicit W (graph=knn); graph=anchor gives only "
                        "products with W (use algo=lgc)")
