"""Numerical eigenfunctions (Fergus, Weiss & Torralba 2009, "Semi-supervised learning in gigantic image
collections", NIPS), the graph stage of ``algo=eigenfunction`` (``graph=eigenfunction``,
:class:`EigenfunctionBuilder`): the smooth eigenvectors of the graph Laplacian replaced by numerical
eigenfunctions of the data density; linear in n (docs/fidelity.md#eigenfunction).

The data are rotated to their first
``n_pca`` principal components, which are treated as independent. On each dimension the density is a
histogram ``h`` over ``n_bins`` equal bins with centres ``g``; with ``W~_ab = exp(-(g_a - g_b)^2 / (2 eps^2))``
(``eps`` = ``eps_scale`` x that dimension's standard deviation), ``P = diag(h)``,
``D~ = diag(P W~ P 1)`` and ``D^ = diag(P W~ 1)``, the 1-D eigenfunctions solve Fergus et al.'s Eq. (2)

    (D~ - P W~ P) f = sigma P D^ f.

The constant solution of each dimension (sigma = 0) is dropped; of all the others, the ``k`` with the
smallest sigma are kept, read at every point by linear interpolation between bin centres, and scaled to
unit norm; one constant column (sigma = 0) is added. This gives ``U`` (n x (k+1)) and ``Sigma``. The label
fit on them is :class:`lgcexp.algorithms.eigenfunction.Eigenfunction`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.linalg as sla

from ..cache import Cache, stable_hash
from ..params import Interval, positive
from .base import Graph, GraphBuilder, fingerprint

log = logging.getLogger(__name__)


def eigenfunctions_1d(x: np.ndarray, n_bins: int, eps: float, n_keep: int,
                      density_floor: float = 1e-6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numerical eigenfunctions of one dimension: (sigma (n_keep,), values at bin centres (n_bins, n_keep),
    bin centres), the constant solution dropped. ``density_floor`` keeps empty bins from making P singular."""
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        hi = lo + 1.0
    h, edges = np.histogram(x, bins=n_bins, range=(lo, hi))
    h = h / h.sum() + density_floor
    h = h / h.sum()
    g = 0.5 * (edges[:-1] + edges[1:])
    Wt = np.exp(-((g[:, None] - g[None, :]) ** 2) / (2.0 * eps * eps))
    PWP = h[:, None] * Wt * h[None, :]
    Dt = np.diag(PWP.sum(axis=1))
    Dh = np.diag((h[:, None] * Wt).sum(axis=1))
    sig, F = sla.eigh(Dt - PWP, np.diag(h) @ Dh)
    order = np.argsort(sig)
    sig, F = sig[order], F[:, order]
    return np.maximum(sig[1:1 + n_keep], 0.0), F[:, 1:1 + n_keep], g


@dataclass
class EigenfunctionModel:
    """The numerical eigenfunctions as functions of a point: the PCA ``mean`` (d,) and ``rotation``
    (d x n_pca); per kept eigenfunction i its PCA dimension ``dims[i]``, its values ``values[i]`` at the bin
    centres ``centres[i]`` (read by linear interpolation, constant beyond the end bins) and the norm
    ``norms[i]`` that scaled it to unit norm on the training points; ``n_train`` (the constant column is
    1/sqrt(n_train)). :meth:`transform` of the training points is ``U``; of new points, Fergus et al.'s
    eigenfunctions read at them."""

    mean: np.ndarray
    rotation: np.ndarray
    dims: np.ndarray
    centres: np.ndarray
    values: np.ndarray
    norms: np.ndarray
    n_train: int

    ARRAYS: ClassVar[tuple[str, ...]] = ("mean", "rotation", "dims", "centres", "values", "norms", "n_train")

    def project(self, X: np.ndarray) -> np.ndarray:
        proj = np.empty((X.shape[0], self.rotation.shape[1]))
        for lo in range(0, X.shape[0], 8192):
            proj[lo:lo + 8192] = (np.asarray(X[lo:lo + 8192], dtype=np.float64) - self.mean) @ self.rotation
        return proj

    def read(self, proj: np.ndarray) -> np.ndarray:
        """U (m x (k+1)) of points given by their PCA coordinates ``proj``."""
        U = np.empty((proj.shape[0], self.dims.size + 1))
        U[:, 0] = 1.0 / np.sqrt(self.n_train)
        for i, j in enumerate(self.dims, start=1):
            U[:, i] = np.interp(proj[:, j], self.centres[i - 1], self.values[i - 1]) / self.norms[i - 1]
        return U

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.read(self.project(X))

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(getattr(self, name)) for name in self.ARRAYS}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "EigenfunctionModel":
        return cls(**{name: (int(a[name]) if name == "n_train" else np.asarray(a[name])) for name in cls.ARRAYS})


