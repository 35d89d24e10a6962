"""The conjugate-gradient loop: one recursion for every symmetric positive (semi-)definite system lgcexp
solves, many right-hand sides at once, each column with its own scalars (Hestenes & Stiefel 1952; Jacobi
preconditioning as in Saad, "Iterative methods for sparse linear systems", §9.2).

The loop (:func:`iterate`) is written once; what differs between the ways it runs are its *passes* over the
n x c blocks, each with its own rounding:

- :class:`ArrayPasses`: numpy/scipy or cupy/cuSPARSE (:func:`lgcexp.devices.array_module`), any operator
  given as a product ``V -> A V``, with an optional Jacobi preconditioner; the column sums in the solve's
  precision (:func:`cg`, the block strategy of :func:`lgcexp.solvers.shifted.shifted_solve`) or in float64
  (multi-shift's base system);
- :class:`FusedPasses`: the numba passes of :mod:`lgcexp.solvers.fused` on ``I - alpha S`` (three passes per
  iteration, the column sums in float64 per fixed row chunk).

:func:`cg` is the entry for a general operator (the graph-Laplacian systems of GFHF, WNLL, the properly
weighted Laplacian, Poisson and GTF); the shifted systems ``(I - alpha S) X = B`` have theirs in
:mod:`lgcexp.solvers.shifted`.
"""
from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from ..devices import array_module, is_device_array


class NotConverged(RuntimeError):
    pass


#: what a solver does when it reaches ``maxiter`` unconverged: "raise" (the command: a run stops with one
#: line) or "warn" (the scikit-learn estimators: a ``ConvergenceWarning`` and the last iterate, as
#: scikit-learn's own iterative estimators do)
_ON_MAXITER: contextvars.ContextVar[str] = contextvars.ContextVar("lgcexp_on_maxiter", default="raise")


@contextmanager
def on_maxiter(mode: str) -> Iterator[None]:
    """Within the block, solvers that reach their iteration cap ``raise`` :class:`NotConverged` or ``warn``
    (scikit-learn's ``ConvergenceWarning``) and return their last iterate."""
    if mode not in ("raise", "warn"):
        raise ValueError(f"on_maxiter={mode!r}: choose raise or warn")
    token = _ON_MAXITER.set(mode)
    try:
        yield
    finally:
        _ON_MAXITER.reset(token)


def not_converged(message: str) -> None:
    """Raise :class:`NotConverged`, or warn with scikit-learn's ``ConvergenceWarning`` under
    ``on_maxiter("warn")`` (the caller then returns its last iterate)."""
    if _ON_MAXITER.get() == "raise":
        raise NotConverged(message)
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    warnings.warn(message, ConvergenceWarning, stacklevel=3)


# ----------------------------------------------------------------------------------------------------------
# Dense helpers generic over the array module
# ----------------------------------------------------------------------------------------------------------

#: CuPy's kernel for a CSR matrix on the GPU times a row-major block (made at the first use)
_ROWMAJOR_PRODUCT = None

_ROWMAJOR_SOURCE = """
const ptrdiff_t row = i / ncols;
const ptrdiff_t col = i - row * ncols;
T acc = 0;
for (I p = indptr[row]; p < indptr[row + 1]; ++p) {
    acc += data[p] * V[(ptrdiff_t)indices[p] * ncols + col];
}
out = acc;
"""


