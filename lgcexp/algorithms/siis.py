"""SIIS: sparse label correction on the smooth eigenbasis (Gong et al. 2017; docs/fidelity.md#siis).

The class scores are restricted to the span of the ``m`` smoothest eigenvectors ``U`` of the normalised
Laplacian ``L = I - S`` (eigenvalues ``Sigma``): ``F = U A`` with ``A`` an (m, c) coefficient matrix, and

    min_A  sum_e ||(P U A)_e||_2  +  lambda1 sum_{i labelled} ||(U A - Y)_i||_2  +  lambda2 tr(A^T Sigma A)

with ``P`` the weighted incidence matrix: one row per *stored* entry ``W_ij`` of the symmetric affinity
(both (i, j) and (j, i), as in the authors' code), ``(P F)_e = W_ij (F_i - F_j)``. Both l2,1 terms are
robust: the first lets the prediction jump across a few edges, the second lets it disagree with a few
(noisy) labels, which is the "label correction".

Solver: the inexact augmented Lagrangian method of the authors' re-implementation (docs/fidelity.md#siis). With the
splittings ``Q = P U A`` and ``R = J U A - Y`` (J: the labelled rows), multipliers ``Lambda1``, ``Lambda2``
(started at ones, as the authors did) and a penalty ``mu`` growing by ``rho`` up to ``mu_max``, each iteration

    Q <- shrink(P U A - Lambda1 / mu, 1 / mu)                        (row-wise group soft-thresholding)
    R <- shrink(J U A - Y - Lambda2 / mu, lambda1 / mu)
    A <- (2 lambda2 Sigma + mu G)^-1 ((PU)^T (Lambda1 + mu Q) + (JU)^T (Lambda2 + mu (R + Y)))
    Lambda1 += mu (Q - P U A);  Lambda2 += mu (R - J U A + Y);  mu <- min(rho mu, mu_max)

with ``G = (PU)^T (PU) + (JU)^T (JU)``; it stops when ``max|A - A_prev| / max|A_prev| <= tol`` or after
``max_iter`` iterations. ``P U`` (edges x m, about 290 MB in float64 on ISOLET with m = 300) is never
formed: ``P U A = P (U A)`` is a sparse product with the (n, c) matrix ``U A``, ``(PU)^T X = U^T (P^T X)``,
and ``(PU)^T (PU) = U^T (P^T P) U`` with the sparse n x n matrix ``P^T P`` (computed once). The m x m system
matrix changes with mu every iteration; G and Sigma are diagonalised simultaneously once, so each solve is
two (m x m) by (m x c) products. One iteration then costs two (n x m) by (m x c) products and the edge side:
with numpy, two sparse products with P and a dozen passes over the (edges x c) multiplier array; on larger
graphs one numba pass over the edges (:func:`lgcexp.solvers.fused.siis_edge_pass`, :meth:`SIISProblem.solve`).

Prediction: row argmax of ``F = U A``; the labelled accuracy "after correction" is the argmax on the
labelled rows (the base-class default). The algorithm never sees the noise rate; the per-noise lambda1 of
Gong et al. is chosen in ``conf/algo/siis.yaml``.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from ..graph import Graph
from ..params import Boolean, Interval, Options, fmt_value, positive
from .base import GraphSSLAlgorithm, one_hot

log = logging.getLogger(__name__)

MULTIPLIER_INITS = ("ones", "zeros")
#: G counts as singular when its smallest eigenvalue is below this fraction of its largest
SINGULAR_RTOL = 1e-10


def group_shrink(V: np.ndarray, tau: float) -> np.ndarray:
    """Row-wise group soft-thresholding: ``v -> v max(0, 1 - tau / ||v||)`` (zero rows stay zero).

    The proximal operator of ``tau sum_i ||v_i||_2``.
    """
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    scale = np.zeros_like(norms)
    big = norms > tau
    scale[big] = 1.0 - tau / norms[big]
    return V * scale[:, None]


def _shrink_inplace(V: np.ndarray, tau: float) -> None:
    """``V <- group_shrink(V, tau)`` without temporaries of V's size."""
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    np.maximum(norms, tau, out=norms)  # rows with ||v|| <= tau get scale 0
    scale = 1.0 - tau / norms
    V *= scale[:, None]


