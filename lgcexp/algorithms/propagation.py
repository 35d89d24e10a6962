"""LGC propagation and its labelled block, the primitives LGC, AutoL and Auto share (one module all three
import, below each of them).

- :func:`lgc_propagate`: ``F = (I - alpha S)^-1 Y`` (Zhou et al. 2004, paper Eqs. (20), (24)) by conjugate
  gradient (with the argmax certificate when the graph's degrees are given, :func:`graph_degree`) or the
  authors' t-step power iteration;
- :func:`propagation_submatrix` / :func:`propagation_submatrices`: ``P_LL``, the labelled block of
  ``(I - alpha S)^-1`` (one alpha, or several at once by multi-shift CG), the leave-one-out input of AutoL
  and of LGC's label judgement; :func:`cached_submatrices` / :func:`cached_propagation_submatrix` keep it in
  the on-disk cache per labelled set;
- the memory rule of a dense ``P_LL`` (:data:`DENSE_MAX_LABELS`, :data:`DENSE_METHODS`, :func:`dense_refusal`),
  which the configuration check and ``find_label_issues`` apply before any work.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..devices import free_device_bytes, solve_module, sparse_module, to_host
from ..graph import Graph
from ..solvers.shifted import fused_available, rcm_reordered, shifted_solve

log = logging.getLogger(__name__)


def lgc_propagate(
    S, Y: np.ndarray, alpha: float, *, solver: str = "cg", tol: float = 1e-10, maxiter: int = 10_000, t: int = 1000,
    degree: np.ndarray | None = None, reorder: bool = True,
) -> tuple[np.ndarray, int]:
    """Return ``(I - alpha S)^-1 Y`` (cg) or the authors' t-step iterate divided by (1 - alpha) (power).

    Both estimate the same matrix; returns (F, iterations). ``cg`` runs in reverse Cuthill-McKee order
    (``reorder``) and, given the graph's ``degree`` (S = D^-1/2 W D^-1/2), stops once every row's argmax is
    certain (:func:`lgcexp.solvers.shifted.shifted_solve`), else at the relative residual ``tol``.
    """
    Y = np.asarray(Y, dtype=np.float64)
    if solver == "cg":
        F, it, _ = shifted_solve(S, Y, alpha, tol=tol, maxiter=maxiter, reorder=reorder, degree=degree)
        return F, it
    F = Y.copy()
    for _ in range(t):
        F = (1.0 - alpha) * Y + alpha * (S @ F)
    return F / (1.0 - alpha), t


def graph_degree(graph: Graph) -> np.ndarray | None:
    """The degrees behind ``graph.S = D^-1/2 W D^-1/2`` for the argmax certificate (None for a graph whose S
    is not that normalisation of a sparse W, e.g. the anchor graph's low-rank S)."""
    if not sp.issparse(graph.S) or not sp.issparse(getattr(graph, "W", None)):
        return None
    return getattr(graph, "degree", None)


#: working-set target for one block of right-hand sides in the P_LL solve (about an L2/L3 slice)
_BLOCK_BYTES = 1 << 22
#: right-hand sides per block of a P_LL solve on the fused kernels (the most columns of a specialised product)
FUSED_PLL_COLUMNS = 32


def pll_path(S, l: int, solver: str = "cg", xp: Any = None, dtype: str = "float32") -> str:
    """How a P_LL of l labels on the graph of ``S`` is solved, the name its cache entries carry: ``"fused"``
    (:func:`lgcexp.solvers.shifted.shifted_solve`'s fused strategy, 32 columns a block, the product specialised for the
    column count) where the fused kernels serve a block of that size on the CPU (MNIST: 70,000 x 32),
    ``"fused-generic"`` there when no specialised product can be generated (no writable kernel directory: another
    float32 rounding), ``"gpu-rowkernel"`` (CuPy with lgcexp's own product and column sums; earlier GPU entries,
    named ``"gpu"``, came from cuSPARSE's product in other blocks and are not read), else ``"cg"``
    (its block strategy) or the solver's name (power iteration). Several alphas at once take
    multi-shift CG, whose base recursion runs on the same kernels under the same rule
    (:func:`lgcexp.solvers.shifted.shifted_solve` with several alphas). The paths agree to round-off, not bit
    for bit (the column sums are taken in another order), so the path is part of the cache key."""
    n = S.shape[0]
    if xp is None:
        xp = solve_module(n * min(l, 32))
    if solver != "cg":
        return solver
    if xp is not np:
        return "gpu-rowkernel"
    if not sp.issparse(S) or not fused_available(n * FUSED_PLL_COLUMNS):
        return "cg"
    from ..solvers import fused

    specialised = fused.specialised_product(FUSED_PLL_COLUMNS, contract=np.dtype(dtype) == np.float32)
    return "fused" if specialised is not None else "fused-generic"


#: the same on a GPU (lgcexp.devices.solve_module): wide blocks fill it and read S fewer times (an H100, 1M
#: points, 1000 labels: 15.7 s in blocks of 67 columns, 8.2 s in one; benchmarks/gpu.py); at most 1 GiB
#: per array, and at most a tenth of the GPU's free memory: a block's CG holds about seven such arrays at
#: once (E, X, R, P, T, the product, a column sum's temporary) besides what CuPy's pool keeps
_GPU_BLOCK_BYTES = 1 << 30
_GPU_BLOCK_SHARE = 10


def _power_columns(S: sp.csr_matrix, Bm: np.ndarray, alpha: float, t: int) -> np.ndarray:
    """The authors' recurrence F(0) = E, F <- (1 - alpha) E + alpha S F, t times (includes 1 - alpha)."""
    F = Bm.copy()
    c = Bm * (1.0 - alpha)
    for _ in range(t):
        F = S @ F
        F *= alpha
        F += c
    return F


def _prepare_columns(S: sp.spmatrix, labeled: np.ndarray, dt: np.dtype, block: int | None,
                     reorder: bool, xp: Any = np, fused: bool = False) -> tuple[Any, np.ndarray, int]:
    """S in ``dt`` (renumbered by reverse Cuthill-McKee with ``reorder``), the labelled rows in that
    numbering, and the number of right-hand sides per block (about 4 MiB of working set per array; 32 with
    ``fused``, the fused kernels' path).
    ``xp=cupy``: S as a cupyx.scipy.sparse CSR on the GPU (:func:`lgcexp.solvers.shifted.rcm_reordered`)."""
    n = S.shape[0]
    l = labeled.size
    if reorder and n > 1:
        # reverse Cuthill-McKee: neighbours get nearby indices, so S @ X reads X's rows from cache
        # (computed once per graph and shared with the LGC solves, lgcexp.solvers.shifted.rcm_reordered)
        Sd, perm = rcm_reordered(S, dt, xp)
        pos = np.empty(n, dtype=np.int64)
        pos[perm] = np.arange(n)
        rows = pos[labeled]
    else:
        Sd, rows = sp.csr_matrix(S, dtype=dt), labeled
        if xp is not np:
            Sd = sparse_module(xp).csr_matrix(Sd)
    if block is None and fused:   # the most columns of a specialised product (pll_path)
        block = FUSED_PLL_COLUMNS
    if block is None and xp is not np:
        # a GPU wants wide blocks (one product over many columns), within its memory
        free = free_device_bytes(xp)
        per_array = _GPU_BLOCK_BYTES if free is None else min(_GPU_BLOCK_BYTES, free // _GPU_BLOCK_SHARE)
        block = int(np.clip(per_array // max(1, n * dt.itemsize), 1, 1024))
    if block is None:
        block = int(np.clip(_BLOCK_BYTES // max(1, n * dt.itemsize), 32, 256))
    block = max(1, min(int(block), max(l, 1)))
    return Sd, rows, block


def propagation_submatrix(
    S: sp.spmatrix,
    labeled: np.ndarray,
    alpha: float,
    *,
    solver: str = "cg",
    tol: float = 1e-6,
    maxiter: int = 10_000,
    t: int = 1000,
    dtype: str = "float64",
    block: int | None = None,
    reorder: bool = True,
    progress: bool = False,
    xp: Any = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """``P_LL``: rows at ``labeled`` of ``(1 - alpha)(I - alpha S)^-1 E`` (an l x l float64 array).

    ``solver='cg'`` solves the SPD system to a relative residual ``tol`` per column; ``solver='power'`` runs
    the authors' t-step recurrence. Right-hand sides are processed in blocks of ``block`` columns (default:
    about 4 MiB of working set per array; 32 on the fused path) so each block's vectors stay in cache. Each
    column has its own CG scalars, but a block iterates until its worst column meets ``tol``, so the block
    size moves a column's result within the tolerance (the block sizes are fixed by n, l and the path).
    With ``reorder`` the graph is first renumbered by reverse Cuthill-McKee
    (P_LL does not depend on the numbering; only the summation order inside a row of S changes), which
    makes the sparse products several times faster on large graphs (MNIST). The exact ``P_LL`` is entrywise
    non-negative; CG round-off below ``tol``
    can leave tiny negative entries, which are set to 0. ``xp``: the array module the blocks are solved in
    (numpy, or cupy on the GPU; None: :func:`lgcexp.devices.solve_module` chooses by the block's size).
    Returns (P_LL, stats) with stats ``seconds``, ``iterations`` (max over blocks), ``residual``.
    """
    t0 = time.perf_counter()
    labeled = np.asarray(labeled, dtype=np.int64)
    n = S.shape[0]
    l = labeled.size
    dt = np.dtype(dtype)
    if xp is None:
        xp = solve_module(n * min(l, 32))
    if solver != "cg":
        xp = np
    path = pll_path(S, l, solver, xp, dtype)
    fused = path.startswith("fused")
    Sd, rows, block = _prepare_columns(S, labeled, dt, block, reorder, xp, fused)
    rows_x = xp.asarray(rows)
    P = np.zeros((l, l))
    iters, resid = 0, 0.0
    starts = range(0, l, block)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=l, desc="P_LL", unit="col", leave=False)
    try:
        for s0 in starts:
            cols = np.arange(s0, min(l, s0 + block))
            E = xp.zeros((n, cols.size), dtype=dt)
            E[xp.asarray(rows[cols]), xp.arange(cols.size)] = 1.0
            if solver == "cg":
                X, it, rel = shifted_solve(Sd, E, alpha, tol=tol, maxiter=maxiter,
                                           strategy="fused" if fused else "block")
                X *= 1.0 - alpha
                iters, resid = max(iters, it), max(resid, rel)
            else:
                X = _power_columns(Sd, E, alpha, t)
                iters = t
            P[:, cols] = to_host(X[rows_x])
            if bar is not None:
                bar.update(cols.size)
    finally:
        if bar is not None:
            bar.close()
    if solver == "cg":
        np.maximum(P, 0.0, out=P)
    stats = {"seconds": time.perf_counter() - t0, "iterations": int(iters), "residual": float(resid), "block": block,
             "path": path}
    return P, stats


def propagation_submatrices(
    S: sp.spmatrix,
    labeled: np.ndarray,
    alphas,
    *,
    tol: float = 1e-6,
    maxiter: int = 10_000,
    dtype: str = "float64",
    block: int | None = None,
    reorder: bool = True,
    diagonal_only: bool = False,
    scale: bool = True,
    xp: Any = None,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """``P_LL`` for every alpha in ``alphas`` from one Krylov space (multi-shift CG,
    :func:`lgcexp.solvers.shifted.shifted_solve` with several alphas): the same matrices
    :func:`propagation_submatrix` (``solver='cg'``)
    gives one alpha at a time, to the same per-column relative residual ``tol`` (of the largest alpha's
    system; the others' residuals are smaller), for the sparse products of the largest alpha only.

    ``scale=False`` leaves out the factor ``1 - alpha`` (``(I - alpha S)^-1`` itself, AutoD's P);
    ``diagonal_only`` returns the diagonals ``P_ii`` (l,) instead of the l x l blocks. Tiny negative
    round-off entries are set to 0, as in :func:`propagation_submatrix`. ``xp`` as there.
    Returns (list in the order of ``alphas``, stats ``seconds``, ``iterations``, ``residual``, ``block``).
    """
    t0 = time.perf_counter()
    labeled = np.asarray(labeled, dtype=np.int64)
    n, l = S.shape[0], labeled.size
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    dt = np.dtype(dtype)
    if xp is None:
        xp = solve_module(n * min(l, 32))
    path = pll_path(S, l, "cg", xp, dtype)
    fused = path.startswith("fused")
    Sd, rows, block = _prepare_columns(S, labeled, dt, block, reorder, xp, fused)
    rows_x = xp.asarray(rows)
    out = [np.zeros(l) if diagonal_only else np.zeros((l, l)) for _ in alphas]
    iters, resid = 0, 0.0
    for s0 in range(0, l, block):
        cols = np.arange(s0, min(l, s0 + block))
        E = xp.zeros((n, cols.size), dtype=dt)
        r_c = xp.asarray(rows[cols])
        E[r_c, xp.arange(cols.size)] = 1.0
        pick = (lambda M, r=r_c: M[r, xp.arange(r.size)]) if diagonal_only else (lambda M: M[rows_x])
        Xs, it, rel = shifted_solve(Sd, E, alphas, tol=tol, maxiter=maxiter, strategy="fused" if fused else "block",
                                    select=pick, rows=None if diagonal_only else rows)
        Xs = [to_host(X) for X in Xs]
        iters, resid = max(iters, it), max(resid, rel)
        for k, X in enumerate(Xs):
            if diagonal_only:
                out[k][cols] = X
            else:
                out[k][:, cols] = X
    for k, a in enumerate(alphas):
        if scale:
            out[k] *= 1.0 - a
        np.maximum(out[k], 0.0, out=out[k])
    stats = {"seconds": time.perf_counter() - t0, "iterations": int(iters), "residual": float(resid), "block": block,
             "path": f"multishift-{path}"}
    return out, stats


#: above this many labels LGC's judgement (and find_label_issues' default method) leaves the dense ``P_LL``
#: for the diagonal of the inverse (:mod:`lgcexp.solvers.diagonal`); below it every number is the dense path's
#: (the paper's protocol: 1,040 labels)
DENSE_MAX_LABELS = 10_000

#: methods whose judgement needs the dense l x l P_LL at any size
DENSE_METHODS = ("autoL", "auto")


def dense_pll_bytes(l: int) -> int:
    """Peak bytes of the dense label judgement at l labels: P_LL, its leave-one-out copy and AutoL's padded
    layout, three l x l float64 arrays (a lower bound)."""
    return 3 * 8 * int(l) * int(l)


def physical_memory() -> int | None:
    """Physical memory of this machine in bytes (None where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def dense_refusal(method: str, l: int, key: str) -> str | None:
    """The one-line reason a dense l x l judgement by ``method`` cannot run here (None when it fits)."""
    need = dense_pll_bytes(l)
    have = physical_memory()
    if have is None or need <= 0.8 * have:
        return None
    gib = 1 << 30
    return (f"{key}={method} is not allowed with {l} labels on this machine: its leave-one-out needs a dense "
            f"{l} x {l} P_LL and copies (at least {need / gib:.1f} GiB; this machine has {have / gib:.1f} GiB); "
            f"use {key}=lgc, whose leave-one-out needs O(n) memory (one solve and the diagonal of the "
            "propagation operator)")


#: where most points are labelled, LGC's judgement leaves the dense P_LL above this many labels (probing needs
#: ~200-320 solves where P_LL needs l: at 10,000 fully labelled MNIST points 4.8 s against 38 s, F1 of
#: find_label_issues 0.874 against 0.873; ``python -m benchmarks small_fast``)
PROBE_MIN_LABELS = 2_000


def needs_pll(n_labeled: int, n: int) -> bool:
    """Whether LGC's judgement of ``n_labeled`` labels among ``n`` points solves the dense ``P_LL``: at most
    :data:`DENSE_MAX_LABELS` labels, and not where :func:`lgcexp.solvers.diagonal.choose_diagonal` probes above
    :data:`PROBE_MIN_LABELS` labels (a fully labelled set: the O(n) leave-one-out instead)."""
    from ..solvers.diagonal import choose_diagonal

    if n_labeled > DENSE_MAX_LABELS:
        return False
    return not (n_labeled > PROBE_MIN_LABELS and choose_diagonal(n_labeled, n) == "probe")


def _check_pll_arrays(a: dict[str, np.ndarray], l: int) -> str | None:
    """Why a cached P_LL entry cannot be the l x l propagation submatrix (None when it can)."""
    if "P" not in a or any(k not in a for k in ("seconds", "iterations", "residual")):
        return "arrays are missing"
    if a["P"].shape != (l, l):
        return f"P_LL of shape {a['P'].shape} where ({l}, {l}) was expected"
    if not np.all(np.isfinite(a["P"])):
        return "P_LL has non-finite entries"
    return None


def solve_set(alphas, shared_alphas=None, solver: str = "cg") -> list[float]:
    """The alphas one P_LL request is solved for: the request's own, or, with ``shared_alphas`` (the
    ``pll_alphas`` option; conjugate gradient only), the sorted union with them, all by one multi-shift CG."""
    alphas = [float(a) for a in np.atleast_1d(alphas)]
    if not shared_alphas or solver != "cg":
        return alphas
    return sorted(set(alphas) | {float(a) for a in shared_alphas})


def cached_submatrices(graph: Graph, labeled: np.ndarray, alphas, cache: Any = None, *, solver: str = "cg",
                       tol: float = 1e-6, maxiter: int = 10_000, t: int = 1000, dtype: str = "float32",
                       progress: bool = False, shared_alphas=None) -> tuple[list[np.ndarray], dict[str, Any]]:
    """P_LL for each alpha, each from the on-disk cache (kind ``pll``, one entry per alpha) when one is
    given. A request for one alpha is solved by :func:`propagation_submatrix` (on the path :func:`pll_path`
    names), one for several (``solver='cg'``) by multi-shift CG, :func:`propagation_submatrices`, for
    all of them when any is missing. The paths meet the same per-column residual ``tol`` but differ in
    round-off (and multi-shift CG's with the set of alphas), so each path and set of alphas has its own cache
    keys (:func:`pll_path`; entries of lgcexp before the paths were told apart are not read): a run's numbers
    do not depend on which run filled the cache.

    ``shared_alphas`` (the ``pll_alphas`` option): solve the request together with these alphas
    (:func:`solve_set`) and store every one of them, so the runs of a sweep that all name the same set
    (LGC's judgement, AutoL and ``auto`` on one labelled set) share one multi-shift solve: for the sparse
    products of the largest alpha, instead of one solve per method. Multi-shift CG's shifted updates are
    entrywise, so each alpha's P_LL depends on the set only through its largest alpha (the base system and
    its stopping step): adding smaller alphas to ``auto``'s grid leaves its P_LL's bit for bit as they were.
    Returns (list of P_LL in the order of ``alphas``, stats: ``seconds``, ``iterations``, ``residual``
    (worst over the alphas), ``cache_hits``)."""
    import hashlib

    from ..cache import remove_stale_temp_files, stable_hash

    labeled = np.asarray(labeled, dtype=np.int64)
    requested = [float(a) for a in np.atleast_1d(alphas)]
    alphas = solve_set(requested, shared_alphas, solver)
    where = [alphas.index(a) for a in requested]
    l = labeled.size
    lab_hash = hashlib.sha256(labeled.tobytes()).hexdigest()
    multi = len(alphas) > 1 and solver == "cg"
    path = pll_path(graph.S, l, solver, dtype=dtype)
    if multi:
        path = f"multishift-{path}"

    def key(a: float) -> str:
        fields = {"graph": graph.key, "labeled": lab_hash, "alpha": a, "solver": solver, "tol": tol, "t": t,
                  "dtype": dtype, "v": 1}
        if solver == "cg":                      # the power iteration has one path: its keys stay as they were
            fields["path"] = path
        if multi:                               # an entry of one set of shifts (the largest sets the rounding)
            fields["shifts"] = sorted(alphas)
        if shared_alphas and multi:             # a set that several methods fill: their iteration caps too
            fields["maxiter"] = maxiter
        return stable_hash(fields)

    def validate(arr: dict[str, np.ndarray]) -> str | None:
        return _check_pll_arrays(arr, l)

    def load(indices) -> dict[int, dict[str, np.ndarray]]:
        if cache is None:
            return {}
        loaded = {i: cache.load("pll", key(alphas[i]), validate) for i in indices}
        return {i: arr for i, arr in loaded.items() if arr is not None}

    # a shared set is stored whole; the request reads its own alphas only
    found = load(set(where))
    missing = sorted(set(where) - set(found))
    solved_seconds = None        # the wall time of a solve made by this call (not the stored shares)
    if missing and not multi:
        for i in missing:
            def compute(a=alphas[i]) -> dict[str, np.ndarray]:
                P, st = propagation_submatrix(graph.S, labeled, a, solver=solver, tol=tol, maxiter=maxiter, t=t,
                                              dtype=dtype, progress=progress)
                return {"P": P, "seconds": np.array(st["seconds"]), "iterations": np.array(st["iterations"]),
                        "residual": np.array(st["residual"])}

            if cache is None:
                found[i] = compute()
            else:
                found[i], hit = cache.get_or_compute("pll", key(alphas[i]), compute, validate=validate)
                if hit:  # another worker solved it while this one waited for the entry's lock
                    missing = [j for j in missing if j != i]
    elif missing:
        # every alpha of the set: the Krylov space is the largest alpha's, so a subset would round otherwise
        # (the extra shifts cost updates on the labelled rows only, no sparse products); under one lock for
        # the whole set, so two workers that need it at once solve it once
        def solve_all() -> float:
            Ps, st = propagation_submatrices(graph.S, labeled, alphas, tol=tol, maxiter=maxiter, dtype=dtype)
            for i in range(len(alphas)):
                arr = {"P": Ps[i], "seconds": np.array(st["seconds"] / len(alphas)),
                       "iterations": np.array(st["iterations"]), "residual": np.array(st["residual"])}
                if i in missing:
                    found[i] = arr
                if cache is not None:
                    cache.store("pll", key(alphas[i]), arr)
            return float(st["seconds"])

        lock_path = None if cache is None else cache.path("pll", key(-1.0))
        if lock_path is None:
            solved_seconds = solve_all()
        else:
            with cache.locked(lock_path):
                found.update(load(missing))  # another worker may have solved the set while we waited
                missing = [i for i in missing if i not in found]
                if missing:
                    # temporary files of a writer of this set that was killed (its writers hold this lock)
                    for a in alphas:
                        entry = cache.path("pll", key(a))
                        remove_stale_temp_files(entry.parent, entry.name)
                    solved_seconds = solve_all()
    arrays = [found[i] for i in where]
    seconds = float(sum(float(found[i]["seconds"]) for i in set(where)))
    stats = {"seconds": seconds if solved_seconds is None else solved_seconds,
             "iterations": int(max(int(a["iterations"]) for a in arrays)),
             "residual": float(max(float(a["residual"]) for a in arrays)),
             "cache_hits": sum(1 for i in where if i not in missing)}
    return [np.asarray(a["P"], dtype=np.float64) for a in arrays], stats


def cached_propagation_submatrix(graph: Graph, labeled: np.ndarray, alpha: float, *, cache: Any = None,
                                 solver: str = "cg", tol: float = 1e-6, maxiter: int = 10_000, t: int = 1000,
                                 dtype: str = "float32", progress: bool = False,
                                 shared_alphas=None) -> tuple[np.ndarray, dict]:
    """:func:`cached_submatrices` for one alpha: AutoL, ``auto`` and LGC's label judgement share the entry
    where they use the same alpha (and the same ``shared_alphas``). Returns (P_LL, stats with ``cache_hit``)."""
    Ps, stats = cached_submatrices(graph, labeled, [alpha], cache, solver=solver, tol=tol, maxiter=maxiter, t=t,
                                   dtype=dtype, progress=progress, shared_alphas=shared_alphas)
    stats["cache_hit"] = bool(stats.pop("cache_hits"))
    return Ps[0], stats
