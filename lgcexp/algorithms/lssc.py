"""LSSC: noise-robust semi-supervised learning by large-scale sparse coding (Lu, Gao, Wang, Wen & Huang
2015, AAAI), as lgcexp reads it (docs/fidelity.md#lssc).

Graph: the sparse codes ``Z`` (n x m) of the points over a dictionary of m k-means centres, here the local
anchor embedding codes of :mod:`lgcexp.graph.anchor` (non-negative, l1 norm 1, s non-zeros a row), with the
low-rank graph ``W = Z Lambda^-1 Z'``; needs ``graph=anchor``. Scores are restricted to the span of the
codes, ``F = Z A`` (A: m x c), so the problem has m x c unknowns (linear in n).

Objective (Lu et al.: an l1 label-fitting term, robust to wrong labels, plus the graph smoothness term):

    min_A  ||Z_L A - Y_L||_1 + lam tr(A' L~ A),   L~ = Z'(I - W)Z = Z'Z - Z'Z Lambda^-1 Z'Z,

solved by ADMM on the split ``E = Z_L A - Y_L``:

    A <- (2 lam L~ + rho Z_L'Z_L + delta I)^-1 rho Z_L'(Y_L + E - U)   (one m x m Cholesky, reused)
    E <- soft(Z_L A - Y_L + U, 1/rho)
    U <- U + Z_L A - Y_L - E

(``delta`` = 1e-8 x the trace scale keeps the solve definite; residual stop as in Boyd et al. 2011).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..errors import UserError
from ..params import Boolean, Interval, positive
from ..solvers.admm import admm_control
from .base import GraphSSLAlgorithm, one_hot


def soft(x: np.ndarray, t: float) -> np.ndarray:
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def reduced_laplacian(Z, lam_diag: np.ndarray) -> np.ndarray:
    """``Z'(I - Z Lambda^-1 Z')Z`` as a dense m x m matrix."""
    G = np.asarray((Z.T @ Z).todense()) if hasattr(Z, "todense") else Z.T @ Z
    inv = np.where(lam_diag > 0, 1.0 / np.where(lam_diag > 0, lam_diag, 1.0), 0.0)
    return G - (G * inv) @ G


def lssc_admm(ZL, YL: np.ndarray, Lr: np.ndarray, lam: float, *, rho: float = 1.0, tol: float = 1e-6,
              max_iter: int = 5000, alpha: float = 1.0, adaptive: bool = False,
              check_every: int = 1) -> tuple[np.ndarray, int]:
    """ADMM for ``min ||ZL A - YL||_1 + lam tr(A' Lr A)``; returns (A, iterations).

    ``ZL`` (the labelled rows of the codes) may be a scipy sparse matrix (s non-zeros a row): every product
    with it then costs O(l s c) instead of O(l m c), and the step is dominated by the m x m Cholesky solve.
    ``alpha``: over-relaxation (``Z_L A - Y_L`` replaced by ``alpha (Z_L A - Y_L) + (1 - alpha) E`` in the E-
    and U-steps; Boyd et al. 2011 §3.4.3); ``adaptive``: residual balancing of rho (Boyd et al. §3.4.1),
    every ``check_every`` steps, when one relative residual exceeds 10x the other (at most 20 changes, each
    a new m x m Cholesky factor); the stopping test is made every ``check_every`` steps. The defaults
    (alpha 1, fixed rho, a test every step) are plain ADMM, the iterates of the MNIST column."""
    m = Lr.shape[0]
    ZTZ = ZL.T @ ZL
    ZTZ = np.asarray(ZTZ.todense()) if hasattr(ZTZ, "todense") else np.asarray(ZTZ)
    ZLT = ZL.T.tocsr() if hasattr(ZL, "tocsr") else ZL.T

    def factor(rho):
        H = 2.0 * lam * Lr + rho * ZTZ
        H = 0.5 * (H + H.T) + 1e-8 * max(np.trace(H) / m, 1e-12) * np.eye(m)
        return sla.cho_factor(H)

    cho = factor(rho)
    ynorm = np.linalg.norm(YL)
    E = np.zeros_like(YL)
    U = np.zeros_like(YL)
    A = np.zeros((m, YL.shape[1]))
    changes = 0
    it = 0
    for it in range(1, max_iter + 1):
        A = sla.cho_solve(cho, rho * (ZLT @ (YL + E - U)), check_finite=False)
        R = ZL @ A - YL
        Rr = alpha * R + (1.0 - alpha) * E if alpha != 1.0 else R
        E_old = E
        E = soft(Rr + U, 1.0 / rho)
        U += Rr - E
        if it % check_every and it != max_iter:
            continue
        r = np.linalg.norm(R - E)
        s = rho * np.linalg.norm(ZLT @ (E - E_old))
        eps_pri = tol * max(np.linalg.norm(R), np.linalg.norm(E), ynorm)
        eps_dual = tol * max(rho * np.linalg.norm(ZLT @ U), 1e-12)
        done, f = admm_control(r, s, eps_pri, eps_dual, adaptive=adaptive, changes=changes)
        if done:
            break
        if f != 1.0:  # rescale the scaled dual with the penalty
            rho *= f
            U /= f
            changes += 1
            cho = factor(rho)
    return A, it


class LSSC(GraphSSLAlgorithm):
    """LSSC classifier on the sparse codes of an anchor graph. Parameters: ``lam`` smoothness weight; ``rho``,
    ``tol``, ``max_iter``, ``alpha``, ``adaptive``, ``check_every`` of the ADMM (:func:`lssc_admm`)."""

    name = "lssc"
    default_graph = "anchor"
    quick_params = {"max_iter": 200}
    _parameter_constraints = {"lam": [positive()], "rho": [positive()], "tol": [positive()],
                              "max_iter": [positive("int")], "alpha": [Interval("real", 0.0, 2.0, closed="neither")],
                              "adaptive": [Boolean()], "check_every": [positive("int")]}

    def __init__(self, lam: float = 0.1, rho: float = 1.0, tol: float = 1e-6, max_iter: int = 5000, alpha: float = 1.0,
                 adaptive: bool = False, check_every: int = 1):
        self.lam = lam
        self.rho = rho
        self.tol = tol
        self.max_iter = max_iter
        self.alpha = alpha
        self.adaptive = adaptive
        self.check_every = check_every

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        from ..graph.anchor import AnchorGraph

        if not isinstance(graph, AnchorGraph):
            raise UserError("algo=lssc needs graph=anchor (the sparse codes of the points over the k-means dictionary)")
        Z = graph.Z
        Lr = reduced_laplacian(Z, graph.lam)
        ZL = sp.csr_matrix(Z[labeled])
        A, it = lssc_admm(ZL, one_hot(y_labeled, n_classes), Lr, float(self.lam), rho=float(self.rho),
                          tol=float(self.tol), max_iter=int(self.max_iter), alpha=float(self.alpha),
                          adaptive=bool(self.adaptive), check_every=int(self.check_every))
        self.anchor_scores_ = A  # (m, c): a point's scores are its anchor codes times A (new points too)
        self.scores_ = np.asarray(Z @ A)
        self.info_["solver_iterations"] = int(it)
