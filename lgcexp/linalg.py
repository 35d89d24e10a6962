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


def multishift_cg(
    S,
    B: np.ndarray,
    alphas,
    select: Callable[[np.ndarray], np.ndarray],
    *,
    tol: float = 1e-6,
    maxiter: int = 10_000,
) -> tuple[list[np.ndarray], int, float]:
    """Solve ``(I - alpha_k S) X_k = B`` for every ``alpha_k`` from one Krylov space, returning ``select(X_k)``.

    Every ``I - alpha S`` is a shift of one matrix: with ``a0 = max(alphas)`` and ``A0 = I - a0 S``,
    ``I - alpha S = (alpha / a0) (A0 + tau I)``, ``tau = a0 / alpha - 1 >= 0``. Conjugate gradient on ``A0``
    builds the Krylov space ``K_k(A0, b)``, which is the same for every shift, and the shifted residuals stay
    collinear with the base residual, ``r^tau_k = zeta^tau_k r_k`` (Frommer 2003; Jegerlehner 1996). Per
    shift, with ``a_k``, ``b_k`` the base CG step sizes (``zeta_{-1} = zeta_0 = 1``, ``a_{-1} = 1``,
    ``b_{-1} = 0``)::

        zeta_{k+1} = zeta_k zeta_{k-1} a_{k-1} / (a_{k-1} zeta_{k-1} (1 + tau a_k) + a_k b_{k-1} (zeta_{k-1} - zeta_k))
        a^tau_k = a_k zeta_{k+1} / zeta_k,   b^tau_k = (zeta_{k+1} / zeta_k)^2 b_k
        x^tau += a^tau_k p^tau_k,             p^tau_{k+1} = zeta_{k+1} r_{k+1} + b^tau_k p^tau_k

    These updates are entrywise, so a shifted system's x and p are only kept on the entries ``select``
    picks (e.g. the labelled rows: l x l per shift instead of n x l); the only sparse products are the base
    system's. ``|zeta| <= 1``: every shifted residual is at most the base one, so stopping the base at
    ``tol`` (relative, per column) stops every shift there too. Columns are independent (their own
    scalars). ``select`` must pick entries of an (n, ncols) array (a row/element selection, no mixing).
    Returns (list of selected X_k in the order of ``alphas``, iterations, worst base relative residual).
    """
    B = np.asarray(B)
    dt = np.float32 if B.dtype == np.float32 else np.float64
    B = B.astype(dt, copy=False)
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    a0 = float(alphas.max())
    tau = (a0 / alphas - 1.0)[:, None]                      # (K, 1)
    matvec = shifted_operator(S, a0)
    K = alphas.size
    R = B.copy()
    P = R.copy()
    bnorm = np.linalg.norm(B, axis=0).astype(np.float64)
    bnorm[bnorm == 0] = 1.0
    rho = np.einsum("ij,ij->j", R, R).astype(np.float64)
    ncol = B.shape[1]
    sel_r = select(R)
    Xs = np.zeros((K,) + sel_r.shape, dtype=np.float64)
    Ps = np.repeat(sel_r[None].astype(np.float64), K, axis=0)  # p^tau_0 = r_0
    z_prev = np.ones((K, ncol))
    z_cur = np.ones((K, ncol))
    a_prev = np.ones(ncol)
    b_prev = np.zeros(ncol)
    bshape = (K,) + (1,) * (sel_r.ndim - 1) + (ncol,)
    it = 0
    rel = np.sqrt(rho) / bnorm
    while rel.max(initial=0.0) > tol:
        if it >= maxiter:
            raise NotConverged(f"multi-shift conjugate gradient did not reach tol={tol:g} in {maxiter} iterations "
                               f"(residual {rel.max():.2e})")
        AP = matvec(P)
        pAp = np.einsum("ij,ij->j", P, AP).astype(np.float64)
        a = np.where(pAp > 0, rho / np.where(pAp > 0, pAp, 1.0), 0.0)
        AP *= a.astype(dt)
        R -= AP
        rho_new = np.einsum("ij,ij->j", R, R).astype(np.float64)
        b = np.where(rho > 0, rho_new / np.where(rho > 0, rho, 1.0), 0.0)
        # shifted scalars
        den = a_prev * z_prev * (1.0 + tau * a) + a * b_prev * (z_prev - z_cur)
        num = z_cur * z_prev * a_prev
        z_next = np.where(den != 0, num / np.where(den != 0, den, 1.0), z_cur)
        ratio = np.where(z_cur != 0, z_next / np.where(z_cur != 0, z_cur, 1.0), 0.0)
        a_s = a * ratio                                     # (K, ncol)
        b_s = ratio ** 2 * b
        Xs += a_s.reshape(bshape) * Ps
        Ps *= b_s.reshape(bshape)
        Ps += z_next.reshape(bshape) * select(R)[None]
        P *= b.astype(dt)
        P += R
        z_prev, z_cur = z_cur, z_next
        a_prev, b_prev, rho = a, b, rho_new
        it += 1
        rel = np.sqrt(rho) / bnorm
    # undo the scaling: X_k = (a0 / alpha_k) Y_k
    out = [Xs[k] * (a0 / alphas[k]) for k in range(K)]
    return out, it, float(rel.max(initial=0.0))
