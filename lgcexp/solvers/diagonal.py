"""The diagonal of ``P = (I - alpha S)^-1`` at the labelled points, and LGC's leave-one-out scores from it:
every labelled point's leave-one-out evidence without the dense l x l ``P_LL``.

With ``P = (I - alpha S)^-1`` and ``Y`` the one-hot labels at the labelled rows (0 elsewhere), LGC's scores
are ``F = P Y`` (one solve with c right-hand sides). Leaving label i out removes exactly its own column's
contribution, so the leave-one-out scores of labelled point i are

    LOO_i = F_i - P_ii Y_i,

i.e. the row of ``P_LL`` without its diagonal times ``Y_L`` (what :func:`lgcexp.issues.judgement.graph_loo_probs`
computes from the dense block; :func:`lgcexp.algorithms.lgc.lgc_loo_probs` normalises these scores), from F
and the *diagonal* of P at the labelled points only. The diagonal is

- ``exact``: blocks of unit-vector solves, ``P_ii = e_i^T (I - alpha S)^-1 e_i`` (l solves, in blocks of
  right-hand sides; memory n x block); or
- ``probe``: *probing* (Tang & Saad, "A probing method for computing the diagonal of a matrix inverse",
  Numer. Linear Algebra Appl. 19, 2012): the labelled points are coloured so that two of one colour are
  more than ``distance`` edges apart (greedy distance-r colouring), one solve per colour with the colour's
  indicator vector as right-hand side, and ``P_ii`` read at i from its colour's solution. The estimate
  adds ``sum_j P_ij`` over the other points j of i's colour, all more than ``distance`` hops away, where
  ``P_ij <= sum_{t > distance} alpha^t (S^t)_ij`` is small; it is never below the exact value (P >= 0).
  The error is measured on a seeded sample of points by exact unit solves and recorded (``probe_check``,
  with the largest change it makes to a leave-one-out distribution there). It is small against the
  leave-one-out mass only where most points are labelled (that mass is about ``1 / (1 - alpha)`` times the
  labelled share of the neighbourhood): :func:`choose_diagonal` probes only then.

Everything runs in ``dtype`` (float32 by default, conjugate gradient to a relative residual ``tol`` = 1e-6
per column, as AutoL's P_LL) and in blocks of right-hand sides: memory O(n (c + block)) beside the graph.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp

#: diagonal estimators of :func:`propagation_diagonal`
DIAGONALS = ("exact", "probe")
#: the probing distance of LGC's judgement above :data:`lgcexp.algorithms.propagation.DENSE_MAX_LABELS`: on fully
#: labelled MNIST (70,000 points, 10-NN) distance 3 needs 320 colours and errs by 1.2 % of P_ii on average (max 0.042
#: against P_ii ~ 1.1 and leave-one-out row sums ~ 10), distance 4 by 0.2 % in three times the time
#: (docs/label_issues.md#scale)
LARGE_DISTANCE = 3


#: probing is used only where at least this share of the points is labelled (:func:`choose_diagonal`)
PROBE_MIN_LABELLED = 0.5


def choose_diagonal(n_labeled: int, n: int) -> str:
    """``probe`` where most points are labelled (a fully labelled data set), else ``exact``."""
    return "probe" if n_labeled >= PROBE_MIN_LABELLED * n else "exact"


def _prepare(S: sp.spmatrix, labeled: np.ndarray, dtype: str) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """S in ``dtype`` in reverse Cuthill-McKee order, the labelled rows there, and the permutation."""
    from .shifted import rcm_reordered

    n = S.shape[0]
    Sd, perm = rcm_reordered(S, np.dtype(dtype))
    pos = np.empty(n, dtype=np.int64)
    pos[perm] = np.arange(n)
    return Sd, pos[np.asarray(labeled, dtype=np.int64)], pos


def _block_size(n: int, dtype: str, block: int | None) -> int:
    if block is not None:
        return max(1, int(block))
    return int(np.clip((1 << 24) // max(1, n * np.dtype(dtype).itemsize), 16, 256))


def _solve(Sd: sp.csr_matrix, B: np.ndarray, alpha: float, tol: float, maxiter: int) -> tuple[np.ndarray, int, float]:
    from .shifted import shifted_solve

    return shifted_solve(Sd, B, alpha, tol=tol, maxiter=maxiter, strategy="block")


def _unit_diagonal(Sd, rows: np.ndarray, alpha: float, tol: float, maxiter: int, dtype: str, block: int,
                   bar: Any = None) -> tuple[np.ndarray, int]:
    """``[(I - alpha S)^-1]_ii`` at ``rows`` by unit-vector solves, ``block`` at a time."""
    n = Sd.shape[0]
    d = np.zeros(rows.size)
    iters = 0
    for s0 in range(0, rows.size, block):
        r = rows[s0:s0 + block]
        E = np.zeros((n, r.size), dtype=dtype)
        E[r, np.arange(r.size)] = 1.0
        X, it, _ = _solve(Sd, E, alpha, tol, maxiter)
        d[s0:s0 + r.size] = X[r, np.arange(r.size)]
        iters = max(iters, it)
        if bar is not None:
            bar.update(r.size)
    return d, iters


#: the most entries (an upper bound) of the distance-hop neighbourhoods formed at once by the colouring
COLOURING_BUDGET = 1 << 25


def colouring_chunks(A: sp.csr_matrix, distance: int, chunk: int, budget: int = COLOURING_BUDGET) -> list:
    """Row ranges ``(start, stop)`` of at most ``chunk`` rows whose ``distance``-hop neighbourhoods hold at
    most ``budget`` entries together (bounded above by the walk counts ``A^(distance-1) deg``; a row above
    the budget alone is its own range), so that hubs of a large kNN graph never blow the memory up."""
    n = A.shape[0]
    bound = np.asarray(A.sum(axis=1), dtype=np.float64).ravel()
    for _ in range(int(distance) - 1):
        bound = A @ bound
    ranges, start, total = [], 0, 0.0
    for i in range(n):
        if i > start and (i - start >= chunk or total + bound[i] > budget):
            ranges.append((start, i))
            start, total = i, 0.0
        total += bound[i]
    if start < n:
        ranges.append((start, n))
    return ranges


def distance_colouring(S: sp.spmatrix, distance: int = 2, among: np.ndarray | None = None,
                       chunk: int = 4096, budget: int = COLOURING_BUDGET) -> np.ndarray:
    """Greedy colouring (in index order) of the points ``among`` (a boolean mask; default all) such that two
    of them with one colour are more than ``distance`` edges apart in the graph of ``S``: the colour of i is
    the smallest not used by an earlier such point within ``distance`` hops. Other points get -1. The
    ``distance``-hop neighbourhoods are formed at most ``chunk`` rows and about ``budget`` entries at a time
    (:func:`colouring_chunks`; the colours do not depend on either)."""
    n = S.shape[0]
    among = np.ones(n, dtype=bool) if among is None else np.asarray(among, dtype=bool)
    A = sp.csr_matrix(S, dtype=np.float32, copy=True)
    A.data[:] = 1.0
    A = (A + sp.identity(n, dtype=np.float32, format="csr")).tocsr()
    colour = np.full(n, -1, dtype=np.int64)
    mark = np.full(n + 1, -1, dtype=np.int64)
    for s0, s1 in colouring_chunks(A, distance, chunk, budget):
        R = A[s0:s1]
        for _ in range(int(distance) - 1):
            R = R @ A
        R = R.tocsr()
        for k in range(R.shape[0]):
            i = s0 + k
            if not among[i]:
                continue
            near = colour[R.indices[R.indptr[k]:R.indptr[k + 1]]]
            near = near[near >= 0]
            mark[near] = i
            top = int(near.max()) + 2 if near.size else 1
            colour[i] = int(np.flatnonzero(mark[:top] != i)[0])
    return colour


def propagation_diagonal(S: sp.spmatrix, labeled: np.ndarray, alpha: float, *, method: str = "exact",
                         distance: int = 2, tol: float = 1e-6, maxiter: int = 10_000, dtype: str = "float32",
                         block: int | None = None, check: int = 256, seed: int = 0, progress: bool = False,
                         _prepared: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
    """``[(I - alpha S)^-1]_ii`` at the labelled points (l,), exact or by probing (module docstring).
    Returns (diagonal, stats: ``seconds``, ``iterations``, ``method``, and for ``probe`` ``colours`` and
    ``probe_check``: the mean and max absolute and relative error on ``check`` seeded points, computed
    exactly)."""
    if method not in DIAGONALS:
        raise ValueError(f"method={method!r}: choose one of {', '.join(DIAGONALS)}")
    t0 = time.perf_counter()
    labeled = np.asarray(labeled, dtype=np.int64)
    Sd, rows, _ = _prepared if _prepared is not None else _prepare(S, labeled, dtype)
    n = Sd.shape[0]
    block = _block_size(n, dtype, block)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=labeled.size, desc=f"diagonal ({method})", unit="pt", leave=False)
    stats: dict[str, Any] = {"method": method}
    try:
        if method == "exact":
            d, iters = _unit_diagonal(Sd, rows, alpha, tol, maxiter, dtype, block, bar)
        else:
            need = np.zeros(n, dtype=bool)
            need[rows] = True
            colour = distance_colouring(Sd, distance, among=need)
            ncol = int(colour.max()) + 1
            stats["colours"] = ncol
            stats["distance"] = int(distance)
            full = np.zeros(n)
            iters = 0
            if bar is not None:
                bar.total = ncol
                bar.refresh()
            for c0 in range(0, ncol, block):
                cs = np.arange(c0, min(ncol, c0 + block))
                members = np.flatnonzero((colour >= c0) & (colour < c0 + cs.size))
                B = np.zeros((n, cs.size), dtype=dtype)
                B[members, colour[members] - c0] = 1.0
                X, it, _ = _solve(Sd, B, alpha, tol, maxiter)
                iters = max(iters, it)
                full[members] = X[members, colour[members] - c0]
                if bar is not None:
                    bar.update(cs.size)
            d = full[rows]
            if check:
                pick = np.sort(np.random.default_rng(seed).choice(rows.size, size=min(int(check), rows.size),
                                                                  replace=False))
                exact, _ = _unit_diagonal(Sd, rows[pick], alpha, tol, maxiter, dtype, block)
                err = np.abs(d[pick] - exact)
                stats["probe_check"] = {"points": int(pick.size), "mean_abs": float(err.mean()),
                                        "max_abs": float(err.max()),
                                        "mean_rel": float(np.mean(err / np.abs(exact)))}
                stats["_check"] = (pick, exact)
    finally:
        if bar is not None:
            bar.close()
    stats["iterations"] = int(iters)
    stats["seconds"] = time.perf_counter() - t0
    return d, stats


def lgc_loo_scores(S: sp.spmatrix, labeled: np.ndarray, y: np.ndarray, n_classes: int, alpha: float, *,
                   diagonal: str = "exact", distance: int = 2, tol: float = 1e-6, maxiter: int = 10_000,
                   dtype: str = "float32", block: int | None = None, progress: bool = False,
                   P_diag: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """LGC's leave-one-out scores ``F_i - P_ii Y_i`` (l x c, clipped at 0; any positive scale) of every
    labelled point, from one solve with c right-hand sides and the diagonal of ``(I - alpha S)^-1``
    (``diagonal``: ``exact`` or ``probe``). Equal to ``(P_LL - diag(P_LL)) Y_L`` up to the solver's
    tolerance and the factor 1 - alpha. ``P_diag``: that diagonal at ``labeled`` (l,), as
    :func:`propagation_diagonal` returned it for the same S, labelled points, alpha and dtype; it depends on
    neither the labels nor c, so several label sets on one graph reuse it (then ``diagonal``, ``distance`` and
    ``block`` are not read). Returns (scores, stats; for ``probe`` with a check, ``_exact_scores``: the
    checked rows and their scores with the exact diagonal, for the probe's effect)."""
    t0 = time.perf_counter()
    labeled = np.asarray(labeled, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    prepared = _prepare(S, labeled, dtype)
    Sd, rows, _ = prepared
    n = Sd.shape[0]
    Y = np.zeros((n, int(n_classes)), dtype=dtype)
    Y[rows, y] = 1.0
    F, it, _ = _solve(Sd, Y, alpha, tol, maxiter)
    F = F[rows].astype(np.float64)
    if P_diag is not None:
        d = np.asarray(P_diag, dtype=np.float64)
        if d.shape != (labeled.size,):
            raise ValueError(f"P_diag has shape {d.shape}; it must be ({labeled.size},), one per labelled point")
        st: dict[str, Any] = {"method": "given"}
    else:
        d, st = propagation_diagonal(S, labeled, alpha, method=diagonal, distance=distance, tol=tol,
                                     maxiter=maxiter, dtype=dtype, block=block, progress=progress, _prepared=prepared)
    check = st.pop("_check", None)
    F_check = None
    if check is not None:  # the checked points' scores with the exact diagonal (the probe's effect)
        pick, exact = check
        F_check = (pick, F[pick].copy(), exact)
    F[np.arange(y.size), y] -= d
    np.maximum(F, 0.0, out=F)
    stats = {"solve_iterations": int(it), "diagonal": st, "seconds": time.perf_counter() - t0}
    if F_check is not None:
        pick, Fp, exact = F_check
        Fp[np.arange(pick.size), y[pick]] -= exact
        stats["_exact_scores"] = (pick, np.maximum(Fp, 0.0))
    return F, stats
