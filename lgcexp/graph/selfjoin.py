"""The exact kNN self-join by symmetric blocks: faiss ``IndexFlatL2``'s neighbour lists at about half its
arithmetic.

A kNN graph searches every point against every other, so each distance is needed twice (``d_ij`` for the
list of i, ``d_ji`` for the list of j). faiss's search computes the whole ``n x n`` Gram matrix ``X X^T``;
here the points are cut into blocks of ``block`` rows and only the blocks ``(I, J)`` with ``J >= I`` are
multiplied (``n^2 d`` multiply-adds instead of ``2 n^2 d``). Each block updates the lists of its rows and of
its columns.

Selection. Every point keeps its ``k+1`` best (distance, index) pairs, ordered by distance and then by
index. A block entry is looked at only when its distance is at most the point's current threshold ``tau_i``
(the distance of its ``(k+1)``-th pair so far, which only falls), so after the first blocks almost
every entry is discarded by one comparison. Before the join, ``tau_i`` starts from the ``(k+1)``-th
smallest distance of i to an evenly spaced sample of ``sample`` points: an upper bound of the final
``(k+1)``-th distance, since those are ``k+1`` actual points. Discarding ``d > tau_i`` therefore never
loses a pair of the final list, and the final lists do not depend on the order in which blocks are met.

Same numbers as faiss. faiss's flat search (``faiss/utils/distances.cpp``, ``exhaustive_L2sqr_blas``)
computes in float32 ``d_ij = max((|x_i|^2 + |x_j|^2) - 2 <x_i, x_j>, 0)``, the norms by
``fvec_norms_L2sqr``, the inner products by sgemm, and keeps for each query the ``k+1`` smallest, ties
to the lower index. Here the same expression is evaluated in the same order with faiss's own norms, and
the same order (distance, index) is kept. The one term whose rounding depends on the BLAS's summation
order is the inner product. When X is integer-valued, every partial sum of ``<x_i, x_j>`` is an integer
of magnitude at most ``|x_i| |x_j|`` (Cauchy-Schwarz on the absolute values), so when
``|x_i|^2 |x_j|^2 < 2^48`` every partial sum is exact in float32 (24-bit significand) in any order, and
the distance equals faiss's bit for bit. Only points with ``|x_i|^2 max_j |x_j|^2 >= 2^48`` can meet a
pair that fails this (on MNIST's 0-255 pixels: 27 of 70,000); their lists are taken from faiss itself.
So on integer-valued data (raw pixels, counts) :func:`selfjoin_search` returns faiss's result exactly;
on other data it is an exact float32 search whose distances may differ from faiss's in the last bit
(and so, at a near-tie, the order of two neighbours), which is why :func:`lgcexp.graph.knn.knn_search`
uses it only for integer-valued data.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

log = logging.getLogger(__name__)

#: float32 significand: integers below 2**24 are exact, so products of norms below 2**48 keep dot products exact
EXACT_DOT_LIMIT = float(2 ** 48)
_INF_BITS = np.uint64(0x7F800000)  # bit pattern of float32 +inf, above every finite non-negative float32


def search_threads() -> int:
    """Worker threads for the join: :func:`lgcexp.devices.cpu_threads` (``OMP_NUM_THREADS`` when set, as
    faiss, else the CPUs this process may use)."""
    from ..devices import cpu_threads

    return cpu_threads()


def is_integer_valued(X: np.ndarray, chunk: int = 8192) -> bool:
    """True when every entry of X is a finite integer (so float32 arithmetic on it can be exact)."""
    for s in range(0, X.shape[0], chunk):
        part = np.asarray(X[s:s + chunk])
        if not (np.all(np.isfinite(part)) and np.array_equal(part, np.rint(part))):
            return False
    return True


def faiss_norms(Xf: np.ndarray) -> np.ndarray:
    """Squared norms of the rows of the float32 array Xf as faiss computes them (``fvec_norms_L2sqr``)."""
    from .search import import_faiss

    faiss = import_faiss()
    out = np.empty(Xf.shape[0], dtype=np.float32)
    faiss.fvec_norms_L2sqr(faiss.swig_ptr(out), faiss.swig_ptr(Xf), Xf.shape[1], Xf.shape[0])
    return out


def inexact_rows(Xf: np.ndarray) -> np.ndarray:
    """Rows i that may meet a pair whose float32 dot product is not exact: ``|x_i|^2 max_j |x_j|^2 >= 2^48``
    (squared norms summed exactly in float64; X integer-valued)."""
    sq = np.einsum("ij,ij->i", Xf, Xf, dtype=np.float64)
    return np.flatnonzero(sq * sq.max() >= EXACT_DOT_LIMIT) if sq.size else np.zeros(0, np.int64)


class _Lists:
    """The ``k1`` best (distance, index) pairs of every point, each pair packed in one uint64 key
    ``float32 bits << idbits | index`` (a non-negative float32's bits order like its value), kept sorted."""

    def __init__(self, n: int, k1: int):
        self.n, self.k1 = n, k1
        self.idbits = max(1, int(n).bit_length())
        self.idmask = np.uint64((1 << self.idbits) - 1)
        empty = (_INF_BITS << np.uint64(self.idbits)) | self.idmask
        self.keys = np.full((n, k1), empty, dtype=np.uint64)
        self.tau = np.full(n, np.inf, dtype=np.float32)  # filter: distances above it cannot enter a list

    def pack(self, dist: np.ndarray, idx: np.ndarray) -> np.ndarray:
        bits = np.ascontiguousarray(dist, dtype=np.float32).view(np.uint32).astype(np.uint64)
        return (bits << np.uint64(self.idbits)) | idx.astype(np.uint64)

    def unpack(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dist = (keys >> np.uint64(self.idbits)).astype(np.uint32).view(np.float32)
        return dist, (keys & self.idmask).astype(np.int64)

    def merge(self, rows: np.ndarray, cols: np.ndarray, dist: np.ndarray) -> None:
        """Offer the pairs (rows[t] -> cols[t] at dist[t]) to the lists of ``rows``."""
        if rows.size == 0:
            return
        keys = self.pack(dist, cols)
        better = keys < self.keys[rows, -1]
        rows, keys = rows[better], keys[better]
        if rows.size == 0:
            return
        ur, group = np.unique(rows, return_inverse=True)
        m = ur.size
        all_groups = np.concatenate([np.repeat(np.arange(m), self.k1), group])
        all_keys = np.concatenate([self.keys[ur].ravel(), keys])
        gbits = max(1, int(m).bit_length())
        if 31 + self.idbits + gbits <= 64:  # one sort of (group, key) packed in a uint64
            packed = np.sort((all_groups.astype(np.uint64) << np.uint64(31 + self.idbits)) | all_keys)
            sorted_groups = (packed >> np.uint64(31 + self.idbits)).astype(np.int64)
            sorted_keys = packed & np.uint64((1 << (31 + self.idbits)) - 1)
        else:
            order = np.lexsort((all_keys, all_groups))
            sorted_groups, sorted_keys = all_groups[order], all_keys[order]
        starts = np.searchsorted(sorted_groups, np.arange(m))
        rank = np.arange(sorted_groups.size) - starts[sorted_groups]
        best = sorted_keys[rank < self.k1].reshape(m, self.k1)
        self.keys[ur] = best
        kth, _ = self.unpack(best[:, -1])
        self.tau[ur] = np.minimum(self.tau[ur], kth)


def _true_positions(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)`` for a sparse boolean array, reading it eight bytes at a time."""
    flat = mask.reshape(-1)
    m = flat.size - flat.size % 8
    words = np.flatnonzero(flat[:m].view(np.uint64))
    if words.size:
        pos = (words[:, None] * 8 + np.arange(8)).ravel()
        pos = pos[flat[pos]]
    else:
        pos = words
    tail = np.flatnonzero(flat[m:]) + m
    return np.concatenate([pos, tail]) if tail.size else pos


def rounding_margin(sq: np.ndarray, terms: int) -> np.ndarray:
    """Per point i, a bound on the error of a float32 squared distance to any point j by the norm formula
    ``|a_i|^2 + |a_j|^2 - 2 <a_i, a_j>`` over ``terms`` coordinates, in any summation order: each rounded
    sum of t terms is within ``t u sum|terms|`` (u = 2^-24), and ``|<a_i, a_j>| <= (|a_i|^2 + |a_j|^2) / 2``,
    so the error is below ``(2 terms + 8) u (|a_i|^2 + |a_j|^2)``; ``|a_j|^2`` is taken as the largest."""
    sq = np.asarray(sq, dtype=np.float64)
    top = float(sq.max()) if sq.size else 0.0
    return (2 * terms + 8) * 2.0 ** -24 * (sq + top) * 1.01


def projection_bounds(X: np.ndarray, dims: int, sample: int = 8192, chunk: int = 8192
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates W (n, dims+1) whose squared Euclidean distances are lower bounds of those of X, and a
    per-point bound of the float64 error of those coordinates' squared distances.

    With c the mean, V the top ``dims`` principal axes of (a strided sample of) X, orthonormal,
    ``z_i = V^T (x_i - c)`` and ``r_i = |(I - V V^T)(x_i - c)| = sqrt(|x_i - c|^2 - |z_i|^2)``, Pythagoras and
    the reverse triangle inequality give ``|x_i - x_j|^2 = |z_i - z_j|^2 + |(I - V V^T)(x_i - x_j)|^2
    >= |z_i - z_j|^2 + (r_i - r_j)^2``, so ``w_i = [z_i, r_i]`` will do. ``r_i`` comes from a difference of
    float64 sums (error below ``1e-12 |x_i - c|^2`` relative to d <= 10^3): its error is below
    ``1e-6 |x_i - c|``, which moves ``(r_i - r_j)^2`` by less than ``1e-5 max |x - c|^2``."""
    n, d = X.shape
    step = max(1, n // sample)
    sub = np.asarray(X[::step], dtype=np.float64)
    c = sub.mean(axis=0)
    sub -= c
    _, V = np.linalg.eigh(sub.T @ sub)
    V = np.ascontiguousarray(V[:, ::-1][:, :dims])
    W = np.empty((n, dims + 1), dtype=np.float64)
    s = np.empty(n)
    for i0 in range(0, n, chunk):
        part = np.asarray(X[i0:i0 + chunk], dtype=np.float64) - c
        s[i0:i0 + chunk] = np.einsum("ij,ij->i", part, part)
        W[i0:i0 + chunk, :dims] = part @ V
    W[:, dims] = np.sqrt(np.maximum(s - np.einsum("ij,ij->i", W[:, :dims], W[:, :dims]), 0.0))
    return W, 1e-5 * (s + s.max())


def tree_order(W: np.ndarray, leaf: int, probe: int = 2048) -> list[np.ndarray]:
    """Points in blocks of at most ``leaf`` close ones: a principal-axis tree (split a set at the median of
    its projection on its first principal axis, estimated on at most ``probe`` points, until a set fits in a
    leaf). Only the speed depends on it: the join's result does not depend on the order of the blocks."""
    leaves: list[np.ndarray] = []
    stack = [np.arange(W.shape[0])]
    while stack:
        idx = stack.pop()
        if idx.size <= leaf:
            leaves.append(idx)
            continue
        P = W[idx]
        P = P - P.mean(axis=0)
        axis = np.linalg.svd(P[:: max(1, idx.size // probe)], full_matrices=False)[2][0]
        o = idx[np.argsort(P @ axis, kind="stable")]
        h = idx.size // 2
        stack += [o[h:], o[:h]]  # the lower half comes off the stack first
    return leaves


def selfjoin_search(X: np.ndarray, k: int, *, block: int = 1024, dims: int = 64, threads: int | None = None,
                    stats: dict[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest neighbours of every row of X among the others, by the symmetric blocked self-join:
    (distances, indices), each (n, k), as :func:`lgcexp.graph.knn.knn_search` returns them. On
    integer-valued X the result equals faiss ``IndexFlatL2``'s bit for bit (module docstring).

    ``block``: points per block; ``dims``: principal axes of the lower bound that skips pairs (0: none);
    ``stats``: a dict that receives ``pairs`` (n (n + 1) / 2), ``pairs_computed`` (distances evaluated by the
    formula), ``blocks`` / ``blocks_skipped`` (off-diagonal block pairs) and ``faiss_rows``.

    With several threads the BLAS runs one thread in each (for the whole search: a multi-threaded BLAS
    next to the join's threads, or idling between its calls, cost up to 3x the CPU time on a busy machine).
    """
    nthreads = int(threads or search_threads())
    # the join's own threads each multiply a block: the BLAS gets one thread (no oversubscription)
    with threadpool_limits(limits=1, user_api="blas") if nthreads > 1 else contextlib.nullcontext():
        return _selfjoin(X, k, block, dims, nthreads, stats)


def _selfjoin(X: np.ndarray, k: int, block: int, dims: int, nthreads: int, stats: dict[str, Any] | None
              ) -> tuple[np.ndarray, np.ndarray]:
    from .search import drop_self

    X = np.ascontiguousarray(X, dtype=np.float32)
    n, d = X.shape
    if not 1 <= k < n:
        raise ValueError(f"k={k} must be in [1, n-1] (n={n})")
    if not np.all(np.isfinite(X)):
        raise ValueError("X has non-finite values")
    k1 = k + 1
    block = int(max(block, k1))
    norms0 = faiss_norms(X)
    err = rounding_margin(norms0, d)  # |computed d_ij - d_ij| < err_i
    dims = int(min(max(dims, 0), d - 1))
    prune = dims > 0 and n > 2 * block
    if prune:
        W64, werr = projection_bounds(X, dims)
        W = W64.astype(np.float32)
        wn = np.einsum("ij,ij->i", W, W, dtype=np.float64)
        # a computed lower bound below lb_ij - margin_i is below the distance computed by the formula
        margin = (err + werr + rounding_margin(wn, dims + 3) + 8 * 2.0 ** -24 * wn).astype(np.float32) * 2
        leaves = tree_order(W64, block)
    else:
        leaves = [np.arange(s, min(s + block, n)) for s in range(0, n, block)]
    perm = np.concatenate(leaves)
    Xs = X[perm]
    norms = norms0[perm]
    bounds = np.cumsum([0] + [leaf.size for leaf in leaves])
    nb = len(leaves)
    if prune:
        margin = margin[perm]
        Wp, wnp = W[perm], wn[perm].astype(np.float32)
        one = np.ones((n, 1), dtype=np.float32)
        LA = np.concatenate([Wp, wnp[:, None], one], axis=1)  # LA_i . LB_j = |w_i - w_j|^2 up to rounding
        LB = np.concatenate([-2.0 * Wp, one, wnp[:, None]], axis=1)
    lists = _Lists(n, k1)
    counts = {"pairs_computed": 0, "blocks_skipped": 0}
    lock = threading.Lock()

    def count(key: str, value: int) -> None:
        with lock:
            counts[key] += value

    def distances(R: np.ndarray, nr: np.ndarray, C: np.ndarray, nc: np.ndarray) -> np.ndarray:
        """float32 ``(|x_r|^2 + |x_c|^2) - 2 <x_r, x_c>`` (rounded as faiss rounds it), clamped at 0."""
        D = R @ (-2.0 * C).T  # scaling by -2 is exact
        D += nr[:, None] + nc[None, :]
        return np.maximum(D, 0, out=D)

    def diagonal(I: int) -> tuple[Any, ...]:
        """All pairs within block I; starts each point's threshold at its (k+1)-th distance in its block."""
        i0, i1 = bounds[I], bounds[I + 1]
        D = distances(Xs[i0:i1], norms[i0:i1], Xs[i0:i1], norms[i0:i1])
        count("pairs_computed", (i1 - i0) * (i1 - i0 + 1) // 2)
        if i1 - i0 >= k1:
            lists.tau[i0:i1] = np.minimum(lists.tau[i0:i1], np.partition(D, k1 - 1, axis=1)[:, k1 - 1])
        pos = _true_positions(D <= lists.tau[i0:i1, None])
        r, c = pos // (i1 - i0), pos % (i1 - i0)
        return ((r + i0, perm[c + i0], D.reshape(-1)[pos]),)

    def join(I: int, J: int) -> tuple[Any, ...]:
        """Pairs (block I) x (block J), J != I, for the lists of both sides."""
        i0, i1, j0, j1 = bounds[I], bounds[I + 1], bounds[J], bounds[J + 1]
        ri, ci = np.arange(i1 - i0), np.arange(j1 - j0)
        if prune:  # pairs whose lower bound exceeds both points' thresholds cannot enter either list
            L = LA[i0:i1] @ LB[j0:j1].T
            Mr = L <= (lists.tau[i0:i1] + margin[i0:i1])[:, None]
            Mc = L <= (lists.tau[j0:j1] + margin[j0:j1])[None, :]
            ri = np.flatnonzero(Mr.any(axis=1) | Mc.any(axis=1))
            ci = np.flatnonzero(Mr.any(axis=0) | Mc.any(axis=0))
            if ri.size == 0:
                count("blocks_skipped", 1)
                return ()
        count("pairs_computed", ri.size * ci.size)
        D = distances(Xs[ri + i0], norms[ri + i0], Xs[ci + j0], norms[ci + j0])
        w = ci.size
        pos = _true_positions(D <= lists.tau[ri + i0, None])
        r, c = ri[pos // w] + i0, ci[pos % w] + j0
        row_side = (r, perm[c], D.reshape(-1)[pos])
        pos = _true_positions(D <= lists.tau[None, ci + j0])
        r, c = ri[pos // w] + i0, ci[pos % w] + j0
        return row_side, (c, perm[r], D.reshape(-1)[pos])

    tasks = [(diagonal, (I,)) for I in range(nb)] + [(join, (I, J)) for I in range(nb) for J in range(I + 1, nb)]
    if nthreads > 1:
        with ThreadPoolExecutor(nthreads) as pool:
            window = 2 * nthreads
            pending = [pool.submit(f, *a) for f, a in tasks[:window]]
            nxt = len(pending)
            while pending:
                sides = pending.pop(0).result()
                if nxt < len(tasks):
                    f, a = tasks[nxt]
                    pending.append(pool.submit(f, *a))
                    nxt += 1
                for side in sides:
                    lists.merge(*side)
    else:
        for f, a in tasks:
            for side in f(*a):
                lists.merge(*side)

    keys = np.empty_like(lists.keys)
    keys[perm] = lists.keys  # back to the caller's row order (the column indices are the caller's already)
    sq, idx = lists.unpack(keys)
    dist, idx = drop_self(sq, idx, np.arange(n))
    risky = inexact_rows(X)
    if risky.size:  # rows that may meet a dot product whose float32 rounding depends on the BLAS: faiss's own
        dist[risky], idx[risky] = faiss_rows(X, k, risky)
    if stats is not None:
        stats.update(counts, pairs=n * (n + 1) // 2, blocks=nb * (nb - 1) // 2, faiss_rows=int(risky.size),
                     dims=dims if prune else 0, block=block)
    return dist, idx


def faiss_rows(Xf: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """faiss's exact search for the points ``rows`` only, through the same (BLAS) code path as a search of
    all points: faiss takes a slower per-pair path for few queries, so the query set is padded."""
    from .search import faiss_exact_search, import_faiss

    faiss = import_faiss()
    n, d = Xf.shape
    need = -(-int(faiss.cvar.distance_compute_blas_threshold) // max(d, 1)) + search_threads()
    queries = np.asarray(rows, dtype=np.int64)
    if queries.size < need:
        fill = np.setdiff1d(np.arange(min(n, need + queries.size)), queries)[: need - queries.size]
        queries = np.concatenate([queries, fill])
    dist, idx = faiss_exact_search(Xf, k, queries)
    return dist[: len(rows)], idx[: len(rows)]