def incidence_matrix(W: sp.spmatrix) -> sp.csr_matrix:
    """Weighted incidence matrix P (nnz x n): row e for stored ``W_ij`` holds +W_ij at i and -W_ij at j."""
    C = sp.coo_matrix(W)
    mask = C.row != C.col  # a self-loop contributes W_ii (F_i - F_i) = 0 anyway
    i, j, w = C.row[mask], C.col[mask], C.data[mask].astype(np.float64)
    e = np.arange(i.size)
    return sp.csr_matrix(
        (np.concatenate([w, -w]), (np.concatenate([e, e]), np.concatenate([i, j]))), shape=(i.size, W.shape[0])
    )


def row_norm_sum(V: np.ndarray) -> float:
    """``sum_i ||v_i||_2`` (the l2,1 norm of the rows)."""
    return float(np.sqrt(np.einsum("ij,ij->i", V, V)).sum())


@dataclass
class SIISProblem:
    """One SIIS instance: the basis ``U`` (n, m) with eigenvalues ``sigma`` (m,), incidence ``P``, labels.

    Holds the fixed precomputations; the ALM sub-steps are methods so they can be checked one by one.
    """

    U: np.ndarray
    sigma: np.ndarray
    P: sp.csr_matrix
    labeled: np.ndarray
    YL: np.ndarray  # (l, c) observed one-hot labels
    lambda1: float
    lambda2: float
    UL: np.ndarray = field(init=False)
    PT: sp.csc_matrix = field(init=False)
    G: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.U = np.ascontiguousarray(self.U, dtype=np.float64)
        self.sigma = np.asarray(self.sigma, dtype=np.float64)
        self.P = sp.csr_matrix(self.P)
        self.PT = self.P.T  # CSC view: its products are faster than a CSR copy's
        self.UL = np.ascontiguousarray(self.U[self.labeled])
        PtP = (self.PT @ self.P).tocsr()
        G = self.U.T @ (PtP @ self.U) + self.UL.T @ self.UL
        self.G = 0.5 * (G + G.T)
        self._diagonalise()

    def _diagonalise(self) -> None:
        """Simultaneous diagonalisation of G and 2 lambda2 Sigma, so that every A update is two products.

        With ``G = E diag(g) E^T``, ``H = E diag(g^-1/2) E^T`` and ``H (2 lambda2 Sigma) H = V diag(d) V^T``,
        the system matrix is ``M(mu) = 2 lambda2 Sigma + mu G = H^-1 V diag(d + mu) V^T H^-1``, hence
        ``M(mu)^-1 = T diag(1 / (d + mu)) T^T`` with ``T = H V``. If G is (numerically) singular (a connected
        component without labels), every update falls back to a least-squares solve of the m x m system.
        """
        self.T: np.ndarray | None = None
        self.d: np.ndarray | None = None
        g, E = np.linalg.eigh(self.G)
        if not g.size or g.min() <= SINGULAR_RTOL * max(g.max(), 0.0):
            log.info("SIIS: G is singular (a component without labels?); A updates use least squares")
            return
        H = (E / np.sqrt(g)) @ E.T
        C = (H * (2.0 * self.lambda2 * self.sigma)) @ H
        d, V = np.linalg.eigh(0.5 * (C + C.T))
        self.T, self.d = H @ V, np.maximum(d, 0.0)

    # --- pieces -------------------------------------------------------------------------------------
    def edge_diff(self, F: np.ndarray) -> np.ndarray:
        """``P F``: (edges, c)."""
        return self.P @ F

    def objective(self, A: np.ndarray, F: np.ndarray | None = None, PF: np.ndarray | None = None) -> float:
        F = self.U @ A if F is None else F
        PF = self.edge_diff(F) if PF is None else PF
        smooth = float(np.einsum("ij,i,ij->", A, self.sigma, A))
        return row_norm_sum(PF) + self.lambda1 * row_norm_sum(F[self.labeled] - self.YL) + self.lambda2 * smooth

    def update_q(self, PF: np.ndarray, Lam1: np.ndarray, mu: float) -> np.ndarray:
        """Minimiser over Q of ``||Q||_2,1 + <Lambda1, Q - PUA> + mu/2 ||Q - PUA||^2`` (given ``PF = PUA``)."""
        return group_shrink(PF - Lam1 / mu, 1.0 / mu)

    def update_r(self, FL: np.ndarray, Lam2: np.ndarray, mu: float) -> np.ndarray:
        """Minimiser over R of ``lambda1 ||R||_2,1 + <Lambda2, R - JUA + Y> + mu/2 ||R - JUA + Y||^2``."""
        return group_shrink(FL - self.YL - Lam2 / mu, self.lambda1 / mu)

    def update_a(self, Q: np.ndarray, R: np.ndarray, Lam1: np.ndarray, Lam2: np.ndarray, mu: float) -> np.ndarray:
        """Minimiser over A of the augmented Lagrangian: ``M(mu) A = rhs`` (see ``solve_system``)."""
        rhs = self.U.T @ (self.PT @ (Lam1 + mu * Q)) + self.UL.T @ (Lam2 + mu * (R + self.YL))
        return self.solve_system(rhs, mu)

    def system_matrix(self, mu: float) -> np.ndarray:
        """``2 lambda2 Sigma + mu G`` (m x m)."""
        M = mu * self.G
        M[np.diag_indices_from(M)] += 2.0 * self.lambda2 * self.sigma
        return M

    def solve_system(self, rhs: np.ndarray, mu: float) -> np.ndarray:
        """``system_matrix(mu)^-1 rhs`` by the simultaneous diagonalisation (least squares if G is singular)."""
        if self.T is not None:
            return self.T @ ((self.T.T @ rhs) / (self.d + mu)[:, None])
        return np.linalg.lstsq(self.system_matrix(mu), rhs, rcond=None)[0]

    # --- the ALM loop --------------------------------------------------------------------------------
    def solve(
        self,
        *,
        mu: float = 1.0,
        rho: float = 1.2,
        mu_max: float = 1e7,
        tol: float = 1e-4,
        max_iter: int = 1000,
        multiplier_init: str = "ones",
        callback: Callable[[int, float], None] | None = None,
        fused: bool | None = None,
    ) -> "SIISResult":
        """Run the ALM from ``A = 0``; returns the final iterate, F = U A and the objective trace.

        The loop is the update sequence of the class docstring in scaled form (``Y = Lambda / mu``).
        ``fused`` (default: :func:`fused_edges` decides): the edge steps of an iteration, from ``P U A`` to the
        next ``(PU)^T Lambda1``, in one pass of :func:`lgcexp.solvers.fused.siis_edge_pass` (numba); else numpy
        with the (edges x c) arrays updated in place, about a dozen passes over them. The two agree to
        round-off (tests/test_siis.py).
        """
        if fused is None:
            fused = fused_edges(self.P.shape[0] * self.YL.shape[1])
        edges = edge_arrays(self.P) if fused else None  # None: not an incidence matrix, numpy takes it
        m, c = self.U.shape[1], self.YL.shape[1]
        fill = 1.0 if multiplier_init == "ones" else 0.0
        Y1 = np.full((self.P.shape[0], c), fill / mu)  # Lambda1 / mu
        Y2 = np.full(self.YL.shape, fill / mu)  # Lambda2 / mu
        A = np.zeros((m, c))
        F = np.zeros((self.U.shape[0], c))
        steps = _NumpyEdgeSteps(self, Y1) if edges is None else _FusedEdgeSteps(edges, Y1, F.shape)
        objective = [self.objective(A, F, np.zeros((0, c)))]  # P U A = 0
        Z = steps.start(1.0 / mu)  # (PU)^T-side of the first A update: P^T (Lambda1 + mu Q) / mu
        converged, rel = False, float("inf")
        it = 0
        for it in range(1, max_iter + 1):
            # R = shrink(JUA - Y - Lambda2/mu, lambda1/mu);  Y2 <- (Lambda2 + mu (R + Y)) / mu
            FL = F[self.labeled]
            R = group_shrink(FL - self.YL - Y2, self.lambda1 / mu)
            Y2 += R
            Y2 += self.YL
            # A = M(mu)^-1 ((PU)^T (Lambda1 + mu Q) + (JU)^T (Lambda2 + mu (R + Y)))
            rhs = self.U.T @ Z
            rhs += self.UL.T @ Y2
            rhs *= mu
            A_prev = A
            A = self.solve_system(rhs, mu)
            F = self.U @ A
            FL = F[self.labeled]
            # Lambda2 += mu (R - JUA + Y), rescaled for the new mu; the edge side in the step below
            Y2 -= FL
            mu_new = min(rho * mu, mu_max)
            ratio = mu / mu_new if mu_new != mu else 1.0
            if mu_new != mu:
                Y2 *= ratio
            denom = float(np.abs(A_prev).max())
            rel = float(np.abs(A - A_prev).max()) / denom if denom > 0 else float("inf")
            finite = bool(np.all(np.isfinite(A)))
            last = rel <= tol or it == max_iter or not finite
            edge_term, Z = steps.step(F, ratio, 1.0 / mu_new, last)
            mu = mu_new
            smooth = float(np.einsum("ij,i,ij->", A, self.sigma, A))
            objective.append(edge_term + self.lambda1 * row_norm_sum(FL - self.YL) + self.lambda2 * smooth)
            if callback is not None:
                callback(it, objective[-1])
            if not finite:
                raise FloatingPointError(f"SIIS diverged at iteration {it} (non-finite coefficients)")
            if rel <= tol:
                converged = True
                break
        return SIISResult(A=A, F=F, iterations=it, converged=converged, rel_change=rel,
                          objective=np.asarray(objective), mu=mu)