def sparse_product(S, V):
    """``S @ V``. For a CSR matrix on the GPU and a row-major (C-contiguous) block V of S's dtype, lgcexp's
    own kernel: one thread per output entry, the threads of a warp on neighbouring columns of one row, so
    each stored entry of S is read once per warp and the rows of V it selects are read whole (coalesced).
    CuPy's product (cuSPARSE SpMM) takes column-major blocks only: it copies a row-major V at every
    product and then gathers each column's entries one by one. The sum over a row runs in the stored order,
    as scipy's does, with fused multiply-adds (NVRTC's default), so float32 results can differ from
    scipy's in the last bits. Anything else (a vector, a column-major or differently typed V, a host
    matrix) is ``S @ V``."""
    global _ROWMAJOR_PRODUCT
    if not (is_device_array(S) and getattr(S, "format", None) == "csr" and getattr(V, "ndim", 0) == 2
            and V.flags.c_contiguous and V.dtype == S.dtype and S.shape[1] == V.shape[0]):
        return S @ V
    import cupy

    if _ROWMAJOR_PRODUCT is None:
        _ROWMAJOR_PRODUCT = cupy.ElementwiseKernel(
            "raw T data, raw I indices, raw I indptr, raw T V, int64 ncols", "T out", _ROWMAJOR_SOURCE,
            "lgcexp_csr_times_rowmajor")
    out = cupy.empty((S.shape[0], V.shape[1]), dtype=V.dtype)
    _ROWMAJOR_PRODUCT(S.data, S.indices, S.indptr, V.ravel(), V.shape[1], out)
    return out


def column_dots(A, B, xp=None):
    """The dot product of each column of A with the same column of B (a vector of A's columns). numpy:
    ``einsum``. CuPy: ``ones @ (A * B)``, a cuBLAS matrix-vector product, because CuPy's reduction over the rows
    of a row-major block strides through memory (a 70,000 x 1000 float32 block on an H100: 0.46 ms against
    3.0 ms for ``einsum``, benchmarks/gpu.py). With ``CUPY_TF32=1`` cuBLAS may sum float32 in TF32."""
    xp = array_module(A) if xp is None else xp
    if xp is np:
        return np.einsum("ij,ij->j", A, B)
    return xp.ones(A.shape[0], dtype=A.dtype) @ (A * B)


def column_norms(A, xp=None):
    """The Euclidean norm of each column of A (numpy's ``norm(axis=0)``; on a GPU by :func:`column_dots`)."""
    xp = array_module(A) if xp is None else xp
    if xp is np:
        return np.linalg.norm(A, axis=0)
    return xp.sqrt(column_dots(A, A, xp))


def as_columns(B) -> tuple[np.ndarray, type, bool]:
    """(B as an (n, c) array in its solve precision, that dtype, whether B was a vector): a float32 B is
    solved in float32, anything else in float64."""
    xp = array_module(B)
    B = xp.asarray(B)
    dt = np.float32 if B.dtype == np.float32 else np.float64
    B = B.astype(dt, copy=False)
    squeeze = B.ndim == 1
    return (B[:, None] if squeeze else B), dt, squeeze


def top(v) -> float:
    """The largest entry of a vector (0.0 when empty), as a Python float (one transfer from a GPU)."""
    return float(v.max()) if v.size else 0.0


def _ratio(num, den, xp):
    """``num / den`` per column, 0 where ``den`` is not positive (CG's step and direction scalars)."""
    return xp.where(den > 0, num / xp.where(den > 0, den, 1.0), 0.0)


# ----------------------------------------------------------------------------------------------------------
# The passes: what one iteration does to the n x c blocks
# ----------------------------------------------------------------------------------------------------------


