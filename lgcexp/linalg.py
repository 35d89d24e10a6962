"""Sparse linear algebra shared by the algorithms: conjugate gradient for many right-hand sides."""
from __future__ import annotations

from typing import Callable

import numpy as np


class NotConverged(RuntimeError):
    pass


def shifted_operator(S, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``V -> (I - alpha S) V`` with one temporary (the LGC system matrix, paper Eq. for P)."""

    def apply(V: np.ndarray) -> np.ndarray:
        out = S @ V
        out *= -alpha
        out += V
        return out

    return apply


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
    are done for all columns together (one sparse-times-dense product per iteration), and the updates are
    in place. A float32 ``B`` is solved in float32, anything else in float64. Stops when every column's
    residual satisfies ``||r_j|| <= tol * ||b_j||``. Returns (X, iterations, worst relative residual).
    Raises ``NotConverged`` after ``maxiter`` iterations.
    """
    B = np.asarray(B)
    dt = np.float32 if B.dtype == np.float32 else np.float64
    B = B.astype(dt, copy=False)
    squeeze = B.ndim == 1
    if squeeze:
        B = B[:, None]
    if X0 is None:
        X = np.zeros_like(B)
        R = B.copy()
    else:
        X = np.array(X0, dtype=dt).reshape(B.shape)
        R = B - matvec(X)
    bnorm = np.linalg.norm(B, axis=0)
    bnorm[bnorm == 0] = 1.0
    Minv = None if precond is None else np.asarray(precond, dtype=dt)[:, None]
    Z = R if Minv is None else Minv * R
    P = Z.copy()
    T = np.empty_like(B)
    rz = np.einsum("ij,ij->j", R, Z)
    it = 0
    rel = np.linalg.norm(R, axis=0) / bnorm
    while rel.max(initial=0.0) > tol:
        if it >= maxiter:
            raise NotConverged(f"conjugate gradient did not reach tol={tol:g} in {maxiter} iterations (residual {rel.max():.2e})")
        AP = matvec(P)
        pAp = np.einsum("ij,ij->j", P, AP)
        step = np.where(pAp > 0, rz / np.where(pAp > 0, pAp, 1.0), 0.0).astype(dt)
        np.multiply(P, step, out=T)
        X += T
        np.multiply(AP, step, out=AP)
        R -= AP
        Z = R if Minv is None else Minv * R
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0).astype(dt)
        rz = rz_new
        P *= beta
        P += Z
        it += 1
        rel = np.linalg.norm(R, axis=0) / bnorm
    return (X[:, 0] if squeeze else X), it, float(rel.max(initial=0.0))
