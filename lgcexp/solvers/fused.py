"""Fused, multi-threaded numba passes of one conjugate-gradient iteration on ``(I - alpha S) X = B`` (the
passes of :class:`lgcexp.solvers.cg.FusedPasses`).

scipy's CSR x dense product is single-threaded and every dense update of a CG iteration is its own pass over
the n x c blocks (with temporaries). These kernels do an iteration in three passes, each split into
:data:`CHUNKS` fixed row ranges run on numba's threads (``prange``):

1. ``AP = P - alpha S P`` and the column sums of ``P * AP`` (one read of S and P, one write of AP);
2. ``X += step P``, ``R -= step AP``, the column sums of ``R * R`` and ``max_i max_c |R_ic| w_i`` (the argmax
   certificate's screen, :class:`lgcexp.solvers.shifted.ArgmaxCertificate`);
3. ``P = beta P + R``.

Each entry is computed with the same floating-point operations in the same order as the numpy/scipy path
(``S @ P`` row by row in index order, then ``* -alpha``, then ``+ P``; the updates likewise); only the
column sums (float64) are summed in another order: per chunk, then the chunks in order. The chunks are
fixed by the matrix (equal shares of its stored entries), not by the number of threads, so the result is
the same on any machine. Imported only for large solves (numba's import costs about half a second); the
compiled code is cached on disk (``cache=True``).

The product the solves use is :func:`specialised_product`, generated for the column count (the generic
:func:`shifted_product_dot` above 32 columns); the argmax certificate's full test is :func:`argmax_certified`
(with :func:`residual_scale`), one pass over the rows with numpy's operations.

:func:`siis_edge_pass` is SIIS's ALM iteration over the graph's edges in one pass, and :func:`shifted_updates`
multi-shift CG's updates of its shifted systems in one pass (their own sections below).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref

import numba
import numpy as np
from numba import njit, prange, uint64

# numba's own thread pool (workqueue) unless the user chose one: its idle threads sleep, where OpenMP's spin;
# with three short parallel passes per CG iteration on a machine shared with other processes, spinning
# threads took the cores the others needed (2 threads: 59 ms per MNIST iteration under OpenMP, 34 ms under
# workqueue, 32 ms with 1 thread; load average 6 on 2 cores). It does not nest, and the kernels do not.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

#: fixed row ranges per matrix (a multiple of common core counts), independent of the thread count
CHUNKS = 48


def kernel_threads() -> int:
    """Threads for the kernels: :func:`lgcexp.devices.cpu_threads` (``OMP_NUM_THREADS`` when set, else the
    CPUs this process may use), at most numba's own limit."""
    from ..devices import cpu_threads

    return max(1, min(cpu_threads(), numba.config.NUMBA_NUM_THREADS))


#: the workqueue pool must not be entered by two Python threads at once (numba aborts the process): the
#: fused solves of a process run one at a time
_POOL_LOCK = threading.Lock()


@contextlib.contextmanager
def parallel_section():
    """numba's threads set to :func:`kernel_threads` for the block, taking the row chunks one at a time
    (``parallel_chunksize(1)``) rather than one equal share each, so a pre-empted thread holds up less; one
    such block per process at a time."""
    with _POOL_LOCK:
        before = numba.get_num_threads()
        numba.set_num_threads(kernel_threads())
        try:
            with numba.parallel_chunksize(1):
                yield
        finally:
            numba.set_num_threads(before)


def row_chunks(indptr: np.ndarray, chunks: int = CHUNKS) -> np.ndarray:
    """``chunks + 1`` row boundaries splitting the rows into ranges of about equal stored entries."""
    n = indptr.size - 1
    targets = np.linspace(0, indptr[-1], chunks + 1)
    b = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    b[0], b[-1] = 0, n
    return np.maximum.accumulate(np.clip(b, 0, n))