def fit_eigenfunctions(X: np.ndarray, k: int, n_pca: int, n_bins: int,
                       eps_scale: float) -> tuple[EigenfunctionModel, np.ndarray, np.ndarray]:
    """(model, U (n x (k+1)), sigma (k+1,)): the constant column, then the k smoothest eigenfunctions over
    all PCA dimensions (each column of unit norm on X)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    mu = X.mean(axis=0)
    n_pca = min(n_pca, d)
    # principal directions from the d x d covariance (linear in n)
    C = np.zeros((d, d))
    for lo in range(0, n, 8192):
        B = X[lo:lo + 8192] - mu
        C += B.T @ B
    evals, evecs = np.linalg.eigh(C / n)
    V = evecs[:, np.argsort(evals)[::-1][:n_pca]]
    cands = []  # (sigma, dim, column at bin centres, centres)
    proj = np.empty((n, n_pca))
    for lo in range(0, n, 8192):
        proj[lo:lo + 8192] = (X[lo:lo + 8192] - mu) @ V
    for j in range(n_pca):
        x = proj[:, j]
        sd = float(x.std())
        if sd <= 0:
            continue
        sig, F, g = eigenfunctions_1d(x, n_bins, eps_scale * sd, min(k, n_bins - 1))
        for i in range(sig.size):
            cands.append((float(sig[i]), j, F[:, i], g))
    cands.sort(key=lambda c: c[0])
    cands = cands[:k]
    sigma = np.zeros(len(cands) + 1)
    norms = np.ones(len(cands))
    for i, (s, j, f, g) in enumerate(cands, start=1):
        nrm = np.linalg.norm(np.interp(proj[:, j], g, f))
        norms[i - 1] = nrm if nrm > 0 else 1.0  # a zero column stays zero
        sigma[i] = s
    n_b = max((c[2].size for c in cands), default=n_bins)
    model = EigenfunctionModel(
        mean=mu, rotation=V, dims=np.array([c[1] for c in cands], dtype=np.int64),
        centres=np.array([c[3] for c in cands]).reshape(len(cands), n_b),
        values=np.array([c[2] for c in cands]).reshape(len(cands), n_b), norms=norms, n_train=n)
    return model, model.read(proj), sigma


def numerical_eigenfunctions(X: np.ndarray, k: int, n_pca: int, n_bins: int,
                             eps_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(U (n x (k+1)), sigma (k+1,)) of :func:`fit_eigenfunctions`."""
    _, U, sigma = fit_eigenfunctions(X, k, n_pca, n_bins, eps_scale)
    return U, sigma


class EigenfunctionGraph(Graph):
    """The "graph" of the Eigenfunction method: no W, only approximate Laplacian eigenpairs ``U``,
    ``sigma``, and the eigenfunctions themselves (``model``, to read them at new points); one component
    (every point reads the same eigenfunctions)."""

    def __init__(self, U: np.ndarray, sigma: np.ndarray, key: str, model: EigenfunctionModel | None = None):
        self.U = U
        self.model = model
        self.eigvals = sigma
        self.key = key
        self.sigma = float("nan")
        self.info: dict = {}  # builder facts for result.json (none)
        self.degree = np.ones(U.shape[0])
        self.inv_sqrt_degree = self.degree
        self.W = None
        self.S = None

    @property
    def n(self) -> int:
        return self.U.shape[0]

    @property
    def n_edges(self) -> int:
        return 0

    def components(self) -> tuple[int, np.ndarray]:
        """One component: every point is reached through the eigenfunctions."""
        return 1, np.zeros(self.n, dtype=np.int64)