class ArrayPasses:
    """CG's passes with numpy or cupy array operations: ``AP = matvec(P)``, ``X += step P``,
    ``R -= step AP``, ``Z = M^-1 R``, ``P = beta P + Z``, each its own pass with in-place updates.

    ``scalars``: the dtype of the column sums and step sizes (None: the solve's, as :func:`cg`;
    ``np.float64``: the sums in the solve's precision then widened, multi-shift's base system). The
    residual reported is ``||R_j|| / ||B_j||`` from R itself (``norms="residual"``), from the column sums
    ``sqrt(R_j . R_j)`` (``norms="sums"``, no preconditioner), or that of the symmetrically preconditioned
    system, ``sqrt(R_j . M^-1 R_j) / sqrt(B_j . M^-1 B_j)`` (``norms="preconditioned"``: with a Jacobi M,
    every row's residual relative to its own diagonal, so rows of very different weights count alike).
    ``with_x=False``: no iterate (multi-shift's base system)."""

    def __init__(self, matvec, B, *, X0=None, precond=None, scalars=None, norms: str = "residual",
                 with_x: bool = True):
        self.matvec = matvec
        self.xp = xp = array_module(B)
        self.dt = B.dtype
        self.B = B
        self.scalars = scalars
        self.norms = norms
        if not with_x:
            self.X = xp.zeros((0, B.shape[1]), dtype=B.dtype)
            self.R = B.copy()
        elif X0 is None:
            self.X = xp.zeros_like(B)
            self.R = B.copy()
        else:
            self.X = xp.array(X0, dtype=self.dt).reshape(B.shape)
            self.R = B - matvec(self.X)
        self.Minv = None if precond is None else xp.asarray(precond, dtype=self.dt)[:, None]
        if norms == "preconditioned":
            bnorm = xp.sqrt(column_dots(B, self._precondition(B), xp))
        else:
            bnorm = column_norms(B, xp)
        if scalars is not None:
            bnorm = bnorm.astype(scalars)
        bnorm[bnorm == 0] = 1.0
        self.bnorm = bnorm
        self.Z = self._precondition(self.R)
        self.P = self.Z.copy()
        self.T = xp.empty_like(B) if with_x else None
        self.AP = None

    def _precondition(self, R):
        return R if self.Minv is None else self.Minv * R

    def _sums(self, A, B):
        s = column_dots(A, B, self.xp)
        return s if self.scalars is None else s.astype(self.scalars)

    def start(self):
        """The column sums ``R . Z`` of the starting residual."""
        return self._sums(self.R, self.Z)

    def worst(self, rz) -> float:
        if self.norms in ("sums", "preconditioned"):
            return top(self.xp.sqrt(rz) / self.bnorm)
        return top(column_norms(self.R, self.xp) / self.bnorm)

    def product(self):
        """``AP = A P``; returns the column sums of ``P * AP``."""
        self.AP = self.matvec(self.P)
        return self._sums(self.P, self.AP)

    def residual(self, step):
        """``X += step P`` and ``R -= step AP``; returns the column sums of ``R * M^-1 R``."""
        xp, step = self.xp, step.astype(self.dt)
        if self.X.shape[0]:
            xp.multiply(self.P, step, out=self.T)
            self.X += self.T
        xp.multiply(self.AP, step, out=self.AP)
        self.R -= self.AP
        self.Z = self._precondition(self.R)
        return self._sums(self.R, self.Z)

    def advance(self, step, beta) -> None:
        """``P = beta P + Z``."""
        self.P *= beta.astype(self.dt)
        self.P += self.Z

    def certified(self, certify) -> float | None:
        """The worst relative residual of the true residual ``B - A X`` when ``certify`` accepts X with the
        recursive residual and then with the true one; None otherwise."""
        if not certify(self.X, self.R):
            return None
        R_true = self.B - self.matvec(self.X)
        if not certify(self.X, R_true):
            return None
        if self.norms == "preconditioned":
            return top(self.xp.sqrt(column_dots(R_true, self._precondition(R_true), self.xp)) / self.bnorm)
        return top(column_norms(R_true, self.xp) / self.bnorm)