#: id(S) -> (weak reference to S, its row chunks)
_CHUNKS: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def row_chunks_of(S) -> np.ndarray:
    """:func:`row_chunks` of the CSR matrix S, computed once per matrix object (kept while it lives)."""
    hit = _CHUNKS.get(id(S))
    if hit is not None and hit[0]() is S:
        return hit[1]
    b = row_chunks(S.indptr)
    key = id(S)
    _CHUNKS[key] = (weakref.ref(S, lambda _, k=key: _CHUNKS.pop(k, None)), b)
    return b


def product_for(c: int, dt):
    """The product pass for c columns in dtype dt: :func:`specialised_product` (float32 with fused
    multiply-adds, float64 scipy's bit for bit) when c is small enough, else :func:`shifted_product_dot`."""
    return specialised_product(c, contract=np.dtype(dt) == np.float32) or shifted_product_dot


#: columns per register block of the sparse product
_COLS = 16


@njit(parallel=True, cache=True, nogil=True)
def shifted_product_dot(indptr, indices, data, P, neg_alpha, AP, bounds, dots):  # pragma: no cover - jitted
    """``AP = P + neg_alpha * (S @ P)`` and ``dots[t, :] = sum over chunk t's rows of P * AP``."""
    nch = bounds.size - 1
    c = P.shape[1]
    cu = uint64(c)
    na = neg_alpha[0]
    Pf = P.ravel()
    APf = AP.ravel()
    for t in prange(nch):
        acc = np.zeros(c)
        y = np.zeros(_COLS, dtype=P.dtype)
        for i in range(bounds[t], bounds[t + 1]):
            o = uint64(i) * cu
            lo, hi = uint64(indptr[i]), uint64(indptr[i + 1])
            for q0 in range(0, c, _COLS):           # blocks of up to 16 columns, unsigned flat indexing
                w = uint64(min(_COLS, c - q0))
                for q in range(w):
                    y[q] = 0
                for jj in range(lo, hi):
                    v = data[jj]
                    b = uint64(indices[jj]) * cu + uint64(q0)
                    for q in range(w):
                        y[q] += v * Pf[b + q]
                for q in range(w):
                    k = o + uint64(q0) + q
                    p = Pf[k]
                    a = y[q] * na
                    a = a + p
                    APf[k] = a
                    acc[q0 + q] += np.float64(p) * np.float64(a)
        for q in range(c):
            dots[t, q] = acc[q]


@njit(parallel=True, cache=True, nogil=True)
def residual_update(R, AP, step, bounds, dots, weight, rmax):  # pragma: no cover - jitted
    """``R -= step AP`` (step per column); ``dots[t, :]`` the column sums of ``R * R`` over chunk t,
    ``rmax[t]`` the largest ``max_c |R_ic| * weight_i`` there (0 when ``weight`` is empty). CG's updates
    are this pass and :func:`step_update` (eight n x c array reads and writes per iteration: ``X += step P``
    waits for the direction pass, so P is read once); multi-shift CG's base recursion, which needs no
    iterate, uses both without X."""
    nch = bounds.size - 1
    c = R.shape[1]
    use_w = weight.size > 0
    for t in prange(nch):
        acc = np.zeros(c)
        m = 0.0
        for i in range(bounds[t], bounds[t + 1]):
            r = R[i]
            ap = AP[i]
            ri = 0.0
            for q in range(c):
                rq = r[q] - ap[q] * step[q]
                r[q] = rq
                acc[q] += np.float64(rq) * np.float64(rq)
                ri = max(ri, abs(np.float64(rq)))
            if use_w:
                m = max(m, ri * weight[i])
        for q in range(c):
            dots[t, q] = acc[q]
        rmax[t] = m