class _NumpyEdgeSteps:
    """The edge side of the ALM with numpy and scipy, the (edges x c) arrays updated in place (about a dozen
    passes over them per iteration instead of twice that for the textbook form; the same iterates)."""

    def __init__(self, problem: SIISProblem, Y1: np.ndarray):
        self.P, self.PT, self.Y1 = problem.P, problem.PT, Y1

    def _shrink(self, V: np.ndarray, tau: float) -> np.ndarray:
        """Q = shrink(PUA - Lambda1/mu, 1/mu) from V = PUA;  Y1 <- (Lambda1 + mu Q) / mu;  P^T Y1."""
        np.subtract(V, self.Y1, out=V)
        _shrink_inplace(V, tau)
        np.add(self.Y1, V, out=self.Y1)
        return self.PT @ self.Y1

    def start(self, tau: float) -> np.ndarray:
        return self._shrink(np.zeros_like(self.Y1), tau)

    def step(self, F: np.ndarray, ratio: float, tau: float, last: bool) -> tuple[float, np.ndarray | None]:
        """Lambda1 += mu (Q - PUA), rescaled by ``ratio``; the objective's edge term; then (unless ``last``)
        the next iteration's shrink with ``tau``."""
        V = self.P @ F
        self.Y1 -= V
        if ratio != 1.0:
            self.Y1 *= ratio
        term = row_norm_sum(V)
        return term, (None if last else self._shrink(V, tau))


