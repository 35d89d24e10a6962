"""``(I - alpha S) X = B``: the one entry, :func:`shifted_solve`, for every solve with the LGC system matrix
(LGC's scores, AutoL's and the judgement's ``P_LL``, AutoD's exact leave-one-out, the diagonal of the
inverse), with its strategies over the one CG loop (:func:`lgcexp.solvers.cg.iterate`):

- ``block``: numpy/scipy or cupy array passes (:class:`lgcexp.solvers.cg.ArrayPasses`), on the CPU or a GPU;
- ``fused``: the numba passes (:class:`lgcexp.solvers.cg.FusedPasses`), CPU, a CSR with sorted indices;
- multi-shift (``alpha`` a sequence): every ``I - alpha_k S`` from the Krylov space of the largest alpha,
  on either passes.

Also here: the reverse Cuthill-McKee renumbering every sparse solve runs in (:func:`rcm_reordered`), and
the stopping rule that certifies the row argmax of an LGC solution (:class:`ArgmaxCertificate`).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..devices import array_module, sparse_module, to_host
from .cg import ArrayPasses, FusedPasses, as_columns, iterate, numba_passes, sparse_product, top

#: strategies of :func:`shifted_solve`
STRATEGIES = ("auto", "block", "fused")

#: the fused passes serve CPU solves with at least this many right-hand-side entries (n x columns) under
#: ``strategy="auto"``; smaller ones keep numpy/scipy (and do not import numba)
FUSED_MIN_ENTRIES = 500_000

#: multi-shift CG's shifted updates take the numba pass (:func:`lgcexp.solvers.fused.shifted_updates`) from
#: this many shifted entries (shifts x selected rows x columns) on: ISOLET's P_LL blocks (6 x 1040 x 32)
SHIFTED_KERNEL_MIN_ENTRIES = 100_000


def shifted_operator(S, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``V -> (I - alpha S) V`` with one temporary (the LGC system matrix, paper Eq. for P)."""

    def apply(V: np.ndarray) -> np.ndarray:
        out = sparse_product(S, V)
        out *= -alpha
        out += V
        return out

    return apply


def fused_available(entries: int) -> bool:
    """Whether a CPU solve of ``entries`` right-hand-side entries takes the fused passes under
    ``strategy="auto"`` (:func:`lgcexp.solvers.cg.numba_passes` from :data:`FUSED_MIN_ENTRIES`)."""
    return numba_passes(entries, FUSED_MIN_ENTRIES) is not None


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
# The argmax certificate
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
        #: the full test by the numba pass :func:`lgcexp.solvers.fused.argmax_certified` (same operations, one
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
        return Ra, top(Ra * self.inv_sqrt_d)

    def bound(self, X, R):
        """Per-row bound on ``max_c |E_ic|`` (n,)."""
        X_inf = top(self.xp.abs(X).ravel())
        Ra, scaled = self._scaled(R, self.eps * (self.B_inf + (1.0 + self.alpha * self.S_rowsum) * X_inf))
        return self.xp.where(self.pos, self.sqrt_d * (scaled / (1.0 - self.alpha)), Ra)

    @property
    def screen_weight(self):
        """The per-row weights of the screen (``1 / sqrt(d_i)``), None when the screen is not used."""
        return self.inv_sqrt_d if self._screen else None

    def __call__(self, X: np.ndarray, R: np.ndarray, screen: float | None = None) -> bool:
        """``screen``: ``max_i max_c |R_ic| / sqrt(d_i)`` when the caller has it already (the fused CG pass
        computes it while updating R), else computed here."""
        if X.shape[1] < 2:
            return True
        # a cheap screen first (one pass over R): the bound's factor against the smallest gap / sqrt(d) of the
        # last full check (the full test needs twice that; gaps settle long before the residual does); only
        # the full check decides
        if self._screen and self._gap_scale is not None:
            scaled = self._scaled(R, 0.0)[1] if screen is None else screen
            if scaled / (1.0 - self.alpha) >= self._gap_scale:
                return False
        xp = self.xp
        if self.fused:
            return self._fused_check(X, R)
        top2 = -xp.partition(-X, 1, axis=1)[:, :2]
        gap = top2[:, 0] - top2[:, 1]
        ratio = gap / self._gap_den
        self._gap_scale = float(ratio.min()) if ratio.size else np.inf
        return bool(xp.all(gap > 2.0 * self.bound(X, R)))

    def _fused_check(self, X, R) -> bool:
        from .fused import argmax_certified, residual_scale

        x_inf, Ra = residual_scale(X, R)
        slack = self.eps * (self.B_inf + (1.0 + self.alpha * self.S_rowsum) * x_inf)
        ok, gmin = argmax_certified(X, Ra, slack, self.sqrt_d, self.inv_sqrt_d, self.pos, self._gap_den,
                                    1.0 - self.alpha)
        self._gap_scale = float(gmin) if X.shape[0] else np.inf
        return bool(ok)


# ----------------------------------------------------------------------------------------------------------
# Multi-shift: the shifted systems' updates
# ----------------------------------------------------------------------------------------------------------