@njit(parallel=True, cache=True, nogil=True)
def step_update(X, P, R, step, beta, bounds):  # pragma: no cover - jitted
    """``X += step P``, then ``P = P * beta + R`` (per column), one pass; each the same operation as numpy's
    ``X += P * step`` and ``P = P * beta + R`` (no fused multiply-add), so X and P are those of separate
    passes bit for bit. ``X`` with no rows: the direction alone (multi-shift CG's base recursion has no
    iterate; ``step`` is not read)."""
    nch = bounds.size - 1
    c = P.shape[1]
    with_x = X.shape[0] > 0
    for t in prange(nch):
        for i in range(bounds[t], bounds[t + 1]):
            p = P[i]
            r = R[i]
            if with_x:
                x = X[i]
                for q in range(c):
                    x[q] += p[q] * step[q]
            for q in range(c):
                p[q] = p[q] * beta[q] + r[q]


# ----------------------------------------------------------------------------------------------------------
# The product specialised for its column count: the c accumulators of a row are c named scalars (registers),
# the column indices compile-time constants. Generated once per (c, dtype rule) into a file of the kernel
# directory, so numba's on-disk cache serves later processes.
# ----------------------------------------------------------------------------------------------------------

#: most columns for which a specialised product is generated (more: :func:`shifted_product_dot`)
SPECIALISED_MAX_COLUMNS = 32

_SPECIALISED_TEMPLATE = '''"""Generated by lgcexp.solvers.fused.specialised_product for {c} columns (compiled with
LLVM's SLP vectoriser); do not edit."""
import numpy as np
from numba import njit, prange, uint64


@njit(parallel=True, cache=True, nogil=True, fastmath={fastmath}, boundscheck=False)
def product(indptr, indices, data, P, neg_alpha, AP, bounds, dots):  # pragma: no cover - jitted
    na = neg_alpha[0]
    Pf = P.ravel()
    APf = AP.ravel()
    for t in prange(bounds.size - 1):
        z = na - na
{init_dots}
        for i in range(bounds[t], bounds[t + 1]):
{init_acc}
            for jj in range(uint64(indptr[i]), uint64(indptr[i + 1])):
                v = data[jj]
                b = uint64(indices[jj]) * uint64({c})
{accumulate}
            o = uint64(i) * uint64({c})
{finish}
{store_dots}
'''

_SPECIALISED: dict[tuple[int, bool], object] = {}


def _kernel_dir() -> str:
    """Where the generated kernels live: ``$LGCEXP_KERNEL_DIR``, else ``kernels`` in the cache directory."""
    from ..locations import default_dir

    return os.path.expanduser(os.environ.get("LGCEXP_KERNEL_DIR") or os.path.join(default_dir("cache"), "kernels"))


def specialised_source(c: int, contract: bool) -> str:
    """The source of the product kernel for ``c`` columns (see :func:`specialised_product`)."""
    ind = " " * 12
    return _SPECIALISED_TEMPLATE.format(
        c=c, fastmath="{'contract'}" if contract else "False",
        init_dots="\n".join(f"        s{q} = 0.0" for q in range(c)),
        init_acc="\n".join(f"{ind}y{q} = z" for q in range(c)),
        accumulate="\n".join(f"{ind}    y{q} += v * Pf[b + uint64({q})]" for q in range(c)),
        finish="\n".join(f"{ind}p = Pf[o + uint64({q})]\n{ind}a = y{q} * na\n{ind}a = a + p\n"
                         f"{ind}APf[o + uint64({q})] = a\n{ind}s{q} += np.float64(p) * np.float64(a)"
                         for q in range(c)),
        store_dots="\n".join(f"        dots[t, {q}] = s{q}" for q in range(c)))