class _FusedEdgeSteps:
    """The edge side of the ALM in one pass of :func:`lgcexp.solvers.fused.siis_edge_pass` per iteration."""

    def __init__(self, edges: tuple, Y1: np.ndarray, shape: tuple[int, int]):
        from ..solvers import fused

        self.kernels, self.edges, self.Y1 = fused, edges, Y1
        self.Z = np.zeros(shape)

    def start(self, tau: float) -> np.ndarray:
        k = self.kernels
        k.siis_edge_pass(*self.edges, np.zeros_like(self.Z), self.Y1, 1.0, tau, self.Z, k.SIIS_START)  # F = 0
        return self.Z

    def step(self, F: np.ndarray, ratio: float, tau: float, last: bool) -> tuple[float, np.ndarray | None]:
        k = self.kernels
        term = k.siis_edge_pass(*self.edges, F, self.Y1, ratio, tau, self.Z, k.SIIS_LAST if last else k.SIIS_NEXT)
        return float(term), (None if last else self.Z)


def edge_arrays(P: sp.csr_matrix) -> tuple[np.ndarray, ...] | None:
    """``(head, tail, w_head, w_tail)`` of an incidence matrix whose every row holds exactly two stored
    entries, in the rows' stored order (:func:`incidence_matrix`'s do); None for any other P."""
    if P.shape[0] and not np.all(np.diff(P.indptr) == 2):
        return None
    ind = np.asarray(P.indices, dtype=np.int64)
    w = np.asarray(P.data, dtype=np.float64)
    return ind[0::2].copy(), ind[1::2].copy(), w[0::2].copy(), w[1::2].copy()