class _Shifts:
    """The shifted systems of multi-shift CG, kept on the entries ``select`` picks (module docstring of
    :func:`shifted_solve`): ``update(a, b)`` after each base step."""

    def __init__(self, R, alphas: np.ndarray, select: Callable, rows, xp):
        self.xp = xp
        self.alphas = alphas
        self.a0 = float(alphas.max())
        self.tau = xp.asarray((self.a0 / alphas - 1.0)[:, None])          # (K, 1)
        K, ncol = alphas.size, R.shape[1]
        sel_r = select(R)
        self.Xs = xp.zeros((K,) + sel_r.shape, dtype=np.float64)
        self.Ps = xp.repeat(sel_r[None].astype(np.float64), K, axis=0)  # p^tau_0 = r_0
        self.bshape = (K,) + (1,) * (sel_r.ndim - 1) + (ncol,)
        self.z_prev, self.z_cur = xp.ones((K, ncol)), xp.ones((K, ncol))
        self.a_prev, self.b_prev = xp.ones(ncol), xp.zeros(ncol)
        passes = numba_passes(self.Xs.size, SHIFTED_KERNEL_MIN_ENTRIES) if rows is not None and xp is np else None
        self.kernel = None if passes is None else passes.shifted_updates
        self.rows = None if self.kernel is None else np.ascontiguousarray(rows, dtype=np.int64)
        self.select = select

    def update(self, a, b, R) -> None:
        """The shifted systems' step from the base step sizes a, b and the new base residual R."""
        xp = self.xp
        z_prev, z_cur, a_prev, b_prev = self.z_prev, self.z_cur, self.a_prev, self.b_prev
        den = a_prev * z_prev * (1.0 + self.tau * a) + a * b_prev * (z_prev - z_cur)
        num = z_cur * z_prev * a_prev
        z_next = xp.where(den != 0, num / xp.where(den != 0, den, 1.0), z_cur)
        ratio = xp.where(z_cur != 0, z_next / xp.where(z_cur != 0, z_cur, 1.0), 0.0)
        a_s = a * ratio                                     # (K, ncol)
        b_s = ratio ** 2 * b
        if self.kernel is not None:                         # reads R's selected rows in place
            self.kernel(self.Xs, self.Ps, R, self.rows, a_s, b_s, z_next)
        else:
            R_sel = self.select(R)
            self.Xs[...] += a_s.reshape(self.bshape) * self.Ps
            self.Ps[...] *= b_s.reshape(self.bshape)
            self.Ps[...] += z_next.reshape(self.bshape) * R_sel[None]
        self.z_prev, self.z_cur, self.a_prev, self.b_prev = z_cur, z_next, a, b

    def solutions(self) -> list:
        """``select(X_k)`` per alpha: the shifted solutions scaled back, ``X_k = (a0 / alpha_k) Y_k``."""
        return [self.Xs[k] * float(self.a0 / self.alphas[k]) for k in range(self.alphas.size)]


# ----------------------------------------------------------------------------------------------------------
# The entry
# ----------------------------------------------------------------------------------------------------------