def specialised_product(c: int, contract: bool):
    """:func:`shifted_product_dot` for exactly ``c`` columns (None above :data:`SPECIALISED_MAX_COLUMNS`):
    the same operations in the same order, but the row's c sums are named scalars (registers; the generic
    kernel's runtime column loop keeps them in memory) and the gathers use constant offsets from an unsigned
    row start (no negative-index wrap-around, no multiply by a runtime stride). ``contract``: allow fused
    multiply-adds (the product then differs from scipy's in the last bits; the float32 path), else it is
    scipy's bit for bit. Written into :func:`_kernel_dir` once (a file per c and variant), compiled and cached
    by numba there (about a second the first time)."""
    key = (int(c), bool(contract))
    if key in _SPECIALISED:
        return _SPECIALISED[key]
    if not 1 <= c <= SPECIALISED_MAX_COLUMNS:
        return None
    import hashlib
    import importlib.util

    src = specialised_source(*key)
    digest = hashlib.sha1(src.encode()).hexdigest()[:12]
    name = f"lgcexp_product_c{c}_{'fma' if contract else 'exact'}_{digest}"
    folder = _kernel_dir()
    path = os.path.join(folder, name + ".py")
    if not os.path.exists(path):
        try:
            os.makedirs(folder, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(src)
            os.replace(tmp, path)               # atomic: concurrent processes write the same text
        except OSError:                         # no writable kernel directory: the generic kernel
            _SPECIALISED[key] = None
            return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module                  # numba's cache re-imports the module of a cached kernel by name
    spec.loader.exec_module(module)
    kernel = module.product

    def product(*args):
        with _slp_vectorize():                  # read when the kernel compiles (first call), not when cached
            return kernel(*args)

    product.kernel = kernel
    _SPECIALISED[key] = product
    return product


@contextlib.contextmanager
def _slp_vectorize():
    """numba's LLVM pipeline with the SLP vectoriser within the block (off by default in numba): it packs the
    c named accumulators of :func:`specialised_product` into SIMD registers (one vector load and multiply-add
    per stored entry instead of c scalar ones; about 1.7x on the MNIST product). Lane-wise, so the rounding
    is the scalar code's."""
    before = numba.config.SLP_VECTORIZE
    numba.config.SLP_VECTORIZE = 1
    try:
        yield
    finally:
        numba.config.SLP_VECTORIZE = before


@njit(cache=True, nogil=True)
def residual_scale(X, R):  # pragma: no cover - jitted
    """(``max |X|``, ``Ra_i = max_c |R_ic|`` per row): the first pass of :func:`argmax_certified`."""
    n, c = X.shape
    x_inf = 0.0
    Ra = np.empty(n)
    for i in range(n):
        r = 0.0
        for q in range(c):
            x_inf = max(x_inf, abs(np.float64(X[i, q])))
            r = max(r, abs(np.float64(R[i, q])))
        Ra[i] = r
    return x_inf, Ra


@njit(cache=True, nogil=True)
def argmax_certified(X, Ra, slack, sqrt_d, inv_sqrt_d, pos, gap_den, one_minus_alpha):  # pragma: no cover
    """The full test of :class:`lgcexp.solvers.shifted.ArgmaxCertificate` in one pass over the rows, with
    numpy's operations in numpy's order: (every row's top-two gap > twice its bound, the smallest gap /
    gap_den)."""
    n, c = X.shape
    scaled = 0.0
    for i in range(n):
        scaled = max(scaled, (Ra[i] + slack) * inv_sqrt_d[i])
    f = scaled / one_minus_alpha
    ok = True
    gmin = np.inf
    for i in range(n):
        t1 = -np.inf
        t2 = -np.inf
        for q in range(c):
            x = np.float64(X[i, q])
            if x > t1:
                t2 = t1
                t1 = x
            elif x > t2:
                t2 = x
        gap = t1 - t2
        gmin = min(gmin, gap / gap_den[i])
        b = sqrt_d[i] * f if pos[i] else Ra[i] + slack
        if not gap > 2.0 * b:
            ok = False
    return ok, gmin


# --------------------------------------------------------------------------------------------------------
# SIIS: one pass over the edges per ALM iteration (lgcexp.algorithms.siis)
# --------------------------------------------------------------------------------------------------------

#: :func:`siis_edge_pass` modes: the first iteration's shrink (the edge differences of A = 0 are 0), the
#: end of one iteration and the shrink of the next, and the objective's edge term alone (the last iteration)
SIIS_START, SIIS_NEXT, SIIS_LAST = 0, 1, 2


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def siis_edge_pass(head, tail, w_head, w_tail, F, Y1, ratio, tau, Z, mode):  # pragma: no cover - jitted
    """One pass over the edges e of SIIS's incidence matrix P for the scaled ALM of
    :meth:`lgcexp.algorithms.siis.SIISProblem.solve`. Row e of P holds ``w_head[e]`` at node ``head[e]`` and
    ``w_tail[e]`` at ``tail[e]`` (:func:`lgcexp.algorithms.siis.edge_arrays`); ``Y1`` (edges x c, Lambda1 /
    mu) is updated in place:

    - the edge difference ``pf = (P F)_e = w_head F_head + w_tail F_tail``;
    - ``SIIS_NEXT``: the multiplier step ``Y1_e <- (Y1_e - pf) * ratio`` that ends an iteration, then (and
      in ``SIIS_START``, where pf is 0) the next iteration's ``Q_e = shrink(pf - Y1_e, tau)`` and
      ``Y1_e <- Y1_e + Q_e``, and ``Z = P^T Y1`` (scattered in edge order);
    - every mode returns ``sum_e ||pf||_2``, the objective's edge term.

    The numpy path makes about a dozen passes over the (edges x c) arrays per iteration for the same steps;
    here ``Y1`` is read and written once, in two short loops per edge, and ``P F`` is never stored. Sums
    and products may be reassociated and fused (multiply-adds), so the iterates agree with the numpy path's
    to round-off, not bit for bit."""
    E, c = Y1.shape
    obj = 0.0
    v = np.empty(c)
    if mode != SIIS_LAST:
        Z[:] = 0.0
    for e in range(E):
        wa = w_head[e]
        wb = w_tail[e]
        Fa = F[head[e]]
        Fb = F[tail[e]]
        sp_ = 0.0
        if mode == SIIS_LAST:
            for q in range(c):
                p = wa * Fa[q] + wb * Fb[q]
                sp_ += p * p
            obj += np.sqrt(sp_)
            continue
        Ye = Y1[e]
        sv = 0.0
        for q in range(c):
            p = wa * Fa[q] + wb * Fb[q]
            sp_ += p * p
            y = Ye[q]
            if mode == SIIS_NEXT:
                y = (y - p) * ratio
            d = p - y
            Ye[q] = y
            v[q] = d
            sv += d * d
        obj += np.sqrt(sp_)
        scale = 1.0 - tau / max(np.sqrt(sv), tau)   # rows with ||v|| <= tau shrink to 0
        Za = Z[head[e]]
        Zb = Z[tail[e]]
        for q in range(c):
            y = Ye[q] + v[q] * scale
            Ye[q] = y
            Za[q] += wa * y
            Zb[q] += wb * y
    return obj


# --------------------------------------------------------------------------------------------------------
# Multi-shift CG: the shifted systems' updates on the selected rows (lgcexp.solvers.shifted)
# --------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, boundscheck=False)
def shifted_updates(Xs, Ps, R, rows, a_s, b_s, z_next):  # pragma: no cover - jitted
    """For every shift k, selected row i (``R``'s row ``rows[i]``) and column j, numpy's three updates of
    :func:`lgcexp.solvers.shifted.shifted_solve`'s multi-shift in one pass, with the same operations in the same order
    (float64, no fused multiply-adds, so the same bits): ``x += a_s[k, j] p``, then ``p = p b_s[k, j] + z_next[k, j] r``
    with the old p. numpy makes five passes over the (K, rows, columns) arrays and one gather of R's rows."""
    K, L, c = Xs.shape
    for k in range(K):
        for i in range(L):
            Rr = R[rows[i]]
            Xr = Xs[k, i]
            Pr = Ps[k, i]
            for j in range(c):
                p = Pr[j]
                Xr[j] = Xr[j] + a_s[k, j] * p
                Pr[j] = p * b_s[k, j] + z_next[k, j] * np.float64(Rr[j])