#: SIIS runs its edge steps through :func:`lgcexp.solvers.fused.siis_edge_pass` from this many (edges x classes)
#: entries on (ISOLET's 117,626 x 26 and MNIST's graphs are above; small problems keep numpy and skip
#: numba's import)
FUSED_MIN_EDGE_ENTRIES = 500_000


def fused_edges(entries: int) -> bool:
    """Whether SIIS's edge steps take the numba pass (:func:`lgcexp.solvers.cg.numba_passes` from
    :data:`FUSED_MIN_EDGE_ENTRIES` edge x class entries)."""
    from ..solvers.cg import numba_passes

    return numba_passes(entries, FUSED_MIN_EDGE_ENTRIES) is not None


@dataclass
class SIISResult:
    A: np.ndarray
    F: np.ndarray
    iterations: int
    converged: bool
    rel_change: float
    objective: np.ndarray  # objective at A_0 = 0 and after each iteration
    mu: float


def _single_blas_thread():
    """One BLAS thread for the ALM loop.

    Its BLAS calls are small (n x m by m x c, m x m by m x c) and interleaved with single-threaded numpy
    passes over the edge arrays; idle BLAS worker threads spin and take cores from those passes. On ISOLET
    (2 cores, shared) a run took 5.4 s with one thread against 11 s with two.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


class SIIS(GraphSSLAlgorithm):
    """SIIS baseline (Gong et al. 2017) solved by the inexact ALM.

    Parameters: ``m`` eigenvectors; ``lambda1`` (label fidelity, l2,1), ``lambda2`` (spectral smoothness);
    ALM ``mu`` (initial penalty), ``rho`` (> 1), ``mu_max``, ``tol`` (relative change of A), ``max_iter``;
    ``multiplier_init`` 'ones' (the authors') or 'zeros'. Variants of the authors' earlier version
    (before 2021-03-17, docs/fidelity.md#siis): ``drop_trivial`` skips the first eigenvector and uses the next m;
    ``normalize_weights`` divides W by the mean of its stored entries.
    """

    name = "siis"
    quick_params = {"m": 10}
    _parameter_constraints = {
        "m": [positive("int")],
        "lambda1": [positive()],
        "lambda2": [positive()],
        "mu": [positive()],
        "rho": [Interval("real", 1, None, "neither")],
        "mu_max": [positive()],
        "tol": [positive()],
        "max_iter": [positive("int")],
        "multiplier_init": [Options(MULTIPLIER_INITS)],
        "drop_trivial": [Boolean()],
        "normalize_weights": [Boolean()],
    }

    def __init__(
        self,
        m: int = 30,
        lambda1: float = 100.0,
        lambda2: float = 10.0,
        mu: float = 1.0,
        rho: float = 1.2,
        mu_max: float = 1e7,
        tol: float = 1e-4,
        max_iter: int = 1000,
        multiplier_init: str = "ones",
        drop_trivial: bool = False,
        normalize_weights: bool = False,
    ):
        self.m = m
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.mu = mu
        self.rho = rho
        self.mu_max = mu_max
        self.tol = tol
        self.max_iter = max_iter
        self.multiplier_init = multiplier_init
        self.drop_trivial = drop_trivial
        self.normalize_weights = normalize_weights

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        if params["mu_max"] < params["mu"]:
            raise UserError(f"{prefix}mu_max={fmt_value(params['mu_max'])} is not allowed: it must be >= "
                            f"{prefix}mu ({fmt_value(params['mu'])})")

    def required_eigenpairs(self) -> int:
        return self.m + int(self.drop_trivial)

    def _basis(self, graph: Graph, eig: Any, progress: bool) -> tuple[np.ndarray, np.ndarray]:
        p = self.required_eigenpairs()
        if eig is None:
            from ..spectral import laplacian_eigenpairs

            eig, _ = laplacian_eigenpairs(graph, p, progress=progress)
        vectors, values = np.asarray(eig.vectors), np.asarray(eig.values)
        if vectors.ndim != 2 or vectors.shape[0] != graph.n or values.shape != (vectors.shape[1],):
            raise ValueError(f"eigenpairs of shape {vectors.shape} / {values.shape} do not fit a graph of "
                             f"{graph.n} nodes")
        if vectors.shape[1] < p:
            raise ValueError(f"SIIS needs {p} eigenpairs, got {vectors.shape[1]}")
        start = int(self.drop_trivial)
        return vectors[:, start:p], values[start:p]

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """m must be below n and at least the number of classes (called by the pipeline before any work)."""
        prefix = self.config_prefix if prefix is None else prefix
        if self.required_eigenpairs() >= n:
            raise UserError(f"{prefix}m={self.m} is not allowed here: it must be less than the number of points ({n})"
                            + (" minus 1 with drop_trivial" if self.drop_trivial else ""))
        if self.m < n_classes:
            raise UserError(f"{prefix}m={self.m} is not allowed here: it must be at least the number of classes "
                            f"({n_classes})")

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        t0 = time.perf_counter()
        U, sigma = self._basis(graph, eig, progress)
        W = graph.W
        if self.normalize_weights and W.nnz:
            W = W / float(W.data.mean())
        problem = SIISProblem(U=U, sigma=sigma, P=incidence_matrix(W), labeled=labeled,
                              YL=one_hot(y_labeled, n_classes), lambda1=self.lambda1, lambda2=self.lambda2)
        t_setup = time.perf_counter() - t0

        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.max_iter, desc="SIIS ALM", leave=False)

        def callback(it: int, obj: float) -> None:
            if bar is not None:
                bar.update(1)
                bar.set_postfix(objective=f"{obj:.4g}")

        try:
            with _single_blas_thread():
                res = problem.solve(mu=self.mu, rho=self.rho, mu_max=self.mu_max, tol=self.tol,
                                    max_iter=self.max_iter, multiplier_init=self.multiplier_init, callback=callback)
        finally:
            if bar is not None:
                bar.close()
        if not res.converged:
            log.warning("SIIS stopped after max_iter=%d iterations (relative change %.3g > tol %.3g)",
                        res.iterations, res.rel_change, self.tol)
        log.info("SIIS: %d iterations, objective %.6g, %.2fs", res.iterations, res.objective[-1],
                 time.perf_counter() - t0)

        self.coef_ = res.A
        self._labeled = np.asarray(labeled, dtype=np.int64)
        self.scores_ = res.F
        self.objective_ = res.objective
        self.labeled_pred_ = res.F[labeled].argmax(axis=1)
        FL = res.F[labeled]
        residual = np.linalg.norm(FL - problem.YL, axis=1)
        # labels whose prediction moved away from the given label were "corrected" (flagged as noisy);
        # suspicion: how far the best other class beats the given one (> 0 exactly when corrected, up to ties)
        given = FL[np.arange(labeled.size), y_labeled]
        others = np.where(problem.YL > 0, -np.inf, FL).max(axis=1) if n_classes > 1 else np.full(labeled.size, -np.inf)
        self.dropped_ = self.labeled_pred_ != y_labeled
        self.suspicion_ = others - given
        self.label_info_["siis_residual"] = residual
        self.label_info_["siis_corrected"] = self.dropped_.astype(np.int8)
        self.info_.update({
            "solver_iterations": int(res.iterations),
            "solver_converged": bool(res.converged),
            "solver_rel_change": float(res.rel_change),
            "siis_objective": float(res.objective[-1]),
            "siis_m": int(self.m),
            "siis_lambda1": self.lambda1,
            "siis_lambda2": self.lambda2,
            "siis_edges": int(problem.P.shape[0]),
            "siis_setup_seconds": round(t_setup, 4),
            "siis_n_corrected": int(self.dropped_.sum()),
        })

    def label_judgement(self):
        """SIIS's fitted scores on the labelled rows, clipped at 0 and normalised to sum 1 per row (SIIS fits
        every label, robustly, rather than leaving it out); its own verdict: the corrected labels."""
        from ..issues.judgement import LabelJudgement, normalize_rows

        FL = np.asarray(self.scores_)[self._labeled]
        return LabelJudgement(probs=normalize_rows(np.clip(FL, 0.0, None)), decision=self.dropped_.copy(),
                              source="siis: fitted scores on the labelled rows, clipped at 0 and normalised")