def shifted_solve(
    S,
    B: np.ndarray,
    alpha: float | Sequence[float],
    *,
    tol: float = 1e-10,
    maxiter: int = 10_000,
    strategy: str = "auto",
    reorder: bool = False,
    degree: np.ndarray | None = None,
    select: Callable[[Any], Any] | None = None,
    rows: np.ndarray | None = None,
    xp: Any = None,
) -> tuple[Any, int, float]:
    """``(I - alpha S)^-1 B`` by conjugate gradient (:func:`lgcexp.solvers.cg.iterate`), in B's precision
    (float32, else float64), to the relative residual ``tol`` per column.

    ``strategy``: ``block`` (array passes, numpy or cupy), ``fused`` (the numba passes; a CPU CSR ``S`` with
    sorted indices, as :func:`rcm_reordered` gives), or ``auto``: ``fused`` on the CPU from
    :data:`FUSED_MIN_ENTRIES` right-hand-side entries when S has been renumbered here (``reorder``), else
    ``block``. The two round the column sums differently (float64 per row chunk against the solve's
    precision), so their iterates agree to round-off.

    ``reorder``: solve in reverse Cuthill-McKee order (:func:`rcm_reordered`; only the order of the sums
    inside a product changes) and return X in the given numbering. ``xp``: the array module to solve in
    (None: B's when B is a device array, else :func:`lgcexp.devices.solve_module` by B's size for one
    alpha and a sparse S under ``strategy="auto"``, else numpy). A host B comes back as a numpy array, a
    device B stays there.

    ``degree`` (the row sums of the W of ``S = D^-1/2 W D^-1/2``): stop as soon as the row argmax of X is
    certainly the exact solution's (:class:`ArgmaxCertificate`), the residual ``tol`` the fallback.

    Multi-shift (``alpha`` a sequence, with ``select``): every ``I - alpha_k S`` from one Krylov space. With
    ``a0 = max(alphas)`` and ``A0 = I - a0 S``, ``I - alpha S = (alpha / a0) (A0 + tau I)``,
    ``tau = a0 / alpha - 1 >= 0``. CG on ``A0`` builds ``K_k(A0, b)``, the same for every shift, and the
    shifted residuals stay collinear with the base one, ``r^tau_k = zeta^tau_k r_k`` (Frommer 2003;
    Jegerlehner 1996). Per shift, with ``a_k``, ``b_k`` the base step sizes (``zeta_{-1} = zeta_0 = 1``,
    ``a_{-1} = 1``, ``b_{-1} = 0``)::

        zeta_{k+1} = zeta_k zeta_{k-1} a_{k-1} / (a_{k-1} zeta_{k-1} (1 + tau a_k) + a_k b_{k-1} (zeta_{k-1} - zeta_k))
        a^tau_k = a_k zeta_{k+1} / zeta_k,   b^tau_k = (zeta_{k+1} / zeta_k)^2 b_k
        x^tau += a^tau_k p^tau_k,             p^tau_{k+1} = zeta_{k+1} r_{k+1} + b^tau_k p^tau_k

    These updates are entrywise, so a shifted system's x and p are kept only on the entries ``select``
    picks (an element or row selection of an (n, c) array, e.g. the labelled rows: l x l per shift instead
    of n x l); the only sparse products are the base system's. ``|zeta| <= 1``: stopping the base at
    ``tol`` stops every shift there too. ``rows``: the row indices ``select`` picks when it is that row
    selection (``M[rows]``); then, on the CPU from :data:`SHIFTED_KERNEL_MIN_ENTRIES` shifted entries on, the
    shifted updates run in one numba pass (the same bits as numpy's five). The base runs its column sums
    in float64. Returns then the list of ``select(X_k)`` (float64) in the order of the alphas.

    Returns (X or the list, iterations, worst relative residual). Raises ``NotConverged`` after ``maxiter``
    iterations (under :func:`lgcexp.solvers.cg.on_maxiter` ``"warn"``: warns, returns the last iterate).
    """
    import scipy.sparse as sp

    from ..devices import is_device_array, solve_module

    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r}: choose one of {', '.join(STRATEGIES)}")
    multi = np.ndim(alpha) > 0
    if multi and select is None:
        raise ValueError("a multi-shift solve (several alphas) needs select")
    on_device = is_device_array(B)
    B, dt, squeeze = as_columns(B)
    if xp is None:
        if on_device:
            xp = array_module(B)
        else:   # the device rule decides for a plain solve of host arrays; the others stay where B is
            xp = solve_module(B.size) if sp.issparse(S) and strategy == "auto" and not multi else np
    if not on_device:
        B = to_host(B)
    n = B.shape[0]
    perm = None
    S_host = S
    if reorder and sp.issparse(S) and n > 1:
        S_host, perm = rcm_reordered(S, dt)
        S, _ = rcm_reordered(S, dt, xp)
        B = B[perm]
    elif xp is not np and sp.issparse(S):
        S = sparse_module(xp).csr_matrix(sp.csr_matrix(S, dtype=dt))
    if strategy == "auto":
        strategy = "fused" if xp is np and perm is not None and fused_available(B.size) else "block"
    fused = strategy == "fused"
    if fused:
        B = np.ascontiguousarray(to_host(B))   # the fused passes index rows of C-ordered blocks
    else:
        B = xp.asarray(B)

    if multi:
        alphas = np.asarray(alpha, dtype=np.float64).ravel()
        a0 = float(alphas.max())
        if fused:
            passes = FusedPasses(S, a0, B, with_x=False)
        else:
            passes = ArrayPasses(shifted_operator(S, a0), B, scalars=np.float64, norms="sums", with_x=False)
        shifts = _Shifts(passes.R, alphas, select, rows, xp)
        it, worst = _run(passes, fused, tol=tol, maxiter=maxiter, what="multi-shift conjugate gradient",
                         on_step=lambda a, b: shifts.update(a, b, passes.R))
        return shifts.solutions(), it, worst

    certify = None
    if degree is not None and sp.issparse(S_host):
        deg = np.asarray(degree, dtype=np.float64)
        certify = ArgmaxCertificate(deg if perm is None else deg[perm], float(alpha), S_host, to_host(B), xp=xp,
                                    fused=fused)
    if fused:
        passes = FusedPasses(S, float(alpha), B, screen_weight=None if certify is None else certify.screen_weight)
    else:
        passes = ArrayPasses(shifted_operator(S, float(alpha)), B)
    it, worst = _run(passes, fused, tol=tol, maxiter=maxiter, certify=certify)
    X = passes.X
    if not on_device:
        X = to_host(X)
    if perm is not None:
        xm = array_module(X)
        out = xm.empty_like(X)
        out[xm.asarray(perm)] = X
        X = out
    return (X[:, 0] if squeeze else X), it, worst


def _run(passes, fused: bool, **kw) -> tuple[int, float]:
    """:func:`lgcexp.solvers.cg.iterate` on the passes, within numba's thread section for the fused ones."""
    if not fused:
        return iterate(passes, **kw)
    with passes.section():
        return iterate(passes, **kw)


