"""Sparse linear algebra shared by the algorithms: conjugate gradient for many right-hand sides."""
from __future__ import annotations

from typing import Callable

import numpy as np


class NotConverged(RuntimeError):
    pass


def block_cg(
    matvec: Callable[[np.ndarray], np.ndarray],
    B: np.ndarray,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    precond: np.ndarray | None = None,
    X0: np.ndarray | None = None,
) -> tuple[np.ndarray, int, float]:
    """Solve ``A X = B`` for a symmetric positive (semi-)definite ``A``, all columns at once.

    Each column runs its own (Jacobi-preconditioned) conjugate gradient recursion, but the products with A
    are done for all columns together (one sparse-times-dense product per iteration). Stops when every
    column's residual satisfies ``||r_j|| <= tol * ||b_j||``. Returns (X, iterations, worst relative
    residual). Raises ``NotConverged`` after ``maxiter`` iterations.
    """
    B = np.asarray(B, dtype=np.float64)
    squeeze = B.ndim == 1
    if squeeze:
        B = B[:, None]
    X = np.zeros_like(B) if X0 is None else np.array(X0, dtype=np.float64).reshape(B.shape)
    R = B - matvec(X) if X0 is not None else B.copy()
    bnorm = np.linalg.norm(B, axis=0)
    bnorm[bnorm == 0] = 1.0
    Minv = None if precond is None else np.asarray(precond, dtype=np.float64)[:, None]
    Z = R if Minv is None else Minv * R
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    it = 0
    rel = np.linalg.norm(R, axis=0) / bnorm
    while rel.max() > tol:
        if it >= maxiter:
            raise NotConverged(f"conjugate gradient did not reach tol={tol:g} in {maxiter} iterations (residual {rel.max():.2e})")
        AP = matvec(P)
        pAp = np.einsum("ij,ij->j", P, AP)
        active = pAp > 0
        step = np.where(active, rz / np.where(active, pAp, 1.0), 0.0)
        X += P * step
        R -= AP * step
        Z = R if Minv is None else Minv * R
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P = Z + P * beta
        rz = rz_new
        it += 1
        rel = np.linalg.norm(R, axis=0) / bnorm
    return (X[:, 0] if squeeze else X), it, float(rel.max())