class EigenfunctionBuilder(GraphBuilder):
    """Numerical eigenfunctions (Fergus et al. 2009). Parameters: ``k`` eigenfunctions kept, ``n_pca``
    principal components, ``n_bins`` histogram bins per dimension, ``eps_scale`` kernel width in units of
    each dimension's standard deviation."""

    name: ClassVar[str] = "eigenfunction"
    quick_params: ClassVar[dict] = {"k": 10, "n_bins": 10}
    _parameter_constraints = {
        "k": [Interval("int", 1, None)],
        "n_pca": [Interval("int", 1, None)],
        "n_bins": [Interval("int", 3, None)],
        "eps_scale": [positive()],
    }

    def __init__(self, k: int = 100, n_pca: int = 50, n_bins: int = 50, eps_scale: float = 0.2):
        self.k = k
        self.n_pca = n_pca
        self.n_bins = n_bins
        self.eps_scale = eps_scale

    def extension(self, X: np.ndarray, graph: Graph, **build_options) -> "EigenfunctionReadout":
        """New points: the eigenfunctions read at them (:class:`EigenfunctionReadout`)."""
        return EigenfunctionReadout(graph.model, graph.U)

    def _build(self, X, *, cache, data_fingerprint) -> tuple[Graph, bool]:
        fp = data_fingerprint or fingerprint(X)
        params = {k: getattr(self, k) for k in self._parameter_constraints}
        key = stable_hash({"data": fp, "builder": "eigenfunction", **params, "v": 1})
        n = X.shape[0]

        def compute():
            t0 = time.perf_counter()
            model, U, sigma = fit_eigenfunctions(X, int(self.k), int(self.n_pca), int(self.n_bins),
                                                 float(self.eps_scale))
            log.info("numerical eigenfunctions (k=%d) on %d points in %.1fs", self.k, n, time.perf_counter() - t0)
            return {"U": U, "sigma": sigma, **{f"model_{k}": v for k, v in model.to_arrays().items()}}

        def validate(a):
            if "U" not in a or "sigma" not in a or a["U"].shape[0] != n or a["U"].shape[1] != a["sigma"].size:
                return "eigenfunction arrays do not fit the data"
            if any(f"model_{k}" not in a for k in EigenfunctionModel.ARRAYS) or \
                    a["model_dims"].size != a["U"].shape[1] - 1:
                return "eigenfunction model arrays are missing or do not fit U"
            return None

        # cache kind "eigfunmodel": the entries hold the eigenfunctions (model_*) as well as U (the key,
        # which runs record, is unchanged; entries of the former kind "eigfun", U only, are not read)
        arrays, hit = (cache or Cache(None)).get_or_compute("eigfunmodel", key, compute, validate=validate)
        model = EigenfunctionModel.from_arrays({k: arrays[f"model_{k}"] for k in EigenfunctionModel.ARRAYS})
        return EigenfunctionGraph(arrays["U"], arrays["sigma"], key, model), hit


class EigenfunctionReadout:
    """The eigenfunctions are functions of a point (Fergus et al.: per PCA dimension, read by interpolation
    between bin centres), so a new point's scores are its own eigenfunction values times the coefficients
    ``a`` of the fit (the method's ``coef_``; for another method, the least-squares ``a`` with ``U a``
    closest to its fitted scores), clipped at 0 and normalised. A training point gets back its own row."""

    def __init__(self, model: EigenfunctionModel, U: np.ndarray):
        self.model, self.U = model, U

    def predict_proba(self, Xq: np.ndarray, algorithm) -> np.ndarray:
        from .extension import CHUNK, label_distributions

        a = getattr(algorithm, "coef_", None)
        if a is None:
            a = np.linalg.lstsq(self.U, np.asarray(algorithm.scores_, dtype=np.float64), rcond=None)[0]
        out = np.empty((Xq.shape[0], a.shape[1]))
        for lo in range(0, Xq.shape[0], CHUNK):
            out[lo:lo + CHUNK] = label_distributions(self.model.transform(Xq[lo:lo + CHUNK]) @ a)
        return out