class FusedPasses:
    """CG's passes on ``(I - alpha S)`` by the numba kernels of :mod:`lgcexp.solvers.fused`: the product with
    the column sums of ``P * AP``; ``R -= step AP`` with the column sums of ``R * R`` and the certificate's
    screen; ``X += step P`` with ``P = beta P + R``. Each entry is numpy's operations in numpy's order; the
    column sums (float64) are taken per fixed row chunk, then the chunks in order. ``S``: a CPU CSR with
    sorted indices; ``B`` C-ordered (n, c). No preconditioner. ``with_x=False``: no iterate (multi-shift's
    base system; ``step`` is then not applied to X)."""

    def __init__(self, S, alpha: float, B, *, with_x: bool = True, screen_weight=None):
        from . import fused

        self.fused = fused
        dt = B.dtype
        self.B = B
        self.dt = dt
        self.data = S.data if S.data.dtype == dt else S.data.astype(dt)
        self.indptr, self.indices = S.indptr, S.indices
        self.bounds = fused.row_chunks_of(S)
        nch, c = self.bounds.size - 1, B.shape[1]
        self.dots = np.zeros((nch, c))
        self.rmax = np.zeros(nch)
        self.neg_alpha = np.array([-alpha], dtype=dt)
        self.weight = (np.zeros(0) if screen_weight is None
                       else np.ascontiguousarray(screen_weight, dtype=np.float64))
        self.X = np.zeros_like(B) if with_x else np.zeros((0, c), dtype=dt)
        self.R = B.copy()
        self.P = self.R.copy()
        self.AP = np.empty_like(B)
        bnorm = np.linalg.norm(B, axis=0)
        bnorm[bnorm == 0] = 1.0
        self.bnorm = bnorm
        self.product_kernel = fused.product_for(c, dt)

    def start(self):
        return np.einsum("ij,ij->j", self.R, self.R).astype(np.float64)

    def worst(self, rz) -> float:
        return top(np.sqrt(rz) / self.bnorm)

    def product(self):
        self.product_kernel(self.indptr, self.indices, self.data, self.P, self.neg_alpha, self.AP, self.bounds,
                            self.dots)
        return self.dots.sum(axis=0)

    def residual(self, step):
        self.fused.residual_update(self.R, self.AP, step.astype(self.dt), self.bounds, self.dots, self.weight,
                                   self.rmax)
        return self.dots.sum(axis=0)

    def advance(self, step, beta) -> None:
        # X with the old P, then the new P (one pass)
        self.fused.step_update(self.X, self.P, self.R, step.astype(self.dt), beta.astype(self.dt), self.bounds)

    def certified(self, certify) -> float | None:
        if not certify(self.X, self.R, float(self.rmax.max()) if self.weight.size else None):
            return None
        self.product_kernel(self.indptr, self.indices, self.data, self.X, self.neg_alpha, self.AP, self.bounds,
                            self.dots)
        R_true = self.B - self.AP
        if not certify(self.X, R_true):
            return None
        return top(np.linalg.norm(R_true, axis=0) / self.bnorm)

    def section(self):
        """numba's threads for the loop (:func:`lgcexp.solvers.fused.parallel_section`)."""
        return self.fused.parallel_section()


# ----------------------------------------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------------------------------------


def iterate(passes, *, tol: float, maxiter: int, what: str = "conjugate gradient", certify=None,
            certify_below: float = 1e-3,
            on_step: Callable[[np.ndarray, np.ndarray], None] | None = None) -> tuple[int, float]:
    """The conjugate-gradient recursion on the blocks ``passes`` holds (X, R, P updated in place): per
    iteration ``step = (R.Z) / (P.AP)``, ``X += step P``, ``R -= step AP``, ``beta = (R.Z)_new / (R.Z)``,
    ``P = beta P + Z`` (``Z = M^-1 R``, R without a preconditioner), per column.

    Stops when every column's relative residual is at most ``tol``, or earlier when ``certify(X, R)`` says X
    is good enough for its use (:class:`lgcexp.solvers.shifted.ArgmaxCertificate`): asked once the worst
    relative residual is at most ``certify_below``, first with the recursive residual and, when that passes,
    with the true residual ``B - A X`` (one more product), which decides. ``on_step(step, beta)`` hears the
    scalars of every iteration before P moves on (multi-shift's shifted systems). After ``maxiter``
    iterations: :func:`not_converged` (``what`` names the method). Returns (iterations, worst relative
    residual)."""
    xp = array_module(passes.R)
    rz = passes.start()
    it = 0
    worst = passes.worst(rz)
    while worst > tol:
        if it >= maxiter:
            not_converged(f"{what} did not reach tol={tol:g} in {maxiter} iterations (residual {worst:.2e})")
            break
        pAp = passes.product()
        step = _ratio(rz, pAp, xp)
        rz_new = passes.residual(step)
        beta = _ratio(rz_new, rz, xp)
        rz = rz_new
        if on_step is not None:
            on_step(step, beta)
        passes.advance(step, beta)
        it += 1
        worst = passes.worst(rz)
        if certify is not None and tol < worst <= certify_below:
            true_worst = passes.certified(certify)
            if true_worst is not None:
                worst = true_worst
                break
    return it, worst


