"""GPU (CuPy, cuSPARSE) against CPU (numpy, scipy) in one run, on the MNIST kNN graph (issue 24). Not a test.

Run on the lent GPU machine (numpy, scipy, scikit-learn, CuPy; no hydra, omegaconf, TensorFlow or faiss are
needed, none is imported), with the repository as the working directory::

    python -m benchmarks gpu --data .gpu/mnist.npz --out $OUT

(``--device cpu --n 3000 --budget 60`` runs the CPU halves only on a small subset: what the test does.)
Each section is timed on both devices in the same process, in this order (but ``million``, the longest,
first), while the time budget (``--budget`` seconds, default 330) lasts; a failing section records its error
text and the run goes on:

1. ``graph``: the exact 15-NN (search depth 15) graph of the points: on the GPU a blocked brute-force
   search (float64 GEMM, exact on integer pixels, ties broken by index, top-k by ``argpartition``), on the
   CPU lgcexp's symmetric self-join (what ``lgcexp dataset=mnist`` uses: faiss's neighbours bit for bit) or,
   below 8192 points, the same brute force in numpy; then W (Gaussian, sigma = mean heuristic, union) and
   S = D^-1/2 W D^-1/2 from each list by lgcexp's own code; neighbour lists and S compared.
2. ``lgc``: the LGC solve ``(I - 0.9 S) F = Y`` (100 labels, seed 0, the CPU graph on both devices) by
   :func:`lgcexp.solvers.shifted.shifted_solve` (RCM order, argmax certificate), and without the certificate to
   1e-10 (on the CPU the fused numba kernels when numba is installed, ``cpu_path``); warm (renumbering and
   transfer done once before), best of 3; argmax of every point compared;
   "end to end": the search + W + S + the first (cold) certified solve on each device.
3. ``cg_iter``: one conjugate-gradient iteration with 10 right-hand sides (float64 and float32): 20
   iterations of :func:`lgcexp.solvers.cg.cg` divided by 20, and the bare sparse product
   (:func:`lgcexp.solvers.cg.sparse_product`); on the GPU also with column-major blocks, which CuPy multiplies by
   cuSPARSE (products compared), and a per-operation profile of a 1000-column float32 block.
4. ``pll``: P_LL for ``--pll-labels`` (1000) labels, float32, tol 1e-6 (AutoL's), by
   :func:`lgcexp.algorithms.propagation.propagation_submatrix`: all columns on the GPU (and again with
   column-major blocks, cuSPARSE); on the CPU the first ``--pll-cpu-cols`` (256) columns, scaled to all; the
   common columns compared.
5. ``eig``: the 20 largest eigenpairs of S (the smallest of L = I - S): cupyx.scipy.sparse.linalg.eigsh
   against scipy.sparse.linalg.eigsh (tol 1e-8), eigenvalues and residuals compared.
6. ``million`` (with ``--million N``): AutoL's run on N points, the InfiMNIST-style set of docs/scale.md
   (:mod:`lgcexp.data.infimnist`, seed 0; made first, in one process per core): the exact 15-NN graph on the
   GPU (:func:`knn_float`: float32 GEMM candidates, chunk minima, float64 re-rank; checked against an exact
   float64 CPU search of ``--million-check`` rows, whose time is scaled to all rows), then on that one graph
   P_LL of ``--million-labels`` labels (all columns on the GPU, ``--million-cpu-cols`` on the CPU by the fused
   kernels AutoL takes, scaled) and the final certified LGC solve on each device, argmax compared. AutoL's
   Adam loop needs TensorFlow, which that machine lacks; the run saves P_LL and the labels, and
   ``--finish <that out folder> --out <folder>`` runs lgcexp's own Adam loop on them here, adds its seconds
   to both devices' AutoL totals (its cost does not depend on N) and judges the dropped labels.

Writes ``gpu.json`` (after every section) and ``gpu.md`` to ``--out``; progress lines go to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from benchmarks.common import OUT, workers

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


class Budget:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def sync(xp) -> None:
    from lgcexp.devices import synchronize

    synchronize(xp)


def timed(mod, fn, /, *a, **kw):
    """(fn(*a, **kw), wall seconds), the GPU's queue drained before and after when ``mod`` is cupy."""
    sync(mod)
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    sync(mod)
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------------------
# kNN search: blocked brute force, generic over numpy / cupy
# ---------------------------------------------------------------------------------------------------------


