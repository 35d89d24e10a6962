"""LSSC: noise-robust semi-supervised learning by large-scale sparse coding (Lu, Gao, Wang, Wen & Huang
2015, AAAI), as lgcexp reads it (docs/fidelity.md#lssc).

Graph: the sparse codes ``Z`` (n x m) of the points over a dictionary of m k-means centres, here the local
anchor embedding codes of :mod:`lgcexp.anchor` (non-negative, l1 norm 1, s non-zeros a row), with the
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

from ..errors import UserError
from ..params import positive
from .base import GraphSSLAlgorithm, one_hot


def soft(x: np.ndarray, t: float) -> np.ndarray:
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def reduced_laplacian(Z, lam_diag: np.ndarray) -> np.ndarray:
    """``Z'(I - Z Lambda^-1 Z')Z`` as a dense m x m matrix."""
    G = np.asarray((Z.T @ Z).todense()) if hasattr(Z, "todense") else Z.T @ Z
    inv = np.where(lam_diag > 0, 1.0 / np.where(lam_diag > 0, lam_diag, 1.0), 0.0)
    return G - (G * inv) @ G


def lssc_admm(ZL: np.ndarray, YL: np.ndarray, Lr: np.ndarray, lam: float, *, rho: float = 1.0, tol: float = 1e-6,
              max_iter: int = 5000) -> tuple[np.ndarray, int]:
    """ADMM for ``min ||ZL A - YL||_1 + lam tr(A' Lr A)``; returns (A, iterations)."""
    m = Lr.shape[0]
    H = 2.0 * lam * Lr + rho * ZL.T @ ZL
    H = 0.5 * (H + H.T) + 1e-8 * max(np.trace(H) / m, 1e-12) * np.eye(m)
    cho = sla.cho_factor(H)
    E = np.zeros_like(YL)
    U = np.zeros_like(YL)
    A = np.zeros((m, YL.shape[1]))
    it = 0
    for it in range(1, max_iter + 1):
        A = sla.cho_solve(cho, rho * ZL.T @ (YL + E - U))
        R = ZL @ A - YL
        E_old = E
        E = soft(R + U, 1.0 / rho)
        U += R - E
        r = np.linalg.norm(R - E)
        s = rho * np.linalg.norm(ZL.T @ (E - E_old))
        if r <= tol * max(np.linalg.norm(R), np.linalg.norm(E), np.linalg.norm(YL)) and \
                s <= tol * max(rho * np.linalg.norm(ZL.T @ U), 1e-12):
            break
    return A, it


class LSSC(GraphSSLAlgorithm):
    """LSSC classifier on the sparse codes of an anchor graph. Parameters: ``lam`` smoothness weight; ``rho``,
    ``tol``, ``max_iter`` of the ADMM."""

    name = "lssc"
    _parameter_constraints = {"lam": [positive()], "rho": [positive()], "tol": [positive()],
                              "max_iter": [positive("int")]}

    def __init__(self, lam: float = 0.1, rho: float = 1.0, tol: float = 1e-6, max_iter: int = 5000):
        self.lam = lam
        self.rho = rho
        self.tol = tol
        self.max_iter = max_iter

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        from ..anchor import AnchorGraph

        if not isinstance(graph, AnchorGraph):
            raise UserError("algo=lssc needs graph=anchor (the sparse codes of the points over the k-means dictionary)")
        Z = graph.Z
        Lr = reduced_laplacian(Z, graph.lam)
        ZL = np.asarray(Z[labeled].todense())
        A, it = lssc_admm(ZL, one_hot(y_labeled, n_classes), Lr, float(self.lam), rho=float(self.rho),
                          tol=float(self.tol), max_iter=int(self.max_iter))
        self.anchor_scores_ = A  # (m, c): a point's scores are its anchor codes times A (new points too)
        self.scores_ = np.asarray(Z @ A)
        self.info_["solver_iterations"] = int(it)