def cg(
    matvec: Callable[[np.ndarray], np.ndarray],
    B: np.ndarray,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    precond: np.ndarray | None = None,
    X0: np.ndarray | None = None,
    residual: str = "plain",
    certify: Callable[[np.ndarray, np.ndarray], bool] | None = None,
    certify_below: float = 1e-3,
) -> tuple[np.ndarray, int, float]:
    """Solve ``A X = B`` for a symmetric positive (semi-)definite ``A`` given as ``matvec: V -> A V``, all
    columns at once (:func:`iterate` on :class:`ArrayPasses`): one product with A per iteration for all
    columns, each column its own (Jacobi-preconditioned with ``precond``, the diagonal of ``M^-1``)
    recursion. A float32 ``B`` is solved in float32, anything else in float64; numpy or cupy arrays (with a
    ``matvec`` of the same module), the work staying on B's device. Stops when every column's
    ``||r_j|| <= tol ||b_j||`` (``residual="plain"``), or, with ``residual="preconditioned"``, when the
    residual of the preconditioned system is, ``||M^-1/2 r_j|| <= tol ||M^-1/2 b_j||`` (with Jacobi's M,
    the residual of the system scaled to a unit diagonal: the criterion for operators whose rows differ in
    weight by orders of magnitude, where the heaviest rows dominate ``||r||``); or earlier by ``certify``
    (:func:`iterate`). Returns (X, iterations, worst
    relative residual). Raises ``NotConverged`` after ``maxiter`` iterations (under :func:`on_maxiter`
    ``"warn"``: warns and returns the last iterate)."""
    B, _, squeeze = as_columns(B)
    if residual not in ("plain", "preconditioned"):
        raise ValueError(f"residual={residual!r}: choose plain or preconditioned")
    if residual == "preconditioned" and precond is None:
        raise ValueError("residual='preconditioned' needs precond")
    passes = ArrayPasses(matvec, B, X0=X0, precond=precond,
                         norms="preconditioned" if residual == "preconditioned" else "residual")
    it, worst = iterate(passes, tol=tol, maxiter=maxiter, certify=certify, certify_below=certify_below)
    X = passes.X
    return (X[:, 0] if squeeze else X), it, worst


# ----------------------------------------------------------------------------------------------------------
# The one gate of lgcexp's numba passes
# ----------------------------------------------------------------------------------------------------------


def numba_passes(entries: int, minimum: int):
    """The module of lgcexp's numba passes (:mod:`lgcexp.solvers.fused`) for a problem of ``entries`` entries,
    or None: fewer than ``minimum`` (small problems keep numpy and skip numba's import), ``LGCEXP_FUSED``
    switched off, or numba not importable. The one gate of every numba path (the fused CG, multi-shift CG's
    shifted updates, SIIS's edge pass), each with its own ``minimum``."""
    from ..locations import env_switch

    if entries < minimum or not env_switch("LGCEXP_FUSED"):
        return None
    try:
        from . import fused
    except ImportError:
        return None
    return fused