def brute_knn(xp, X: np.ndarray, k: int, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of every row among the others: (distances float64, indices int64), each
    (n, k), nearest first, ties broken by the smaller index. Squared distances by a float64 GEMM, exact for
    integer-valued X with ``max ||x||^2 < 2^53 / n``; the order key ``d2 * 2^b + j`` is then exact too."""
    n = X.shape[0]
    Xd = xp.asarray(X, dtype=xp.float64)
    sq = (Xd * Xd).sum(axis=1)
    shift = float(2 ** int(np.ceil(np.log2(max(n, 2)))))
    dist = np.empty((n, k))
    idx = np.empty((n, k), dtype=np.int64)
    cols = xp.arange(n, dtype=xp.float64)
    for s in range(0, n, block):
        e = min(n, s + block)
        G = Xd[s:e] @ Xd.T
        G *= -2.0
        G += sq[s:e, None]
        G += sq[None, :]
        xp.maximum(G, 0.0, out=G)
        G[xp.arange(e - s), xp.arange(s, e)] = xp.inf        # self excluded
        G *= shift
        G += cols[None, :]                                 # key: (d2, index) lexicographic
        part = xp.argpartition(G, k - 1, axis=1)[:, :k]
        keys = xp.take_along_axis(G, part, axis=1)
        order = xp.argsort(keys, axis=1)
        nn = xp.take_along_axis(part, order, axis=1)
        d2 = xp.floor(xp.take_along_axis(keys, order, axis=1) / shift)
        dist[s:e] = _host(xp.sqrt(d2))
        idx[s:e] = _host(nn)
        del G
    return dist, idx


def _host(a):
    from lgcexp.devices import to_host

    return to_host(a)


def smallest_k(xp, V, k: int, chunk: int = 32, direct: int = 4096):
    """Column indices (B, k) of k smallest entries of each row of V (B, M), in no set order; exact by value.
    A row wider than ``direct`` is narrowed first: its k smallest entries lie in the k chunks (``chunk``
    consecutive columns) with the smallest minima, because a chunk outside them has k smaller minima
    before it; those k chunks are found the same way, one level down. One pass over V (the chunk minima)
    instead of a selection over every entry. Every row needs at least k finite entries."""
    B, M = V.shape
    if M <= max(direct, k * chunk):
        return xp.argpartition(V, k - 1, axis=1)[:, :k]
    m = -(-M // chunk)
    if m * chunk != M:  # pad the last chunk (a copy; the caller avoids it for the widest level)
        V = xp.concatenate([V, xp.full((B, m * chunk - M), xp.inf, dtype=V.dtype)], axis=1)
    mins = V.reshape(B, m, chunk).min(axis=2)
    best = smallest_k(xp, mins, k, chunk, direct)
    cand = (best[:, :, None] * chunk + xp.arange(chunk)[None, None, :]).reshape(B, k * chunk)
    pick = xp.argpartition(xp.take_along_axis(V, cand, axis=1), k - 1, axis=1)[:, :k]
    return xp.take_along_axis(cand, pick, axis=1)


def knn_float(xp, X: np.ndarray, k: int, *, block: int = 2048, spare: int = 5, chunk: int = 32,
              direct: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest neighbours of every row of real-valued X among the others, (distances float64, indices
    int64), each (n, k), nearest first (equal distances by index among the candidates kept: more than
    ``spare`` points tied at the k-th distance may leave out a smaller index). Candidates: the k + ``spare`` smallest of
    ``|y|^2 - 2 x.y`` by one float32 GEMM per block of rows on the centred points (:func:`smallest_k`); they
    are re-ranked by their exact float64 distances in X. Exact unless float32 rounding moves a true
    neighbour beyond k + spare."""
    n, d = X.shape
    kk = min(n - 1, k + spare)
    npad = -(-n // chunk) * chunk
    step = 65536
    mean = sum(np.asarray(X[s:s + step], dtype=np.float64).sum(axis=0) for s in range(0, n, step)) / n
    Xo = xp.asarray(X)                               # the points as given, for the exact distances
    Xc = xp.zeros((npad, d), dtype=xp.float32)       # centred: |y|^2 - 2 x.y cancels less in float32
    for s in range(0, n, step):
        e = min(n, s + step)
        Xc[s:e] = xp.asarray((np.asarray(X[s:e], dtype=np.float64) - mean).astype(np.float32))
    sq = xp.full(npad, xp.inf, dtype=xp.float32)     # padding rows: never a neighbour
    for s in range(0, n, step):
        e = min(n, s + step)
        sq[s:e] = (Xc[s:e].astype(xp.float64) ** 2).sum(axis=1).astype(xp.float32)
    dist = np.empty((n, k))
    idx = np.empty((n, k), dtype=np.int64)
    t0 = time.perf_counter()
    for b, s in enumerate(range(0, n, block)):
        if b and b % 100 == 0:
            say(f"knn_float: {s:,d} of {n:,d} rows, {time.perf_counter() - t0:.1f}s")
        e = min(n, s + block)
        G = (Xc[s:e] * np.float32(-2.0)) @ Xc.T
        G += sq[None, :]
        G[xp.arange(e - s), xp.arange(s, e)] = xp.inf   # self excluded
        cand = xp.sort(smallest_k(xp, G, kk, chunk, direct), axis=1)
        del G
        Q = Xo[s:e].astype(xp.float64)
        d2 = ((Xo[cand].astype(xp.float64) - Q[:, None, :]) ** 2).sum(axis=2)
        stable = {"kind": "stable"} if xp is np else {}           # CuPy's sorts are stable
        order = xp.argsort(d2, axis=1, **stable)[:, :k]          # candidates in index order: ties by index
        dist[s:e] = _host(xp.sqrt(xp.take_along_axis(d2, order, axis=1)))
        idx[s:e] = _host(xp.take_along_axis(cand, order, axis=1))
    return dist, idx


def exact_rows_knn(X: np.ndarray, rows: np.ndarray, k: int, block: int = 65536, spare: int = 5
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The reference for :func:`knn_float` on the CPU: exact float64 k nearest neighbours of ``X[rows]``
    (self excluded, equal distances by index among the k + ``spare`` candidates kept), numpy GEMM over
    blocks."""
    kk = k + spare
    Q = np.asarray(X[rows], dtype=np.float64)
    sqq = (Q * Q).sum(axis=1)
    best_d = np.full((rows.size, 0), np.inf)
    best_i = np.empty((rows.size, 0), dtype=np.int64)
    for s in range(0, X.shape[0], block):
        Xb = np.asarray(X[s:s + block], dtype=np.float64)
        D2 = sqq[:, None] + (Xb * Xb).sum(axis=1)[None, :] - 2.0 * (Q @ Xb.T)
        np.maximum(D2, 0.0, out=D2)
        own = (rows >= s) & (rows < s + Xb.shape[0])
        D2[np.flatnonzero(own), rows[own] - s] = np.inf
        cols = np.broadcast_to(np.arange(s, s + Xb.shape[0]), D2.shape)
        D2 = np.concatenate([best_d, D2], axis=1)
        cols = np.concatenate([best_i, cols], axis=1)
        keep = np.argpartition(D2, kk - 1, axis=1)[:, :kk] if D2.shape[1] > kk else np.argsort(D2, axis=1)
        best_d = np.take_along_axis(D2, keep, axis=1)
        best_i = np.take_along_axis(cols, keep, axis=1)
    # exact distances of the kept, then (distance, index) order
    m = best_i.shape[1]
    d2 = ((np.asarray(X[best_i.ravel()], dtype=np.float64).reshape(rows.size, m, -1) - Q[:, None, :]) ** 2).sum(2)
    order = np.lexsort((best_i, d2), axis=1)[:, :k]
    return np.sqrt(np.take_along_axis(d2, order, axis=1)), np.take_along_axis(best_i, order, axis=1)


def graph_from_lists(dist, idx, k=15):
    from lgcexp.graph.base import Graph
    from lgcexp.graph.knn import affinity_from_neighbors

    W, sigma = affinity_from_neighbors(dist, idx, k, "mean", "union")
    return Graph(W=W, sigma=sigma, key="bench_gpu")


# ---------------------------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------------------------


def sec_graph(ctx, r):
    X = ctx["X"]
    k = ctx["k"]
    n = X.shape[0]
    from lgcexp.graph.selfjoin import is_integer_valued

    if not is_integer_valued(X):
        raise ValueError("the brute-force search here is exact for integer-valued data only")
    if ctx["cp"] is not None:
        say("graph: GPU brute-force search (warm-up on 2048 points)")
        brute_knn(ctx["cp"], X[:2048], k)
        (gd, gi), r["gpu_search_s"] = timed(ctx["cp"], brute_knn, ctx["cp"], X, k)
        say(f"graph: GPU search {r['gpu_search_s']:.2f}s")
    from lgcexp.graph.knn import SELFJOIN_MIN_POINTS

    if n >= SELFJOIN_MIN_POINTS:
        from lgcexp.graph.selfjoin import selfjoin_search

        say("graph: CPU self-join search (lgcexp's MNIST path)")
        (cd, ci), r["cpu_search_s"] = timed(np, selfjoin_search, X, k)
        r["cpu_search"] = "lgcexp.graph.selfjoin"
    else:
        say("graph: CPU brute-force search (numpy)")
        (cd, ci), r["cpu_search_s"] = timed(np, brute_knn, np, X, k)
        r["cpu_search"] = "brute force (numpy float64 GEMM)"
    say(f"graph: CPU search {r['cpu_search_s']:.2f}s")
    gcpu, r["cpu_affinity_s"] = timed(np, graph_from_lists, cd, ci, k)
    ctx["graph"] = gcpu
    r["nnz_S"] = int(gcpu.S.nnz)
    r["sigma"] = float(gcpu.sigma)
    if ctx["cp"] is not None:
        r["search_speedup"] = r["cpu_search_s"] / r["gpu_search_s"]
        r["same_neighbour_lists"] = float(np.mean(np.all(np.sort(ci, 1) == np.sort(gi, 1), axis=1)))
        r["same_neighbours_in_order"] = float(np.mean(np.all(ci == gi, axis=1)))
        r["max_abs_dist_diff"] = float(np.max(np.abs(cd - gd)))
        ggpu = graph_from_lists(gd, gi, k)
        D = (ggpu.S - gcpu.S).tocsr()
        r["max_abs_S_diff"] = float(np.abs(D.data).max(initial=0.0))
        A, B = ggpu.S.tocsr(), gcpu.S.tocsr()
        A.sort_indices()
        B.sort_indices()
        r["same_S_pattern"] = bool(np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices))
        ctx["gpu_search_affinity_s"] = r["gpu_search_s"] + r["cpu_affinity_s"]
    ctx["cpu_search_affinity_s"] = r["cpu_search_s"] + r["cpu_affinity_s"]


def _labels(ctx, n_labels, seed=0):
    from lgcexp.algorithms.base import label_matrix
    from lgcexp.labels import sample_and_corrupt

    y = ctx["y"]
    split = sample_and_corrupt(y, n_labels, 0.0, seed)
    return split, label_matrix(y.size, split.labeled, split.y_observed, int(y.max()) + 1)


def sec_lgc(ctx, r):
    from lgcexp.solvers.shifted import shifted_solve

    g = ctx["graph"]
    _, Y = _labels(ctx, ctx["lgc_labels"])
    preds = {}
    for dev, xp in ctx["modules"]:
        for cert in (True, False):
            tag = f"{dev}_{'cert' if cert else 'tol1e-10'}"
            deg = g.degree if cert else None
            # the first call pays the renumbering (once per graph, shared by the devices) and the transfer
            _, r[f"{tag}_first_call_s"] = timed(xp, shifted_solve, g.S, Y, 0.9, degree=deg, xp=xp, reorder=True)
            if cert and f"{dev}_search_affinity_s" in ctx:
                r[f"{dev}_end_to_end_s"] = ctx[f"{dev}_search_affinity_s"] + r[f"{tag}_first_call_s"]
            best, it = np.inf, None
            for _ in range(3):
                (F, it, rel), s = timed(xp, shifted_solve, g.S, Y, 0.9, degree=deg, xp=xp, reorder=True)
                best = min(best, s)
            r[f"{tag}_s"], r[f"{tag}_iterations"], r[f"{tag}_residual"] = best, int(it), float(rel)
            preds[tag] = F.argmax(axis=1)
            r[f"{tag}_accuracy"] = float(np.mean(preds[tag] == ctx["y"]))
            say(f"lgc: {tag} {best:.3f}s, {it} iterations")
    from lgcexp import devices
    from lgcexp.solvers.shifted import fused_available

    r["auto_module_for_this_solve"] = devices.solve_module(Y.size).__name__  # what lgc_propagate would use
    r["cpu_path"] = "fused numba kernels" if fused_available(Y.size) else "numpy/scipy block strategy"
    ref = preds["cpu_tol1e-10"]
    for tag, p in preds.items():
        r[f"{tag}_argmax_differs_from_cpu_tol1e-10"] = int(np.sum(p != ref))
    if "gpu_cert_s" in r:
        r["speedup_cert"] = r["cpu_cert_s"] / r["gpu_cert_s"]
        if "gpu_end_to_end_s" in r and "cpu_end_to_end_s" in r:
            r["speedup_end_to_end"] = r["cpu_end_to_end_s"] / r["gpu_end_to_end_s"]
        r["speedup_tol1e-10"] = r["cpu_tol1e-10_s"] / r["gpu_tol1e-10_s"]


def sec_cg_iter(ctx, r):
    from lgcexp.solvers.cg import NotConverged, cg, sparse_product
    from lgcexp.solvers.shifted import rcm_reordered, shifted_operator

    g = ctx["graph"]
    n = g.S.shape[0]
    m = 20
    rng = np.random.default_rng(0)
    B64 = rng.standard_normal((n, 10))
    runs = [(dev, xp, "C", "") for dev, xp in ctx["modules"]]
    if ctx["cp"] is not None:   # column-major blocks: CuPy's own product (cuSPARSE SpMM), not lgcexp's kernel
        runs.append(("gpu", ctx["cp"], "F", "_cusparse"))
    for dt in (np.float64, np.float32):
        for dev, xp, order, suffix in runs:
            S, _ = rcm_reordered(g.S, dt, xp)
            B = xp.asarray(B64.astype(dt), order=order)
            op = shifted_operator(S, 0.9)

            def iters(op=op, B=B):
                try:
                    cg(op, B, tol=0.0, maxiter=m)
                except NotConverged:
                    pass

            iters()
            _, s = timed(xp, iters)
            tag = f"{dev}_{np.dtype(dt).name}{suffix}"
            r[f"{tag}_iteration_ms"] = 1e3 * s / m
            V = xp.asarray(B64.astype(dt), order=order)
            sparse_product(S, V)
            _, s = timed(xp, lambda S=S, V=V: [sparse_product(S, V) for _ in range(m)])
            r[f"{tag}_spmm_ms"] = 1e3 * s / m
            if suffix:     # lgcexp's kernel against cuSPARSE on the same product
                mine = sparse_product(S, xp.ascontiguousarray(V))
                r[f"{tag}_max_abs_diff_to_kernel"] = float(xp.abs(mine - S @ V).max())
            say(f"cg_iter: {tag} {r[f'{tag}_iteration_ms']:.2f} ms/iteration, S@V {r[f'{tag}_spmm_ms']:.2f} ms")
        if ctx["cp"] is not None:
            nm = np.dtype(dt).name
            r[f"speedup_iteration_{nm}"] = r[f"cpu_{nm}_iteration_ms"] / r[f"gpu_{nm}_iteration_ms"]
    if ctx["cp"] is not None:
        _profile_wide_block(ctx["cp"], g, r)


def _profile_wide_block(cp, g, r, c: int = 1000) -> None:
    """Where one CG iteration's time goes on the GPU with a P_LL-wide float32 block (n x c): the product by
    lgcexp's kernel and by cuSPARSE, the column reductions and an update, each the mean of 10."""
    from lgcexp.solvers.cg import sparse_product
    from lgcexp.solvers.shifted import rcm_reordered

    S, _ = rcm_reordered(g.S, np.float32, cp)
    A = cp.asarray(np.random.default_rng(1).standard_normal((g.n, c), dtype=np.float32))
    B = A * np.float32(0.5)
    F = cp.asfortranarray(A)
    ones = cp.ones(g.n, dtype=cp.float32)
    ops = {"product_kernel": lambda: sparse_product(S, A), "product_cusparse_colmajor": lambda: S @ F,
           "einsum_colsum": lambda: cp.einsum("ij,ij->j", A, B), "gemv_colsum": lambda: ones @ (A * B),
           "einsum_colsum_colmajor": lambda: cp.einsum("ij,ij->j", F, F),
           "norm_axis0": lambda: cp.linalg.norm(A, axis=0), "axpy_inplace": lambda: A.__iadd__(B)}
    for name, op in ops.items():
        op()
        _, s = timed(cp, lambda op=op: [op() for _ in range(10)])
        r[f"wide_{c}_{name}_ms"] = 1e3 * s / 10
    r[f"wide_{c}_array_mib"] = g.n * c * 4 / 2**20
    say("cg_iter: " + ", ".join(f"{k[len(f'wide_{c}_'):]} {v:.2f}" for k, v in r.items() if k.startswith("wide_")))


def sec_pll(ctx, r):
    from lgcexp.algorithms.propagation import propagation_submatrix

    g = ctx["graph"]
    split, _ = _labels(ctx, ctx["pll_labels"])
    lab = split.labeled
    l = lab.size
    kw = {"tol": 1e-6, "dtype": "float32"}
    Pg = None
    if ctx["cp"] is not None:
        propagation_submatrix(g.S, lab[:64], 0.9, xp=ctx["cp"], **kw)   # warm-up
        (Pg, st), s = timed(ctx["cp"], propagation_submatrix, g.S, lab, 0.9, xp=ctx["cp"], **kw)
        r["gpu_s"], r["gpu_iterations"], r["gpu_block"] = s, st["iterations"], st["block"]
        say(f"pll: GPU {l} columns {s:.2f}s")
        # the same blocks column-major, multiplied by CuPy's own product (cuSPARSE SpMM)
        (Pr, _), r["gpu_cusparse_s"] = timed(ctx["cp"], _pll_columns, g.S, lab, l, xp=ctx["cp"], order="F",
                                              block=st["block"], **kw)
        r["gpu_cusparse_max_abs_diff"] = float(np.abs(Pr - Pg).max())
        say(f"pll: GPU column-major blocks, cuSPARSE {r['gpu_cusparse_s']:.2f}s")
    c = min(l, ctx["pll_cpu_cols"])
    # the CPU solves the first c columns: P_LL[:, :c] needs all rows, so solve columns lab[:c] and read rows lab
    (Pc, st), s = timed(np, _pll_columns, g.S, lab, c, **kw)
    r["cpu_columns"] = c
    r["cpu_s_measured"] = s
    r["cpu_s_scaled_to_all"] = s * l / c
    r["cpu_iterations"] = st
    say(f"pll: CPU {c} columns {s:.2f}s (scaled to {l}: {s * l / c:.1f}s)")
    if Pg is not None:
        r["speedup_scaled"] = r["cpu_s_scaled_to_all"] / r["gpu_s"]
        diff = np.abs(Pg[:, :c] - Pc)
        r["max_abs_diff"] = float(diff.max())
        r["max_rel_diff_to_max_entry"] = float(diff.max() / max(np.abs(Pc).max(), 1e-300))


def _pll_columns(S, lab, c, tol, dtype, xp=np, order="C", block=None):
    """Columns 0..c-1 of P_LL (rows at all of ``lab``) by :func:`lgcexp.solvers.shifted.shifted_solve` (block strategy)
    in blocks of ``block`` columns laid out in ``order`` in ``xp``, on S renumbered by reverse Cuthill-McKee
    (propagation_submatrix's non-fused path, with the layout chosen). ``block`` None: that path's CPU rule, about 4 MiB
    per array, 32 to 256 columns."""
    from lgcexp.devices import to_host
    from lgcexp.solvers.shifted import rcm_reordered, shifted_solve

    dt = np.dtype(dtype)
    n = S.shape[0]
    Sd, perm = rcm_reordered(S, dt, xp)
    pos = np.empty(n, dtype=np.int64)
    pos[perm] = np.arange(n)
    rows = pos[lab]
    if block is None:
        block = int(np.clip((1 << 22) // max(1, n * dt.itemsize), 32, 256))
    block = max(1, min(int(block), max(lab.size, 1)))
    P = np.zeros((lab.size, c))
    iters = 0
    for s0 in range(0, c, block):
        cols = np.arange(s0, min(c, s0 + block))
        E = xp.zeros((n, cols.size), dtype=dt, order=order)
        E[xp.asarray(rows[cols]), xp.arange(cols.size)] = 1.0
        X, it, _ = shifted_solve(Sd, E, 0.9, tol=tol, strategy="block")
        X *= 1.0 - 0.9
        P[:, cols] = to_host(X[xp.asarray(rows)])
        iters = max(iters, it)
    np.maximum(P, 0.0, out=P)
    return P, iters


def sec_eig(ctx, r):
    import scipy.sparse.linalg as spla

    g = ctx["graph"]
    p = ctx["eig_p"]
    vals = {}
    for dev, xp in ctx["modules"]:
        if xp is np:
            S = g.S
            fn = spla.eigsh
        else:
            import cupyx.scipy.sparse as csp
            import cupyx.scipy.sparse.linalg as cspla

            S = csp.csr_matrix(g.S)
            fn = cspla.eigsh
        v0 = None
        (w, U), s = timed(xp, fn, S, k=p, which="LA", tol=1e-8)
        w, U = _host(w), _host(U)
        order = np.argsort(w)[::-1]
        w, U = w[order], U[:, order]
        res = np.linalg.norm(g.S @ U - U * w, axis=0)
        r[f"{dev}_s"] = s
        r[f"{dev}_max_residual"] = float(res.max())
        r[f"{dev}_lambda_max"] = float(w[0])
        r[f"{dev}_lambda_min"] = float(w[-1])
        vals[dev] = w
        say(f"eig: {dev} {p} pairs {s:.2f}s, max residual {res.max():.1e}")
        del v0
    if "gpu" in vals:
        r["speedup"] = r["cpu_s"] / r["gpu_s"]
        r["max_abs_eigenvalue_diff"] = float(np.max(np.abs(vals["gpu"] - vals["cpu"])))


def sec_million(ctx, r):
    """AutoL's run on ``--million`` InfiMNIST-style points (lgcexp.data.infimnist, the set of docs/scale.md),
    GPU against CPU on the same graph: P_LL of ``--million-labels`` labels (AutoL's alpha, float32, tol 1e-6)
    and the final certified LGC solve. The Adam loop (TensorFlow, not on the lent machine) runs on the saved
    P_LL afterwards (``--finish``); its cost does not grow with n."""
    from lgcexp.algorithms.base import label_matrix
    from lgcexp.algorithms.propagation import propagation_submatrix
    from lgcexp.graph.knn_approx import recall_at_k
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.solvers.shifted import rcm_reordered, shifted_solve

    n, k, l, cp = ctx["million"], ctx["k"], ctx["million_labels"], ctx["cp"]
    if "million_files" in ctx:
        X, y = np.load(ctx["million_files"][0]), np.load(ctx["million_files"][1]).astype(np.int64)
        r["data_s"] = ctx["million_data_s"]
    else:                          # the digits themselves (a small check run)
        X, y = ctx["X"][:n], ctx["y"][:n]
        r["data_s"] = 0.0
    r["n"] = int(n)
    # 1. the exact 15-NN graph: float32 GEMM candidates re-ranked in float64 (the GPU, else numpy)
    sx = cp if cp is not None else np
    r["search_module"] = sx.__name__
    if cp is not None:
        knn_float(cp, X[:4096], k)      # warm-up: the kernels compiled
    (dist, idx), r["search_s"] = timed(sx, knn_float, sx, X, k)
    say(f"million: {sx.__name__} search {r['search_s']:.1f}s")
    ctx["flush"]()
    rows = np.random.default_rng(0).choice(n, size=min(n, ctx["million_check"]), replace=False)
    (cd, ci), s = timed(np, exact_rows_knn, X, rows, k)
    r["cpu_reference_rows"], r["cpu_reference_s"] = int(rows.size), s
    r["cpu_reference_s_scaled_to_all"] = s * n / rows.size
    r["recall_at_k"] = recall_at_k(idx[rows], dist[rows], ci, cd)
    r["same_lists_in_order"] = float(np.mean(np.all(ci == idx[rows], axis=1)))
    r["max_abs_dist_diff"] = float(np.max(np.abs(cd - dist[rows])))
    say(f"million: recall@{k} {r['recall_at_k']:.5f} on {rows.size} rows (CPU reference {s:.1f}s)")
    try:   # lgcexp's own exact CPU search (faiss IndexFlatL2, every core) on the same rows, scaled
        from lgcexp.graph.search import faiss_exact_search

        faiss_exact_search(X[:2000], k, rows[:10] % 2000)
        (fd, fi), s = timed(np, faiss_exact_search, X, k, rows)
        r["cpu_faiss_s"], r["cpu_faiss_s_scaled_to_all"] = s, s * n / rows.size
        r["recall_at_k_faiss_vs_reference"] = recall_at_k(fi, fd, ci, cd)
        r["search_speedup_vs_faiss_scaled"] = r["cpu_faiss_s_scaled_to_all"] / r["search_s"]
        say(f"million: faiss CPU search of {rows.size} rows {s:.1f}s")
    except Exception as exc:  # noqa: BLE001 - no faiss on that machine: recorded
        r["cpu_faiss"] = f"not run: {type(exc).__name__}: {exc}"
    ctx["flush"]()
    del X
    g, r["affinity_s"] = timed(np, graph_from_lists, dist, idx, k)
    r["nnz_S"], r["sigma"] = int(g.S.nnz), float(g.sigma)
    del dist, idx
    # 2. labels: stratified sample, uniform noise
    split = sample_and_corrupt(y, l, ctx["million_noise"], 0)
    lab = split.labeled
    alpha = 1.0 / (1.0 + 0.1111)                      # AutoL's default mu
    kw = {"tol": 1e-6, "dtype": "float32"}
    _, r["renumber_s"] = timed(np, rcm_reordered, g.S, np.float32)   # once per graph, both devices use it
    # 3. P_LL: every column on the GPU; on the CPU (the fused kernels AutoL takes) the first columns, scaled
    P = None
    if cp is not None:
        propagation_submatrix(g.S, lab[:64], alpha, xp=cp, **kw)     # warm-up: transfer, kernels
        (P, st), r["pll_gpu_s"] = timed(cp, propagation_submatrix, g.S, lab, alpha, xp=cp, **kw)
        r["pll_gpu_iterations"], r["pll_gpu_block"] = st["iterations"], st["block"]
        say(f"million: P_LL GPU {l} columns {r['pll_gpu_s']:.1f}s (blocks of {st['block']})")
        (P1, st), r["pll_gpu_one_block_s"] = timed(cp, propagation_submatrix, g.S, lab, alpha, xp=cp, block=l, **kw)
        r["pll_gpu_one_block_max_abs_diff"] = float(np.abs(P1 - P).max())
        say(f"million: P_LL GPU {l} columns in one block {r['pll_gpu_one_block_s']:.1f}s")
        del P1
        ctx["flush"]()
    c = min(l, ctx["million_cpu_cols"])
    m = min(n, 70000)    # the fused float32 kernels compiled first, on the graph of the first points
    propagation_submatrix(g.S[:m][:, :m], np.arange(0, m, max(1, m // 32))[:32], alpha, xp=np, **kw)
    (Pc, st), r["pll_cpu_s_measured"] = timed(np, propagation_submatrix, g.S, lab[:c], alpha, xp=np, **kw)
    r["pll_cpu_columns"], r["pll_cpu_iterations"] = c, st["iterations"]
    r["pll_cpu_s_scaled_to_all"] = r["pll_cpu_s_measured"] * l / c
    say(f"million: P_LL CPU {c} columns {r['pll_cpu_s_measured']:.1f}s (scaled to {l}: "
        f"{r['pll_cpu_s_scaled_to_all']:.0f}s)")
    ctx["flush"]()
    if P is not None:
        diff = np.abs(P[:c, :c] - Pc)
        r["pll_max_abs_diff"] = float(diff.max())
        r["pll_max_rel_diff_to_max_entry"] = float(diff.max() / max(np.abs(Pc).max(), 1e-300))
        r["pll_speedup_scaled"] = r["pll_cpu_s_scaled_to_all"] / r["pll_gpu_s"]
    # 4. the final LGC solve (alpha 0.9, argmax certificate) with the observed labels, on each device
    Y = label_matrix(n, lab, split.y_observed, int(y.max()) + 1)
    preds = {}
    for dev, xp in ctx["modules"]:
        (F, it, _), first = timed(xp, shifted_solve, g.S, Y, 0.9, degree=g.degree, xp=xp, reorder=True)
        (F, it, _), warm = timed(xp, shifted_solve, g.S, Y, 0.9, degree=g.degree, xp=xp, reorder=True)
        r[f"lgc_{dev}_first_call_s"], r[f"lgc_{dev}_s"], r[f"lgc_{dev}_iterations"] = first, warm, int(it)
        preds[dev] = F.argmax(axis=1)
        unl = np.ones(n, dtype=bool)
        unl[lab] = False
        r[f"lgc_{dev}_unlabelled_accuracy"] = float(np.mean(preds[dev][unl] == y[unl]))
        say(f"million: LGC {dev} {warm:.2f}s ({it} iterations)")
        ctx["flush"]()
    if "gpu" in preds:
        r["lgc_argmax_differs_gpu_cpu"] = int(np.sum(preds["gpu"] != preds["cpu"]))
        r["lgc_speedup"] = r["lgc_cpu_s"] / r["lgc_gpu_s"]
        r["autol_gpu_s_without_adam"] = r["pll_gpu_s"] + r["lgc_gpu_s"]
        r["autol_cpu_s_without_adam"] = r["pll_cpu_s_scaled_to_all"] + r["lgc_cpu_s"]
        r["autol_speedup_without_adam"] = r["autol_cpu_s_without_adam"] / r["autol_gpu_s_without_adam"]
    # 5. what the Adam loop needs, for --finish
    out = ctx["out"]
    out.mkdir(parents=True, exist_ok=True)
    P = P if P is not None else Pc      # without a GPU: the CPU's labels (the first c)
    m = P.shape[0]
    np.save(out / "million_pll.npy", P)
    np.savez(out / "million_split.npz", labeled=lab[:m], y_observed=split.y_observed[:m],
             y_clean=split.y_clean[:m], flipped=split.flipped[:m], n_classes=int(y.max()) + 1)
    r["saved"] = f"million_pll.npy ({m} x {m}, {'GPU' if m == l and cp is not None else 'CPU'}), million_split.npz"


SECTIONS = [("million", sec_million, 60), ("graph", sec_graph, 0), ("lgc", sec_lgc, 20), ("cg_iter", sec_cg_iter, 10),
            ("pll", sec_pll, 40), ("eig", sec_eig, 40)]


def environment(ctx) -> dict:
    import scipy

    env = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
           "cpu_count": os.cpu_count(), "load_before": round(os.getloadavg()[0], 2), "device_arg": ctx["device"]}
    cp = ctx["cp"]
    if cp is not None:
        env["cupy"] = cp.__version__
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props.get("name", b"")
        env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        env["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
    else:
        env["gpu"] = None
    blocked = [m for m in ("hydra", "omegaconf", "tensorflow", "faiss") if sys.modules.get(m) is not None]
    env["imported_of_hydra_omegaconf_tensorflow_faiss"] = blocked
    return env


def to_markdown(rep: dict) -> str:
    lines = ["# GPU vs CPU (benchmarks/gpu.py)", ""]
    for name, sec in rep.items():
        lines += [f"## {name}", "", "| figure | value |", "|---|---|"]
        if not isinstance(sec, dict):
            sec = {"value": sec}
        for k, v in sec.items():
            if isinstance(v, float):
                v = f"{v:.4g}"
            lines.append(f"| {k} | {str(v).replace('|', '/').splitlines()[0] if str(v) else v} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write(out: Path, rep: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(rep, indent=2, default=str))
    (out / "gpu.md").write_text(to_markdown(rep))


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="mnist.npz (X uint8 (n, 784), y); not with --finish")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", choices=("auto", "cpu"), default="auto")
    ap.add_argument("--n", type=int, default=0, help="use the first n points only (0: all)")
    ap.add_argument("--budget", type=float, default=330.0, help="seconds; sections not started after it are skipped")
    ap.add_argument("--k", type=int, default=15)
    ap.add_argument("--lgc-labels", type=int, default=100)
    ap.add_argument("--pll-labels", type=int, default=1000)
    ap.add_argument("--pll-cpu-cols", type=int, default=256)
    ap.add_argument("--eig-p", type=int, default=20)
    ap.add_argument("--million", type=int, default=0,
                    help="points of the AutoL section 'million' (InfiMNIST-style beyond 70,000; 0: skip it)")
    ap.add_argument("--million-labels", type=int, default=1000)
    ap.add_argument("--million-noise", type=float, default=0.2)
    ap.add_argument("--million-cpu-cols", type=int, default=64, help="P_LL columns the CPU solves (scaled)")
    ap.add_argument("--million-check", type=int, default=1000, help="rows whose neighbours the CPU checks")
    ap.add_argument("--only", default="", help="comma-separated sections, run in that order (default all)")
    ap.add_argument("--finish", type=Path, default=None,
                    help="an --out folder of a run with 'million': add the Adam loop (TensorFlow, here) to it")
    a = ap.parse_args(argv)
    if a.data is None and a.finish is None:
        ap.error("--data is required (or --finish)")
    return a


def finish(src: Path, out: Path) -> dict:
    """Section ``million`` completed here: AutoL's Adam loop (lgcexp's own, TensorFlow, AutoL's defaults) on
    the P_LL that the run in ``src`` saved; its seconds added to both devices' AutoL totals (its cost does
    not depend on n); the labels it drops (omega <= 0) and its label judgement's score (each label's share of
    the omega-weighted leave-one-out votes) judged against the flips. Writes gpu.json/gpu.md to ``out``."""
    from sklearn.metrics import roc_auc_score

    from lgcexp.algorithms.autol import AutoL

    rep = json.loads((src / "gpu.json").read_text())
    r = rep.setdefault("million", {})
    P = np.load(src / "million_pll.npy").astype(np.float64)
    with np.load(src / "million_split.npz") as z:
        y_obs, flipped, n_classes = z["y_observed"], z["flipped"].astype(bool), int(z["n_classes"])
    algo = AutoL()
    omega, _, _, ost = algo.learn_weights(P, y_obs, n_classes)
    dropped = omega <= 0.0
    tp = int(np.sum(dropped & flipped))
    r["adam_steps"], r["adam_s"] = int(algo.steps), float(ost["seconds"])
    r["adam_where"] = f"here, after the run: {platform.node()}, {os.cpu_count()} cores, TensorFlow on the CPU"
    r["labels_dropped"], r["labels_flipped"] = int(dropped.sum()), int(flipped.sum())
    r["drop_precision"] = tp / max(1, int(dropped.sum()))
    r["drop_recall"] = tp / max(1, int(flipped.sum()))
    r["drop_f1"] = 2 * tp / max(1, int(dropped.sum()) + int(flipped.sum()))
    if 0 < flipped.sum() < flipped.size:
        from lgcexp.issues.judgement import graph_loo_probs

        share = graph_loo_probs(P, y_obs, n_classes, weights=omega)[np.arange(y_obs.size), y_obs]
        r["auc_minus_omega"] = float(roc_auc_score(flipped, -omega))
        r["auc_minus_vote_share"] = float(roc_auc_score(flipped, -share))   # AutoL's label judgement's score
    if "autol_gpu_s_without_adam" in r:
        r["autol_gpu_s"] = r["autol_gpu_s_without_adam"] + r["adam_s"]
        r["autol_cpu_s"] = r["autol_cpu_s_without_adam"] + r["adam_s"]
        r["autol_speedup"] = r["autol_cpu_s"] / r["autol_gpu_s"]
    write(out, rep)
    say(f"finish: Adam {r['adam_s']:.1f}s, {r['labels_dropped']} labels dropped (F1 {r['drop_f1']:.3f})")
    return rep


def main(argv=None) -> int:
    a = parse(argv)
    rep = finish(a.finish, a.out) if a.finish is not None else bench(a)
    print(to_markdown(rep), flush=True)
    return 0


def run(quick: bool = False) -> dict:
    """``benchmarks/report.py``'s section "gpu": "no GPU" without a usable CuPy, else this benchmark on
    ``$LGCEXP_DATA_DIR/mnist.npz`` (its first 10,000 points with ``quick``) into results/bench/gpu/."""
    from lgcexp import devices
    from lgcexp.locations import default_dir

    if devices.gpu_module() is None:
        return {"gpu": "no GPU (CuPy not installed or no CUDA device)"}
    argv = ["--data", str(Path(default_dir("data")) / "mnist.npz"), "--out", str(OUT / "gpu")]
    return bench(parse(argv + (["--n", "10000"] if quick else [])))


def make_million(a: argparse.Namespace) -> tuple[tuple[Path, Path], float]:
    """The InfiMNIST-style set of section ``million`` (lgcexp.data.infimnist, seed 0), made in worker
    processes before CUDA or any thread pool starts in this one (they are forked)."""
    from lgcexp.data.infimnist import make

    t0 = time.perf_counter()
    out_dir = Path(os.environ.get("TMPDIR", "/tmp")) / "lgcexp-bench-infimnist"
    n_workers = workers()          # the CPUs this process may use (OMP_NUM_THREADS when set)
    files = make(a.million, 0, out_dir, a.data, quiet=True, workers=n_workers)
    s = time.perf_counter() - t0
    say(f"million: {a.million:,d} points made in {s:.1f}s ({n_workers} processes)")
    return files, s


def bench(a: argparse.Namespace) -> dict:
    budget = Budget(a.budget)
    pre: dict = {}
    if a.million > 70000 and (not a.only or "million" in a.only.split(",")):
        pre["million_files"], pre["million_data_s"] = make_million(a)
    from lgcexp import devices

    devices.configure(a.device)
    cp = devices.gpu_module()
    ctx = {"device": a.device, "cp": cp, "k": a.k, "lgc_labels": a.lgc_labels, "pll_labels": a.pll_labels,
           "pll_cpu_cols": a.pll_cpu_cols, "eig_p": a.eig_p, "data": a.data, "out": a.out, "million": a.million,
           "million_labels": a.million_labels, "million_noise": a.million_noise,
           "million_cpu_cols": a.million_cpu_cols, "million_check": a.million_check, **pre}
    ctx["modules"] = [("cpu", np)] + ([("gpu", cp)] if cp is not None else [])
    rep: dict = {}
    try:
        rep["environment"] = environment(ctx)
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
        rep["environment"] = {"error": f"{type(exc).__name__}: {exc}"}
    say(f"environment: {rep['environment']}")
    with np.load(a.data) as z:
        X, y = z["X"], z["y"]
    if a.n:
        X, y = X[:a.n], y[:a.n]
    ctx["X"] = np.ascontiguousarray(X, dtype=np.float32)
    ctx["y"] = np.asarray(y, dtype=np.int64)
    rep["environment"]["n"] = int(X.shape[0])
    write(a.out, rep)
    only = [s for s in a.only.split(",") if s]
    by_name = {sec[0]: sec for sec in SECTIONS}
    for name, fn, need in ([by_name[s] for s in only if s in by_name] if only else SECTIONS):
        r: dict = {}
        rep[name] = r
        ctx["flush"] = lambda: write(a.out, rep)
        if name == "million" and not a.million:
            r["skipped"] = "--million not given"
        elif name not in ("graph", "million") and "graph" not in ctx:
            r["skipped"] = "no graph"
        elif budget.left() < need:
            r["skipped"] = f"time budget: {budget.left():.0f}s left, needs about {need}s"
        else:
            say(f"{name}: start ({budget.left():.0f}s of budget left)")
            t0 = time.perf_counter()
            try:
                fn(ctx, r)
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                r["error"] = f"{type(exc).__name__}: {exc}"
                r["traceback"] = traceback.format_exc()
                say(f"{name}: ERROR {r['error']}")
            r["section_s"] = time.perf_counter() - t0
            if cp is not None:
                try:
                    cp.get_default_memory_pool().free_all_blocks()
                except Exception as exc:  # noqa: BLE001 - only frees cached GPU memory
                    say(f"could not free the GPU memory pool: {exc}")
        write(a.out, rep)
    rep["environment"]["load_after"] = round(os.getloadavg()[0], 2)
    rep["environment"]["total_s"] = time.perf_counter() - T0
    write(a.out, rep)
    say(f"done: {a.out / 'gpu.json'}")
    return rep
