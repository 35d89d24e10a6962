"""Sparse linear algebra shared by the algorithms: conjugate gradient for many right-hand sides, the
reverse Cuthill-McKee renumbering every sparse solve runs in, and a stopping rule that certifies the row
argmax of an LGC solution.

The solvers are generic over the array module of their right-hand sides (:func:`lgcexp.devices.array_module`):
numpy arrays with a scipy.sparse matrix on the CPU, cupy arrays with a cupyx.scipy.sparse matrix on the GPU
(cuSPARSE), the same code for both."""
from __future__ import annotations

import contextvars
import copy
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from .devices import array_module, is_device_array, sparse_module, to_host


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


def shifted_operator(S, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``V -> (I - alpha S) V`` with one temporary (the LGC system matrix, paper Eq. for P)."""

    def apply(V: np.ndarray) -> np.ndarray:
        out = sparse_product(S, V)
        out *= -alpha
        out += V
        return out

    return apply


def as_columns(B: np.ndarray) -> tuple[np.ndarray, type, bool]:
    """(B as an (n, c) array in its solve precision, that dtype, whether B was a vector): a float32 B is
    solved in float32, anything else in float64."""
    xp = array_module(B)
    B = xp.asarray(B)
    dt = np.float32 if B.dtype == np.float32 else np.float64
    B = B.astype(dt, copy=False)
    squeeze = B.ndim == 1
    return (B[:, None] if squeeze else B), dt, squeeze


def _top(v) -> float:
    """The largest entry of a vector (0.0 when empty), as a Python float (one transfer from a GPU)."""
    return float(v.max()) if v.size else 0.0


def block_cg(
    matvec: Callable[[np.ndarray], np.ndarray],
    B: np.ndarray,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    precond: np.ndarray | None = None,
    X0: np.ndarray | None = None,
    certify: Callable[[np.ndarray, np.ndarray], bool] | None = None,
    certify_below: float = 1e-3,
) -> tuple[np.ndarray, int, float]:
    """Solve ``A X = B`` for a symmetric positive (semi-)definite ``A``, all columns at once.

    Each column runs its own (Jacobi-preconditioned) conjugate gradient recursion, but the products with A
    are done for all columns together (one sparse-times-dense product per iteration), and the updates are
    in place. A float32 ``B`` is solved in float32, anything else in float64. numpy or cupy arrays (with
    a ``matvec`` of the same module): the work stays on B's device. Stops when every column's
    residual satisfies ``||r_j|| <= tol * ||b_j||``, or earlier when ``certify(X, R)`` says the current X
    is good enough for its use (e.g. :class:`ArgmaxCertificate`): it is asked once the worst relative
    residual is below ``certify_below``, first with the recursively updated residual and, when that
    passes, with the true residual ``B - A X`` (one more product), which decides. Returns (X, iterations,
    worst relative residual). Raises ``NotConverged`` after ``maxiter`` iterations (under
    :func:`on_maxiter` ``"warn"``: warns and returns the last iterate).
    """
    B, dt, squeeze = as_columns(B)
    xp = array_module(B)
    if X0 is None:
        X = xp.zeros_like(B)
        R = B.copy()
    else:
        X = xp.array(X0, dtype=dt).reshape(B.shape)
        R = B - matvec(X)
    bnorm = column_norms(B, xp)
    bnorm[bnorm == 0] = 1.0
    Minv = None if precond is None else xp.asarray(precond, dtype=dt)[:, None]
    Z = R if Minv is None else Minv * R
    P = Z.copy()
    T = xp.empty_like(B)
    rz = column_dots(R, Z, xp)
    it = 0
    rel = column_norms(R, xp) / bnorm
    worst = _top(rel)
    while worst > tol:
        if it >= maxiter:
            not_converged(f"conjugate gradient did not reach tol={tol:g} in {maxiter} iterations "
                          f"(residual {worst:.2e})")
            break
        AP = matvec(P)
        pAp = column_dots(P, AP, xp)
        step = xp.where(pAp > 0, rz / xp.where(pAp > 0, pAp, 1.0), 0.0).astype(dt)
        xp.multiply(P, step, out=T)
        X += T
        xp.multiply(AP, step, out=AP)
        R -= AP
        Z = R if Minv is None else Minv * R
        rz_new = column_dots(R, Z, xp)
        beta = xp.where(rz > 0, rz_new / xp.where(rz > 0, rz, 1.0), 0.0).astype(dt)
        rz = rz_new
        P *= beta
        P += Z
        it += 1
        rel = column_norms(R, xp) / bnorm
        worst = _top(rel)
        if certify is not None and tol < worst <= certify_below and certify(X, R):
            R_true = B - matvec(X)
            if certify(X, R_true):
                worst = _top(column_norms(R_true, xp) / bnorm)
                break
    return (X[:, 0] if squeeze else X), it, worst


def multishift_cg(
    S,
    B: np.ndarray,
    alphas,
    select: Callable[[np.ndarray], np.ndarray],
    *,
    tol: float = 1e-6,
    maxiter: int = 10_000,
    fused: bool = False,
    rows: np.ndarray | None = None,
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
    Generic over B's array module (numpy or cupy with S of the same device; the results stay there).
    ``fused``: the base recursion on the fused kernels of :mod:`lgcexp.kernels` (a CPU CSR S with sorted
    indices, as :func:`rcm_reordered` gives; three passes per iteration, the column sums in float64 per row
    chunk), the same recursion with another rounding.
    ``rows``: the row indices ``select`` picks, when it is that row selection (``M[rows]``); then, on the
    CPU from :data:`SHIFTED_KERNEL_MIN_ENTRIES` shifted entries on, the shifted updates run in one numba pass
    (:func:`lgcexp.kernels.shifted_updates`, the same bits as numpy's five).
    Returns (list of selected X_k in the order of ``alphas``, iterations, worst base relative residual).
    """
    B, dt, _ = as_columns(B)
    xp = array_module(B)
    if fused:
        B = np.ascontiguousarray(B)   # the fused kernels index rows of C-ordered blocks
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    a0 = float(alphas.max())
    tau = xp.asarray((a0 / alphas - 1.0)[:, None])          # (K, 1)
    K = alphas.size
    R = B.copy()
    P = R.copy()
    bnorm = column_norms(B, xp).astype(np.float64)
    bnorm[bnorm == 0] = 1.0
    rho = column_dots(R, R, xp).astype(np.float64)
    ncol = B.shape[1]
    sel_r = select(R)
    Xs = xp.zeros((K,) + sel_r.shape, dtype=np.float64)
    Ps = xp.repeat(sel_r[None].astype(np.float64), K, axis=0)  # p^tau_0 = r_0
    bshape = (K,) + (1,) * (sel_r.ndim - 1) + (ncol,)
    shifts = {"z_prev": xp.ones((K, ncol)), "z_cur": xp.ones((K, ncol)), "a_prev": xp.ones(ncol),
              "b_prev": xp.zeros(ncol)}

    kernel = _shifted_kernel(Xs.size) if rows is not None and xp is np else None
    rows_i = None if kernel is None else np.ascontiguousarray(rows, dtype=np.int64)

    def shifted_update(a, b, R_sel) -> None:
        """The shifted systems' step from the base step sizes a, b and the new base residual's entries
        (``R_sel``: ``select(R)``, or R itself for the numba pass, which reads the rows in place)."""
        z_prev, z_cur, a_prev, b_prev = shifts["z_prev"], shifts["z_cur"], shifts["a_prev"], shifts["b_prev"]
        den = a_prev * z_prev * (1.0 + tau * a) + a * b_prev * (z_prev - z_cur)
        num = z_cur * z_prev * a_prev
        z_next = xp.where(den != 0, num / xp.where(den != 0, den, 1.0), z_cur)
        ratio = xp.where(z_cur != 0, z_next / xp.where(z_cur != 0, z_cur, 1.0), 0.0)
        a_s = a * ratio                                     # (K, ncol)
        b_s = ratio ** 2 * b
        if kernel is not None:
            kernel(Xs, Ps, R_sel, rows_i, a_s, b_s, z_next)
        else:
            Xs[...] += a_s.reshape(bshape) * Ps
            Ps[...] *= b_s.reshape(bshape)
            Ps[...] += z_next.reshape(bshape) * R_sel[None]
        shifts.update(z_prev=z_cur, z_cur=z_next, a_prev=a, b_prev=b)

    pick = (lambda M: M) if kernel is not None else select
    if fused:
        it, worst = _fused_iterations(S, a0, B, np.zeros((0, ncol), dtype=dt), R, P, rho, tol=tol, maxiter=maxiter,
                                      on_step=lambda a, b: shifted_update(a, b, pick(R)),
                                      what="multi-shift conjugate gradient")
    else:
        matvec = shifted_operator(S, a0)
        it = 0
        worst = _top(xp.sqrt(rho) / bnorm)
        while worst > tol:
            if it >= maxiter:
                not_converged(f"multi-shift conjugate gradient did not reach tol={tol:g} in {maxiter} iterations "
                              f"(residual {worst:.2e})")
                break
            AP = matvec(P)
            pAp = column_dots(P, AP, xp).astype(np.float64)
            a = xp.where(pAp > 0, rho / xp.where(pAp > 0, pAp, 1.0), 0.0)
            AP *= a.astype(dt)
            R -= AP
            rho_new = column_dots(R, R, xp).astype(np.float64)
            b = xp.where(rho > 0, rho_new / xp.where(rho > 0, rho, 1.0), 0.0)
            shifted_update(a, b, pick(R))
            P *= b.astype(dt)
            P += R
            rho = rho_new
            it += 1
            worst = _top(xp.sqrt(rho) / bnorm)
    # undo the scaling: X_k = (a0 / alpha_k) Y_k
    out = [Xs[k] * float(a0 / alphas[k]) for k in range(K)]
    return out, it, worst


#: multi-shift CG's shifted updates take the numba pass (:func:`lgcexp.kernels.shifted_updates`) from this many
#: shifted entries (shifts x selected rows x columns) on: ISOLET's P_LL blocks (6 x 1040 x 32) are above
SHIFTED_KERNEL_MIN_ENTRIES = 100_000


def _shifted_kernel(entries: int):
    """:func:`lgcexp.kernels.shifted_updates` for ``entries`` shifted entries, or None (numpy's updates;
    :func:`numba_kernels` from :data:`SHIFTED_KERNEL_MIN_ENTRIES`)."""
    kernels = numba_kernels(entries, SHIFTED_KERNEL_MIN_ENTRIES)
    return None if kernels is None else kernels.shifted_updates


# ----------------------------------------------------------------------------------------------------------
# Reverse Cuthill-McKee renumbering, once per matrix
# ----------------------------------------------------------------------------------------------------------

#: id(S) -> (weak reference to S, {"perm": ..., dtype: renumbered S}); an entry goes when S is collected
_ORDERINGS: dict[int, tuple[weakref.ref, dict]] = {}


def _ordering_entry(S) -> dict:
    key = id(S)
    hit = _ORDERINGS.get(key)
    if hit is not None and hit[0]() is S:
        return hit[1]
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    entry = {"perm": reverse_cuthill_mckee(sp.csr_matrix(S), symmetric_mode=True)}
    _ORDERINGS[key] = (weakref.ref(S, lambda _, k=key: _ORDERINGS.pop(k, None)), entry)
    return entry


def rcm_reordered(S, dtype=np.float64, xp=np):
    """``(S[perm][:, perm] as CSR in dtype with sorted indices, perm)``, perm the reverse Cuthill-McKee order
    of the symmetric sparse ``S``. Neighbours get nearby numbers, so ``S @ X`` reads X's rows from cache:
    on the MNIST 15-NN graph one product with 10 columns takes a third of the time. The permutation (it
    depends on the sparsity pattern only) and each dtype's renumbered copy are computed once per matrix
    object and kept while it lives (a run's graph is reused by its P_LL and LGC solves). ``xp=cupy``: the
    renumbered matrix as a cupyx.scipy.sparse CSR on the GPU (copied there once, kept likewise); the
    permutation stays a numpy array.
    """
    import scipy.sparse as sp

    entry = _ordering_entry(S)
    dt = np.dtype(dtype)
    if dt not in entry:
        perm = entry["perm"]
        Sd = sp.csr_matrix(S, dtype=dt)
        Sd = Sd[perm][:, perm].tocsr()
        Sd.sort_indices()
        entry[dt] = Sd
    if xp is np:
        return entry[dt], entry["perm"]
    key = (dt, xp.__name__)
    if key not in entry:
        entry[key] = sparse_module(xp).csr_matrix(entry[dt])
    return entry[key], entry["perm"]


# ----------------------------------------------------------------------------------------------------------
# LGC solves: (I - alpha S) X = B in RCM order, stopped when the argmax of every row is certain
# ----------------------------------------------------------------------------------------------------------


class ArgmaxCertificate:
    """Is the row argmax of an approximate solution X of ``(I - alpha S) X = B`` that of the exact one?

    ``S = D^-1/2 W D^-1/2`` with ``W >= 0`` symmetric and ``degree`` its row sums. Then
    ``(I - alpha S)^-1 = D^1/2 (I - alpha P)^-1 D^-1/2`` with ``P = D^-1 W`` row-stochastic, and
    ``||(I - alpha P)^-1||_inf <= sum_k alpha^k = 1 / (1 - alpha)``. The error ``E = X* - X`` solves
    ``(I - alpha S) E = R`` (R = B - (I - alpha S) X), so entrywise

        |E_ic| <= sqrt(d_i) / (1 - alpha) * max_j |R_jc| / sqrt(d_j)          (points of degree > 0)
        |E_ic| = |R_ic|                                                       (degree 0: S's row is 0)

    Row i's argmax cannot change when its gap between the top two scores exceeds twice the largest
    ``|E_ic|`` bound of the row (the top score can fall and another rise by at most their bounds). The
    certificate holds when that is true of every row. The residual it is given is computed in floating
    point: each entry is enlarged by ``(k + 3) eps (max|B| + (1 + alpha max_i sum_j S_ij) max|X|)``, k the
    most stored entries in a row of S, a bound on the rounding error of ``B - (I - alpha S) X``. A row whose
    exact scores tie can never be certified; the solver then stops at its ``tol`` as before.

    The host arrays (degree, S, B) are read here; with ``xp=cupy`` the per-row constants are kept on the GPU
    and the solver's X and R (cupy arrays) are checked there.
    """

    def __init__(self, degree: np.ndarray, alpha: float, S, B: np.ndarray, xp=np, fused: bool = False):
        self.xp = xp
        #: the full test by the numba kernel :func:`lgcexp.kernels.argmax_certified` (same operations, one
        #: pass over the rows instead of numpy's partition and temporaries; the fused solves)
        self.fused = bool(fused) and xp is np
        d = np.asarray(degree, dtype=np.float64)
        pos = d > 0
        sqrt_d = np.sqrt(np.where(pos, d, 0.0))
        self.pos = xp.asarray(pos)
        self.sqrt_d = xp.asarray(sqrt_d)
        self.inv_sqrt_d = xp.asarray(np.where(pos, 1.0 / np.where(pos, sqrt_d, 1.0), 0.0))
        self.alpha = float(alpha)
        self.row_nnz = int(np.diff(S.indptr).max(initial=0)) if hasattr(S, "indptr") else S.shape[1]
        self.eps = float(np.finfo(B.dtype).eps) * (self.row_nnz + 3)
        self.S_rowsum = float(np.abs(S @ np.ones(S.shape[1])).max(initial=0.0))
        self.B_inf = float(np.abs(B).max(initial=0.0))
        self._gap_scale: float | None = None
        # the screen's bound holds for points of positive degree only: used when every point has one
        self._screen = bool(pos.all())
        self._gap_den = xp.asarray(np.where(pos, sqrt_d, 1.0))

    def _scaled(self, R, slack: float):
        Ra = self.xp.abs(R).max(axis=1) + slack                         # max over columns, per row
        return Ra, _top(Ra * self.inv_sqrt_d)

    def bound(self, X, R):
        """Per-row bound on ``max_c |E_ic|`` (n,)."""
        X_inf = _top(self.xp.abs(X).ravel())
        Ra, scaled = self._scaled(R, self.eps * (self.B_inf + (1.0 + self.alpha * self.S_rowsum) * X_inf))
        return self.xp.where(self.pos, self.sqrt_d * (scaled / (1.0 - self.alpha)), Ra)

    def shifted_by(self, offset) -> ArgmaxCertificate:
        """This certificate asked about ``offset + X`` for a correction X (the float32 inner solves of
        :func:`mixed_shifted_cg`, whose residual is that of ``offset + X``); a copy with its own screen, a
        stricter one (the full test's factor 2: the inner test only proposes, so it need not be early)."""
        other = copy.copy(self)
        other._offset = offset
        other._screen_factor = 2.0
        return other

    #: the screen rejects when ``factor * max_i max_c |R_ic| / sqrt(d_i) / (1 - alpha)`` reaches the smallest
    #: gap / sqrt(d) of the last full test (the full test needs factor 2; 1 leaves room for growing gaps)
    _screen_factor = 1.0

    #: the float64 iterate the checked X corrects (:meth:`shifted_by`), None: X itself
    _offset = None

    @property
    def screen_weight(self):
        """The per-row weights of the screen (``1 / sqrt(d_i)``), None when the screen is not used."""
        return self.inv_sqrt_d if self._screen else None

    def __call__(self, X: np.ndarray, R: np.ndarray, screen: float | None = None) -> bool:
        """``screen``: ``max_i max_c |R_ic| / sqrt(d_i)`` when the caller has it already (the fused CG pass
        computes it while updating R), else computed here."""
        if X.shape[1] < 2:
            return True
        # a cheap screen first (one pass over R): the bound's factor against twice the smallest gap / sqrt(d)
        # of the last full check (gaps settle long before the residual does); only the full check decides
        if self._screen and self._gap_scale is not None:
            scaled = self._scaled(R, 0.0)[1] if screen is None else screen
            if self._screen_factor * scaled / (1.0 - self.alpha) >= self._gap_scale:
                return False
        xp = self.xp
        if self.fused:
            return self._fused_check(X, R)
        if self._offset is not None:
            X = self._offset + X
        top2 = -xp.partition(-X, 1, axis=1)[:, :2]
        gap = top2[:, 0] - top2[:, 1]
        ratio = gap / self._gap_den
        self._gap_scale = float(ratio.min()) if ratio.size else np.inf
        return bool(xp.all(gap > 2.0 * self.bound(X, R)))

    def _fused_check(self, X, R) -> bool:
        from .kernels import argmax_certified, residual_scale

        off = np.zeros((0, 0), dtype=X.dtype) if self._offset is None else self._offset
        x_inf, Ra = residual_scale(X, off, R, self.inv_sqrt_d)
        slack = self.eps * (self.B_inf + (1.0 + self.alpha * self.S_rowsum) * x_inf)
        ok, gmin = argmax_certified(X, off, Ra, slack, self.sqrt_d, self.inv_sqrt_d, self.pos, self._gap_den,
                                    1.0 - self.alpha)
        self._gap_scale = float(gmin) if X.shape[0] else np.inf
        return bool(ok)


#: the fused multi-threaded CG (:mod:`lgcexp.kernels`, numba) serves CPU solves with at least this many
#: right-hand-side entries (n x columns); smaller ones keep numpy/scipy (and do not import numba)
FUSED_MIN_ENTRIES = 500_000


def numba_kernels(entries: int, minimum: int):
    """The module of lgcexp's numba kernels (:mod:`lgcexp.kernels`) for a problem of ``entries`` entries, or
    None: fewer than ``minimum`` (small problems keep numpy and skip numba's import), ``LGCEXP_FUSED``
    switched off, or numba not importable. The one gate of every numba path (the fused CG, multi-shift CG's
    shifted updates, SIIS's edge pass), each with its own ``minimum``."""
    from .locations import env_switch

    if entries < minimum or not env_switch("LGCEXP_FUSED"):
        return None
    try:
        from . import kernels
    except ImportError:
        return None
    return kernels


def fused_available(entries: int) -> bool:
    """Whether a CPU solve of ``entries`` right-hand-side entries takes the fused path (:func:`numba_kernels`
    from :data:`FUSED_MIN_ENTRIES`)."""
    return numba_kernels(entries, FUSED_MIN_ENTRIES) is not None


#: id(S) -> (weak reference to S, its row chunks for the fused kernels)
_CHUNKS: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def _row_chunks(S) -> np.ndarray:
    from .kernels import row_chunks

    hit = _CHUNKS.get(id(S))
    if hit is not None and hit[0]() is S:
        return hit[1]
    b = row_chunks(S.indptr)
    key = id(S)
    _CHUNKS[key] = (weakref.ref(S, lambda _, k=key: _CHUNKS.pop(k, None)), b)
    return b


def _product(c: int, dt):
    """The fused product kernel for c columns in dtype dt: :func:`lgcexp.kernels.specialised_product` (float32
    with fused multiply-adds, float64 scipy's bit for bit) when c is small enough, else the generic one."""
    from . import kernels

    return kernels.specialised_product(c, contract=np.dtype(dt) == np.float32) or kernels.shifted_product_dot


def fused_shifted_cg(
    S,
    alpha: float,
    B: np.ndarray,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    certify: ArgmaxCertificate | None = None,
    certify_below: float = 1e-3,
) -> tuple[np.ndarray, int, float]:
    """:func:`block_cg` on ``(I - alpha S) X = B`` (no preconditioner) with the fused, multi-threaded
    kernels of :mod:`lgcexp.kernels`: three passes over the n x c blocks per iteration instead of about a
    dozen, S read once by all threads. The same recursion and stopping rules; the column sums are taken in
    another order (float64 per fixed row chunk), so the iterates agree with :func:`block_cg`'s to round-off
    (the relative residual is ``sqrt(sum R^2) / ||b||``). ``S``: CSR with sorted indices (e.g.
    :func:`rcm_reordered`'s), ``B`` an (n, c) float64 or float32 array. The certificate's screen comes
    from the update pass (no pass of its own). Returns (X, iterations, worst relative residual).
    """
    B, dt, squeeze = as_columns(B)
    B = np.ascontiguousarray(B)
    X = np.zeros_like(B)
    R = B.copy()
    P = R.copy()
    rz = np.einsum("ij,ij->j", R, R).astype(np.float64)
    it, worst = _fused_iterations(S, alpha, B, X, R, P, rz, tol=tol, maxiter=maxiter, certify=certify,
                                  certify_below=certify_below)
    return (X[:, 0] if squeeze else X), it, worst


def _fused_iterations(S, alpha: float, B: np.ndarray, X: np.ndarray, R: np.ndarray, P: np.ndarray, rz: np.ndarray, *,
                      tol: float, maxiter: int, certify: ArgmaxCertificate | None = None, certify_below: float = 1e-3,
                      on_step: Callable[[np.ndarray, np.ndarray], None] | None = None,
                      what: str = "conjugate gradient") -> tuple[int, float]:
    """The CG recursion on ``(I - alpha S)`` with the fused kernels, X, R and P updated in place from their
    starting values (``rz``: R's column sums of squares): per iteration the product with its dot products,
    ``R -= step AP`` with R's norms (and the certificate's screen), then ``X += step P`` and ``P = beta P + R``.
    ``X`` with no rows: no iterate (multi-shift CG's base system, whose ``on_step(step, beta)`` hears the
    float64 step sizes of every iteration before P moves on). Stops as :func:`fused_shifted_cg` says;
    ``what`` names the method in the message at ``maxiter``. Returns (iterations, worst relative residual)."""
    from .kernels import parallel_section, residual_update, step_update

    dt = B.dtype
    data = S.data if S.data.dtype == dt else S.data.astype(dt)
    indptr, indices = S.indptr, S.indices
    bounds = _row_chunks(S)
    nch, c = bounds.size - 1, B.shape[1]
    dots = np.zeros((nch, c))
    rmax = np.zeros(nch)
    neg_alpha = np.array([-alpha], dtype=dt)
    weight = certify.screen_weight if certify is not None else None
    weight = np.zeros(0) if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
    AP = np.empty_like(B)
    bnorm = np.linalg.norm(B, axis=0)
    bnorm[bnorm == 0] = 1.0
    product = _product(c, dt)
    it = 0
    worst = _top(np.sqrt(rz) / bnorm)
    with parallel_section():
        while worst > tol:
            if it >= maxiter:
                not_converged(f"{what} did not reach tol={tol:g} in {maxiter} iterations (residual {worst:.2e})")
                break
            product(indptr, indices, data, P, neg_alpha, AP, bounds, dots)
            pAp = dots.sum(axis=0)
            step = np.where(pAp > 0, rz / np.where(pAp > 0, pAp, 1.0), 0.0)
            residual_update(R, AP, step.astype(dt), bounds, dots, weight, rmax)
            rz_new = dots.sum(axis=0)
            beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
            rz = rz_new
            if on_step is not None:
                on_step(step, beta)
            step_update(X, P, R, step.astype(dt), beta.astype(dt), bounds)   # X with the old P, then the new P
            it += 1
            worst = _top(np.sqrt(rz) / bnorm)
            if (certify is not None and tol < worst <= certify_below
                    and certify(X, R, float(rmax.max()) if weight.size else None)):
                product(indptr, indices, data, X, neg_alpha, AP, bounds, dots)
                R_true = B - AP
                if certify(X, R_true):
                    worst = _top(np.linalg.norm(R_true, axis=0) / bnorm)
                    break
    return it, worst


#: relative residual each float32 inner solve of :func:`mixed_shifted_cg` aims at when its certificate does
#: not stop it first (float32 CG on I - alpha S, condition number <= (1 + alpha) / (1 - alpha), gets there)
MIXED_INNER_TOL = 1e-5
#: most float32 inner solves (outer steps) of :func:`mixed_shifted_cg`
MIXED_MAX_OUTER = 20


def mixed_enabled() -> bool:
    """Whether certified fused solves run their iterations in float32 (:func:`mixed_shifted_cg`): only where
    ``LGCEXP_FUSED_FLOAT32`` is switched on (:func:`lgcexp.locations.env_switch`). Off by default: on the idle
    2-core machine the warm certified MNIST solve took 0.221 s mixed against 0.214 s in float64 (one more
    iteration and the float64 refinement eat the cheaper float32 iterations), and the float64 path leaves F
    as it was."""
    from .locations import env_switch

    return env_switch("LGCEXP_FUSED_FLOAT32", default=False)


def mixed_shifted_cg(
    S,
    S32,
    alpha: float,
    B: np.ndarray,
    certify: ArgmaxCertificate,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
) -> tuple[np.ndarray, int, float]:
    """``(I - alpha S) X = B`` by mixed-precision iterative refinement (Wilkinson; Moler 1967; Carson & Higham
    2018): the iterations run in float32 (:func:`fused_shifted_cg` on ``S32``, S's values rounded to float32:
    half the bytes of S and of every gathered row), the residual ``R = B - (I - alpha S) X`` and X in
    float64. Each outer step solves ``(I - alpha S) D = R`` in float32, stopped when the argmax certificate,
    asked about ``X + D`` with the float32 residuals (a guess: float32 round-off is not in its bound), holds
    (or at :data:`MIXED_INNER_TOL`), then ``X += D`` and the float64 residual is recomputed. It stops when
    the certificate holds for the float64 X and residual, the same test with the same float64 rounding bound
    as the float64 solve (so the returned argmax is the exact solution's likewise), or at the relative
    residual ``tol``. The values of X differ from the float64 solve's within the certified error bound.
    ``S``, ``S32``: CSR with sorted indices (the same pattern), ``B`` float64 (n, c). Returns (X, float32
    iterations, worst relative residual of the float64 residual)."""
    from .kernels import parallel_section

    B, _, squeeze = as_columns(np.asarray(B, dtype=np.float64))
    B = np.ascontiguousarray(B)
    bounds = _row_chunks(S)
    dots = np.zeros((bounds.size - 1, B.shape[1]))
    neg_alpha = np.array([-alpha])
    bnorm = np.linalg.norm(B, axis=0)
    bnorm[bnorm == 0] = 1.0
    X = np.zeros_like(B)
    R = B.copy()
    AX = np.empty_like(B)
    product = _product(B.shape[1], np.float64)
    its = 0
    worst = _top(np.linalg.norm(R, axis=0) / bnorm)
    for _ in range(MIXED_MAX_OUTER):
        if worst <= tol or its >= maxiter:
            break
        inner = certify.shifted_by(X)
        D, it, _ = fused_shifted_cg(S32, alpha, R.astype(np.float32), tol=max(MIXED_INNER_TOL, tol),
                                    maxiter=maxiter - its, certify=inner)
        its += it
        X += D
        with parallel_section():
            product(S.indptr, S.indices, S.data, X, neg_alpha, AX, bounds, dots)
        np.subtract(B, AX, out=R)
        worst = _top(np.linalg.norm(R, axis=0) / bnorm)
        if worst > tol and certify(X, R):
            break
    else:
        if worst > tol:
            not_converged(f"mixed-precision refinement did not reach tol={tol:g} or the argmax certificate in "
                          f"{MIXED_MAX_OUTER} outer steps (residual {worst:.2e})")
    if worst > tol and its >= maxiter:
        not_converged(f"conjugate gradient did not reach tol={tol:g} in {maxiter} iterations (residual {worst:.2e})")
    return (X[:, 0] if squeeze else X), its, worst


def shifted_solve(
    S,
    B: np.ndarray,
    alpha: float,
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    reorder: bool = True,
    degree: np.ndarray | None = None,
    xp=None,
) -> tuple[np.ndarray, int, float]:
    """``(I - alpha S)^-1 B`` by conjugate gradient (:func:`block_cg`), in reverse Cuthill-McKee order
    (:func:`rcm_reordered`) when ``reorder`` and S is sparse, in B's precision (float32 or float64).

    With ``degree`` (the row sums of the W of ``S = D^-1/2 W D^-1/2``) it stops as soon as the row argmax
    of X is certainly the exact solution's (:class:`ArgmaxCertificate`), otherwise (or when a row never
    certifies) at the relative residual ``tol`` per column. The renumbering only changes the order of the
    sums inside each product. ``xp``: the array module to solve in (numpy, or cupy for the GPU); None lets
    :func:`lgcexp.devices.solve_module` choose (the GPU when there is one and the problem is large). S and
    B are host arrays; X comes back as a numpy array in the original numbering, with (iterations, worst
    relative residual). Large CPU solves take the fused kernels (:func:`fused_shifted_cg`); with
    ``LGCEXP_FUSED_FLOAT32=1`` certified ones among them iterate in float32 with float64 residuals
    (:func:`mixed_shifted_cg`).
    """
    import scipy.sparse as sp

    from .devices import solve_module

    B, dt, squeeze = as_columns(to_host(B))
    n = B.shape[0]
    if xp is None:
        xp = solve_module(B.size) if sp.issparse(S) else np
    perm = None
    S_host = S_given = S
    if reorder and sp.issparse(S) and n > 1:
        S_host, perm = rcm_reordered(S, dt)
        S, _ = rcm_reordered(S, dt, xp)
        B = B[perm]
    elif xp is not np:
        S = sparse_module(xp).csr_matrix(sp.csr_matrix(S, dtype=dt))
    certify = None
    fused = xp is np and perm is not None and fused_available(B.size)
    if degree is not None and sp.issparse(S_host):
        deg = np.asarray(degree, dtype=np.float64)
        certify = ArgmaxCertificate(deg if perm is None else deg[perm], alpha, S_host, B, xp=xp, fused=fused)
    if fused:
        if certify is not None and dt == np.float64 and mixed_enabled():
            S32, _ = rcm_reordered(S_given, np.float32)
            X, it, rel = mixed_shifted_cg(S, S32, alpha, B, certify, tol=tol, maxiter=maxiter)
        else:
            X, it, rel = fused_shifted_cg(S, alpha, B, tol=tol, maxiter=maxiter, certify=certify)
    else:
        X, it, rel = block_cg(shifted_operator(S, alpha), xp.asarray(B), tol=tol, maxiter=maxiter, certify=certify)
    X = to_host(X)
    if perm is not None:
        out = np.empty_like(X)
        out[perm] = X
        X = out
    return (X[:, 0] if squeeze else X), it, rel


def admm_control(r: float, s: float, eps_pri: float, eps_dual: float, *, adaptive: bool,
                 changes: int, max_changes: int = 20) -> tuple[bool, float]:
    """One ADMM stopping test and penalty update (Boyd et al. 2011, §3.3.1 and §3.4.1): (converged, the
    factor to multiply ρ by). Converged when the primal residual ``r`` and the dual residual ``s`` are
    within their tolerances; otherwise, with ``adaptive`` and fewer than ``max_changes`` changes so far,
    :func:`residual_balance`'s factor, else 1.0."""
    if r <= eps_pri and s <= eps_dual:
        return True, 1.0
    if adaptive and changes < max_changes:
        return False, residual_balance(r, s, eps_pri, eps_dual)
    return False, 1.0


def residual_balance(r: float, s: float, eps_pri: float, eps_dual: float, mu: float = 10.0,
                     cap: float = 10.0) -> float:
    """ADMM penalty adaptation by residual balancing (Boyd et al. 2011, §3.4.1): the factor to multiply ρ by
    (and divide the scaled dual by) when the primal and dual residuals, each relative to its tolerance, are
    more than ``mu`` apart: the square root of their ratio, clipped to [1/cap, cap]; 1.0 otherwise."""
    rel_r, rel_s = max(r / eps_pri, 1e-12), max(s / eps_dual, 1e-12)
    if rel_r > mu * rel_s or rel_s > mu * rel_r:
        return float(np.clip(np.sqrt(rel_r / rel_s), 1.0 / cap, cap))
    return 1.0
